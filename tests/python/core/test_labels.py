import numpy as np
import pytest

import blockmap
from blockmap import Labels, LabelsEntry
from helpers.dtypes import INTEGER_DTYPES


@pytest.fixture
def labels():
    return Labels(["system", "atom"], np.array([[0, 1], [0, 2], [3, 4]], dtype=np.int32))


# --------------------------------------------------------------------- errors


def test_error_hierarchy():
    assert issubclass(blockmap.BlockMapError, Exception)
    assert issubclass(blockmap.ValidationError, blockmap.BlockMapError)
    assert issubclass(blockmap.ValidationError, ValueError)
    assert issubclass(blockmap.BlockMapTypeError, blockmap.BlockMapError)
    assert issubclass(blockmap.BlockMapTypeError, TypeError)


def test_error_classes_exported_from_package():
    from blockmap import _blockmap

    assert blockmap.BlockMapError is _blockmap.BlockMapError
    assert blockmap.ValidationError is _blockmap.ValidationError
    assert blockmap.BlockMapTypeError is _blockmap.BlockMapTypeError


# --------------------------------------------------------------- construction


def test_construct_names_list():
    labels = Labels(["a", "b"], np.array([[0, 1], [2, 3]]))
    assert labels.names == ["a", "b"]
    assert len(labels) == 2
    np.testing.assert_array_equal(labels.values, [[0, 1], [2, 3]])


def test_construct_names_str():
    labels = Labels("atom", np.array([[0], [1], [5]]))
    assert labels.names == ["atom"]
    assert len(labels) == 3
    np.testing.assert_array_equal(labels.values, [[0], [1], [5]])


def test_construct_names_tuple():
    labels = Labels(("a", "b"), np.array([[0, 1]]))
    assert labels.names == ["a", "b"]


@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
def test_construct_any_integer_dtype(dtype):
    values = np.array([[0, 1], [2, 3], [127, 4]], dtype=dtype)
    labels = Labels(["a", "b"], values)
    assert labels.values.dtype == np.int32
    assert labels.values.shape == (3, 2)
    np.testing.assert_array_equal(labels.values, values.astype(np.int64))


def test_construct_int32_extremes():
    values = np.array([[np.iinfo(np.int32).min], [np.iinfo(np.int32).max], [0]], dtype=np.int64)
    labels = Labels("a", values)
    np.testing.assert_array_equal(labels.values, values)


def test_lists_are_refused_as_in_metatensor():
    # metatensor-core takes numpy arrays only, and says so with a ValueError
    with pytest.raises(ValueError, match="numpy ndarray"):
        Labels(["a", "b"], [[0, 1], [1, 0], [-3, 7]])


def test_construct_non_contiguous_values():
    full = np.arange(24, dtype=np.int64).reshape(6, 4)
    labels = Labels(["a", "b"], full[::2, 1::2])
    np.testing.assert_array_equal(labels.values, full[::2, 1::2])


def test_values_are_copied_at_construction():
    values = np.array([[0, 1], [2, 3]], dtype=np.int32)
    labels = Labels(["a", "b"], values)
    values[0, 0] = 42
    np.testing.assert_array_equal(labels.values, [[0, 1], [2, 3]])


def test_values_dtype_and_shape(labels):
    values = labels.values
    assert isinstance(values, np.ndarray)
    assert values.dtype == np.int32
    assert values.shape == (3, 2)
    np.testing.assert_array_equal(values, [[0, 1], [0, 2], [3, 4]])


def test_values_are_read_only(labels):
    values = labels.values
    assert not values.flags.writeable
    with pytest.raises(ValueError):
        values[0, 0] = 10
    with pytest.raises(ValueError):
        values.flags.writeable = True
    assert not labels.values.flags.writeable
    np.testing.assert_array_equal(labels.values, [[0, 1], [0, 2], [3, 4]])


def test_values_are_views(labels):
    assert np.shares_memory(labels.values, labels.values)
    assert labels.values.base is not None


def test_values_view_outlives_labels():
    labels = Labels(["a", "b"], np.array([[5, 6], [7, 8]]))
    values = labels.values
    del labels
    np.testing.assert_array_equal(values, [[5, 6], [7, 8]])


def test_assume_unique_skips_check():
    values = np.array([[0, 1], [0, 1]])
    with pytest.raises(blockmap.ValidationError):
        Labels(["a", "b"], values)
    labels = Labels(["a", "b"], values, assume_unique=True)
    assert len(labels) == 2


