"""Pickling Labels, TensorBlock and TensorMap (docs/pickle.md).

Round trips with every protocol, zero copy with protocol 5 out-of-band buffers
proven by addresses both ways (the buffers are the object's memory; the rebuilt
object views the buffers it is given), read-only propagation, copies for
protocols < 5 and deepcopy, every kind of buffer a transport delivers, crafted
input run in a child process, pickles written by an earlier version (in
tests/data/pickle) and the version 1 and 3 wire formats written by hand.

Run this file as a script to write the files of tests/data/pickle that are
missing (when the wire format gets a new version: the stored files must come
from the version they name, and are never written again).
"""

import copy
import gc
import json
import multiprocessing
import pickle
import signal
import subprocess
import sys
import weakref

import numpy as np
import pytest

import blockmap
from blockmap import Labels, TensorBlock, TensorMap
from blockmap._blockmap import _reconstruct, _set_pickle_piece_size
from helpers import TESTS_DIR
from helpers.dtypes import ALL_DTYPES, dtype_id
from helpers.io_cases import (
    BLOCK_CASES,
    INFO,
    LABELS_CASES,
    MAP_CASES,
    all_blocks,
    assert_identical,
    block_with_gradients,
    labels,
    make_map,
)
from helpers.memory import address_of
from helpers.pickle_cases import (
    CRAFTED,
    FLIPPED_V0,
    crafted_map,
    identity,
    is_values,
    wire_arrays,
)

DATA = TESTS_DIR.parent / "data" / "pickle"

# "5-oob": protocol 5 with a buffer_callback (out-of-band buffers)
MODES = ["0", "1", "2", "3", "4", "5", "5-oob"]


def _dumps(data, mode):
    """``(stream, buffers)`` of ``data`` pickled with ``mode``."""
    buffers = []
    if mode == "5-oob":
        return pickle.dumps(data, protocol=5, buffer_callback=buffers.append), buffers
    return pickle.dumps(data, protocol=int(mode)), None


def _round_trip(data, mode):
    stream, buffers = _dumps(data, mode)
    return pickle.loads(stream, buffers=buffers)


def _assert_no_shared_memory(loaded, data):
    for (name, ours), (_, theirs) in zip(wire_arrays(loaded), wire_arrays(data), strict=True):
        assert not np.shares_memory(ours, theirs), name


def _aligned(data, offset=0, writable=True):
    """A numpy uint8 copy of ``data`` whose first byte is at ``offset`` bytes
    past a multiple of 64."""
    data = bytes(data)
    store = np.zeros(len(data) + 128, dtype=np.uint8)
    start = (-address_of(store)) % 64 + offset
    view = store[start : start + len(data)]
    view[:] = np.frombuffer(data, dtype=np.uint8)
    view.flags.writeable = writable
    assert address_of(view) % 64 == offset
    return view


def _reduce_5(data):
    reconstruct, args = data.__reduce_ex__(5)
    assert reconstruct is _reconstruct
    version, header, *buffers = args
    assert version == 3
    return header, buffers


# ------------------------------------------------------------- round trips


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", MAP_CASES)
def test_map_cases_every_protocol(rng, case, mode):
    tensor = MAP_CASES[case](rng, np.float64)
    assert_identical(_round_trip(tensor, mode), tensor)


def test_map_cases_are_what_they_say(rng):
    nested = MAP_CASES["nested_gradients"](rng, np.float64).block(0).gradient("positions")
    assert nested.gradients_list() == ["cell", "strain"]
    empty = MAP_CASES["empty_blocks"](rng, np.float64)
    assert all(block.values.shape[0] == 0 for block in empty.blocks())
    assert len(MAP_CASES["zero_blocks"](rng, np.float64)) == 0
    assert MAP_CASES["info"](rng, np.float64).info() == INFO


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_every_dtype_every_protocol(rng, dtype, mode):
    tensor = make_map(rng, dtype, info=INFO)
    loaded = _round_trip(tensor, mode)
    assert_identical(loaded, tensor)
    for name, block in all_blocks(loaded):
        assert block.dtype == np.dtype(dtype), name
        assert block.values.dtype == np.dtype(dtype), name


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", BLOCK_CASES)
def test_block_cases_every_protocol(rng, case, mode):
    block = BLOCK_CASES[case](rng, np.float64)
    assert_identical(_round_trip(block, mode), block)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_block_every_dtype_every_protocol(rng, dtype):
    block = block_with_gradients(rng, dtype)
    for mode in MODES:
        loaded = _round_trip(block, mode)
        assert_identical(loaded, block)
        assert loaded.values.dtype == np.dtype(dtype), mode


def test_gradient_block_pickles_on_its_own(rng):
    gradient = block_with_gradients(rng).gradient("positions")
    assert gradient.gradients_list() == ["cell", "strain"]
    for mode in MODES:
        assert_identical(_round_trip(gradient, mode), gradient)


