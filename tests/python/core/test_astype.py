"""`to(dtype=...)` and join's casts of numpy-backed data are the core's: the
values bit-identical to numpy's `ndarray.astype` for every pair of dtypes,
written into memory blockmap owns (no call back into numpy).

numpy is the oracle, in the same run: every float16 bit pattern, every
int8/uint8/int16/uint16 value and every byte of a bool go through every
pair, with float32/float64 NaNs of every single payload bit (signalling
and quiet, both signs) and thousands of random ones, the ties of half and
float32 rounding and their neighbours, subnormals and random bits."""

import platform
import warnings

import numpy as np
import pytest

import blockmap
from blockmap import Labels, TensorBlock, TensorMap
from helpers.dtypes import ALL_DTYPES, dtype_id

# C leaves float -> integer conversions of values that do not fit undefined
# (numpy warns); the core gives the results of numpy's x86-64 builds
X86_64 = platform.machine() in ("x86_64", "AMD64")

FLOATS = np.array(
    [
        *[0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1 / 3, np.pi, 0.1],
        *[127.9, -128.6, 255.5, 300.7, -300.7, 32767.5, 65504, 65519.9, 65520, 7e4],
        *[2.0**-24, 2.0**-25, 1.5 * 2.0**-25, 6e-8, 1e-5, 2.0**53 + 1],
    ]
)
# out of the range of some integer type, or not numbers
UNFIT = np.array(
    [2.0**31, -(2.0**31) - 1, 4e9, -4e9, 2.0**63, -(2.0**63), 2.0**64, 1e20, -1e20]
    + [np.inf, -np.inf, np.nan]
)
INTEGERS = [0, 1, -1, 2, 127, 128, -129, 255, 256, 2049, 4097, 32768, 65519, 65520]
INTEGERS += [65552, 16777217, 2**31 - 1, 2**31, 2**32 + 1, 2**53 + 1, 2**62 + 12345]
INTEGERS += [2**63 - 1, -(2**63)]


