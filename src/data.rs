//! What can be saved, loaded, pickled and shared: a `TensorMap`, a
//! `TensorBlock` or `Labels`, borrowed ([`DataRef`]) or owned ([`Data`]),
//! and the [`Kind`] naming which.

use std::fmt;

use crate::block::TensorBlock;
use crate::error::{Error, Result};
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// Which of the three an object, a file or a pickle holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// a `TensorMap` (an archive)
    Tensor,
    /// a `TensorBlock` (an archive)
    Block,
    /// Labels (a bare NPY file)
    Labels,
}

impl Kind {
    /// The name of the kind, as the pickle wire format spells it:
    /// `"tensor"`, `"block"` or `"labels"`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Tensor => "tensor",
            Kind::Block => "block",
            Kind::Labels => "labels",
        }
    }

    /// The kind named `name` (see [`Kind::name`]).
    pub fn from_name(name: &str) -> Result<Kind> {
        match name {
            "tensor" => Ok(Kind::Tensor),
            "block" => Ok(Kind::Block),
            "labels" => Ok(Kind::Labels),
            other => Err(Error::format(format!(
                "unknown kind '{other}': expected 'tensor', 'block' or 'labels'"
            ))),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Tensor => "TensorMap",
            Kind::Block => "TensorBlock",
            Kind::Labels => "Labels",
        })
    }
}

/// Something that can be saved, pickled or shared.
#[derive(Clone, Copy, Debug)]
pub enum DataRef<'a> {
    /// a map
    Tensor(&'a TensorMap),
    /// a block
    Block(&'a TensorBlock),
    /// labels
    Labels(&'a Labels),
}

impl DataRef<'_> {
    /// Which kind this is.
    pub fn kind(self) -> Kind {
        match self {
            DataRef::Tensor(_) => Kind::Tensor,
            DataRef::Block(_) => Kind::Block,
            DataRef::Labels(_) => Kind::Labels,
        }
    }

    /// An owned copy (the arrays are shared, not copied).
    pub fn to_owned(self) -> Data {
        match self {
            DataRef::Tensor(map) => Data::Tensor(map.clone()),
            DataRef::Block(block) => Data::Block(block.clone()),
            DataRef::Labels(labels) => Data::Labels(labels.clone()),
        }
    }
}

/// Something loaded, unpickled or attached.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// a map
    Tensor(TensorMap),
    /// a block
    Block(TensorBlock),
    /// labels
    Labels(Labels),
}

impl Data {
    /// Borrow it as something to save.
    pub fn as_ref(&self) -> DataRef<'_> {
        match self {
            Data::Tensor(map) => DataRef::Tensor(map),
            Data::Block(block) => DataRef::Block(block),
            Data::Labels(labels) => DataRef::Labels(labels),
        }
    }

    /// Which kind this is.
    pub fn kind(&self) -> Kind {
        self.as_ref().kind()
    }

    /// The map, or an error saying what this is instead.
    pub fn into_tensor(self) -> Result<TensorMap> {
        match self {
            Data::Tensor(map) => Ok(map),
            other => Err(other.not_a(Kind::Tensor)),
        }
    }

    /// The block, or an error saying what this is instead.
    pub fn into_block(self) -> Result<TensorBlock> {
        match self {
            Data::Block(block) => Ok(block),
            other => Err(other.not_a(Kind::Block)),
        }
    }

    /// The labels, or an error saying what this is instead.
    pub fn into_labels(self) -> Result<Labels> {
        match self {
            Data::Labels(labels) => Ok(labels),
            other => Err(other.not_a(Kind::Labels)),
        }
    }

    fn not_a(&self, expected: Kind) -> Error {
        Error::internal(format!("expected a {expected}, got a {}", self.kind()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_name() {
        for kind in [Kind::Tensor, Kind::Block, Kind::Labels] {
            assert_eq!(Kind::from_name(kind.name()).unwrap(), kind);
        }
        assert!(Kind::from_name("matrix").is_err());
        let labels = Data::Labels(Labels::single());
        assert_eq!(labels.kind(), Kind::Labels);
        assert_eq!(labels.as_ref().to_owned(), labels);
        assert!(labels.clone().into_tensor().is_err());
        assert!(labels.into_labels().is_ok());
    }
}
