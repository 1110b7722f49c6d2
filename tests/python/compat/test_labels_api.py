"""blockmap's Labels and LabelsEntry against metatensor-core's, the oracle.

Each test runs the same calls on the same data with both libraries
(``same_outcome``, see conftest.py) and compares the results entry by entry
(names, values, dtypes, mappings, text), or, when metatensor raises, checks that
blockmap raises the same builtin exception (a ``blockmap.MetatensorError`` where
metatensor raises ``MetatensorError``). The deliberate differences
(docs/metatensor.md) are tested on their own, with what each library does.
"""

import copy
import pickle

import numpy as np
import pytest

import blockmap

mts = pytest.importorskip("metatensor")


def labels(lib, names, rows):
    """``lib.Labels`` with ``names`` and int32 ``rows``."""
    values = np.array(rows, dtype=np.int32).reshape(len(rows), len(names))
    return lib.Labels(names, values)


AB = (["a", "b"], [[0, 1], [1, 2], [0, 3]])
ABC = (["a", "b", "c"], [[0, 1, 5], [1, 2, 5], [0, 3, 6], [2, 2, 7]])


def ab(lib):
    return labels(lib, *AB)


# ------------------------------------------------------------------ the names

# metatensor's C-API pointer methods and private helpers have no equivalent
SKIPPED = {
    "as_mts_labels_t",
    "_as_mts_labels_t",
    "unsafe_from_ptr",
    "release",
    "_raw_values",
    "_from_pickle",
    "_repr_html_",
    "__del__",
    "__dict__",
    "__weakref__",
}


@pytest.mark.parametrize("name", ["Labels", "LabelsEntry"])
def test_every_public_name_of_metatensor_is_there(name):
    missing = set(dir(getattr(mts, name))) - set(dir(getattr(blockmap, name))) - SKIPPED
    assert not missing


def test_metatensor_error_is_blockmap_error():
    assert blockmap.MetatensorError is blockmap.BlockMapError
    assert "MetatensorError" in blockmap.__all__
    assert blockmap.exceptions.MetatensorError is blockmap.BlockMapError
    with pytest.raises(blockmap.MetatensorError) as info:
        blockmap.Labels(["a"], np.array([[1], [1]]))
    assert "[1]" in info.value.message
    assert info.value.message == str(info.value)
    with pytest.raises(blockmap.MetatensorError) as info:
        blockmap.load("does-not-exist.mts")
    assert "does-not-exist" in info.value.message


# ------------------------------------------------------------ the constructor

NAMES = [
    "a",
    "",
    ["a"],
    ("a",),
    ["a", "b"],
    np.array(["a", "b"]),
    {"a": 0, "b": 1},
    [],
    (),
    ["_", "a1", "CamelCase"],
    # refused
    None,
    3,
    b"ab",
    [1],
    ["a", 1],
    ["a", "a"],
    ["1a"],
    ["a b"],
    ["é"],
    [""],
]


@pytest.mark.parametrize("names", NAMES, ids=repr)
def test_constructor_names(names, same_outcome):
    if isinstance(names, str):
        n_names = 1 if names else 0
    else:
        n_names = len(names) if hasattr(names, "__len__") else 1
    # two entries (one without dimensions: see the test of their differences)
    count = 2 if n_names else 1

    def make(lib):
        return lib.Labels(names, np.arange(count * n_names).reshape(count, n_names))

    same_outcome(make)


def test_constructor_names_from_a_generator(same_outcome):
    same_outcome(lambda lib: lib.Labels((n for n in ["a", "b"]), np.array([[0, 1]])))


