"""Zero copy from numpy into blocks and back, proven by addresses and peak memory."""

import gc
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

from blockmap import Labels, TensorBlock, TensorMap
from helpers.dtypes import ALL_DTYPES, dtype_id
from helpers.memory import address_of


def _block(values):
    """A block around ``values``, with one component per middle axis."""
    values_shape = np.shape(values)
    samples = Labels.range("sample", values_shape[0])
    components = [Labels.range(f"c{i}", size) for i, size in enumerate(values_shape[1:-1])]
    properties = Labels.range("property", values_shape[-1])
    return TensorBlock(values, samples, components, properties)


def _assert_native_aligned_contiguous(values):
    assert values.dtype.isnative
    assert values.flags.aligned
    assert values.flags.c_contiguous
    assert values.base is not None


# -------------------------------------------------------------------- no copy


def test_values_share_memory_with_input(rng):
    arr = rng.random((4, 3, 2))
    block = _block(arr)
    assert np.shares_memory(arr, block.values)
    assert address_of(block.values) == address_of(arr)
    assert block.values.shape == arr.shape
    assert block.values.base is not None
    assert block.values.flags.writeable


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_every_dtype_is_zero_copy(dtype, random_values):
    arr = random_values((5, 2, 3), dtype)
    block = _block(arr)
    assert block.values.dtype == np.dtype(dtype)
    assert np.shares_memory(arr, block.values)
    assert address_of(block.values) == address_of(arr)
    np.testing.assert_array_equal(block.values, arr)
    tm = TensorMap(Labels.single(), [block])
    assert address_of(tm.block(0).values) == address_of(arr)


def test_edit_input_visible_in_block(rng):
    arr = rng.random((4, 3))
    block = _block(arr)
    arr[1, 2] = 42.0
    arr[3] = -1.0
    assert block.values[1, 2] == 42.0
    np.testing.assert_array_equal(block.values[3], [-1.0, -1.0, -1.0])


def test_edit_block_visible_in_input(rng):
    arr = rng.random((4, 3))
    block = _block(arr)
    view = block.values
    view[0, 0] = 7.0
    block.values[2, :] = 5.0
    assert arr[0, 0] == 7.0
    np.testing.assert_array_equal(arr[2], [5.0, 5.0, 5.0])


def test_map_block_shares_memory_with_input(rng):
    arrays = [rng.random((3, 2)), rng.random((5, 2))]
    blocks = [_block(a) for a in arrays]
    tm = TensorMap(Labels.range("key", 2), blocks)
    for i, arr in enumerate(arrays):
        assert np.shares_memory(arr, tm.block(i).values)
        assert address_of(tm.block(i).values) == address_of(arr)
    tm.block(1).values[0, 0] = 99.0
    assert arrays[1][0, 0] == 99.0
    assert blocks[1].values[0, 0] == 99.0
    arrays[0][2, 1] = -5.0
    assert tm.block(0).values[2, 1] == -5.0


def test_gradient_values_are_zero_copy(rng):
    arr = rng.random((3, 2))
    block = _block(arr)
    gradient_arr = rng.random((4, 3, 2))
    samples = Labels(["sample", "atom"], np.array([[0, 0], [0, 1], [1, 2], [2, 3]]))
    gradient = TensorBlock(gradient_arr, samples, [Labels.range("xyz", 3)], block.properties)
    block.add_gradient("positions", gradient)
    assert np.shares_memory(gradient_arr, block.gradient("positions").values)
    tm = TensorMap(Labels.single(), [block])
    from_map = tm.block(0).gradient("positions").values
    assert np.shares_memory(gradient_arr, from_map)
    from_map[0, 0, 0] = 3.5
    assert gradient_arr[0, 0, 0] == 3.5


def test_contiguous_slice_with_offset_is_zero_copy(rng):
    arr = rng.random((6, 2))
    rows = arr[2:5]
    assert rows.flags.c_contiguous
    block = _block(rows)
    assert address_of(block.values) == address_of(rows)
    np.testing.assert_array_equal(block.values, arr[2:5])
    arr[2, 0] = 11.0
    assert block.values[0, 0] == 11.0


def test_bytearray_backed_array_is_zero_copy(rng):
    data = rng.random((2, 3))
    buffer = bytearray(data.tobytes())
    arr = np.frombuffer(buffer, dtype=np.float64).reshape(2, 3)
    assert arr.flags.aligned
    block = _block(arr)
    assert np.shares_memory(arr, block.values)
    block.values[1, 1] = 8.0
    assert np.frombuffer(buffer, dtype=np.float64)[4] == 8.0


def test_empty_values(rng):
    arr = np.zeros((0, 3))
    block = _block(arr)
    assert block.values.shape == (0, 3)
    assert block.values.base is not None


