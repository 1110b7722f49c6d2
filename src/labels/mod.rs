//! Labels: named int32 columns with one unique row per entry.
//!
//! This file holds the type, its validation and its lookup index; the
//! operations that make new Labels from existing ones are in the other
//! files: set operations (`set.rs`), selection (`select.rs`), changes of
//! dimensions (`dimensions.rs`) and metatensor's text layout (`print.rs`).
//! Every operation returns new Labels whose values live in memory blockmap
//! owns, and costs O(entries): lookups go through the hash index.

mod dimensions;
mod intern;
mod print;
mod select;
mod set;

pub use intern::{sampled_key, Interner, PER_BUCKET};

use std::fmt;
use std::hash::BuildHasher;

use crate::arc::{ForkArc, SetOnce};

use hashbrown::HashTable;

use crate::array::byte_len;
use crate::array::Array;
use crate::buffer::{AlignedBytes, Buffer};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// Whether `name` can name a label dimension: an ASCII identifier
/// (letters, digits and `_`, not starting with a digit), as in metatensor.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(first) if first.is_ascii_alphabetic() || first == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Displays a list of names as Python does: `['system', 'atom']`.
#[derive(Debug, Clone, Copy)]
pub struct Names<'a>(pub &'a [String]);

impl fmt::Display for Names<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, name) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "'{name}'")?;
        }
        f.write_str("]")
    }
}

/// Named int32 columns (dimensions), one row per entry, rows unique.
///
/// Labels are immutable; cloning them is O(1) and shares the values. The
/// values are a `count x size` int32 [`Array`] in native byte order.
#[derive(Clone)]
pub struct Labels(ForkArc<Inner>);

struct Inner {
    names: Vec<String>,
    values: Array,
    /// row position lookup, built on first use (or by the uniqueness check)
    /// (a `SetOnce`: never waits, so a child forked while another thread
    /// stored it never waits for that thread)
    index: SetOnce<Index>,
}

struct Index {
    table: HashTable<usize>,
    hasher: hashbrown::DefaultHashBuilder,
}

impl Index {
    /// Build the index over `count` rows of `size` values. Of equal rows the
    /// first is indexed; the first pair of equal rows found is returned too.
    /// The table is allocated without aborting when memory cannot be had.
    fn build(values: &[i32], size: usize, count: usize) -> Result<(Index, Option<(usize, usize)>)> {
        let hasher = hashbrown::DefaultHashBuilder::default();
        let mut table = HashTable::new();
        let row = |i: usize| &values[i * size..(i + 1) * size];
        table
            .try_reserve(count, |&j| hasher.hash_one(row(j)))
            .map_err(|_| {
                Error::OutOfMemory(format!(
                    "cannot allocate the lookup index of {count} label entries: out of memory"
                ))
            })?;
        let mut duplicate = None;
        for i in 0..count {
            let hash = hasher.hash_one(row(i));
            match table.entry(hash, |&j| row(j) == row(i), |&j| hasher.hash_one(row(j))) {
                hashbrown::hash_table::Entry::Occupied(entry) => {
                    duplicate = duplicate.or(Some((*entry.get(), i)));
                }
                hashbrown::hash_table::Entry::Vacant(entry) => {
                    entry.insert(i);
                }
            }
        }
        Ok((Index { table, hasher }, duplicate))
    }
}

/// Labels of at most this many entries are searched row by row, with no
/// hash index: as fast at this size, no allocation, and nothing written
/// into the labels, which matters after a fork (the keys of a dataset's
/// many small maps stay on pages shared with the parent process; see
/// [`crate::arc`]).
const SCAN_ROWS: usize = 16;

/// Lookups of entries in Labels: through their index, or row by row for
/// small labels.
struct Lookup<'a> {
    labels: &'a Labels,
    index: Option<&'a Index>,
}

impl Lookup<'_> {
    /// Position of `entry`, which has one value per dimension.
    fn find(&self, entry: &[i32]) -> Option<usize> {
        let Some(index) = self.index else {
            return (0..self.labels.count()).find(|&j| self.labels.row(j) == entry);
        };
        let hash = index.hasher.hash_one(entry);
        index
            .table
            .find(hash, |&j| self.labels.row(j) == entry)
            .copied()
    }
}

