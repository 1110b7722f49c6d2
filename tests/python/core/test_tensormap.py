import numpy as np
import pytest

import blockmap
from blockmap import Labels, LabelsEntry, TensorBlock, TensorMap

KEY_VALUES = [[0, 1], [1, 1], [1, 6], [2, 8]]


def _keys(values=None):
    if values is None:
        values = KEY_VALUES
    return Labels(["o3_lambda", "center_type"], np.array(values))


@pytest.fixture
def parts(block_and_values, gradient_and_values):
    """Keys, blocks and the arrays of the blocks of a 4-block map, one block per key.

    Block ``i`` has ``i + 2`` samples, so blocks are told apart by their shape.
    """
    keys = _keys()
    blocks = []
    arrays = []
    for i, (o3_lambda, _) in enumerate(KEY_VALUES):
        block, values = block_and_values(
            n_samples=i + 2,
            component_sizes=(2 * o3_lambda + 1,),
            n_properties=3,
            component_names=["o3_mu"],
        )
        gradient, _ = gradient_and_values(block)
        block.add_gradient("positions", gradient)
        blocks.append(block)
        arrays.append(values)
    return keys, blocks, arrays


@pytest.fixture
def tm(parts):
    keys, blocks, _ = parts
    return TensorMap(keys, blocks)


def _n_samples(block):
    return block.values.shape[0]


# --------------------------------------------------------------- construction


def test_construct(parts):
    keys, blocks, arrays = parts
    tm = TensorMap(keys, blocks)
    assert len(tm) == 4
    assert tm.keys == keys
    assert isinstance(tm.keys, Labels)
    assert tm.keys.names == ["o3_lambda", "center_type"]
    for i, values in enumerate(arrays):
        np.testing.assert_array_equal(tm.block(i).values, values)
        assert tm.block(i) == blocks[i]


def test_construct_from_tuple(parts):
    keys, blocks, _ = parts
    tm = TensorMap(keys, tuple(blocks))
    assert len(tm) == 4


def test_fixture_tensor(tensor):
    assert len(tensor) == 2
    assert tensor.keys.names == ["o3_lambda", "center_type"]
    assert all(block.gradients_list() == ["positions"] for block in tensor.blocks())


def test_empty_tensor_map():
    tm = TensorMap(Labels.empty(["o3_lambda"]), [])
    assert len(tm) == 0
    assert tm.blocks() == []
    assert list(tm) == []
    assert tm.keys == Labels.empty(["o3_lambda"])


def test_same_block_twice(block_and_values):
    block, values = block_and_values()
    tm = TensorMap(Labels.range("key", 2), [block, block])
    assert len(tm) == 2
    np.testing.assert_array_equal(tm.block(0).values, values)
    np.testing.assert_array_equal(tm.block(1).values, values)


def test_blocks_are_not_consumed(parts):
    keys, blocks, arrays = parts
    tm = TensorMap(keys, blocks)
    b0 = blocks[0]
    np.testing.assert_array_equal(b0.values, arrays[0])
    assert b0.samples.names == ["system", "atom"]
    assert b0.gradients_list() == ["positions"]
    assert np.shares_memory(b0.values, tm.block(0).values)
    assert np.shares_memory(blocks[3].values, tm.block(3).values)
    assert b0.copy() == tm.block(0)
    # the blocks can be used again in another map
    other = TensorMap(keys, blocks)
    assert other == tm


def test_blocks_from_map_are_views(tm):
    assert np.shares_memory(tm.block(0).values, tm.block(0).values)
    assert np.shares_memory(tm.block(1).values, tm.blocks()[1].values)
    assert np.shares_memory(
        tm.block(1).gradient("positions").values, tm.block_by_id(1).gradient("positions").values
    )


def test_block_from_map_outlives_map(block_and_values, gradient_and_values):
    blocks = []
    arrays = []
    for _ in range(2):
        block, values = block_and_values()
        gradient, _ = gradient_and_values(block)
        block.add_gradient("positions", gradient)
        blocks.append(block)
        arrays.append(values.copy())
    tm = TensorMap(Labels.range("key", 2), blocks)
    del blocks, block, values, gradient
    from_map = tm.block(1)
    del tm
    np.testing.assert_array_equal(from_map.values, arrays[1])
    assert from_map.gradients_list() == ["positions"]


