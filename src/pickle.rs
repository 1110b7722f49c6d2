//! The pickle wire format, every version, and the dispatch on the version
//! (see `docs/pickle.md`); the binding only turns Python objects into
//! [`Buffer`]s and back ([`Arguments`]).
//!
//! - protocol >= 5, out of band (version 3; version 1 is read too): a
//!   small metadata header and one buffer per array, in a fixed order,
//!   labels equal to earlier ones referring to them. [`dump`] lists the
//!   buffers a map, block or labels already hold (nothing is copied);
//!   [`load`] rebuilds the object from a header and buffers given by a
//!   transport, viewing each buffer when it is aligned for its element
//!   type and copying it otherwise, and validating everything;
//! - protocol < 5, in band: the `.mts` archive in one piece (version 0,
//!   and always for labels, a bare NPY file) or in several (version 2),
//!   each array whole in one piece ([`write_in_band`]).
//!
//! [`Pickled::read`] reads the arguments of a reconstructor call of any
//! version, [`Pickled::load`] rebuilds the object they describe.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::hash::BuildHasher;

use serde::{Deserialize, Serialize};

use crate::array::{byte_len, Array, Layout};
use crate::block::TensorBlock;
use crate::buffer::{Allocate, Buffer, PiecedWriter};
use crate::data::{Data, DataRef, Kind};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::io;
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// The version of the wire format [`dump`] writes. [`load`] reads it and
/// version 1, the same without references to earlier labels.
pub const VERSION: u32 = 3;

/// The version of the in-band `.mts` form in one piece (protocol < 5).
pub const ARCHIVE_VERSION: u32 = 0;

/// The version of the in-band `.mts` form in several pieces.
pub const PIECES_VERSION: u32 = 2;

/// The most bytes the in-band form of `data` takes (an upper bound).
pub fn in_band_bound(data: DataRef<'_>) -> usize {
    io::save_size_bound(data)
}

/// The size of the pieces the in-band form of `data` is written in, for
/// pieces of about `target` bytes: labels (a bare NPY file, small) in one
/// piece whatever the target.
pub fn in_band_piece_size(data: DataRef<'_>, target: usize) -> usize {
    match data {
        DataRef::Labels(_) => in_band_bound(data),
        _ => target,
    }
}

/// Write the in-band form of `data` (protocol < 5) into `writer`, made
/// with [`in_band_bound`] and [`in_band_piece_size`]: the `.mts` archive
/// (a bare NPY file for labels), each array whole in one piece.
pub fn write_in_band<'a, A: Allocate<'a>>(
    writer: &mut PiecedWriter<'a, A>,
    data: DataRef<'_>,
) -> Result<()> {
    let next_data = match data {
        // a bare NPY file has no array data to tell of
        DataRef::Labels(_) => None,
        _ => Some(writer.next_data()),
    };
    io::save_archive(writer, data, next_data).map(drop)
}

/// The version of an in-band pickle written in `pieces` pieces.
pub fn in_band_version(pieces: usize) -> u32 {
    if pieces == 1 {
        ARCHIVE_VERSION
    } else {
        PIECES_VERSION
    }
}

/// The arguments of a reconstructor call after the version, as the binding
/// reads them from the objects the unpickler gives.
pub trait Arguments {
    /// The binding's error, which core errors become.
    type Error: From<Error>;

    /// How many there are.
    fn count(&self) -> usize;

    /// Argument `index` as a string, `None` when it is not one.
    fn text(&self, index: usize) -> Result<Option<String>, Self::Error>;

    /// The bytes of argument `index`. `in_band`: a piece of an archive the
    /// pickler wrote into the stream, which the unpickler made into a new
    /// object (that the binding may view writable, as numpy does).
    fn buffer(&self, index: usize, in_band: bool) -> Result<Buffer, Self::Error>;
}

/// What the arguments of a reconstructor call describe.
#[derive(Debug)]
pub enum Pickled {
    /// versions 1 and 3: a header and one buffer per array
    OutOfBand {
        /// 1 or 3
        version: u32,
        /// the metadata header (JSON)
        header: Buffer,
        /// the arrays' buffers, in the header's order
        buffers: Vec<Buffer>,
    },
    /// version 0: the `.mts` archive (or NPY file) in one buffer
    Archive {
        /// what the archive holds
        kind: Kind,
        /// the archive
        archive: Buffer,
    },
    /// version 2: the `.mts` archive in pieces
    Pieces {
        /// what the archive holds
        kind: Kind,
        /// the pieces, in order
        pieces: Vec<Buffer>,
    },
}

impl Pickled {
    /// Read the arguments of a reconstructor call of format `version`
    /// (refusing versions this blockmap does not know).
    pub fn read<A: Arguments>(version: i64, args: &A) -> Result<Self, A::Error> {
        let count = args.count();
        let buffers = |first: usize, in_band: bool| {
            (first..count)
                .map(|i| args.buffer(i, in_band))
                .collect::<Result<Vec<_>, _>>()
        };
        match version {
            1 | 3 => {
                if count == 0 {
                    return Err(Error::format("the pickle has no header").into());
                }
                Ok(Pickled::OutOfBand {
                    version: if version == 1 { 1 } else { VERSION },
                    header: args.buffer(0, false)?,
                    buffers: buffers(1, false)?,
                })
            }
            0 => {
                if count != 2 {
                    return Err(Error::format(format!(
                        "a version 0 pickle has a kind and an archive, got {count} arguments"
                    ))
                    .into());
                }
                Ok(Pickled::Archive {
                    kind: Self::kind(args, ARCHIVE_VERSION)?,
                    archive: args.buffer(1, true)?,
                })
            }
            2 => {
                if count == 0 {
                    return Err(Error::format(
                        "a version 2 pickle has a kind and pieces, got no arguments",
                    )
                    .into());
                }
                Ok(Pickled::Pieces {
                    kind: Self::kind(args, PIECES_VERSION)?,
                    pieces: buffers(1, true)?,
                })
            }
            other => Err(Error::format(format!(
                "unknown pickle format version {other}: this blockmap reads versions 0 to \
                 {VERSION}; the pickle may come from a newer blockmap"
            ))
            .into()),
        }
    }

