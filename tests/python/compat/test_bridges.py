"""``blockmap.metatensor.from_metatensor`` and ``to_metatensor``: the same
objects in the other library, with every array shared (checked by address)
and the labels copied."""

import numpy as np
import pytest

import blockmap
from blockmap.metatensor import from_metatensor, to_metatensor
from helpers.io_cases import assert_matches_metatensor, make_map, zero_block_map
from helpers.memory import address_of

mts = pytest.importorskip("metatensor")


def _arrays(data):
    """Every values array of a block or map (either library), gradients
    included, depth first in a fixed order."""
    blocks = data.blocks() if hasattr(data, "keys") and not isinstance(data, dict) else [data]
    arrays = []

    def visit(block):
        arrays.append(block.values)
        for parameter in sorted(block.gradients_list()):
            visit(block.gradient(parameter))

    for block in blocks:
        visit(block)
    return arrays


def _same_memory(a, b):
    return address_of(a) == address_of(b) and (a.nbytes == 0 or np.shares_memory(a, b))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_to_metatensor_shares_every_array(rng, dtype):
    tensor = make_map(rng, dtype=dtype, info={"unit": "eV", "origin": "test"})
    theirs = tensor.to_metatensor()
    assert isinstance(theirs, mts.TensorMap)
    assert_matches_metatensor(tensor, theirs)
    ours_arrays, their_arrays = _arrays(tensor), _arrays(theirs)
    assert len(ours_arrays) == len(their_arrays) > 3
    for a, b in zip(ours_arrays, their_arrays, strict=True):
        assert _same_memory(a, b)
    # metatensor-core's own operations accept it
    assert mts.equal(theirs, mts.io.load_buffer(mts.io.save_buffer(theirs)))


def test_to_metatensor_keeps_blockmaps_memory_alive(rng):
    tensor = make_map(rng)
    expected = tensor.block(1).values.copy()
    theirs = to_metatensor(tensor)
    del tensor
    np.testing.assert_array_equal(theirs.block(1).values, expected)


def test_torch_backed_maps_cross_both_ways(rng):
    """A torch-backed map (its labels give torch tensors) becomes a
    metatensor-core map of torch tensors sharing its memory, and back
    (to_metatensor raised AttributeError on the labels' tensors)."""
    torch = pytest.importorskip("torch")
    tensor = make_map(rng).to(arrays="torch")
    assert isinstance(tensor.keys.values, torch.Tensor)
    theirs = to_metatensor(tensor)
    assert isinstance(theirs.block(0).values, torch.Tensor)
    assert_matches_metatensor(tensor.to(arrays="numpy"), theirs.to(arrays="numpy"))
    for a, b in zip(_arrays(tensor), _arrays(theirs), strict=True):
        assert a.data_ptr() == b.data_ptr()
    back = from_metatensor(theirs)
    assert isinstance(back.block(0).values, torch.Tensor)
    assert blockmap.equal(back.to(arrays="numpy"), tensor.to(arrays="numpy"))
    for a, b in zip(_arrays(tensor), _arrays(back), strict=True):
        assert a.data_ptr() == b.data_ptr()


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_from_metatensor_shares_every_array(rng, dtype):
    theirs = to_metatensor(make_map(rng, dtype=dtype, info={"unit": "eV"}))
    # rebuilt from metatensor's own copies, so no blockmap memory is involved
    theirs = mts.io.load_buffer(mts.io.save_buffer(theirs))
    ours = from_metatensor(theirs)
    assert isinstance(ours, blockmap.TensorMap)
    assert_matches_metatensor(ours, theirs)
    for a, b in zip(_arrays(ours), _arrays(theirs), strict=True):
        assert _same_memory(a, b)
    # and back: the very same memory again
    back = ours.to_metatensor()
    for a, b in zip(_arrays(back), _arrays(theirs), strict=True):
        assert _same_memory(a, b)
    assert mts.equal(back, theirs)


