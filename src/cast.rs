//! Element casts between the dtypes blockmap holds, with the results of
//! numpy's `ndarray.astype` (unsafe casting), so that `to(dtype=...)` and
//! the casts of `join` never call back into Python for numpy-backed data.
//!
//! numpy casts with C's conversions, which this module follows:
//!
//! - integers into integers wrap (two's complement);
//! - integers into `float32`/`float64` round to nearest; into `float16`
//!   through `float32` (numpy converts `(float)x` to half);
//! - floats into floats round to nearest, half included (no double
//!   rounding: `float64` goes straight to `float16`);
//! - floats into integers truncate toward zero. Where the value does not
//!   fit (NaN, infinities, out of range) C leaves the result undefined and
//!   numpy warns ("invalid value encountered in cast"); the values here are
//!   those of numpy's x86-64 builds, measured with numpy 2.4: the 32-bit
//!   conversion (`cvttsd2si`, whose out-of-range result is `i32::MIN`) for
//!   `int8`..`int32` and `uint8`/`uint16` (then wrapped), the 64-bit one for
//!   `int64`, and for `uint32`/`uint64` the compiler's unsigned sequence
//!   (values from 2^31, resp. 2^63, shifted down first) — except `float16`
//!   into `uint32`, which goes through the 64-bit conversion. numpy's own
//!   answer for such a value depends on where it lies in the array: these
//!   are its vectorised loop's, while the scalar loop that ends an array
//!   may give others (-inf into `uint32`: `0x80000000`, and 0 in the last
//!   elements);
//! - anything into `bool` is `value != 0` (NaN is true; a complex number
//!   is true when either part is not zero); `bool` is 0 or 1;
//! - complex numbers into real types take the real part; real numbers into
//!   complex ones have a zero imaginary part.
//!
//! NaNs follow numpy bit for bit: its half-float conversions are done in
//! software (`npy_floatbits_to_halfbits` and its siblings), which keep a
//! NaN's sign, its signalling bit and the top of its payload (float16 into
//! float32 / float64 and back, complex64's parts included); the others are
//! the hardware's (float32 <-> float64: a signalling NaN comes out quiet).
//! So each float is held as its own type, never widened first: widening a
//! float32 to float64 would quiet it before it became a half.

// casting is this module's purpose: every `as` below is a conversion C
// (hence numpy) makes, truncating, wrapping or rounding on purpose
#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

use crate::dtype::DType;

/// One element, read from its source type: what every conversion starts
/// from. Floats and complex parts are held as their own type (half floats
/// by their bits), so that each conversion is the one numpy makes from
/// that type, NaN payloads included.
#[derive(Clone, Copy)]
enum Scalar {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Half(u16),
    Single(f32),
    Float(f64),
    ComplexSingle(f32, f32),
    Complex(f64, f64),
}

const TWO_31: f64 = 2_147_483_648.0;
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// C's `(int32_t)x` as x86-64 computes it: truncation, `i32::MIN` when the
/// result does not fit (NaN included).
fn trunc32(x: f64) -> i32 {
    if x > -TWO_31 - 1.0 && x < TWO_31 {
        // in range: `as` truncates toward zero
        x as i32
    } else {
        i32::MIN
    }
}

/// C's `(int64_t)x` as x86-64 computes it: truncation, `i64::MIN` when the
/// result does not fit (NaN included).
fn trunc64(x: f64) -> i64 {
    if (-TWO_63..TWO_63).contains(&x) {
        x as i64
    } else {
        i64::MIN
    }
}

/// C's `(uint32_t)x` as numpy's x86-64 builds compute it.
fn trunc_u32(x: f64) -> u32 {
    if x >= TWO_31 {
        trunc32(x - TWO_31).cast_unsigned() ^ 0x8000_0000
    } else {
        trunc32(x).cast_unsigned()
    }
}

/// C's `(uint64_t)x` as x86-64 computes it.
fn trunc_u64(x: f64) -> u64 {
    if x >= TWO_63 {
        trunc64(x - TWO_63).cast_unsigned() ^ (1 << 63)
    } else {
        trunc64(x).cast_unsigned()
    }
}

