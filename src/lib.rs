//! blockmap: labeled block tensors (`TensorMap`) whose data moves without
//! being copied.
//!
//! The core (everything here but the `python` module) is a plain Rust
//! library: [`Labels`], [`TensorBlock`] and [`TensorMap`] hold their array
//! data in reference-counted [`Buffer`]s that can view memory owned by Rust,
//! by a file mapping, or by a foreign owner such as a Python object.

pub mod array;
pub mod block;
pub mod buffer;
pub mod dtype;
pub mod error;
pub mod io;
pub mod labels;
pub mod pickle;
pub mod shm;
pub mod tensor;

#[cfg(feature = "python")]
mod python;

pub use array::Array;
pub use block::TensorBlock;
pub use buffer::{AlignedBytes, Buffer, OwnerKind, ALIGNMENT};
pub use dtype::{ByteOrder, DType, Element};
pub use error::{Error, Result};
pub use labels::Labels;
pub use tensor::TensorMap;
