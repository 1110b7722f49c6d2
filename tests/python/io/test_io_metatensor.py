"""Files flow both ways between blockmap and the real metatensor-core 0.2.6.

Each case runs in both directions: blockmap writes and metatensor reads (with
its native reader and with ``use_numpy=True``), and metatensor writes (native
and ``use_numpy=True``) and blockmap reads (from a path, a mapping and a
buffer). Objects are compared field by field: names, labels values, shapes,
dtypes, values bytes, gradients (two deep) and info.
"""

import io
import zipfile

import numpy as np
import pytest

import blockmap
from blockmap import Labels, TensorBlock, TensorMap
from helpers.dtypes import ALL_DTYPES, dtype_id
from helpers.io_cases import (
    BLOCK_CASES,
    INFO,
    LABELS_CASES,
    MAP_CASES,
    all_blocks,
    archive_entries,
    assert_matches_metatensor,
    block_with_gradients,
    expected_entry_names,
    make_map,
    to_metatensor,
    without_empty_info,
)

metatensor = pytest.importorskip("metatensor")

WRITERS = {"native": False, "use_numpy": True}


def test_reference_is_metatensor_core_0_2_6():
    assert metatensor.__version__ == "0.2.6"


# ------------------------------------------------------------ the conversion


def test_conversion_to_metatensor_is_faithful(rng):
    # the helpers the other tests rely on: a converted map matches, a changed one does not
    tensor = make_map(rng, info=INFO)
    theirs = to_metatensor(tensor)
    assert_matches_metatensor(tensor, theirs)
    other = to_metatensor(make_map(rng, info=INFO))
    with pytest.raises(AssertionError):
        assert_matches_metatensor(tensor, other)
    nested = theirs.block(0).gradient("positions")
    assert sorted(nested.gradients_list()) == ["cell", "strain"]


# ------------------------------------------ blockmap writes, metatensor reads


def _metatensor_reads(path, kind, use_numpy):
    if kind == "tensor":
        return metatensor.load(path, use_numpy=use_numpy)
    if kind == "block":
        return metatensor.load_block(path, use_numpy=use_numpy)
    return metatensor.load_labels(path)


@pytest.mark.parametrize("reader", WRITERS)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_metatensor_reads_blockmap_every_dtype(tmp_path, rng, dtype, reader):
    tensor = make_map(rng, dtype, info=INFO)
    path = tmp_path / "data.mts"
    blockmap.save(path, tensor)
    theirs = metatensor.load(str(path), use_numpy=WRITERS[reader])
    assert_matches_metatensor(tensor, theirs)
    for (_, ours), theirs_block in zip(all_blocks(tensor)[:1], [theirs.block(0)], strict=True):
        assert np.asarray(theirs_block.values).dtype == np.dtype(dtype)
        assert ours.values.dtype == np.dtype(dtype)


@pytest.mark.parametrize("reader", WRITERS)
@pytest.mark.parametrize("case", MAP_CASES)
def test_metatensor_reads_blockmap_map_cases(tmp_path, rng, case, reader):
    tensor = MAP_CASES[case](rng, np.float64)
    path = tmp_path / "data.mts"
    blockmap.save(path, tensor)
    assert_matches_metatensor(tensor, metatensor.load(path, use_numpy=WRITERS[reader]))


@pytest.mark.parametrize("case", MAP_CASES)
def test_metatensor_reads_blockmap_buffers(rng, case):
    tensor = MAP_CASES[case](rng, np.float32)
    raw = bytes(blockmap.save_buffer(tensor))
    assert_matches_metatensor(tensor, metatensor.io.load_buffer(raw))
    assert_matches_metatensor(tensor, metatensor.load(io.BytesIO(raw)))
    stream = io.BytesIO()
    blockmap.save(stream, tensor)
    assert_matches_metatensor(tensor, metatensor.io.load_buffer(stream.getvalue()))


@pytest.mark.parametrize("reader", WRITERS)
@pytest.mark.parametrize("case", BLOCK_CASES)
def test_metatensor_reads_blockmap_blocks(tmp_path, rng, case, reader):
    block = BLOCK_CASES[case](rng, np.float64)
    path = tmp_path / "block.mts"
    blockmap.save(path, block)
    assert_matches_metatensor(block, metatensor.load_block(path, use_numpy=WRITERS[reader]))
    raw = bytes(blockmap.save_buffer(block))
    assert_matches_metatensor(block, metatensor.io.load_block_buffer(raw))


@pytest.mark.parametrize("reader", WRITERS)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_metatensor_reads_blockmap_blocks_every_dtype(tmp_path, rng, dtype, reader):
    block = block_with_gradients(rng, dtype)
    path = tmp_path / "block.mts"
    block.save(path)
    assert_matches_metatensor(block, metatensor.load_block(path, use_numpy=WRITERS[reader]))