LABELS_ROUND_TRIP_CASES = {
    **LABELS_CASES,
    "no_dimensions": lambda: Labels([], np.zeros((0, 0), dtype=np.int32)),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", LABELS_ROUND_TRIP_CASES)
def test_labels_every_protocol(case, mode):
    original = LABELS_ROUND_TRIP_CASES[case]()
    loaded = _round_trip(original, mode)
    assert_identical(loaded, original)
    # the lookup works on the rebuilt labels
    for i, entry in enumerate(original):
        assert loaded.position(entry) == i


@pytest.mark.parametrize("mode", MODES)
def test_objects_nested_in_containers(rng, mode):
    tensor = make_map(rng, info=INFO)
    data = {"map": tensor, "block": tensor.block(1), "keys": tensor.keys, "again": tensor}
    loaded = _round_trip(data, mode)
    assert_identical(loaded["map"], tensor)
    assert_identical(loaded["block"], tensor.block(1))
    assert_identical(loaded["keys"], tensor.keys)
    # the pickler's memo: one object pickled twice is one object loaded
    assert loaded["again"] is loaded["map"]


# -------------------------------------------------------- __reduce_ex__ layout


def _kinds(rng):
    tensor = make_map(rng, info=INFO)
    return {"tensor": tensor, "block": tensor.block(2), "labels": tensor.keys}


@pytest.mark.parametrize("kind", ["tensor", "block", "labels"])
def test_reduce_ex_protocol_5_layout(rng, kind):
    data = _kinds(rng)[kind]
    reconstruct, args = data.__reduce_ex__(5)
    assert reconstruct is _reconstruct
    assert (reconstruct.__module__, reconstruct.__name__) == ("blockmap._blockmap", "_reconstruct")
    version, header, *buffers = args
    assert version == 3
    assert isinstance(header, bytes)
    assert json.loads(header)["kind"] == kind
    arrays = wire_arrays(data)
    assert len(buffers) == len(arrays)
    for buffer, (name, array) in zip(buffers, arrays, strict=True):
        assert isinstance(buffer, pickle.PickleBuffer), name
        raw = buffer.raw()
        assert raw.format == "B", name
        assert raw.ndim == 1, name
        assert raw.c_contiguous, name
        assert raw.nbytes == array.nbytes, name
        assert bytes(raw) == array.tobytes(), name


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("kind", ["tensor", "block", "labels"])
def test_reduce_ex_below_protocol_5_layout(rng, kind, protocol):
    data = _kinds(rng)[kind]
    reconstruct, args = data.__reduce_ex__(protocol)
    assert reconstruct is _reconstruct
    version, archive_kind, archive = args
    assert version == 0
    assert archive_kind == kind
    # bytes, not bytearray: pickle copies a bytearray through bytes(self)
    # before protocol 5, one copy more each way
    assert type(archive) is bytes
    # the .mts layout: the same bytes save_buffer writes
    assert bytes(archive) == bytes(data.save_buffer())


# ------------------------------------------------ protocol 5: zero copy dumps


@pytest.mark.parametrize("kind", ["tensor", "block", "labels"])
def test_out_of_band_buffers_are_the_objects_memory(rng, kind):
    data = _kinds(rng)[kind]
    buffers = []
    pickle.dumps(data, protocol=5, buffer_callback=buffers.append)
    arrays = wire_arrays(data)
    assert len(buffers) == len(arrays)
    for buffer, (name, array) in zip(buffers, arrays, strict=True):
        raw = np.frombuffer(buffer.raw(), dtype=np.uint8)
        assert raw.nbytes == array.nbytes, name
        assert raw.nbytes > 0, name
        assert address_of(raw) == address_of(array), name
        assert np.shares_memory(raw, array), name


def _big_map(n_samples, n_blocks=4, n_properties=1000):
    blocks = []
    for i in range(n_blocks):
        values = np.full((n_samples, 3, n_properties), float(i))
        block = TensorBlock(
            values,
            Labels.range("sample", n_samples),
            [Labels.range("xyz", 3)],
            Labels.range("property", n_properties),
        )
        gradient = TensorBlock(
            np.full((n_samples, 3, n_properties), -float(i)),
            labels(["sample", "atom"], [[s, 0] for s in range(n_samples)]),
            [Labels.range("xyz", 3)],
            block.properties,
        )
        block.add_gradient("positions", gradient)
        blocks.append(block)
    tensor = TensorMap(Labels.range("key", n_blocks), blocks)
    tensor.set_info("origin", "test")
    return tensor


def test_out_of_band_stream_holds_only_metadata():
    big = _big_map(n_samples=260)  # 4 blocks x 2 arrays x 6.24 MB
    assert big.nbytes > 49_000_000
    buffers = []
    stream = pickle.dumps(big, protocol=5, buffer_callback=buffers.append)
    assert len(stream) < 8000
    arrays = wire_arrays(big)
    assert sum(buffer.raw().nbytes for buffer in buffers) == sum(a.nbytes for _, a in arrays)
    for buffer, (name, array) in zip(buffers, arrays, strict=True):
        assert address_of(buffer) == address_of(array), name
    # the stream does not grow with the data: only the counts' digits change
    small = _big_map(n_samples=1)
    small_stream = pickle.dumps(small, protocol=5, buffer_callback=lambda _: None)
    assert abs(len(stream) - len(small_stream)) < 64
    # and in-band, the same map writes all of its data into the stream
    small_bytes = sum(array.nbytes for _, array in wire_arrays(small))
    assert len(pickle.dumps(small, protocol=5)) >= small_bytes


# ------------------------------------------------ protocol 5: zero copy loads


@pytest.mark.parametrize("kind", ["tensor", "block", "labels"])
def test_loads_views_the_buffers_it_is_given(rng, kind):
    data = _kinds(rng)[kind]
    buffers = []
    stream = pickle.dumps(data, protocol=5, buffer_callback=buffers.append)
    loaded = pickle.loads(stream, buffers=buffers)
    assert_identical(loaded, data)
    # the buffers are the original's memory: the rebuilt object views it
    # for the values; labels own the copy they validated
    for (name, ours), (_, theirs) in zip(wire_arrays(loaded), wire_arrays(data), strict=True):
        if is_values(name):
            assert address_of(ours) == address_of(theirs), name
            assert np.shares_memory(ours, theirs), name
        else:
            assert not np.shares_memory(ours, theirs), name


def test_equal_labels_of_any_size_become_one_object_sent_once():
    # every block made with its own copy of the same samples (8 kB: larger
    # than the 4 KiB of labels compared by content when pickled), as a
    # map built block by block is (issue 45)
    rows = np.array([[s, a] for s in range(100) for a in range(10)], dtype=np.int32)

    def block(i):
        return TensorBlock(
            np.full((1000, 3, 4), float(i)),
            Labels(["system", "atom"], rows.copy()),
            [Labels(["o3_mu"], np.array([[-1], [0], [1]], dtype=np.int32))],
            Labels(["n"], np.arange(4, dtype=np.int32).reshape(-1, 1)),
        )

    given = [block(i) for i in range(3)]
    keys = Labels(["k"], np.arange(3, dtype=np.int32).reshape(-1, 1))
    tensor = TensorMap(keys, given)
    # the map holds one samples, one component, one properties: the blocks
    # given keep their own
    blocks = [tensor.block(i) for i in range(3)]
    for other in blocks[1:]:
        assert np.shares_memory(other.samples.values, blocks[0].samples.values)
        assert np.shares_memory(other.components[0].values, blocks[0].components[0].values)
        assert np.shares_memory(other.properties.values, blocks[0].properties.values)
    assert not np.shares_memory(given[0].samples.values, given[1].samples.values)
    # sent once: keys; values, samples, component, properties; values twice
    stream, buffers = _dumps(tensor, "5-oob")
    assert len(buffers) == 1 + 4 + 2
    for received in (buffers, [bytearray(buffer.raw()) for buffer in buffers]):
        loaded = pickle.loads(stream, buffers=received)
        assert_identical(loaded, tensor)
        samples = [loaded.block(i).samples.values for i in range(3)]
        assert all(np.shares_memory(s, samples[0]) for s in samples[1:])
    # blocks whose samples differ keep them apart, each sent
    other = TensorBlock(
        np.zeros((1000, 3, 4)),
        Labels(["system", "atom"], rows[::-1].copy()),
        [Labels(["o3_mu"], np.array([[-1], [0], [1]], dtype=np.int32))],
        Labels(["n"], np.arange(4, dtype=np.int32).reshape(-1, 1)),
    )
    mixed = TensorMap(keys, [block(0), other, block(2)])
    assert not np.shares_memory(mixed.block(1).samples.values, mixed.block(0).samples.values)
    assert np.shares_memory(mixed.block(2).samples.values, mixed.block(0).samples.values)
    stream, buffers = _dumps(mixed, "5-oob")
    assert len(buffers) == 1 + 4 + 2 + 1
    assert_identical(pickle.loads(stream, buffers=buffers), mixed)


def test_received_labels_are_made_once_per_content_and_own_their_memory():
    # three blocks whose equal components and properties (and samples) come
    # from separate arrays, as in a map received from another process
    def block(i):
        return TensorBlock(
            np.full((2, 3, 4), float(i)),
            Labels(["system", "atom"], np.array([[0, 0], [0, 1]], dtype=np.int32)),
            [Labels(["o3_mu"], np.array([[-1], [0], [1]], dtype=np.int32))],
            Labels(["n"], np.arange(4, dtype=np.int32).reshape(-1, 1)),
        )

    keys = Labels(["k"], np.arange(3, dtype=np.int32).reshape(-1, 1))
    tensor = TensorMap(keys, [block(i) for i in range(3)])
    stream, buffers = _dumps(tensor, "5-oob")
    given = [bytearray(buffer.raw()) for buffer in buffers]
    loaded = pickle.loads(stream, buffers=given)
    assert_identical(loaded, tensor)
    blocks = [loaded.block(i) for i in range(3)]
    for other in blocks[1:]:
        assert np.shares_memory(other.properties.values, blocks[0].properties.values)
        assert np.shares_memory(other.components[0].values, blocks[0].components[0].values)
        assert np.shares_memory(other.samples.values, blocks[0].samples.values)
    # none of the labels is the given memory: scribbling over every given
    # buffer reaches the values only
    labels = [loaded.keys, *(b.samples for b in blocks), *(b.properties for b in blocks)]
    for label in labels:
        assert not any(np.shares_memory(label.values, np.frombuffer(g, np.uint8)) for g in given)
    for buffer in given:
        buffer[:] = b"\xff" * len(buffer)
    assert loaded.keys == keys
    assert blocks[2].properties == tensor.block(2).properties
    assert np.isnan(blocks[0].values).all()


def test_loads_views_fresh_aligned_buffers(rng):
    tensor = make_map(rng, info=INFO)
    stream, buffers = _dumps(tensor, "5-oob")
    given = [_aligned(buffer.raw()) for buffer in buffers]
    loaded = pickle.loads(stream, buffers=given)
    assert_identical(loaded, tensor)
    arrays = wire_arrays(loaded)
    for buffer, (name, array) in zip(given, arrays, strict=True):
        if is_values(name):
            assert address_of(array) == address_of(buffer), name
            assert np.shares_memory(array, buffer), name
        else:
            assert not np.shares_memory(array, buffer), name
    # aliasing: the values are the given memory
    values = loaded.block(0).values
    values[0, 0, 0] = 1234.5
    assert wire_arrays(loaded)[1][0] == "blocks/0/values"
    assert given[1].view(np.float64)[0] == 1234.5


def test_rebuilt_map_keeps_the_original_memory_alive(rng):
    tensor = make_map(rng, info=INFO)
    expected = copy.deepcopy(tensor)
    buffers = []
    stream = pickle.dumps(tensor, protocol=5, buffer_callback=buffers.append)
    loaded = pickle.loads(stream, buffers=buffers)
    del tensor, buffers
    gc.collect()
    # allocate and fill memory that freed blocks would be reused for
    junk = [np.full(block.values.shape, 7.0) for _, block in all_blocks(expected)]
    assert_identical(loaded, expected)
    assert junk


def test_rebuilt_map_keeps_given_buffers_alive_until_it_goes(rng):
    tensor = make_map(rng)
    stream, buffers = _dumps(tensor, "5-oob")
    given = [_aligned(buffer.raw()) for buffer in buffers]
    names = [name for name, _ in wire_arrays(tensor)]
    references = [weakref.ref(buffer) for buffer in given]
    loaded = pickle.loads(stream, buffers=given)
    del given, buffers
    gc.collect()
    # the values keep their buffers alive; labels copied theirs, which go
    alive = [reference() is not None for reference in references]
    assert alive == [is_values(name) for name in names]
    assert_identical(loaded, tensor)
    values = loaded.block(1).gradient("positions").values
    del loaded
    gc.collect()
    # a values array alone keeps its own buffer alive
    alive = [reference() is not None for reference in references]
    assert sum(alive) == 1
    np.testing.assert_array_equal(values, tensor.block(1).gradient("positions").values)
    del values
    gc.collect()
    assert all(reference() is None for reference in references)


# ------------------------------------------------------------------ read-only


def _read_only_map(rng):
    """A map whose values (gradients included) are read-only numpy arrays."""
    tensor = make_map(rng, info=INFO)
    blocks = []

    def rebuild(block):
        values = block.values.copy()
        values.flags.writeable = False
        new = TensorBlock(values, block.samples, block.components, block.properties)
        for parameter, gradient in block.gradients():
            new.add_gradient(parameter, rebuild(gradient))
        return new

    for block in tensor.blocks():
        blocks.append(rebuild(block))
    result = TensorMap(tensor.keys, blocks)
    for key, value in tensor.info().items():
        result.set_info(key, value)
    return result


def _values_buffers(data, buffers):
    """``[(name, buffer)]`` of the values (not labels) among the wire buffers."""
    names = [name for name, _ in wire_arrays(data)]
    return [
        (name, buffer)
        for name, buffer in zip(names, buffers, strict=True)
        if name.endswith("values")
    ]


def _assert_values_read_only(data):
    for name, block in all_blocks(data):
        assert not block.values.flags.writeable, name
        with pytest.raises(ValueError):
            block.values.flags.writeable = True


def _assert_values_writable(data):
    for name, block in all_blocks(data):
        assert block.values.flags.writeable, name


def test_read_only_values_give_read_only_buffers(rng):
    tensor = _read_only_map(rng)
    _assert_values_read_only(tensor)
    _, buffers = _reduce_5(tensor)
    values = _values_buffers(tensor, buffers)
    assert len(values) == len(all_blocks(tensor))
    for name, buffer in values:
        assert buffer.raw().readonly, name
    # loads in the same process: the rebuilt values are read-only too
    stream, buffers = _dumps(tensor, "5-oob")
    loaded = pickle.loads(stream, buffers=buffers)
    assert_identical(loaded, tensor)
    _assert_values_read_only(loaded)


def test_writable_values_give_writable_buffers(rng):
    tensor = make_map(rng)
    _assert_values_writable(tensor)
    _, buffers = _reduce_5(tensor)
    for name, buffer in _values_buffers(tensor, buffers):
        assert not buffer.raw().readonly, name
    stream, buffers = _dumps(tensor, "5-oob")
    loaded = pickle.loads(stream, buffers=buffers)
    _assert_values_writable(loaded)


@pytest.mark.parametrize("kind", ["tensor", "block", "labels"])
def test_labels_buffers_are_read_only(rng, kind):
    """Labels never change once built (their values are a read-only view and
    their lookup index depends on them): the buffers pickle hands out for
    them must not let anyone write into them."""
    data = _kinds(rng)[kind]
    _, buffers = _reduce_5(data)
    names = [name for name, _ in wire_arrays(data)]
    for name, buffer in zip(names, buffers, strict=True):
        if not name.endswith("values"):
            assert buffer.raw().readonly, name


READ_ONLY_KINDS = {
    "bytes": bytes,
    "readonly_memoryview": lambda data: memoryview(bytearray(data)).toreadonly(),
    "readonly_numpy": lambda data: _aligned(data, writable=False),
    "readonly_pickle_buffer": lambda data: pickle.PickleBuffer(bytes(data)),
}

WRITABLE_KINDS = {
    "bytearray": bytearray,
    "memoryview": lambda data: memoryview(bytearray(data)),
    "numpy": _aligned,
    "pickle_buffer": lambda data: pickle.PickleBuffer(bytearray(data)),
}


@pytest.mark.parametrize("kind", READ_ONLY_KINDS)
def test_read_only_buffers_give_read_only_values(rng, kind):
    tensor = make_map(rng, info=INFO)
    stream, buffers = _dumps(tensor, "5-oob")
    given = [READ_ONLY_KINDS[kind](buffer.raw()) for buffer in buffers]
    loaded = pickle.loads(stream, buffers=given)
    assert_identical(loaded, tensor)
    _assert_values_read_only(loaded)


@pytest.mark.parametrize("kind", WRITABLE_KINDS)
def test_writable_buffers_give_writable_values(rng, kind):
    tensor = make_map(rng, info=INFO)
    stream, buffers = _dumps(tensor, "5-oob")
    given = [WRITABLE_KINDS[kind](buffer.raw()) for buffer in buffers]
    loaded = pickle.loads(stream, buffers=given)
    assert_identical(loaded, tensor)
    _assert_values_writable(loaded)
    # writing goes to the given buffer
    loaded.block(0).values[0, 0, 0] = -99.0
    assert np.asarray(memoryview(given[1])).view(np.float64)[0] == -99.0


@pytest.mark.parametrize("how", ["misaligned", "non_contiguous"])
def test_read_only_buffers_that_must_be_copied_give_read_only_values(rng, how):
    """A read-only buffer gives read-only values, also when it has to be copied
    (docs/pickle.md: "A read-only buffer gives read-only arrays")."""
    tensor = make_map(rng)
    stream, buffers = _dumps(tensor, "5-oob")
    if how == "misaligned":
        given = [_aligned(buffer.raw(), offset=1, writable=False) for buffer in buffers]
    else:
        given = [_strided(buffer.raw(), writable=False) for buffer in buffers]
    loaded = pickle.loads(stream, buffers=given)
    assert_identical(loaded, tensor)
    _assert_values_read_only(loaded)


# ---------------------------------------------------- protocol 5 in-band


@pytest.mark.parametrize("kind", ["tensor", "block", "labels"])
def test_in_band_protocol_5_copies(rng, kind):
    data = _kinds(rng)[kind]
    stream = pickle.dumps(data, protocol=5)
    assert len(stream) >= sum(array.nbytes for _, array in wire_arrays(data))
    loaded = pickle.loads(stream)
    assert_identical(loaded, data)
    _assert_no_shared_memory(loaded, data)
    if kind != "labels":
        _assert_values_writable(loaded)


def test_in_band_protocol_5_keeps_read_only(rng):
    tensor = _read_only_map(rng)
    loaded = pickle.loads(pickle.dumps(tensor, protocol=5))
    assert_identical(loaded, tensor)
    _assert_no_shared_memory(loaded, tensor)
    _assert_values_read_only(loaded)


# ----------------------------------------------------- protocols < 5, copies


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("kind", ["tensor", "block", "labels"])
def test_protocols_below_5_share_no_memory(rng, kind, protocol):
    data = _kinds(rng)[kind]
    loaded = pickle.loads(pickle.dumps(data, protocol=protocol))
    assert_identical(loaded, data)
    _assert_no_shared_memory(loaded, data)
    if kind != "labels":
        _assert_values_writable(loaded)
        expected = copy.deepcopy(data)
        for _, block in all_blocks(loaded):
            block.values[...] = 0
        assert_identical(data, expected)


def _assert_values_not_shared(copied, data):
    """No block values (gradients included) share memory; labels are
    immutable, so a copy may share them."""
    for (name, ours), (_, theirs) in zip(all_blocks(copied), all_blocks(data), strict=True):
        assert not np.shares_memory(ours.values, theirs.values), name


@pytest.mark.parametrize("kind", ["tensor", "block", "labels"])
def test_deepcopy_is_independent(rng, kind):
    data = _kinds(rng)[kind]
    before = pickle.loads(pickle.dumps(data, protocol=4))
    deep = copy.deepcopy(data)
    assert_identical(deep, data)
    if kind != "labels":
        _assert_values_not_shared(deep, data)
        for _, block in all_blocks(deep):
            block.values[...] = 1
        assert deep != data
        assert_identical(data, before)


def test_deepcopy_of_read_only_map_is_independent(rng):
    tensor = _read_only_map(rng)
    deep = copy.deepcopy(tensor)
    assert_identical(deep, tensor)
    _assert_values_not_shared(deep, tensor)


@pytest.mark.parametrize("kind", ["tensor", "block"])
def test_copy_shares_block_memory(rng, kind):
    data = _kinds(rng)[kind]
    shallow = copy.copy(data)
    assert_identical(shallow, data)
    for (name, ours), (_, theirs) in zip(all_blocks(shallow), all_blocks(data), strict=True):
        assert address_of(ours.values) == address_of(theirs.values), name
    first = all_blocks(shallow)[0][1]
    first.values[...] = 5
    assert np.all(all_blocks(data)[0][1].values == 5)


# --------------------------------------------- every kind of buffer on loads


def _strided(data, writable=True):
    """A non-contiguous uint8 numpy view holding ``data`` (every other byte)."""
    data = np.frombuffer(bytes(data), dtype=np.uint8)
    store = np.zeros(2 * len(data) + 1, dtype=np.uint8)
    view = store[1::2][: len(data)]
    view[:] = data
    view.flags.writeable = writable
    assert len(data) < 2 or not view.flags.c_contiguous
    return view


def _odd_memoryview(data):
    """A memoryview of a bytearray slice at offset 1 (an odd address)."""
    data = bytes(data)
    store = bytearray(len(data) + 1)
    store[1:] = data
    view = memoryview(store)[1:]
    assert len(data) == 0 or address_of(view) % 2 == 1
    return view


def _typed(arrays, writable):
    """ray: each buffer as an aligned numpy array with the array's dtype and
    original N-d shape."""

    def make(index, data):
        _, array = arrays[index]
        typed = _aligned(data).view(array.dtype).reshape(array.shape)
        typed.flags.writeable = writable
        return typed

    return make


def _kind_makers(arrays):
    """name -> (make(index, raw bytes) -> buffer object, viewed?, read-only?)."""
    return {
        "bytes": (lambda i, d: bytes(d), True, True),
        "bytearray": (lambda i, d: bytearray(d), True, False),
        "memoryview": (lambda i, d: memoryview(bytearray(d)), True, False),
        "readonly_memoryview": (lambda i, d: memoryview(bytes(d)), True, True),
        "memoryview_odd_address": (lambda i, d: _odd_memoryview(d), False, False),
        "memoryview_offset_8": (lambda i, d: memoryview(_aligned(d, offset=8)), True, False),
        "memoryview_offset_4": (lambda i, d: memoryview(_aligned(d, offset=4)), None, False),
        "pickle_buffer": (lambda i, d: pickle.PickleBuffer(bytearray(d)), True, False),
        "numpy_uint8": (lambda i, d: _aligned(d), True, False),
        "numpy_uint8_readonly": (lambda i, d: _aligned(d, writable=False), True, True),
        "numpy_uint8_frombuffer_bytes": (
            lambda i, d: np.frombuffer(bytes(d), dtype=np.uint8),
            True,
            True,
        ),
        "numpy_typed_nd_readonly": (_typed(arrays, writable=False), True, True),
        "numpy_typed_nd": (_typed(arrays, writable=True), True, False),
        "numpy_strided": (lambda i, d: _strided(d), False, False),
    }


BUFFER_KINDS = list(_kind_makers([]))


@pytest.mark.parametrize("kind", BUFFER_KINDS)
def test_reconstruct_accepts_every_kind_of_buffer(rng, kind):
    tensor = make_map(rng, info=INFO)
    header, buffers = _reduce_5(tensor)
    arrays = wire_arrays(tensor)
    make, viewed, read_only = _kind_makers(arrays)[kind]
    given = [make(i, buffer.raw()) for i, buffer in enumerate(buffers)]
    loaded = _reconstruct(3, header, *given)
    assert_identical(loaded, tensor)
    for buffer, (name, array) in zip(given, wire_arrays(loaded), strict=True):
        alignment = array.dtype.alignment
        assert array.flags.aligned, name
        assert address_of(array) % alignment == 0, name
        shares = np.shares_memory(array, np.asarray(memoryview(buffer)))
        if not is_values(name):
            # labels own the copy they validated
            viewed_here = False
        elif viewed is None:
            # offset 4: aligned for the int32 labels, not for the float64 values
            viewed_here = address_of(buffer) % alignment == 0
        else:
            viewed_here = viewed
        assert shares == viewed_here, name
        if not viewed_here:
            assert address_of(array) % 64 == 0, name
    if read_only:
        _assert_values_read_only(loaded)
    else:
        _assert_values_writable(loaded)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_misaligned_buffers_are_copied_into_aligned_memory(rng, dtype):
    tensor = make_map(rng, dtype)
    header, buffers = _reduce_5(tensor)
    for offset in (1, 2, 4, 8):
        given = [_aligned(buffer.raw(), offset=offset) for buffer in buffers]
        loaded = _reconstruct(3, header, *given)
        assert_identical(loaded, tensor)
        for buffer, (name, array) in zip(given, wire_arrays(loaded), strict=True):
            # numpy's alignment of the element type (complex64: 4, complex128: 8)
            alignment = array.dtype.alignment
            assert array.flags.aligned, (offset, name)
            assert address_of(array) % alignment == 0, (offset, name)
            if offset % alignment == 0 and is_values(name):
                assert address_of(array) == address_of(buffer), (offset, name)
            else:
                assert not np.shares_memory(array, buffer), (offset, name)
                assert address_of(array) % 64 == 0, (offset, name)


def test_non_contiguous_buffers_are_copied(rng):
    tensor = make_map(rng, info=INFO)
    header, buffers = _reduce_5(tensor)
    given = [_strided(buffer.raw()) for buffer in buffers]
    loaded = _reconstruct(3, header, *given)
    assert_identical(loaded, tensor)
    for buffer, (name, array) in zip(given, wire_arrays(loaded), strict=True):
        assert not np.shares_memory(array, buffer.base), name
        assert array.flags.c_contiguous, name
    # and a non-contiguous N-d typed buffer (a transposed array) reads its
    # elements in logical order
    block = tensor.block(0)
    values = np.asfortranarray(block.values)
    assert not values.flags.c_contiguous
    header, buffers = _reduce_5(block)
    loaded = _reconstruct(3, header, values, *buffers[1:])
    assert_identical(loaded, block)


def test_version_0_archive_accepts_every_kind_of_buffer(rng):
    tensor = make_map(rng, info=INFO)
    _, (version, kind, archive) = tensor.__reduce_ex__(4)
    for given in (
        bytes(archive),
        archive,
        memoryview(archive),
        memoryview(archive).toreadonly(),
        _odd_memoryview(archive),
        pickle.PickleBuffer(archive),
        _aligned(archive),
        _aligned(archive, offset=3, writable=False),
        _strided(archive),
    ):
        loaded = _reconstruct(version, kind, given)
        assert_identical(loaded, tensor)
        _assert_no_shared_memory(loaded, tensor)


# ------------------------------------------------------------ crafted input

CHILD_TIMEOUT = 120


def _run_crafted(names):
    """Run the crafted cases in a child process; when it dies, the case it
    died in is recorded and the child restarted on the cases after it."""
    results = {}
    remaining = list(names)
    code = f"import sys; sys.path.insert(0, {str(TESTS_DIR)!r}); from helpers import pickle_cases; "
    code += "pickle_cases.main(sys.argv[1:])"
    while remaining:
        try:
            child = subprocess.run(
                [sys.executable, "-c", code, *remaining],
                capture_output=True,
                text=True,
                timeout=CHILD_TIMEOUT,
            )
            stdout, stderr, returncode = child.stdout, child.stderr, child.returncode
        except subprocess.TimeoutExpired as expired:
            stdout = expired.stdout or ""
            stdout = stdout.decode(errors="replace") if isinstance(stdout, bytes) else stdout
            stderr, returncode = "", "timeout"
        started = None
        for line in stdout.splitlines():
            if line.startswith("START "):
                started = line[6:]
            elif line.startswith("RESULT "):
                result = json.loads(line[7:])
                results[result["name"]] = result
        if returncode == 0:
            break
        if started is None or started in results:
            pytest.fail(f"the crafted input process failed outside a case:\n{stderr[-4000:]}")
        how = returncode
        if isinstance(returncode, int) and returncode < 0:
            how = f"signal {signal.Signals(-returncode).name}"
        results[started] = {"name": started, "crashed": f"{how}\n{stderr[-4000:]}"}
        remaining = remaining[remaining.index(started) + 1 :]
    return results


@pytest.fixture(scope="module")
def crafted_results():
    return _run_crafted(list(CRAFTED))


@pytest.mark.parametrize("name", CRAFTED)
def test_crafted_input_raises_a_clean_error(crafted_results, name):
    result = crafted_results[name]
    assert "crashed" not in result, f"{name}: the process died: {result.get('crashed')}"
    _, expected, match = CRAFTED[name]
    assert not result["ok"], f"{name}: loaded without an error (a {result.get('type')})"
    mro, message = result["mro"], result["message"]
    described = f"{name}: {mro[0]}: {message}"
    assert "PanicException" not in mro, described
    if expected == "pickle":
        # Python's pickle finds the stream broken before any blockmap code runs
        assert {"UnpicklingError", "EOFError"} & set(mro), described
    else:
        assert "BlockMapError" in mro, described
        assert result["module"] == "blockmap", described
        if expected == "blockmap":
            assert "ValidationError" in mro and "ValueError" in mro, described
        assert message.strip(), described
    if match is not None:
        assert match in message, described


def test_crafted_cases_run_in_process_raise_blockmap_errors():
    """A few crafted cases again in this process, through pytest.raises (the
    child process above is what guards against crashes)."""
    cases = {
        "too_few_buffers": blockmap.FormatError,
        "values_buffer_longer": blockmap.FormatError,
        "keys_not_unique": blockmap.ValidationError,
        "version_4": blockmap.FormatError,
        "labels_reference_to_values": blockmap.FormatError,
        "labels_reference_in_version_1": blockmap.FormatError,
    }
    for name, error in cases.items():
        case, _, match = CRAFTED[name]
        with pytest.raises(error, match=match):
            case()
    with pytest.raises(blockmap.FormatError, match="version 4"):
        _reconstruct(4, b"{}")
    with pytest.raises(blockmap.FormatError, match="integer"):
        _reconstruct("x", b"{}")
    with pytest.raises(blockmap.FormatError, match="header"):
        _reconstruct(1, b"{", b"")
    assert issubclass(blockmap.FormatError, ValueError)
    assert issubclass(blockmap.ValidationError, ValueError)


def test_crash_in_a_case_is_reported_with_its_name():
    """The runner names the case a crash happened in and goes on with the next."""
    results = _run_crafted(["too_few_buffers", "self_test_abort", "version_4"])
    assert results["too_few_buffers"]["ok"] is False
    assert "SIGABRT" in results["self_test_abort"]["crashed"]
    assert results["version_4"]["ok"] is False


# ------------------------------------------------- stored pickles (version 1)


def stored_map():
    """The map in tests/data/pickle, built without random numbers."""
    keys = labels(["o3_lambda", "center_type"], [[0, 1], [1, 6]])
    blocks = []
    for o3_lambda, n_samples in ((0, 2), (1, 3)):
        n_components = 2 * o3_lambda + 1
        shape = (n_samples, n_components, 3)
        values = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) / 4 - 1
        block = TensorBlock(
            values,
            labels(["system", "atom"], [[0, i] for i in range(n_samples)]),
            [labels("o3_mu", np.arange(-o3_lambda, o3_lambda + 1))],
            labels("n", [[1], [2], [5]]),
        )
        gradient_shape = (2, 3, n_components, 3)
        gradient = TensorBlock(
            np.arange(np.prod(gradient_shape), dtype=np.float64).reshape(gradient_shape) * 0.5,
            labels(["sample", "system", "atom"], [[0, 0, 0], [n_samples - 1, 0, 1]]),
            [Labels.range("xyz", 3), *block.components],
            block.properties,
        )
        block.add_gradient("positions", gradient)
        blocks.append(block)
    tensor = TensorMap(keys, blocks)
    tensor.set_info("origin", "blockmap tests/data/pickle")
    tensor.set_info("units", "eV")
    return tensor