def test_add_gradient_to_block_of_map_fails(tm, gradient_and_values):
    block = tm.block(0)
    gradient, _ = gradient_and_values(block)
    with pytest.raises(blockmap.ValidationError):
        block.add_gradient("strain", gradient)
    assert tm.block(0).gradients_list() == ["positions"]
    assert not block.has_gradient("strain")

    via_blocks = tm.blocks()[1]
    gradient, _ = gradient_and_values(via_blocks)
    with pytest.raises(blockmap.ValidationError):
        via_blocks.add_gradient("strain", gradient)
    assert tm.block(1).gradients_list() == ["positions"]


def test_add_gradient_to_block_of_map_without_gradients_fails(
    block_and_values, gradient_and_values
):
    block, _ = block_and_values()
    tm = TensorMap(Labels.range("key", 1), [block])
    from_map = tm.block(0)
    gradient, _ = gradient_and_values(from_map)
    with pytest.raises(blockmap.ValidationError):
        from_map.add_gradient("positions", gradient)
    assert tm.block(0).gradients_list() == []


def test_original_block_changes_do_not_break_the_map(parts, gradient_and_values):
    keys, blocks, _ = parts
    tm = TensorMap(keys, blocks)
    strain, _ = gradient_and_values(blocks[0])
    try:
        blocks[0].add_gradient("strain", strain)
    except blockmap.ValidationError:
        pass
    # every block of the map still has the same set of gradients
    assert [b.gradients_list() for b in tm.blocks()] == [["positions"]] * 4


def test_nested_gradient_of_map_block_keeps_map_valid(tm, gradient_and_values):
    view = tm.block(0).gradient("positions")
    nested, _ = gradient_and_values(view, extra=())
    try:
        view.add_gradient("strain", nested)
    except blockmap.ValidationError:
        pass
    nested_lists = [b.gradient("positions").gradients_list() for b in tm.blocks()]
    assert nested_lists == [[]] * 4


# ------------------------------------------------------------- block selection


def test_block_by_index(tm, parts):
    _, _, arrays = parts
    for i in range(4):
        block = tm.block(i)
        assert isinstance(block, TensorBlock)
        np.testing.assert_array_equal(block.values, arrays[i])


def test_block_index_out_of_range(tm):
    with pytest.raises(IndexError):
        tm.block(4)


HUGE_INDEX_CALLS = {
    "keys[i]": lambda tm, i: tm.keys[i],
    "keys.entry(i)": lambda tm, i: tm.keys.entry(i),
    "entry[i]": lambda tm, i: tm.keys[0][i],
    "block(i)": lambda tm, i: tm.block(i),
    "blocks([0, i])": lambda tm, i: tm.blocks([0, i]),
    "tm[i]": lambda tm, i: tm[i],
    "block_by_id(i)": lambda tm, i: tm.block_by_id(i),
    "blocks_by_id([i])": lambda tm, i: tm.blocks_by_id([i]),
    "insert(i, ...)": lambda tm, i: tm.keys.insert(i, "new", np.arange(len(tm.keys))),
    "permute([i, 0])": lambda tm, i: tm.keys.permute([i, 0]),
}


@pytest.mark.parametrize("call", HUGE_INDEX_CALLS.values(), ids=HUGE_INDEX_CALLS.keys())
@pytest.mark.parametrize("index", [2**70, -(2**70), 2**63, 2**1000])
def test_an_index_out_of_range_is_reported_as_given(tm, call, index):
    with pytest.raises(blockmap.BlockMapIndexError, match=f"{index}( |$)"):
        call(tm, index)


def test_a_range_end_too_large_is_reported_as_given():
    with pytest.raises(blockmap.ValidationError, match=f"range end {2**70} is too large"):
        Labels.range("a", 2**70)


def test_block_by_dict(tm):
    assert _n_samples(tm.block({"o3_lambda": 1, "center_type": 6})) == 4
    assert _n_samples(tm.block({"center_type": 8})) == 5
    assert _n_samples(tm.block({"o3_lambda": 0})) == 2