@pytest.mark.parametrize("case", LABELS_CASES)
def test_metatensor_reads_blockmap_labels(tmp_path, case):
    original = LABELS_CASES[case]()
    path = tmp_path / "labels.mts"
    blockmap.save(path, original)
    assert_matches_metatensor(original, metatensor.load_labels(path))
    raw = bytes(blockmap.save_buffer(original))
    assert_matches_metatensor(original, metatensor.io.load_labels_buffer(raw))


def test_metatensor_reads_blockmap_files_saved_without_extension(tmp_path, rng):
    tensor = make_map(rng)
    with pytest.warns(UserWarning, match="adding '.mts' extension"):
        blockmap.save(tmp_path / "data", tensor)
    assert_matches_metatensor(tensor, metatensor.load(tmp_path / "data.mts"))


# ------------------------------------------ metatensor writes, blockmap reads


def _blockmap_reads(path, kind):
    """Everything blockmap loads from ``path``: read, mapped, from bytes."""
    if kind == "labels":
        return [
            blockmap.load_labels(path),
            blockmap.load_labels_buffer(path.read_bytes()),
            Labels.load(path),
        ]
    if kind == "block":
        return [
            blockmap.load_block(path),
            blockmap.load_block(path, mmap=True),
            blockmap.load_block_buffer(path.read_bytes()),
            TensorBlock.load_buffer(bytearray(path.read_bytes())),
        ]
    return [
        blockmap.load(path),
        blockmap.load(path, mmap=True),
        blockmap.load_buffer(path.read_bytes()),
        TensorMap.load_buffer(bytearray(path.read_bytes())),
    ]


def _metatensor_can_write(tensor, writer):
    """``tensor`` as metatensor can write it with ``writer``: without its empty
    info values when it writes with numpy."""
    return without_empty_info(tensor) if WRITERS[writer] else tensor


def _check_blockmap_reads(path, kind, expected, theirs):
    for loaded in _blockmap_reads(path, kind):
        assert loaded == expected
        assert_matches_metatensor(loaded, theirs)
        if kind != "labels":
            for name, block in all_blocks(loaded):
                assert block.values.flags.aligned, name
                assert block.values.dtype.isnative, name
    if kind == "tensor":
        blockmap.verify(path)


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_blockmap_reads_metatensor_every_dtype(tmp_path, rng, dtype, writer):
    tensor = _metatensor_can_write(make_map(rng, dtype, info=INFO), writer)
    theirs = to_metatensor(tensor)
    path = tmp_path / "data.mts"
    metatensor.save(path, theirs, use_numpy=WRITERS[writer])
    _check_blockmap_reads(path, "tensor", tensor, theirs)


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("case", MAP_CASES)
def test_blockmap_reads_metatensor_map_cases(tmp_path, rng, case, writer):
    tensor = _metatensor_can_write(MAP_CASES[case](rng, np.float64), writer)
    theirs = to_metatensor(tensor)
    path = tmp_path / "data.mts"
    metatensor.save(str(path), theirs, use_numpy=WRITERS[writer])
    if case == "info":
        assert len(tensor.info()) >= 4
    _check_blockmap_reads(path, "tensor", tensor, theirs)


@pytest.mark.parametrize("case", MAP_CASES)
def test_blockmap_reads_metatensor_buffers(rng, case):
    tensor = MAP_CASES[case](rng, np.complex64)
    theirs = to_metatensor(tensor)
    raw = bytes(theirs.save_buffer())
    assert blockmap.load_buffer(raw) == tensor
    stream = io.BytesIO()
    metatensor.save(stream, theirs)
    stream.seek(0)
    assert blockmap.load(stream) == tensor


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("case", BLOCK_CASES)
def test_blockmap_reads_metatensor_blocks(tmp_path, rng, case, writer):
    block = BLOCK_CASES[case](rng, np.float64)
    theirs = to_metatensor(block)
    path = tmp_path / "block.mts"
    metatensor.save(path, theirs, use_numpy=WRITERS[writer])
    _check_blockmap_reads(path, "block", block, theirs)


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_blockmap_reads_metatensor_blocks_every_dtype(tmp_path, rng, dtype, writer):
    block = block_with_gradients(rng, dtype)
    theirs = to_metatensor(block)
    path = tmp_path / "block.mts"
    metatensor.save(path, theirs, use_numpy=WRITERS[writer])
    _check_blockmap_reads(path, "block", block, theirs)


@pytest.mark.parametrize("case", LABELS_CASES)
def test_blockmap_reads_metatensor_labels(tmp_path, case):
    original = LABELS_CASES[case]()
    theirs = to_metatensor(original)
    path = tmp_path / "labels.mts"
    metatensor.save(path, theirs)
    _check_blockmap_reads(path, "labels", original, theirs)
    assert blockmap.load_labels_buffer(bytes(theirs.save_buffer())) == original