def stored_block():
    """The block in tests/data/pickle: float32, a component, a gradient."""
    values = (np.arange(24, dtype=np.float32).reshape(4, 3, 2) - 10) / 8
    block = TensorBlock(
        values,
        labels("sample", [[0], [1], [2], [3]]),
        [Labels.range("xyz", 3)],
        labels("property", [[-1], [7]]),
    )
    gradient = TensorBlock(
        np.linspace(-1, 1, 2 * 3 * 3 * 2, dtype=np.float32).reshape(2, 3, 3, 2),
        labels(["sample", "cell"], [[1, 0], [3, 2]]),
        [Labels.range("abc", 3), Labels.range("xyz", 3)],
        block.properties,
    )
    block.add_gradient("strain", gradient)
    return block


def stored_labels():
    """The labels in tests/data/pickle."""
    return labels(["system", "atom"], [[0, 1], [0, 2], [3, -7], [2**31 - 1, -(2**31)]])


STORED = {
    "tensor": stored_map,
    "block": stored_block,
    "labels": stored_labels,
}
# the stored files: (kind, protocol, wire format version) -> file name;
# version 1 was written before version 3 (references to earlier labels)
STORED_FILES = {
    (kind, protocol, version): f"v{version}-{kind}-protocol{protocol}.pickle"
    for kind in STORED
    for protocol, version in ((5, 1), (5, 3), (4, 0))
}
# the version each protocol writes now
CURRENT_VERSIONS = {5: 3, 4: 0}


