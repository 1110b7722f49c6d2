//! The limits of blockmap's readers, in one place. Each is checked by the
//! writers and the constructors too, with the same number and a clear
//! error before anything is written: what blockmap writes, it reads.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// Longest NPY header text (after the preamble) a reader accepts. numpy
/// itself refuses more than 10 kB by default; labels with many dimensions
/// need a few kB.
pub const MAX_NPY_HEADER: usize = 1 << 20;

/// What an NPY header of labels needs besides the names' descriptions:
/// the dict's keys, the shape, the padding to 64 bytes.
const NPY_HEADER_OVERHEAD: usize = 256;

/// The most the names of one `Labels` may take, counted as
/// [`label_names_size`]: their NPY header then fits in [`MAX_NPY_HEADER`].
pub const MAX_LABEL_NAMES: usize = MAX_NPY_HEADER - NPY_HEADER_OVERHEAD;

/// The size of the NPY description of labels with these names:
/// `[('name', '<i4'), ...]` takes 13 bytes per name besides the names.
pub fn label_names_size(names: &[String]) -> usize {
    names
        .iter()
        .map(|name| name.len().saturating_add(13))
        .fold(0, usize::saturating_add)
}

/// Most dimensions an array may have (numpy's own limit): a block has at
/// most this many axes, so at most `MAX_NDIM - 2` components.
pub const MAX_NDIM: usize = 64;

/// Deepest nesting of gradients: a block with a gradient has depth 1, a
/// gradient of a gradient depth 2. Every recursion over blocks is bounded
/// by it (it fits a thread stack of 512 KiB many times over).
pub const MAX_GRADIENT_DEPTH: usize = 16;

/// Longest gradient parameter name, in bytes: the archive's entry names
/// (`blocks/<i>/gradients/<parameter>/...`, nested) then stay far below
/// the zip format's 65535 bytes.
pub const MAX_GRADIENT_NAME: usize = 1024;

/// The zip format's longest entry name.
pub const MAX_ENTRY_NAME: usize = u16::MAX as usize;

/// Largest `info.json`, in bytes, as written (pretty-printed JSON).
pub const MAX_INFO_JSON: usize = 64 << 20;

/// Deepest nesting of brackets in a pickle header (a map's header nests 2
/// levels per gradient level, and 7 more around them).
pub const MAX_HEADER_NESTING: usize = 8 + 2 * MAX_GRADIENT_DEPTH;

/// The exact length of `info` written as `info.json` (`serde_json`'s
/// pretty printer: two-space indent, one entry per line), without writing
/// it.
pub fn info_json_len(info: &BTreeMap<String, String>) -> usize {
    if info.is_empty() {
        return 2;
    }
    // "{\n" ... "\n}", and per entry `  "key": "value"` with ",\n" between
    let entries: usize = info
        .iter()
        .map(|(key, value)| 2 + json_string_len(key) + 2 + json_string_len(value))
        .fold(0, usize::saturating_add);
    4usize
        .saturating_add(entries)
        .saturating_add(2 * (info.len() - 1))
}

/// Length of `text` as a JSON string, quotes included, escaped as
/// `serde_json` escapes it.
fn json_string_len(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|byte| match byte {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// A JSON string that borrows the text it was parsed from when it has no
/// escapes (then no allocation is made for it).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize)]
pub struct JsonStr<'a>(#[serde(borrow)] pub std::borrow::Cow<'a, str>);

/// Info parsed from JSON (borrowing the text where it has no escapes) as
/// owned strings, each copied with a fallible allocation.
pub fn owned_info(info: BTreeMap<JsonStr<'_>, JsonStr<'_>>) -> Result<BTreeMap<String, String>> {
    let mut result = BTreeMap::new();
    for (key, value) in info {
        result.insert(try_string(&key.0)?, try_string(&value.0)?);
    }
    Ok(result)
}

/// A copy of `info` made with fallible allocations.
pub fn try_clone_info(info: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>> {
    let mut result = BTreeMap::new();
    for (key, value) in info {
        result.insert(try_string(key)?, try_string(value)?);
    }
    Ok(result)
}

fn try_string(text: &str) -> Result<String> {
    let mut copy = String::new();
    copy.try_reserve_exact(text.len())?;
    copy.push_str(text);
    Ok(copy)
}

/// An error unless `info` fits in [`MAX_INFO_JSON`].
pub fn check_info(info: &BTreeMap<String, String>) -> Result<()> {
    let len = info_json_len(info);
    if len > MAX_INFO_JSON {
        return Err(Error::invalid(format!(
            "the info would take {len} bytes as JSON, more than the {MAX_INFO_JSON} \
             allowed"
        )));
    }
    Ok(())
}

/// An error when `json` nests brackets deeper than [`MAX_HEADER_NESTING`]
/// (checked before parsing: a parser recursing that deep could exhaust a
/// small thread stack).
pub fn check_json_nesting(json: &[u8]) -> Result<()> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in json {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_HEADER_NESTING {
                    return Err(Error::format(format!(
                        "the header nests deeper than {MAX_HEADER_NESTING} levels"
                    )));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_json_len_is_what_serde_writes() {
        let mut info = BTreeMap::new();
        assert_eq!(info_json_len(&info), 2);
        for (key, value) in [
            ("origin", "tests"),
            ("", ""),
            ("quotes \" and \\", "tab\tnew\nline\r"),
            ("control \u{1} \u{8} \u{c} \u{1f}", "é ☃ \u{7f}"),
        ] {
            info.insert(key.to_string(), value.to_string());
            let written = serde_json::to_string_pretty(&info).unwrap();
            assert_eq!(info_json_len(&info), written.len(), "{written}");
        }
    }

    #[test]
    fn names_size_and_nesting() {
        let names = vec!["system".to_string(), "atom".to_string()];
        assert_eq!(label_names_size(&names), 6 + 4 + 26);
        assert!(check_json_nesting(b"[[[[]]]]").is_ok());
        let deep = "[".repeat(MAX_HEADER_NESTING + 1);
        assert!(check_json_nesting(deep.as_bytes()).is_err());
        let in_a_string = format!("[\"{deep}\\\"\"]");
        assert!(check_json_nesting(in_a_string.as_bytes()).is_ok());
    }
}
