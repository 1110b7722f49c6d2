//! Labels as text, in metatensor's layout (its `_print_labels`): the
//! names as a header, one line per entry with each value centered under
//! its name, and `...` in place of the middle entries when there are more
//! than asked for.

use std::fmt::{self, Write};
use std::ops::Range;

use super::Labels;
use crate::error::{Error, Result};

impl Labels {
    /// The names and entries as metatensor prints them: at most
    /// `max_entries` entries (all of them with `None`; at least 2 when some
    /// are left out: the first half and the last half), every line after
    /// the header indented by `indent` spaces. No trailing newline.
    pub fn print(&self, max_entries: Option<usize>, indent: usize) -> Result<String> {
        let count = self.count();
        let (before, after) = match max_entries {
            Some(max) if count > max => {
                let max = max.max(2);
                let n_after = max / 2;
                let n_before = max - n_after;
                (0..n_before.min(count), count.saturating_sub(n_after)..count)
            }
            _ => (0..count, count..count),
        };

        // each column is as wide as its name or its widest value, plus 2
        let mut widths: Vec<usize> = self.names().iter().map(|n| n.len() + 2).collect();
        for i in before.clone().chain(after.clone()) {
            for (width, &value) in widths.iter_mut().zip(self.row(i)) {
                *width = (*width).max(decimal_len(value) + 2);
            }
        }

        let mut out = String::new();
        out.try_reserve(text_len(&widths, &before, &after, indent)?)?;
        let last = widths.len().saturating_sub(1);
        for (d, name) in self.names().iter().enumerate() {
            center(&mut out, name, name.len(), widths[d], d == last);
        }
        out.push('\n');
        self.print_entries(&mut out, before, &widths, indent);
        if !after.is_empty() {
            let mut half = widths.iter().sum::<usize>() / 2;
            if half > 3 {
                // 3 characters in '...'
                half -= 3;
            }
            push_spaces(&mut out, indent + half + 1);
            out.push_str("...\n");
            self.print_entries(&mut out, after, &widths, indent);
        }
        out.pop();
        Ok(out)
    }

    fn print_entries(
        &self,
        out: &mut String,
        entries: Range<usize>,
        widths: &[usize],
        indent: usize,
    ) {
        let last = widths.len().saturating_sub(1);
        for i in entries {
            push_spaces(out, indent);
            for (d, &value) in self.row(i).iter().enumerate() {
                center(out, value, decimal_len(value), widths[d], d == last);
            }
            out.push('\n');
        }
    }
}

/// As `str()` of metatensor's Labels: `Labels`, then the names and at
/// most 4 entries indented by 3 spaces.
impl fmt::Display for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.print(Some(4), 3).map_err(|_| fmt::Error)?;
        write!(f, "Labels\n   {text}")
    }
}

/// `text` (`len` characters) centered in `width` columns, without the
/// spaces after it in the last column.
fn center(out: &mut String, text: impl fmt::Display, len: usize, width: usize, last: bool) {
    let delta = width.saturating_sub(len);
    let before = delta / 2;
    push_spaces(out, before);
    // writing to a String cannot fail
    let _ = write!(out, "{text}");
    if !last {
        push_spaces(out, delta - before);
    }
}

fn push_spaces(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// Characters in the decimal form of `value`, sign included.
fn decimal_len(value: i32) -> usize {
    let digits = value.unsigned_abs().checked_ilog10().unwrap_or(0) as usize + 1;
    digits + usize::from(value < 0)
}

/// An upper bound of the length of the text, or an error when it cannot
/// exist in memory (a huge `indent`).
fn text_len(
    widths: &[usize],
    before: &Range<usize>,
    after: &Range<usize>,
    indent: usize,
) -> Result<usize> {
    let line = widths.iter().sum::<usize>() + 1;
    let lines = before.len() + after.len() + 2;
    // + 8: the '...' line can be longer than the others
    indent
        .checked_add(line + 8)
        .and_then(|line| line.checked_mul(lines))
        .filter(|&len| isize::try_from(len).is_ok())
        .ok_or_else(|| {
            Error::OutOfMemory(format!(
                "labels printed with an indent of {indent} do not fit in memory"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_metatensor_prints_them() {
        let labels = Labels::new(vec!["a", "b"], &[0, 1, 1, 2, 0, 3]).unwrap();
        assert_eq!(
            labels.print(None, 3).unwrap(),
            " a  b\n    0  1\n    1  2\n    0  3"
        );
        assert_eq!(
            labels.print(Some(2), 5).unwrap(),
            " a  b\n      0  1\n         ...\n      0  3"
        );
        assert_eq!(
            labels.print(Some(0), 0).unwrap(),
            " a  b\n 0  1\n    ...\n 0  3"
        );
        assert_eq!(
            labels.to_string(),
            "Labels\n    a  b\n    0  1\n    1  2\n    0  3"
        );
    }

    #[test]
    fn wide_values_and_long_names() {
        let labels = Labels::new(
            vec!["a", "long_name"],
            &[123_456, 1, -7, 22_222_222, 3, 4, 5, 6, 7, 8],
        )
        .unwrap();
        assert_eq!(
            labels.to_string(),
            "Labels\n      a     long_name\n    123456      1\n      -7    22222222\n          \
             ...\n      5         6\n      7         8"
        );
    }

    #[test]
    fn empty_and_without_dimensions() {
        let empty = Labels::empty(vec!["a", "b"]).unwrap();
        assert_eq!(empty.to_string(), "Labels\n    a  b");
        let none = Labels::new(Vec::<String>::new(), &[]).unwrap();
        assert_eq!(none.to_string(), "Labels\n   ");
    }

    #[test]
    fn one_entry_and_no_room() {
        // metatensor shows the one entry on both sides of the '...'
        let one = Labels::new(vec!["a"], &[7]).unwrap();
        assert_eq!(one.print(Some(0), 0).unwrap(), " a\n 7\n  ...\n 7");
    }

    #[test]
    fn decimal_lengths() {
        for value in [0, 1, 9, 10, -1, -10, 99_999, i32::MAX, i32::MIN] {
            assert_eq!(decimal_len(value), value.to_string().len(), "{value}");
        }
    }

    #[test]
    fn huge_indent_is_an_error() {
        let labels = Labels::new(vec!["a"], &[7]).unwrap();
        assert!(matches!(
            labels.print(None, usize::MAX),
            Err(Error::OutOfMemory(_))
        ));
    }
}