    /// The kind of object (`"tensor"`, `"block"`, `"labels"`) the first
    /// argument of an in-band pickle of format `version` names.
    fn kind<A: Arguments>(args: &A, version: u32) -> Result<Kind, A::Error> {
        let name = args.text(0)?.ok_or_else(|| {
            Error::format(format!(
                "the kind of a version {version} pickle must be a string"
            ))
        })?;
        Ok(Kind::from_name(&name)?)
    }

    /// Rebuild the object, validating everything.
    pub fn load(self) -> Result<Data> {
        match self {
            Pickled::OutOfBand {
                version,
                header,
                buffers,
            } => {
                // a header others may write is read from a copy (the
                // aliasing rule, buffer/mod.rs); an immutable `bytes`
                // header, the usual one, in place
                let raw = header.raw();
                let copy;
                let bytes = if let Some(bytes) = raw.private() {
                    bytes
                } else {
                    copy = raw.to_vec()?;
                    &copy
                };
                load_version(version, bytes, buffers)
            }
            Pickled::Archive { kind, archive } => io::load_buffer_checked(archive, kind, false),
            Pickled::Pieces { kind, pieces } => io::load_pieces(pieces, kind, false),
        }
    }
}

/// Label names as a header holds them: one string and where each name
/// ends. Read as a JSON list of strings, checked against the limit of label
/// names (see `limits.rs`) as they come, and stored compactly (no
/// allocation per name), so that a crafted list of many short names costs
/// about what it takes in the header.
#[derive(Debug, Default)]
struct NameList {
    text: String,
    ends: Vec<u32>,
}

impl NameList {
    fn from_names(names: &[String]) -> Self {
        let mut list = NameList::default();
        for name in names {
            list.text.push_str(name);
            list.ends
                .push(u32::try_from(list.text.len()).unwrap_or(u32::MAX));
        }
        list
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|&end| end as usize));
        starts
            .zip(self.ends.iter().map(|&end| end as usize))
            .map(|(start, end)| &self.text[start..end])
    }

    fn into_names(self) -> Result<Vec<String>> {
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
struct LabelsHeader<'a> {
    names: NameList,
    count: usize,
    /// npy descr of the values with explicit byte order: `<i4` or `>i4`
    /// (borrowed from the header as read: no allocation per labels)
    #[serde(borrow)]
    dtype: Cow<'a, str>,
}

/// Labels where a block has them: described, with their buffer next in the
/// wire order, or (version 3) the same as labels described before, named
/// by the position of their buffer in the wire order (a JSON integer).
#[derive(Debug)]
enum LabelsEntry<'a> {
    Full(LabelsHeader<'a>),
    Same(usize),
}

impl Serialize for LabelsEntry<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            LabelsEntry::Full(header) => header.serialize(serializer),
            LabelsEntry::Same(index) => serializer.serialize_u64(*index as u64),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for LabelsEntry<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = LabelsEntry<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("labels (an object) or the buffer index of earlier labels")
            }
            fn visit_u64<E: serde::de::Error>(self, index: u64) -> Result<Self::Value, E> {
                usize::try_from(index)
                    .map(LabelsEntry::Same)
                    .map_err(|_| E::custom(format!("no buffer has the index {index}")))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                LabelsHeader::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(LabelsEntry::Full)
            }
        }
        deserializer.deserialize_any(Visitor(std::marker::PhantomData))
    }
}

/// A block in a header; gradient blocks have no properties (the parent's).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockHeader<'a> {
    /// npy descr with explicit byte order, e.g. `<f8`
    #[serde(borrow)]
    dtype: Cow<'a, str>,
    #[serde(deserialize_with = "bounded")]
    shape: Vec<usize>,
    #[serde(borrow)]
    samples: LabelsEntry<'a>,
    #[serde(borrow, deserialize_with = "bounded")]
    components: Vec<LabelsEntry<'a>>,
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    properties: Option<LabelsEntry<'a>>,
    #[serde(default, borrow, skip_serializing_if = "BTreeMap::is_empty")]
    gradients: BTreeMap<String, BlockHeader<'a>>,
}

/// The header: what the buffers hold, in the order they come.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Header<'a> {
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

/// What a buffer of the wire order holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// the values of a block or a gradient: received data may view it
    Values,
    /// label values: received data copies them (labels own what they
    /// validated)
    Labels,
}

/// The buffers of the wire order, with what each holds.
pub type Buffers = Vec<(Buffer, Role)>;

/// Labels up to this size (components and properties, mostly) that are
/// equal to labels met before them are sent once: later ones refer to the
/// first (see [`LabelsEntry::Same`]); received, they are built once and
/// shared. A map of 10,000 blocks whose blocks have equal components and
/// properties sends 2 buffers per block, not 4.
const SHARED_LABELS_MAX: usize = 4 << 10;

/// Lists the buffers of the wire order and describes what they hold.
struct Dumper<'d> {
    buffers: Buffers,
    /// refer to equal small labels sent before (version 3) or not (1)
    refer: bool,
    hasher: hashbrown::DefaultHashBuilder,
    /// small labels sent, with the index of their buffer
    sent: hashbrown::HashTable<(usize, &'d Labels)>,
}

impl<'d> Dumper<'d> {
    fn new(refer: bool) -> Self {
        Dumper {
            buffers: Vec::new(),
            refer,
            hasher: hashbrown::DefaultHashBuilder::default(),
            sent: hashbrown::HashTable::new(),
        }
    }

    fn hash(&self, labels: &Labels) -> u64 {
        self.hasher.hash_one((labels.names(), labels.value_bytes()))
    }