/// The exact value of a half float (its bits), NaN payload kept (numpy's
/// `npy_halfbits_to_doublebits`).
fn half_to_f64(bits: u16) -> f64 {
    let sign = u64::from(bits & 0x8000) << 48;
    let exponent = (bits >> 10) & 0x1f;
    let mantissa = u64::from(bits & 0x3ff);
    let magnitude = match exponent {
        0 => {
            // zero or subnormal: mantissa * 2^-24, exact in f64
            (mantissa as f64 * f64::powi(2.0, -24)).to_bits()
        }
        0x1f => (0x7ff << 52) | (mantissa << 42),
        _ => ((u64::from(exponent) + 1023 - 15) << 52) | (mantissa << 42),
    };
    f64::from_bits(sign | magnitude)
}

/// The exact value of a half float as a float32, NaN payload and
/// signalling bit kept (numpy's `npy_halfbits_to_floatbits`; the hardware
/// conversion of a double would quiet a signalling NaN).
fn half_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits & 0x8000) << 16;
    let magnitude = u32::from(bits & 0x7fff);
    let magnitude = if magnitude >= 0x7c00 {
        // infinities and NaNs: the payload shifted into place
        0x7f80_0000 | ((magnitude & 0x3ff) << 13)
    } else if magnitude >= 0x0400 {
        // normal: the exponent rebiased (127 - 15)
        (magnitude << 13) + (112 << 23)
    } else {
        // zero or subnormal: mantissa * 2^-24, exact in f32
        (magnitude as f32 * f32::from_bits(0x3380_0000)).to_bits()
    };
    f32::from_bits(sign | magnitude)
}

/// The half float of an infinity, or of a NaN whose payload's top bits
/// (signalling bit first) are the low 10 bits of `top`: numpy keeps them,
/// and makes the NaN `0x7c01` when none is set (`0x7c00` would read as an
/// infinity).
fn special_half(infinity: bool, top: u16) -> u16 {
    if infinity {
        0x7c00
    } else {
        0x7c00 | (top & 0x3ff).max(1)
    }
}

/// A half float's bits rounded to nearest, ties to even, from `kept` (the
/// bits a half keeps) and `rest` (the `shift` bits below them).
fn round_half(kept: u64, rest: u64, shift: u32) -> u64 {
    let halfway = 1u64 << (shift - 1);
    if rest > halfway || (rest == halfway && kept & 1 == 1) {
        kept + 1
    } else {
        kept
    }
}

/// `x` rounded to the nearest half float (ties to even), as numpy's
/// `npy_doublebits_to_halfbits`: too large for a half is an infinity, a
/// NaN keeps the top of its payload and stays a NaN.
fn f64_to_half(x: f64) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 48) & 0x8000) as u16;
    let magnitude = bits & 0x7fff_ffff_ffff_ffff;
    if magnitude >= 0x3f10_0000_0000_0000 {
        // 2^-14 and up: a normal half, an infinity or a NaN
        if magnitude >= 0x7ff0_0000_0000_0000 {
            return sign
                | special_half(magnitude == 0x7ff0_0000_0000_0000, (magnitude >> 42) as u16);
        }
        if magnitude >= 0x40f0_0000_0000_0000 {
            // 2^16 and up
            return sign | 0x7c00;
        }
        // the exponent rebiased (1023 - 15) and the top 10 bits of the
        // mantissa, rounded: a carry steps the exponent (up to infinity)
        let kept = (magnitude >> 42) - ((1023 - 15) << 10);
        let rounded = round_half(kept, magnitude & ((1 << 42) - 1), 42);
        return sign | rounded.min(0x7c00) as u16;
    }
    if magnitude < 0x3e60_0000_0000_0000 {
        // below 2^-25: zero
        return sign;
    }
    // a subnormal half counts units of 2^-24
    let exponent = (magnitude >> 52) as u32;
    let full = (magnitude & 0x000f_ffff_ffff_ffff) | (1 << 52);
    let shift = 1051 - exponent;
    sign | round_half(full >> shift, full & ((1 << shift) - 1), shift) as u16
}

/// `x` rounded to the nearest half float (ties to even), as numpy's
/// `npy_floatbits_to_halfbits`, from the float32 itself: a NaN keeps its
/// signalling bit and the top of its payload.
fn f32_to_half(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let magnitude = u64::from(bits & 0x7fff_ffff);
    if magnitude >= 0x3880_0000 {
        // 2^-14 and up: a normal half, an infinity or a NaN
        if magnitude >= 0x7f80_0000 {
            return sign | special_half(magnitude == 0x7f80_0000, (magnitude >> 13) as u16);
        }
        if magnitude >= 0x4780_0000 {
            // 2^16 and up
            return sign | 0x7c00;
        }
        let kept = (magnitude >> 13) - ((127 - 15) << 10);
        let rounded = round_half(kept, magnitude & 0x1fff, 13);
        return sign | rounded.min(0x7c00) as u16;
    }
    if magnitude < 0x3300_0000 {
        // below 2^-25: zero
        return sign;
    }
    let exponent = (magnitude >> 23) as u32;
    let full = (magnitude & 0x007f_ffff) | (1 << 23);
    let shift = 126 - exponent;
    sign | round_half(full >> shift, full & ((1 << shift) - 1), shift) as u16
}