def test_empty_info_values_cross_both_ways(rng):
    """metatensor-core's ``info()`` gives None for a key whose value is the
    empty string; the string it stores (what its own save and pickle keep)
    is what blockmap gets and gives back."""
    theirs = to_metatensor(make_map(rng, info={"empty": "", "unit": "eV"}))
    assert theirs.info() == {"empty": None, "unit": "eV"}
    ours = from_metatensor(theirs)
    assert ours.info() == {"empty": "", "unit": "eV"}
    back = ours.to_metatensor()
    oracle = mts.io.load_buffer(mts.io.save_buffer(theirs))
    assert back.info() == oracle.info() == {"empty": None, "unit": "eV"}
    # what each stores: read from the archives metatensor-core writes
    stored = blockmap.load_buffer(mts.io.save_buffer(back)).info()
    assert stored == blockmap.load_buffer(mts.io.save_buffer(oracle)).info()
    assert stored == {"empty": "", "unit": "eV"}


def test_writes_are_seen_both_ways(rng):
    ours = make_map(rng, gradients=False)
    theirs = to_metatensor(ours)
    theirs.block(0).values[0, 0, 0] = 1234.5
    assert ours.block(0).values[0, 0, 0] == 1234.5
    again = from_metatensor(theirs)
    again.block(0).values[0, 0, 1] = -8.0
    assert ours.block(0).values[0, 0, 1] == -8.0


def test_labels_are_copied_once(rng):
    tensor = make_map(rng)
    theirs = to_metatensor(tensor.keys)
    assert isinstance(theirs, mts.Labels)
    assert theirs == mts.Labels(tensor.keys.names, np.asarray(tensor.keys.values))
    # metatensor-core copies the values into its native labels (and its
    # Python object keeps the read-only array it was given); blockmap's
    # labels own their memory: from_metatensor copies once
    back = from_metatensor(theirs)
    assert back == tensor.keys
    assert not np.shares_memory(back.values, theirs.values)
    their_block = mts.io.load_block_buffer(mts.io.save_buffer(to_metatensor(tensor.block(0))))
    ours = from_metatensor(their_block)
    assert not np.shares_memory(ours.samples.values, their_block.samples.values)
    assert ours.samples == tensor.block(0).samples


def test_blocks_and_gradients_alone(rng):
    tensor = make_map(rng)
    block = tensor.block(2)
    theirs = to_metatensor(block)
    assert isinstance(theirs, mts.TensorBlock)
    assert_matches_metatensor(block, theirs)
    gradient = block.gradient("positions")
    assert _same_memory(to_metatensor(gradient).values, gradient.values)
    back = from_metatensor(theirs)
    assert isinstance(back, blockmap.TensorBlock)
    assert back.gradients_list() == block.gradients_list()
    for a, b in zip(_arrays(back), _arrays(block), strict=True):
        assert _same_memory(a, b)


def test_empty_blocks_and_zero_blocks():
    tensor = zero_block_map()
    back = from_metatensor(to_metatensor(tensor))
    assert back.keys == tensor.keys
    assert len(back) == len(tensor)


def test_any_gradient_parameter_name(rng):
    values = rng.random((2, 3))
    block = mts.TensorBlock(values, mts.Labels.range("s", 2), [], mts.Labels.range("p", 3))
    gradient = mts.TensorBlock(
        rng.random((2, 3)), mts.Labels.range("sample", 2), [], mts.Labels.range("p", 3)
    )
    block.add_gradient("grad-of-grad", gradient)
    ours = from_metatensor(block)
    assert ours.gradients_list() == ["grad-of-grad"]
    assert to_metatensor(ours).gradients_list() == ["grad-of-grad"]


def test_a_non_contiguous_array_is_copied_once(rng):
    values = rng.random((6, 4))[::2]
    block = mts.TensorBlock(values, mts.Labels.range("s", 3), [], mts.Labels.range("p", 4))
    ours = from_metatensor(block)
    np.testing.assert_array_equal(ours.values, values)
    assert not np.shares_memory(ours.values, values)


def test_wrong_types_are_refused():
    with pytest.raises(blockmap.BlockMapTypeError, match="metatensor-core"):
        from_metatensor(np.zeros(3))
    with pytest.raises(blockmap.BlockMapTypeError, match="blockmap"):
        to_metatensor(mts.Labels.range("a", 2))
    with pytest.raises(TypeError):
        from_metatensor(blockmap.Labels.range("a", 2))