VALUES = {
    "int32": np.array([[0, 1], [2, 3]], dtype=np.int32),
    "int64": np.array([[0, 1], [2, 3]], dtype=np.int64),
    "int8": np.array([[0, 1], [2, -3]], dtype=np.int8),
    "uint16": np.array([[0, 1], [2, 3]], dtype=np.uint16),
    "uint64": np.array([[0, 1], [2, 3]], dtype=np.uint64),
    "int32 extremes": np.array([[-(2**31), 2**31 - 1], [0, 0]], dtype=np.int64),
    "bool": np.array([[True, False], [False, True]]),
    "big endian": np.array([[0, 1], [2, 3]], dtype=">i4"),
    "fortran": np.asfortranarray(np.array([[0, 1], [2, 3], [4, 5]])),
    "strided": np.arange(24).reshape(6, 4)[::2, 1::2],
    "reversed": np.array([[0, 1], [2, 3]])[::-1],
    "empty int": np.zeros((0, 2), dtype=np.int32),
    "empty float": np.zeros((0, 2)),
    "empty 1-D": np.zeros((0,)),
    "empty 3-D": np.zeros((0, 4, 5)),
    "empty strings": np.zeros((0, 2), dtype="U1"),
    # refused
    "list": [[0, 1], [2, 3]],
    "tuple": ((0, 1), (2, 3)),
    "empty list": [],
    "None": None,
    "scalar": 3,
    "0-D": np.array(3),
    "1-D": np.array([0, 1]),
    "3-D": np.zeros((2, 2, 1), dtype=np.int32),
    "too many columns": np.array([[0, 1, 2]]),
    "too few columns": np.array([[0], [1]]),
    "float": np.array([[0.0, 1.0], [2.0, 3.0]]),
    "float32": np.array([[0.5, 1.0]], dtype=np.float32),
    "complex": np.zeros((2, 2), dtype=np.complex128),
    "strings": np.array([["a", "b"]]),
    "bytes": np.array([[b"a", b"b"]]),
    "object": np.array([[0, 1]], dtype=object),
    "datetime": np.zeros((1, 2), dtype="M8[s]"),
    "duplicates": np.array([[0, 1], [2, 3], [0, 1]]),
    "duplicates int8": np.array([[0, 1], [0, 1]], dtype=np.int8),
}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_constructor_values(name, same_outcome):
    values = VALUES[name]
    result = same_outcome(lambda lib: lib.Labels(["a", "b"], values))
    if result is not None:
        assert result.values.dtype == np.int32
        assert not result.values.flags.writeable


@pytest.mark.parametrize("assume_unique", [True, 1, "yes", False, 0, None])
def test_assume_unique_is_taken_for_its_truth(assume_unique, same_outcome):
    values = np.array([[0], [0]])
    same_outcome(lambda lib: len(lib.Labels("a", values, assume_unique=assume_unique)))
    same_outcome(lambda lib: len(lib.Labels("a", values, assume_unique)))


def test_keyword_arguments(same_outcome):
    same_outcome(lambda lib: lib.Labels(names=["a"], values=np.array([[1]]), assume_unique=False))


@pytest.mark.parametrize("shape", [(0,), (0, 1), (0, 5), (0, 1, 2), (3, 0), (0, 0)])
@pytest.mark.parametrize("names", [[], ["a"], ["a", "b"]], ids=["0 names", "1 name", "2 names"])
def test_values_without_entries_as_metatensor_takes_them(shape, names, same_outcome, tmp_path):
    values = np.zeros(shape, dtype=np.int32)
    if shape == (3, 0) and names == []:
        # the one deliberate difference (docs/metatensor.md): labels without
        # dimensions have at most one entry in blockmap
        assert mts.Labels(names, values).values.shape == (3, 0)
        with pytest.raises(blockmap.ValidationError, match="without dimensions"):
            blockmap.Labels(names, values)
        return
    result = same_outcome(lambda lib: lib.Labels(names, values))
    if result is None:
        return
    assert result.values.shape == (0, len(names))
    # what is accepted round-trips through files, buffers and pickles
    path = tmp_path / "labels.mts"
    blockmap.save(path, result)
    for loaded in (
        blockmap.load_labels(path),
        blockmap.load_labels_buffer(blockmap.save_buffer(result)),
        pickle.loads(pickle.dumps(result, protocol=4)),
        pickle.loads(pickle.dumps(result, protocol=5)),
        copy.deepcopy(result),
    ):
        assert loaded == result
        assert loaded.names == names and loaded.values.shape == (0, len(names))
    if names:
        # and metatensor-core reads the file blockmap wrote
        theirs = mts.load_labels(path)
        assert theirs.names == names and theirs.values.shape == (0, len(names))


def test_values_out_of_int32_range_are_refused_not_wrapped():
    """A deliberate difference: metatensor wraps them around (a silent change
    of the data), blockmap refuses them with a ValueError."""
    for values in (
        np.array([[0], [2**31]], dtype=np.int64),
        np.array([[0], [-(2**31) - 1]], dtype=np.int64),
        np.array([[0], [2**32 + 5]], dtype=np.uint64),
    ):
        wrapped = mts.Labels("a", values)
        assert wrapped.values[1, 0] == values.astype(np.int32)[1, 0]
        assert wrapped.values[1, 0] != values[1, 0]
        with pytest.raises(ValueError, match="int32"):
            blockmap.Labels("a", values)