def test_metatensor_numpy_writer_turns_empty_info_into_null(tmp_path, rng):
    # metatensor-core 0.2.6 returns None for an info value "", and its numpy
    # writer stores that as null; its native reader rejects the file, and so
    # does blockmap, with a FormatError naming info.json
    tensor = make_map(rng, info={"empty": "", "model": "soap"})
    path = tmp_path / "data.mts"
    metatensor.save(path, to_metatensor(tensor), use_numpy=True)
    with zipfile.ZipFile(path) as archive:
        assert b'"empty": null' in archive.read("info.json")
    with pytest.raises(metatensor.MetatensorError):
        metatensor.load(path)
    for load in (blockmap.load, blockmap.verify):
        with pytest.raises(blockmap.FormatError, match="info.json"):
            load(path)
    # with the native writer, "" stays ""
    metatensor.save(path, to_metatensor(tensor))
    assert blockmap.load(path) == tensor


def test_blockmap_reads_metatensor_labels_without_dimensions(tmp_path):
    # metatensor-core writes Labels with no dimension but cannot read them back
    theirs = metatensor.Labels([], np.zeros((0, 0), dtype=np.int32))
    path = tmp_path / "labels.mts"
    metatensor.save(path, theirs)
    assert path.read_bytes()[:6] == b"\x93NUMPY"
    loaded = blockmap.load_labels(path)
    assert loaded.names == []
    assert len(loaded) == 0
    assert loaded.values.shape == (0, 0)
    assert loaded == Labels([], np.zeros((0, 0), dtype=np.int32))
    # blockmap reads back what it writes for them, and numpy reads it too
    ours = tmp_path / "ours.mts"
    blockmap.save(ours, loaded)
    assert blockmap.load_labels(ours) == loaded
    array = np.load(ours)
    assert array.shape == (0,)
    assert array.dtype.names == ()


# ------------------------------------------------------ the same archives


def _entries(raw):
    """``{name: decoded entry}`` of an archive, in order."""
    result = {}
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        for name in archive.namelist():
            if name.endswith(".npy"):
                with archive.open(name) as f:
                    result[name] = np.lib.format.read_array(f, allow_pickle=False)
            else:
                result[name] = archive.read(name)
    return result


def _assert_same_entries(ours_raw, theirs_raw):
    ours, theirs = _entries(ours_raw), _entries(theirs_raw)
    assert list(ours) == list(theirs)
    for name, value in ours.items():
        if isinstance(value, bytes):
            assert value == theirs[name], name
            continue
        assert value.dtype == theirs[name].dtype, name
        assert value.shape == theirs[name].shape, name
        assert value.tobytes() == theirs[name].tobytes(), name


@pytest.mark.parametrize("case", MAP_CASES)
def test_same_entries_as_metatensor(rng, case):
    tensor = MAP_CASES[case](rng, np.float64)
    ours = bytes(blockmap.save_buffer(tensor))
    theirs = bytes(to_metatensor(tensor).save_buffer())
    _assert_same_entries(ours, theirs)
    with zipfile.ZipFile(io.BytesIO(theirs)) as archive:
        assert archive.namelist() == expected_entry_names(tensor)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_same_entries_as_metatensor_every_dtype(rng, dtype):
    tensor = make_map(rng, dtype, info=INFO)
    _assert_same_entries(
        bytes(blockmap.save_buffer(tensor)), bytes(to_metatensor(tensor).save_buffer())
    )
    block = block_with_gradients(rng, dtype)
    _assert_same_entries(
        bytes(blockmap.save_buffer(block)), bytes(to_metatensor(block).save_buffer())
    )


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.bool_], ids=dtype_id)
def test_one_byte_types_are_written_as_metatensor_accepts(rng, dtype):
    # numpy writes "|i1"; metatensor-core's reader rejects "|"
    block = block_with_gradients(rng, dtype)
    raw = bytes(blockmap.save_buffer(block))
    headers = [e.npy_header for e in archive_entries(raw) if e.name.endswith("values.npy")]
    assert len(headers) == 5
    for header in headers:
        assert "'|" not in header
        code = np.dtype(dtype).str[1:]
        assert f"'<{code}'" in header or f"'={code}'" in header
    assert_matches_metatensor(block, metatensor.io.load_block_buffer(raw))


def test_metatensor_files_are_not_aligned_but_load(tmp_path, rng):
    # metatensor's payloads start anywhere; blockmap copies them even when mapped
    tensor = make_map(rng, np.float64, n_samples=(5, 6, 7))
    path = tmp_path / "data.mts"
    metatensor.save(path, to_metatensor(tensor))
    payloads = [e.payload_start for e in archive_entries(path.read_bytes()) if e.payload_start]
    assert any(offset % 8 for offset in payloads)
    mapped = blockmap.load(path, mmap=True)
    assert mapped == tensor
    for name, block in all_blocks(mapped):
        assert block.values.flags.aligned, name