impl Scalar {
    /// The real part, as a double (exact but for 64-bit integers).
    fn real(self) -> f64 {
        match self {
            Scalar::Bool(b) => f64::from(u8::from(b)),
            Scalar::Int(i) => i as f64,
            Scalar::UInt(u) => u as f64,
            Scalar::Half(bits) => half_to_f64(bits),
            // the hardware's conversion, as numpy's (a signalling NaN comes
            // out quiet)
            Scalar::Single(x) | Scalar::ComplexSingle(x, _) => f64::from(x),
            Scalar::Float(x) | Scalar::Complex(x, _) => x,
        }
    }

    /// The imaginary part as a double (zero for real numbers).
    fn imaginary(self) -> f64 {
        match self {
            Scalar::ComplexSingle(_, im) => f64::from(im),
            Scalar::Complex(_, im) => im,
            _ => 0.0,
        }
    }

    /// The imaginary part as a float32 (zero for real numbers).
    fn imaginary_f32(self) -> f32 {
        match self {
            Scalar::ComplexSingle(_, im) => im,
            Scalar::Complex(_, im) => im as f32,
            _ => 0.0,
        }
    }

    fn to_f64(self) -> f64 {
        self.real()
    }

    fn to_f32(self) -> f32 {
        match self {
            Scalar::Int(i) => i as f32,
            Scalar::UInt(u) => u as f32,
            Scalar::Half(bits) => half_to_f32(bits),
            Scalar::Single(x) | Scalar::ComplexSingle(x, _) => x,
            other => other.real() as f32,
        }
    }

    fn to_half(self) -> u16 {
        match self {
            Scalar::Half(bits) => bits,
            // integers go through float32, as numpy's `(float)x`
            Scalar::Int(_) | Scalar::UInt(_) => f32_to_half(self.to_f32()),
            Scalar::Single(x) | Scalar::ComplexSingle(x, _) => f32_to_half(x),
            other => f64_to_half(other.real()),
        }
    }

    fn to_bool(self) -> bool {
        match self {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::UInt(u) => u != 0,
            Scalar::Half(bits) => bits & 0x7fff != 0,
            Scalar::Single(x) => x != 0.0,
            Scalar::Float(x) => x != 0.0,
            Scalar::ComplexSingle(re, im) => re != 0.0 || im != 0.0,
            Scalar::Complex(re, im) => re != 0.0 || im != 0.0,
        }
    }

    /// The 32-bit conversion of floats, wrapped into narrower integers.
    fn to_i32(self) -> i32 {
        match self {
            Scalar::Bool(b) => i32::from(b),
            Scalar::Int(i) => i as i32,
            Scalar::UInt(u) => u as i32,
            other => trunc32(other.real()),
        }
    }

    fn to_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => i64::from(b),
            Scalar::Int(i) => i,
            Scalar::UInt(u) => u.cast_signed(),
            other => trunc64(other.real()),
        }
    }

    fn to_u32(self) -> u32 {
        match self {
            Scalar::Bool(b) => u32::from(b),
            Scalar::Int(i) => i as u32,
            Scalar::UInt(u) => u as u32,
            Scalar::Half(bits) => trunc64(half_to_f64(bits)) as u32,
            other => trunc_u32(other.real()),
        }
    }

    fn to_u64(self) -> u64 {
        match self {
            Scalar::Bool(b) => u64::from(b),
            Scalar::Int(i) => i.cast_unsigned(),
            Scalar::UInt(u) => u,
            other => trunc_u64(other.real()),
        }
    }
}

/// Reading one element of a source type.
trait CastFrom {
    const SIZE: usize;
    fn read(bytes: &[u8]) -> Scalar;
}

/// Writing one element of a target type.
trait CastTo {
    const SIZE: usize;
    fn write(value: Scalar, out: &mut [u8]);
}

