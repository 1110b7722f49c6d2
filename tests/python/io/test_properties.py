"""Property tests: every way a map leaves and comes back gives an equal map.

Random valid maps (helpers/strategies.py: every element type, 0 to 3
components, blocks without samples, maps without blocks, gradients of
gradients, odd label names, info) go through files (read and mapped),
buffers, pickle (protocols 0 to 5 in-band and 5 out-of-band), copy and
deepcopy, and metatensor-core's reader and writer; what comes back is
compared with ``==`` and field by field (``assert_identical``). Blocks (a
gradient block on its own too) and Labels take the same paths.

Deterministic: examples are derandomized (strategies.SETTINGS);
``BLOCKMAP_PROPERTY_EXAMPLES=2000`` searches longer, at random.
"""

import copy
import io
import pickle

import numpy as np
import pytest

import blockmap
from blockmap import Labels, TensorBlock, TensorMap
from helpers.dtypes import ALL_DTYPES, dtype_id
from helpers.io_cases import (
    all_blocks,
    assert_identical,
    assert_matches_metatensor,
    to_metatensor,
    without_empty_info,
)

metatensor = pytest.importorskip("metatensor")
pytest.importorskip("hypothesis")

from hypothesis import given, note  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from helpers.strategies import (  # noqa: E402
    SETTINGS,
    labels_objects,
    scaled,
    tensor_blocks,
    tensor_maps,
)

# "5-oob": protocol 5 with a buffer_callback (out-of-band buffers)
PICKLE_MODES = ["0", "1", "2", "3", "4", "5", "5-oob"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    # module scoped: hypothesis runs many examples per test function; each
    # example saves over the same files (a save replaces the file by a rename,
    # so maps still mapping the previous file keep their data)
    return tmp_path_factory.mktemp("properties")


def _describe(data):
    if isinstance(data, TensorMap):
        blocks = [(name, b.values.dtype.str, b.values.shape) for name, b in all_blocks(data)]
        note(f"map: keys {data.keys.names} x {len(data)}, info {data.info()!r}, blocks {blocks}")
    elif isinstance(data, TensorBlock):
        blocks = [(name, b.values.dtype.str, b.values.shape) for name, b in all_blocks(data)]
        note(f"block: {blocks}")
    else:
        note(f"labels: {data.names} x {len(data)}")


def _pickle_round_trip(data, mode):
    if mode == "5-oob":
        buffers = []
        stream = pickle.dumps(data, protocol=5, buffer_callback=buffers.append)
        return pickle.loads(stream, buffers=buffers)
    return pickle.loads(pickle.dumps(data, protocol=int(mode)))


def _assert_values_not_shared(copied, data):
    if isinstance(data, Labels):
        return
    for (name, ours), (_, theirs) in zip(all_blocks(copied), all_blocks(data), strict=True):
        if ours.values.size:
            assert not np.shares_memory(ours.values, theirs.values), name


def _readable_by_metatensor(data):
    """Whether metatensor-core could read ``data``'s file: no component
    without entries, no NUL in info (blockmap refuses to save the others)."""
    if any(0 in block.values.shape[1:-1] for _, block in all_blocks(data)):
        return False
    info = data.info() if isinstance(data, TensorMap) else {}
    return not any("\x00" in key + value for key, value in info.items())


def _check_every_path(data, workdir):
    """``data`` (a map or a block) saved and loaded from a file (read and
    mapped), a buffer and a file object, pickled with every protocol, copied
    and deep-copied: each gives ``data`` back. Data whose file metatensor-core
    could not read is refused by every save, and still pickles and copies."""
    is_map = isinstance(data, TensorMap)
    load, load_buffer = (
        (blockmap.load, blockmap.load_buffer)
        if is_map
        else (blockmap.load_block, blockmap.load_block_buffer)
    )
    cls = type(data)

    if _readable_by_metatensor(data):
        _check_files(data, workdir, load, load_buffer, cls, is_map)
    else:
        note("path: saves refused")
        for save in (
            lambda: blockmap.save(workdir / "refused.mts", data),
            lambda: blockmap.save(io.BytesIO(), data),
            lambda: blockmap.save_buffer(data),
        ):
            with pytest.raises(blockmap.ValidationError, match="cannot save"):
                save()
        assert not (workdir / "refused.mts").exists()

    for mode in PICKLE_MODES:
        note(f"path: pickle {mode}")
        assert_identical(_pickle_round_trip(data, mode), data)

    note("path: copies")
    assert_identical(copy.copy(data), data)
    deep = copy.deepcopy(data)
    assert_identical(deep, data)
    _assert_values_not_shared(deep, data)
    assert_identical(data.copy(), data)


def _check_files(data, workdir, load, load_buffer, cls, is_map):
    note("path: file")
    path = workdir / "data.mts"
    blockmap.save(path, data)
    assert_identical(load(path), data)
    assert_identical(cls.load(path), data)
    if is_map:
        blockmap.verify(path)

    note("path: mapped file")
    mapped = load(path, mmap=True)
    assert_identical(mapped, data)
    # the mapping is private: writing to the mapped values leaves the file as is
    for _, block in all_blocks(mapped):
        if block.values.size and block.values.flags.writeable:
            block.values.reshape(-1)[0] = block.values.reshape(-1)[-1]
    assert_identical(load(path), data)

    note("path: buffer")
    raw = blockmap.save_buffer(data)
    assert_identical(load_buffer(raw), data)
    assert_identical(load_buffer(bytes(raw)), data)
    assert_identical(cls.load_buffer(bytearray(raw)), data)
    assert path.read_bytes() == bytes(raw)

    note("path: file object")
    stream = io.BytesIO()
    blockmap.save(stream, data)
    assert stream.getvalue() == bytes(raw)
    stream.seek(0)
    assert_identical(load(stream), data)


# ------------------------------------------------------------------ maps

# one run per element type, so that each goes every way (a strategy drawing
# the type would not reach all 14 in the examples hypothesis runs)
PER_DTYPE = scaled(SETTINGS, 1 / 6)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@PER_DTYPE
@given(data=st.data())
def test_map_every_path(workdir, dtype, data):
    tensor = data.draw(tensor_maps(dtype), label="tensor")
    _describe(tensor)
    _check_every_path(tensor, workdir)


@SETTINGS
@given(tensor=tensor_maps())
def test_map_every_path_any_dtypes(workdir, tensor):
    """The element type drawn (one per map: blocks of one map share it)."""
    _describe(tensor)
    _check_every_path(tensor, workdir)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@scaled(SETTINGS, 1 / 10)
@given(data=st.data())
def test_map_through_metatensor(workdir, dtype, data):
    """blockmap saves, metatensor-core loads and saves (natively or with
    numpy), blockmap loads."""
    tensor = data.draw(tensor_maps(dtype, for_metatensor=True), label="tensor")
    use_numpy = data.draw(st.booleans(), label="use_numpy")
    if use_numpy:
        tensor = without_empty_info(tensor)
    _describe(tensor)
    ours, theirs_path = workdir / "ours.mts", workdir / "theirs.mts"
    blockmap.save(ours, tensor)
    theirs = metatensor.load(ours, use_numpy=use_numpy)
    assert_matches_metatensor(tensor, theirs)
    metatensor.save(theirs_path, theirs, use_numpy=use_numpy)
    assert_identical(blockmap.load(theirs_path), tensor)
    assert_identical(blockmap.load(theirs_path, mmap=True), tensor)
    assert_identical(blockmap.load_buffer(theirs_path.read_bytes()), tensor)
    # and the same map converted in memory
    metatensor.save(theirs_path, to_metatensor(tensor))
    assert_identical(blockmap.load(theirs_path), tensor)


# ---------------------------------------------------------------- blocks


@st.composite
def _blocks_and_gradients(draw, dtype=None, for_metatensor=False):
    """A block, or (one time in three) a gradient block taken on its own."""
    block = draw(tensor_blocks(dtype, for_metatensor=for_metatensor))
    gradients = [b for name, b in all_blocks(block) if name != "block"]
    if gradients and draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(gradients))
    return block


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@scaled(SETTINGS, 1 / 10)
@given(data=st.data())
def test_block_every_path(workdir, dtype, data):
    block = data.draw(_blocks_and_gradients(dtype), label="block")
    _describe(block)
    _check_every_path(block, workdir)


