//! blockmap: labeled block tensors (`TensorMap`) whose data moves without
//! being copied.
//!
//! The core (everything here but the `python` module) is a plain Rust
//! library: [`Labels`], [`TensorBlock`] and [`TensorMap`] hold their array
//! data in reference-counted [`Buffer`]s that can view memory owned by Rust,
//! by a file mapping, by a shared-memory segment, or by a foreign owner such
//! as a Python object.
//!
//! Modules use only those below them; the layers, lowest first (the order
//! docs/design.md gives, word for word):
//!
//! ```text
//! {error, arc} → {dtype, interrupt, limits} → cast → buffer → array → labels → block → tensor
//!   → {data, fixtures} → {ops, io} → pickle → {dataset, shm} → python
//! ```
//!
//! `ops` holds the operations that build new maps, `fixtures` the small
//! maps of the tests; the binding (`python`, feature `python`) calls down
//! into all of them.

pub mod arc;
pub mod array;
pub mod block;
pub mod buffer;
pub mod cast;
pub mod data;
pub mod dataset;
pub mod dtype;
pub mod error;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod interrupt;
pub mod io;
pub mod labels;
pub mod limits;
pub mod ops;
pub mod pickle;
pub mod shm;
pub mod tensor;

#[cfg(feature = "python")]
mod python;

pub use array::{Array, Layout};
pub use block::TensorBlock;
pub use buffer::{AlignedBytes, Buffer, MapMode, OwnerKind, SharedBytes, ALIGNMENT};
pub use data::{Data, DataRef, Kind};
pub use dtype::{ByteOrder, DType, Element};
pub use error::{Error, Result};
pub use labels::Labels;
pub use tensor::TensorMap;