impl Labels {
    /// Labels with `names` and row-major `values` (`count x names.len()`),
    /// checking that names are valid and rows unique.
    pub fn new<S: Into<String>>(names: Vec<S>, values: &[i32]) -> Result<Self> {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        let count = match names.len() {
            0 if values.is_empty() => 0,
            0 => {
                return Err(Error::invalid(
                    "labels without dimensions cannot have values",
                ))
            }
            size if !values.len().is_multiple_of(size) => {
                return Err(Error::invalid(format!(
                    "{} label values do not fill rows of {size} dimensions",
                    values.len()
                )))
            }
            size => values.len() / size,
        };
        let array = Array::from_slice(vec![count, names.len()], values)?;
        Labels::from_array(names, array, false)
    }

    /// Labels of an int32 `count x names.len()` array: its memory when it
    /// is memory blockmap allocated that nothing else references, a copy
    /// otherwise (labels own what they validated). With `assume_unique`,
    /// the check that rows are unique is skipped
    /// (the caller vouches for it); position lookups then find the first
    /// of equal rows.
    pub fn from_array(names: Vec<String>, values: Array, assume_unique: bool) -> Result<Self> {
        // validated means owned: nothing the caller (or another thread, or
        // another process) can write may reach the labels once checked
        let values = owned(values)?;
        Labels::from_own_array(names, values, assume_unique)
    }

    /// [`Labels::from_array`] for values that are already labels' own
    /// memory (those of other labels, which never change): shared, not
    /// copied.
    pub(crate) fn from_own_array(
        names: Vec<String>,
        values: Array,
        assume_unique: bool,
    ) -> Result<Self> {
        // private already (labels' own, a fresh read-only copy): kept as is
        let values = values.into_private()?;
        check_names(&names)?;
        if values.dtype() != DType::I4 {
            return Err(Error::invalid(format!(
                "label values must be int32, got {}",
                values.dtype()
            )));
        }
        if values.shape().len() != 2 || values.shape()[1] != names.len() {
            return Err(Error::invalid(format!(
                "label values must have shape (count, {}) for dimensions {}, got {:?}",
                names.len(),
                Names(&names),
                values.shape()
            )));
        }
        let index = if assume_unique {
            None
        } else {
            unique_rows(&names, as_i32(&values), values.shape()[0])?
        };
        let labels = Labels(ForkArc::new(Inner {
            names,
            values,
            index: SetOnce::new(),
        }));
        if let Some(index) = index {
            // the cell is new and owned here, so this cannot fail
            let _ = labels.0.index.set(index);
        }
        Ok(labels)
    }

    /// Check that `names` are valid and the `count` rows of `values`
    /// (row-major, one value per name) are unique, as [`Labels::from_array`]
    /// does, without making Labels.
    pub fn check(names: &[String], values: &[i32], count: usize) -> Result<()> {
        check_names(names)?;
        if count.checked_mul(names.len()) != Some(values.len()) {
            return Err(Error::invalid(format!(
                "{} label values for {count} entries of {} dimensions",
                values.len(),
                names.len()
            )));
        }
        unique_rows(names, values, count).map(drop)
    }

    /// Labels from an int32 buffer holding `count x names.len()` values
    /// (copied unless nothing else references it, see [`Labels::from_array`]).
    pub fn from_buffer(
        names: Vec<String>,
        count: usize,
        buffer: Buffer,
        assume_unique: bool,
    ) -> Result<Self> {
        let array = Array::new(DType::I4, vec![count, names.len()], buffer)?;
        Labels::from_array(names, array, assume_unique)
    }

    /// One entry with one dimension `_` of value 0, for maps or blocks
    /// without real keys or samples.
    ///
    /// # Panics
    ///
    /// Never: these labels are valid (a unit test builds them).
    pub fn single() -> Self {
        Labels::new(vec!["_"], &[0]).expect("valid labels")
    }