def _inputs(dtype):
    """Values of `dtype` meant to reach every rule of the casts: rounding
    ties, the limits of each type, subnormal halfs, and random values."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(31)
    if dtype.kind == "b":
        return np.array([True, False, False, True])
    if dtype.kind in "iu":
        bits = 8 * dtype.itemsize
        wrapped = [value % 2**bits for value in INTEGERS]
        if dtype.kind == "i":
            wrapped = [v - 2**bits if v >= 2 ** (bits - 1) else v for v in wrapped]
        info = np.iinfo(dtype)
        drawn = rng.integers(info.min, info.max, 100, dtype=dtype, endpoint=True)
        return np.concatenate([np.array(wrapped, dtype=dtype), drawn])
    floats = np.concatenate([FLOATS, UNFIT if X86_64 else []])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        real = np.concatenate([floats, rng.standard_normal(100) * 1000])
        real = real.astype(dtype if dtype.kind == "f" else dtype.char.lower())
    if dtype.kind == "c":
        complex_values = np.empty(len(real), dtype=dtype)
        complex_values.real = real
        complex_values.imag = real[::-1]
        return complex_values
    return real


def _float_patterns(dtype, rng):
    """float32 or float64 values meant to reach every rule: NaNs with each
    single payload bit, signalling or quiet, of either sign, and random
    NaNs (the bits a half or a float32 keeps of them, the bit that says
    signalling); the halfway points between consecutive halfs (and float32s,
    for float64) with their neighbours, which round to even; subnormals,
    the limits of integer types, and random bit patterns."""
    dtype = np.dtype(dtype)
    uint = np.dtype(f"u{dtype.itemsize}")
    bits = 8 * dtype.itemsize
    mantissa = 23 if bits == 32 else 52
    infinity = ((1 << (bits - 1 - mantissa)) - 1) << mantissa
    nans = [
        (sign << (bits - 1)) | infinity | (quiet << (mantissa - 1)) | (1 << bit)
        for sign in (0, 1)
        for quiet in (0, 1)
        for bit in range(mantissa - 1)
    ]
    drawn = rng.integers(1, 1 << mantissa, 20_000, dtype=np.uint64, endpoint=False)
    signs = rng.integers(0, 2, len(drawn), dtype=np.uint64) << np.uint64(bits - 1)
    nans = np.concatenate([np.array(nans, dtype=np.uint64), drawn | signs | np.uint64(infinity)])
    random_bits = rng.integers(0, np.iinfo(uint).max, 60_000, dtype=uint, endpoint=True)
    halfs = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    halfs = np.unique(halfs[np.isfinite(halfs)].astype(np.float64))
    halfway = [(halfs[:-1] + halfs[1:]) / 2]
    if bits == 64:
        singles = rng.integers(0, 1 << 32, 60_000, dtype=np.uint64).astype(np.uint32)
        singles = singles.view(np.float32)
        singles = singles[np.isfinite(singles)]
        following = np.nextafter(singles, np.float32(np.inf))
        halfway.append((singles.astype(np.float64) + following.astype(np.float64)) / 2)
    around = []
    for values in halfway:
        values = values.astype(dtype)
        around += [values, np.nextafter(values, dtype.type(np.inf))]
        around.append(np.nextafter(values, dtype.type(-np.inf)))
    edges = [0.0, -0.0, 2.0**-24, 2.0**-25, 65504, 65520, 2.0**31, -(2.0**31) - 1]
    edges += [2.0**32, 2.0**63, -(2.0**63), 2.0**64, 1e30, -1e30, np.inf, -np.inf]
    edges += [np.finfo(dtype).smallest_subnormal, np.finfo(dtype).max]
    with np.errstate(all="ignore"):
        return np.concatenate(
            [nans.astype(uint).view(dtype), random_bits.view(dtype), *around]
            + [np.array(edges).astype(dtype)]
        )


def _all_patterns(dtype):
    """The inputs of the exhaustive test (see the module's docstring)."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(40)
    if dtype == np.float16:
        return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    if dtype.kind == "b":
        # every byte: numpy reads any non-zero byte as True
        return np.arange(256, dtype=np.uint8).view(np.bool_)
    if dtype.kind == "f":
        return _float_patterns(dtype, rng)
    if dtype.kind == "c":
        parts = _float_patterns(np.float32 if dtype.itemsize == 8 else np.float64, rng)
        values = np.empty(len(parts), dtype=dtype)
        values.real = parts
        values.imag = parts[::-1]
        return values
    info = np.iinfo(dtype)
    if dtype.itemsize <= 2:
        return np.arange(info.min, info.max + 1).astype(dtype)
    special = [info.min, info.max]
    for power in range(8 * dtype.itemsize):
        for offset in range(-2, 4):
            special += [(1 << power) + offset, -(1 << power) + offset]
    for k in range(1, 4096):
        # ties of float16 (units of 2 from 2048), float32 and float64
        special += [2048 * k + 1, (1 << 24) + 2 * k + 1, (1 << 53) + 2 * k + 1]
    special = [value for value in special if info.min <= value <= info.max]
    drawn = rng.integers(info.min, info.max, 100_000, dtype=dtype, endpoint=True)
    return np.concatenate([np.array(special, dtype=object).astype(dtype), drawn])


@pytest.mark.parametrize("source", ALL_DTYPES, ids=dtype_id)
def test_every_bit_pattern_and_nan_payload_gives_numpys_astype(source):
    values = _all_patterns(source)
    # numpy's answer for a value C leaves undefined (a float out of an
    # integer type's range) depends on where the element lies: its SIMD
    # loop and the scalar loop of the last few elements differ (-inf into
    # uint32: 0x80000000, and 0 in the tail). blockmap gives the SIMD
    # loop's: zeros fill the tail
    values = np.concatenate([values, np.zeros(-len(values) % 64 + 64, dtype=values.dtype)])
    block = TensorBlock(
        values=values.reshape(-1, 1),
        samples=Labels.range("s", len(values)),
        components=[],
        properties=Labels.range("p", 1),
    )
    wrong = {}
    for target in ALL_DTYPES:
        got = np.asarray(block.to(dtype=target).values).reshape(-1)
        want = _astype(values, target)
        with np.errstate(all="ignore"):
            differ = np.nonzero(
                got.view(np.uint8).reshape(len(values), -1)
                != want.view(np.uint8).reshape(len(values), -1)
            )[0]
        if len(differ):
            first = differ[0]
            wrong[np.dtype(target).name] = (
                f"{len(np.unique(differ))} of {len(values)}: "
                f"{values[first : first + 1].tobytes().hex()} -> "
                f"{got[first : first + 1].tobytes().hex()}, "
                f"numpy {want[first : first + 1].tobytes().hex()}"
            )
    assert not wrong, wrong


def _block(values):
    values = values.reshape(len(values), -1)
    block = TensorBlock(
        values=values,
        samples=Labels.range("s", values.shape[0]),
        components=[],
        properties=Labels.range("p", values.shape[1]),
    )
    block.add_gradient(
        "g",
        TensorBlock(
            values=values[::-1].copy(),
            samples=Labels(["sample"], np.arange(values.shape[0], dtype=np.int32)[:, None]),
            components=[],
            properties=block.properties,
        ),
    )
    return block


def _astype(array, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (RuntimeWarning, np.exceptions.ComplexWarning))
        return np.asarray(array).astype(dtype)


def _same_bits(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("source", ALL_DTYPES, ids=dtype_id)
def test_every_dtype_pair_gives_numpys_astype_bit_for_bit(source):
    values = _inputs(source)
    block = _block(values)
    for target in ALL_DTYPES:
        converted = block.to(dtype=target)
        _same_bits(converted.values, _astype(block.values, target))
        _same_bits(converted.gradient("g").values, _astype(block.gradient("g").values, target))
        if np.dtype(target) != np.dtype(source):
            # memory blockmap allocated (numpy's astype would give an
            # array of its own, which the block would view)
            assert "in memory" in repr(converted), repr(converted)
            assert not np.shares_memory(converted.values, block.values)


def test_views_strided_fortran_read_only_and_empty_inputs():
    rng = np.random.default_rng(7)
    base = rng.standard_normal((12, 6)) * 300
    inputs = [
        base[3:9],  # a view at an offset
        base[::2, 1::2],  # strided
        np.asfortranarray(base),
        np.empty((0, 4)),
        np.empty((5, 0)),
    ]
    read_only = base.copy()
    read_only.flags.writeable = False
    inputs.append(read_only)
    for values in inputs:
        block = TensorBlock(
            values=values,
            samples=Labels.range("s", values.shape[0]),
            components=[],
            properties=Labels.range("p", values.shape[1]),
        )
        for target in (np.float32, np.int16, np.uint64, np.complex64, np.bool_, np.float16):
            converted = block.to(dtype=target)
            _same_bits(converted.values, _astype(values, target))
            assert converted.values.flags.writeable


def test_maps_convert_every_block_and_keep_info():
    blocks = [_block(_inputs(np.float64)[:20]), _block(_inputs(np.float64)[20:50])]
    tensor = TensorMap(Labels.range("key", 2), blocks)
    tensor.set_info("origin", "test")
    converted = tensor.to(dtype=np.int32)
    assert converted.info() == {"origin": "test"}
    for block, original in zip(converted.blocks(), blocks, strict=True):
        _same_bits(block.values, _astype(original.values, np.int32))
        _same_bits(block.gradient("g").values, _astype(original.gradient("g").values, np.int32))
    # the same dtype: the same arrays
    same = tensor.to(dtype=np.float64)
    assert np.shares_memory(same.block(0).values, tensor.block(0).values)


def test_join_casts_in_the_core():
    first = TensorMap(Labels.range("key", 1), [_block(np.arange(4, dtype=np.float64))])
    second = TensorMap(Labels.range("key", 1), [_block(np.arange(3, dtype=np.int32) - 1)])
    joined = blockmap.join([first, second], axis="samples", add_dimension="tensor")
    want = np.concatenate([np.arange(4.0), np.arange(3.0) - 1])[:, None]
    _same_bits(joined.block(0).values, want)
    joined_block = blockmap.join_blocks(
        [first.block(0), second.block(0)], axis="samples", add_dimension="tensor"
    )
    _same_bits(joined_block.values, want)
    _same_bits(joined_block.gradient("g").values, want[[3, 2, 1, 0, 6, 5, 4]])