@scaled(SETTINGS, 0.5)
@given(block=_blocks_and_gradients(for_metatensor=True))
def test_block_through_metatensor(workdir, block):
    _describe(block)
    ours, theirs_path = workdir / "block-ours.mts", workdir / "block-theirs.mts"
    blockmap.save(ours, block)
    theirs = metatensor.load_block(ours)
    assert_matches_metatensor(block, theirs)
    metatensor.save(theirs_path, theirs)
    assert_identical(blockmap.load_block(theirs_path), block)


# ---------------------------------------------------------------- labels


@SETTINGS
@given(labels=labels_objects())
def test_labels_every_path(workdir, labels):
    _describe(labels)
    path = workdir / "labels.mts"
    blockmap.save(path, labels)
    assert_identical(blockmap.load_labels(path), labels)
    assert_identical(blockmap.load_labels_buffer(blockmap.save_buffer(labels)), labels)
    for mode in PICKLE_MODES:
        loaded = _pickle_round_trip(labels, mode)
        assert_identical(loaded, labels)
        for i, entry in enumerate(labels):
            assert loaded.position(entry) == i
    assert_identical(copy.copy(labels), labels)
    assert_identical(copy.deepcopy(labels), labels)
    theirs = metatensor.load_labels(path)
    assert_matches_metatensor(labels, theirs)
    metatensor.save(path, theirs)
    assert_identical(blockmap.load_labels(path), labels)


# --------------------------------------------- the strategies reach every case


def _blocks(tensor):
    return [block for _, block in all_blocks(tensor)]


REACHED = {
    "a map without blocks": lambda t: len(t) == 0,
    "a block without samples": lambda t: any(len(b.samples) == 0 for b in t.blocks()),
    "3 components": lambda t: any(len(b.components) == 3 for b in t.blocks()),
    "a component without entries": lambda t: any(0 in b.values.shape[1:-1] for b in t.blocks()),
    "a gradient of a gradient": lambda t: any(
        g.gradients_list() for b in t.blocks() for _, g in b.gradients()
    ),
    "info": lambda t: len(t.info()) >= 2,
    "a gradient named after an archive entry": lambda t: any(
        set(b.gradients_list()) & {"values", "samples", "gradients", "components"}
        for b in _blocks(t)
    ),
    "a NaN": lambda t: any(
        b.values.dtype.kind in "fc" and np.isnan(b.values).any() for b in _blocks(t)
    ),
}


@pytest.fixture(scope="module")
def reached():
    """The REACHED cases found in as many examples of ``tensor_maps`` as
    test_map_every_path runs (for each element type)."""
    cases = set()

    for dtype in ALL_DTYPES:

        @PER_DTYPE
        @given(tensor=tensor_maps(dtype))
        def search(tensor):
            cases.update(case for case, holds in REACHED.items() if holds(tensor))

        search()
    return cases


@pytest.mark.parametrize("case", REACHED)
def test_strategies_reach(reached, case):
    assert case in reached
