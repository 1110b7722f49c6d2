//! The header of the out-of-band forms (versions 1 and 3): its schema, as
//! [`dump`](super::dump) writes it and as it is parsed (with the limits of
//! `limits.rs` applied while parsing), and [`parse`].

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Label names as a header holds them: one string and where each name
/// ends. Read as a JSON list of strings, checked against the limit of label
/// names (see `limits.rs`) as they come, and stored compactly (no
/// allocation per name), so that a crafted list of many short names costs
/// about what it takes in the header.
#[derive(Debug, Default)]
pub(super) struct NameList {
    pub(super) text: String,
    pub(super) ends: Vec<u32>,
}

impl NameList {
    pub(super) fn from_names(names: &[String]) -> Self {
        let mut list = NameList::default();
        for name in names {
            list.text.push_str(name);
            list.ends
                .push(u32::try_from(list.text.len()).unwrap_or(u32::MAX));
        }
        list
    }

    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|&end| end as usize));
        starts
            .zip(self.ends.iter().map(|&end| end as usize))
            .map(|(start, end)| &self.text[start..end])
    }

    pub(super) fn into_names(self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        names.try_reserve_exact(self.len())?;
        names.extend(self.iter().map(str::to_string));
        Ok(names)
    }
}

impl Serialize for NameList {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for NameList {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = NameList;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of label names")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<NameList, A::Error> {
                let mut list = NameList::default();
                let mut size = 0usize;
                while seq.next_element_seed(Append(&mut list.text))?.is_some() {
                    let start = list.ends.last().map_or(0, |&end| end as usize);
                    // counted as `limits::label_names_size` counts
                    size = size.saturating_add(list.text.len() - start + 13);
                    if size > crate::limits::MAX_LABEL_NAMES {
                        return Err(serde::de::Error::custom(format!(
                            "the label names take more than the {} bytes allowed",
                            crate::limits::MAX_LABEL_NAMES
                        )));
                    }
                    let end = u32::try_from(list.text.len())
                        .map_err(|_| serde::de::Error::custom("label names too long"))?;
                    list.ends.push(end);
                }
                Ok(list)
            }
        }
        deserializer.deserialize_seq(Visitor)
    }
}

/// Deserializes one string by appending it to a `String`.
struct Append<'a>(&'a mut String);

impl<'de> serde::de::DeserializeSeed<'de> for Append<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        struct Visitor<'a>(&'a mut String);
        impl serde::de::Visitor<'_> for Visitor<'_> {
            type Value = ();
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a label name (a string)")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<(), E> {
                self.0.push_str(name);
                Ok(())
            }
        }
        deserializer.deserialize_str(Visitor(self.0))
    }
}

/// At most `MAX_NDIM` elements, refused as they come beyond that.
fn bounded<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Visitor<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visitor<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "a list of at most {} elements", crate::limits::MAX_NDIM)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut items = Vec::new();
            while let Some(item) = seq.next_element()? {
                if items.len() == crate::limits::MAX_NDIM {
                    return Err(serde::de::Error::custom(format!(
                        "more than {} dimensions",
                        crate::limits::MAX_NDIM
                    )));
                }
                items.push(item);
            }
            Ok(items)
        }
    }
    deserializer.deserialize_seq(Visitor(std::marker::PhantomData))
}

/// Labels in a header: names and number of entries (the values are a buffer).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LabelsHeader<'a> {
    pub(super) names: NameList,
    pub(super) count: usize,
    /// npy descr of the values with explicit byte order: `<i4` or `>i4`
    /// (borrowed from the header as read: no allocation per labels)
    #[serde(borrow)]
    pub(super) dtype: Cow<'a, str>,
}

/// Labels where a block has them: described, with their buffer next in the
/// wire order, or (version 3) the same as labels described before, named
/// by the position of their buffer in the wire order (a JSON integer).
#[derive(Debug)]
pub(super) enum LabelsField<'a> {
    Full(LabelsHeader<'a>),
    Same(usize),
}

