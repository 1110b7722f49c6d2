//! NPY headers: our own reader and writer.
//!
//! An NPY file is a preamble (magic `\x93NUMPY`, a version, the header
//! length), a header (a Python dict literal with `descr`, `fortran_order` and
//! `shape`, space-padded so that the data starts on a multiple of 64 bytes),
//! then the data. The reader treats its input as hostile: the header length
//! is capped, numbers use checked arithmetic, and the grammar is a small,
//! depth-limited subset of Python literals.

use crate::dtype::{ByteOrder, DType};
use crate::error::{Error, Result};
use crate::io::bytes::{le16, le32};

/// The first bytes of every NPY file.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Headers longer than this are refused by the reader, and never written
/// (see `limits.rs`).
pub const MAX_HEADER_LEN: usize = crate::limits::MAX_NPY_HEADER;

/// Header blocks are padded to this size, so data is aligned in the file.
pub const HEADER_ALIGNMENT: usize = 64;

/// The element description of an NPY array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Descr {
    /// a plain element type: `'<f8'`
    Simple(DType, ByteOrder),
    /// a structured type, as Labels use: `[('system', '<i4'), ('atom', '<i4')]`
    Fields(Vec<(String, DType, ByteOrder)>),
}

/// A parsed NPY header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// element description
    pub descr: Descr,
    /// whether the data is in column-major order
    pub fortran_order: bool,
    /// shape of the array
    pub shape: Vec<usize>,
    /// bytes before the data: preamble and header
    pub len: usize,
}

impl Header {
    /// Size of one element (of one record for structured types).
    pub fn item_size(&self) -> usize {
        match &self.descr {
            Descr::Simple(dtype, _) => dtype.size(),
            Descr::Fields(fields) => fields.iter().map(|(_, dtype, _)| dtype.size()).sum(),
        }
    }

    /// Bytes of data the header announces, or an error when that overflows.
    pub fn data_len(&self) -> Result<usize> {
        self.shape
            .iter()
            .try_fold(self.item_size(), |acc, &dim| acc.checked_mul(dim))
            .filter(|&len| isize::try_from(len).is_ok())
            .ok_or_else(|| Error::format(format!("npy shape {:?} is too large", self.shape)))
    }
}

/// Length of the preamble and header, read from the first bytes of an NPY
/// file (`prefix` holds at least 12 bytes, or the whole file if shorter).
/// Returns `(preamble length, header text length)`.
pub fn header_extent(prefix: &[u8]) -> Result<(usize, usize)> {
    if prefix.len() < 10 || &prefix[..6] != MAGIC {
        return Err(Error::format(
            "not an npy array: the magic string is missing",
        ));
    }
    if prefix[7] != 0 {
        return Err(Error::format(format!(
            "unsupported npy format version {}.{}",
            prefix[6], prefix[7]
        )));
    }
    let (preamble, len) = match prefix[6] {
        1 => (10, usize::from(le16(prefix, 8))),
        2 | 3 => {
            if prefix.len() < 12 {
                return Err(Error::format("npy preamble is truncated"));
            }
            (12, le32(prefix, 8) as usize)
        }
        major => {
            return Err(Error::format(format!(
                "unsupported npy format version {major}.{}",
                prefix[7]
            )))
        }
    };
    if len > MAX_HEADER_LEN {
        return Err(Error::format(format!(
            "npy header of {len} bytes is longer than the {MAX_HEADER_LEN} bytes allowed"
        )));
    }
    Ok((preamble, len))
}

/// Parse the header text (after the preamble).
pub fn parse_header(text: &[u8], preamble: usize) -> Result<Header> {
    let text =
        std::str::from_utf8(text).map_err(|_| Error::format("npy header is not valid text"))?;
    if let Some(header) = parse_canonical(text, preamble) {
        return Ok(header);
    }
    parse_header_general(text, preamble)
}