def test_the_callers_array_is_copied_and_left_writable():
    """A deliberate difference: metatensor keeps an int32 array it is given as
    the values and makes it read-only; blockmap copies it and leaves it alone."""
    for lib in (mts, blockmap):
        values = np.array([[0], [1]], dtype=np.int32)
        made = lib.Labels("a", values)
        if lib is mts:
            assert made.values is values and not values.flags.writeable
        else:
            assert not np.shares_memory(made.values, values) and values.flags.writeable


# ---------------------------------------------------- labels without dimensions


def test_labels_without_dimensions_and_entries(same_outcome):
    same_outcome(lambda lib: lib.Labels([], np.zeros((0, 0), dtype=np.int32)))
    same_outcome(lambda lib: lib.Labels.empty([]))
    same_outcome(lambda lib: lib.Labels.empty(""))
    same_outcome(lambda lib: str(lib.Labels.empty([])))
    same_outcome(lambda lib: lib.Labels.empty([]) == lib.Labels([], np.zeros((0, 0))))


def test_labels_without_dimensions_and_one_entry(same_outcome):
    # metatensor's Python side sees one entry (its C side none): what is
    # comparable is the Python side
    same_outcome(lambda lib: len(lib.Labels([], np.zeros((1, 0), dtype=np.int32))))
    same_outcome(lambda lib: lib.Labels([], np.zeros((1, 0), dtype=np.int32)).values)
    same_outcome(lambda lib: repr(lib.Labels([], np.zeros((1, 0), dtype=np.int32))))
    same_outcome(lambda lib: repr(lib.Labels([], np.zeros((1, 0), dtype=np.int32))[0]))


def test_labels_without_dimensions_hold_at_most_one_entry():
    """A deliberate difference: without dimensions all entries are the same
    entry, so blockmap refuses more than one; metatensor takes them."""
    values = np.zeros((3, 0), dtype=np.int32)
    assert len(mts.Labels([], values)) == 3
    with pytest.raises(blockmap.MetatensorError):
        blockmap.Labels([], values)
    with pytest.raises(ValueError):
        blockmap.Labels([], values)


# ------------------------------------------------------ static constructors


@pytest.mark.parametrize("names", ["a", ["a", "b"], ("x",), [], "", 3, ["a", "a"], ["1"]])
def test_empty(names, same_outcome):
    same_outcome(lambda lib: lib.Labels.empty(names))


def test_single(same_outcome):
    same_outcome(lambda lib: lib.Labels.single())


@pytest.mark.parametrize(
    "name, end",
    [("a", 0), ("a", 1), ("n", 7), ("a", -3), ("_", 1000), ("1a", 2), ("", 2), (3, 2), (["a"], 2)],
)
def test_range(name, end, same_outcome):
    same_outcome(lambda lib: lib.Labels.range(name, end))
    same_outcome(lambda lib: lib.Labels.range(name=name, end=end))


# ----------------------------------------------------------- reading labels


def test_names_values_device(same_outcome):
    same_outcome(lambda lib: ab(lib).names)
    same_outcome(lambda lib: ab(lib).values)
    same_outcome(lambda lib: ab(lib).device)
    same_outcome(lambda lib: len(ab(lib)))
    same_outcome(lambda lib: list(ab(lib)))


@pytest.mark.parametrize("dimension", ["a", "b", "c", 0, None])
def test_column(dimension, same_outcome):
    same_outcome(lambda lib: ab(lib).column(dimension))


INDICES = [0, 2, -1, -3, 3, -4, 2**70, np.int64(1), np.int32(-1), 1.0, "a", "b", "x", True]
INDICES += [slice(0, 1), [0, 1], None, (0,), np.array(1)]


@pytest.mark.parametrize("index", INDICES, ids=repr)
def test_getitem(index, same_outcome):
    same_outcome(lambda lib: ab(lib)[index])


ENTRY_INDICES = [0, 2, -1, -3, 3, -4, np.int64(1), 1.0, "a", True, None]


@pytest.mark.parametrize("index", ENTRY_INDICES, ids=repr)
def test_entry(index, same_outcome):
    same_outcome(lambda lib: ab(lib).entry(index))


ENTRIES = [
    (0, 1),
    [1, 2],
    np.array([0, 3]),
    np.array([0, 3], dtype=np.int8),
    (0, 2),
    (3, 0),
    (0,),
    (0, 1, 2),
    (),
    (0.0, 1),
    (np.int64(0), np.int32(3)),
    (True, 2),
    3,
    "ab",
    None,
]


