"""Protocols < 5 carry a map's archive in pieces (docs/pickle.md, version 2).

The pieces are set small here (a few kB) so that small maps need many of them.
Checked: round trips at every protocol below 5; every array lies whole in one
piece and the unpickled map views the pieces (addresses); pieces start at
64-byte multiples of the archive; a map that fits in one piece is still
version 0; pieces given as any buffer, split anywhere (entries across pieces
are copied), or broken, load or raise blockmap's errors.
"""

import pickle
import random

import numpy as np
import pytest

import blockmap
from blockmap._blockmap import _reconstruct, _set_pickle_piece_size
from helpers.io_cases import INFO, assert_identical, make_map

PIECE = 4096


@pytest.fixture
def small_pieces():
    previous = _set_pickle_piece_size(PIECE)
    yield PIECE
    _set_pickle_piece_size(previous)


def _map(rng):
    # gradients, components, several blocks of a few kB each: dozens of pieces
    return make_map(rng, info=INFO)


def _unpickled_pieces(tensor, protocol=4):
    """The reconstructor's arguments as the unpickler makes them."""
    _, args = tensor.__reduce_ex__(protocol)
    return pickle.loads(pickle.dumps(args, protocol=protocol))


def _arrays(tensor):
    for block in tensor:
        yield block.values
        for parameter in block.gradients_list():
            yield block.gradient(parameter).values


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4])
def test_round_trip_in_pieces(rng, small_pieces, protocol):
    tensor = _map(rng)
    version, kind, *pieces = tensor.__reduce_ex__(protocol)[1]
    assert (version, kind) == (2, "tensor")
    assert len(pieces) > 3
    assert all(type(piece) is bytes for piece in pieces)
    assert_identical(pickle.loads(pickle.dumps(tensor, protocol=protocol)), tensor)


def test_block_round_trip_in_pieces(rng, small_pieces):
    block = _map(rng).block(0)
    version, kind, *pieces = block.__reduce_ex__(4)[1]
    assert (version, kind) == (2, "block")
    assert len(pieces) > 1
    assert_identical(pickle.loads(pickle.dumps(block, protocol=4)), block)


def test_arrays_view_the_piece_that_holds_them(rng, small_pieces):
    tensor = _map(rng)
    version, kind, *pieces = _unpickled_pieces(tensor)
    loaded = _reconstruct(version, kind, *pieces)
    assert_identical(loaded, tensor)
    memories = [np.frombuffer(piece, np.uint8) for piece in pieces]
    arrays = [array for array in _arrays(loaded) if array.nbytes > 0]
    assert arrays
    for array in arrays:
        holders = [i for i, memory in enumerate(memories) if np.shares_memory(array, memory)]
        assert len(holders) == 1, "every array is a view of exactly one piece"
        memory = memories[holders[0]]
        start = array.ctypes.data - memory.ctypes.data
        assert 0 <= start and start + array.nbytes <= memory.nbytes
        # writable, as numpy's own unpickled arrays are
        assert array.flags.writeable


def test_pieces_start_at_aligned_offsets_and_hold_whole_arrays(rng, small_pieces):
    tensor = _map(rng)
    pieces = tensor.__reduce_ex__(4)[1][2:]
    # every piece but the last ends where the next starts, a 64-byte multiple
    assert all(len(piece) % 64 == 0 for piece in pieces[:-1])
    archive = b"".join(pieces)
    # the pieces joined are the same archive as a save
    loaded = blockmap.load_buffer(archive)
    assert_identical(loaded, tensor)


def test_a_map_larger_than_a_piece_keeps_it_whole(rng, small_pieces):
    values = rng.random((40, 3, 30))  # 28.8 kB, larger than a piece
    block = blockmap.TensorBlock(
        values,
        blockmap.Labels.range("sample", 40),
        [blockmap.Labels.range("component", 3)],
        blockmap.Labels.range("property", 30),
    )
    tensor = blockmap.TensorMap(blockmap.Labels.range("key", 1), [block])
    version, kind, *pieces = _unpickled_pieces(tensor)
    assert version == 2
    assert max(len(piece) for piece in pieces) >= values.nbytes
    loaded = _reconstruct(version, kind, *pieces)
    assert any(
        np.shares_memory(loaded.block(0).values, np.frombuffer(piece, np.uint8)) for piece in pieces
    )
    np.testing.assert_array_equal(loaded.block(0).values, values)