    /// Labels' header with their buffer, or a reference to equal labels
    /// sent before.
    fn entry(&mut self, labels: &'d Labels) -> LabelsEntry<'static> {
        if self.refer && labels.values().buffer().len() <= SHARED_LABELS_MAX {
            let same = |&(_, sent): &(usize, &Labels)| {
                sent.ptr_eq(labels)
                    || (sent.names() == labels.names()
                        && sent.value_bytes() == labels.value_bytes())
            };
            if let Some(&(index, _)) = self.sent.find(self.hash(labels), same) {
                return LabelsEntry::Same(index);
            }
        }
        LabelsEntry::Full(self.first(labels))
    }

    /// Labels' header, their buffer listed; small ones are remembered for
    /// later equal labels to refer to.
    fn first(&mut self, labels: &'d Labels) -> LabelsHeader<'static> {
        let index = self.buffers.len();
        let header = self.full(labels);
        if self.refer && labels.values().buffer().len() <= SHARED_LABELS_MAX {
            let hash = self.hash(labels);
            let hasher = &self.hasher;
            self.sent
                .insert_unique(hash, (index, labels), |&(_, sent)| {
                    hasher.hash_one((sent.names(), sent.value_bytes()))
                });
        }
        header
    }

    /// Labels' header, their buffer listed.
    fn full(&mut self, labels: &Labels) -> LabelsHeader<'static> {
        // labels never change: their memory is handed out read-only
        self.buffers.push((
            labels.values().buffer().clone().into_read_only(),
            Role::Labels,
        ));
        LabelsHeader {
            names: NameList::from_names(labels.names()),
            count: labels.count(),
            dtype: Cow::Owned(DType::I4.native_descr()),
        }
    }

    fn block(&mut self, block: &'d TensorBlock, gradient: bool) -> BlockHeader<'static> {
        self.buffers
            .push((block.values().buffer().clone(), Role::Values));
        let samples = self.entry(block.samples());
        let components = block.components().iter().map(|c| self.entry(c)).collect();
        let properties = (!gradient).then(|| self.entry(block.properties()));
        let gradients = block
            .gradients()
            .iter()
            .map(|(p, g)| (p.clone(), self.block(g, true)))
            .collect();
        BlockHeader {
            dtype: Cow::Owned(block.dtype().native_descr()),
            shape: block.values().shape().to_vec(),
            samples,
            components,
            properties,
            gradients,
        }
    }
}

/// The header (serialized) and the buffers of `data`, in wire order: for a
/// map the keys, then each block; for a block its values, samples,
/// components, properties (not for gradients), then its gradients sorted
/// by parameter, recursively. The buffers share the data's memory; those of
/// labels are read-only.
pub fn dump(data: DataRef<'_>) -> Result<(Vec<u8>, Vec<Buffer>)> {
    let (header, buffers) = dump_with_roles(data)?;
    Ok((
        header,
        buffers.into_iter().map(|(buffer, _)| buffer).collect(),
    ))
}

/// [`dump`], with what each buffer holds.
pub fn dump_with_roles(data: DataRef<'_>) -> Result<(Vec<u8>, Buffers)> {
    dump_version(data, true)
}

/// The header and buffers of version 3 (`refer`: small labels equal to
/// earlier ones refer to them) or 1 (every labels with its buffer).
fn dump_version(data: DataRef<'_>, refer: bool) -> Result<(Vec<u8>, Buffers)> {
    let mut dumper = Dumper::new(refer);
    let header = match data {
        DataRef::Tensor(map) => Header::Tensor {
            keys: dumper.first(map.keys()),
            blocks: map
                .blocks()
                .iter()
                .map(|b| dumper.block(b, false))
                .collect(),
            info: Cow::Borrowed(map.info()),
        },
        DataRef::Block(block) => Header::Block {
            block: dumper.block(block, false),
        },
        DataRef::Labels(labels) => Header::Labels {
            labels: dumper.full(labels),
        },
    };
    let buffers = dumper.buffers;
    // a mapped file truncated by another program: refuse rather than send
    // the zeros that replaced what was lost
    for (buffer, _) in &buffers {
        buffer.check_intact()?;
    }
    // the header's length first (written nowhere), then the header, into
    // memory reserved with a fallible allocation
    let encoding =
        |e: serde_json::Error| Error::internal(format!("cannot encode the pickle header: {e}"));
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, &header).map_err(encoding)?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(counter.0)?;
    serde_json::to_writer(&mut bytes, &header).map_err(encoding)?;
    Ok((bytes, buffers))
}

/// Counts the bytes written to it.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0 += data.len();
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Label buffers up to this size are copied into one allocation for all
/// of them (see [`gather_labels`]); larger ones get their own.
const GATHERED_LABELS_MAX: usize = 64 << 10;

/// How the labels in a received buffer are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// not gathered: the values are copied when the labels are made (or
    /// the buffer holds an array, not labels)
    Received,
    /// the buffer is a copy in the gathered allocation: labels' own memory
    Own,
    /// as [`Slot::Own`], and equal labels later in the wire order share
    /// the labels made from it
    Shared,
    /// the same names and values as the labels of this earlier buffer
    Same(usize),
}

/// Where each labels header's buffer comes in the wire order, following
/// [`Received`]'s order: keys, then each block's values, samples,
/// components, properties (not for gradients) and its gradients by
/// parameter, recursively (no deeper than readers accept: deeper headers
/// are refused by [`Received::block`]); references to earlier labels take
/// no buffer: the buffers they name go to `referenced`.
fn labels_in_order<'h, 'a>(
    header: &'h Header<'a>,
    referenced: &mut hashbrown::HashSet<usize>,
) -> Vec<(usize, &'h LabelsHeader<'a>)> {
    fn block<'h, 'a>(
        header: &'h BlockHeader<'a>,
        next: &mut usize,
        out: &mut Vec<(usize, &'h LabelsHeader<'a>)>,
        referenced: &mut hashbrown::HashSet<usize>,
        depth: usize,
    ) {
        if depth > crate::limits::MAX_GRADIENT_DEPTH {
            return;
        }
        *next += 1; // the values
        let labels = std::iter::once(&header.samples)
            .chain(&header.components)
            .chain(&header.properties);
        for labels in labels {
            match labels {
                LabelsEntry::Full(labels) => {
                    out.push((*next, labels));
                    *next += 1;
                }
                LabelsEntry::Same(index) => {
                    referenced.insert(*index);
                }
            }
        }
        for gradient in header.gradients.values() {
            block(gradient, next, out, referenced, depth + 1);
        }
    }
    let mut out = Vec::new();
    let mut next = 0;
    match header {
        Header::Tensor { keys, blocks, .. } => {
            out.push((0, keys));
            next = 1;
            for header in blocks {
                block(header, &mut next, &mut out, referenced, 0);
            }
        }
        Header::Block { block: header } => block(header, &mut next, &mut out, referenced, 0),
        Header::Labels { labels } => out.push((0, labels)),
    }
    out
}