    /// No entries, with these dimension names.
    pub fn empty<S: Into<String>>(names: Vec<S>) -> Result<Self> {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        Labels::from_array(
            names.clone(),
            Array::zeros(DType::I4, vec![0, names.len()])?,
            true,
        )
    }

    /// One dimension `name` with entries `0..end`.
    pub fn range(name: &str, end: i32) -> Result<Self> {
        if end < 0 {
            return Err(Error::invalid(format!("range end must be >= 0, got {end}")));
        }
        let count = usize::try_from(end).unwrap_or(0);
        let mut bytes = AlignedBytes::zeroed(count * DType::I4.size())?;
        for (value, chunk) in (0..end).zip(bytes.as_mut_slice().chunks_exact_mut(4)) {
            chunk.copy_from_slice(&value.to_ne_bytes());
        }
        let array = Array::new(DType::I4, vec![count, 1], Buffer::from(bytes))?;
        Labels::from_array(vec![name.to_string()], array, true)
    }

    /// Names of the dimensions.
    pub fn names(&self) -> &[String] {
        &self.0.names
    }

    /// Number of dimensions.
    pub fn size(&self) -> usize {
        self.0.names.len()
    }

    /// Number of entries.
    pub fn count(&self) -> usize {
        self.0.values.shape()[0]
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// The `count x size` int32 values.
    pub fn values(&self) -> &Array {
        &self.0.values
    }

    /// The values as a flat row-major slice.
    pub fn raw(&self) -> &[i32] {
        as_i32(&self.0.values)
    }

    /// Entry `i`; panics when `i >= count()` like slice indexing.
    pub fn row(&self, i: usize) -> &[i32] {
        let size = self.size();
        &self.raw()[i * size..(i + 1) * size]
    }

    /// Position of dimension `name`.
    pub fn dimension(&self, name: &str) -> Option<usize> {
        self.0.names.iter().position(|n| n == name)
    }

    /// The values of dimension `name`, as a new vector.
    pub fn column(&self, name: &str) -> Result<Vec<i32>> {
        let d = self.dimension(name).ok_or_else(|| {
            Error::invalid(format!(
                "labels {} have no dimension '{name}'",
                Names(self.names())
            ))
        })?;
        Ok((0..self.count()).map(|i| self.row(i)[d]).collect())
    }

    /// Lookups through the index, built on first use (an error when its
    /// memory cannot be had).
    fn lookup(&self) -> Result<Lookup<'_>> {
        if self.count() <= SCAN_ROWS {
            return Ok(Lookup {
                labels: self,
                index: None,
            });
        }
        if self.0.index.get().is_none() {
            let (index, _) = Index::build(self.raw(), self.size(), self.count())?;
            // another thread may have set it first: either is the index
            let _ = self.0.index.set(index);
        }
        let index = self
            .0
            .index
            .get()
            .ok_or_else(|| Error::internal("the labels index was not kept"))?;
        Ok(Lookup {
            labels: self,
            index: Some(index),
        })
    }

    /// Position of `entry`, or `None`; an error when `entry` does not have
    /// one value per dimension.
    pub fn position(&self, entry: &[i32]) -> Result<Option<usize>> {
        if entry.len() != self.size() {
            return Err(Error::invalid(format!(
                "entry {entry:?} has {} values, labels {} have {} dimensions",
                entry.len(),
                Names(self.names()),
                self.size()
            )));
        }
        Ok(self.lookup()?.find(entry))
    }

    /// The values' bytes, row-major: labels' memory is private (made so
    /// at construction, see "Aliasing" in `buffer/mod.rs`), so it is seen
    /// in place.
    ///
    /// # Panics
    ///
    /// Never: every constructor makes the values private
    /// (`from_own_array`).
    pub fn value_bytes(&self) -> &[u8] {
        self.values()
            .buffer()
            .private_bytes()
            .expect("labels values are private (made so at construction)")
    }

    /// Whether the two labels are the same object (not just equal).
    pub fn ptr_eq(&self, other: &Labels) -> bool {
        ForkArc::ptr_eq(&self.0, &other.0)
    }

    /// A number that identifies the object (not its content) while it
    /// lives: two labels have the same identity exactly when
    /// [`Labels::ptr_eq`] holds. Used as a key, never dereferenced.
    pub fn identity(&self) -> usize {
        std::ptr::from_ref::<Inner>(&*self.0).addr()
    }
}