/// The first `N` bytes of `bytes` (an element of `N` bytes).
fn take<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

macro_rules! types {
    ($($name:ident: $size:expr, |$b:ident| $read:expr, |$v:ident, $o:ident| $write:expr;)*) => {$(
        pub(super) struct $name;
        impl CastFrom for $name {
            const SIZE: usize = $size;
            #[inline(always)]
            fn read($b: &[u8]) -> Scalar {
                $read
            }
        }
        impl CastTo for $name {
            const SIZE: usize = $size;
            #[inline(always)]
            fn write($v: Scalar, $o: &mut [u8]) {
                $write
            }
        }
    )*};
}

mod types {
    use super::{take, CastFrom, CastTo, Scalar};

    types! {
        F2: 2, |b| Scalar::Half(u16::from_ne_bytes(take(b))),
            |v, o| o.copy_from_slice(&v.to_half().to_ne_bytes());
        F4: 4, |b| Scalar::Single(f32::from_ne_bytes(take(b))),
            |v, o| o.copy_from_slice(&v.to_f32().to_ne_bytes());
        F8: 8, |b| Scalar::Float(f64::from_ne_bytes(take(b))),
            |v, o| o.copy_from_slice(&v.to_f64().to_ne_bytes());
        I1: 1, |b| Scalar::Int(i64::from(i8::from_ne_bytes(take(b)))),
            |v, o| o.copy_from_slice(&(v.to_i32() as i8).to_ne_bytes());
        I2: 2, |b| Scalar::Int(i64::from(i16::from_ne_bytes(take(b)))),
            |v, o| o.copy_from_slice(&(v.to_i32() as i16).to_ne_bytes());
        I4: 4, |b| Scalar::Int(i64::from(i32::from_ne_bytes(take(b)))),
            |v, o| o.copy_from_slice(&v.to_i32().to_ne_bytes());
        I8: 8, |b| Scalar::Int(i64::from_ne_bytes(take(b))),
            |v, o| o.copy_from_slice(&v.to_i64().to_ne_bytes());
        U1: 1, |b| Scalar::UInt(u64::from(b[0])),
            |v, o| o.copy_from_slice(&(v.to_i32() as u8).to_ne_bytes());
        U2: 2, |b| Scalar::UInt(u64::from(u16::from_ne_bytes(take(b)))),
            |v, o| o.copy_from_slice(&(v.to_i32() as u16).to_ne_bytes());
        U4: 4, |b| Scalar::UInt(u64::from(u32::from_ne_bytes(take(b)))),
            |v, o| o.copy_from_slice(&v.to_u32().to_ne_bytes());
        U8: 8, |b| Scalar::UInt(u64::from_ne_bytes(take(b))),
            |v, o| o.copy_from_slice(&v.to_u64().to_ne_bytes());
        B1: 1, |b| Scalar::Bool(b[0] != 0),
            |v, o| o[0] = u8::from(v.to_bool());
        C8: 8, |b| Scalar::ComplexSingle(
                f32::from_ne_bytes(take(&b[..4])),
                f32::from_ne_bytes(take(&b[4..])),
            ),
            |v, o| {
                o[..4].copy_from_slice(&v.to_f32().to_ne_bytes());
                o[4..].copy_from_slice(&v.imaginary_f32().to_ne_bytes());
            };
        C16: 16, |b| Scalar::Complex(
                f64::from_ne_bytes(take(&b[..8])),
                f64::from_ne_bytes(take(&b[8..])),
            ),
            |v, o| {
                o[..8].copy_from_slice(&v.to_f64().to_ne_bytes());
                o[8..].copy_from_slice(&v.imaginary().to_ne_bytes());
            };
    }
}

fn cast_loop<S: CastFrom, T: CastTo>(from: &[u8], to: &mut [u8]) {
    for (input, output) in from.chunks_exact(S::SIZE).zip(to.chunks_exact_mut(T::SIZE)) {
        T::write(S::read(input), output);
    }
}

