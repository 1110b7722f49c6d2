//! Element types, their npy `descr` strings, and byte order.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The element types a block's values can have (those of metatensor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    /// IEEE half-precision float
    F2,
    /// IEEE single-precision float
    F4,
    /// IEEE double-precision float
    F8,
    /// signed 8-bit integer
    I1,
    /// signed 16-bit integer
    I2,
    /// signed 32-bit integer
    I4,
    /// signed 64-bit integer
    I8,
    /// unsigned 8-bit integer
    U1,
    /// unsigned 16-bit integer
    U2,
    /// unsigned 32-bit integer
    U4,
    /// unsigned 64-bit integer
    U8,
    /// boolean, one byte
    B1,
    /// complex of two single-precision floats
    C8,
    /// complex of two double-precision floats
    C16,
}

/// Byte order of multi-byte elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ByteOrder {
    /// least significant byte first (x86, ARM)
    Little,
    /// most significant byte first
    Big,
}

impl ByteOrder {
    /// The byte order of this machine.
    pub const NATIVE: ByteOrder = if cfg!(target_endian = "little") {
        ByteOrder::Little
    } else {
        ByteOrder::Big
    };

    /// The npy prefix character of this byte order.
    pub fn prefix(self) -> char {
        match self {
            ByteOrder::Little => '<',
            ByteOrder::Big => '>',
        }
    }
}

impl DType {
    /// Every element type, in a fixed order.
    pub const ALL: [DType; 14] = [
        DType::F2,
        DType::F4,
        DType::F8,
        DType::I1,
        DType::I2,
        DType::I4,
        DType::I8,
        DType::U1,
        DType::U2,
        DType::U4,
        DType::U8,
        DType::B1,
        DType::C8,
        DType::C16,
    ];

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::I1 | DType::U1 | DType::B1 => 1,
            DType::F2 | DType::I2 | DType::U2 => 2,
            DType::F4 | DType::I4 | DType::U4 => 4,
            DType::F8 | DType::I8 | DType::U8 | DType::C8 => 8,
            DType::C16 => 16,
        }
    }

    /// Alignment an element needs to be read through a typed pointer.
    pub fn alignment(self) -> usize {
        match self {
            DType::C8 => 4,
            DType::C16 => 8,
            other => other.size(),
        }
    }

    /// Whether every value of this type has an exact equal in `to`: a cast
    /// into it loses nothing. Stricter than numpy's `"safe"` casting, which
    /// takes int64 to float64 (whose 53-bit mantissa rounds large
    /// integers): integers go to floats only when the mantissa holds them.
    pub fn casts_losslessly_to(self, to: DType) -> bool {
        // (kind, bits of the value; for floats the mantissa's, with its
        // implicit bit, for complex numbers that of each part)
        fn kind(dtype: DType) -> (char, u32, u32) {
            match dtype {
                DType::B1 => ('b', 1, 1),
                DType::U1 => ('u', 8, 8),
                DType::U2 => ('u', 16, 16),
                DType::U4 => ('u', 32, 32),
                DType::U8 => ('u', 64, 64),
                DType::I1 => ('i', 8, 8),
                DType::I2 => ('i', 16, 16),
                DType::I4 => ('i', 32, 32),
                DType::I8 => ('i', 64, 64),
                DType::F2 => ('f', 16, 11),
                DType::F4 => ('f', 32, 24),
                DType::F8 => ('f', 64, 53),
                DType::C8 => ('c', 32, 24),
                DType::C16 => ('c', 64, 53),
            }
        }
        if self == to {
            return true;
        }
        let (from_kind, from_bits, _) = kind(self);
        let (to_kind, to_bits, to_mantissa) = kind(to);
        // the magnitude bits of an integer (a sign takes none of them)
        let magnitude = match from_kind {
            'b' => 1,
            'u' => from_bits,
            _ => from_bits - 1,
        };
        match (from_kind, to_kind) {
            ('b', _) => true,
            ('u', 'u') | ('i', 'i') | ('f', 'f' | 'c') | ('c', 'c') => to_bits >= from_bits,
            ('u', 'i') => to_bits > from_bits,
            ('u' | 'i', 'f' | 'c') => to_mantissa >= magnitude,
            _ => false,
        }
    }

    /// The type code without byte order, as in npy `descr` strings: `"f8"`.
    pub fn code(self) -> &'static str {
        match self {
            DType::F2 => "f2",
            DType::F4 => "f4",
            DType::F8 => "f8",
            DType::I1 => "i1",
            DType::I2 => "i2",
            DType::I4 => "i4",
            DType::I8 => "i8",
            DType::U1 => "u1",
            DType::U2 => "u2",
            DType::U4 => "u4",
            DType::U8 => "u8",
            DType::B1 => "b1",
            DType::C8 => "c8",
            DType::C16 => "c16",
        }
    }

    /// The npy `descr` string of native-order data: `"<f8"` on little-endian
    /// machines. One-byte types get the native prefix too (not numpy's `|`),
    /// because metatensor-core rejects `|`.
    pub fn native_descr(self) -> String {
        format!("{}{}", ByteOrder::NATIVE.prefix(), self.code())
    }

    /// Parse a type code without byte order (`"f8"`).
    pub fn from_code(code: &str) -> Result<DType> {
        DType::ALL
            .into_iter()
            .find(|dtype| dtype.code() == code)
            .ok_or_else(|| {
                Error::UnsupportedType(format!(
                    "unsupported element type '{code}': expected one of \
                     f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1 c8 c16"
                ))
            })
    }

    /// Parse an npy / numpy `descr` string such as `"<f8"`, `">i4"`, `"|u1"`
    /// or `"=c16"`, returning the element type and the byte order of the data.
    pub fn parse_descr(descr: &str) -> Result<(DType, ByteOrder)> {
        let (order, code) = match descr.chars().next() {
            Some('<') => (Some(ByteOrder::Little), &descr[1..]),
            Some('>') => (Some(ByteOrder::Big), &descr[1..]),
            Some('=') => (Some(ByteOrder::NATIVE), &descr[1..]),
            Some('|') => (None, &descr[1..]),
            _ => (Some(ByteOrder::NATIVE), descr),
        };
        let dtype = DType::from_code(code)?;
        let order = match order {
            Some(order) => order,
            None if dtype.size() == 1 => ByteOrder::NATIVE,
            None => {
                return Err(Error::UnsupportedType(format!(
                    "element type '{descr}' has no byte order ('|' is only for one-byte types)"
                )))
            }
        };
        Ok((dtype, order))
    }
}