/// `values` in memory only these labels reference, private (the aliasing
/// rule, `buffer/mod.rs`): the same memory when it is blockmap's own
/// allocation that nothing else holds (frozen read-only), a copy otherwise.
fn owned(values: Array) -> Result<Array> {
    values.into_private()
}

/// The values of new Labels, written entry by entry into memory blockmap
/// owns (allocated once, at the final size, without aborting when it
/// cannot be had).
struct Rows {
    bytes: AlignedBytes,
    /// entries announced
    count: usize,
    /// values per entry
    size: usize,
    /// entries written so far
    written: usize,
}

impl Rows {
    /// Room for `count` entries of `size` values.
    fn new(count: usize, size: usize) -> Result<Self> {
        let len = byte_len(DType::I4, &[count, size])?;
        Ok(Rows {
            bytes: AlignedBytes::zeroed(len)?,
            count,
            size,
            written: 0,
        })
    }

    /// The room for the next `entries` entries, or an internal error when
    /// the caller counted wrong (never a panic).
    fn next(&mut self, entries: usize) -> Result<&mut [u8]> {
        let row = self.size * DType::I4.size();
        let end = self
            .written
            .checked_add(entries)
            .filter(|&end| end <= self.count)
            .ok_or_else(|| Error::internal("more label entries written than counted"))?;
        let room = &mut self.bytes.as_mut_slice()[self.written * row..end * row];
        self.written = end;
        Ok(room)
    }

    /// Add one entry (`size` values).
    fn push(&mut self, entry: &[i32]) -> Result<()> {
        if entry.len() != self.size {
            return Err(Error::internal("a label entry of the wrong size"));
        }
        for (bytes, value) in self.next(1)?.chunks_exact_mut(4).zip(entry) {
            bytes.copy_from_slice(&value.to_ne_bytes());
        }
        Ok(())
    }

    /// Add the entries of `labels` from `start` to `end` (copied whole).
    fn push_from(&mut self, labels: &Labels, start: usize, end: usize) -> Result<()> {
        let row = self.size * DType::I4.size();
        let source = labels
            .value_bytes()
            .get(start * row..end * row)
            .filter(|_| labels.size() == self.size && start <= end)
            .ok_or_else(|| Error::internal("label entries copied from out of range"))?;
        self.next(end - start)?.copy_from_slice(source);
        Ok(())
    }

    /// The Labels: `names` over the entries written, all of them. With
    /// `assume_unique`, the caller vouches that the entries are unique.
    fn finish(self, names: Vec<String>, assume_unique: bool) -> Result<Labels> {
        if self.written != self.count {
            return Err(Error::internal("fewer label entries written than counted"));
        }
        let array = Array::new(
            DType::I4,
            vec![self.count, self.size],
            Buffer::from(self.bytes),
        )?;
        Labels::from_array(names, array, assume_unique)
    }
}

/// The values of an int32 array (checked by the callers).
fn as_i32(values: &Array) -> &[i32] {
    values
        .as_slice::<i32>()
        .expect("labels values are int32 (checked at construction)")
}

/// Whether the rows are in strictly increasing (lexicographic) order,
/// which proves them unique in one cheap pass: labels are most often
/// sorted, and then no hash index is needed until the first lookup.
fn is_strictly_increasing(raw: &[i32], size: usize, count: usize) -> bool {
    match size {
        0 => count <= 1,
        // the common shapes, compared without slice machinery
        1 => raw.windows(2).all(|w| w[0] < w[1]),
        2 => raw
            .chunks_exact(2)
            .zip(raw.chunks_exact(2).skip(1))
            .all(|(p, r)| (p[0], p[1]) < (r[0], r[1])),
        // gradient samples (sample, system, atom): as tuples too (a slice
        // comparison took about three times as long per row)
        3 => raw
            .chunks_exact(3)
            .zip(raw.chunks_exact(3).skip(1))
            .all(|(p, r)| (p[0], p[1], p[2]) < (r[0], r[1], r[2])),
        size => raw
            .chunks_exact(size)
            .zip(raw.chunks_exact(size).skip(1))
            .all(|(previous, row)| previous < row),
    }
}