def test_block_by_kwargs(tm):
    assert _n_samples(tm.block(o3_lambda=1, center_type=1)) == 3
    assert _n_samples(tm.block(center_type=6)) == 4
    assert _n_samples(tm.block(o3_lambda=2)) == 5


def test_block_by_labels_entry(tm):
    for i, entry in enumerate(tm.keys):
        assert _n_samples(tm.block(entry)) == i + 2
    other = Labels(["o3_lambda", "center_type"], np.array([[1, 6]]))
    assert _n_samples(tm.block(other[0])) == 4


def test_block_by_single_row_labels(tm):
    selection = Labels(["o3_lambda", "center_type"], np.array([[2, 8]]))
    assert _n_samples(tm.block(selection)) == 5
    partial = Labels(["center_type"], np.array([[6]]))
    assert _n_samples(tm.block(partial)) == 4


def test_block_without_selection(block_and_values):
    block, values = block_and_values()
    tm = TensorMap(Labels.single(), [block])
    np.testing.assert_array_equal(tm.block().values, values)
    np.testing.assert_array_equal(tm.block(None).values, values)


def test_block_without_selection_several_blocks(tm):
    with pytest.raises(blockmap.ValidationError):
        tm.block()


def test_block_matching_several(tm):
    with pytest.raises(blockmap.ValidationError):
        tm.block(o3_lambda=1)
    with pytest.raises(blockmap.ValidationError):
        tm.block({"center_type": 1})


def test_block_matching_none(tm):
    with pytest.raises(blockmap.ValidationError):
        tm.block(o3_lambda=5)
    with pytest.raises(blockmap.ValidationError):
        tm.block({"o3_lambda": 0, "center_type": 6})
    with pytest.raises(blockmap.ValidationError):
        tm.block(Labels(["o3_lambda", "center_type"], np.array([[9, 9]])))


def test_block_with_unknown_dimension(tm):
    with pytest.raises(ValueError, match="missing"):
        tm.block(missing=1)
    with pytest.raises(ValueError, match="missing"):
        tm.blocks({"missing": 1})


def test_blocks_all(tm, parts):
    _, _, arrays = parts
    blocks = tm.blocks()
    assert isinstance(blocks, list)
    assert len(blocks) == 4
    for block, values in zip(blocks, arrays, strict=True):
        np.testing.assert_array_equal(block.values, values)


def test_blocks_selection(tm):
    matching = tm.blocks(o3_lambda=1)
    assert isinstance(matching, list)
    assert [_n_samples(b) for b in matching] == [3, 4]
    assert [_n_samples(b) for b in tm.blocks({"center_type": 1})] == [2, 3]
    assert [_n_samples(b) for b in tm.blocks(o3_lambda=2, center_type=8)] == [5]
    assert [_n_samples(b) for b in tm.blocks(2)] == [4]
    # as in metatensor-core: no match is an error, not an empty list
    with pytest.raises(ValueError, match="o3_lambda=7"):
        tm.blocks(o3_lambda=7)
    assert [_n_samples(b) for b in tm.blocks(tm.keys[3])] == [5]
    selection = Labels(["o3_lambda"], np.array([[1]]))
    assert [_n_samples(b) for b in tm.blocks(selection)] == [3, 4]


def test_blocks_matching(tm):
    assert tm.blocks_matching({"o3_lambda": 1}) == [1, 2]
    assert tm.blocks_matching({"o3_lambda": 1, "center_type": 6}) == [2]
    assert tm.blocks_matching({"center_type": 3}) == []
    assert tm.blocks_matching(Labels(["center_type"], np.array([[1]]))) == [0, 1]
    assert tm.blocks_matching(tm.keys[3]) == [3]
    assert all(isinstance(i, int) for i in tm.blocks_matching({"o3_lambda": 1}))


def test_block_by_id(tm, parts):
    _, _, arrays = parts
    for i in range(4):
        np.testing.assert_array_equal(tm.block_by_id(i).values, arrays[i])


def test_block_by_id_out_of_range(tm):
    with pytest.raises(IndexError):
        tm.block_by_id(4)
    with pytest.raises(IndexError):
        tm.block_by_id(1000)


