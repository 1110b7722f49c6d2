import importlib.util
import re

import numpy as np
import pytest

import blockmap
from blockmap import Labels, TensorBlock
from helpers.dtypes import ALL_DTYPES, dtype_id


def _samples(n, names=("system", "atom")):
    values = np.zeros((n, len(names)), dtype=np.int32)
    values[:, -1] = np.arange(n)
    return Labels(list(names), values)


def _xyz():
    return Labels("xyz", np.array([[0], [1], [2]]))


def _expected_nbytes(block):
    """Bytes of array data a block holds: values, labels, and gradients recursively."""
    labels = [block.samples, *block.components, block.properties]
    total = block.values.nbytes + sum(label.values.nbytes for label in labels)
    return total + sum(_expected_nbytes(gradient) for _, gradient in block.gradients())


def _gradient_samples(parent_indices, names=("sample", "system", "atom")):
    parent_indices = np.asarray(parent_indices)
    values = np.zeros((len(parent_indices), len(names)), dtype=np.int32)
    values[:, 0] = parent_indices
    values[:, -1] = np.arange(len(parent_indices))
    return Labels(list(names), values)


# --------------------------------------------------------------- construction


def test_construct_and_accessors(random_values):
    values = random_values((4, 3, 2))
    samples = _samples(4)
    components = [_xyz()]
    properties = Labels("n", np.array([[0], [5]]))
    block = TensorBlock(values, samples, components, properties)

    assert isinstance(block.values, np.ndarray)
    np.testing.assert_array_equal(block.values, values)
    assert block.samples == samples
    assert isinstance(block.samples, Labels)
    assert isinstance(block.components, list)
    assert len(block.components) == 1
    assert block.components[0] == components[0]
    assert block.properties == properties
    assert block.shape == (4, 3, 2)
    assert isinstance(block.shape, tuple)
    assert block.dtype == np.dtype(np.float64)
    assert isinstance(block.dtype, np.dtype)
    # values (4 * 3 * 2 float64) and the int32 labels (4 * 2 + 3 + 2)
    assert block.nbytes == 4 * 3 * 2 * 8 + (4 * 2 + 3 + 2) * 4


def test_construct_with_keywords(random_values):
    values = random_values((2, 3))
    block = TensorBlock(
        values=values,
        samples=_samples(2),
        components=[],
        properties=Labels.range("n", 3),
    )
    np.testing.assert_array_equal(block.values, values)