/// Copy the buffers of small labels into one allocation (its pages mapped
/// at once, see [`Buffer::filled`]), replacing them by views of it, so
/// that the labels own their values without an allocation each; small
/// labels equal to earlier ones (same names, same native int32 values) are
/// marked [`Slot::Same`] and share the first one's copy. Received buffers
/// may be the sender's memory, still written to: each is read once, by
/// its copy, and compared and validated on the copy only.
///
/// One allocation instead of one per labels is most of a small load's
/// time (figures in docs/benchmarks.md); a map of 10,000 blocks builds its
/// 10,000 equal components and properties once.
/// The allocation lives as long as any of the labels made from it.
fn gather_labels(
    header: &Header<'_>,
    buffers: &mut [Buffer],
    referenced: &mut hashbrown::HashSet<usize>,
) -> Result<Vec<Slot>> {
    let mut slots = Vec::new();
    slots.try_reserve_exact(buffers.len())?;
    slots.resize(buffers.len(), Slot::Received);
    let order = labels_in_order(header, referenced);
    let native = DType::I4.native_descr();
    // the labels to copy, with whether they may be shared, and an upper
    // bound of the memory their copies take
    let mut candidates = Vec::new();
    let mut total = 0_usize;
    for &(index, labels) in &order {
        // a crafted header may announce more buffers than given: the
        // labels that have none are refused when they are made
        let Some(buffer) = buffers.get(index) else {
            break;
        };
        let len = buffer.len();
        if len > GATHERED_LABELS_MAX {
            continue;
        }
        let shareable = len <= SHARED_LABELS_MAX && labels.dtype == native;
        total = total
            .checked_add(len.next_multiple_of(crate::buffer::ALIGNMENT))
            .ok_or_else(|| Error::out_of_memory(usize::MAX))?;
        candidates.try_reserve(1)?;
        candidates.push((index, labels, shareable));
    }
    if candidates.is_empty() {
        return Ok(slots);
    }
    // where each copy kept lies in the allocation
    let mut placed: Vec<(usize, usize)> = Vec::new();
    placed.try_reserve_exact(candidates.len())?;
    let hasher = hashbrown::DefaultHashBuilder::default();
    let arena = Buffer::filled(total, |memory| {
        let hash = |labels: &LabelsHeader, bytes: &[u8]| {
            hasher.hash_one((&labels.names.text, &labels.names.ends, bytes))
        };
        // shareable copies kept: (index, labels, offset, len)
        let mut seen = hashbrown::HashTable::<(usize, &LabelsHeader, usize, usize)>::new();
        let mut offset = 0;
        for &(index, labels, shareable) in &candidates {
            let len = buffers[index].len();
            // the one read of the received bytes
            buffers[index]
                .raw()
                .copy_to(&mut memory[offset..offset + len])?;
            if shareable {
                let copy = &memory[offset..offset + len];
                let h = hash(labels, copy);
                let same = |&(_, other, at, n): &(usize, &LabelsHeader, usize, usize)| {
                    other.names.text == labels.names.text
                        && other.names.ends == labels.names.ends
                        && memory[at..at + n] == *copy
                };
                if let Some(&(first, ..)) = seen.find(h, same) {
                    slots[first] = Slot::Shared;
                    slots[index] = Slot::Same(first);
                    // the copy is not kept: the next one overwrites it
                    continue;
                }
                seen.insert_unique(h, (index, labels, offset, len), |&(_, other, at, n)| {
                    hash(other, &memory[at..at + n])
                });
            }
            placed.push((index, offset));
            offset += len.next_multiple_of(crate::buffer::ALIGNMENT);
        }
        Ok(())
    })?;
    for (index, offset) in placed {
        let len = buffers[index].len();
        buffers[index] = arena.slice(offset, len)?;
        if slots[index] == Slot::Received {
            slots[index] = Slot::Own;
        }
    }
    Ok(slots)
}

/// What a buffer or header holds, for error messages: formatted only when
/// an error is (a map of 10,000 blocks would otherwise format 50,000
/// strings on every load).
#[derive(Clone, Copy, Debug)]
enum Where<'a> {
    Named(&'static str),
    Block(usize),
    Gradient(&'a Where<'a>, &'a str),
    Values(&'a Where<'a>),
    Samples(&'a Where<'a>),
    Component(&'a Where<'a>, usize),
    Properties(&'a Where<'a>),
}

impl std::fmt::Display for Where<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Where::Named(name) => f.write_str(name),
            Where::Block(i) => write!(f, "block {i}"),
            Where::Gradient(block, parameter) => write!(f, "{block} gradient '{parameter}'"),
            Where::Values(block) => write!(f, "{block} values"),
            Where::Samples(block) => write!(f, "{block} samples"),
            Where::Component(block, k) => write!(f, "{block} component {k}"),
            Where::Properties(block) => write!(f, "{block} properties"),
        }
    }
}

/// Hands out the buffers in order, checking their count.
struct Received<I: Iterator<Item = Buffer>> {
    buffers: I,
    used: usize,
    /// how the labels of each buffer are made (see [`gather_labels`])
    slots: Vec<Slot>,
    /// the labels made from [`Slot::Shared`] buffers and from those later
    /// labels refer to, by buffer index
    shared: hashbrown::HashMap<usize, Labels>,
    /// the buffers later labels refer to (version 3)
    referenced: hashbrown::HashSet<usize>,
    /// the header's format version
    version: u32,
}

impl<I: Iterator<Item = Buffer>> Received<I> {
    fn next(&mut self, what: Where<'_>) -> Result<Buffer> {
        self.used += 1;
        self.buffers.next().ok_or_else(|| {
            Error::format(format!(
                "the pickle has too few buffers: none left for {what} (buffer {})",
                self.used
            ))
        })
    }