/// Check that the rows are unique; returns the hash index when one had to
/// be built (unsorted rows).
fn unique_rows(names: &[String], raw: &[i32], count: usize) -> Result<Option<Index>> {
    let size = names.len();
    // Rows without dimensions are all equal, so more than one is a
    // duplicate. Said before building the index: no data backs `count`
    // then (an NPY header `'descr': [], 'shape': (10**12,)` announces zero
    // bytes), and an index of that capacity would exhaust memory (fuzzing).
    if size == 0 && count > 1 {
        return Err(Error::invalid(format!(
            "labels without dimensions have {count} entries: the entry [] is there \
             twice (rows 0 and 1)"
        )));
    }
    if is_strictly_increasing(raw, size, count) {
        return Ok(None);
    }
    let (index, duplicate) = if count <= SCAN_ROWS {
        let row = |i: usize| &raw[i * size..(i + 1) * size];
        let pair = (0..count).find_map(|j| (0..j).find(|&i| row(i) == row(j)).map(|i| (i, j)));
        (None, pair)
    } else {
        let (index, duplicate) = Index::build(raw, size, count)?;
        (Some(index), duplicate)
    };
    if let Some((first, second)) = duplicate {
        return Err(Error::invalid(format!(
            "labels {} have the entry {:?} twice (rows {first} and {second})",
            Names(names),
            &raw[first * size..(first + 1) * size]
        )));
    }
    Ok(index)
}

fn check_names(names: &[String]) -> Result<()> {
    let size = crate::limits::label_names_size(names);
    if size > crate::limits::MAX_LABEL_NAMES {
        return Err(Error::invalid(format!(
            "the {} label names take {size} bytes in an NPY header, more than the {} \
             allowed",
            names.len(),
            crate::limits::MAX_LABEL_NAMES
        )));
    }
    for name in names {
        if !is_valid_name(name) {
            return Err(Error::invalid(format!(
                "'{name}' is not a valid label name: use letters, digits and '_', \
                 not starting with a digit"
            )));
        }
    }
    let twice = |name: &String| {
        Error::invalid(format!(
            "the label name '{name}' is used twice in {}",
            Names(names)
        ))
    };
    if names.len() <= NAMES_COMPARED {
        // a few names (the usual 1 to 3): compared pairwise, no allocation
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(twice(name));
            }
        }
        return Ok(());
    }
    let mut seen = hashbrown::HashSet::new();
    seen.try_reserve(names.len())?;
    for name in names {
        if !seen.insert(name.as_str()) {
            return Err(twice(name));
        }
    }
    Ok(())
}

/// Up to this many label names are checked for repeats pairwise (at most
/// 28 comparisons) rather than through a hash set allocated per labels.
const NAMES_COMPARED: usize = 8;

impl PartialEq for Labels {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || (self.names() == other.names() && self.values() == other.values())
    }
}

impl Eq for Labels {}

impl std::hash::Hash for Labels {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.names().hash(state);
        self.raw().hash(state);
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Labels({}, {} entries)",
            Names(self.names()),
            self.count()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_identifiers() {
        assert!(is_valid_name("a"));
        assert!(is_valid_name("_x1"));
        assert!(is_valid_name("o3_lambda"));
        for bad in ["", "1a", "a b", "a-b", "é", "a.b"] {
            assert!(!is_valid_name(bad), "{bad:?}");
            assert!(Labels::new(vec![bad], &[0]).is_err());
        }
    }

    #[test]
    fn names_must_be_unique() {
        let err = Labels::new(vec!["a", "a"], &[0, 1]).unwrap_err();
        assert!(err.to_string().contains("used twice"));
    }

