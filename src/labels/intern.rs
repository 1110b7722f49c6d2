//! Equal labels made one object: where a map is assembled from blocks made
//! one by one (every block with its own copy of the same samples, the same
//! components and properties), labels equal to ones met before are
//! replaced by those, so that the map holds each distinct labels once.
//! Labels never change, so sharing is invisible but for memory and
//! identity (`Labels::ptr_eq`), which the pickle writer uses to send equal
//! labels once whatever their size (`pickle/writer.rs`).

use std::hash::BuildHasher;

use super::Labels;
use crate::error::Result;

/// Rows compared by the bucket key: the first, the last and evenly spaced
/// ones between (labels that differ only elsewhere share a bucket and are
/// told apart by a full comparison).
const KEY_ROWS: usize = 9;

/// Distinct labels kept per bucket: labels whose key matches this many
/// distinct ones are left as they are, so that crafted labels that all
/// share a key cost at most this many comparisons each (no quadratic
/// time), never an error.
pub const PER_BUCKET: usize = 4;

/// A hash of the names, the count and [`KEY_ROWS`] rows of `labels` (the
/// first, the last and evenly spaced ones between): equal labels have the
/// same key, computed in constant time whatever their size. Labels with
/// equal keys may still differ: a full comparison decides.
pub fn sampled_key(hasher: &impl BuildHasher, labels: &Labels) -> u64 {
    let count = labels.count();
    let mut state = hasher.build_hasher();
    std::hash::Hash::hash(labels.names(), &mut state);
    std::hash::Hash::hash(&count, &mut state);
    if count > 0 {
        for k in 0..KEY_ROWS {
            std::hash::Hash::hash(labels.row(k * (count - 1) / (KEY_ROWS - 1)), &mut state);
        }
    }
    std::hash::Hasher::finish(&state)
}

/// The labels met so far, by a key of their names, count and a few rows.
#[derive(Debug, Default)]
pub struct Interner {
    hasher: hashbrown::DefaultHashBuilder,
    /// distinct labels kept, by key hash (a bucket holds at most
    /// [`PER_BUCKET`])
    kept: hashbrown::HashMap<u64, Vec<Labels>>,
    /// the identities of the labels kept: labels already shared are found
    /// without computing their key
    identities: hashbrown::HashSet<usize>,
}

impl Interner {
    /// An interner that has met no labels.
    pub fn new() -> Self {
        Self::default()
    }

    fn key(&self, labels: &Labels) -> u64 {
        sampled_key(&self.hasher, labels)
    }

    /// Replace `labels` by equal labels met before (the same names and
    /// rows), or keep them for later ones to share.
    pub fn share(&mut self, labels: &mut Labels) -> Result<()> {
        if self.identities.contains(&labels.identity()) {
            return Ok(());
        }
        let key = self.key(labels);
        self.kept.try_reserve(1)?;
        let bucket = self.kept.entry(key).or_default();
        if let Some(same) = bucket.iter().find(|kept| {
            kept.names() == labels.names() && kept.value_bytes() == labels.value_bytes()
        }) {
            *labels = same.clone();
            return Ok(());
        }
        if bucket.len() < PER_BUCKET {
            bucket.try_reserve(1)?;
            bucket.push(labels.clone());
            self.identities.try_reserve(1)?;
            self.identities.insert(labels.identity());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_labels_become_one_object_and_others_stay() {
        let a = Labels::new(vec!["s", "a"], &[0, 0, 0, 1, 1, 0]).unwrap();
        let mut b = Labels::new(vec!["s", "a"], &[0, 0, 0, 1, 1, 0]).unwrap();
        let mut other_names = Labels::new(vec!["s", "b"], &[0, 0, 0, 1, 1, 0]).unwrap();
        // the same first, last and count, another row in between
        let mut middle = Labels::new(vec!["s", "a"], &[0, 0, 0, 2, 1, 0]).unwrap();
        let mut interner = Interner::new();
        let mut first = a.clone();
        interner.share(&mut first).unwrap();
        assert!(first.ptr_eq(&a));
        assert!(!b.ptr_eq(&a));
        interner.share(&mut b).unwrap();
        assert!(b.ptr_eq(&a));
        interner.share(&mut other_names).unwrap();
        assert!(!other_names.ptr_eq(&a));
        interner.share(&mut middle).unwrap();
        assert!(!middle.ptr_eq(&a));
        assert_eq!(middle.raw(), &[0, 0, 0, 2, 1, 0]);
    }

    #[test]
    fn a_full_bucket_leaves_labels_as_they_are() {
        // labels that share a key (same names, count and the rows the key
        // reads) but differ elsewhere: past PER_BUCKET distinct ones, new
        // ones are kept apart, still correct
        let make = |x: i32| {
            let mut rows: Vec<i32> = (0..100).map(|i| 10 * i).collect();
            rows[1] = 1 + x; // never one of the rows the key reads, still sorted
            Labels::new(vec!["i"], &rows).unwrap()
        };
        let per_bucket = i32::try_from(PER_BUCKET).unwrap();
        let mut interner = Interner::new();
        for x in 0..per_bucket + 3 {
            let mut labels = make(x);
            interner.share(&mut labels).unwrap();
        }
        let mut again = make(0);
        interner.share(&mut again).unwrap();
        assert_eq!(again, make(0));
        let mut late = make(per_bucket + 1);
        let before = late.clone();
        interner.share(&mut late).unwrap();
        assert!(late.ptr_eq(&before));
    }

    #[test]
    fn empty_labels_are_shared_too() {
        let a = Labels::empty(vec!["x"]).unwrap();
        let mut b = Labels::empty(vec!["x"]).unwrap();
        let mut interner = Interner::new();
        let mut first = a.clone();
        interner.share(&mut first).unwrap();
        interner.share(&mut b).unwrap();
        assert!(b.ptr_eq(&a));
    }
}
