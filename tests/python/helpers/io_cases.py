"""Shared builders and checks for the ``.mts`` I/O tests.

Builders take a ``numpy.random.Generator`` and return blockmap objects; the
metatensor helpers convert them field by field and compare them with what
metatensor-core loads. ``archive_entries`` parses a zip archive byte by byte so
the tests can check where each npy payload starts.
"""

import dataclasses
import io
import json
import os
import struct
import textwrap
import zipfile

import numpy as np

from blockmap import Labels, TensorBlock, TensorMap
from helpers.child import run_python
from helpers.memory import PEAK

KEY_NAMES = ["o3_lambda", "center_type"]
KEY_ROWS = [[0, 1], [1, 1], [1, 6]]

INFO = {
    "model": "soap",
    "units": "eV",
    "empty": "",
    "unicode": "énergie ✓",
    "escapes": '{"a": [1, 2]}\n\t"quoted" \\ back',
}


# ------------------------------------------------------------------ builders


def labels(names, rows):
    names = [names] if isinstance(names, str) else list(names)
    values = np.asarray(rows, dtype=np.int32).reshape(-1, len(names))
    return Labels(names, values)


def random_values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        low, high = max(int(info.min), -120), min(int(info.max), 120)
        return rng.integers(low, high, size=shape, endpoint=True).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def make_block(rng, dtype=np.float64, n_samples=3, component_sizes=(), n_properties=2):
    """A block with samples ("system", "atom"), components c0, c1, ... and
    properties ("n",)."""
    samples = labels(["system", "atom"], [[i // 2, i] for i in range(n_samples)])
    components = [Labels.range(f"c{i}", size) for i, size in enumerate(component_sizes)]
    properties = labels("n", np.arange(n_properties) * 2 + 1)
    shape = (n_samples, *component_sizes, n_properties)
    return TensorBlock(random_values(rng, shape, dtype), samples, components, properties)


def make_gradient(rng, parent, n_samples, extra=(("xyz", 3),)):
    """A valid gradient of ``parent``: samples ("sample", "atom") pointing inside
    the parent, components ``extra`` + the parent's, the parent's properties."""
    n_parent = len(parent.samples)
    if n_parent == 0:
        n_samples = 0
    rows = [[i % n_parent, i] for i in range(n_samples)]
    samples = labels(["sample", "atom"], rows)
    components = [Labels.range(name, size) for name, size in extra] + list(parent.components)
    shape = (n_samples, *(len(c) for c in components), len(parent.properties))
    values = random_values(rng, shape, parent.dtype)
    return TensorBlock(values, samples, components, parent.properties)


def block_with_gradients(
    rng, dtype=np.float64, n_samples=3, component_sizes=(3,), n_properties=2, nested=True
):
    """A block with gradients "positions" and "alpha" (added in that order, so
    not sorted); with ``nested``, "positions" has gradients "strain" and "cell"
    (gradients two deep)."""
    block = make_block(rng, dtype, n_samples, component_sizes, n_properties)
    positions = make_gradient(rng, block, 2 * n_samples)
    if nested:
        strain = make_gradient(rng, positions, n_samples + 1, extra=(("abc", 2),))
        cell = make_gradient(rng, positions, 2, extra=())
        positions.add_gradient("strain", strain)
        positions.add_gradient("cell", cell)
    alpha = make_gradient(rng, block, n_samples, extra=())
    block.add_gradient("positions", positions)
    block.add_gradient("alpha", alpha)
    return block


def make_map(
    rng,
    dtype=np.float64,
    component_sizes=(3,),
    n_samples=(3, 5, 4),
    n_properties=2,
    gradients=True,
    nested=True,
    info=None,
):
    """A map with keys (o3_lambda, center_type) and one block per entry of
    ``n_samples``."""
    keys = labels(KEY_NAMES, KEY_ROWS[: len(n_samples)])
    blocks = []
    for count in n_samples:
        if gradients:
            block = block_with_gradients(
                rng, dtype, count, component_sizes, n_properties, nested=nested
            )
        else:
            block = make_block(rng, dtype, count, component_sizes, n_properties)
        blocks.append(block)
    tensor = TensorMap(keys, blocks)
    for key, value in (info or {}).items():
        tensor.set_info(key, value)
    return tensor


def without_empty_info(tensor):
    """``tensor`` without its empty info values: metatensor-core 0.2.6 returns
    None for an info value "" and its numpy writer stores null, which its own
    reader refuses (see
    test_io_metatensor.test_metatensor_numpy_writer_turns_empty_info_into_null)."""
    if all(tensor.info().values()):
        return tensor
    result = TensorMap(tensor.keys, tensor.blocks())
    for key, value in tensor.info().items():
        if value:
            result.set_info(key, value)
    return result


def zero_block_map():
    return TensorMap(Labels.empty(KEY_NAMES), [])


# name -> builder(rng, dtype) of a TensorMap, for the shape cases
MAP_CASES = {
    "no_components": lambda rng, dtype: make_map(rng, dtype, component_sizes=()),
    "one_component": lambda rng, dtype: make_map(rng, dtype, component_sizes=(3,)),
    "two_components": lambda rng, dtype: make_map(rng, dtype, component_sizes=(3, 2)),
    "one_level_gradients": lambda rng, dtype: make_map(rng, dtype, nested=False),
    "nested_gradients": lambda rng, dtype: make_map(rng, dtype, nested=True),
    "no_gradients": lambda rng, dtype: make_map(rng, dtype, gradients=False),
    "empty_blocks": lambda rng, dtype: make_map(rng, dtype, n_samples=(0, 0)),
    "some_empty_blocks": lambda rng, dtype: make_map(rng, dtype, n_samples=(0, 4, 0)),
    "zero_properties": lambda rng, dtype: make_map(rng, dtype, n_properties=0),
    "single_block": lambda rng, dtype: make_map(rng, dtype, n_samples=(7,)),
    "zero_blocks": lambda rng, dtype: zero_block_map(),
    "info": lambda rng, dtype: make_map(rng, dtype, info=INFO),
}

# name -> builder(rng, dtype) of a TensorBlock saved on its own
BLOCK_CASES = {
    "no_components": lambda rng, dtype: make_block(rng, dtype, 4, (), 3),
    "two_components": lambda rng, dtype: make_block(rng, dtype, 4, (3, 2), 3),
    "nested_gradients": lambda rng, dtype: block_with_gradients(rng, dtype),
    "empty": lambda rng, dtype: block_with_gradients(rng, dtype, n_samples=0),
    "zero_properties": lambda rng, dtype: block_with_gradients(rng, dtype, n_properties=0),
}

# name -> Labels saved on their own
LABELS_CASES = {
    "two_dimensions": lambda: labels(["system", "atom"], [[0, 1], [0, 2], [3, -7], [2**31 - 1, 0]]),
    "single": Labels.single,
    "range": lambda: Labels.range("n", 100),
    "no_entries": lambda: Labels.empty(["a", "b"]),
    "extreme_values": lambda: labels("x", [[-(2**31)], [2**31 - 1], [0]]),
}


def all_blocks(tensor_or_block):
    """Every block of a map or block, gradients included, depth first, with a
    name for messages."""
    if isinstance(tensor_or_block, TensorMap):
        roots = [(f"blocks/{i}", b) for i, b in enumerate(tensor_or_block.blocks())]
    else:
        roots = [("block", tensor_or_block)]
    result = []

    def visit(name, block):
        result.append((name, block))
        for parameter in block.gradients_list():
            visit(f"{name}/gradients/{parameter}", block.gradient(parameter))

    for name, block in roots:
        visit(name, block)
    return result


# ----------------------------------------------------------- format checks


def expected_entry_names(data):
    """The entry names of ``data``'s archive, in the order of mts-format.md."""

    def block_entries(prefix, block, is_gradient):
        names = [f"{prefix}values.npy", f"{prefix}samples.npy"]
        names += [f"{prefix}components/{k}.npy" for k in range(len(block.components))]
        if not is_gradient:
            names.append(f"{prefix}properties.npy")
        for parameter in sorted(block.gradients_list()):
            gradient = block.gradient(parameter)
            names += block_entries(f"{prefix}gradients/{parameter}/", gradient, True)
        return names

    if isinstance(data, TensorBlock):
        return block_entries("", data, False)
    names = ["keys.npy"]
    for i, block in enumerate(data.blocks()):
        names += block_entries(f"blocks/{i}/", block, False)
    if data.info():
        names.append("info.json")
    return names


@dataclasses.dataclass
class Entry:
    name: str
    compress_type: int
    crc: int
    data_start: int  # first byte of the entry's data in the archive
    payload_start: int | None  # first byte after the npy header (npy entries)
    npy_header: str | None


def npy_header_length(data, start):
    """Length of the npy magic + version + header length + header at ``start``."""
    assert data[start : start + 6] == b"\x93NUMPY", f"no npy magic at {start}"
    major = data[start + 6]
    if major == 1:
        return 10 + struct.unpack_from("<H", data, start + 8)[0]
    assert major in (2, 3), f"unknown npy version {major}"
    return 12 + struct.unpack_from("<I", data, start + 8)[0]


def archive_entries(data):
    """Every entry of the zip archive in ``data`` (bytes), in archive order,
    with the offsets computed from the local headers."""
    data = bytes(data)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
    entries = []
    for info in infos:
        start = info.header_offset
        (signature,) = struct.unpack_from("<I", data, start)
        assert signature == 0x04034B50, f"no local header for {info.filename}"
        name_length, extra_length = struct.unpack_from("<HH", data, start + 26)
        name = data[start + 30 : start + 30 + name_length].decode("utf8")
        assert name == info.filename
        data_start = start + 30 + name_length + extra_length
        payload_start = header = None
        if name.endswith(".npy") and info.compress_type == zipfile.ZIP_STORED:
            length = npy_header_length(data, data_start)
            payload_start = data_start + length
            header = data[data_start + 10 : payload_start].decode("latin1")
        entries.append(Entry(name, info.compress_type, info.CRC, data_start, payload_start, header))
    return entries


def npy_bytes(array):
    """``array`` in the npy format, as numpy writes it."""
    stream = io.BytesIO()
    np.lib.format.write_array(stream, array, allow_pickle=False)
    return stream.getvalue()


def labels_record(labels_):
    """Labels as the structured array stored in ``.mts`` files."""
    dtype = [(name, "<i4") for name in labels_.names]
    values = np.ascontiguousarray(labels_.values, dtype="<i4")
    return values.view(dtype).reshape(values.shape[0])


def block_entries_dict(block, prefix="", is_gradient=False):
    """``{entry name: array}`` of a block, like metatensor's numpy writer."""
    result = {
        f"{prefix}values.npy": block.values,
        f"{prefix}samples.npy": labels_record(block.samples),
    }
    for k, component in enumerate(block.components):
        result[f"{prefix}components/{k}.npy"] = labels_record(component)
    if not is_gradient:
        result[f"{prefix}properties.npy"] = labels_record(block.properties)
    for parameter in sorted(block.gradients_list()):
        gradient = block.gradient(parameter)
        result.update(block_entries_dict(gradient, f"{prefix}gradients/{parameter}/", True))
    return result


def tensor_entries_dict(tensor):
    result = {"keys.npy": labels_record(tensor.keys)}
    for i, block in enumerate(tensor.blocks()):
        result.update(block_entries_dict(block, f"blocks/{i}/"))
    return result


def write_archive(entries, compression=zipfile.ZIP_STORED, transform=None):
    """A zip archive (bytes) of ``{name: array or bytes}``; ``transform(name,
    array)`` may change each array before it is written."""
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w", compression=compression) as archive:
        for name, value in entries.items():
            if isinstance(value, np.ndarray):
                if transform is not None:
                    value = transform(name, value)
                value = npy_bytes(value)
            archive.writestr(name, value)
    return stream.getvalue()


# ---------------------------------------------------------------- metatensor


def to_metatensor(data):
    """A metatensor-core copy of a blockmap TensorMap, TensorBlock or Labels."""
    import metatensor

    if isinstance(data, Labels):
        values = np.array(data.values, dtype=np.int32).reshape(len(data), len(data.names))
        return metatensor.Labels(list(data.names), values)
    if isinstance(data, TensorBlock):
        block = metatensor.TensorBlock(
            np.array(data.values),
            to_metatensor(data.samples),
            [to_metatensor(c) for c in data.components],
            to_metatensor(data.properties),
        )
        for parameter in data.gradients_list():
            block.add_gradient(parameter, to_metatensor(data.gradient(parameter)))
        return block
    assert isinstance(data, TensorMap)
    blocks = [to_metatensor(block) for block in data.blocks()]
    tensor = metatensor.TensorMap(to_metatensor(data.keys), blocks)
    for key, value in data.info().items():
        tensor.set_info(key, value)
    return tensor


def _assert_labels_match(ours, theirs, where):
    assert list(ours.names) == list(theirs.names), where
    theirs_values = np.asarray(theirs.values)
    assert theirs_values.dtype == np.int32, where
    assert ours.values.dtype == np.int32, where
    assert ours.values.shape == theirs_values.shape, where
    np.testing.assert_array_equal(ours.values, theirs_values, err_msg=where)


def _assert_block_matches(ours, theirs, where):
    theirs_values = np.asarray(theirs.values)
    assert ours.values.dtype == theirs_values.dtype, f"{where}: dtype"
    assert ours.values.shape == theirs_values.shape, f"{where}: shape"
    assert tuple(ours.shape) == tuple(theirs_values.shape), f"{where}: shape"
    assert ours.values.tobytes() == np.ascontiguousarray(theirs_values).tobytes(), where
    _assert_labels_match(ours.samples, theirs.samples, f"{where}: samples")
    assert len(ours.components) == len(theirs.components), f"{where}: components"
    for k, (a, b) in enumerate(zip(ours.components, theirs.components, strict=True)):
        _assert_labels_match(a, b, f"{where}: components[{k}]")
    _assert_labels_match(ours.properties, theirs.properties, f"{where}: properties")
    assert sorted(ours.gradients_list()) == sorted(theirs.gradients_list()), f"{where}: gradients"
    for parameter in ours.gradients_list():
        _assert_block_matches(
            ours.gradient(parameter),
            theirs.gradient(parameter),
            f"{where}/gradients/{parameter}",
        )


def assert_matches_metatensor(ours, theirs):
    """Field by field equality between a blockmap object and a metatensor one."""
    if isinstance(ours, Labels):
        _assert_labels_match(ours, theirs, "labels")
    elif isinstance(ours, TensorBlock):
        _assert_block_matches(ours, theirs, "block")
    else:
        assert isinstance(ours, TensorMap)
        _assert_labels_match(ours.keys, theirs.keys, "keys")
        assert len(ours) == len(theirs.keys)
        for i in range(len(ours)):
            _assert_block_matches(ours.block_by_id(i), theirs.block_by_id(i), f"blocks/{i}")
        # metatensor-core 0.2.6 returns None for an info value that is ""
        theirs_info = {k: "" if v is None else v for k, v in theirs.info().items()}
        assert ours.info() == theirs_info


# -------------------------------------------------------------- subprocesses

# what code run in a child process by run_child has: the usual imports and
# big_map, then the peak memory helpers of helpers.memory.PEAK
CHILD_PRELUDE = textwrap.dedent(
    """
    import gc
    import json
    import os
    import resource
    import sys
    import time

    import numpy as np

    import blockmap
    from blockmap import Labels, TensorBlock, TensorMap


    def big_map(total_bytes, n_blocks=4, n_properties=1000):
        n_samples = total_bytes // (n_blocks * n_properties * 8)
        blocks = []
        for i in range(n_blocks):
            values = np.full((n_samples, n_properties), float(i + 1))
            values[0, 0] = -1.0
            blocks.append(
                TensorBlock(
                    values,
                    Labels.range("sample", n_samples),
                    [],
                    Labels.range("property", n_properties),
                )
            )
        return TensorMap(Labels.range("key", n_blocks), blocks)
    """
)


def run_child(code, *args, timeout=120):
    """Run ``CHILD_PRELUDE + code`` in a fresh interpreter; its last stdout line
    is parsed as JSON. A crash (e.g. SIGBUS) fails the calling test only."""
    result = run_python(CHILD_PRELUDE + PEAK + textwrap.dedent(code), *args, timeout=timeout)
    lines = result.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else None


def assert_labels_identical(a, b):
    assert a == b
    assert a.names == b.names
    assert a.values.dtype == np.int32
    assert a.values.shape == b.values.shape
    np.testing.assert_array_equal(a.values, b.values)


def assert_identical(loaded, data):
    """``==`` and, independently of it, every field compared by hand."""
    assert type(loaded) is type(data)
    assert loaded == data
    if isinstance(data, Labels):
        assert_labels_identical(loaded, data)
        return
    if isinstance(data, TensorMap):
        assert_labels_identical(loaded.keys, data.keys)
        assert len(loaded) == len(data)
        assert loaded.info() == data.info()
    pairs = list(zip(all_blocks(loaded), all_blocks(data), strict=True))
    for (name, ours), (expected_name, theirs) in pairs:
        assert name == expected_name
        assert ours.values.dtype == theirs.values.dtype, name
        assert ours.values.dtype.isnative, name
        assert ours.values.shape == theirs.values.shape, name
        assert ours.values.tobytes() == theirs.values.tobytes(), name
        assert_labels_identical(ours.samples, theirs.samples)
        assert len(ours.components) == len(theirs.components)
        for a, b in zip(ours.components, theirs.components, strict=True):
            assert_labels_identical(a, b)
        assert_labels_identical(ours.properties, theirs.properties)
        assert ours.gradients_list() == theirs.gradients_list(), name


def open_segments():
    """File descriptors of this process open on blockmap shared-memory
    segments (memfds named ``blockmap``); 0 where /proc is missing."""
    try:
        fds = os.listdir("/proc/self/fd")
    except FileNotFoundError:
        return 0
    count = 0
    for fd in fds:
        try:
            if "memfd:blockmap" in os.readlink(f"/proc/self/fd/{fd}"):
                count += 1
        except OSError:  # closed since listed
            pass
    return count
