//! Selection: the entries of Labels that match a selection on some of
//! their dimensions (metatensor's `Labels.select`).

use super::{Labels, Names};
use crate::error::{Error, Result};

impl Labels {
    /// Positions of the entries of `self` whose values in the dimensions of
    /// `selection` (a subset of those of `self`, in any order) are one of
    /// the entries of `selection`. Entries of the selection that `self`
    /// does not have select nothing; a selection without dimensions selects
    /// every entry. The positions are in the order of `self`, except when
    /// the selection has the very dimensions of `self` (same order): then
    /// they are those of its entries, in its order. All as in metatensor.
    pub fn select(&self, selection: &Labels) -> Result<Vec<usize>> {
        let dimensions = selection
            .names()
            .iter()
            .map(|name| {
                self.dimension(name).ok_or_else(|| {
                    Error::invalid(format!(
                        "'{name}' in selection is not part of these Labels {}",
                        Names(self.names())
                    ))
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        let mut selected = Vec::new();
        if dimensions.is_empty() {
            selected.try_reserve_exact(self.count())?;
            selected.extend(0..self.count());
            return Ok(selected);
        }
        if selection.names() == self.names() {
            let mut selected = Vec::new();
            selected.try_reserve_exact(selection.count())?;
            let lookup = self.lookup()?;
            selected.extend((0..selection.count()).filter_map(|j| lookup.find(selection.row(j))));
            return Ok(selected);
        }
        let lookup = selection.lookup()?;
        let mut projected = vec![0; dimensions.len()];
        for i in 0..self.count() {
            let entry = self.row(i);
            for (value, &d) in projected.iter_mut().zip(&dimensions) {
                *value = entry[d];
            }
            if lookup.find(&projected).is_some() {
                if selected.len() == selected.capacity() {
                    // grow as a `Vec` does, without aborting
                    selected.try_reserve(selected.len().max(16))?;
                }
                selected.push(i);
            }
        }
        Ok(selected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(names: &[&str], values: &[i32]) -> Labels {
        Labels::new(names.to_vec(), values).unwrap()
    }

    #[test]
    fn select_as_metatensor_documents_it() {
        let labels = labels(&["a", "b"], &[0, 1, 1, 2, 0, 3, 1, 1, 2, 4]);
        let selection = Labels::new(vec!["a"], &[0, 2, 5]).unwrap();
        assert_eq!(labels.select(&selection).unwrap(), [0, 2, 4]);
    }

    #[test]
    fn selection_dimensions_in_any_order() {
        let labels = labels(&["a", "b", "c"], &[0, 1, 5, 1, 2, 5, 0, 3, 6]);
        let selection = Labels::new(vec!["c", "a"], &[5, 1, 6, 0, 9, 9]).unwrap();
        assert_eq!(labels.select(&selection).unwrap(), [1, 2]);
        let everything = Labels::new(vec!["b", "c", "a"], &[3, 6, 0, 1, 5, 0]).unwrap();
        assert_eq!(labels.select(&everything).unwrap(), [0, 2]);
    }

    #[test]
    fn selection_of_whole_entries_in_the_selection_order() {
        let labels = labels(&["a", "b"], &[0, 1, 1, 2, 0, 3, 1, 1, 2, 4, 0, 5]);
        let selection = Labels::new(vec!["a", "b"], &[9, 9, 0, 5, 1, 2]).unwrap();
        assert_eq!(labels.select(&selection).unwrap(), [5, 1]);
        // the same dimensions in another order: the order of the labels
        let selection = Labels::new(vec!["b", "a"], &[5, 0, 2, 1]).unwrap();
        assert_eq!(labels.select(&selection).unwrap(), [1, 5]);
    }

    #[test]
    fn selection_dimensions_must_be_in_the_labels() {
        let labels = labels(&["a", "b"], &[0, 1]);
        let message = labels
            .select(&Labels::new(vec!["a", "c"], &[0, 0]).unwrap())
            .unwrap_err()
            .to_string();
        assert!(message.contains("'c'"), "{message}");
    }

    #[test]
    fn selection_without_dimensions_selects_everything() {
        let labels = labels(&["a"], &[3, 1, 2]);
        let none = Labels::new(Vec::<String>::new(), &[]).unwrap();
        assert_eq!(labels.select(&none).unwrap(), [0, 1, 2]);
    }

    #[test]
    fn empty_selection_and_empty_labels() {
        let labels = labels(&["a", "b"], &[0, 1, 1, 2]);
        let empty = Labels::empty(vec!["b"]).unwrap();
        assert!(labels.select(&empty).unwrap().is_empty());
        let none = Labels::empty(vec!["a", "b"]).unwrap();
        assert!(none
            .select(&Labels::new(vec!["a"], &[0]).unwrap())
            .unwrap()
            .is_empty());
    }
}
