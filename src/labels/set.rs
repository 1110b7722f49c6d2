//! Union, intersection and difference of two Labels with the same
//! dimensions, with metatensor's mappings: for each entry of an input, its
//! position in the result, or -1 when it is not there.
//!
//! The entries of the result keep the order of the inputs, as in
//! metatensor: for the union, the entries of `self`, then those of `other`
//! that `self` does not have; for the difference, the entries of `self`
//! that are kept; for the intersection, those of the operand with fewer
//! entries. Each costs one hash lookup per entry.

use super::{Labels, Names, Rows};
use crate::error::{Error, Result};

/// Labels and the positions the entries of the first and of the second
/// operand have in them (-1: not there).
pub type Mapped = (Labels, Vec<i64>, Vec<i64>);

impl Labels {
    /// The entries of `self`, then those of `other` that `self` does not
    /// have; with the position of each entry of `self` and of `other` in
    /// the union.
    pub fn union(&self, other: &Labels) -> Result<Mapped> {
        same_dimensions(self, other, "union")?;
        let mut second = filled(other.count(), -1)?;
        let mut added = 0;
        let lookup = self.lookup()?;
        for (j, position) in second.iter_mut().enumerate() {
            match lookup.find(other.row(j)) {
                Some(i) => *position = to_i64(i),
                None => added += 1,
            }
        }
        let first = identity(self.count())?;
        if added == 0 {
            return Ok((self.clone(), first, second));
        }
        let mut rows = Rows::new(self.count() + added, self.size())?;
        rows.push_from(self, 0, self.count())?;
        let mut next = self.count();
        for (j, position) in second.iter_mut().enumerate() {
            if *position < 0 {
                rows.push_from(other, j, j + 1)?;
                *position = to_i64(next);
                next += 1;
            }
        }
        Ok((rows.finish(self.names().to_vec(), true)?, first, second))
    }

    /// The entries that `self` and `other` both have, in the order of the
    /// one with fewer entries (of `self` when they have as many), as
    /// metatensor orders them; with the position of each entry of `self`
    /// and of `other` in the intersection (-1 for those that are not in
    /// it).
    pub fn intersection(&self, other: &Labels) -> Result<Mapped> {
        same_dimensions(self, other, "intersection")?;
        if other.count() < self.count() {
            let (labels, second, first) = common_entries(other, self)?;
            return Ok((labels, first, second));
        }
        common_entries(self, other)
    }

    /// The entries of `self` that `other` does not have, in the order of
    /// `self`; with the position of each entry of `self` in the difference
    /// (-1 for those that are not in it).
    pub fn difference(&self, other: &Labels) -> Result<(Labels, Vec<i64>)> {
        same_dimensions(self, other, "difference")?;
        let mut first = filled(self.count(), -1)?;
        let mut kept = 0;
        let lookup = other.lookup()?;
        for (i, position) in first.iter_mut().enumerate() {
            if lookup.find(self.row(i)).is_none() {
                *position = to_i64(kept);
                kept += 1;
            }
        }
        let labels = kept_entries(self, &first, kept)?;
        Ok((labels, first))
    }
}

/// The entries of `order` that `other` has too, in the order of `order`,
/// and the mappings of `order` and `other`.
fn common_entries(order: &Labels, other: &Labels) -> Result<Mapped> {
    let mut first = filled(order.count(), -1)?;
    let mut second = filled(other.count(), -1)?;
    let mut kept = 0;
    let lookup = other.lookup()?;
    for (i, position) in first.iter_mut().enumerate() {
        if let Some(j) = lookup.find(order.row(i)) {
            *position = to_i64(kept);
            second[j] = to_i64(kept);
            kept += 1;
        }
    }
    let labels = kept_entries(order, &first, kept)?;
    Ok((labels, first, second))
}

/// The `kept` entries of `labels` whose mapping is not -1 (all of them:
/// the same Labels, shared).
fn kept_entries(labels: &Labels, mapping: &[i64], kept: usize) -> Result<Labels> {
    if kept == labels.count() {
        return Ok(labels.clone());
    }
    let mut rows = Rows::new(kept, labels.size())?;
    for (i, &position) in mapping.iter().enumerate() {
        if position >= 0 {
            rows.push_from(labels, i, i + 1)?;
        }
    }
    rows.finish(labels.names().to_vec(), true)
}