/// [`parse_header`] through the general parser of the header grammar.
fn parse_header_general(text: &str, preamble: usize) -> Result<Header> {
    let mut parser = Parser { text, pos: 0 };
    let value = parser.value(0)?;
    parser.skip_space();
    if parser.pos != parser.text.len() {
        return Err(Error::format("unexpected text after the npy header dict"));
    }
    let Literal::Dict(items) = value else {
        return Err(Error::format("npy header is not a dict"));
    };
    let (mut descr, mut fortran_order, mut shape) = (None, None, None);
    for (key, value) in items {
        match key {
            "descr" => descr = Some(parse_descr(&value)?),
            "fortran_order" => match value {
                Literal::Bool(b) => fortran_order = Some(b),
                _ => return Err(Error::format("npy 'fortran_order' is not True or False")),
            },
            "shape" => shape = Some(parse_shape(&value)?),
            other => {
                return Err(Error::format(format!(
                    "unexpected key '{other}' in npy header"
                )))
            }
        }
    }
    let missing = |key| Error::format(format!("npy header has no '{key}'"));
    Ok(Header {
        descr: descr.ok_or_else(|| missing("descr"))?,
        fortran_order: fortran_order.ok_or_else(|| missing("fortran_order"))?,
        shape: shape.ok_or_else(|| missing("shape"))?,
        len: preamble + text.len(),
    })
}

/// Parse a whole header from the start of `bytes`.
pub fn read_header(bytes: &[u8]) -> Result<Header> {
    let (preamble, len) = header_extent(bytes)?;
    let text = bytes
        .get(preamble..preamble + len)
        .ok_or_else(|| Error::format("npy header is truncated"))?;
    parse_header(text, preamble)
}

/// The header exactly as blockmap and numpy write it, `{'descr': D,
/// 'fortran_order': B, 'shape': (...), }` padded with spaces and a
/// newline, read without building values (a map's load parses one header
/// per array and per labels); `None` for any other spelling, which the
/// general parser then reads. What it accepts, the general parser accepts
/// with the same result (tested).
fn parse_canonical(text: &str, preamble: usize) -> Option<Header> {
    fn quoted(rest: &str) -> Option<(&str, &str)> {
        let rest = rest.strip_prefix('\'')?;
        let end = rest.find('\'')?;
        let value = &rest[..end];
        // escapes are the general parser's business
        (!value.contains('\\')).then(|| (value, &rest[end + 1..]))
    }
    let rest = text.strip_prefix("{'descr': ")?;
    let (descr, rest) = if rest.starts_with('\'') {
        let (descr, rest) = quoted(rest)?;
        let (dtype, order) = DType::parse_descr(descr).ok()?;
        (Descr::Simple(dtype, order), rest)
    } else {
        let mut rest = rest.strip_prefix('[')?;
        let mut fields = Vec::new();
        loop {
            if let Some(after) = rest.strip_prefix(']') {
                rest = after;
                break;
            }
            if !fields.is_empty() {
                rest = rest.strip_prefix(", ")?;
            }
            let (name, after) = quoted(rest.strip_prefix('(')?)?;
            let (descr, after) = quoted(after.strip_prefix(", ")?)?;
            let (dtype, order) = DType::parse_descr(descr).ok()?;
            fields.push((name.to_string(), dtype, order));
            rest = after.strip_prefix(')')?;
        }
        (Descr::Fields(fields), rest)
    };
    let rest = rest.strip_prefix(", 'fortran_order': ")?;
    let (fortran_order, rest) = match rest.strip_prefix("False") {
        Some(rest) => (false, rest),
        None => (true, rest.strip_prefix("True")?),
    };
    let rest = rest.strip_prefix(", 'shape': (")?;
    let end = rest.find(')')?;
    let (dims, rest) = (&rest[..end], &rest[end + 1..]);
    let mut shape = Vec::new();
    if !dims.is_empty() {
        // one dimension is `(n,)` (`(n)` is no tuple); more are `(a, b)`
        // with a trailing comma or none
        let trailing_comma = dims.ends_with(',');
        let dims = dims.strip_suffix(',').unwrap_or(dims);
        for dim in dims.split(", ") {
            if dim.is_empty() || dim.len() > 18 || !dim.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            shape.push(dim.parse::<usize>().ok()?);
        }
        if shape.len() == 1 && !trailing_comma {
            return None;
        }
    }
    let rest = rest.strip_prefix(", }")?;
    if !rest.bytes().all(|b| b == b' ' || b == b'\n') {
        return None;
    }
    Some(Header {
        descr,
        fortran_order,
        shape,
        len: preamble + text.len(),
    })
}

