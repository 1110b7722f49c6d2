//! Objects rebuilt from a parsed header and the buffers of the wire order:
//! arrays viewing the buffers they can, labels made once, everything
//! validated.

use crate::array::{byte_len, Array, Layout};
use crate::block::TensorBlock;
use crate::buffer::Buffer;
use crate::data::Data;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::labels::Labels;
use crate::tensor::TensorMap;

use super::gather::{gather_labels, LabelsFrom};
use super::header::{self, BlockHeader, Header, LabelsField, LabelsHeader};
use super::VERSION;

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
    /// what the labels of each buffer are made from (see [`gather_labels`])
    labels_from: Vec<LabelsFrom>,
    /// the labels made from [`LabelsFrom::Shared`] buffers and from those later
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
    fn entry(&mut self, entry: LabelsField<'_>, what: Where<'_>) -> Result<Labels> {
        match entry {
            LabelsField::Full(header) => self.labels(header, what),
            LabelsField::Same(_) if self.version < 3 => Err(Error::format(format!(
                "{what}: a version {} pickle describes every labels (references to earlier \
                 labels came with version 3)",
                self.version
            ))),
            LabelsField::Same(index) => self.shared.get(&index).cloned().ok_or_else(|| {
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
        let from = self
            .labels_from
            .get(index)
            .copied()
            .unwrap_or(LabelsFrom::Buffer);
        if let LabelsFrom::Same(first) = from {
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
        let labels = match from {
            // a view of the gathered copy, or a conversion: own memory
            LabelsFrom::Own | LabelsFrom::Shared => Labels::from_own_array(names, values, false),
            LabelsFrom::Buffer | LabelsFrom::Same(_) => Labels::from_array(names, values, false),
        }
        .map_err(|e| e.context(what))?;
        if from == LabelsFrom::Shared || self.referenced.contains(&index) {
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

/// Rebuild what [`dump`](super::dump) described from its header and buffers (any
/// buffers holding the same bytes). Each array views its buffer when the
/// buffer is aligned for the element type, and is copied otherwise.
pub fn load(header: &[u8], buffers: Vec<Buffer>) -> Result<Data> {
    load_version(VERSION, header, buffers)
}

/// [`load`] for a header of format `version`: 1 or 3.
pub fn load_version(version: u32, header: &[u8], buffers: Vec<Buffer>) -> Result<Data> {
    check_version(version)?;
    // the header may be the caller's memory, which another thread or
    // process can rewrite while it is parsed: it is copied once, and
    // checked and parsed from the copy
    let mut copy = Vec::new();
    copy.try_reserve_exact(header.len())?;
    copy.extend_from_slice(header);
    rebuild(version, &copy, buffers)
}

/// [`load_version`] for a header already copied into blockmap's memory
/// (the copy [`Pickled::load`](super::Pickled::load) makes of a header
/// buffer, from which it is parsed).
pub(super) fn load_copied(version: u32, copy: &[u8], buffers: Vec<Buffer>) -> Result<Data> {
    check_version(version)?;
    rebuild(version, copy, buffers)
}

fn check_version(version: u32) -> Result<()> {
    if version != 1 && version != VERSION {
        return Err(Error::format(format!(
            "the out-of-band pickle format has versions 1 and {VERSION}, not {version}"
        )));
    }
    Ok(())
}

/// The object the header `copy` (in blockmap's memory) and `buffers`
/// describe, validated.
fn rebuild(version: u32, copy: &[u8], buffers: Vec<Buffer>) -> Result<Data> {
    let header = header::parse(copy)?;
    let mut buffers = buffers;
    let mut referenced = hashbrown::HashSet::new();
    // version 3 writers refer to equal small labels instead of sending
    // them again: comparing received ones is for version 1
    let labels_from = gather_labels(&header, &mut buffers, &mut referenced, version < 3)?;
    let count = buffers.len();
    let mut buffers = Received {
        buffers: buffers.into_iter(),
        used: 0,
        labels_from,
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
