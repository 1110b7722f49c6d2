//! The text of `repr(block)`, `repr(tensor)`, `str(tensor)` and
//! `tensor.print(max_keys)`, laid out as metatensor-core prints them; the
//! reprs end with what a user cannot otherwise see (see [`arrays`]).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::torch::Arrays;
use crate::block::TensorBlock;
use crate::buffer::OwnerKind;
use crate::tensor::TensorMap;

/// The line the reprs of maps and blocks end with: the array type they
/// give, the dtypes, whether the values are writable, and where their
/// memory is (`arrays: numpy, float64, read-only, mapped from a file`),
/// over every values array of `blocks` and their gradients.
pub fn arrays<'a>(blocks: impl Iterator<Item = &'a TensorBlock>, arrays: Arrays) -> String {
    fn walk(
        block: &TensorBlock,
        dtypes: &mut BTreeSet<String>,
        access: &mut BTreeSet<&'static str>,
        kinds: &mut BTreeSet<&'static str>,
    ) {
        let values = block.values();
        dtypes.insert(values.dtype().to_string());
        let buffer = values.buffer();
        access.insert(if buffer.is_writable() {
            "writable"
        } else {
            "read-only"
        });
        kinds.insert(match buffer.owner_kind() {
            OwnerKind::Rust => "in memory",
            OwnerKind::Mapped => "mapped from a file",
            OwnerKind::Foreign => "viewing another object's memory",
            OwnerKind::Shared => "in shared memory",
        });
        for gradient in block.gradients().values() {
            walk(gradient, dtypes, access, kinds);
        }
    }
    let (mut dtypes, mut access, mut kinds) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for block in blocks {
        walk(block, &mut dtypes, &mut access, &mut kinds);
    }
    let mut parts = vec![arrays.name().to_string()];
    for set in [
        dtypes.into_iter().collect::<Vec<_>>(),
        access.into_iter().map(String::from).collect(),
        kinds.into_iter().map(String::from).collect(),
    ] {
        if !set.is_empty() {
            parts.push(set.join(" and "));
        }
    }
    format!("arrays: {}", parts.join(", "))
}

/// `(2, 3)`, as Python prints a tuple of ints.
fn shape(block: &TensorBlock) -> String {
    let dims: Vec<String> = block
        .values()
        .shape()
        .iter()
        .map(usize::to_string)
        .collect();
    if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    }
}

/// `[system, atom]`.
fn names(names: &[String]) -> String {
    format!("[{}]", names.join(", "))
}

/// metatensor's block repr:
///
/// ```text
/// TensorBlock with shape (3, 1, 5)
///     samples: [system]
///     components: [component]
///     properties: [property]
///
///     gradients:
///         positions => TensorBlock with shape (2, 3, 1, 5)
/// ```
///
/// A gradient reached through `parameters` says so in its first line.
pub fn block(block: &TensorBlock, parameters: &[String]) -> String {
    let mut text = if parameters.is_empty() {
        format!("TensorBlock with shape {}\n", shape(block))
    } else {
        format!(
            "TensorBlock gradient for '{}', with shape {}\n",
            parameters.join("/"),
            shape(block)
        )
    };
    let _ = writeln!(text, "    samples: {}", names(block.samples().names()));
    let components = block.component_names();
    if !components.is_empty() {
        let _ = writeln!(text, "    components: {}", names(&components));
    }
    let _ = write!(
        text,
        "    properties: {}",
        names(block.properties().names())
    );
    if !block.gradients().is_empty() {
        text.push_str("\n\n    gradients:");
        let width = block
            .gradients()
            .keys()
            .map(|p| p.chars().count())
            .max()
            .unwrap_or(0);
        for (parameter, gradient) in block.gradients() {
            let padding = " ".repeat(width - parameter.chars().count());
            let _ = write!(
                text,
                "\n        {parameter}{padding} => TensorBlock with shape {}",
                shape(gradient)
            );
        }
    }
    text
}

/// `string` centred in `width` columns (the extra space after it), as
/// metatensor's `_print_string_center` does.
fn centred(text: &mut String, string: &str, width: usize) {
    let delta = width.saturating_sub(string.chars().count());
    let before = delta / 2;
    text.push_str(&" ".repeat(before));
    text.push_str(string);
    text.push_str(&" ".repeat(delta - before));
}

/// metatensor's `TensorMap.print(max_keys)`: a header, the key names and
/// one line per block (at most `max_keys` of them, all when negative).
pub fn tensor(map: &TensorMap, max_keys: i64) -> String {
    let count = map.blocks().len();
    let shown = usize::try_from(max_keys).map_or(count, |max| max.min(count));
    let keys = map.keys();
    let mut text = format!(
        "TensorMap with {count} {}\n",
        if count == 1 { "block" } else { "blocks" }
    );
    let n_dimensions = keys.size().max(1);
    let rows: Vec<Vec<String>> = (0..shown)
        .map(|i| keys.row(i).iter().map(i32::to_string).collect())
        .collect();
    let mut widths = vec![0; n_dimensions];
    for row in &rows {
        for (width, value) in widths.iter_mut().zip(row) {
            *width = (*width).max(value.len() + 2);
        }
    }
    let _ = writeln!(text, "    keys: {}", names(keys.names()));
    text.push_str("    blocks:\n");
    for (i, row) in rows.iter().enumerate() {
        text.push_str("      ");
        for (d, &width) in widths.iter().enumerate() {
            centred(&mut text, row.get(d).map_or("", String::as_str), width);
        }
        let _ = writeln!(
            text,
            "  => TensorBlock with shape {}",
            shape(&map.blocks()[i])
        );
    }
    if shown < count {
        text.push_str("      ");
        for &width in &widths {
            centred(&mut text, "", width);
        }
        text.push_str(" ...\n");
    }
    let trimmed = text.trim_end_matches('\n').len();
    text.truncate(trimmed);
    text
}