@pytest.mark.parametrize("entry", ENTRIES, ids=repr)
def test_position_and_contains(entry, same_outcome):
    same_outcome(lambda lib: ab(lib).position(entry))
    same_outcome(lambda lib: entry in ab(lib))


def test_position_of_entries(same_outcome):
    for other in (AB, (["x", "y"], [[1, 2], [9, 9]]), (["a"], [[0]])):
        for i in range(len(other[1])):
            same_outcome(lambda lib, i=i, other=other: ab(lib).position(labels(lib, *other)[i]))
            same_outcome(lambda lib, i=i, other=other: labels(lib, *other)[i] in ab(lib))


def test_position_of_integers_out_of_int32_range():
    """A deliberate difference: metatensor wraps them around and can find an
    entry they are not; for blockmap such an entry is not present."""
    entry = (2**32, 1)
    assert mts.Labels(*AB[:1], np.array(AB[1])).position(entry) == 0
    assert blockmap.Labels(*AB[:1], np.array(AB[1])).position(entry) is None
    assert entry not in ab(blockmap)


# ------------------------------------------------------------------ equality

OTHERS = [
    AB,
    (["a", "b"], [[0, 1], [1, 2]]),
    (["a", "b"], [[1, 2], [0, 1], [0, 3]]),
    (["a", "c"], [[0, 1], [1, 2], [0, 3]]),
    (["b", "a"], [[1, 0], [2, 1], [3, 0]]),
    (["a"], [[0], [1], [2]]),
    (["a", "b"], []),
]


@pytest.mark.parametrize("other", OTHERS, ids=repr)
def test_equality(other, same_outcome):
    same_outcome(lambda lib: ab(lib) == labels(lib, *other))
    same_outcome(lambda lib: ab(lib) != labels(lib, *other))


@pytest.mark.parametrize("other", [3, None, "a", [[0, 1]], np.array([[0, 1]])], ids=repr)
def test_equality_with_other_types(other, same_outcome):
    same_outcome(lambda lib: ab(lib) == other)
    same_outcome(lambda lib: ab(lib) != other)
    same_outcome(lambda lib: ab(lib)[0] == other)
    same_outcome(lambda lib: ab(lib)[0] != other)


def test_labels_and_entries_are_hashable():
    """A deliberate difference: blockmap's Labels and entries are immutable,
    hence hashable (by value); metatensor's are not."""
    with pytest.raises(TypeError):
        hash(ab(mts))
    assert hash(ab(blockmap)) == hash(ab(blockmap))
    assert {ab(blockmap): 1}[ab(blockmap)] == 1
    assert hash(ab(blockmap)[1]) == hash(ab(blockmap)[1])


def test_copies(same_outcome):
    same_outcome(lambda lib: copy.copy(ab(lib)))
    same_outcome(lambda lib: copy.deepcopy(ab(lib)))
    same_outcome(lambda lib: pickle.loads(pickle.dumps(ab(lib))))


# ---------------------------------------------------------------------- text

TEXT_CASES = {
    "three": AB,
    "one": (["a"], [[7]]),
    "four": (["x", "y"], [[0, 0], [0, 1], [1, 0], [1, 1]]),
    "five": (["x", "y"], [[0, 0], [0, 1], [1, 0], [1, 1], [2, 0]]),
    "hundred": (["abc"], [[i] for i in range(100)]),
    "wide": (["a", "long_name"], [[123456, 1], [-7, 22222222], [3, 4], [5, 6], [7, 8]]),
    "extremes": (["o3_lambda", "x"], [[-(2**31), 2**31 - 1], [0, -1]]),
    "many dimensions": (["a", "b", "c", "d", "e", "f"], [[1, 22, 333, -4, 5, 66666]]),
    "empty": (["first", "second"], []),
    "single": (["_"], [[0]]),
}


@pytest.mark.parametrize("case", sorted(TEXT_CASES))
def test_str_and_repr(case, same_outcome):
    same_outcome(lambda lib: str(labels(lib, *TEXT_CASES[case])))
    same_outcome(lambda lib: repr(labels(lib, *TEXT_CASES[case])))


