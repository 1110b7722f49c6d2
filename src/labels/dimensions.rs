//! New Labels with other dimensions: one inserted, removed or renamed, or
//! all of them permuted (metatensor's `insert`, `append`, `remove`,
//! `rename` and `permute`).
//!
//! Adding, renaming or reordering dimensions keeps entries unique, so only
//! `remove` checks the entries again.

use super::{Labels, Names, Rows};
use crate::error::{Error, Result};

impl Labels {
    /// A new dimension `name` with `values` (one per entry) before
    /// dimension `index` (`0..=size()`).
    pub fn insert(&self, index: usize, name: &str, values: &[i32]) -> Result<Labels> {
        if index > self.size() {
            return Err(Error::invalid(format!(
                "can not insert a dimension at {index} in labels of {} dimensions",
                self.size()
            )));
        }
        if values.len() != self.count() {
            return Err(Error::invalid(format!(
                "the new dimension '{name}' has {} values, the labels have {} entries",
                values.len(),
                self.count()
            )));
        }
        let mut names = self.names().to_vec();
        names.insert(index, name.to_string());
        let mut rows = Rows::new(self.count(), self.size() + 1)?;
        let mut entry = vec![0; self.size() + 1];
        for (i, &value) in values.iter().enumerate() {
            let old = self.row(i);
            entry[..index].copy_from_slice(&old[..index]);
            entry[index] = value;
            entry[index + 1..].copy_from_slice(&old[index..]);
            rows.push(&entry)?;
        }
        rows.finish(names, true)
    }

    /// A new last dimension `name` with `values` (one per entry).
    pub fn append(&self, name: &str, values: &[i32]) -> Result<Labels> {
        self.insert(self.size(), name, values)
    }

    /// Without dimension `name`; an error when the remaining entries are not
    /// unique.
    pub fn remove(&self, name: &str) -> Result<Labels> {
        let d = self.dimension_or_error(name)?;
        let mut names = self.names().to_vec();
        names.remove(d);
        let mut rows = Rows::new(self.count(), self.size() - 1)?;
        let mut entry = vec![0; self.size() - 1];
        for i in 0..self.count() {
            let old = self.row(i);
            entry[..d].copy_from_slice(&old[..d]);
            entry[d..].copy_from_slice(&old[d + 1..]);
            rows.push(&entry)?;
        }
        rows.finish(names, false)
    }

    /// Dimension `old` named `new`; the values are shared.
    pub fn rename(&self, old: &str, new: &str) -> Result<Labels> {
        let d = self.dimension_or_error(old)?;
        let mut names = self.names().to_vec();
        new.clone_into(&mut names[d]);
        Labels::from_own_array(names, self.values().clone(), true)
    }

    /// The dimensions in the order `order`: dimension `k` of the result is
    /// dimension `order[k]` of `self`. `order` is a permutation of
    /// `0..size()`.
    pub fn permute(&self, order: &[usize]) -> Result<Labels> {
        if order.len() != self.size() {
            return Err(Error::invalid(format!(
                "the permutation {order:?} has {} dimensions, the labels {} have {}",
                order.len(),
                Names(self.names()),
                self.size()
            )));
        }
        let mut seen = vec![false; self.size()];
        for &d in order {
            match seen.get_mut(d) {
                Some(seen_d) if !*seen_d => *seen_d = true,
                Some(_) => {
                    return Err(Error::invalid(format!(
                        "the permutation {order:?} has dimension {d} twice"
                    )))
                }
                None => {
                    return Err(Error::invalid(format!(
                        "the permutation {order:?} names dimension {d}, the labels have {}",
                        self.size()
                    )))
                }
            }
        }
        if order.iter().enumerate().all(|(k, &d)| k == d) {
            return Ok(self.clone());
        }
        let names = order.iter().map(|&d| self.names()[d].clone()).collect();
        let mut rows = Rows::new(self.count(), self.size())?;
        let mut entry = vec![0; self.size()];
        for i in 0..self.count() {
            let old = self.row(i);
            for (value, &d) in entry.iter_mut().zip(order) {
                *value = old[d];
            }
            rows.push(&entry)?;
        }
        rows.finish(names, true)
    }