# version 2 (the archive in pieces), written with pieces this small so that
# the stored objects need several
STORED_PIECE_SIZE = 256
STORED_PIECES = {kind: f"v2-{kind}-protocol4.pickle" for kind in ("tensor", "block")}


def write_stored_pickles():
    """Write tests/data/pickle (protocol 5 in-band and protocol 4)."""
    DATA.mkdir(parents=True, exist_ok=True)
    # the files of a version are never written again: they pin it
    for (kind, protocol, version), name in STORED_FILES.items():
        if CURRENT_VERSIONS[protocol] == version and not (DATA / name).exists():
            (DATA / name).write_bytes(pickle.dumps(STORED[kind](), protocol=protocol))
    previous = _set_pickle_piece_size(STORED_PIECE_SIZE)
    try:
        for kind, name in STORED_PIECES.items():
            if not (DATA / name).exists():
                (DATA / name).write_bytes(pickle.dumps(STORED[kind](), protocol=4))
    finally:
        _set_pickle_piece_size(previous)


class _RecordingUnpickler(pickle.Unpickler):
    """Records the arguments of every ``_reconstruct`` call."""

    def __init__(self, file):
        super().__init__(file)
        self.calls = []

    def find_class(self, module, name):
        if (module, name) == ("blockmap._blockmap", "_reconstruct"):

            def recording(*args):
                self.calls.append(args)
                return _reconstruct(*args)

            return recording
        if (module, name) in (("builtins", "bytearray"), ("_codecs", "encode")):
            # protocols < 5 write a bytearray as a call of bytearray, and
            # protocols < 3 bytes as a call of _codecs.encode
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"unexpected global {module}.{name}")