@pytest.mark.parametrize("max_entries", [-1, -5, 0, 1, 2, 3, 4, 5, 99, 100, 1000])
@pytest.mark.parametrize("indent", [0, 3, 7, -2])
@pytest.mark.parametrize("case", ["three", "hundred", "wide", "one", "empty"])
def test_print(case, max_entries, indent, same_outcome):
    made = TEXT_CASES[case]
    same_outcome(lambda lib: labels(lib, *made).print(max_entries, indent))
    same_outcome(lambda lib: labels(lib, *made).print(max_entries=max_entries, indent=indent))
    same_outcome(lambda lib: labels(lib, *made).print(max_entries))


def test_iterated_entries_print_like_metatensor(same_outcome):
    for case in sorted(TEXT_CASES):
        same_outcome(lambda lib, case=case: [repr(e) for e in labels(lib, *TEXT_CASES[case])])
        same_outcome(lambda lib, case=case: [str(e) for e in labels(lib, *TEXT_CASES[case])])


# ------------------------------------------------------------------- entries


def test_entry_attributes(same_outcome):
    for i in range(3):
        same_outcome(lambda lib, i=i: ab(lib)[i].names)
        same_outcome(lambda lib, i=i: ab(lib)[i].values)
        same_outcome(lambda lib, i=i: ab(lib)[i].device)
        same_outcome(lambda lib, i=i: ab(lib)[i].print())
        same_outcome(lambda lib, i=i: repr(ab(lib)[i]))
        same_outcome(lambda lib, i=i: str(ab(lib)[i]))
        same_outcome(lambda lib, i=i: len(ab(lib)[i]))
        same_outcome(lambda lib, i=i: list(ab(lib)[i]))


@pytest.mark.parametrize("dimension", [0, 1, -1, -2, 2, -3, "a", "b", "c", 1.0, None], ids=repr)
def test_entry_getitem(dimension, same_outcome):
    same_outcome(lambda lib: ab(lib)[2][dimension])


def test_entry_getitem_with_numpy_integers():
    """metatensor refuses numpy integers as entry indices (a TypeError);
    blockmap takes anything with ``__index__``, as it does for Labels."""
    with pytest.raises(TypeError):
        ab(mts)[2][np.int64(1)]
    assert ab(blockmap)[2][np.int64(1)] == ab(mts)[2][1]


@pytest.mark.parametrize(
    "made, i", [(AB, 0), (AB, 1), ((["x", "y"], [[0, 1]]), 0), ((["a"], [[0]]), 0)]
)
def test_entry_equality(made, i, same_outcome):
    same_outcome(lambda lib: ab(lib)[0] == labels(lib, *made)[i])
    same_outcome(lambda lib: ab(lib)[0] != labels(lib, *made)[i])


ENTRY_ARGUMENTS = [
    (["a", "b"], np.array([1, 2], dtype=np.int32)),
    ([], np.array([], dtype=np.int32)),
    (["a"], np.array([1], dtype=np.int64)),
    (["a"], np.array([[1]], dtype=np.int32)),
    (["a"], np.array([1.0])),
    ("a", np.array([1], dtype=np.int32)),
    (("a",), np.array([1], dtype=np.int32)),
    ([1], np.array([1], dtype=np.int32)),
    (["a"], [1]),
]


@pytest.mark.parametrize("arguments", ENTRY_ARGUMENTS, ids=repr)
def test_entry_constructor(arguments, same_outcome):
    # metatensor's entry keeps the array it is given, blockmap's copies it (so
    # only their values are compared, not their flags)
    same_outcome(lambda lib: lib.LabelsEntry(*arguments).values.tolist())
    same_outcome(lambda lib: lib.LabelsEntry(*arguments).names)
    same_outcome(lambda lib: repr(lib.LabelsEntry(*arguments)))


# ------------------------------------------------------------------------ to

TO_CALLS = [
    ((), {}),
    (("cpu",), {}),
    ((), {"device": "cpu"}),
    ((), {"arrays": "numpy"}),
    ((), {"arrays": "numpy", "device": "cpu", "non_blocking": True}),
    ((None,), {}),
    ((), {"dtype": None, "device": None, "arrays": None}),
    (("cuda",), {}),
    ((), {"device": "cuda:0"}),
    ((), {"device": 3}),
    (("cpu", "cpu"), {}),
    ((np.int32,), {}),
    ((np.dtype("float64"),), {}),
    ((int,), {}),
    ((), {"dtype": np.int32}),
    ((np.int32, np.int64), {}),
    ((3,), {}),
    ((object,), {}),
    ((bool,), {}),
    ((), {"arrays": "foo"}),
    ((), {"arrays": 3}),
    ((), {"arrays": "foo", "device": "cuda"}),
    ((), {"arrays": "numpy", "device": "cuda"}),
]


