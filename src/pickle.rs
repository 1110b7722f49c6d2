//! The out-of-band pickle wire format (version 1): a small metadata header
//! and one buffer per array, in a fixed order. See `docs/pickle.md`.
//!
//! [`dump`] lists the buffers a map, block or labels already hold (nothing
//! is copied); [`load`] rebuilds the object from a header and buffers given
//! by a transport, viewing each buffer when it is aligned for its element
//! type and copying it otherwise, and validating everything.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::array::{byte_len, Array, Layout};
use crate::block::TensorBlock;
use crate::buffer::Buffer;
use crate::data::{Data, DataRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// The version of the wire format [`dump`] writes and [`load`] reads.
pub const VERSION: u32 = 1;

/// Labels in a header: names and number of entries (the values are a buffer).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LabelsHeader {
    names: Vec<String>,
    count: usize,
    /// npy descr of the values with explicit byte order: `<i4` or `>i4`
    dtype: String,
}

/// A block in a header; gradient blocks have no properties (the parent's).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockHeader {
    /// npy descr with explicit byte order, e.g. `<f8`
    dtype: String,
    shape: Vec<usize>,
    samples: LabelsHeader,
    components: Vec<LabelsHeader>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    properties: Option<LabelsHeader>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    gradients: BTreeMap<String, BlockHeader>,
}

/// The header: what the buffers hold, in the order they come.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum Header {
    Tensor {
        keys: LabelsHeader,
        blocks: Vec<BlockHeader>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        info: BTreeMap<String, String>,
    },
    Block {
        block: BlockHeader,
    },
    Labels {
        labels: LabelsHeader,
    },
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

fn labels_header(labels: &Labels, buffers: &mut Buffers) -> LabelsHeader {
    // labels never change: their memory is handed out read-only
    buffers.push((
        labels.values().buffer().clone().into_read_only(),
        Role::Labels,
    ));
    LabelsHeader {
        names: labels.names().to_vec(),
        count: labels.count(),
        dtype: DType::I4.native_descr(),
    }
}

fn block_header(block: &TensorBlock, gradient: bool, buffers: &mut Buffers) -> BlockHeader {
    buffers.push((block.values().buffer().clone(), Role::Values));
    let samples = labels_header(block.samples(), buffers);
    let components = block
        .components()
        .iter()
        .map(|c| labels_header(c, buffers))
        .collect();
    let properties = (!gradient).then(|| labels_header(block.properties(), buffers));
    let gradients = block
        .gradients()
        .iter()
        .map(|(p, g)| (p.clone(), block_header(g, true, buffers)))
        .collect();
    BlockHeader {
        dtype: block.dtype().native_descr(),
        shape: block.values().shape().to_vec(),
        samples,
        components,
        properties,
        gradients,
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
    let mut buffers = Vec::new();
    let header = match data {
        DataRef::Tensor(map) => Header::Tensor {
            keys: labels_header(map.keys(), &mut buffers),
            blocks: map
                .blocks()
                .iter()
                .map(|b| block_header(b, false, &mut buffers))
                .collect(),
            info: map.info().clone(),
        },
        DataRef::Block(block) => Header::Block {
            block: block_header(block, false, &mut buffers),
        },
        DataRef::Labels(labels) => Header::Labels {
            labels: labels_header(labels, &mut buffers),
        },
    };
    // a mapped file truncated by another program: refuse rather than send
    // the zeros that replaced what was lost
    for (buffer, _) in &buffers {
        buffer.check_intact()?;
    }
    let bytes = serde_json::to_vec(&header)
        .map_err(|e| Error::invalid(format!("cannot encode the pickle header: {e}")))?;
    Ok((bytes, buffers))
}

/// Hands out the buffers in order, checking their count.
struct Received<I: Iterator<Item = Buffer>> {
    buffers: I,
    used: usize,
}

impl<I: Iterator<Item = Buffer>> Received<I> {
    fn next(&mut self, what: &str) -> Result<Buffer> {
        self.used += 1;
        self.buffers.next().ok_or_else(|| {
            Error::format(format!(
                "the pickle has too few buffers: none left for {what} (buffer {})",
                self.used
            ))
        })
    }

    fn array(&mut self, dtype: &str, shape: Vec<usize>, what: &str) -> Result<Array> {
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

    fn labels(&mut self, header: LabelsHeader, what: &str) -> Result<Labels> {
        let shape = vec![header.count, header.names.len()];
        if !header.dtype.ends_with("i4") {
            return Err(Error::format(format!(
                "{what}: labels must be int32, got '{}'",
                header.dtype
            )));
        }
        let values = self.array(&header.dtype, shape, what)?;
        Labels::from_array(header.names, values, false).map_err(|e| e.context(what))
    }

    fn block(
        &mut self,
        header: BlockHeader,
        parent: Option<&TensorBlock>,
        what: &str,
        depth: usize,
    ) -> Result<TensorBlock> {
        if depth > crate::limits::MAX_GRADIENT_DEPTH {
            return Err(Error::format(format!(
                "{what}: gradients nest more than {} levels deep",
                crate::limits::MAX_GRADIENT_DEPTH
            )));
        }
        let values = self.array(&header.dtype, header.shape, &format!("{what} values"))?;
        let samples = self.labels(header.samples, &format!("{what} samples"))?;
        let mut components = Vec::with_capacity(header.components.len());
        for (k, component) in header.components.into_iter().enumerate() {
            components.push(self.labels(component, &format!("{what} component {k}"))?);
        }
        let properties = match (parent, header.properties) {
            (None, Some(properties)) => self.labels(properties, &format!("{what} properties"))?,
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
                &format!("{what} gradient '{parameter}'"),
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
    // the header's structure is checked before it is parsed: the parser's
    // recursion stays bounded (see `limits.rs`)
    crate::limits::check_json_nesting(header)?;
    let header: Header = serde_json::from_slice(header)
        .map_err(|e| Error::format(format!("invalid pickle header: {e}")))?;
    let count = buffers.len();
    let mut buffers = Received {
        buffers: buffers.into_iter(),
        used: 0,
    };
    let data = match header {
        Header::Tensor { keys, blocks, info } => {
            let keys = buffers.labels(keys, "keys")?;
            let mut rebuilt = Vec::with_capacity(blocks.len().min(keys.count()));
            for (i, block) in blocks.into_iter().enumerate() {
                rebuilt.push(buffers.block(block, None, &format!("block {i}"), 0)?);
            }
            let mut map = TensorMap::new(keys, rebuilt)?;
            map.replace_info(info)?;
            Data::Tensor(map)
        }
        Header::Block { block } => Data::Block(buffers.block(block, None, "block", 0)?),
        Header::Labels { labels } => Data::Labels(buffers.labels(labels, "labels")?),
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
    use crate::fixtures::small_map as map;

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
                bytes[1..].copy_from_slice(b.as_slice());
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