@pytest.mark.parametrize("kind, protocol, version", list(STORED_FILES))
def test_stored_pickles_still_load(kind, protocol, version):
    name = STORED_FILES[(kind, protocol, version)]
    data = (DATA / name).read_bytes()
    assert data[:2] == bytes([0x80, protocol])
    expected = STORED[kind]()
    assert_identical(pickle.loads(data), expected)
    # the file is what its name says: one _reconstruct call of that version
    unpickler = _RecordingUnpickler(__import__("io").BytesIO(data))
    assert_identical(unpickler.load(), expected)
    assert len(unpickler.calls) == 1
    (call,) = unpickler.calls
    assert call[0] == version
    if version in (1, 3):
        assert json.loads(call[1])["kind"] == kind
        assert len(call) == 2 + len(wire_arrays(expected, refer=version == 3))
        if version == 3 and kind != "labels":
            # equal labels referred to: fewer buffers than version 1
            assert len(call) < 2 + len(wire_arrays(expected, refer=False))
    else:
        assert call[1] == kind
        assert len(call) == 3


def _reconstruct_arguments(data):
    """The arguments of the one ``_reconstruct`` call of a pickle, buffers
    as bytes."""
    unpickler = _RecordingUnpickler(__import__("io").BytesIO(data))
    unpickler.load()
    (call,) = unpickler.calls
    return [arg if isinstance(arg, (int, str)) else bytes(arg) for arg in call]


