//! `TensorMap`: one block per key entry, plus an info map.

use std::collections::BTreeMap;

use crate::block::TensorBlock;
use crate::error::{Error, Result};
use crate::labels::{Interner, Labels, Names};

/// A set of [`TensorBlock`], one per entry of `keys`. Every block has the
/// same sample, component and property names, the same gradients and the
/// same element type.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorMap {
    keys: Labels,
    blocks: Vec<TensorBlock>,
    info: BTreeMap<String, String>,
}

impl TensorMap {
    /// Check and assemble a map; `blocks[i]` belongs to entry `i` of `keys`.
    pub fn new(keys: Labels, blocks: Vec<TensorBlock>) -> Result<Self> {
        if blocks.len() != keys.count() {
            return Err(Error::invalid(format!(
                "{} block(s) for {} key entries: there must be one block per key",
                blocks.len(),
                keys.count()
            )));
        }
        if let Some((first, rest)) = blocks.split_first() {
            for (i, block) in rest.iter().enumerate() {
                if block.dtype() != first.dtype() {
                    return Err(Error::invalid(format!(
                        "all blocks of a map must have the same dtype (as in metatensor-core): \
                         block {} (key {}) is {}, block 0 (key {}) is {}",
                        i + 1,
                        describe_entry(&keys, i + 1),
                        block.dtype(),
                        describe_entry(&keys, 0),
                        first.dtype()
                    )));
                }
                first.check_same_structure(block).map_err(|why| {
                    Error::invalid(format!(
                        "block {} (key {}) does not match block 0 (key {}): {why}",
                        i + 1,
                        describe_entry(&keys, i + 1),
                        describe_entry(&keys, 0)
                    ))
                })?;
            }
        }
        Ok(TensorMap {
            keys,
            blocks,
            info: BTreeMap::new(),
        })
    }

    /// Make the blocks' equal labels one object each (the same names and
    /// rows: see [`Interner`]): a map assembled from blocks made one by
    /// one then holds each distinct samples, components and properties
    /// once, and its pickles send each once (`pickle/writer.rs` refers to
    /// labels sent before by identity). Nothing observable changes but
    /// memory and identity. Costs a few row reads per labels and one
    /// comparison of each labels equal to an earlier one.
    pub fn share_equal_labels(&mut self) -> Result<()> {
        let mut interner = Interner::new();
        for block in &mut self.blocks {
            block.share_labels(&mut interner)?;
        }
        Ok(())
    }

    /// The keys, one entry per block.
    pub fn keys(&self) -> &Labels {
        &self.keys
    }

    /// The blocks, in key order.
    pub fn blocks(&self) -> &[TensorBlock] {
        &self.blocks
    }

    /// Block `i`.
    pub fn block(&self, i: usize) -> Result<&TensorBlock> {
        self.blocks.get(i).ok_or_else(|| {
            Error::invalid(format!(
                "block index {i} is out of range for a map of {} blocks",
                self.blocks.len()
            ))
        })
    }

