"""`to(dtype=...)` and join's casts of numpy-backed data are the core's: the
values bit-identical to numpy's `ndarray.astype` for every pair of dtypes,
written into memory blockmap owns (no call back into numpy)."""

import platform
import warnings

import numpy as np
import pytest

import blockmap
from blockmap import Labels, TensorBlock, TensorMap
from helpers.dtypes import ALL_DTYPES

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


@pytest.mark.parametrize("source", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
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