fn parse_descr(value: &Literal) -> Result<Descr> {
    match value {
        Literal::Str(descr) => {
            let (dtype, order) =
                DType::parse_descr(descr).map_err(|e| Error::format(e.to_string()))?;
            Ok(Descr::Simple(dtype, order))
        }
        Literal::List(fields) => {
            let mut parsed = Vec::with_capacity(fields.len());
            for field in fields {
                match field {
                    Literal::Tuple(items) => match items.as_slice() {
                        [Literal::Str(name), Literal::Str(descr)] => {
                            let (dtype, order) = DType::parse_descr(descr)
                                .map_err(|e| Error::format(e.to_string()))?;
                            parsed.push((name.to_string(), dtype, order));
                        }
                        _ => {
                            return Err(Error::format(
                                "npy structured dtype fields must be ('name', 'type') pairs",
                            ))
                        }
                    },
                    _ => return Err(Error::format("npy structured dtype fields must be tuples")),
                }
            }
            Ok(Descr::Fields(parsed))
        }
        _ => Err(Error::format(
            "npy 'descr' must be a string or a list of fields",
        )),
    }
}

fn parse_shape(value: &Literal) -> Result<Vec<usize>> {
    let Literal::Tuple(items) = value else {
        return Err(Error::format("npy 'shape' must be a tuple"));
    };
    items
        .iter()
        .map(|item| match item {
            Literal::Int(n) => usize::try_from(*n)
                .map_err(|_| Error::format(format!("npy shape has a negative dimension {n}"))),
            _ => Err(Error::format("npy shape dimensions must be integers")),
        })
        .collect()
}

/// The Python literals the header grammar knows (a dict of them is the
/// header); strings borrow the header text.
#[derive(Debug)]
enum Literal<'a> {
    Str(&'a str),
    Bool(bool),
    Int(i64),
    Tuple(Vec<Literal<'a>>),
    List(Vec<Literal<'a>>),
    Dict(Vec<(&'a str, Literal<'a>)>),
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

/// Nesting deeper than this is refused (the real grammar needs 3).
const MAX_DEPTH: usize = 4;

impl<'a> Parser<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn error(&self, what: &str) -> Error {
        Error::format(format!("invalid npy header at byte {}: {what}", self.pos))
    }

    fn skip_space(&mut self) {
        while self.pos < self.text.len() && self.bytes()[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.bytes().get(self.pos).copied()
    }

    fn expect(&mut self, byte: u8) -> Result<()> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected '{}'", byte as char)))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Literal<'a>> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        match self.peek() {
            Some(b'{') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        return Ok(Literal::Dict(items));
                    }
                    let Literal::Str(key) = self.value(depth + 1)? else {
                        return Err(self.error("dict keys must be strings"));
                    };
                    self.expect(b':')?;
                    let value = self.value(depth + 1)?;
                    items.push((key, value));
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {}
                        _ => return Err(self.error("expected ',' or '}'")),
                    }
                }
            }
            Some(open @ (b'(' | b'[')) => {
                self.pos += 1;
                let close = if open == b'(' { b')' } else { b']' };
                let mut items = Vec::new();
                let mut had_comma = false;
                loop {
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        // `(3)` is an integer in Python, not a tuple
                        if open == b'(' && items.len() == 1 && !had_comma {
                            return Err(self.error("a one-element tuple needs a trailing comma"));
                        }
                        return Ok(if open == b'(' {
                            Literal::Tuple(items)
                        } else {
                            Literal::List(items)
                        });
                    }
                    items.push(self.value(depth + 1)?);
                    match self.peek() {
                        Some(b',') => {
                            self.pos += 1;
                            had_comma = true;
                        }
                        Some(c) if c == close => {}
                        _ => return Err(self.error("expected ',' or a closing bracket")),
                    }
                }
            }
            Some(quote @ (b'\'' | b'"')) => {
                self.pos += 1;
                let start = self.pos;
                while self.pos < self.text.len() && self.bytes()[self.pos] != quote {
                    if self.bytes()[self.pos] == b'\\' {
                        return Err(self.error("escapes in strings are not supported"));
                    }
                    self.pos += 1;
                }
                if self.pos >= self.text.len() {
                    return Err(self.error("unterminated string"));
                }
                // quotes are ASCII, so both ends are character boundaries
                let string = &self.text[start..self.pos];
                self.pos += 1;
                Ok(Literal::Str(string))
            }
            Some(b'T') if self.bytes()[self.pos..].starts_with(b"True") => {
                self.pos += 4;
                Ok(Literal::Bool(true))
            }
            Some(b'F') if self.bytes()[self.pos..].starts_with(b"False") => {
                self.pos += 5;
                Ok(Literal::Bool(false))
            }
            Some(b'-' | b'0'..=b'9') => {
                let start = self.pos;
                if self.bytes()[self.pos] == b'-' {
                    self.pos += 1;
                }
                while self.pos < self.text.len() && self.bytes()[self.pos].is_ascii_digit() {
                    self.pos += 1;
                }
                let digits = &self.text[start..self.pos];
                let n = digits
                    .parse::<i64>()
                    .map_err(|_| self.error(&format!("invalid or too large integer '{digits}'")))?;
                // Python 2 numpy wrote long integers as `3L`
                if self.bytes().get(self.pos) == Some(&b'L') {
                    self.pos += 1;
                }
                Ok(Literal::Int(n))
            }
            Some(_) => Err(self.error("unexpected character")),
            None => Err(self.error("unexpected end of header")),
        }
    }
}