    fn array(&mut self, dtype: &str, shape: Vec<usize>, what: Where<'_>) -> Result<Array> {
        let (dtype, order) =
            DType::parse_descr(dtype).map_err(|e| Error::format(format!("{what}: {e}")))?;
        let buffer = self.next(what)?;
        let expected =
            byte_len(dtype, &shape).map_err(|e| Error::format(format!("{what}: {e}")))?;
        if buffer.len() != expected {
            return Err(Error::format(format!(
                "{what}: the buffer has {} bytes, {dtype} of shape {shape:?} needs {expected}",
                buffer.len()
            )));
        }
        Array::view_or_convert(dtype, shape, Layout::c_order(order), buffer)
    }

    /// The labels of an entry: made from the next buffer, or those of the
    /// earlier buffer it refers to.
    fn entry(&mut self, entry: LabelsEntry<'_>, what: Where<'_>) -> Result<Labels> {
        match entry {
            LabelsEntry::Full(header) => self.labels(header, what),
            LabelsEntry::Same(_) if self.version < 3 => Err(Error::format(format!(
                "{what}: a version {} pickle describes every labels (references to earlier \
                 labels came with version 3)",
                self.version
            ))),
            LabelsEntry::Same(index) => self.shared.get(&index).cloned().ok_or_else(|| {
                Error::format(format!(
                    "{what} refer to buffer {index}, which holds no labels described before"
                ))
            }),
        }
    }

    fn labels(&mut self, header: LabelsHeader<'_>, what: Where<'_>) -> Result<Labels> {
        let shape = vec![header.count, header.names.len()];
        if !header.dtype.ends_with("i4") {
            return Err(Error::format(format!(
                "{what}: labels must be int32, got '{}'",
                header.dtype
            )));
        }
        let index = self.used;
        let values = self.array(&header.dtype, shape, what)?;
        let slot = self.slots.get(index).copied().unwrap_or(Slot::Received);
        if let Slot::Same(first) = slot {
            // the same names and bytes as the labels of `first`, already
            // made and checked: the header's shape was just checked
            // against the same bytes
            if let Some(labels) = self.shared.get(&first).cloned() {
                if self.referenced.contains(&index) {
                    self.shared.try_reserve(1)?;
                    self.shared.insert(index, labels.clone());
                }
                return Ok(labels);
            }
        }
        let names = header.names.into_names()?;
        let labels = match slot {
            // a view of the gathered copy, or a conversion: own memory
            Slot::Own | Slot::Shared => Labels::from_own_array(names, values, false),
            Slot::Received | Slot::Same(_) => Labels::from_array(names, values, false),
        }
        .map_err(|e| e.context(what))?;
        if slot == Slot::Shared || self.referenced.contains(&index) {
            self.shared.try_reserve(1)?;
            self.shared.insert(index, labels.clone());
        }
        Ok(labels)
    }

    fn block(
        &mut self,
        header: BlockHeader<'_>,
        parent: Option<&TensorBlock>,
        what: Where<'_>,
        depth: usize,
    ) -> Result<TensorBlock> {
        if depth > crate::limits::MAX_GRADIENT_DEPTH {
            return Err(Error::format(format!(
                "{what}: gradients nest more than {} levels deep",
                crate::limits::MAX_GRADIENT_DEPTH
            )));
        }
        let values = self.array(&header.dtype, header.shape, Where::Values(&what))?;
        let samples = self.entry(header.samples, Where::Samples(&what))?;
        let mut components = Vec::with_capacity(header.components.len());
        for (k, component) in header.components.into_iter().enumerate() {
            components.push(self.entry(component, Where::Component(&what, k))?);
        }
        let properties = match (parent, header.properties) {
            (None, Some(properties)) => self.entry(properties, Where::Properties(&what))?,
            (Some(parent), None) => parent.properties().clone(),
            (None, None) => return Err(Error::format(format!("{what} has no properties"))),
            (Some(_), Some(_)) => {
                return Err(Error::format(format!(
                    "{what}: a gradient has no properties of its own"
                )))
            }
        };
        let mut block = TensorBlock::new(values, samples, components, properties)
            .map_err(|e| e.context(what))?;
        for (parameter, gradient) in header.gradients {
            let gradient = self.block(
                gradient,
                Some(&block),
                Where::Gradient(&what, &parameter),
                depth + 1,
            )?;
            block.add_gradient(&parameter, gradient)?;
        }
        Ok(block)
    }
}

/// Rebuild what [`dump`] described from its header and buffers (any
/// buffers holding the same bytes). Each array views its buffer when the
/// buffer is aligned for the element type, and is copied otherwise.
pub fn load(header: &[u8], buffers: Vec<Buffer>) -> Result<Data> {
    load_version(VERSION, header, buffers)
}