def test_maps_in_one_piece_and_labels_stay_version_0(rng):
    tensor = _map(rng)
    assert tensor.__reduce_ex__(4)[1][0] == 0
    assert tensor.keys.__reduce_ex__(4)[1][0] == 0
    previous = _set_pickle_piece_size(64)
    try:
        assert tensor.keys.__reduce_ex__(4)[1][0] == 0
    finally:
        _set_pickle_piece_size(previous)


def test_the_piece_size_is_checked():
    with pytest.raises(ValueError, match="at least 1"):
        _set_pickle_piece_size(0)
    with pytest.raises(OverflowError):
        _set_pickle_piece_size(-1)


def _odd(piece):
    """``piece`` at an odd address: misaligned for every element type."""
    memory = bytearray(len(piece) + 1)
    memory[1:] = piece
    return memoryview(memory)[1:]


def test_pieces_as_any_buffer(rng, small_pieces):
    tensor = _map(rng)
    version, kind, *pieces = _unpickled_pieces(tensor)
    for convert in (bytearray, memoryview, lambda p: memoryview(p).toreadonly(), _odd):
        loaded = _reconstruct(version, kind, *[convert(piece) for piece in pieces])
        assert_identical(loaded, tensor)


def test_an_archive_split_anywhere_loads(rng):
    """Pieces cut at arbitrary points, across headers and arrays: what lies
    across two pieces is copied, the rest viewed."""
    tensor = _map(rng)
    version, kind, archive = tensor.__reduce_ex__(4)[1]
    assert version == 0
    generator = random.Random(7)
    for _ in range(30):
        cuts = sorted(generator.sample(range(1, len(archive)), generator.randint(1, 40)))
        pieces = [archive[a:b] for a, b in zip([0, *cuts], [*cuts, len(archive)], strict=True)]
        assert_identical(_reconstruct(2, kind, *pieces), tensor)
    # empty pieces are nothing
    assert_identical(_reconstruct(2, kind, b"", archive, b""), tensor)


def _broken_cases(pieces):
    yield "no pieces", ()
    yield "first piece missing", pieces[1:]
    yield "last piece missing", pieces[:-1]
    yield "a middle piece missing", pieces[:2] + pieces[3:]
    yield "two pieces swapped", [pieces[1], pieces[0], *pieces[2:]]
    yield "pieces reversed", pieces[::-1]
    yield "a piece doubled", [pieces[0], *pieces]
    for index in (0, len(pieces) // 2, len(pieces) - 1):
        flipped = bytearray(pieces[index])
        flipped[len(flipped) // 2] ^= 0xFF
        yield f"piece {index} flipped", [*pieces[:index], flipped, *pieces[index + 1 :]]
        yield (
            f"piece {index} truncated",
            [
                *pieces[:index],
                pieces[index][: len(pieces[index]) // 2],
                *pieces[index + 1 :],
            ],
        )


def test_broken_pieces_raise_blockmap_errors(rng, small_pieces):
    tensor = _map(rng)
    _, kind, *pieces = _unpickled_pieces(tensor)
    for name, broken in _broken_cases(pieces):
        try:
            loaded = _reconstruct(2, kind, *broken)
        except blockmap.BlockMapError as error:
            assert isinstance(error, ValueError), name
            assert str(error), name
        else:
            if name == "a piece doubled":
                # bytes before an archive are skipped by zip readers (the
                # offsets are found from the end): the same map
                assert_identical(loaded, tensor)
                continue
            # a flipped byte in array data changes only that value; nothing
            # else may load as if nothing happened
            assert "flipped" in name, f"{name}: loaded"
            assert loaded.keys == tensor.keys


def test_crafted_version_2_arguments(rng, small_pieces):
    tensor = _map(rng)
    _, kind, *pieces = _unpickled_pieces(tensor)
    with pytest.raises(blockmap.FormatError, match="no arguments"):
        _reconstruct(2)
    with pytest.raises(blockmap.FormatError, match="must be a string"):
        _reconstruct(2, 3, *pieces)
    with pytest.raises(blockmap.FormatError, match="unknown|kind"):
        _reconstruct(2, "matrix", *pieces)
    with pytest.raises(blockmap.FormatError, match="never an archive in pieces"):
        _reconstruct(2, "labels", *pieces)
    with pytest.raises(TypeError):
        _reconstruct(2, kind, *pieces[:-1], 3)
    with pytest.raises(blockmap.FormatError, match="version 4"):
        _reconstruct(4, kind, *pieces)