impl DType {
    /// numpy's name of the type (`"float64"`), which is also torch's
    /// (`torch.float64`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F2 => "float16",
            DType::F4 => "float32",
            DType::F8 => "float64",
            DType::I1 => "int8",
            DType::I2 => "int16",
            DType::I4 => "int32",
            DType::I8 => "int64",
            DType::U1 => "uint8",
            DType::U2 => "uint16",
            DType::U4 => "uint32",
            DType::U8 => "uint64",
            DType::B1 => "bool",
            DType::C8 => "complex64",
            DType::C16 => "complex128",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Rust element types that map to a [`DType`]; used for typed views.
///
/// # Safety
///
/// `DTYPE` must describe `Self` exactly: same size and alignment, and every
/// bit pattern of that size must be a valid `Self` (so `bool` is not an
/// `Element`: a byte other than 0 or 1 is not a valid `bool`).
pub unsafe trait Element: Copy + Send + Sync + 'static {
    /// The element type of `Self`.
    const DTYPE: DType;
}

macro_rules! element {
    ($($ty:ty => $dtype:ident),* $(,)?) => {$(
        // SAFETY: fixed-size integer/float, all bit patterns valid.
        unsafe impl Element for $ty {
            const DTYPE: DType = DType::$dtype;
        }
    )*};
}

element!(
    f32 => F4, f64 => F8,
    i8 => I1, i16 => I2, i32 => I4, i64 => I8,
    u8 => U1, u16 => U2, u32 => U4, u64 => U8,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lossless_casts() {
        use DType::*;
        for (from, to) in [
            (I4, F8),
            (F4, F8),
            (U2, I4),
            (I2, F4),
            (B1, U1),
            (U1, F2),
            (F8, C16),
        ] {
            assert!(from.casts_losslessly_to(to), "{from} -> {to}");
        }
        for (from, to) in [
            (F8, I4),
            (F8, F4),
            (I8, F8),
            (I4, F4),
            (U4, I4),
            (I1, U8),
            (C8, F8),
        ] {
            assert!(!from.casts_losslessly_to(to), "{from} -> {to}");
        }
    }

    #[test]
    fn descr_round_trip() {
        for dtype in DType::ALL {
            let (parsed, order) = DType::parse_descr(&dtype.native_descr()).unwrap();
            assert_eq!(parsed, dtype);
            assert_eq!(order, ByteOrder::NATIVE);
            assert_eq!(DType::from_code(dtype.code()).unwrap(), dtype);
            assert!(dtype.size().is_multiple_of(dtype.alignment()));
        }
    }

    #[test]
    fn byte_orders() {
        assert_eq!(
            DType::parse_descr(">i4").unwrap(),
            (DType::I4, ByteOrder::Big)
        );
        assert_eq!(
            DType::parse_descr("<c16").unwrap(),
            (DType::C16, ByteOrder::Little)
        );
        assert_eq!(
            DType::parse_descr("=f2").unwrap(),
            (DType::F2, ByteOrder::NATIVE)
        );
        assert_eq!(
            DType::parse_descr("|u1").unwrap(),
            (DType::U1, ByteOrder::NATIVE)
        );
        assert_eq!(
            DType::parse_descr("|b1").unwrap(),
            (DType::B1, ByteOrder::NATIVE)
        );
        assert_eq!(
            DType::parse_descr("f8").unwrap(),
            (DType::F8, ByteOrder::NATIVE)
        );
    }

    #[test]
    fn rejected_descr() {
        for bad in ["|f8", "<O", "<U10", "", "<", "<f16", "V8", "<M8"] {
            assert!(DType::parse_descr(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn display_names_numpy() {
        assert_eq!(DType::F8.to_string(), "float64");
        assert_eq!(DType::C8.to_string(), "complex64");
    }
}