impl Serialize for LabelsField<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            LabelsField::Full(header) => header.serialize(serializer),
            LabelsField::Same(index) => serializer.serialize_u64(*index as u64),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for LabelsField<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = LabelsField<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("labels (an object) or the buffer index of earlier labels")
            }
            fn visit_u64<E: serde::de::Error>(self, index: u64) -> Result<Self::Value, E> {
                usize::try_from(index)
                    .map(LabelsField::Same)
                    .map_err(|_| E::custom(format!("no buffer has the index {index}")))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                LabelsHeader::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(LabelsField::Full)
            }
        }
        deserializer.deserialize_any(Visitor(std::marker::PhantomData))
    }
}

/// A block in a header; gradient blocks have no properties (the parent's).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BlockHeader<'a> {
    /// npy descr with explicit byte order, e.g. `<f8`
    #[serde(borrow)]
    pub(super) dtype: Cow<'a, str>,
    #[serde(deserialize_with = "bounded")]
    pub(super) shape: Vec<usize>,
    #[serde(borrow)]
    pub(super) samples: LabelsField<'a>,
    #[serde(borrow, deserialize_with = "bounded")]
    pub(super) components: Vec<LabelsField<'a>>,
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub(super) properties: Option<LabelsField<'a>>,
    #[serde(default, borrow, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) gradients: BTreeMap<String, BlockHeader<'a>>,
}

/// The header: what the buffers hold, in the order they come.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(super) enum Header<'a> {
    Tensor {
        keys: LabelsHeader<'a>,
        blocks: Vec<BlockHeader<'a>>,
        /// the map's own when dumping, owned when loading
        #[serde(skip_serializing_if = "info_is_empty")]
        info: Cow<'a, BTreeMap<String, String>>,
    },
    Block {
        block: BlockHeader<'a>,
    },
    Labels {
        labels: LabelsHeader<'a>,
    },
}

// serde's `skip_serializing_if` passes a reference to the field itself
#[allow(clippy::ptr_arg)]
fn info_is_empty(info: &Cow<'_, BTreeMap<String, String>>) -> bool {
    info.is_empty()
}

/// A header as read: the same JSON as [`Header`] writes, parsed as one
/// flat struct (serde parses an internally tagged enum by first copying the
/// whole input into a generic tree, which costs many times its size).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Incoming<'a> {
    kind: String,
    #[serde(borrow)]
    keys: Option<LabelsHeader<'a>>,
    #[serde(borrow)]
    blocks: Option<Vec<BlockHeader<'a>>>,
    /// borrowed where it has no escapes: copied with fallible allocations
    #[serde(default, borrow)]
    info: BTreeMap<crate::limits::JsonStr<'a>, crate::limits::JsonStr<'a>>,
    #[serde(borrow)]
    block: Option<BlockHeader<'a>>,
    #[serde(borrow)]
    labels: Option<LabelsHeader<'a>>,
}

impl<'a> Incoming<'a> {
    fn into_header(self) -> Result<Header<'a>> {
        let unexpected = |kind: &str| {
            Error::format(format!(
                "invalid pickle header: a '{kind}' header must have exactly the fields of a {kind}"
            ))
        };
        match (
            self.kind.as_str(),
            self.keys,
            self.blocks,
            self.block,
            self.labels,
        ) {
            ("tensor", Some(keys), Some(blocks), None, None) => Ok(Header::Tensor {
                keys,
                blocks,
                info: Cow::Owned(crate::limits::owned_info(self.info)?),
            }),
            ("block", None, None, Some(block), None) if self.info.is_empty() => {
                Ok(Header::Block { block })
            }
            ("labels", None, None, None, Some(labels)) if self.info.is_empty() => {
                Ok(Header::Labels { labels })
            }
            ("tensor" | "block" | "labels", ..) => Err(unexpected(&self.kind)),
            (other, ..) => Err(Error::format(format!(
                "invalid pickle header: unknown kind '{other}'"
            ))),
        }
    }
}

/// Parse `header`, a copy in blockmap's memory (the aliasing rule,
/// buffer/mod.rs: a header others may write is never parsed in place).
/// Its structure is checked first, so that the parser's recursion stays
/// bounded (see `limits.rs`); names borrowed from it stay valid UTF-8.
pub(super) fn parse(header: &[u8]) -> Result<Header<'_>> {
    crate::limits::check_json_nesting(header)?;
    serde_json::from_slice::<Incoming>(header)
        .map_err(|e| Error::format(format!("invalid pickle header: {e}")))?
        .into_header()
}