def test_construct_from_nested_list():
    block = TensorBlock([[1.0, 2.0], [3.0, 4.0]], _samples(2), [], Labels.range("n", 2))
    assert block.dtype == np.dtype(np.float64)
    assert block.shape == (2, 2)
    np.testing.assert_array_equal(block.values, [[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_dtype_round_trip(dtype, random_values):
    values = random_values((5, 3, 4), dtype)
    block = TensorBlock(values, _samples(5), [_xyz()], Labels.range("n", 4))
    assert block.values.dtype == np.dtype(dtype)
    assert block.dtype == np.dtype(dtype)
    assert block.nbytes == _expected_nbytes(block)
    assert block.nbytes - values.nbytes == (5 * 2 + 3 + 4) * 4
    np.testing.assert_array_equal(block.values, values)
    copy = block.copy()
    assert copy.values.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(copy.values, values)


def test_two_dimensional_block(random_values):
    values = random_values((6, 2))
    block = TensorBlock(values, _samples(6), [], Labels.range("n", 2))
    assert block.components == []
    assert block.shape == (6, 2)
    np.testing.assert_array_equal(block.values, values)


def test_four_dimensional_block(random_values):
    values = random_values((3, 3, 5, 2))
    components = [_xyz(), Labels("o3_mu", np.arange(-2, 3).reshape(-1, 1))]
    block = TensorBlock(values, _samples(3), components, Labels.range("n", 2))
    assert block.shape == (3, 3, 5, 2)
    assert [c.names for c in block.components] == [["xyz"], ["o3_mu"]]
    assert block.components[1] == components[1]
    np.testing.assert_array_equal(block.values, values)


def test_empty_block():
    values = np.zeros((0, 3, 2))
    block = TensorBlock(values, Labels.empty(["system", "atom"]), [_xyz()], Labels.range("n", 2))
    assert block.shape == (0, 3, 2)
    assert block.values.shape == (0, 3, 2)
    assert len(block.samples) == 0
    assert block.nbytes == (3 + 2) * 4
    assert block.copy() == block


def test_block_with_no_properties():
    block = TensorBlock(np.zeros((3, 0)), _samples(3), [], Labels.empty("n"))
    assert block.shape == (3, 0)


def test_values_outlive_block(random_values):
    values = random_values((3, 2))
    expected = values.copy()
    block = TensorBlock(values, _samples(3), [], Labels.range("n", 2))
    view = block.values
    del block, values
    np.testing.assert_array_equal(view, expected)


# ------------------------------------------------------------ validation errors


def test_samples_count_mismatch():
    with pytest.raises(blockmap.ValidationError):
        TensorBlock(np.zeros((3, 2)), _samples(4), [], Labels.range("n", 2))


def test_properties_count_mismatch():
    with pytest.raises(blockmap.ValidationError):
        TensorBlock(np.zeros((3, 2)), _samples(3), [], Labels.range("n", 3))


def test_component_size_mismatch():
    with pytest.raises(blockmap.ValidationError):
        TensorBlock(np.zeros((3, 4, 2)), _samples(3), [_xyz()], Labels.range("n", 2))


def test_components_count_mismatch():
    with pytest.raises(blockmap.ValidationError):
        TensorBlock(np.zeros((3, 3, 2)), _samples(3), [], Labels.range("n", 2))
    with pytest.raises(blockmap.ValidationError):
        TensorBlock(np.zeros((3, 2)), _samples(3), [_xyz()], Labels.range("n", 2))
    with pytest.raises(blockmap.ValidationError):
        TensorBlock(np.zeros((3, 3, 2)), _samples(3), [_xyz(), _xyz()], Labels.range("n", 2))


def test_component_with_two_dimensions():
    component = Labels(["a", "b"], np.array([[0, 0], [0, 1], [1, 0]]))
    with pytest.raises(blockmap.ValidationError):
        TensorBlock(np.zeros((3, 3, 2)), _samples(3), [component], Labels.range("n", 2))


@pytest.mark.parametrize("values", [np.zeros(3), np.zeros(()), 1.0], ids=["1d", "0d", "scalar"])
def test_values_with_less_than_two_dimensions(values):
    with pytest.raises(blockmap.ValidationError):
        TensorBlock(values, _samples(3), [], Labels.range("n", 1))


def test_validation_error_is_value_error():
    with pytest.raises(ValueError):
        TensorBlock(np.zeros((3, 2)), _samples(4), [], Labels.range("n", 2))


# ------------------------------------------------------------------ type errors


def test_object_dtype_values():
    values = np.empty((2, 2), dtype=object)
    values[:] = 1.0
    with pytest.raises(blockmap.BlockMapTypeError) as info:
        TensorBlock(values, _samples(2), [], Labels.range("n", 2))
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("values", [np.array([["a", "b"]]), np.array([[b"a", b"b"]])])
def test_string_values(values):
    with pytest.raises(blockmap.BlockMapTypeError):
        TensorBlock(values, _samples(1), [], Labels.range("n", 2))


@pytest.mark.parametrize(
    "dtype", ["datetime64[s]", "timedelta64[s]", "V8", [("x", np.float64)]], ids=str
)
def test_unsupported_dtypes(dtype):
    values = np.zeros((1, 2), dtype=dtype)
    with pytest.raises(blockmap.BlockMapTypeError):
        TensorBlock(values, _samples(1), [], Labels.range("n", 2))


def test_non_labels_samples():
    with pytest.raises(blockmap.BlockMapTypeError):
        TensorBlock(np.zeros((2, 2)), np.array([[0], [1]]), [], Labels.range("n", 2))
    with pytest.raises(blockmap.BlockMapTypeError):
        TensorBlock(np.zeros((2, 2)), [[0], [1]], [], Labels.range("n", 2))


def test_non_labels_properties_and_components():
    with pytest.raises(TypeError):
        TensorBlock(np.zeros((2, 2)), _samples(2), [], "n")
    with pytest.raises(TypeError):
        TensorBlock(np.zeros((2, 3, 2)), _samples(2), [[0, 1, 2]], Labels.range("n", 2))


# ------------------------------------------------------------------- gradients


def test_add_gradient(block_and_values, random_values):
    block, _ = block_and_values(n_samples=3, component_sizes=(2,), n_properties=4)
    samples = _gradient_samples([0, 0, 2, 1, 2])
    components = [_xyz(), block.components[0]]
    values = random_values((5, 3, 2, 4))
    gradient = TensorBlock(values, samples, components, block.properties)

    assert not block.has_gradient("positions")
    assert block.gradients_list() == []
    assert list(block.gradients()) == []

    block.add_gradient("positions", gradient)

    assert block.has_gradient("positions")
    assert not block.has_gradient("strain")
    assert block.gradients_list() == ["positions"]
    stored = block.gradient("positions")
    assert isinstance(stored, TensorBlock)
    assert stored == gradient
    np.testing.assert_array_equal(stored.values, values)
    assert stored.samples == samples
    assert stored.components == components
    assert stored.properties == block.properties
    assert stored.gradients_list() == []


def test_gradient_samples_may_have_only_sample_dimension(block_and_values, random_values):
    block, _ = block_and_values(n_samples=3, n_properties=2)
    samples = Labels("sample", np.array([[0], [2]]))
    gradient = TensorBlock(random_values((2, 2)), samples, [], block.properties)
    block.add_gradient("alpha", gradient)
    assert block.gradient("alpha").samples.names == ["sample"]


def test_gradient_without_extra_components(block_and_values, gradient_and_values):
    block, _ = block_and_values(component_sizes=(3,))
    gradient, values = gradient_and_values(block, extra=())
    block.add_gradient("alpha", gradient)
    np.testing.assert_array_equal(block.gradient("alpha").values, values)
    assert block.gradient("alpha").shape == values.shape


def test_gradient_with_two_extra_components(block_and_values, gradient_and_values):
    block, _ = block_and_values(component_sizes=(2,))
    gradient, values = gradient_and_values(block, extra=(("cell_a", 3), ("cell_b", 3)))
    block.add_gradient("strain", gradient)
    assert block.gradient("strain").shape == (4, 3, 3, 2, 2)
    assert [c.names[0] for c in block.gradient("strain").components] == [
        "cell_a",
        "cell_b",
        "c0",
    ]


def test_empty_gradient(block_and_values, gradient_and_values):
    block, _ = block_and_values(n_samples=3)
    gradient, _ = gradient_and_values(block, n_samples=0)
    block.add_gradient("positions", gradient)
    assert block.gradient("positions").shape == (0, 3, 2)


def test_gradient_of_empty_block(block_and_values, gradient_and_values):
    block, _ = block_and_values(n_samples=0)
    gradient, _ = gradient_and_values(block)
    block.add_gradient("positions", gradient)
    assert len(block.gradient("positions").samples) == 0


def test_gradients_list_sorted_and_gradients(block_and_values, gradient_and_values):
    block, _ = block_and_values()
    strain, strain_values = gradient_and_values(block, extra=(("d", 3), ("e", 3)))
    positions, positions_values = gradient_and_values(block)
    alpha, alpha_values = gradient_and_values(block, extra=())
    block.add_gradient("strain", strain)
    block.add_gradient("positions", positions)
    block.add_gradient("alpha", alpha)

    assert block.gradients_list() == ["alpha", "positions", "strain"]

    pairs = list(block.gradients())
    assert all(isinstance(pair, tuple) and len(pair) == 2 for pair in pairs)
    assert sorted(name for name, _ in pairs) == ["alpha", "positions", "strain"]
    by_name = dict(pairs)
    assert all(isinstance(g, TensorBlock) for g in by_name.values())
    np.testing.assert_array_equal(by_name["strain"].values, strain_values)
    np.testing.assert_array_equal(by_name["positions"].values, positions_values)
    np.testing.assert_array_equal(by_name["alpha"].values, alpha_values)
    assert by_name["positions"] == positions


def test_gradient_of_gradient(block_and_values, gradient_and_values):
    block, _ = block_and_values(n_samples=3, component_sizes=(2,))
    gradient, gradient_values = gradient_and_values(block, n_samples=4)
    second, second_values = gradient_and_values(gradient, n_samples=6, extra=(("abc", 2),))
    gradient.add_gradient("strain", second)
    block.add_gradient("positions", gradient)

    stored = block.gradient("positions")
    assert stored.gradients_list() == ["strain"]
    np.testing.assert_array_equal(stored.values, gradient_values)
    nested = stored.gradient("strain")
    assert nested.shape == (6, 2, 3, 2, 2)
    np.testing.assert_array_equal(nested.values, second_values)
    assert [c.names[0] for c in nested.components] == ["abc", "xyz", "c0"]

    copy = block.copy()
    np.testing.assert_array_equal(
        copy.gradient("positions").gradient("strain").values, second_values
    )
    assert copy == block


def test_gradient_of_gradient_validated(block_and_values, gradient_and_values, random_values):
    block, _ = block_and_values(n_samples=3)
    gradient, _ = gradient_and_values(block, n_samples=4)
    # the "sample" dimension of a second-level gradient points into the 4 samples
    # of the first-level gradient
    samples = _gradient_samples([0, 4])
    bad = TensorBlock(random_values((2, 3, 2)), samples, gradient.components, gradient.properties)
    with pytest.raises(blockmap.ValidationError):
        gradient.add_gradient("strain", bad)


def test_gradient_first_sample_dimension_must_be_sample(block_and_values, random_values):
    block, _ = block_and_values(n_samples=3)
    samples = _gradient_samples([0, 1], names=("structure", "atom"))
    gradient = TensorBlock(random_values((2, 3, 2)), samples, [_xyz()], block.properties)
    with pytest.raises(blockmap.ValidationError, match="sample"):
        block.add_gradient("positions", gradient)
    assert not block.has_gradient("positions")


def test_gradient_sample_dimension_not_first(block_and_values, random_values):
    block, _ = block_and_values(n_samples=3)
    samples = _gradient_samples([0, 1], names=("atom", "sample"))
    gradient = TensorBlock(random_values((2, 2)), samples, [], block.properties)
    with pytest.raises(blockmap.ValidationError):
        block.add_gradient("positions", gradient)


@pytest.mark.parametrize("bad_index", [3, 100, -1])
def test_gradient_sample_out_of_range(block_and_values, random_values, bad_index):
    block, _ = block_and_values(n_samples=3)
    samples = _gradient_samples([0, bad_index, 2])
    gradient = TensorBlock(random_values((3, 3, 2)), samples, [_xyz()], block.properties)
    with pytest.raises(blockmap.ValidationError):
        block.add_gradient("positions", gradient)
    assert block.gradients_list() == []


def test_gradient_sample_last_valid_index(block_and_values, random_values):
    block, _ = block_and_values(n_samples=3)
    samples = _gradient_samples([2])
    gradient = TensorBlock(random_values((1, 2)), samples, [], block.properties)
    block.add_gradient("positions", gradient)
    assert block.has_gradient("positions")


def test_gradient_properties_must_match(block_and_values, random_values):
    block, _ = block_and_values(n_samples=3, n_properties=2)
    samples = _gradient_samples([0, 1])
    other_values = Labels("n", np.array([[0], [7]]))
    gradient = TensorBlock(random_values((2, 2)), samples, [], other_values)
    with pytest.raises(blockmap.ValidationError):
        block.add_gradient("positions", gradient)
    other_names = Labels.range("m", 2)
    gradient = TensorBlock(random_values((2, 2)), samples, [], other_names)
    with pytest.raises(blockmap.ValidationError):
        block.add_gradient("positions", gradient)
    other_count = Labels.range("n", 3)
    gradient = TensorBlock(random_values((2, 3)), samples, [], other_count)
    with pytest.raises(blockmap.ValidationError):
        block.add_gradient("positions", gradient)


def test_gradient_components_must_end_with_parent_components(block_and_values, random_values):
    block, _ = block_and_values(n_samples=3, component_sizes=(2,), component_names=["o3_mu"])
    parent_component = block.components[0]
    samples = _gradient_samples([0, 1])

    # parent's component missing
    gradient = TensorBlock(random_values((2, 3, 2)), samples, [_xyz()], block.properties)
    with pytest.raises(blockmap.ValidationError):
        block.add_gradient("positions", gradient)

    # parent's component first instead of last
    gradient = TensorBlock(
        random_values((2, 2, 3, 2)), samples, [parent_component, _xyz()], block.properties
    )
    with pytest.raises(blockmap.ValidationError):
        block.add_gradient("positions", gradient)

    # a component with the parent's name but other values
    changed = Labels("o3_mu", np.array([[0], [5]]))
    gradient = TensorBlock(
        random_values((2, 3, 2, 2)), samples, [_xyz(), changed], block.properties
    )
    with pytest.raises(blockmap.ValidationError):
        block.add_gradient("positions", gradient)

    # no components at all
    gradient = TensorBlock(random_values((2, 2)), samples, [], block.properties)
    with pytest.raises(blockmap.ValidationError):
        block.add_gradient("positions", gradient)

    assert block.gradients_list() == []


def test_gradient_dtype_must_match(block_and_values, random_values):
    block, _ = block_and_values(n_samples=3, dtype=np.float64)
    samples = _gradient_samples([0, 1])
    gradient = TensorBlock(
        random_values((2, 3, 2), np.float32), samples, [_xyz()], block.properties
    )
    with pytest.raises(blockmap.ValidationError):
        block.add_gradient("positions", gradient)


def test_gradient_added_twice(block_and_values, gradient_and_values):
    block, _ = block_and_values()
    first, first_values = gradient_and_values(block)
    second, _ = gradient_and_values(block)
    block.add_gradient("positions", first)
    with pytest.raises(blockmap.ValidationError, match="positions"):
        block.add_gradient("positions", second)
    np.testing.assert_array_equal(block.gradient("positions").values, first_values)
    assert block.gradients_list() == ["positions"]


def test_missing_gradient(block_and_values):
    block, _ = block_and_values()
    with pytest.raises(blockmap.ValidationError, match="missing"):
        block.gradient("missing")
    with pytest.raises(ValueError):
        block.gradient("missing")


def test_block_as_its_own_gradient(block_and_values):
    # the samples of this block are ("system", "atom"): it is not a valid gradient
    block, _ = block_and_values()
    with pytest.raises(blockmap.ValidationError):
        block.add_gradient("positions", block)
    assert block.gradients_list() == []


def test_add_gradient_to_gradient_view_keeps_parent_valid(block_and_values, gradient_and_values):
    block, _ = block_and_values()
    gradient, _ = gradient_and_values(block)
    block.add_gradient("positions", gradient)
    view = block.gradient("positions")
    nested, _ = gradient_and_values(view, extra=())
    try:
        view.add_gradient("strain", nested)
    except blockmap.ValidationError:
        assert block.gradient("positions").gradients_list() == []
    else:
        # if it is allowed, the parent must see a consistent tree
        assert block.gradient("positions").gradients_list() in ([], ["strain"])


def test_add_gradient_requires_block(block_and_values):
    block, _ = block_and_values()
    with pytest.raises(TypeError):
        block.add_gradient("positions", np.zeros((3, 3, 2)))


def test_nbytes_counts_gradients(block_and_values, gradient_and_values):
    block, _ = block_and_values(component_sizes=(3,))
    without = block.nbytes
    gradient, _ = gradient_and_values(block)
    block.add_gradient("positions", gradient)
    assert block.nbytes == without + gradient.nbytes
    assert block.nbytes == _expected_nbytes(block)


# ------------------------------------------------------------------------ copy


def test_copy(block_and_values, gradient_and_values):
    block, values = block_and_values(component_sizes=(3,))
    gradient, gradient_values = gradient_and_values(block)
    block.add_gradient("positions", gradient)

    copy = block.copy()
    assert isinstance(copy, TensorBlock)
    assert copy == block
    np.testing.assert_array_equal(copy.values, values)
    assert not np.shares_memory(copy.values, block.values)
    assert not np.shares_memory(copy.values, values)
    assert copy.samples == block.samples
    assert copy.components == block.components
    assert copy.properties == block.properties
    assert copy.gradients_list() == ["positions"]
    copied_gradient = copy.gradient("positions")
    np.testing.assert_array_equal(copied_gradient.values, gradient_values)
    assert not np.shares_memory(copied_gradient.values, gradient_values)


def test_copy_is_independent(block_and_values, gradient_and_values):
    block, values = block_and_values()
    gradient, gradient_values = gradient_and_values(block)
    block.add_gradient("positions", gradient)
    original = values.copy()
    original_gradient = gradient_values.copy()

    copy = block.copy()
    copy.values[...] = 0
    copy.gradient("positions").values[...] = 0
    np.testing.assert_array_equal(block.values, original)
    np.testing.assert_array_equal(block.gradient("positions").values, original_gradient)
    assert copy != block

    block.values[0, 0] = 123.0
    assert copy.values[0, 0] == 0.0

    extra, _ = gradient_and_values(block)
    copy.add_gradient("strain", extra)
    assert not block.has_gradient("strain")


# -------------------------------------------------------------------- equality


def test_equality(block_and_values):
    block, values = block_and_values(component_sizes=(3,))
    same = TensorBlock(values.copy(), block.samples, block.components, block.properties)
    assert block == same
    assert not block != same
    assert block == block


def test_inequality_values(block_and_values):
    block, values = block_and_values()
    changed_values = values.copy()
    changed_values[1, 1] += 1.0
    other = TensorBlock(changed_values, block.samples, block.components, block.properties)
    assert block != other
    assert not block == other


def test_inequality_labels(block_and_values):
    block, values = block_and_values(n_samples=3, component_sizes=(3,))
    other_samples = Labels(["system", "atom"], np.array([[0, 0], [0, 1], [0, 5]]))
    assert block != TensorBlock(values, other_samples, block.components, block.properties)
    renamed_samples = Labels(["system", "center"], block.samples.values)
    assert block != TensorBlock(values, renamed_samples, block.components, block.properties)
    other_properties = Labels("n", np.array([[0], [9]]))
    assert block != TensorBlock(values, block.samples, block.components, other_properties)
    other_components = [Labels("c1", np.array([[0], [1], [2]]))]
    assert block != TensorBlock(values, block.samples, other_components, block.properties)


def test_inequality_dtype():
    values = np.arange(6, dtype=np.float64).reshape(3, 2)
    block = TensorBlock(values, _samples(3), [], Labels.range("n", 2))
    other = TensorBlock(values.astype(np.float32), _samples(3), [], Labels.range("n", 2))
    assert block != other
    assert not block == other


def test_inequality_gradients(block_and_values, gradient_and_values):
    block, values = block_and_values()
    gradient, gradient_values = gradient_and_values(block)
    block.add_gradient("positions", gradient)

    without = TensorBlock(values, block.samples, block.components, block.properties)
    assert block != without
    assert without != block

    same = TensorBlock(values, block.samples, block.components, block.properties)
    same.add_gradient(
        "positions",
        TensorBlock(
            gradient_values.copy(), gradient.samples, gradient.components, gradient.properties
        ),
    )
    assert block == same

    changed_values = gradient_values.copy()
    changed_values[0, 0, 0] += 1.0
    changed = TensorBlock(values, block.samples, block.components, block.properties)
    changed.add_gradient(
        "positions",
        TensorBlock(changed_values, gradient.samples, gradient.components, gradient.properties),
    )
    assert block != changed

    renamed = TensorBlock(values, block.samples, block.components, block.properties)
    renamed.add_gradient("strain", gradient)
    assert block != renamed


def test_equality_with_other_types(block_and_values):
    block, values = block_and_values()
    assert block != "block"
    assert not block == 1
    assert block != block.samples


# ------------------------------------------------------------------------ repr


def test_repr(block_and_values, gradient_and_values):
    block, _ = block_and_values(
        n_samples=5,
        component_sizes=(3,),
        n_properties=4,
        sample_names=("structure", "center"),
        property_name="radial",
    )
    gradient, _ = gradient_and_values(block, sample_names=["sample", "structure", "center"])
    block.add_gradient("positions", gradient)
    text = repr(block)
    assert re.search(r"5\D+3\D+4", text), text
    assert "structure" in text
    assert "center" in text
    assert "radial" in text
    assert "positions" in text


def test_repr_layout(block_and_values):
    # metatensor-core's layout, which does not show the dtype
    block, _ = block_and_values(dtype=np.int16)
    assert str(block) == (
        "TensorBlock with shape (3, 2)\n    samples: [system, atom]\n    properties: [n]"
    )
    # repr adds what a user cannot otherwise see
    assert repr(block) == (
        str(block) + "\n    arrays: numpy, int16, writable, viewing another object's memory"
    )


def test_repr_shows_backend_dtype_access_and_storage(tmp_path):
    import blockmap

    block = TensorBlock(
        np.zeros((2, 3), dtype=np.float32), Labels.range("s", 2), [], Labels.range("p", 3)
    )
    tensor = blockmap.TensorMap(Labels.range("k", 1), [block])
    path = tmp_path / "map.mts"
    blockmap.save(path, tensor)
    read_only = np.zeros((2, 3))
    read_only.flags.writeable = False
    cases = {
        "numpy, float32, writable, viewing another object's memory": repr(block),
        "numpy, float32, writable, in memory": repr(blockmap.load(path)),
        "numpy, float32, read-only, mapped from a file": repr(blockmap.load(path, mmap=True)),
        "numpy, float32, writable, mapped from a file": repr(blockmap.load(path, mmap="c")),
        "numpy, float64, read-only, viewing another object's memory": repr(
            TensorBlock(read_only, Labels.range("s", 2), [], Labels.range("p", 3))
        ),
        "numpy, float32, writable, in shared memory": repr(blockmap.load(path).share_memory()),
    }
    if importlib.util.find_spec("torch") is not None:
        cases["torch, float32, writable, in memory"] = repr(blockmap.load(path, arrays="torch"))
    for line, text in cases.items():
        assert text.endswith("\n    arrays: " + line), text