@pytest.mark.parametrize("args, kwargs", TO_CALLS, ids=repr)
def test_to(args, kwargs, same_outcome):
    def call(lib):
        made = ab(lib)
        moved = made.to(*args, **kwargs)
        return moved is made, moved

    same_outcome(call)


def test_to_torch_gives_int32_tensors_like_metatensor():
    torch = pytest.importorskip("torch")
    for lib in (blockmap, mts):
        moved = ab(lib).to(arrays="torch")
        assert isinstance(moved.values, torch.Tensor)
        assert moved.values.dtype == torch.int32
        assert moved.values.tolist() == ab(lib).values.tolist()
        assert isinstance(moved[0].values, torch.Tensor)
    assert ab(blockmap).to(arrays="torch") == ab(blockmap)


# ---------------------------------------------------- changing the dimensions

INSERTS = [
    (0, "c", np.array([5, 6, 7])),
    (1, "c", np.array([5, 6, 7])),
    (2, "c", np.array([5, 6, 7])),
    (-1, "c", np.array([5, 6, 7])),
    (-2, "c", np.array([5, 6, 7])),
    (np.int64(1), "c", np.array([5, 6, 7])),
    (0, "c", np.array([5, 6, 7], dtype=np.uint8)),
    (0, "c", np.array([True, False, True])),
    (0, "c", np.array([5.0, 6.0, -7.0])),
    (0, "c", np.array([-(2**31), 0, 2**31 - 1])),
    # refused
    (3, "c", np.array([5, 6, 7])),
    (-3, "c", np.array([5, 6, 7])),
    (1.0, "c", np.array([5, 6, 7])),
    (None, "c", np.array([5, 6, 7])),
    (0, "c", [5, 6, 7]),
    (0, "c", np.array([[5, 6, 7]])),
    (0, "c", np.array([5, 6])),
    (0, "c", np.array(["x", "y", "z"])),
    (0, "a", np.array([5, 6, 7])),
    (0, "1c", np.array([5, 6, 7])),
    (0, "", np.array([5, 6, 7])),
    (0, 3, np.array([5, 6, 7])),
    (0, ["c"], np.array([5, 6, 7])),
    # metatensor's order of checks: the index's type, the values, the
    # index's range, the name
    (0, 3, [5, 6, 7]),
    (0, None, np.array([5, 6])),
    (9, "c", [5, 6, 7]),
    (9, 3, np.array([5, 6, 7])),
    ("x", 3, [5, 6, 7]),
    (1.5, "c", None),
]


@pytest.mark.parametrize("index, name, values", INSERTS, ids=repr)
def test_insert(index, name, values, same_outcome):
    same_outcome(lambda lib: ab(lib).insert(index, name, values))
    same_outcome(lambda lib: ab(lib).insert(index=index, name=name, values=values))


@pytest.mark.parametrize(
    "made", [(["a", "b"], [[0, 1], [1, 1]]), (["a"], [[4]]), ([], [])], ids=repr
)
@pytest.mark.parametrize("name", ["c", "a", "1"])
def test_append(made, name, same_outcome):
    # metatensor appends before `len(labels)`, which is the end only when there
    # are as many entries as dimensions: compared there
    assert len(made[0]) == len(made[1])
    values = np.arange(len(made[1]))
    same_outcome(lambda lib: labels(lib, *made).append(name, values))
    same_outcome(lambda lib: labels(lib, *made).append(name=name, values=values))


@pytest.mark.parametrize("name", [3, None, "c"])
@pytest.mark.parametrize("values", [[5, 6], np.array([5]), np.array([5, 6])], ids=repr)
def test_append_checks_the_values_before_the_name(name, values, same_outcome):
    same_outcome(lambda lib: ab(lib).append(name, values))


def test_append_adds_a_last_dimension():
    """A deliberate difference: metatensor-core 0.2.6 inserts "appended"
    dimensions before position ``len(labels)`` (the number of entries), which
    is a middle dimension or out of range when the labels do not have as many
    entries as dimensions; blockmap appends them, as documented."""
    with pytest.raises(IndexError):
        ab(mts).append("c", np.array([5, 6, 7]))
    one = (["a", "b"], [[0, 1]])
    assert labels(mts, *one).append("c", np.array([5])).names == ["a", "c", "b"]
    appended = labels(blockmap, *one).append("c", np.array([5]))
    assert appended.names == ["a", "b", "c"]
    appended = ab(blockmap).append("c", np.array([5, 6, 7]))
    assert appended == ab(blockmap).insert(2, "c", np.array([5, 6, 7]))
    np.testing.assert_array_equal(appended.column("c"), [5, 6, 7])