def test_iteration(tm, parts):
    # as in metatensor-core: iterating a map gives its blocks
    _, _, arrays = parts
    blocks = list(tm)
    assert len(blocks) == 4
    for i, block in enumerate(blocks):
        assert isinstance(block, TensorBlock)
        np.testing.assert_array_equal(block.values, arrays[i])
        assert np.shares_memory(block.values, arrays[i])


def test_items(tm, parts):
    keys, _, arrays = parts
    items = list(tm.items())
    assert len(items) == 4
    assert all(key == keys[i] for i, (key, _) in enumerate(items))
    for i, (key, block) in enumerate(items):
        assert isinstance(key, LabelsEntry)
        assert list(key) == KEY_VALUES[i]
        assert key["center_type"] == KEY_VALUES[i][1]
        np.testing.assert_array_equal(block.values, arrays[i])


def test_names(tm):
    assert tm.sample_names == ["system", "atom"]
    assert tm.component_names == ["o3_mu"]
    assert tm.property_names == ["n"]


def test_names_without_components(block_and_values):
    block, _ = block_and_values(property_name="radial")
    tm = TensorMap(Labels.single(), [block])
    assert tm.component_names == []
    assert tm.property_names == ["radial"]


def test_nbytes(tm):
    blocks_bytes = sum(block.nbytes for block in tm.blocks())
    assert tm.nbytes == blocks_bytes + tm.keys.values.nbytes


# ------------------------------------------------------------------------ info


def test_info(tm):
    assert tm.info() == {}
    assert tm.get_info("model") is None
    tm.set_info("model", "soap")
    tm.set_info("units", "eV")
    assert tm.get_info("model") == "soap"
    assert tm.info() == {"model": "soap", "units": "eV"}
    tm.set_info("model", "pet")
    assert tm.get_info("model") == "pet"
    assert tm.get_info("absent") is None


def test_info_returns_copy(tm):
    tm.set_info("a", "1")
    info = tm.info()
    assert isinstance(info, dict)
    info["a"] = "changed"
    info["b"] = "2"
    assert tm.info() == {"a": "1"}
    assert tm.get_info("b") is None


def test_set_info_types(tm):
    with pytest.raises(TypeError):
        tm.set_info(1, "value")
    with pytest.raises(TypeError):
        tm.set_info("key", 2)
    with pytest.raises(TypeError):
        tm.set_info("key", None)
    assert tm.info() == {}


# ------------------------------------------------------------------------ copy


def test_copy(tm):
    tm.set_info("model", "soap")
    copy = tm.copy()
    assert isinstance(copy, TensorMap)
    assert copy == tm
    assert copy.keys == tm.keys
    assert len(copy) == len(tm)
    for block, copied in zip(tm, copy, strict=True):
        np.testing.assert_array_equal(copied.values, block.values)
        assert not np.shares_memory(copied.values, block.values)
        assert not np.shares_memory(
            copied.gradient("positions").values, block.gradient("positions").values
        )
        assert copied == block


def test_copy_is_independent(tm, parts):
    _, _, arrays = parts
    original = arrays[0].copy()
    copy = tm.copy()
    copy.block(0).values[...] = -1.0
    np.testing.assert_array_equal(tm.block(0).values, original)
    np.testing.assert_array_equal(arrays[0], original)
    assert copy != tm
    copy.set_info("only", "copy")
    assert tm.get_info("only") is None


# -------------------------------------------------------------------- equality


def test_equality(parts):
    keys, blocks, _ = parts
    tm = TensorMap(keys, blocks)
    same = TensorMap(keys, [b.copy() for b in blocks])
    assert tm == same
    assert not tm != same
    assert tm == tm


def test_inequality_values(parts):
    keys, blocks, arrays = parts
    tm = TensorMap(keys, blocks)
    changed_blocks = [b.copy() for b in blocks]
    changed_blocks[3].values[0, 0, 0] += 1.0
    assert tm != TensorMap(keys, changed_blocks)
    assert not tm == TensorMap(keys, changed_blocks)


