//! The writer of the out-of-band form: the header of a map, block or
//! labels and the buffers of the wire order, which share its memory.

use std::borrow::Cow;

use crate::block::TensorBlock;
use crate::buffer::Buffer;
use crate::data::DataRef;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::labels::{sampled_key, Labels, PER_BUCKET};

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
    /// small labels sent, with the index of their buffer, by their
    /// [`sampled_key`] (at most [`PER_BUCKET`] per key: labels past that
    /// are sent without being compared, so crafted labels that share a key
    /// cost no quadratic time)
    sent: hashbrown::HashMap<u64, Vec<(usize, &'d Labels)>>,
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
            sent: hashbrown::HashMap::new(),
            by_identity: hashbrown::HashMap::new(),
        }
    }

    fn key(&self, labels: &Labels) -> u64 {
        sampled_key(&self.hasher, labels)
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
            let same = |&&(_, sent): &&(usize, &Labels)| {
                sent.names() == labels.names() && sent.value_bytes() == labels.value_bytes()
            };
            let found = self
                .sent
                .get(&self.key(labels))
                .and_then(|bucket| bucket.iter().find(same));
            if let Some(&(index, _)) = found {
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
            let bucket = self.sent.entry(self.key(labels)).or_default();
            if bucket.len() < PER_BUCKET {
                bucket.push((index, labels));
            }
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
            dtype: Cow::Borrowed(native_descr(DType::I4)),
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
            dtype: Cow::Borrowed(native_descr(block.dtype())),
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
    // written once (serializing it twice, to count then to write, was a
    // fifth of a dumps), into memory grown with fallible allocations from
    // an estimate (W: 24 kB for 305 buffers)
    let mut bytes = Grown(Vec::new());
    bytes
        .0
        .try_reserve(HEADER_BYTES_PER_BUFFER.saturating_mul(buffers.len().saturating_add(4)))?;
    serde_json::to_writer(&mut bytes, &header).map_err(|e| {
        if e.io_error_kind() == Some(std::io::ErrorKind::OutOfMemory) {
            Error::out_of_memory(bytes.0.len().saturating_mul(2))
        } else {
            Error::internal(format!("cannot encode the pickle header: {e}"))
        }
    })?;
    Ok((bytes.0, buffers))
}

/// The header bytes first reserved per buffer of the wire order.
const HEADER_BYTES_PER_BUFFER: usize = 96;

/// A `Vec` that a writer grows with fallible allocations: a failed one is
/// an `OutOfMemory` I/O error, not an abort.
struct Grown(Vec<u8>);

impl std::io::Write for Grown {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0
            .try_reserve(data.len())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        self.0.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `dtype.native_descr()` as a static string: no allocation per labels
/// and per block of a dump.
fn native_descr(dtype: DType) -> &'static str {
    macro_rules! native {
        ($($variant:ident => $code:literal),* $(,)?) => {
            match dtype {
                $(DType::$variant => if cfg!(target_endian = "little") {
                    concat!("<", $code)
                } else {
                    concat!(">", $code)
                }),*
            }
        };
    }
    native!(
        F2 => "f2", F4 => "f4", F8 => "f8", I1 => "i1", I2 => "i2", I4 => "i4", I8 => "i8",
        U1 => "u1", U2 => "u2", U4 => "u4", U8 => "u8", B1 => "b1", C8 => "c8", C16 => "c16",
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn static_descrs_are_the_native_ones() {
        for dtype in crate::dtype::DType::ALL {
            assert_eq!(super::native_descr(dtype), dtype.native_descr());
        }
    }
}