    /// Indices of the blocks whose keys match one of the entries of
    /// `selection` on the selection's dimensions (a subset of the keys'
    /// dimensions), in key order, as metatensor-core's `keys.select` finds
    /// them. A selection without dimensions and with one entry matches
    /// every block; a selection without entries matches none.
    pub fn select(&self, selection: &Labels) -> Result<Vec<usize>> {
        let dimensions = selection
            .names()
            .iter()
            .map(|name| {
                self.keys.dimension(name).ok_or_else(|| {
                    Error::invalid(format!(
                        "'{name}' in the selection is not a key dimension; the keys are {}",
                        Names(self.keys.names())
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if selection.is_empty() {
            return Ok(Vec::new());
        }
        let mut entry = vec![0; dimensions.len()];
        let mut matching = Vec::new();
        if !dimensions.is_empty() && dimensions.len() == self.keys.size() {
            // Every key dimension is selected (in any order): each entry of
            // the selection is at most one key, found in the keys' index.
            // Scanning every key instead made `block()` O(blocks), and a
            // lookup of every block by its key O(blocks^2).
            for j in 0..selection.count() {
                for (&value, &d) in selection.row(j).iter().zip(&dimensions) {
                    entry[d] = value;
                }
                if let Some(i) = self.keys.position(&entry)? {
                    matching.push(i);
                }
            }
            matching.sort_unstable();
            matching.dedup();
            return Ok(matching);
        }
        for i in 0..self.keys.count() {
            let row = self.keys.row(i);
            for (value, &d) in entry.iter_mut().zip(&dimensions) {
                *value = row[d];
            }
            if selection.position(&entry)?.is_some() {
                matching.push(i);
            }
        }
        Ok(matching)
    }

    /// Free-form metadata: string keys and values.
    pub fn info(&self) -> &BTreeMap<String, String> {
        &self.info
    }

    /// Set an info entry, replacing any value it had; an error (and the
    /// info unchanged) when the info would no longer fit in an archive's
    /// `info.json` (see `limits.rs`).
    pub fn set_info(&mut self, key: String, value: String) -> Result<()> {
        let previous = self.info.insert(key.clone(), value);
        if let Err(error) = crate::limits::check_info(&self.info) {
            match previous {
                Some(previous) => self.info.insert(key, previous),
                None => self.info.remove(&key),
            };
            return Err(error);
        }
        Ok(())
    }

    /// Replace the whole info (checked as by [`TensorMap::set_info`], once).
    pub fn replace_info(&mut self, info: BTreeMap<String, String>) -> Result<()> {
        crate::limits::check_info(&info)?;
        self.info = info;
        Ok(())
    }

    /// Sample names shared by all blocks (empty for a map without blocks).
    pub fn sample_names(&self) -> Vec<String> {
        self.blocks
            .first()
            .map(|b| b.samples().names().to_vec())
            .unwrap_or_default()
    }

    /// Component names shared by all blocks.
    pub fn component_names(&self) -> Vec<String> {
        self.blocks
            .first()
            .map(TensorBlock::component_names)
            .unwrap_or_default()
    }

    /// Property names shared by all blocks.
    pub fn property_names(&self) -> Vec<String> {
        self.blocks
            .first()
            .map(|b| b.properties().names().to_vec())
            .unwrap_or_default()
    }

    /// A deep copy: all array memory new.
    pub fn deep_copy(&self) -> Result<Self> {
        Ok(TensorMap {
            keys: self.keys.clone(),
            blocks: self
                .blocks
                .iter()
                .map(|block| {
                    crate::interrupt::check()?;
                    block.deep_copy()
                })
                .collect::<Result<_>>()?,
            info: crate::limits::try_clone_info(&self.info)?,
        })
    }

    /// Bytes of array data in the map (block values, gradients, labels).
    pub fn nbytes(&self) -> usize {
        self.keys.values().bytes().len()
            + self.blocks.iter().map(TensorBlock::nbytes).sum::<usize>()
    }
}

/// `{a=1, b=2}` for entry `i` of `labels`.
pub(crate) fn describe_entry(labels: &Labels, i: usize) -> String {
    let pairs: Vec<String> = labels
        .names()
        .iter()
        .zip(labels.row(i))
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    format!("{{{}}}", pairs.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::Array;
    use crate::dtype::DType;

    fn block(sample_name: &str) -> TensorBlock {
        TensorBlock::new(
            Array::zeros(DType::F8, vec![2, 3]).unwrap(),
            Labels::new(vec![sample_name], &[0, 1]).unwrap(),
            vec![],
            Labels::range("p", 3).unwrap(),
        )
        .unwrap()
    }

    fn keys() -> Labels {
        Labels::new(vec!["l", "t"], &[0, 1, 0, 6, 1, 1]).unwrap()
    }

    #[test]
    fn equal_labels_are_shared_with_gradients() {
        let with_gradient = |samples: &[i32]| {
            let mut block = TensorBlock::new(
                Array::zeros(DType::F8, vec![2, 3]).unwrap(),
                Labels::new(vec!["s"], samples).unwrap(),
                vec![],
                Labels::range("p", 3).unwrap(),
            )
            .unwrap();
            let gradient = TensorBlock::new(
                Array::zeros(DType::F8, vec![2, 3]).unwrap(),
                Labels::new(vec!["sample", "g"], &[0, 0, 1, 0]).unwrap(),
                vec![],
                Labels::range("p", 3).unwrap(),
            )
            .unwrap();
            block.add_gradient("x", gradient).unwrap();
            block
        };
        let blocks = vec![
            with_gradient(&[0, 1]),
            with_gradient(&[0, 2]),
            with_gradient(&[0, 1]),
        ];
        let mut map = TensorMap::new(keys(), blocks).unwrap();
        let before = map.clone();
        map.share_equal_labels().unwrap();
        assert_eq!(map, before);
        let b = map.blocks();
        let gradient = |i: usize| b[i].gradient("x").unwrap();
        assert!(b[2].samples().ptr_eq(b[0].samples()));
        assert!(!b[1].samples().ptr_eq(b[0].samples()));
        for i in 0..3 {
            assert!(b[i].properties().ptr_eq(b[0].properties()));
            assert!(gradient(i).properties().ptr_eq(b[0].properties()));
            assert!(gradient(i).samples().ptr_eq(gradient(0).samples()));
        }
    }

    #[test]
    fn one_block_per_key() {
        let err = TensorMap::new(keys(), vec![block("s"), block("s")]).unwrap_err();
        assert!(
            err.to_string().contains("2 block(s) for 3 key entries"),
            "{err}"
        );
        assert!(TensorMap::new(Labels::empty(vec!["k"]).unwrap(), vec![]).is_ok());
    }

    #[test]
    fn blocks_share_names() {
        let err = TensorMap::new(keys(), vec![block("s"), block("s"), block("x")]).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("block 2 (key {l=1, t=1})"), "{message}");
        assert!(message.contains("sample names"), "{message}");
    }

    #[test]
    fn one_dtype_per_map() {
        let float32 = TensorBlock::new(
            Array::zeros(DType::F4, vec![2, 3]).unwrap(),
            Labels::new(vec!["s"], &[0, 1]).unwrap(),
            vec![],
            Labels::range("p", 3).unwrap(),
        )
        .unwrap();
        let err = TensorMap::new(keys(), vec![block("s"), block("s"), float32]).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("block 2 (key {l=1, t=1}) is float32")
                && message.contains("is float64"),
            "{message}"
        );
    }

    #[test]
    fn selection() {
        let map = TensorMap::new(keys(), vec![block("s"), block("s"), block("s")]).unwrap();
        let sel = |names: &[&str], values: &[i32]| {
            map.select(&Labels::new(names.to_vec(), values).unwrap())
        };
        assert_eq!(sel(&["l"], &[0]).unwrap(), vec![0, 1]);
        assert_eq!(sel(&["l", "t"], &[0, 6]).unwrap(), vec![1]);
        assert_eq!(sel(&["t", "l"], &[6, 0]).unwrap(), vec![1]);
        assert_eq!(sel(&["t"], &[7]).unwrap(), Vec::<usize>::new());
        // several entries: the blocks matching any of them, in key order
        assert_eq!(sel(&["t"], &[6, 1]).unwrap(), vec![0, 1, 2]);
        assert_eq!(sel(&["t"], &[]).unwrap(), Vec::<usize>::new());
        let everything =
            Labels::from_array(vec![], Array::zeros(DType::I4, vec![1, 0]).unwrap(), false)
                .unwrap();
        assert_eq!(map.select(&everything).unwrap(), vec![0, 1, 2]);
        assert!(sel(&["x"], &[0]).is_err());
        assert!(map.block(3).is_err());
    }

    #[test]
    fn selection_on_every_key_dimension_uses_the_index() {
        let map = TensorMap::new(keys(), vec![block("s"), block("s"), block("s")]).unwrap();
        let sel = |names: &[&str], values: &[i32]| {
            map.select(&Labels::new(names.to_vec(), values).unwrap())
                .unwrap()
        };
        // in key order whatever the selection's order; absent entries select nothing
        assert_eq!(sel(&["l", "t"], &[1, 1, 0, 1, 5, 5]), vec![0, 2]);
        assert_eq!(sel(&["t", "l"], &[1, 1, 6, 0]), vec![1, 2]);
        assert_eq!(sel(&["l", "t"], &[9, 9]), Vec::<usize>::new());
        // many keys of one dimension: the positions of the entries, in key order
        let many = Labels::new(vec!["k"], &(0..2000).rev().collect::<Vec<i32>>()).unwrap();
        let blocks = (0..2000).map(|_| block("s")).collect();
        let map = TensorMap::new(many, blocks).unwrap();
        let found = map
            .select(&Labels::new(vec!["k"], &[7, 1999, 3]).unwrap())
            .unwrap();
        assert_eq!(found, vec![0, 1992, 1996]);
    }

    #[test]
    fn info_names_and_copy() {
        let mut map = TensorMap::new(keys(), vec![block("s"), block("s"), block("s")]).unwrap();
        map.set_info("origin".into(), "test".into()).unwrap();
        assert_eq!(map.info()["origin"], "test");
        assert_eq!(map.sample_names(), vec!["s"]);
        assert_eq!(map.property_names(), vec!["p"]);
        assert!(map.component_names().is_empty());
        let copy = map.deep_copy().unwrap();
        assert_eq!(copy, map);
        assert_ne!(
            copy.blocks()[0].values().buffer().as_ptr(),
            map.blocks()[0].values().buffer().as_ptr()
        );
        assert_eq!(map.nbytes(), 3 * 4 * 2 + 3 * (48 + 8 + 12));
    }
}