def test_new_dimension_values_must_be_integers():
    """A deliberate difference: metatensor truncates floats and wraps large
    integers around; blockmap takes floats that are integers (as
    ``np.zeros(n)``) and refuses the others with a ValueError."""
    fractional = np.array([5.5, 6, 7])
    np.testing.assert_array_equal(ab(mts).insert(0, "c", fractional).column("c"), [5, 6, 7])
    for values in (fractional, np.array([np.nan, 0, 0]), np.array([2.0**31, 0, 0])):
        with pytest.raises(ValueError):
            ab(blockmap).insert(0, "c", values)
    for values in (np.array([2**31, 0, 0]), np.array([0, 0, 2**40], dtype=np.uint64)):
        with pytest.raises(ValueError, match="int32"):
            ab(blockmap).insert(0, "c", values)


@pytest.mark.parametrize("name", ["a", "b", "c", 3, None, ""])
def test_remove(name, same_outcome):
    same_outcome(lambda lib: ab(lib).remove(name))
    same_outcome(lambda lib: labels(lib, *ABC).remove(name))
    same_outcome(lambda lib: labels(lib, ["a"], [[4]]).remove(name))


@pytest.mark.parametrize(
    "old, new",
    [("a", "c"), ("b", "x"), ("a", "a"), ("a", "b"), ("c", "d"), ("a", "1d"), ("a", ""), (3, "d")]
    + [("a", 3), ("a", None), (None, "a")]
    # an unknown `old` is checked before `new`: a ValueError (metatensor-operations'
    # rename_dimension with a name the keys do not have)
    + [("c", 3), ("c", None), (3, 4)],
    ids=repr,
)
def test_rename(old, new, same_outcome):
    same_outcome(lambda lib: ab(lib).rename(old, new))
    same_outcome(lambda lib: ab(lib).rename(old=old, new=new))


def test_rename_shares_the_values():
    made = ab(blockmap)
    renamed = made.rename("a", "z")
    assert np.shares_memory(renamed.values, made.values)
    assert renamed.position((1, 2)) == 1
    assert made.names == ["a", "b"], "labels are immutable"


PERMUTATIONS = [[1, 0], [0, 1], (1, 0), np.array([1, 0]), [-1, 0], [-2, -1], [np.int64(1), 0]]
PERMUTATIONS += [[0, 0], [1, 1], [0], [0, 1, 2], [], [0, 2], [0, -3], [0.0, 1], ["a", 0], 1, None]


@pytest.mark.parametrize("order", PERMUTATIONS, ids=repr)
def test_permute(order, same_outcome):
    same_outcome(lambda lib: ab(lib).permute(order))
    same_outcome(lambda lib: ab(lib).permute(dimensions_indexes=order))


@pytest.mark.parametrize("order", [[2, 0, 1], [1, 2, 0], [2, 1, 0], [0, 2, 1], [0, 1, 1]])
def test_permute_three_dimensions(order, same_outcome):
    same_outcome(lambda lib: labels(lib, *ABC).permute(order))


def test_dimension_changes_return_new_labels():
    made = ab(blockmap)
    for changed in (
        made.insert(0, "c", np.array([5, 6, 7])),
        made.append("c", np.array([5, 6, 7])),
        made.remove("a"),
        made.rename("a", "c"),
        made.permute([1, 0]),
    ):
        assert changed is not made
        assert not changed.values.flags.writeable
    assert made == ab(blockmap)


# ------------------------------------------------------------ set operations