    #[test]
    fn rows_must_be_unique() {
        let err = Labels::new(vec!["a", "b"], &[0, 1, 2, 3, 0, 1]).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("[0, 1]") && message.contains("rows 0 and 2"),
            "{message}"
        );
    }

    #[test]
    fn sorted_labels_skip_the_hash_index() {
        let rows: Vec<i32> = (0..40).flat_map(|i| [i / 4, i % 4]).collect();
        let sorted = Labels::new(vec!["a", "b"], &rows).unwrap();
        assert!(
            sorted.0.index.get().is_none(),
            "no index until the first lookup"
        );
        assert_eq!(sorted.position(&[2, 1]).unwrap(), Some(9));
        assert!(sorted.0.index.get().is_some());
        // equal neighbours are not increasing: the hash check finds them
        let mut twice = rows.clone();
        twice[2..4].copy_from_slice(&[0, 0]);
        assert!(Labels::new(vec!["a", "b"], &twice).is_err());
        // unsorted labels are checked with the hash index, which is kept
        let backwards: Vec<i32> = (0..40).rev().collect();
        let unsorted = Labels::new(vec!["a"], &backwards).unwrap();
        assert!(unsorted.0.index.get().is_some());
        let mut repeated = backwards.clone();
        repeated[39] = 7;
        assert!(Labels::new(vec!["a"], &repeated).is_err());
    }

    #[test]
    fn small_labels_are_searched_without_an_index() {
        let unsorted = Labels::new(vec!["a", "b"], &[3, 1, 0, 2, 1, 0]).unwrap();
        assert_eq!(unsorted.position(&[1, 0]).unwrap(), Some(2));
        assert_eq!(unsorted.position(&[1, 1]).unwrap(), None);
        assert!(
            unsorted.0.index.get().is_none(),
            "nothing written on lookup"
        );
        let error = Labels::new(vec!["a"], &[3, 1, 3]).unwrap_err().to_string();
        assert!(error.contains("rows 0 and 2"), "{error}");
        let selection = Labels::new(vec!["a"], &[2, 3]).unwrap();
        let all = Labels::new(vec!["a"], &[3, 1, 2]).unwrap();
        assert_eq!(all.select(&selection).unwrap(), vec![2, 0]);
        assert!(all.0.index.get().is_none());
    }

    #[test]
    fn assume_unique_skips_the_check() {
        let array = Array::from_slice(vec![3, 1], &[5, 5, 7]).unwrap();
        let labels = Labels::from_array(vec!["a".into()], array, true).unwrap();
        assert_eq!(labels.position(&[5]).unwrap(), Some(0));
        assert_eq!(labels.position(&[7]).unwrap(), Some(2));
    }

    #[test]
    fn values_must_fill_rows() {
        assert!(Labels::new(vec!["a", "b"], &[0, 1, 2]).is_err());
        assert!(Labels::new(Vec::<String>::new(), &[1]).is_err());
        let array = Array::from_slice(vec![2, 2], &[0, 1, 2, 3]).unwrap();
        assert!(Labels::from_array(vec!["a".into()], array, false).is_err());
        let floats = Array::from_slice(vec![1, 1], &[0.0f32]).unwrap();
        assert!(Labels::from_array(vec!["a".into()], floats, false).is_err());
    }

    #[test]
    fn lookups() {
        let labels = Labels::new(vec!["system", "atom"], &[0, 0, 0, 1, 1, 0]).unwrap();
        assert_eq!(labels.count(), 3);
        assert_eq!(labels.size(), 2);
        assert_eq!(labels.position(&[0, 1]).unwrap(), Some(1));
        assert_eq!(labels.position(&[1, 1]).unwrap(), None);
        assert!(labels.position(&[0]).is_err());
        assert_eq!(labels.row(2), &[1, 0]);
        assert_eq!(labels.column("atom").unwrap(), vec![0, 1, 0]);
        assert!(labels.column("nope").is_err());
    }

    #[test]
    fn constructors_and_equality() {
        let single = Labels::single();
        assert_eq!(single.names(), &["_"]);
        assert_eq!(single.raw(), &[0]);
        let empty = Labels::empty(vec!["a", "b"]).unwrap();
        assert_eq!((empty.count(), empty.size()), (0, 2));
        let range = Labels::range("n", 4).unwrap();
        assert_eq!(range.raw(), &[0, 1, 2, 3]);
        assert!(Labels::range("n", -1).is_err());
        assert_eq!(range, Labels::new(vec!["n"], &[0, 1, 2, 3]).unwrap());
        assert_ne!(range, Labels::new(vec!["m"], &[0, 1, 2, 3]).unwrap());
        assert_ne!(range, Labels::new(vec!["n"], &[0, 1, 3, 2]).unwrap());
        let zero_dims = Labels::new(Vec::<String>::new(), &[]).unwrap();
        assert_eq!(zero_dims.count(), 0);
    }
}