@pytest.mark.parametrize("kind", sorted(STORED))
def test_this_build_writes_the_stored_wire_bytes(kind):
    """Pickles of every protocol written now carry, byte for byte, the
    ``_reconstruct`` arguments of the stored files of the version they
    write (made by blockmap 0.1.0): older builds read what this one writes
    as they read those files."""
    stored = {
        protocol: _reconstruct_arguments(
            (DATA / STORED_FILES[(kind, 5 if protocol == 5 else 4, version)]).read_bytes()
        )
        for protocol, version in [(5, 3), *((p, 0) for p in range(5))]
    }
    for protocol, arguments in stored.items():
        assert _reconstruct_arguments(pickle.dumps(STORED[kind](), protocol=protocol)) == arguments
    if kind in STORED_PIECES:
        pieces = _reconstruct_arguments((DATA / STORED_PIECES[kind]).read_bytes())
        assert pieces[0] == 2 and len(pieces) > 3
        previous = _set_pickle_piece_size(STORED_PIECE_SIZE)
        try:
            for protocol in range(5):
                written = pickle.dumps(STORED[kind](), protocol=protocol)
                _assert_same_pieces(_reconstruct_arguments(written), pieces)
        finally:
            _set_pickle_piece_size(previous)


def _assert_same_pieces(written, stored):
    """A version 2 pickle's arguments are the stored ones: the same kind, the
    same archive bytes, and the same pieces up to the central directory
    (every array in the piece it was in). The directory itself may be cut
    differently: blockmap's zip writer hands it over in larger writes than
    the zip crate did, and every reader takes the pieces as one stream."""
    assert written[:2] == stored[:2]
    archive = b"".join(bytes(piece) for piece in written[2:])
    assert archive == b"".join(bytes(piece) for piece in stored[2:])
    end = archive.rindex(b"PK\x05\x06")
    directory = int.from_bytes(archive[end + 16 : end + 20], "little")

    def cuts(pieces):
        offsets, at = [], 0
        for piece in pieces:
            offsets.append(at)
            at += len(piece)
        return [offset for offset in offsets if offset <= directory]

    assert cuts(written[2:]) == cuts(stored[2:])