# ------------------------------------------------------------------- lifetime


def test_view_outlives_array_and_block(rng):
    arr = rng.random((50, 20))
    expected = arr.copy()
    block = _block(arr)
    view = block.values
    del arr, block
    gc.collect()
    # reuse freed memory, so a dangling view would show other data
    junk = [np.full((50, 20), -1.0) for _ in range(50)]
    np.testing.assert_array_equal(view, expected)
    assert junk[0][0, 0] == -1.0


def test_view_of_map_block_outlives_everything(rng):
    arr = rng.random((50, 20))
    expected = arr.copy()
    block = _block(arr)
    tm = TensorMap(Labels.single(), [block])
    view = tm.block(0).values
    del arr, block, tm
    gc.collect()
    junk = [np.full((50, 20), -1.0) for _ in range(50)]
    np.testing.assert_array_equal(view, expected)
    assert junk[0][0, 0] == -1.0


def test_view_of_copied_input_outlives_block(rng):
    arr = rng.random((50, 40))[:, ::2]
    expected = arr.copy()
    block = _block(arr)
    view = block.values
    del arr, block
    gc.collect()
    junk = [np.full((50, 20), -1.0) for _ in range(50)]
    np.testing.assert_array_equal(view, expected)
    assert junk[0][0, 0] == -1.0


def test_block_keeps_input_alive_then_releases_it(rng):
    arr = rng.random((3, 2))
    ref = weakref.ref(arr)
    block = _block(arr)
    del arr
    gc.collect()
    assert ref() is not None, "the block must keep its input array alive"
    view = block.values
    del block
    gc.collect()
    assert ref() is not None, "a values view must keep the input array alive"
    del view
    gc.collect()
    assert ref() is None, "the input array must be released with the last view"


def test_map_keeps_input_alive_then_releases_it(rng):
    arr = rng.random((3, 2))
    ref = weakref.ref(arr)
    block = _block(arr)
    tm = TensorMap(Labels.single(), [block])
    from_map = tm.block(0)
    del arr, block, tm
    gc.collect()
    assert ref() is not None
    del from_map
    gc.collect()
    assert ref() is None, "the input array must be released with the last block"


def test_block_pins_bytearray_memory():
    buffer = bytearray(np.arange(6, dtype=np.float64).tobytes())
    arr = np.frombuffer(buffer, dtype=np.float64).reshape(2, 3)
    block = _block(arr)
    del arr
    gc.collect()
    with pytest.raises(BufferError):
        buffer.extend(b"\0" * 64)
    np.testing.assert_array_equal(block.values, [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    del block
    gc.collect()
    buffer.extend(b"\0" * 64)
    assert len(buffer) == 6 * 8 + 64


# ------------------------------------------------------------------ read-only


def test_read_only_input_gives_read_only_values(rng):
    arr = rng.random((4, 3))
    arr.flags.writeable = False
    block = _block(arr)
    values = block.values
    assert np.shares_memory(arr, values)
    assert not values.flags.writeable
    with pytest.raises(ValueError):
        values.flags.writeable = True
    with pytest.raises(ValueError):
        block.values.flags.writeable = True
    with pytest.raises(ValueError):
        values[0, 0] = 1.0
    assert not block.values.flags.writeable
    tm = TensorMap(Labels.single(), [block])
    assert not tm.block(0).values.flags.writeable
    with pytest.raises(ValueError):
        tm.block(0).values.flags.writeable = True
    np.testing.assert_array_equal(block.values, arr)


def test_bytes_backed_input_is_read_only(rng):
    data = rng.random((2, 3))
    raw = data.tobytes()
    arr = np.frombuffer(raw, dtype=np.float64).reshape(2, 3)
    assert arr.flags.aligned
    block = _block(arr)
    assert np.shares_memory(arr, block.values)
    assert not block.values.flags.writeable
    with pytest.raises(ValueError):
        block.values.flags.writeable = True
    np.testing.assert_array_equal(block.values, data)


def test_read_only_view_of_writable_array_stays_read_only(rng):
    base = rng.random((4, 3))
    arr = base.view()
    arr.flags.writeable = False
    block = _block(arr)
    assert not block.values.flags.writeable
    with pytest.raises(ValueError):
        block.values.flags.writeable = True
    base[0, 0] = 2.5
    assert block.values[0, 0] == 2.5


# --------------------------------------------------------------------- copies


def _assert_copied(arr, block):
    values = block.values
    assert not np.shares_memory(arr, values)
    np.testing.assert_array_equal(values, arr)
    assert values.dtype == arr.dtype.newbyteorder("=")
    _assert_native_aligned_contiguous(values)


def test_non_contiguous_input_is_copied(rng):
    full = rng.random((4, 3, 6))
    arr = full[:, :, ::2]
    assert not arr.flags.c_contiguous
    block = _block(arr)
    _assert_copied(arr, block)
    full[0, 0, 0] = 100.0
    assert block.values[0, 0, 0] != 100.0


def test_fortran_input_is_copied(rng):
    arr = np.asfortranarray(rng.random((4, 3)))
    assert not arr.flags.c_contiguous
    block = _block(arr)
    _assert_copied(arr, block)


def test_transposed_input_is_copied(rng):
    arr = rng.random((3, 5)).T
    block = _block(arr)
    _assert_copied(arr, block)
    assert block.shape == (5, 3)


@pytest.mark.parametrize("dtype", [">f8", ">f4", ">i4", ">c16", ">u2"])
def test_big_endian_input_is_copied(rng, dtype):
    arr = (rng.random((4, 3)) * 100).astype(dtype)
    assert not arr.dtype.isnative
    block = _block(arr)
    _assert_copied(arr, block)
    assert block.values.dtype == np.dtype(dtype).newbyteorder("=")
    assert block.dtype == np.dtype(dtype).newbyteorder("=")


def test_misaligned_input_is_copied(rng):
    n_samples, n_properties = 4, 3
    count = n_samples * n_properties
    buffer = bytearray(count * 8 + 1)
    flat = np.frombuffer(buffer, dtype=np.float64, offset=1, count=count)
    flat[:] = rng.random(count)
    arr = flat.reshape(n_samples, n_properties)
    assert not arr.flags.aligned
    block = _block(arr)
    _assert_copied(arr, block)
    assert block.values.dtype == np.float64
    arr[0, 0] = 123.0
    assert block.values[0, 0] != 123.0


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.complex128])
def test_misaligned_input_other_dtypes(rng, dtype):
    itemsize = np.dtype(dtype).itemsize
    buffer = bytearray(6 * itemsize + 1)
    flat = np.frombuffer(buffer, dtype=dtype, offset=1, count=6)
    flat[:] = np.arange(6)
    arr = flat.reshape(2, 3)
    assert not arr.flags.aligned
    block = _block(arr)
    _assert_copied(arr, block)


