//! Sets of label rows, for the operations that merge blocks: rows kept in
//! the order they were first inserted, found again by value, and sorted on
//! demand. Private to `ops` (label set operations are not part of the
//! public Labels API here).

use std::hash::BuildHasher;

use hashbrown::hash_table::Entry;
use hashbrown::HashTable;

use crate::array::Array;
use crate::error::{Error, Result};
use crate::labels::Labels;

/// Unique rows of `width` int32 values, in insertion order.
pub(super) struct RowSet {
    width: usize,
    values: Vec<i32>,
    count: usize,
    table: HashTable<usize>,
    hasher: hashbrown::DefaultHashBuilder,
}

impl RowSet {
    pub(super) fn with_capacity(width: usize, capacity: usize) -> Self {
        RowSet {
            width,
            values: Vec::with_capacity(capacity.saturating_mul(width)),
            count: 0,
            table: HashTable::with_capacity(capacity),
            hasher: hashbrown::DefaultHashBuilder::default(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.count
    }

    fn row(values: &[i32], width: usize, i: usize) -> &[i32] {
        &values[i * width..(i + 1) * width]
    }

    /// The position of `row`, inserting it at the end when it is new.
    pub(super) fn insert(&mut self, row: &[i32]) -> usize {
        debug_assert_eq!(row.len(), self.width);
        let (values, width) = (&self.values, self.width);
        let hash = self.hasher.hash_one(row);
        let hasher = &self.hasher;
        match self.table.entry(
            hash,
            |&j| Self::row(values, width, j) == row,
            |&j| hasher.hash_one(Self::row(values, width, j)),
        ) {
            Entry::Occupied(entry) => *entry.get(),
            Entry::Vacant(entry) => {
                let position = self.count;
                entry.insert(position);
                self.values.extend_from_slice(row);
                self.count += 1;
                position
            }
        }
    }

    /// Sort the rows lexicographically; returns, for each old position,
    /// the new one.
    pub(super) fn sort(&mut self) -> Vec<usize> {
        let width = self.width;
        let values = &self.values;
        let mut order: Vec<usize> = (0..self.count).collect();
        order.sort_unstable_by(|&a, &b| {
            Self::row(values, width, a).cmp(Self::row(values, width, b))
        });
        let mut new_position = vec![0; self.count];
        let mut sorted = Vec::with_capacity(self.values.len());
        for (new, &old) in order.iter().enumerate() {
            new_position[old] = new;
            sorted.extend_from_slice(Self::row(values, width, old));
        }
        self.values = sorted;
        // the table now points to old positions; it is not used again after
        // sorting (the rows become labels), so it is dropped
        self.table = HashTable::new();
        new_position
    }

    /// Labels named `names` holding the rows (unique by construction).
    pub(super) fn into_labels(self, names: Vec<String>) -> Result<Labels> {
        let array = Array::from_slice(vec![self.count, self.width], &self.values)?;
        Labels::from_array(names, array, true)
    }
}

/// `position` as an int32 label value.
pub(super) fn label_value(position: usize) -> Result<i32> {
    i32::try_from(position).map_err(|_| {
        Error::invalid(format!(
            "the merged block would have {position} samples or more, more than an int32 \
             'sample' label can point to"
        ))
    })
}

/// Whether the rows of `labels` are in strictly increasing order (sorted
/// and unique).
pub(super) fn is_sorted(labels: &Labels) -> bool {
    let raw = labels.raw();
    let width = labels.size();
    if width == 0 {
        return labels.count() <= 1;
    }
    raw.chunks_exact(width)
        .zip(raw.chunks_exact(width).skip(1))
        .all(|(previous, row)| previous < row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insertion_order_lookup_and_sort() {
        let mut rows = RowSet::with_capacity(2, 0);
        assert_eq!(rows.insert(&[3, 1]), 0);
        assert_eq!(rows.insert(&[0, 2]), 1);
        assert_eq!(rows.insert(&[3, 1]), 0);
        assert_eq!(rows.insert(&[0, -1]), 2);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows.sort(), vec![2, 1, 0]);
        let labels = rows.into_labels(vec!["a".into(), "b".into()]).unwrap();
        assert_eq!(labels.raw(), &[0, -1, 0, 2, 3, 1]);
        assert!(is_sorted(&labels));
    }

    #[test]
    fn rows_without_values() {
        let mut rows = RowSet::with_capacity(0, 4);
        assert_eq!(rows.insert(&[]), 0);
        assert_eq!(rows.insert(&[]), 0);
        assert_eq!(rows.len(), 1);
        let labels = rows.into_labels(vec![]).unwrap();
        assert_eq!(labels.count(), 1);
        assert!(label_value(1 << 40).is_err());
    }
}