def test_inequality_keys(parts):
    keys, blocks, _ = parts
    tm = TensorMap(keys, blocks)
    other_keys = _keys([[0, 1], [1, 1], [1, 6], [2, 9]])
    assert tm != TensorMap(other_keys, blocks)
    renamed = Labels(["o3_lambda", "center"], keys.values)
    assert tm != TensorMap(renamed, blocks)


def test_inequality_other_types(tm):
    assert tm != 1
    assert tm != tm.block(0)


# ----------------------------------------------------------- validation errors


def test_number_of_blocks_mismatch(parts):
    keys, blocks, _ = parts
    with pytest.raises(blockmap.ValidationError):
        TensorMap(keys, blocks[:3])
    with pytest.raises(blockmap.ValidationError):
        TensorMap(keys, [*blocks, blocks[0]])
    with pytest.raises(blockmap.ValidationError):
        TensorMap(keys, [])


def test_different_sample_names(block_and_values):
    b0, _ = block_and_values(sample_names=("system", "atom"))
    b1, _ = block_and_values(sample_names=("system", "center"))
    with pytest.raises(blockmap.ValidationError, match="center"):
        TensorMap(Labels.range("key", 2), [b0, b1])


def test_different_component_names(block_and_values):
    b0, _ = block_and_values(component_sizes=(3,), component_names=["xyz"])
    b1, _ = block_and_values(component_sizes=(3,), component_names=["abc"])
    with pytest.raises(blockmap.ValidationError, match="abc"):
        TensorMap(Labels.range("key", 2), [b0, b1])
    b2, _ = block_and_values()
    with pytest.raises(blockmap.ValidationError):
        TensorMap(Labels.range("key", 2), [b0, b2])


def test_different_property_names(block_and_values):
    b0, _ = block_and_values(property_name="n")
    b1, _ = block_and_values(property_name="radial")
    with pytest.raises(blockmap.ValidationError, match="radial"):
        TensorMap(Labels.range("key", 2), [b0, b1])


def test_different_gradients(block_and_values, gradient_and_values):
    b0, _ = block_and_values()
    b1, _ = block_and_values()
    gradient, _ = gradient_and_values(b0)
    b0.add_gradient("positions", gradient)
    with pytest.raises(blockmap.ValidationError):
        TensorMap(Labels.range("key", 2), [b0, b1])
    with pytest.raises(blockmap.ValidationError):
        TensorMap(Labels.range("key", 2), [b1, b0])

    strain, _ = gradient_and_values(b1)
    b1.add_gradient("strain", strain)
    with pytest.raises(blockmap.ValidationError):
        TensorMap(Labels.range("key", 2), [b0, b1])


def test_non_block_in_list(parts):
    keys, blocks, arrays = parts
    with pytest.raises(TypeError):
        TensorMap(keys, [*blocks[:3], arrays[3]])
    with pytest.raises(TypeError):
        TensorMap(keys, [*blocks[:3], None])


def test_keys_must_be_labels(parts):
    _, blocks, _ = parts
    with pytest.raises(TypeError):
        TensorMap(np.array(KEY_VALUES), blocks)


# ------------------------------------------------------------------------ repr


def test_repr(tm):
    text = repr(tm)
    assert "o3_lambda" in text
    assert "center_type" in text
    assert "4" in text


def test_repr_block_count():
    blocks = [
        TensorBlock(np.zeros((1, 1)), Labels.range("s", 1), [], Labels.range("p", 1))
        for _ in range(13)
    ]
    text = repr(TensorMap(Labels.range("spin", 13), blocks))
    assert "spin" in text
    assert "13" in text


def test_copy_module(tensor):
    import copy

    shallow = copy.copy(tensor)
    assert shallow == tensor
    assert np.shares_memory(shallow.block(0).values, tensor.block(0).values)
    deep = copy.deepcopy(tensor)
    assert deep == tensor
    assert not np.shares_memory(deep.block(0).values, tensor.block(0).values)
    gradient = tensor.block(0).gradient("positions")
    assert not np.shares_memory(deep.block(0).gradient("positions").values, gradient.values)
    block = tensor.block(1)
    assert np.shares_memory(copy.copy(block).values, block.values)
    assert not np.shares_memory(copy.deepcopy(block).values, block.values)
    keys = copy.deepcopy(tensor.keys)
    assert keys == tensor.keys
