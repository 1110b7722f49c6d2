//! What a file must not hold so that metatensor-core 0.2.6 reads it back.
//!
//! blockmap's data model is a little wider than what metatensor-core's
//! reader accepts. Saving to a file or a buffer refuses, with an
//! [`Error::Invalid`] naming the offending part, data that would give a
//! file metatensor-core cannot read (docs/format.md lists each case). Pickles
//! are not files: they keep everything blockmap holds.
//!
//! Labels without dimensions are saved: metatensor-core writes them too and
//! fails to read its own file (a bug of its reader, pinned by a test).

use crate::block::TensorBlock;
use crate::data::DataRef;
use crate::error::{Error, Result};
use crate::labels::Names;
use crate::tensor::describe_entry;

const CANNOT_READ: &str = "cannot save: metatensor-core cannot read this back";

/// Check that `data` fits in an archive at all: a gradient parameter with a
/// '/' would read back as another gradient (the pickles of protocol < 5,
/// which are archives, need this; protocol 5 keeps any name).
pub fn check_archive(data: DataRef<'_>) -> Result<()> {
    fn check(block: &TensorBlock) -> Result<()> {
        for (parameter, gradient) in block.gradients() {
            if parameter.contains('/') {
                return Err(Error::invalid(format!(
                    "the gradient parameter {parameter:?} contains '/': it cannot go into an \
                     .mts archive, where it would read as another gradient (pickle protocol \
                     5 keeps it)"
                )));
            }
            check(gradient)?;
        }
        Ok(())
    }
    match data {
        DataRef::Labels(_) => Ok(()),
        DataRef::Block(block) => check(block),
        DataRef::Tensor(map) => map.blocks().iter().try_for_each(check),
    }
}

/// Check that the file of `data` is one metatensor-core 0.2.6 reads.
pub fn check(data: DataRef<'_>) -> Result<()> {
    match data {
        DataRef::Labels(_) => Ok(()),
        DataRef::Block(block) => check_block(block, "block"),
        DataRef::Tensor(map) => {
            for (i, block) in map.blocks().iter().enumerate() {
                check_block(
                    block,
                    &format!("block {i} (key {})", describe_entry(map.keys(), i)),
                )?;
            }
            for (key, value) in map.info() {
                if key.contains('\0') || value.contains('\0') {
                    return Err(Error::invalid(format!(
                        "{CANNOT_READ}: the info entry {key:?} contains a NUL character \
                         (metatensor-core keeps info in C strings)"
                    )));
                }
            }
            Ok(())
        }
    }
}

fn check_block(block: &TensorBlock, what: &str) -> Result<()> {
    for component in block.components() {
        if component.is_empty() {
            return Err(Error::invalid(format!(
                "{CANNOT_READ}: the component {} of {what} has no entries (metatensor-core \
                 requires at least one entry per component)",
                Names(component.names())
            )));
        }
    }
    for (parameter, gradient) in block.gradients() {
        if parameter.contains('/') || parameter.contains('\0') {
            return Err(Error::invalid(format!(
                "{CANNOT_READ}: the gradient parameter {parameter:?} of {what} contains \
                 '/' or a NUL character (its entries would read as another gradient)"
            )));
        }
        check_block(gradient, &format!("gradient '{parameter}' of {what}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::Array;
    use crate::dtype::DType;
    use crate::fixtures::{labels, small_map};
    use crate::labels::Labels;
    use crate::tensor::TensorMap;

    fn block(components: Vec<Labels>) -> TensorBlock {
        let mut shape = vec![2];
        shape.extend(components.iter().map(Labels::count));
        shape.push(3);
        TensorBlock::new(
            Array::zeros(DType::F8, shape).unwrap(),
            labels(&["s"], &[0, 1]),
            components,
            Labels::range("p", 3).unwrap(),
        )
        .unwrap()
    }

    fn message(data: DataRef<'_>) -> String {
        check(data).unwrap_err().to_string()
    }

    #[test]
    fn readable_data_passes() {
        assert!(check(DataRef::Tensor(&small_map())).is_ok());
        assert!(check(DataRef::Block(&block(vec![Labels::range("c", 1).unwrap()]))).is_ok());
        assert!(check(DataRef::Labels(&Labels::range("a", 0).unwrap())).is_ok());
    }

    #[test]
    fn what_metatensor_cannot_read_is_named() {
        let empty = block(vec![Labels::range("c", 0).unwrap()]);
        assert!(message(DataRef::Block(&empty)).contains("component ['c']"));

        // labels without dimensions are saved (metatensor-core writes them too)
        let no_dims = Labels::new(Vec::<String>::new(), &[]).unwrap();
        assert!(check(DataRef::Labels(&no_dims)).is_ok());

        let mut map = small_map();
        map.set_info("a".into(), "b\0c".into()).unwrap();
        assert!(message(DataRef::Tensor(&map)).contains("NUL"));

        for parameter in ["a/b", "a\0b"] {
            let mut parent = block(vec![]);
            let gradient = TensorBlock::new(
                Array::zeros(DType::F8, vec![1, 3]).unwrap(),
                labels(&["sample"], &[0]),
                vec![],
                Labels::range("p", 3).unwrap(),
            )
            .unwrap();
            parent.add_gradient(parameter, gradient).unwrap();
            let map = TensorMap::new(labels(&["k"], &[0]), vec![parent]).unwrap();
            let text = message(DataRef::Tensor(&map));
            assert!(
                text.contains("block 0 (key {k=0})") && text.contains("gradient parameter"),
                "{text}"
            );
            // an archive (a pickle before protocol 5) holds a NUL, not a '/'
            assert_eq!(
                check_archive(DataRef::Tensor(&map)).is_err(),
                parameter.contains('/')
            );
        }
    }
}