    fn dimension_or_error(&self, name: &str) -> Result<usize> {
        self.dimension(name).ok_or_else(|| {
            Error::invalid(format!(
                "'{name}' not found in the dimensions {} of these Labels",
                Names(self.names())
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(names: &[&str], values: &[i32]) -> Labels {
        Labels::new(names.to_vec(), values).unwrap()
    }

    #[test]
    fn insert_anywhere() {
        let ab = labels(&["a", "b"], &[0, 1, 1, 2, 0, 3]);
        let first = ab.insert(0, "c", &[5, 6, 7]).unwrap();
        assert_eq!(first.names(), &["c", "a", "b"]);
        assert_eq!(first.raw(), &[5, 0, 1, 6, 1, 2, 7, 0, 3]);
        let middle = ab.insert(1, "c", &[5, 6, 7]).unwrap();
        assert_eq!(middle.names(), &["a", "c", "b"]);
        assert_eq!(middle.raw(), &[0, 5, 1, 1, 6, 2, 0, 7, 3]);
        let last = ab.append("c", &[5, 6, 7]).unwrap();
        assert_eq!(last, ab.insert(2, "c", &[5, 6, 7]).unwrap());
        assert_eq!(last.raw(), &[0, 1, 5, 1, 2, 6, 0, 3, 7]);
        assert_eq!(last.position(&[1, 2, 6]).unwrap(), Some(1));
    }

    #[test]
    fn insert_errors() {
        let ab = labels(&["a", "b"], &[0, 1, 1, 2]);
        assert!(ab.insert(3, "c", &[0, 0]).is_err());
        assert!(ab.insert(0, "c", &[0]).is_err());
        assert!(ab.insert(0, "a", &[0, 0]).is_err(), "name used twice");
        assert!(ab.insert(0, "1c", &[0, 0]).is_err(), "invalid name");
    }

    #[test]
    fn insert_into_labels_without_dimensions() {
        let none = Labels::new(Vec::<String>::new(), &[]).unwrap();
        let a = none.append("a", &[]).unwrap();
        assert_eq!((a.names(), a.count()), (&["a".to_string()][..], 0));
    }

    #[test]
    fn remove_checks_uniqueness() {
        let ab = labels(&["a", "b"], &[0, 1, 1, 2, 0, 3]);
        let b = ab.remove("a").unwrap();
        assert_eq!(
            (b.names(), b.raw()),
            (&["b".to_string()][..], &[1, 2, 3][..])
        );
        let message = ab.remove("b").unwrap_err().to_string();
        assert!(message.contains("twice"), "{message}");
        assert!(ab.remove("c").unwrap_err().to_string().contains("'c'"));
        // the last dimension: only labels of at most one entry can lose it
        let single = labels(&["a"], &[4]);
        assert_eq!(single.remove("a").unwrap().count(), 1);
        assert!(labels(&["a"], &[4, 5]).remove("a").is_err());
    }

    #[test]
    fn rename_shares_the_values() {
        let ab = labels(&["a", "b"], &[0, 1, 1, 2]);
        let cb = ab.rename("a", "c").unwrap();
        assert_eq!(cb.names(), &["c", "b"]);
        assert_eq!(cb.values().bytes().as_ptr(), ab.values().bytes().as_ptr());
        assert_eq!(ab.rename("a", "a").unwrap(), ab);
        assert!(ab.rename("a", "b").is_err(), "name used twice");
        assert!(ab.rename("c", "d").is_err(), "no such dimension");
        assert!(ab.rename("a", "1d").is_err(), "invalid name");
    }

    #[test]
    fn permute_dimensions() {
        let abc = labels(&["foo", "bar", "baz"], &[42, 10, 3, 1, 2, 3]);
        let permuted = abc.permute(&[2, 0, 1]).unwrap();
        assert_eq!(permuted.names(), &["baz", "foo", "bar"]);
        assert_eq!(permuted.raw(), &[3, 42, 10, 3, 1, 2]);
        assert!(abc.permute(&[0, 1, 2]).unwrap().ptr_eq(&abc));
        assert!(abc.permute(&[0, 1]).is_err());
        assert!(abc.permute(&[0, 0, 1]).is_err());
        assert!(abc.permute(&[0, 1, 3]).is_err());
    }
}