def test_map_shares_memory_of_copied_input(rng):
    arr = rng.random((4, 6))[:, ::2]
    block = _block(arr)
    assert np.shares_memory(block.values, block.values)
    tm = TensorMap(Labels.single(), [block])
    assert np.shares_memory(block.values, tm.block(0).values)


# --------------------------------------------------------------- peak memory

PEAK_MEMORY_CODE = textwrap.dedent(
    """
    import sys

    import numpy as np

    from blockmap import Labels, TensorBlock, TensorMap


    def peak_kib():
        # VmHWM, not ru_maxrss: a child's ru_maxrss starts at its parent's peak
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmHWM in /proc/self/status")


    dtype = sys.argv[1]
    n_samples, n_properties = 12_500, 1_000  # 100 MB of 8-byte items

    # warm the extension up on a small map first
    small = TensorBlock(
        np.ones((2, 2), dtype=dtype), Labels.range("s", 2), [], Labels.range("p", 2)
    )
    TensorMap(Labels.range("key", 1), [small]).block(0).values

    arr = np.ones((n_samples, n_properties), dtype=dtype)
    before = peak_kib()

    samples = Labels.range("sample", n_samples)
    properties = Labels.range("property", n_properties)
    block = TensorBlock(arr, samples, [], properties)
    tm = TensorMap(Labels.range("key", 1), [block])
    total = 0.0
    for _ in range(5):
        total += float(block.values[-1, -1])
        total += float(tm.block(0).values[0, 0])
        total += float(tm.block(0).values.sum())
    assert total == 5 * (2.0 + n_samples * n_properties), total

    after = peak_kib()
    print(before, after - before)
    """
)


def _peak_growth_bytes(dtype):
    result = subprocess.run(
        [sys.executable, "-c", PEAK_MEMORY_CODE, dtype],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    before_kib, growth_kib = (int(x) for x in result.stdout.split())
    # the 100 MB array was touched before the first reading
    assert before_kib * 1024 > 100_000_000
    return growth_kib * 1024


def test_wrapping_100mb_does_not_grow_peak_memory():
    growth = _peak_growth_bytes("float64")
    assert growth < 10 * 1024 * 1024, f"peak memory grew by {growth / 1e6:.1f} MB"


def test_wrapping_100mb_big_endian_copies_once():
    growth = _peak_growth_bytes(">f8")
    assert growth >= 90_000_000, f"peak memory grew by {growth / 1e6:.1f} MB only"
    assert growth < 150_000_000, f"big-endian input copied more than once: {growth / 1e6:.1f} MB"