/// The `descr` text of a plain array of `dtype` in native order: `'<f8'`.
pub fn simple_descr(dtype: DType) -> String {
    format!("'{}'", dtype.native_descr())
}

/// The `descr` text of Labels: `[('system', '<i4'), ('atom', '<i4')]`.
pub fn labels_descr(names: &[String]) -> String {
    let fields: Vec<String> = names
        .iter()
        .map(|name| format!("('{name}', '{}')", DType::I4.native_descr()))
        .collect();
    format!("[{}]", fields.join(", "))
}

/// A complete NPY preamble + header for C-ordered data, padded with spaces
/// so that its length is a multiple of [`HEADER_ALIGNMENT`]. Version 1.0,
/// or 2.0 when the header does not fit in 65535 bytes; an error when it
/// does not fit in 4 GiB either (labels with that many names).
pub fn write_header(descr: &str, shape: &[usize]) -> Result<Vec<u8>> {
    let shape = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        dims => {
            let dims: Vec<String> = dims.iter().map(usize::to_string).collect();
            format!("({})", dims.join(", "))
        }
    };
    let dict = format!("{{'descr': {descr}, 'fortran_order': False, 'shape': {shape}, }}");
    let padded = |preamble: usize| {
        let unpadded = preamble + dict.len() + 1;
        unpadded.div_ceil(HEADER_ALIGNMENT) * HEADER_ALIGNMENT - preamble
    };
    let (version, preamble, length) = if let Ok(short) = u16::try_from(padded(10)) {
        (1u8, 10, short.to_le_bytes().to_vec())
    } else {
        let long = u32::try_from(padded(12))
            .map_err(|_| Error::invalid("the NPY header would be larger than 4 GiB"))?;
        (2u8, 12, long.to_le_bytes().to_vec())
    };
    let header_len = padded(preamble);
    if header_len > MAX_HEADER_LEN {
        return Err(Error::invalid(format!(
            "the NPY header would be {header_len} bytes, more than the {MAX_HEADER_LEN} \
             that readers accept"
        )));
    }
    let mut out = Vec::with_capacity(preamble + header_len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    out.extend_from_slice(&length);
    out.extend_from_slice(dict.as_bytes());
    out.resize(preamble + header_len - 1, b' ');
    out.push(b'\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_canonical_reader_agrees_with_the_parser() {
        let mut texts = vec![];
        for descr in [
            "'<f8'",
            "'<i4'",
            "'|u1'",
            "'>f4'",
            "[('system', '<i4'), ('atom', '<i4')]",
            "[('a', '<i4')]",
            "[]",
        ] {
            for fortran in ["False", "True"] {
                for shape in [
                    "()",
                    "(3,)",
                    "(3, 4)",
                    "(0, 5, 6)",
                    "(3, 4,)",
                    "(3)",
                    "(+3,)",
                    "(3 ,)",
                    "(,)",
                    "(99999999999999999999,)",
                ] {
                    texts.push(format!(
                        "{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}   \n"
                    ));
                }
            }
        }
        texts.push("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), } x\n".into());
        texts.push("{'descr': 'a\\'b', 'fortran_order': False, 'shape': (3,), }\n".into());
        texts.push("{'descr': [('a', '<i4'),], 'fortran_order': False, 'shape': (3,), }\n".into());
        let mut fast_count = 0;
        for text in &texts {
            if let Some(fast) = super::parse_canonical(text, 10) {
                fast_count += 1;
                assert_eq!(
                    Some(fast),
                    super::parse_header_general(text, 10).ok(),
                    "{text}"
                );
            }
        }
        assert!(fast_count >= 40, "{fast_count}");
        // what blockmap writes is read by the fast path
        let header = super::write_header("'<f8'", &[2, 3]).unwrap();
        assert!(super::parse_canonical(std::str::from_utf8(&header[10..]).unwrap(), 10).is_some());
        let labels =
            super::write_header(&super::labels_descr(&["a".into(), "b".into()]), &[4]).unwrap();
        assert!(super::parse_canonical(std::str::from_utf8(&labels[10..]).unwrap(), 10).is_some());
    }

    use super::*;

    #[test]
    fn round_trip() {
        for shape in [vec![], vec![3], vec![3, 3, 4], vec![0, 2]] {
            let bytes = write_header(&simple_descr(DType::F8), &shape).unwrap();
            assert_eq!(bytes.len() % 64, 0);
            assert_eq!(*bytes.last().unwrap(), b'\n');
            let header = read_header(&bytes).unwrap();
            assert_eq!(header.shape, shape);
            assert_eq!(header.len, bytes.len());
            assert_eq!(header.descr, Descr::Simple(DType::F8, ByteOrder::NATIVE));
            assert!(!header.fortran_order);
        }
        let names = vec!["system".to_string(), "atom".to_string()];
        let bytes = write_header(&labels_descr(&names), &[5]).unwrap();
        let header = read_header(&bytes).unwrap();
        assert_eq!(header.item_size(), 8);
        assert_eq!(header.data_len().unwrap(), 40);
        let Descr::Fields(fields) = header.descr else {
            panic!("labels have fields")
        };
        assert_eq!(fields[1].0, "atom");
    }

    #[test]
    fn numpy_and_metatensor_spellings() {
        let numpy = b"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 3, 4), }";
        let metatensor = b"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 3, 4, ), }";
        let old = b"{\"descr\":\"|u1\",\"fortran_order\":True,\"shape\":(2L,)}   \n";
        assert_eq!(parse_header(numpy, 10).unwrap().shape, vec![3, 3, 4]);
        assert_eq!(parse_header(metatensor, 10).unwrap().shape, vec![3, 3, 4]);
        let header = parse_header(old, 10).unwrap();
        assert!(header.fortran_order);
        assert_eq!(header.descr, Descr::Simple(DType::U1, ByteOrder::NATIVE));
    }

    #[test]
    fn hostile_headers() {
        let bad: &[&[u8]] = &[
            b"{'descr': '<f8', 'fortran_order': False}",
            b"{'descr': '<f8', 'fortran_order': 0, 'shape': (1,)}",
            b"{'descr': '<f8', 'fortran_order': False, 'shape': (-1,)}",
            b"{'descr': '<f8', 'fortran_order': False, 'shape': (1.5,)}",
            b"{'descr': '<f8', 'fortran_order': False, 'shape': (3)}",
            b"{'descr': '|O', 'fortran_order': False, 'shape': (1,)}",
            b"{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'extra': 1}",
            b"{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,)}",
            b"{'descr': [[[[[[]]]]]], 'fortran_order': False, 'shape': (1,)}",
            b"{'descr': '<f8', 'fortran_order': False, 'shape': (1,)} trailing",
            b"{'descr': '<f8",
            b"['not', 'a', 'dict']",
            b"",
        ];
        for text in bad {
            assert!(
                parse_header(text, 10).is_err(),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
        let huge = parse_header(
            b"{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 1099511627776)}",
            10,
        )
        .unwrap();
        assert!(huge.data_len().is_err());
    }

    #[test]
    fn preamble_checks() {
        assert!(header_extent(b"\x93NUMPY\x01\x00").is_err());
        assert!(header_extent(b"NOTNPY\x01\x00\x10\x00").is_err());
        assert!(header_extent(b"\x93NUMPY\x04\x00\x10\x00").is_err());
        assert!(header_extent(b"\x93NUMPY\x01\x07\x10\x00").is_err());
        assert!(header_extent(b"\x93NUMPY\x02\x00\xff\xff\xff\xff").is_err());
        assert_eq!(
            header_extent(b"\x93NUMPY\x01\x00\xff\xff").unwrap(),
            (10, 65535)
        );
        assert!(read_header(b"\x93NUMPY\x01\x00\xff\xff{'descr'").is_err());
    }

    #[test]
    fn headers_the_reader_refuses_are_not_written() {
        let names: Vec<String> = (0..100_000).map(|i| format!("dimension_{i}")).collect();
        assert!(write_header(&labels_descr(&names), &[1]).is_err());
    }

    #[test]
    fn long_headers_use_version_2() {
        let names: Vec<String> = (0..3000).map(|i| format!("dimension_{i}")).collect();
        let bytes = write_header(&labels_descr(&names), &[1]).unwrap();
        assert_eq!(bytes[6], 2);
        assert_eq!(bytes.len() % 64, 0);
        let header = read_header(&bytes).unwrap();
        assert_eq!(header.len, bytes.len());
    }
}
