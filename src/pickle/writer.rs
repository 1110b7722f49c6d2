//! The writer of the out-of-band form: the header of a map, block or
//! labels and the buffers of the wire order, which share its memory.

use std::borrow::Cow;
use std::hash::BuildHasher;

use crate::block::TensorBlock;
use crate::buffer::Buffer;
use crate::data::DataRef;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::labels::Labels;

use super::header::{BlockHeader, Header, LabelsField, LabelsHeader, NameList};
use super::SHARED_LABELS_MAX;

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

/// Lists the buffers of the wire order and describes what they hold.
struct Dumper<'d> {
    buffers: Buffers,
    /// refer to equal small labels sent before (version 3) or not (1)
    refer: bool,
    hasher: hashbrown::DefaultHashBuilder,
    /// small labels sent, with the index of their buffer
    sent: hashbrown::HashTable<(usize, &'d Labels)>,
    /// every labels sent (version 3), by identity, with the index of its
    /// buffer: the same object met again is referred to whatever its size,
    /// without reading its values (the labels are borrowed for the whole
    /// dump, so no other labels can take their address meanwhile)
    by_identity: hashbrown::HashMap<usize, usize>,
}

impl<'d> Dumper<'d> {
    fn new(refer: bool) -> Self {
        Dumper {
            buffers: Vec::new(),
            refer,
            hasher: hashbrown::DefaultHashBuilder::default(),
            sent: hashbrown::HashTable::new(),
            by_identity: hashbrown::HashMap::new(),
        }
    }

    fn hash(&self, labels: &Labels) -> u64 {
        self.hasher.hash_one((labels.names(), labels.value_bytes()))
    }

    /// Labels' header with their buffer, or a reference to equal labels
    /// sent before.
    fn entry(&mut self, labels: &'d Labels) -> LabelsField<'static> {
        if self.refer {
            if let Some(&index) = self.by_identity.get(&labels.identity()) {
                return LabelsField::Same(index);
            }
        }
        if self.refer && labels.values().buffer().len() <= SHARED_LABELS_MAX {
            let same = |&(_, sent): &(usize, &Labels)| {
                sent.ptr_eq(labels)
                    || (sent.names() == labels.names()
                        && sent.value_bytes() == labels.value_bytes())
            };
            if let Some(&(index, _)) = self.sent.find(self.hash(labels), same) {
                return LabelsField::Same(index);
            }
        }
        LabelsField::Full(self.first(labels))
    }

    /// Labels' header, their buffer listed; they are remembered for later
    /// labels that are the same object to refer to, and small ones for
    /// later equal labels.
    fn first(&mut self, labels: &'d Labels) -> LabelsHeader<'static> {
        let index = self.buffers.len();
        let header = self.full(labels);
        if self.refer {
            self.by_identity.insert(labels.identity(), index);
        }
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
pub(super) fn dump_version(data: DataRef<'_>, refer: bool) -> Result<(Vec<u8>, Buffers)> {
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