def test_stored_builders_are_what_they_say():
    tensor = stored_map()
    assert tensor.info() == {"origin": "blockmap tests/data/pickle", "units": "eV"}
    assert [block.gradients_list() for block in tensor.blocks()] == [["positions"]] * 2
    assert stored_block().gradients_list() == ["strain"]
    assert stored_block().dtype == np.float32
    # the builders are deterministic
    assert stored_map() == stored_map()
    assert stored_block() == stored_block()
    assert stored_labels() == stored_labels()


# ---------------------------------------------- the version 1 layout by hand

# A map with keys ("k",) = (3,), (8,), one block each with values (samples,
# xyz, properties) and a "positions" gradient. Buffers follow in the order:
# keys; block 0 values, samples, components, properties, then its gradients
# (values, samples, components: no properties); block 1 the same way.
LITERAL_TENSOR_HEADER = b"""{
  "kind": "tensor",
  "keys": {"names": ["k"], "count": 2, "dtype": "<i4"},
  "blocks": [
    {"dtype": "<f8", "shape": [2, 3, 1],
     "samples": {"names": ["structure"], "count": 2, "dtype": "<i4"},
     "components": [{"names": ["xyz"], "count": 3, "dtype": "<i4"}],
     "properties": {"names": ["p"], "count": 1, "dtype": "<i4"},
     "gradients": {
       "positions": {"dtype": "<f8", "shape": [1, 3, 1],
                     "samples": {"names": ["sample", "atom"], "count": 1, "dtype": "<i4"},
                     "components": [{"names": ["xyz"], "count": 3, "dtype": "<i4"}]}}},
    {"dtype": "<f8", "shape": [1, 3, 1],
     "samples": {"names": ["structure"], "count": 1, "dtype": "<i4"},
     "components": [{"names": ["xyz"], "count": 3, "dtype": "<i4"}],
     "properties": {"names": ["p"], "count": 1, "dtype": "<i4"},
     "gradients": {
       "positions": {"dtype": "<f8", "shape": [0, 3, 1],
                     "samples": {"names": ["sample", "atom"], "count": 0, "dtype": "<i4"},
                     "components": [{"names": ["xyz"], "count": 3, "dtype": "<i4"}]}}}
  ],
  "info": {"origin": "by hand"}
}"""

# the element type of each buffer of LITERAL_TENSOR_HEADER, in order
LITERAL_TENSOR_DTYPES = [
    *["<i4"],  # keys
    *["<f8", "<i4", "<i4", "<i4"],  # block 0
    *["<f8", "<i4", "<i4"],  # block 0, gradient
    *["<f8", "<i4", "<i4", "<i4"],  # block 1
    *["<f8", "<i4", "<i4"],  # block 1, gradient
]


def _le(values, dtype):
    return np.asarray(values, dtype=dtype).tobytes()


def _literal_tensor_buffers():
    return [
        _le([3, 8], "<i4"),
        # block 0
        _le(np.arange(6.0), "<f8"),
        _le([0, 1], "<i4"),
        _le([0, 1, 2], "<i4"),
        _le([5], "<i4"),
        # block 0, gradient "positions"
        _le([-1.0, -2.0, -3.0], "<f8"),
        _le([1, 4], "<i4"),
        _le([0, 1, 2], "<i4"),
        # block 1
        _le([10.0, 11.0, 12.0], "<f8"),
        _le([7], "<i4"),
        _le([0, 1, 2], "<i4"),
        _le([5], "<i4"),
        # block 1, gradient "positions" (no samples)
        b"",
        b"",
        _le([0, 1, 2], "<i4"),
    ]