/// [`load`] for a header of format `version`: 1 or 3.
pub fn load_version(version: u32, header: &[u8], buffers: Vec<Buffer>) -> Result<Data> {
    if version != 1 && version != VERSION {
        return Err(Error::format(format!(
            "the out-of-band pickle format has versions 1 and {VERSION}, not {version}"
        )));
    }
    // the header may be the caller's memory, which another thread or
    // process can rewrite while it is parsed: it is copied once, and
    // checked and parsed from the copy (names borrowed from it stay valid
    // UTF-8)
    let mut copy = Vec::new();
    copy.try_reserve_exact(header.len())?;
    copy.extend_from_slice(header);
    let header = &copy[..];
    // the header's structure is checked before it is parsed: the parser's
    // recursion stays bounded (see `limits.rs`)
    crate::limits::check_json_nesting(header)?;
    let header = serde_json::from_slice::<Incoming>(header)
        .map_err(|e| Error::format(format!("invalid pickle header: {e}")))?
        .into_header()?;
    let mut buffers = buffers;
    let mut referenced = hashbrown::HashSet::new();
    let slots = gather_labels(&header, &mut buffers, &mut referenced)?;
    let count = buffers.len();
    let mut buffers = Received {
        buffers: buffers.into_iter(),
        used: 0,
        slots,
        shared: hashbrown::HashMap::new(),
        referenced,
        version,
    };
    let data = match header {
        Header::Tensor { keys, blocks, info } => {
            let keys = buffers.labels(keys, Where::Named("keys"))?;
            let mut rebuilt = Vec::with_capacity(blocks.len().min(keys.count()));
            for (i, block) in blocks.into_iter().enumerate() {
                rebuilt.push(buffers.block(block, None, Where::Block(i), 0)?);
            }
            let mut map = TensorMap::new(keys, rebuilt)?;
            map.replace_info(info.into_owned())?;
            Data::Tensor(map)
        }
        Header::Block { block } => {
            Data::Block(buffers.block(block, None, Where::Named("block"), 0)?)
        }
        Header::Labels { labels } => Data::Labels(buffers.labels(labels, Where::Named("labels"))?),
    };
    if buffers.used != count {
        return Err(Error::format(format!(
            "the pickle has {count} buffers, its header describes {}",
            buffers.used
        )));
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::PieceMemory;
    use crate::fixtures::small_map as map;

    /// A reconstructor argument as a transport gives it.
    enum Arg {
        Text(&'static str),
        Bytes(Buffer),
    }

    impl Arguments for Vec<Arg> {
        type Error = Error;

        fn count(&self) -> usize {
            self.len()
        }

        fn text(&self, index: usize) -> Result<Option<String>> {
            Ok(match &self[index] {
                Arg::Text(text) => Some((*text).to_string()),
                Arg::Bytes(_) => None,
            })
        }

        fn buffer(&self, index: usize, _: bool) -> Result<Buffer> {
            match &self[index] {
                Arg::Bytes(buffer) => Ok(buffer.clone()),
                Arg::Text(_) => Err(Error::UnsupportedType("not bytes".into())),
            }
        }
    }

    /// Pieces from leaked boxes (the test's memory, never freed),
    /// remembered by address to be read back.
    struct Leaked(Vec<(usize, usize)>);

    impl Allocate<'static> for &mut Leaked {
        fn allocate(&mut self, capacity: usize) -> std::io::Result<PieceMemory<'static>> {
            let memory =
                Box::leak(vec![std::mem::MaybeUninit::new(0_u8); capacity].into_boxed_slice());
            self.0.push((memory.as_ptr() as usize, capacity));
            Ok(memory)
        }
    }

    /// The in-band form of `data` in pieces of about `target` bytes, as
    /// the arguments of its reconstructor call: (version, arguments).
    fn in_band(data: DataRef<'_>, target: usize) -> (i64, Vec<Arg>) {
        let mut leaked = Leaked(Vec::new());
        let size = in_band_piece_size(data, target);
        let mut writer = PiecedWriter::new(&mut leaked, size, in_band_bound(data));
        write_in_band(&mut writer, data).unwrap();
        let lengths = writer.lengths();
        drop(writer);
        let mut args = vec![Arg::Text(data.kind().name())];
        for (length, &(address, _)) in lengths.iter().zip(&leaked.0) {
            // SAFETY: the piece was leaked (it lives forever), its first
            // `length` bytes were written, and the writer is gone.
            let bytes = unsafe { std::slice::from_raw_parts(address as *const u8, *length) };
            args.push(Arg::Bytes(Buffer::copy_from(bytes).unwrap()));
        }
        (i64::from(in_band_version(lengths.len())), args)
    }

    #[test]
    fn every_version_is_read_and_dispatched_in_the_core() {
        let map = map();
        let labels = map.keys().clone();
        // out of band: version 3, and version 1 (no references)
        for (version, refer) in [(3, true), (1, false)] {
            let (header, buffers) = dump_version(DataRef::Tensor(&map), refer).unwrap();
            let mut args = vec![Arg::Bytes(Buffer::copy_from(&header).unwrap())];
            args.extend(buffers.into_iter().map(|(buffer, _)| Arg::Bytes(buffer)));
            let pickled = Pickled::read(version, &args).unwrap();
            assert!(matches!(pickled, Pickled::OutOfBand { .. }));
            assert_eq!(pickled.load().unwrap(), Data::Tensor(map.clone()));
        }
        // in band: one piece (version 0), several (version 2); labels
        // always in one
        for (data, target, version) in [
            (Data::Tensor(map.clone()), 16 << 20, 0),
            (Data::Tensor(map.clone()), 256, 2),
            (Data::Block(map.blocks()[0].clone()), 256, 2),
            (Data::Labels(labels), 1, 0),
        ] {
            let (written, args) = in_band(data.as_ref(), target);
            assert_eq!(written, version);
            let pickled = Pickled::read(written, &args).unwrap();
            assert_eq!(pickled.load().unwrap(), data);
        }
    }

    #[test]
    fn bad_calls_are_format_errors() {
        let (_, pieces) = in_band(DataRef::Tensor(&map()), 256);
        let piece = || match &pieces[1] {
            Arg::Bytes(buffer) => Arg::Bytes(buffer.clone()),
            Arg::Text(_) => unreachable!(),
        };
        for (version, args, message) in [
            (
                4,
                vec![],
                "unknown pickle format version 4: this blockmap reads versions 0 to 3",
            ),
            (-1, vec![], "unknown pickle format version -1"),
            (3, vec![], "the pickle has no header"),
            (1, vec![], "the pickle has no header"),
            (
                0,
                vec![Arg::Text("tensor")],
                "a version 0 pickle has a kind and an archive, got 1",
            ),
            (
                2,
                vec![],
                "a version 2 pickle has a kind and pieces, got no arguments",
            ),
            (
                0,
                vec![piece(), piece()],
                "the kind of a version 0 pickle must be a string",
            ),
            (
                2,
                vec![piece(), piece()],
                "the kind of a version 2 pickle must be a string",
            ),
            (2, vec![Arg::Text("map"), piece()], "unknown kind 'map'"),
            (
                2,
                vec![Arg::Text("labels"), piece()],
                "labels are a bare NPY file",
            ),
        ] {
            let error = Pickled::read(version, &args)
                .and_then(Pickled::load)
                .unwrap_err();
            assert!(matches!(error, Error::Format(_)), "{error}");
            assert!(error.to_string().contains(message), "{error}");
        }
        // an argument the binding cannot read: its error
        let error = Pickled::read(3, &vec![Arg::Text("x")]).unwrap_err();
        assert!(matches!(error, Error::UnsupportedType(_)), "{error}");
    }

    #[test]
    fn round_trip_shares_memory() {
        let map = map();
        let (header, buffers) = dump(DataRef::Tensor(&map)).unwrap();
        // keys, values, samples, properties, gradient values, samples, component
        assert_eq!(buffers.len(), 7);
        assert!(header.len() < 1000);
        let pointers: Vec<_> = buffers.iter().map(Buffer::as_ptr).collect();
        assert!(!buffers[0].is_writable(), "labels are handed out read-only");
        assert!(buffers[1].is_writable(), "values are writable");
        let Data::Tensor(loaded) = load(&header, buffers).unwrap() else {
            panic!()
        };
        assert_eq!(loaded, map);
        assert_eq!(loaded.blocks()[0].values().buffer().as_ptr(), pointers[1]);
        assert_eq!(
            loaded.blocks()[0]
                .gradient("positions")
                .unwrap()
                .values()
                .buffer()
                .as_ptr(),
            pointers[4]
        );
    }

    #[test]
    fn misaligned_buffers_are_copied() {
        let map = map();
        let (header, buffers) = dump(DataRef::Tensor(&map)).unwrap();
        let shifted: Vec<Buffer> = buffers
            .iter()
            .map(|b| {
                let mut bytes = vec![0u8; b.len() + 1];
                b.raw().copy_to(&mut bytes[1..]).unwrap();
                Buffer::copy_from(&bytes)
                    .unwrap()
                    .slice(1, b.len())
                    .unwrap()
            })
            .collect();
        let Data::Tensor(loaded) = load(&header, shifted).unwrap() else {
            panic!()
        };
        assert_eq!(loaded, map);
        assert!(loaded.blocks()[0].values().buffer().is_aligned_to(8));
    }

    #[test]
    fn crafted_input_is_refused() {
        let map = map();
        let (header, buffers) = dump(DataRef::Tensor(&map)).unwrap();
        let mut fewer = buffers.clone();
        fewer.pop();
        assert!(load(&header, fewer)
            .unwrap_err()
            .to_string()
            .contains("too few"));
        let mut more = buffers.clone();
        more.push(Buffer::empty());
        assert!(load(&header, more)
            .unwrap_err()
            .to_string()
            .contains("has 8 buffers"));
        let mut short = buffers.clone();
        short[1] = short[1].slice(0, 8).unwrap();
        assert!(load(&header, short)
            .unwrap_err()
            .to_string()
            .contains("needs 48"));
        let text = String::from_utf8(header.clone()).unwrap();
        for bad in [
            text.replace("<f8", "<O"),
            text.replace("\"count\":2", "\"count\":3"),
            text.replace("tensor", "matrix"),
            text.replace("\"shape\":[2,3]", "\"shape\":[2,-3]"),
            text[..text.len() / 2].to_string(),
            "[]".to_string(),
        ] {
            assert!(load(bad.as_bytes(), buffers.clone()).is_err(), "{bad}");
        }
        // labels that are not unique
        let mut duplicated = buffers.clone();
        duplicated[2] = Buffer::copy_from(&[0u8; 8]).unwrap();
        assert!(load(&header, duplicated)
            .unwrap_err()
            .to_string()
            .contains("twice"));
    }

    /// Three blocks whose samples, components and properties are equal
    /// labels held separately (as received from another process).
    fn map_of_equal_labels() -> TensorMap {
        use crate::fixtures::labels;
        let blocks = (0..3)
            .map(|i| {
                TensorBlock::new(
                    Array::from_slice(vec![2, 1, 3], &[f64::from(i); 6]).unwrap(),
                    labels(&["s"], &[0, 1]),
                    vec![labels(&["c"], &[5])],
                    Labels::range("p", 3).unwrap(),
                )
                .unwrap()
            })
            .collect();
        TensorMap::new(labels(&["k"], &[0, 1, 2]), blocks).unwrap()
    }

    /// A version 1 pickle: every labels with its buffer.
    fn dump_v1(data: DataRef<'_>) -> (Vec<u8>, Vec<Buffer>) {
        let (header, buffers) = dump_version(data, false).unwrap();
        (header, buffers.into_iter().map(|(b, _)| b).collect())
    }

    #[test]
    fn equal_small_labels_are_sent_once_and_received_shared() {
        let map = map_of_equal_labels();
        let (header, buffers) = dump(DataRef::Tensor(&map)).unwrap();
        // keys, then values, samples, component, properties for block 0,
        // only the values for blocks 1 and 2
        assert_eq!(buffers.len(), 1 + 4 + 1 + 1);
        let text = String::from_utf8(header.clone()).unwrap();
        assert!(text.contains(r#""samples":2,"components":[3],"properties":4"#));
        let (v1_header, v1_buffers) = dump_v1(DataRef::Tensor(&map));
        assert_eq!(v1_buffers.len(), 1 + 3 * 4);
        assert!(header.len() < v1_header.len());
        for (header, buffers, version) in [(header, buffers, 3), (v1_header, v1_buffers, 1)] {
            let Data::Tensor(loaded) = load_version(version, &header, buffers).unwrap() else {
                panic!()
            };
            assert_eq!(loaded, map);
            let blocks = loaded.blocks();
            for block in &blocks[1..] {
                assert!(block.samples().ptr_eq(blocks[0].samples()));
                assert!(block.components()[0].ptr_eq(&blocks[0].components()[0]));
                assert!(block.properties().ptr_eq(blocks[0].properties()));
            }
        }
        // a version 1 reader refuses references
        let (header, buffers) = dump(DataRef::Tensor(&map)).unwrap();
        let error = load_version(1, &header, buffers).unwrap_err().to_string();
        assert!(error.contains("version 3"), "{error}");
    }

    #[test]
    fn large_equal_labels_are_sent_each_time() {
        // samples just over the 4 KiB of labels that are referred to
        let samples = Labels::range("s", 1025).unwrap();
        let blocks = (0..2)
            .map(|_| {
                TensorBlock::new(
                    Array::from_slice(vec![1025, 1], &[0.0f64; 1025]).unwrap(),
                    samples.clone(),
                    vec![],
                    Labels::range("p", 1).unwrap(),
                )
                .unwrap()
            })
            .collect();
        let map = TensorMap::new(Labels::range("k", 2).unwrap(), blocks).unwrap();
        let (header, buffers) = dump(DataRef::Tensor(&map)).unwrap();
        // keys; values, samples, properties; values, samples
        assert_eq!(buffers.len(), 1 + 3 + 2);
        let Data::Tensor(loaded) = load(&header, buffers).unwrap() else {
            panic!()
        };
        assert_eq!(loaded, map);
    }

    #[test]
    fn crafted_references_are_refused() {
        let map = map_of_equal_labels();
        let (header, buffers) = dump(DataRef::Tensor(&map)).unwrap();
        let text = String::from_utf8(header).unwrap();
        let refs = r#""samples":2,"components":[3],"properties":4"#;
        for (bad, expected) in [
            // the values of block 0
            (r#""samples":1,"components":[3],"properties":4"#, "buffer 1"),
            // a later buffer
            (r#""samples":2,"components":[6],"properties":4"#, "buffer 6"),
            (
                r#""samples":2,"components":[3],"properties":99"#,
                "buffer 99",
            ),
            (r#""samples":-2,"components":[3],"properties":4"#, "invalid"),
            (
                r#""samples":2.5,"components":[3],"properties":4"#,
                "invalid",
            ),
            (
                r#""samples":"2","components":[3],"properties":4"#,
                "invalid",
            ),
        ] {
            let crafted = text.replacen(refs, bad, 1);
            assert_ne!(crafted, text);
            let error = load(crafted.as_bytes(), buffers.clone())
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{bad}: {error}");
        }
        // the keys are always described
        let crafted = text.replacen(
            r#""keys":{"names":["k"],"count":3,"dtype":"<i4"}"#,
            r#""keys":0"#,
            1,
        );
        assert_ne!(crafted, text);
        assert!(load(crafted.as_bytes(), buffers.clone()).is_err());
    }

    #[test]
    fn received_labels_are_copied_together_and_equal_ones_made_once() {
        let map = map_of_equal_labels();
        let (header, buffers) = dump_v1(DataRef::Tensor(&map));
        let sent: Vec<_> = buffers
            .iter()
            .map(|b| b.as_ptr() as usize..b.as_ptr() as usize + b.len())
            .collect();
        let Data::Tensor(loaded) = load_version(1, &header, buffers).unwrap() else {
            panic!()
        };
        assert_eq!(loaded, map);
        let blocks = loaded.blocks();
        for block in &blocks[1..] {
            assert!(block.samples().ptr_eq(blocks[0].samples()));
            assert!(block.properties().ptr_eq(blocks[0].properties()));
            assert!(block.components()[0].ptr_eq(&blocks[0].components()[0]));
        }
        // every label's memory is a copy (none of the sent buffers), in
        // one allocation: the keys and the first block's labels lie within
        // a few aligned slots of each other
        let labels = [
            loaded.keys(),
            blocks[0].samples(),
            &blocks[0].components()[0],
            blocks[0].properties(),
        ];
        let addresses: Vec<usize> = labels
            .iter()
            .map(|l| l.values().buffer().as_ptr() as usize)
            .collect();
        for address in &addresses {
            assert!(sent.iter().all(|range| !range.contains(address)));
            assert_eq!(address % crate::buffer::ALIGNMENT, 0);
        }
        let lowest = *addresses.iter().min().unwrap();
        let highest = *addresses.iter().max().unwrap();
        assert!(highest - lowest < 4 * crate::buffer::ALIGNMENT);
        // the values still view the sent memory
        assert!(sent[1].contains(&(blocks[0].values().buffer().as_ptr() as usize)));
    }

    #[test]
    fn labels_with_other_names_or_byte_order_are_not_shared() {
        // the same bytes under other names
        let block = TensorBlock::new(
            Array::from_slice(vec![3, 3], &[0.0f64; 9]).unwrap(),
            Labels::range("s", 3).unwrap(),
            vec![],
            Labels::range("p", 3).unwrap(),
        )
        .unwrap();
        let (header, buffers) = dump(DataRef::Block(&block)).unwrap();
        let Data::Block(loaded) = load(&header, buffers).unwrap() else {
            panic!()
        };
        assert_eq!(loaded, block);
        assert!(!loaded.samples().ptr_eq(loaded.properties()));

        // the same names and bytes read in the other byte order: the last
        // block's properties (version 1: each block's described)
        let map = map_of_equal_labels();
        let (header, buffers) = dump_v1(DataRef::Tensor(&map));
        let text = String::from_utf8(header).unwrap();
        let native = DType::I4.native_descr();
        let swapped = if native.starts_with('<') {
            ">i4"
        } else {
            "<i4"
        };
        let properties = format!("\"names\":[\"p\"],\"count\":3,\"dtype\":\"{native}\"");
        let last = text.rfind(&properties).unwrap();
        let crafted = format!(
            "{}{}{}",
            &text[..last],
            properties.replace(&native, swapped),
            &text[last + properties.len()..]
        );
        let Data::Tensor(loaded) = load_version(1, crafted.as_bytes(), buffers).unwrap() else {
            panic!()
        };
        let blocks = loaded.blocks();
        assert!(blocks[1].properties().ptr_eq(blocks[0].properties()));
        assert!(!blocks[2].properties().ptr_eq(blocks[0].properties()));
        let swapped_values: Vec<i32> = (0..3).map(i32::swap_bytes).collect();
        assert_eq!(
            blocks[2].properties().values().as_slice::<i32>().unwrap(),
            &swapped_values[..]
        );
    }

    #[test]
    fn blocks_and_labels() {
        let map = map();
        let block = &map.blocks()[0];
        let (header, buffers) = dump(DataRef::Block(block)).unwrap();
        let Data::Block(loaded) = load(&header, buffers).unwrap() else {
            panic!()
        };
        assert_eq!(&loaded, block);
        let (header, buffers) = dump(DataRef::Labels(map.keys())).unwrap();
        let Data::Labels(loaded) = load(&header, buffers).unwrap() else {
            panic!()
        };
        assert_eq!(&loaded, map.keys());
    }
}
