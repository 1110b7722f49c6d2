//! The keys of a map with some dimensions moved out, and the groups of
//! blocks that merge into each remaining key.

use crate::error::{Error, Result};
use crate::labels::{Labels, Names};
use crate::tensor::TensorMap;

use super::rows::RowSet;

/// The blocks of one new key: their positions in the map, and the values
/// each takes for the moved dimensions (in the order the dimensions were
/// named).
pub(super) struct Group {
    pub blocks: Vec<usize>,
    pub moved: Vec<Vec<i32>>,
}

/// Keys without the moved dimensions, one [`Group`] per new key.
pub(super) struct Split {
    pub keys: Labels,
    pub groups: Vec<Group>,
}

/// Split the keys of `map` by moving the dimensions `names` out of them.
///
/// The new keys are the distinct remaining entries, in the order they first
/// appear; a group lists its blocks in key order. When no dimension
/// remains, the new keys are the single entry `_ = 0`.
pub(super) fn split(map: &TensorMap, names: &[String]) -> Result<Split> {
    let keys = map.keys();
    if keys.is_empty() {
        return Err(Error::invalid(
            "there are no keys to move in an empty TensorMap",
        ));
    }
    let mut moved = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(Error::invalid(format!(
                "the key dimension '{name}' is given twice in {}",
                Names(names)
            )));
        }
        moved.push(keys.dimension(name).ok_or_else(|| {
            Error::invalid(format!(
                "'{name}' is not part of the keys for this tensor map (the keys are {})",
                Names(keys.names())
            ))
        })?);
    }
    let remaining: Vec<usize> = (0..keys.size()).filter(|d| !moved.contains(d)).collect();

    let mut rows = RowSet::with_capacity(remaining.len(), keys.count());
    let mut groups: Vec<Group> = Vec::new();
    let mut entry = Vec::with_capacity(remaining.len());
    for i in 0..keys.count() {
        let row = keys.row(i);
        entry.clear();
        entry.extend(remaining.iter().map(|&d| row[d]));
        let group = rows.insert(&entry);
        if group == groups.len() {
            groups.push(Group {
                blocks: Vec::new(),
                moved: Vec::new(),
            });
        }
        groups[group].blocks.push(i);
        groups[group]
            .moved
            .push(moved.iter().map(|&d| row[d]).collect());
    }

    let keys = if remaining.is_empty() {
        Labels::single()
    } else {
        let names = remaining.iter().map(|&d| keys.names()[d].clone()).collect();
        rows.into_labels(names)?
    };
    Ok(Split { keys, groups })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::labels;
    use crate::tensor::TensorMap;

    fn map(keys: Labels) -> TensorMap {
        let block = crate::fixtures::small_map().blocks()[0].clone();
        let count = keys.count();
        TensorMap::new(keys, vec![block; count]).unwrap()
    }

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn groups_in_order_of_appearance() {
        let map = map(labels(
            &["a", "b", "c"],
            &[0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1, 0],
        ));
        let two = split(&map, &names(&["c", "a"])).unwrap();
        assert_eq!(two.keys.names(), &["b"]);
        assert_eq!(two.keys.raw(), &[0, 1]);
        assert_eq!(two.groups[0].blocks, vec![0, 1]);
        assert_eq!(two.groups[0].moved, vec![vec![1, 0], vec![0, 1]]);
        assert_eq!(two.groups[1].blocks, vec![2, 3]);

        let all = split(&map, &names(&["a", "b", "c"])).unwrap();
        assert_eq!(all.keys, Labels::single());
        assert_eq!(all.groups.len(), 1);
        assert_eq!(all.groups[0].blocks, vec![0, 1, 2, 3]);

        let none = split(&map, &[]).unwrap();
        assert_eq!(&none.keys, map.keys());
        assert_eq!(none.groups.len(), 4);
    }

    #[test]
    fn errors() {
        let keyed = map(labels(&["a"], &[0, 1]));
        let message = |names: &[&str]| match split(&keyed, &self::names(names)) {
            Err(error) => error.to_string(),
            Ok(_) => String::new(),
        };
        assert!(message(&["x"]).contains("'x' is not part of the keys"));
        assert!(message(&["a", "a"]).contains("given twice"));
        let empty = TensorMap::new(Labels::empty(vec!["a"]).unwrap(), vec![]).unwrap();
        assert!(split(&empty, &names(&["a"])).is_err());
    }
}