def _literal_tensor_expected():
    xyz = Labels.range("xyz", 3)
    first = TensorBlock(
        np.arange(6.0).reshape(2, 3, 1), labels("structure", [0, 1]), [xyz], labels("p", [5])
    )
    first.add_gradient(
        "positions",
        TensorBlock(
            np.array([-1.0, -2.0, -3.0]).reshape(1, 3, 1),
            labels(["sample", "atom"], [[1, 4]]),
            [xyz],
            first.properties,
        ),
    )
    second = TensorBlock(
        np.array([10.0, 11.0, 12.0]).reshape(1, 3, 1),
        labels("structure", [7]),
        [xyz],
        labels("p", [5]),
    )
    second.add_gradient(
        "positions",
        TensorBlock(np.zeros((0, 3, 1)), Labels.empty(["sample", "atom"]), [xyz], labels("p", [5])),
    )
    tensor = TensorMap(labels("k", [3, 8]), [first, second])
    tensor.set_info("origin", "by hand")
    return tensor


def test_version_1_wire_format_by_hand():
    loaded = _reconstruct(1, LITERAL_TENSOR_HEADER, *_literal_tensor_buffers())
    assert_identical(loaded, _literal_tensor_expected())
    # the same header, read as version 3 (which may refer, and need not)
    loaded = _reconstruct(3, LITERAL_TENSOR_HEADER, *_literal_tensor_buffers())
    assert_identical(loaded, _literal_tensor_expected())


# The map of LITERAL_TENSOR_HEADER in version 3: labels equal to labels
# before them (up to 4 KiB) are the index of the first one's buffer, and
# have no buffer of their own.
LITERAL_TENSOR_HEADER_V3 = b"""{
  "kind": "tensor",
  "keys": {"names": ["k"], "count": 2, "dtype": "<i4"},
  "blocks": [
    {"dtype": "<f8", "shape": [2, 3, 1],
     "samples": {"names": ["structure"], "count": 2, "dtype": "<i4"},
     "components": [{"names": ["xyz"], "count": 3, "dtype": "<i4"}],
     "properties": {"names": ["p"], "count": 1, "dtype": "<i4"},
     "gradients": {
       "positions": {"dtype": "<f8", "shape": [1, 3, 1],
                     "samples": {"names": ["sample", "atom"], "count": 1, "dtype": "<i4"},
                     "components": [3]}}},
    {"dtype": "<f8", "shape": [1, 3, 1],
     "samples": {"names": ["structure"], "count": 1, "dtype": "<i4"},
     "components": [3],
     "properties": 4,
     "gradients": {
       "positions": {"dtype": "<f8", "shape": [0, 3, 1],
                     "samples": {"names": ["sample", "atom"], "count": 0, "dtype": "<i4"},
                     "components": [3]}}}
  ],
  "info": {"origin": "by hand"}
}"""


def test_version_3_wire_format_by_hand():
    buffers = _literal_tensor_buffers()
    # no buffer for the labels referred to: the gradients' and block 1's
    # components, block 1's properties
    del buffers[14], buffers[11], buffers[10], buffers[7]
    expected = _literal_tensor_expected()
    loaded = _reconstruct(3, LITERAL_TENSOR_HEADER_V3, *buffers)
    assert_identical(loaded, expected)
    # equal labels are received once, shared
    assert loaded.block(1).properties == loaded.block(0).properties
    # and what this version writes is that header
    header, written = _reduce_5(expected)
    assert json.loads(header) == json.loads(LITERAL_TENSOR_HEADER_V3)
    assert [bytes(b.raw()) for b in written] == buffers
    # version 1 has no references
    with pytest.raises(blockmap.FormatError, match="version 3"):
        _reconstruct(1, LITERAL_TENSOR_HEADER_V3, *buffers)


def test_version_1_block_and_labels_by_hand():
    header = b"""{"kind": "block",
      "block": {"dtype": "<i2", "shape": [2, 2],
                "samples": {"names": ["s"], "count": 2, "dtype": "<i4"},
                "components": [],
                "properties": {"names": ["p"], "count": 2, "dtype": "<i4"}}}"""
    buffers = [_le([[1, -2], [3, 400]], "<i2"), _le([0, 1], "<i4"), _le([0, 1], "<i4")]
    block = _reconstruct(1, header, *buffers)
    expected = TensorBlock(
        np.array([[1, -2], [3, 400]], dtype=np.int16),
        Labels.range("s", 2),
        [],
        Labels.range("p", 2),
    )
    assert_identical(block, expected)
    header = b'{"kind": "labels", "labels": {"names": ["a", "b"], "count": 2, "dtype": "<i4"}}'
    loaded = _reconstruct(1, header, _le([[1, 2], [-3, 4]], "<i4"))
    assert_identical(loaded, labels(["a", "b"], [[1, 2], [-3, 4]]))


def test_version_1_big_endian_buffers_are_swapped():
    header = LITERAL_TENSOR_HEADER.replace(b"<", b">")
    buffers = [
        np.frombuffer(buffer, dtype=dtype).astype(dtype.replace("<", ">")).tobytes()
        for buffer, dtype in zip(_literal_tensor_buffers(), LITERAL_TENSOR_DTYPES, strict=True)
    ]
    assert buffers[1] != _literal_tensor_buffers()[1]
    loaded = _reconstruct(1, header, *buffers)
    assert_identical(loaded, _literal_tensor_expected())


# ----------------------------------------------------------- multiprocessing


def test_multiprocessing_spawn_round_trip(rng):
    tensor = make_map(rng, info=INFO)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        returned = pool.apply(identity, (tensor,))
    assert_identical(returned, tensor)
    _assert_no_shared_memory(returned, tensor)


if __name__ == "__main__":
    write_stored_pickles()


@pytest.mark.parametrize("kind", sorted(STORED_PIECES))
def test_stored_pickles_in_pieces_still_load(kind):
    data = (DATA / STORED_PIECES[kind]).read_bytes()
    expected = STORED[kind]()
    unpickler = _RecordingUnpickler(__import__("io").BytesIO(data))
    assert_identical(unpickler.load(), expected)
    ((version, stored_kind, *pieces),) = unpickler.calls
    assert (version, stored_kind) == (2, kind)
    assert len(pieces) > 2


def test_protocol_4_loads_are_writable_and_independent(rng):
    """The archive comes back as a new ``bytes`` object; like numpy, blockmap
    views it and keeps the values writable: the copy is the unpickler's."""
    tensor = _kinds(rng)["tensor"]
    loaded = pickle.loads(pickle.dumps(tensor, protocol=4))
    values = loaded.block(0).values
    assert values.flags.writeable
    before = tensor.block(0).values.copy()
    values[...] = 7
    np.testing.assert_array_equal(tensor.block(0).values, before)
    assert (loaded.block(0).values == 7).all()


@pytest.mark.parametrize("name", sorted(FLIPPED_V0))
def test_version_0_payloads_are_not_checksummed(name):
    """A pickle, like numpy's, carries no checksum: a version 0 archive with a
    changed payload byte loads (CRCs are not checked, see docs/pickle.md), and
    the change shows in the data; the structure is still checked."""
    case, _ = FLIPPED_V0[name]
    loaded = case()
    original = crafted_map() if name == "keys" else crafted_map().block_by_id(1)
    assert type(loaded) is type(original)
    assert loaded != original