fn cast_from<S: CastFrom>(to: DType, from: &[u8], out: &mut [u8]) {
    use types::{B1, C16, C8, F2, F4, F8, I1, I2, I4, I8, U1, U2, U4, U8};
    match to {
        DType::F2 => cast_loop::<S, F2>(from, out),
        DType::F4 => cast_loop::<S, F4>(from, out),
        DType::F8 => cast_loop::<S, F8>(from, out),
        DType::I1 => cast_loop::<S, I1>(from, out),
        DType::I2 => cast_loop::<S, I2>(from, out),
        DType::I4 => cast_loop::<S, I4>(from, out),
        DType::I8 => cast_loop::<S, I8>(from, out),
        DType::U1 => cast_loop::<S, U1>(from, out),
        DType::U2 => cast_loop::<S, U2>(from, out),
        DType::U4 => cast_loop::<S, U4>(from, out),
        DType::U8 => cast_loop::<S, U8>(from, out),
        DType::B1 => cast_loop::<S, B1>(from, out),
        DType::C8 => cast_loop::<S, C8>(from, out),
        DType::C16 => cast_loop::<S, C16>(from, out),
    }
}

/// Convert the elements of `from` (native-order elements of `from_dtype`)
/// into `out` (elements of `to_dtype`), as numpy's `astype` (see the
/// module's documentation). Converts `min(from.len() / from_size,
/// out.len() / to_size)` elements.
pub fn cast(from_dtype: DType, to_dtype: DType, from: &[u8], out: &mut [u8]) {
    use types::{B1, C16, C8, F2, F4, F8, I1, I2, I4, I8, U1, U2, U4, U8};
    match from_dtype {
        DType::F2 => cast_from::<F2>(to_dtype, from, out),
        DType::F4 => cast_from::<F4>(to_dtype, from, out),
        DType::F8 => cast_from::<F8>(to_dtype, from, out),
        DType::I1 => cast_from::<I1>(to_dtype, from, out),
        DType::I2 => cast_from::<I2>(to_dtype, from, out),
        DType::I4 => cast_from::<I4>(to_dtype, from, out),
        DType::I8 => cast_from::<I8>(to_dtype, from, out),
        DType::U1 => cast_from::<U1>(to_dtype, from, out),
        DType::U2 => cast_from::<U2>(to_dtype, from, out),
        DType::U4 => cast_from::<U4>(to_dtype, from, out),
        DType::U8 => cast_from::<U8>(to_dtype, from, out),
        DType::B1 => cast_from::<B1>(to_dtype, from, out),
        DType::C8 => cast_from::<C8>(to_dtype, from, out),
        DType::C16 => cast_from::<C16>(to_dtype, from, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(from: DType, to: DType, input: &[u8]) -> Vec<u8> {
        let mut out = vec![0; to.size()];
        cast(from, to, input, &mut out);
        out
    }

    #[test]
    fn half_floats_round_to_nearest_even() {
        for (x, bits) in [
            (1.0, 0x3c00),
            (-2.0, 0xc000),
            (65504.0, 0x7bff),
            (65519.99, 0x7bff),
            (65520.0, 0x7c00),
            (1e10, 0x7c00),
            (f64::INFINITY, 0x7c00),
            (f64::NEG_INFINITY, 0xfc00),
            (f64::NAN, 0x7e00),
            (2f64.powi(-24), 0x0001),
            (2f64.powi(-25), 0x0000),
            (2f64.powi(-25) * 1.000_001, 0x0001),
            (3.0 * 2f64.powi(-25), 0x0002),
            (2f64.powi(-14), 0x0400),
            (1.0 + 2f64.powi(-11), 0x3c00),
            (1.0 + 3.0 * 2f64.powi(-11), 0x3c02),
            (-0.0, 0x8000),
        ] {
            assert_eq!(f64_to_half(x), bits, "{x}");
            if !x.is_nan() && bits & 0x7fff < 0x7c00 && x.abs() < 65504.0 {
                assert!((half_to_f64(bits) - x).abs() <= x.abs() * 2f64.powi(-11) + 2f64.powi(-25));
            }
        }
        for bits in 0..=u16::MAX {
            let x = half_to_f64(bits);
            if !x.is_nan() {
                assert_eq!(f64_to_half(x), bits, "{bits:#x}");
            }
        }
    }

    #[test]
    fn nans_keep_their_payload_and_signalling_bit_through_halfs() {
        // (input bits, output bits), as numpy 2.4's astype gives them
        let f2 = |bits: u16| bits.to_ne_bytes();
        for (half, single) in [
            (0x7c01u16, 0x7f80_2000u32),
            (0x7d00, 0x7fa0_0000),
            (0xfc01, 0xff80_2000),
            (0x7e00, 0x7fc0_0000),
        ] {
            assert_eq!(one(DType::F2, DType::F4, &f2(half)), single.to_ne_bytes());
            let complex = [single.to_ne_bytes(), [0; 4]].concat();
            assert_eq!(one(DType::F2, DType::C8, &f2(half)), complex);
            assert_eq!(one(DType::F4, DType::F2, &single.to_ne_bytes()), f2(half));
            assert_eq!(one(DType::C8, DType::F2, &complex), f2(half));
        }
        for (single, half) in [
            (0x7f80_0001u32, 0x7c01u16),
            (0xff80_0001, 0xfc01),
            (0x7fc0_0001, 0x7e00),
            (0x7f80_2000, 0x7c01),
        ] {
            assert_eq!(one(DType::F4, DType::F2, &single.to_ne_bytes()), f2(half));
        }
        for (double, half, single) in [
            (0x7ff0_0000_0000_0001u64, 0x7c01u16, 0x7fc0_0000u32),
            (0x7ff4_0000_0000_0000, 0x7d00, 0x7fe0_0000),
            (0xfff0_0400_0000_0000, 0xfc01, 0xffc0_2000),
        ] {
            assert_eq!(one(DType::F8, DType::F2, &double.to_ne_bytes()), f2(half));
            // float64 <-> float32 is the hardware's: quiet
            assert_eq!(
                one(DType::F8, DType::F4, &double.to_ne_bytes()),
                single.to_ne_bytes()
            );
        }
        assert_eq!(
            one(DType::F4, DType::F8, &0x7f80_0001u32.to_ne_bytes()),
            0x7ff8_0000_2000_0000u64.to_ne_bytes()
        );
        // every half, NaNs included, goes to float32 and float64 and back
        // bit for bit
        for bits in 0..=u16::MAX {
            let single = one(DType::F2, DType::F4, &f2(bits));
            assert_eq!(one(DType::F4, DType::F2, &single), f2(bits), "{bits:#x}");
            let double = one(DType::F2, DType::F8, &f2(bits));
            assert_eq!(one(DType::F8, DType::F2, &double), f2(bits), "{bits:#x}");
        }
    }

    #[test]
    fn float32_rounds_to_halfs_as_its_exact_double_does() {
        // f32_to_half rounds the float32 itself; f64_to_half of its exact
        // double must agree for every number (the halfway points between
        // halfs are float32 numbers)
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..1_000_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let x = f32::from_bits((state >> 32) as u32);
            if !x.is_nan() {
                assert_eq!(f32_to_half(x), f64_to_half(f64::from(x)), "{x:e}");
            }
        }
        for bits in 0..=u16::MAX {
            let x = half_to_f64(bits);
            if !x.is_nan() {
                // halfway to the next half, and either side of it
                let next = half_to_f64(bits.wrapping_add(1));
                if next.is_finite() && next.abs() > x.abs() {
                    let tie = f64::midpoint(x, next) as f32;
                    for y in [tie, tie.next_up(), tie.next_down()] {
                        assert_eq!(f32_to_half(y), f64_to_half(f64::from(y)), "{y:e}");
                    }
                }
            }
        }
    }

    #[test]
    fn out_of_range_floats_give_what_x86_64_numpy_gives() {
        let f8 = |x: f64| x.to_ne_bytes();
        assert_eq!(one(DType::F8, DType::I1, &f8(300.7)), 44i8.to_ne_bytes());
        assert_eq!(one(DType::F8, DType::I1, &f8(1e20)), 0i8.to_ne_bytes());
        assert_eq!(
            one(DType::F8, DType::I4, &f8(f64::NAN)),
            i32::MIN.to_ne_bytes()
        );
        assert_eq!(
            one(DType::F8, DType::U4, &f8(-4e9)),
            0x8000_0000u32.to_ne_bytes()
        );
        assert_eq!(
            one(DType::F8, DType::U4, &f8(4e9)),
            4_000_000_000u32.to_ne_bytes()
        );
        assert_eq!(one(DType::F8, DType::U8, &f8(-1.5)), u64::MAX.to_ne_bytes());
        assert_eq!(one(DType::F8, DType::U8, &f8(1e20)), 0u64.to_ne_bytes());
        let inf = f64_to_half(f64::NEG_INFINITY).to_ne_bytes();
        assert_eq!(one(DType::F2, DType::U4, &inf), 0u32.to_ne_bytes());
        assert_eq!(
            one(DType::F4, DType::U4, &f32::NEG_INFINITY.to_ne_bytes()),
            0x8000_0000u32.to_ne_bytes()
        );
    }
}