def test_assume_unique_with_unique_values():
    labels = Labels(["a"], np.array([[3], [1]]), assume_unique=True)
    np.testing.assert_array_equal(labels.values, [[3], [1]])
    assert labels.position((1,)) == 1


def test_single():
    labels = Labels.single()
    assert labels.names == ["_"]
    assert len(labels) == 1
    assert labels.values.dtype == np.int32
    np.testing.assert_array_equal(labels.values, [[0]])
    assert labels == Labels("_", np.array([[0]]))


@pytest.mark.parametrize("names", [["a", "b"], "a"])
def test_empty(names):
    labels = Labels.empty(names)
    expected_names = [names] if isinstance(names, str) else names
    assert labels.names == expected_names
    assert len(labels) == 0
    assert labels.values.shape == (0, len(expected_names))
    assert labels.values.dtype == np.int32
    assert list(labels) == []
    assert labels.position([0] * len(expected_names)) is None


def test_empty_from_constructor():
    labels = Labels(["a", "b"], np.zeros((0, 2), dtype=np.int32))
    assert len(labels) == 0
    assert labels == Labels.empty(["a", "b"])


def test_range():
    labels = Labels.range("atom", 4)
    assert labels.names == ["atom"]
    assert len(labels) == 4
    assert labels.values.dtype == np.int32
    np.testing.assert_array_equal(labels.values, [[0], [1], [2], [3]])


def test_range_zero():
    labels = Labels.range("atom", 0)
    assert len(labels) == 0
    assert labels.names == ["atom"]


# ------------------------------------------------------- construction errors


def test_duplicate_rows():
    with pytest.raises(blockmap.ValidationError) as info:
        Labels(["a", "b"], np.array([[0, 1], [1, 2], [0, 1]]))
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, blockmap.BlockMapError)


def test_duplicate_rows_caught_as_value_error():
    with pytest.raises(ValueError):
        Labels("a", np.array([[1], [1]]))


@pytest.mark.parametrize("name", ["1a", "a b", "", "a-b", "a.b"])
def test_invalid_names(name):
    with pytest.raises(blockmap.ValidationError):
        Labels([name], np.array([[0]]))
    with pytest.raises(blockmap.ValidationError):
        Labels(["ok", name], np.array([[0, 0]]))


def test_invalid_name_message_mentions_name():
    with pytest.raises(blockmap.ValidationError, match="1a"):
        Labels(["1a"], np.array([[0]]))


def test_valid_identifier_names():
    labels = Labels(["_", "a1", "_private", "CamelCase"], np.array([[0, 1, 2, 3]]))
    assert labels.names == ["_", "a1", "_private", "CamelCase"]


def test_duplicate_names():
    with pytest.raises(blockmap.ValidationError, match="a"):
        Labels(["a", "a"], np.array([[0, 1]]))


def test_empty_with_duplicate_names():
    with pytest.raises(blockmap.ValidationError):
        Labels.empty(["a", "a"])


def test_invalid_range_name():
    with pytest.raises(blockmap.ValidationError):
        Labels.range("not valid", 3)


def test_values_one_dimensional():
    with pytest.raises(blockmap.ValidationError):
        Labels("a", np.array([0, 1, 2]))


def test_values_three_dimensional():
    with pytest.raises(blockmap.ValidationError):
        Labels("a", np.zeros((2, 1, 1), dtype=np.int32))


def test_values_wrong_number_of_columns():
    with pytest.raises(blockmap.ValidationError):
        Labels(["a", "b"], np.array([[0, 1, 2]]))
    with pytest.raises(blockmap.ValidationError):
        Labels(["a", "b", "c"], np.array([[0, 1]]))
    with pytest.raises(blockmap.ValidationError):
        Labels(["a", "b"], np.array([[0], [1]]))


@pytest.mark.parametrize(
    "values",
    [
        np.zeros((2, 1), dtype=np.float64),
        np.zeros((2, 1), dtype=np.float32),
        np.zeros((2, 1), dtype=np.complex128),
    ],
)
def test_float_values_are_type_errors(values):
    with pytest.raises(blockmap.BlockMapTypeError) as info:
        Labels("a", values)
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, blockmap.BlockMapError)


@pytest.mark.parametrize("values", [np.array([["x"], ["y"]]), np.array([[0], [1]], dtype=object)])
def test_string_values_are_type_errors(values):
    with pytest.raises(blockmap.BlockMapTypeError):
        Labels("a", values)