SET_CASES = {
    "documented": ((["a", "b"], [[0, 1], [1, 2], [0, 3]]), (["a", "b"], [[0, 3], [1, 3], [1, 2]])),
    "difference documented": (
        (["a", "b"], [[0, 1], [1, 3], [0, 3], [2, 2]]),
        (["a", "b"], [[0, 3], [1, 3], [1, 2], [2, 1]]),
    ),
    "same entries": (AB, AB),
    "same entries reordered": (AB, (["a", "b"], [[0, 3], [0, 1], [1, 2]])),
    "disjoint": (AB, (["a", "b"], [[5, 5], [6, 6]])),
    "subset": (AB, (["a", "b"], [[1, 2]])),
    "superset": ((["a", "b"], [[1, 2]]), AB),
    "first empty": ((["a", "b"], []), AB),
    "second empty": (AB, (["a", "b"], [])),
    "both empty": ((["a", "b"], []), (["a", "b"], [])),
    "no dimensions": (([], []), ([], [])),
    "single": ((["_"], [[0]]), (["_"], [[0]])),
    "one dimension": ((["n"], [[3], [1], [2]]), (["n"], [[2], [4], [3], [0]])),
    "extremes": ((["x"], [[-(2**31)], [2**31 - 1]]), (["x"], [[2**31 - 1], [0]])),
    # refused
    "names reordered": (AB, (["b", "a"], [[1, 0], [2, 1]])),
    "other names": (AB, (["a", "c"], [[0, 1]])),
    "fewer names": (AB, (["a"], [[0]])),
    "more names": (AB, (["a", "b", "c"], [[0, 1, 2]])),
}
OPERATIONS = [
    "union",
    "union_and_mapping",
    "intersection",
    "intersection_and_mapping",
    "difference",
    "difference_and_mapping",
]


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("case", sorted(SET_CASES))
def test_set_operation(case, operation, same_outcome):
    first, second = SET_CASES[case]
    same_outcome(lambda lib: getattr(labels(lib, *first), operation)(labels(lib, *second)))
    same_outcome(lambda lib: getattr(labels(lib, *second), operation)(labels(lib, *first)))
    same_outcome(lambda lib: getattr(labels(lib, *first), operation)(other=labels(lib, *second)))


def test_set_operations_of_labels_made_with_assume_unique(same_outcome):
    def made(lib, rows):
        return lib.Labels(["a"], np.array(rows).reshape(-1, 1), assume_unique=True)

    for operation in OPERATIONS:
        same_outcome(lambda lib, op=operation: getattr(made(lib, [3, 1]), op)(made(lib, [1, 2])))


def test_mappings_are_int64_and_writable():
    union, first, second = ab(blockmap).union_and_mapping(labels(blockmap, ["a", "b"], [[9, 9]]))
    for mapping in (first, second):
        assert mapping.dtype == np.int64 and mapping.flags.writeable and mapping.ndim == 1
    first[0] = 42
    assert union.position((0, 1)) == 0, "the mappings are not the labels' memory"


@pytest.mark.parametrize("operation", OPERATIONS + ["select"])
@pytest.mark.parametrize("other", [3, None, "a", np.array([[0, 1]])], ids=repr)
def test_set_operations_with_other_types(operation, other):
    """A deliberate difference in kind: metatensor fails with an
    AttributeError (it asks ``other`` for its C pointer), blockmap raises a
    TypeError."""
    # the *_and_mapping forms ask for len(other) first: a TypeError
    with pytest.raises((AttributeError, TypeError)):
        getattr(ab(mts), operation)(other)
    with pytest.raises(TypeError):
        getattr(ab(blockmap), operation)(other)


# ------------------------------------------------------------------- select

SELECTIONS = [
    (["a"], [[0], [2], [5]]),
    (["a"], [[0]]),
    (["b"], [[2]]),
    (["b", "a"], [[3, 0], [1, 0]]),
    (["a", "b"], [[0, 3], [9, 9]]),
    (["c", "a"], [[5, 1], [6, 0], [9, 9]]),
    (["a", "b", "c"], [[2, 2, 7]]),
    (["c", "b", "a"], [[7, 2, 2], [5, 1, 0]]),
    (["a"], []),
    (["a"], [[7]]),
    ([], []),
    ([], [[]]),
    # refused
    (["d"], [[0]]),
    (["a", "d"], [[0, 0]]),
]


@pytest.mark.parametrize("selection", SELECTIONS, ids=repr)
def test_select(selection, same_outcome):
    result = same_outcome(lambda lib: labels(lib, *ABC).select(labels(lib, *selection)))
    same_outcome(lambda lib: labels(lib, *ABC).select(selection=labels(lib, *selection)))
    if result is not None:
        assert result.dtype == np.uint64


def test_select_in_empty_labels(same_outcome):
    same_outcome(lambda lib: labels(lib, ["a", "b"], []).select(labels(lib, ["a"], [[0]])))
    same_outcome(lambda lib: labels(lib, [], []).select(labels(lib, [], [])))