fn same_dimensions(first: &Labels, second: &Labels, operation: &str) -> Result<()> {
    if first.names() == second.names() {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "can not take the {operation} of these Labels, they have different dimensions: \
         {} and {}",
        Names(first.names()),
        Names(second.names())
    )))
}

/// A position as metatensor's mappings hold it (a `Vec` has at most
/// `isize::MAX` entries, so it always fits).
fn to_i64(position: usize) -> i64 {
    i64::try_from(position).unwrap_or(i64::MAX)
}

/// `len` copies of `value`, or an out-of-memory error.
fn filled(len: usize, value: i64) -> Result<Vec<i64>> {
    let mut vec = Vec::new();
    vec.try_reserve_exact(len)?;
    vec.resize(len, value);
    Ok(vec)
}

/// `0, 1, .., len - 1`, or an out-of-memory error.
fn identity(len: usize) -> Result<Vec<i64>> {
    let mut vec = Vec::new();
    vec.try_reserve_exact(len)?;
    vec.extend((0..len).map(to_i64));
    Ok(vec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(names: &[&str], values: &[i32]) -> Labels {
        Labels::new(names.to_vec(), values).unwrap()
    }

    #[test]
    fn union_as_metatensor_documents_it() {
        let first = labels(&["a", "b"], &[0, 1, 1, 2, 0, 3]);
        let second = labels(&["a", "b"], &[0, 3, 1, 3, 1, 2]);
        let (union, m1, m2) = first.union(&second).unwrap();
        assert_eq!(union.names(), &["a", "b"]);
        assert_eq!(union.raw(), &[0, 1, 1, 2, 0, 3, 1, 3]);
        assert_eq!(m1, [0, 1, 2]);
        assert_eq!(m2, [2, 3, 1]);
        // the union can be looked up (its index is built on demand)
        assert_eq!(union.position(&[1, 3]).unwrap(), Some(3));
    }

    #[test]
    fn intersection_as_metatensor_documents_it() {
        let first = labels(&["a", "b"], &[0, 1, 1, 2, 0, 3]);
        let second = labels(&["a", "b"], &[0, 3, 1, 3, 1, 2]);
        let (intersection, m1, m2) = first.intersection(&second).unwrap();
        assert_eq!(intersection.raw(), &[1, 2, 0, 3]);
        assert_eq!(m1, [-1, 0, 1]);
        assert_eq!(m2, [1, -1, 0]);
    }

    #[test]
    fn difference_as_metatensor_documents_it() {
        let first = labels(&["a", "b"], &[0, 1, 1, 3, 0, 3, 2, 2]);
        let second = labels(&["a", "b"], &[0, 3, 1, 3, 1, 2, 2, 1]);
        let (difference, m1) = first.difference(&second).unwrap();
        assert_eq!(difference.raw(), &[0, 1, 2, 2]);
        assert_eq!(m1, [0, -1, -1, 1]);
    }

    #[test]
    fn intersection_in_the_order_of_the_smaller_operand() {
        let three = labels(&["n"], &[3, 1, 2]);
        let four = labels(&["n"], &[2, 4, 3, 0]);
        let (intersection, m1, m2) = three.intersection(&four).unwrap();
        assert_eq!(intersection.raw(), &[3, 2]);
        assert_eq!((m1, m2), (vec![0, -1, 1], vec![1, -1, 0, -1]));
        let (intersection, m1, m2) = four.intersection(&three).unwrap();
        assert_eq!(intersection.raw(), &[3, 2]);
        assert_eq!((m1, m2), (vec![1, -1, 0, -1], vec![0, -1, 1]));
        let two = labels(&["n"], &[2, 3]);
        let (intersection, m1, m2) = three.intersection(&two).unwrap();
        assert!(intersection.ptr_eq(&two));
        assert_eq!((m1, m2), (vec![1, -1, 0], vec![0, 1]));
    }

    #[test]
    fn dimensions_must_be_the_same_in_the_same_order() {
        let first = labels(&["a", "b"], &[0, 1]);
        for other in [
            labels(&["b", "a"], &[1, 0]),
            labels(&["a", "c"], &[0, 1]),
            labels(&["a"], &[0]),
        ] {
            let message = first.union(&other).unwrap_err().to_string();
            assert!(message.contains("union"), "{message}");
            assert!(first.intersection(&other).is_err());
            assert!(first.difference(&other).is_err());
        }
    }

    #[test]
    fn empty_operands() {
        let empty = Labels::empty(vec!["a"]).unwrap();
        let some = labels(&["a"], &[4, 2]);
        let (union, m1, m2) = empty.union(&some).unwrap();
        assert_eq!((union.raw(), m1.len(), m2), (&[4, 2][..], 0, vec![0, 1]));
        let (union, m1, m2) = some.union(&empty).unwrap();
        assert!(union.ptr_eq(&some), "nothing added: the same labels");
        assert_eq!((m1, m2.len()), (vec![0, 1], 0));
        let (intersection, m1, m2) = some.intersection(&empty).unwrap();
        assert_eq!((intersection.count(), m1, m2.len()), (0, vec![-1, -1], 0));
        let (difference, m1) = some.difference(&empty).unwrap();
        assert!(difference.ptr_eq(&some));
        assert_eq!(m1, [0, 1]);
        let (difference, m1) = empty.difference(&some).unwrap();
        assert_eq!((difference.count(), m1.len()), (0, 0));
    }

    #[test]
    fn same_entries() {
        let some = labels(&["a", "b"], &[3, 1, 0, 2, 7, 7]);
        let (union, m1, m2) = some.union(&some).unwrap();
        assert!(union.ptr_eq(&some));
        assert_eq!((m1, m2), (vec![0, 1, 2], vec![0, 1, 2]));
        let (intersection, m1, _) = some.intersection(&some).unwrap();
        assert!(intersection.ptr_eq(&some));
        assert_eq!(m1, [0, 1, 2]);
        let (difference, m1) = some.difference(&some).unwrap();
        assert_eq!((difference.count(), m1), (0, vec![-1, -1, -1]));
        assert_eq!(difference.names(), some.names());
    }

    #[test]
    fn labels_without_dimensions() {
        let none = Labels::new(Vec::<String>::new(), &[]).unwrap();
        let one = Labels::from_array(
            vec![],
            crate::array::Array::zeros(crate::dtype::DType::I4, vec![1, 0]).unwrap(),
            false,
        )
        .unwrap();
        let (union, m1, m2) = none.union(&one).unwrap();
        assert_eq!((union.count(), m1.len(), m2), (1, 0, vec![0]));
        let (intersection, m1, m2) = one.intersection(&one).unwrap();
        assert_eq!((intersection.count(), m1, m2), (1, vec![0], vec![0]));
        let (difference, m1) = one.difference(&none).unwrap();
        assert_eq!((difference.count(), m1), (1, vec![0]));
        let (difference, m1) = one.difference(&one).unwrap();
        assert_eq!((difference.count(), m1), (0, vec![-1]));
    }

    #[test]
    fn large_operands_in_linear_time() {
        // 200k entries each, half shared: quadratic work would take minutes
        let n = 200_000;
        let first: Vec<i32> = (0..n).flat_map(|i| [i / 7, i % 7]).collect();
        let second: Vec<i32> = (n / 2..n + n / 2).flat_map(|i| [i / 7, i % 7]).collect();
        let first = labels(&["x", "y"], &first);
        let second = labels(&["x", "y"], &second);
        let (union, m1, m2) = first.union(&second).unwrap();
        assert_eq!(union.count(), 300_000);
        assert_eq!(m1[5], 5);
        assert_eq!(m2[0], i64::from(n / 2));
        assert_eq!(m2[usize::try_from(n).unwrap() - 1], 299_999);
        let (intersection, _, m2) = first.intersection(&second).unwrap();
        assert_eq!(intersection.count(), 100_000);
        assert_eq!(m2[100_000], -1);
        let (difference, _) = first.difference(&second).unwrap();
        assert_eq!(difference.count(), 100_000);
        assert_eq!(difference.row(99_999), first.row(99_999));
    }
}