@pytest.mark.parametrize(
    "values",
    [
        np.array([[2**31]], dtype=np.int64),
        np.array([[-(2**31) - 1]], dtype=np.int64),
        np.array([[2**31]], dtype=np.uint32),
        np.array([[2**63]], dtype=np.uint64),
        np.array([[0], [2**40]]),
    ],
)
def test_values_out_of_int32_range(values):
    with pytest.raises(blockmap.ValidationError):
        Labels("a", values)


def test_non_str_names_are_type_errors():
    with pytest.raises(TypeError):
        Labels([1], np.array([[0]]))


# -------------------------------------------------------------------- entries


def test_getitem_int_returns_entry(labels):
    entry = labels[1]
    assert isinstance(entry, LabelsEntry)
    assert entry.names == ["system", "atom"]
    assert entry.values.dtype == np.int32
    np.testing.assert_array_equal(entry.values, [0, 2])
    assert len(entry) == 2


def test_entry_getitem(labels):
    entry = labels[2]
    assert entry["system"] == 3
    assert entry["atom"] == 4
    assert entry[0] == 3
    assert entry[1] == 4
    assert entry[-1] == 4
    assert entry[-2] == 3
    # numpy scalars, as metatensor-core gives them
    assert isinstance(entry[0], np.int32)
    assert isinstance(entry["atom"], np.int32)


def test_entry_getitem_errors(labels):
    entry = labels[0]
    with pytest.raises(IndexError):
        entry[2]
    with pytest.raises(IndexError):
        entry[-3]
    with pytest.raises((KeyError, ValueError)):
        entry["missing"]


def test_entry_iteration(labels):
    assert list(labels[2]) == [3, 4]
    assert tuple(labels[0]) == (0, 1)


def test_entry_equality_and_hash(labels):
    other = Labels(["system", "atom"], np.array([[9, 9], [0, 1]]))
    assert labels[0] == other[1]
    assert not labels[0] != other[1]
    assert hash(labels[0]) == hash(other[1])
    assert labels[0] != labels[1]
    assert labels[0] != other[0]
    assert len({labels[0], other[1], labels[1]}) == 2


def test_entry_outlives_labels():
    labels = Labels(["a", "b"], np.array([[1, 2], [3, 4]]))
    entry = labels[1]
    del labels
    assert entry["b"] == 4
    np.testing.assert_array_equal(entry.values, [3, 4])


def test_getitem_negative_index(labels):
    assert list(labels[-1]) == [3, 4]
    assert list(labels[-3]) == [0, 1]


def test_getitem_out_of_range(labels):
    with pytest.raises(IndexError):
        labels[3]
    with pytest.raises(IndexError):
        labels[-4]
    with pytest.raises(IndexError):
        Labels.empty("a")[0]


def test_getitem_huge_index(labels):
    with pytest.raises(IndexError):
        labels[2**70]
    with pytest.raises(IndexError):
        labels[0][2**70]


def test_getitem_str_returns_column(labels):
    column = labels["atom"]
    assert isinstance(column, np.ndarray)
    assert column.dtype == np.int32
    assert column.shape == (3,)
    np.testing.assert_array_equal(column, [1, 2, 4])
    np.testing.assert_array_equal(labels["system"], [0, 0, 3])


def test_column(labels):
    np.testing.assert_array_equal(labels.column("system"), [0, 0, 3])
    np.testing.assert_array_equal(labels.column("atom"), labels["atom"])
    assert labels.column("atom").dtype == np.int32


def test_column_missing(labels):
    with pytest.raises((KeyError, ValueError)):
        labels.column("missing")
    with pytest.raises((KeyError, ValueError)):
        labels["missing"]


def test_iteration(labels):
    entries = list(labels)
    assert len(entries) == 3
    assert all(isinstance(entry, LabelsEntry) for entry in entries)
    assert [list(entry) for entry in entries] == [[0, 1], [0, 2], [3, 4]]
    assert all(entry.names == ["system", "atom"] for entry in entries)


def test_len():
    assert len(Labels.range("a", 7)) == 7
    assert len(Labels.single()) == 1
    assert len(Labels.empty("a")) == 0


# ------------------------------------------------------------------- position


def test_position_with_entry(labels):
    for i, entry in enumerate(labels):
        assert labels.position(entry) == i


def test_position_with_entry_of_other_labels(labels):
    other = Labels(["system", "atom"], np.array([[3, 4], [9, 9]]))
    assert labels.position(other[0]) == 2
    assert labels.position(other[1]) is None