#[cfg(test)]
mod increasing_tests {
    use super::is_strictly_increasing;

    /// The plain definition: each row lexicographically above the one before.
    fn reference(raw: &[i32], size: usize) -> bool {
        raw.chunks_exact(size)
            .zip(raw.chunks_exact(size).skip(1))
            .all(|(previous, row)| previous < row)
    }

    #[test]
    fn the_fast_checks_agree_with_the_definition_at_the_edges() {
        const EDGES: [i32; 7] = [i32::MIN, i32::MIN + 1, -1, 0, 1, i32::MAX - 1, i32::MAX];
        // every pair of two-value rows made of edge values
        let rows: Vec<[i32; 2]> = EDGES
            .iter()
            .flat_map(|&a| EDGES.iter().map(move |&b| [a, b]))
            .collect();
        for first in &rows {
            for second in &rows {
                let raw = [first[0], first[1], second[0], second[1]];
                assert_eq!(
                    is_strictly_increasing(&raw, 2, 2),
                    reference(&raw, 2),
                    "{raw:?}"
                );
                let single = [first[0], second[0]];
                assert_eq!(is_strictly_increasing(&single, 1, 2), reference(&single, 1));
            }
        }
        // three-value rows: every pair of rows made of three edge values
        let triples: Vec<[i32; 3]> = [i32::MIN, -1, 0, i32::MAX]
            .iter()
            .flat_map(|&a| [i32::MIN, 0, i32::MAX].iter().map(move |&b| (a, b)))
            .flat_map(|(a, b)| [i32::MIN, 0, 1, i32::MAX].iter().map(move |&c| [a, b, c]))
            .collect();
        for first in &triples {
            for second in &triples {
                let raw = [
                    first[0], first[1], first[2], second[0], second[1], second[2],
                ];
                assert_eq!(
                    is_strictly_increasing(&raw, 3, 2),
                    reference(&raw, 3),
                    "{raw:?}"
                );
            }
        }
        // a longer run, broken at its end
        let mut rows: Vec<i32> = (0..30).flat_map(|i| [i / 9, i / 3 % 3, i % 3]).collect();
        assert!(is_strictly_increasing(&rows, 3, 30));
        rows.extend([3, 0, 2, 3, 0, 2]);
        assert!(!is_strictly_increasing(&rows, 3, 32));
    }

    #[test]
    fn a_single_step_down_is_found_wherever_it_is() {
        // long sorted labels (several runs of the fast check), with one row
        // made equal to or below the one before, at every position
        const COUNT: usize = 700;
        for size in [1usize, 2, 3] {
            // rows [i / 3, i % 3 * 5 + 1, ...] (or [i] alone): sorted, with
            // repeated first values
            let sorted: Vec<i32> = (0..700i32)
                .flat_map(|i| {
                    (1..=3i32).take(size).map(move |k| match (k, size) {
                        (1, 1) => i,
                        (1, _) => i / 3,
                        _ => i % 3 * 5 + k,
                    })
                })
                .collect();
            assert!(is_strictly_increasing(&sorted, size, COUNT));
            for at in 1..COUNT {
                for delta in [0, 1] {
                    let mut raw = sorted.clone();
                    let (before, row) = raw.split_at_mut(at * size);
                    row[..size].copy_from_slice(&before[(at - 1) * size..]);
                    row[size - 1] -= delta;
                    assert!(
                        !is_strictly_increasing(&raw, size, COUNT),
                        "size {size}, row {at}, delta {delta}"
                    );
                }
            }
        }
        assert!(is_strictly_increasing(&[], 2, 0));
        assert!(is_strictly_increasing(&[5, 5], 2, 1));
    }
}