def test_position_with_tuple_list_array(labels):
    assert labels.position((0, 2)) == 1
    assert labels.position([3, 4]) == 2
    assert labels.position(np.array([0, 1])) == 0
    assert labels.position(np.array([0, 1], dtype=np.int32)) == 0
    assert labels.position(np.array([3, 4], dtype=np.int64)) == 2
    assert isinstance(labels.position((0, 2)), int)


def test_position_missing(labels):
    assert labels.position((1, 1)) is None
    assert labels.position([4, 3]) is None
    assert labels.position(np.array([0, 3])) is None


def test_position_wrong_length(labels):
    with pytest.raises(blockmap.ValidationError):
        labels.position((0,))
    with pytest.raises(blockmap.ValidationError):
        labels.position([0, 1, 2])
    other = Labels("a", np.array([[0]]))
    with pytest.raises(blockmap.ValidationError):
        labels.position(other[0])


def test_position_large_labels():
    values = np.stack([np.arange(5000) // 50, np.arange(5000) % 50], axis=1)
    labels = Labels(["a", "b"], values)
    assert labels.position((42, 17)) == 42 * 50 + 17
    assert labels.position((100, 0)) is None


def test_contains(labels):
    assert (0, 1) in labels
    assert [3, 4] in labels
    assert np.array([0, 2]) in labels
    assert labels[1] in labels
    assert (1, 0) not in labels
    assert [4, 3] not in labels


# ------------------------------------------------------------------- equality


def test_equality(labels):
    same = Labels(["system", "atom"], np.array([[0, 1], [0, 2], [3, 4]], dtype=np.int64))
    assert labels == same
    assert not labels != same
    assert labels == labels


def test_inequality_names(labels):
    renamed = Labels(["system", "center"], np.array([[0, 1], [0, 2], [3, 4]]))
    assert labels != renamed
    assert not labels == renamed


def test_inequality_values(labels):
    changed = Labels(["system", "atom"], np.array([[0, 1], [0, 2], [3, 5]]))
    assert labels != changed
    assert not labels == changed
    shorter = Labels(["system", "atom"], np.array([[0, 1], [0, 2]]))
    assert labels != shorter
    reordered = Labels(["system", "atom"], np.array([[0, 2], [0, 1], [3, 4]]))
    assert labels != reordered


def test_equality_with_other_types_is_a_type_error(labels):
    # as in metatensor-core: Labels compare only with Labels
    for other in (3, "labels", labels.names, None):
        with pytest.raises(TypeError):
            labels == other  # noqa: B015
        with pytest.raises(TypeError):
            labels != other  # noqa: B015


def test_empty_labels_equality():
    assert Labels.empty(["a"]) == Labels.empty(["a"])
    assert Labels.empty(["a"]) != Labels.empty(["b"])


# ----------------------------------------------------------------------- repr


def test_repr():
    # metatensor's layout: every entry in repr, at most 4 in str
    labels = Labels(["first", "second"], np.array([[i, 2 * i] for i in range(7)]))
    text = repr(labels)
    assert text.splitlines()[:2] == ["Labels", "    first  second"]
    assert len(text.splitlines()) == 2 + 7
    assert text.splitlines()[-1] == "      6      12"
    assert len(str(labels).splitlines()) == 2 + 4 + 1


def test_repr_empty():
    assert repr(Labels.empty(["first"])) == "Labels\n    first"


@pytest.mark.parametrize("layout", ["fortran", "reversed", "strided"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint16])
def test_values_in_any_memory_layout(layout, dtype):
    base = np.arange(40, dtype=dtype).reshape(20, 2)
    if layout == "fortran":
        values = np.asfortranarray(base)
    elif layout == "reversed":
        values = base[::-1]
    else:
        values = np.arange(80, dtype=dtype).reshape(20, 4)[:, ::2]
    labels = Labels(["a", "b"], values)
    np.testing.assert_array_equal(labels.values, values)
    assert labels.position(tuple(int(v) for v in values[3])) == 3


def test_labels_are_hashable_by_value():
    a = Labels(["x", "y"], np.array([[0, 1], [2, 3]]))
    b = Labels(["x", "y"], np.array([[0, 1], [2, 3]], dtype=np.int64))
    c = Labels(["x", "z"], np.array([[0, 1], [2, 3]]))
    assert hash(a) == hash(b)
    assert {a: 1}[b] == 1
    assert a != c
    assert len({a, b, c}) == 2
