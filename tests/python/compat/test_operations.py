"""metatensor-operations, the second oracle: every public function of
metatensor-operations 0.5 (``blockmap.operations.__all__``) called on the
same data in both libraries, ``metatensor.operations.<op>`` on
metatensor-core's maps and ``blockmap.operations.<op>`` (and ``blockmap.<op>``)
on blockmap's; results compared entry by entry (keys, values, samples,
components, properties, gradients, dtypes; bools, arrays, tuples), errors by
type (``NotEqualError`` by ``blockmap.NotEqualError``). Also the TensorMap
operators, and that ``blockmap.operations`` neither disturbs metatensor nor
is needed by ``import blockmap``."""

import pickle
import sys
import warnings

import numpy as np
import pytest
from tensor_oracle import (
    BlockSpec,
    Spec,
    assert_same_block,
    assert_same_labels,
    assert_same_map,
    block,
    build,
    column,
    expected_type,
    labels,
)

import blockmap
import blockmap.operations as bops
from helpers.child import run_python

metatensor = pytest.importorskip("metatensor")
mops = pytest.importorskip("metatensor_operations")


class Lib:
    """The classes of ``core`` and the operations of ``ops``, as one namespace."""

    def __init__(self, ops, core, name):
        self.ops, self.core, self.name = ops, core, name

    def __getattr__(self, name):
        if name in ("Labels", "LabelsEntry", "TensorBlock", "TensorMap"):
            return getattr(self.core, name)
        return getattr(self.ops, name)

    def __repr__(self):
        return self.name


THEIRS = Lib(mops, metatensor, "metatensor.operations")
# blockmap.operations.<op>, and blockmap.<op> (blockmap's own join and split)
OURS = [Lib(bops, blockmap, "blockmap.operations"), Lib(blockmap, blockmap, "blockmap")]


def _expected(error):
    if isinstance(error, mops.NotEqualError):
        return blockmap.NotEqualError
    return expected_type(error)


def _run(call, lib, data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return call(lib, data), None
        except Exception as error:  # noqa: BLE001 - the oracle's errors are compared
            return None, error


def compare(ours, theirs, values=True):
    """blockmap's result ``ours`` is metatensor's ``theirs``; with
    ``values=False`` (random or uninitialized data) only metadata, dtypes and
    shapes are compared."""
    if isinstance(theirs, metatensor.TensorMap):
        assert isinstance(ours, blockmap.TensorMap), ours
        assert_same_labels(ours.keys, theirs.keys, "keys")
        assert len(ours) == len(theirs)
        if values:
            assert_same_map(ours, theirs)
        for i in range(len(theirs)):
            compare(ours.block_by_id(i), theirs.block_by_id(i), values)
    elif isinstance(theirs, metatensor.TensorBlock):
        assert isinstance(ours, blockmap.TensorBlock), ours
        if values:
            assert_same_block(ours, theirs)
            return
        assert_same_labels(ours.samples, theirs.samples, "samples")
        assert len(ours.components) == len(theirs.components)
        for a, b in zip(ours.components, theirs.components, strict=True):
            assert_same_labels(a, b, "components")
        assert_same_labels(ours.properties, theirs.properties, "properties")
        assert ours.values.dtype == theirs.values.dtype
        assert ours.values.shape == theirs.values.shape
        assert sorted(ours.gradients_list()) == sorted(theirs.gradients_list())
        for parameter in theirs.gradients_list():
            compare(ours.gradient(parameter), theirs.gradient(parameter), values)
    elif isinstance(theirs, metatensor.Labels):
        assert_same_labels(ours, theirs)
    elif isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), ours
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        if values:
            np.testing.assert_array_equal(ours, theirs)
    elif isinstance(theirs, list | tuple):
        assert type(ours) is type(theirs), (ours, theirs)
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            compare(a, b, values)
    else:
        assert type(ours) is type(theirs), (ours, theirs)
        assert ours == theirs


def same(call, ours, theirs, values=True):
    """``call(lib, data)`` in metatensor on ``theirs`` and in blockmap (both
    through ``blockmap.operations`` and ``blockmap``) on ``ours``: the same
    result or errors of the same type. Returns metatensor's result or error."""
    their_result, their_error = _run(call, THEIRS, theirs)
    for lib in OURS:
        our_result, our_error = _run(call, lib, ours)
        if their_error is not None:
            assert our_error is not None, (
                f"{lib}: metatensor raised {their_error!r}, blockmap returned {our_result!r}"
            )
            assert isinstance(our_error, _expected(their_error)), (
                f"{lib}: metatensor raised {their_error!r}; blockmap raised {our_error!r}"
            )
            continue
        if our_error is not None:
            raise AssertionError(
                f"{lib}: metatensor returned {their_result!r}, blockmap raised {our_error!r}"
            ) from our_error
        compare(our_result, their_result, values)
    return their_error if their_error is not None else their_result


# ------------------------------------------------------------------- data

# unsorted keys, so that `sort` has something to do
KEYS = [[1, 6], [0, 1], [2, 8], [1, 1]]
PROPERTIES = labels(["n", "l"], [[2, 1], [0, 0], [1, 0]])
# the samples of each block (the last one is empty), unsorted
SAMPLES = [
    [[1, 0], [0, 1], [0, 0]],
    [[0, 2], [0, 0], [1, 1], [1, 0]],
    [[3, 1], [2, 0]],
    [],
]


def _gradients(samples):
    positions = []
    for s, (system, atom) in enumerate(samples):
        positions.append([s, system, atom])
        if s % 2:
            positions.append([s, system, atom + 1])
    return {
        "positions": (labels(["sample", "system", "atom"], positions), [column("xyz", [0, 1, 2])]),
        "strain": (
            column("sample", list(range(len(samples)))),
            [column("xyz_1", [0, 1, 2]), column("xyz_2", [0, 1, 2])],
        ),
    }


def _spec(seed=0, dtype=np.float64, gradients=True, components=True, empty=True):
    rng = np.random.default_rng(seed)
    blocks = []
    for samples in SAMPLES if empty else SAMPLES[:-1]:
        blocks.append(
            block(
                rng,
                labels(["system", "atom"], samples),
                PROPERTIES,
                [column("o3_mu", [1, -1, 0])] if components else [],
                _gradients(samples) if gradients else None,
                dtype=dtype,
            )
        )
    return Spec(labels(["o3_lambda", "center_type"], KEYS[: len(blocks)]), blocks)


@pytest.fixture(params=[True, False], ids=["with an empty block", "no empty block"])
def maps(request):
    """``(ours, theirs)``: two maps with the same metadata and other values,
    in each library (metatensor-operations' ``sort`` fails on empty
    gradients: the maps without an empty block sort)."""
    a, b = build(_spec(0, empty=request.param)), build(_spec(1, empty=request.param))
    return (a[0], b[0]), (a[1], b[1])


def test_every_operation_is_tested():
    # a new function in metatensor-operations needs a test here
    with open(__file__, encoding="utf-8") as file:
        source = file.read()
    # the reductions are called by name (test_reductions), NotEqualError is
    # the class of the errors compared everywhere
    called = {*REDUCTIONS, *(f"{name}_block" for name in REDUCTIONS), "NotEqualError"}
    untested = [n for n in bops.__all__ if f"lib.{n}(" not in source and n not in called]
    assert untested == []
    assert set(bops.__all__) >= {"add", "equal", "join", "split", "NotEqualError"}


def test_blockmap_reaches_every_operation():
    own = {"join", "join_blocks", "split", "split_block"}
    # what `from metatensor.operations import *` gives metatensor's namespace
    exported = {
        n
        for n in dir(mops)
        if not n.startswith("_")
        and getattr(metatensor, n, None) is getattr(mops, n)
        and not isinstance(getattr(mops, n), type(sys))
    }
    assert set(bops.__all__) == exported
    assert blockmap._OPERATIONS == set(bops.__all__) - own
    for name in blockmap._OPERATIONS:
        assert getattr(blockmap, name) is getattr(bops, name), name
        assert name in dir(blockmap)
    for name in own:
        assert getattr(blockmap, name) is not getattr(bops, name)
        assert getattr(bops, name).__module__ in (
            "blockmap.operations._join",
            "blockmap.operations._split",
        )
    with pytest.raises(AttributeError, match="no attribute 'not_an_operation'"):
        blockmap.not_an_operation  # noqa: B018


# ---------------------------------------------------------- arithmetic

ARITHMETIC = {
    "abs": lambda lib, t: lib.abs(t[0]),
    "add maps": lambda lib, t: lib.add(t[0], t[1]),
    "add a float": lambda lib, t: lib.add(t[0], 2.5),
    "add an int": lambda lib, t: lib.add(t[0], 2),
    "add a string": lambda lib, t: lib.add(t[0], "2"),
    "add a block": lambda lib, t: lib.add(t[0], t[1].block(0)),
    "subtract maps": lambda lib, t: lib.subtract(t[0], t[1]),
    "subtract a float": lambda lib, t: lib.subtract(t[0], 0.5),
    "subtract an array": lambda lib, t: lib.subtract(t[0], np.ones(3)),
    "multiply maps": lambda lib, t: lib.multiply(t[0], t[1]),
    "multiply by an int": lambda lib, t: lib.multiply(t[0], 3),
    "multiply by a list": lambda lib, t: lib.multiply(t[0], [3]),
    "divide maps": lambda lib, t: lib.divide(t[0], t[1]),
    "divide by a float": lambda lib, t: lib.divide(t[0], 4.0),
    "divide by None": lambda lib, t: lib.divide(t[0], None),
    "pow 2": lambda lib, t: lib.pow(t[0], 2),
    "pow 0.5": lambda lib, t: lib.pow(t[0], 0.5),
    "pow a map": lambda lib, t: lib.pow(t[0], t[1]),
    "add a block, not a map": lambda lib, t: lib.add(t[0].block(0), 1.0),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
@pytest.mark.parametrize("case", ARITHMETIC)
def test_arithmetic(case, dtype):
    a, b = build(_spec(0, dtype)), build(_spec(1, dtype))
    same(ARITHMETIC[case], (a[0], b[0]), (a[1], b[1]))


def _keys_subset(lib, t, rows):
    return lib.Labels(t.keys.names, np.array([KEYS[i] for i in rows], dtype=np.int32))


def _other_keys(lib, t):
    """``t`` without its first block."""
    return lib.drop_blocks(t, _keys_subset(lib, t, [0]))


BINARY_ERRORS = {
    "different keys": lambda lib, t: lib.add(t[0], _other_keys(lib, t[1])),
    "different keys, subtract": lambda lib, t: lib.subtract(t[0], _other_keys(lib, t[1])),
    "different keys, multiply": lambda lib, t: lib.multiply(t[0], _other_keys(lib, t[1])),
    "different keys, divide": lambda lib, t: lib.divide(t[0], _other_keys(lib, t[1])),
    "different samples": lambda lib, t: lib.add(t[0], lib.sort(t[1], "samples")),
    "different gradients": lambda lib, t: lib.multiply(t[0], lib.remove_gradients(t[1])),
}


@pytest.mark.parametrize("case", BINARY_ERRORS)
def test_arithmetic_errors(maps, case):
    result = same(BINARY_ERRORS[case], *maps)
    assert isinstance(result, Exception)


def test_arithmetic_on_mixed_dtypes():
    a, b = build(_spec(0, np.float64)), build(_spec(1, np.float32))
    for op in ("add", "subtract", "multiply", "divide"):
        same(lambda lib, t, op=op: getattr(lib, op)(t[0], t[1]), (a[0], b[0]), (a[1], b[1]))


def _dot_other(lib, seed=3, n_properties=3):
    """A map for ``t @ other``: no components, no gradients, the properties of ``t``."""
    spec = _spec(0, components=False, gradients=False)
    rng = np.random.default_rng(seed)
    spec.blocks = [
        block(rng, column("other", list(range(i + 1))), PROPERTIES) for i in range(len(KEYS))
    ]
    if n_properties != 3:
        spec.blocks[0] = block(rng, column("other", [0]), column("p", [0]))
    return spec.build(lib.core)


DOT = {
    "dot": lambda lib, t: lib.dot(t[0], _dot_other(lib)),
    "dot with components": lambda lib, t: lib.dot(t[0], t[1]),
    "dot other properties": lambda lib, t: lib.dot(t[0], _dot_other(lib, n_properties=1)),
    "dot other keys": lambda lib, t: lib.dot(t[0], _other_keys(lib, _dot_other(lib))),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", DOT)
def test_dot(case, dtype):
    a, b = build(_spec(0, dtype)), build(_spec(1, dtype))
    same(DOT[case], (a[0], b[0]), (a[1], b[1]))


def _square(seed, gradients=True, samples=None, properties=None):
    """Maps of square (for solve) blocks: ``X`` and ``Y`` with the same samples."""
    rng = np.random.default_rng(seed)
    grads = {"g": (labels(["sample", "x"], [[0, 0], [1, 0]]), [])} if gradients else None
    blocks = [
        block(rng, column("s", [0, 1, 2]), properties or column("p", [0, 1, 2]), gradients=grads),
        block(rng, samples or column("s", [0, 1, 2]), column("p", [4, 5, 6]), gradients=grads),
    ]
    for spec in blocks:  # well conditioned
        spec.values = spec.values + 1000 * np.eye(3, spec.values.shape[1])
    return Spec(column("key", [0, 1]), blocks)


def _xy(x, y):
    x, y = build(x), build(y)
    return (x[0], y[0]), (x[1], y[1])


SOLVE = {
    "solve": lambda lib, t: lib.solve(t[0], t[1]),
    "lstsq": lambda lib, t: lib.lstsq(t[0], t[1], rcond=None),
    "lstsq rcond": lambda lib, t: lib.lstsq(t[0], t[1], rcond=1e-10, driver="gelsd"),
    "lstsq other keys": lambda lib, t: lib.lstsq(t[0], _other_keys(lib, t[1]), rcond=None),
    "solve other keys": lambda lib, t: lib.solve(t[0], _other_keys(lib, t[1])),
}


@pytest.mark.parametrize("case", SOLVE)
def test_solve_and_lstsq(case):
    same(SOLVE[case], *_xy(_square(0, gradients=False), _square(1, gradients=False)))


@pytest.mark.parametrize("case", ["lstsq", "lstsq rcond"])
def test_lstsq_with_gradients(case):
    same(SOLVE[case], *_xy(_square(0), _square(1)))


def test_solve_and_lstsq_errors():
    # not square, other samples, gradients on one side only
    same(SOLVE["solve"], *_xy(_spec(0, components=False, gradients=False), _spec(1)))
    same(SOLVE["solve"], *_xy(_square(0), _square(1)))
    other = _square(1, gradients=False, samples=column("s", [2, 1, 0]))
    same(SOLVE["solve"], *_xy(_square(0, gradients=False), other))
    same(SOLVE["lstsq"], *_xy(_square(0, gradients=False), other))
    same(SOLVE["lstsq"], *_xy(_square(0), _square(1, gradients=False)))


# ---------------------------------------------------------- comparisons

COMPARISONS = {
    "equal itself": lambda lib, t: lib.equal(t[0], t[0]),
    "equal a copy": lambda lib, t: lib.equal(t[0], t[0].copy()),
    # the example: other values give False, not an error
    "equal other values": lambda lib, t: lib.equal(t[0], t[1]),
    "equal other keys": lambda lib, t: lib.equal(t[0], _other_keys(lib, t[1])),
    "equal other samples": lambda lib, t: lib.equal(t[0], lib.sort(t[0], "samples")),
    "equal a block": lambda lib, t: lib.equal(t[0], t[0].block(0)),
    "equal_raise itself": lambda lib, t: lib.equal_raise(t[0], t[0]),
    "equal_raise other values": lambda lib, t: lib.equal_raise(t[0], t[1]),
    "equal_raise other keys": lambda lib, t: lib.equal_raise(t[0], _other_keys(lib, t[1])),
    "equal_block": lambda lib, t: lib.equal_block(t[0].block(1), t[0].block(1)),
    "equal_block other values": lambda lib, t: lib.equal_block(t[0].block(1), t[1].block(1)),
    "equal_block other samples": lambda lib, t: lib.equal_block(t[0].block(1), t[0].block(0)),
    "equal_block a map": lambda lib, t: lib.equal_block(t[0], t[0]),
    "equal_block_raise": lambda lib, t: lib.equal_block_raise(t[0].block(2), t[0].block(2)),
    "equal_block_raise other": lambda lib, t: lib.equal_block_raise(t[0].block(2), t[1].block(2)),
    "allclose itself": lambda lib, t: lib.allclose(t[0], t[0]),
    "allclose other values": lambda lib, t: lib.allclose(t[0], t[1]),
    "allclose within atol": lambda lib, t: lib.allclose(t[0], lib.add(t[0], 1e-3), atol=1e-2),
    "allclose within rtol": lambda lib, t: lib.allclose(t[0], lib.multiply(t[0], 1.001), rtol=1e-2),
    "allclose outside atol": lambda lib, t: lib.allclose(t[0], lib.add(t[0], 1e-3), atol=1e-4),
    "allclose nan": lambda lib, t: lib.allclose(
        lib.divide(t[0], 0.0), lib.divide(t[0], 0.0), equal_nan=True
    ),
    "allclose other keys": lambda lib, t: lib.allclose(t[0], _other_keys(lib, t[1])),
    "allclose_raise": lambda lib, t: lib.allclose_raise(t[0], lib.add(t[0], 1e-14)),
    "allclose_raise other": lambda lib, t: lib.allclose_raise(t[0], t[1]),
    "allclose_raise other keys": lambda lib, t: lib.allclose_raise(t[0], _other_keys(lib, t[1])),
    "allclose_block": lambda lib, t: lib.allclose_block(t[0].block(0), t[0].block(0)),
    "allclose_block other": lambda lib, t: lib.allclose_block(t[0].block(0), t[1].block(0)),
    "allclose_block_raise": lambda lib, t: lib.allclose_block_raise(t[0].block(0), t[0].block(0)),
    "allclose_block_raise other": lambda lib, t: lib.allclose_block_raise(
        t[0].block(0), t[1].block(0), rtol=1e-3
    ),
    "allclose_block_raise shapes": lambda lib, t: lib.allclose_block_raise(
        t[0].block(0), t[0].block(1)
    ),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
@pytest.mark.parametrize("case", COMPARISONS)
def test_comparisons(case, dtype):
    a, b = build(_spec(0, dtype)), build(_spec(1, dtype))
    same(COMPARISONS[case], (a[0], b[0]), (a[1], b[1]))


def test_equal_on_maps_whose_blocks_differ_is_false():
    ours, theirs = build(_spec(0)), build(_spec(1))
    assert mops.equal(ours[1], theirs[1]) is False
    assert bops.equal(ours[0], theirs[0]) is False
    assert blockmap.equal(ours[0], theirs[0]) is False
    assert blockmap.equal(ours[0], ours[0].copy()) is True
    with pytest.raises(blockmap.NotEqualError, match="values"):
        blockmap.equal_raise(ours[0], theirs[0])


def _other_properties(lib, t):
    return lib.rename_dimension(t, "properties", "l", "m")


def _other_components(lib, t):
    return lib.rename_dimension(t, "components", "o3_mu", "mu")


METADATA = {
    "equal_metadata": lambda lib, t: lib.equal_metadata(t[0], t[1]),
    "equal_metadata properties": lambda lib, t: lib.equal_metadata(
        t[0], _other_properties(lib, t[1])
    ),
    "equal_metadata samples only": lambda lib, t: lib.equal_metadata(
        t[0], _other_properties(lib, t[1]), check=["samples"]
    ),
    "equal_metadata components": lambda lib, t: lib.equal_metadata(
        t[0], _other_components(lib, t[1]), check=["samples", "components"]
    ),
    "equal_metadata no gradients": lambda lib, t: lib.equal_metadata(
        t[0], lib.remove_gradients(t[1]), check_gradients=False
    ),
    "equal_metadata gradients": lambda lib, t: lib.equal_metadata(t[0], lib.remove_gradients(t[1])),
    "equal_metadata other keys": lambda lib, t: lib.equal_metadata(t[0], _other_keys(lib, t[1])),
    "equal_metadata bad check": lambda lib, t: lib.equal_metadata(t[0], t[1], check=["keys"]),
    "equal_metadata check a string": lambda lib, t: lib.equal_metadata(t[0], t[1], check="samples"),
    "equal_metadata_raise": lambda lib, t: lib.equal_metadata_raise(t[0], t[1]),
    "equal_metadata_raise properties": lambda lib, t: lib.equal_metadata_raise(
        t[0], _other_properties(lib, t[1])
    ),
    "equal_metadata_raise gradients": lambda lib, t: lib.equal_metadata_raise(
        t[0], lib.remove_gradients(t[1], ["strain"])
    ),
    "equal_metadata_block": lambda lib, t: lib.equal_metadata_block(t[0].block(0), t[1].block(0)),
    "equal_metadata_block other": lambda lib, t: lib.equal_metadata_block(
        t[0].block(0), t[1].block(1)
    ),
    "equal_metadata_block properties": lambda lib, t: lib.equal_metadata_block(
        t[0].block(0), t[1].block(1), check=["properties", "components"]
    ),
    "equal_metadata_block_raise": lambda lib, t: lib.equal_metadata_block_raise(
        t[0].block(0), t[1].block(0)
    ),
    "equal_metadata_block_raise other": lambda lib, t: lib.equal_metadata_block_raise(
        t[0].block(0), t[1].block(1)
    ),
    "equal_metadata_block_raise a map": lambda lib, t: lib.equal_metadata_block_raise(t[0], t[1]),
}


@pytest.mark.parametrize("case", METADATA)
def test_equal_metadata(maps, case):
    same(METADATA[case], *maps)


def test_not_equal_error_is_blockmaps_and_pickles(maps):
    ours, _ = maps
    assert bops.NotEqualError is blockmap.NotEqualError
    assert blockmap.operations.NotEqualError is blockmap.NotEqualError
    for call in (
        lambda: bops.equal_raise(ours[0], ours[1]),
        lambda: bops.add(ours[0], bops.remove_gradients(ours[1])),
        lambda: blockmap.equal_metadata_block_raise(ours[0].block(0), ours[1].block(1)),
    ):
        with pytest.raises(blockmap.NotEqualError) as info:
            call()
        error = info.value
        assert type(error) is blockmap.NotEqualError
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is blockmap.NotEqualError
        assert str(again) == str(error) and again.args == error.args
    # metatensor's own error class is unchanged
    assert mops.NotEqualError is not blockmap.NotEqualError
    assert metatensor.NotEqualError is mops.NotEqualError


# ----------------------------------------------------- blocks and labels


def _last(tensor):
    """The last block: the empty one when there is one."""
    return tensor.block(len(tensor) - 1)


def _selection(lib, names, values):
    return lib.Labels(names, np.array(values, dtype=np.int32).reshape(-1, len(names)))


SELECTIONS = {
    "drop_blocks": lambda lib, t: lib.drop_blocks(t[0], _keys_subset(lib, t[0], [0, 3])),
    "drop_blocks copy": lambda lib, t: lib.drop_blocks(
        t[0], _keys_subset(lib, t[0], [1]), copy=True
    ),
    "drop_blocks partial key": lambda lib, t: lib.drop_blocks(
        t[0], _selection(lib, ["o3_lambda"], [[1]])
    ),
    "drop_blocks unknown key": lambda lib, t: lib.drop_blocks(
        t[0], _selection(lib, ["o3_lambda", "center_type"], [[9, 9]])
    ),
    "drop_blocks unknown name": lambda lib, t: lib.drop_blocks(
        t[0], _selection(lib, ["spin"], [[1]])
    ),
    "drop_blocks not labels": lambda lib, t: lib.drop_blocks(t[0], [0]),
    "drop_empty_blocks": lambda lib, t: lib.drop_empty_blocks(t[0]),
    "drop_empty_blocks copy": lambda lib, t: lib.drop_empty_blocks(t[0], copy=True),
    "filter_blocks": lambda lib, t: lib.filter_blocks(t[0], _keys_subset(lib, t[0], [3, 0])),
    "filter_blocks copy": lambda lib, t: lib.filter_blocks(
        t[0], _selection(lib, ["center_type"], [[1]]), copy=True
    ),
    "filter_blocks none": lambda lib, t: lib.filter_blocks(
        t[0], _selection(lib, ["center_type"], [[7]])
    ),
    "filter_blocks unknown name": lambda lib, t: lib.filter_blocks(
        t[0], _selection(lib, ["spin"], [[1]])
    ),
    "slice samples": lambda lib, t: lib.slice(t[0], "samples", _selection(lib, ["system"], [[0]])),
    "slice samples, two names": lambda lib, t: lib.slice(
        t[0], "samples", _selection(lib, ["atom", "system"], [[0, 0], [1, 1], [2, 0]])
    ),
    "slice samples, nothing": lambda lib, t: lib.slice(
        t[0], "samples", _selection(lib, ["system"], [[9]])
    ),
    "slice properties": lambda lib, t: lib.slice(t[0], "properties", _selection(lib, ["l"], [[0]])),
    "slice keys": lambda lib, t: lib.slice(t[0], "keys", _selection(lib, ["o3_lambda"], [[0]])),
    "slice unknown name": lambda lib, t: lib.slice(
        t[0], "samples", _selection(lib, ["spin"], [[0]])
    ),
    "slice a list": lambda lib, t: lib.slice(t[0], "samples", [0, 1]),
    "slice a block": lambda lib, t: lib.slice(
        t[0].block(0), "samples", _selection(lib, ["system"], [[0]])
    ),
    "slice_block": lambda lib, t: lib.slice_block(
        t[0].block(1), "samples", _selection(lib, ["system"], [[1]])
    ),
    "slice_block properties": lambda lib, t: lib.slice_block(
        t[0].block(0), "properties", _selection(lib, ["n", "l"], [[1, 0], [2, 1]])
    ),
    "slice_block a list": lambda lib, t: lib.slice_block(t[0].block(1), "samples", [3, 0]),
    "slice_block an array": lambda lib, t: lib.slice_block(
        t[0].block(0), "properties", np.array([2, 0])
    ),
    "slice_block a mask": lambda lib, t: lib.slice_block(
        t[0].block(0), "properties", np.array([True, False, True])
    ),
    "slice_block empty": lambda lib, t: lib.slice_block(
        _last(t[0]), "samples", _selection(lib, ["system"], [[0]])
    ),
    "slice_block components": lambda lib, t: lib.slice_block(
        t[0].block(0), "components", _selection(lib, ["o3_mu"], [[0]])
    ),
    "sort": lambda lib, t: lib.sort(t[0]),
    "sort descending": lambda lib, t: lib.sort(t[0], descending=True),
    "sort samples": lambda lib, t: lib.sort(t[0], "samples"),
    "sort properties and components": lambda lib, t: lib.sort(t[0], ["properties", "components"]),
    "sort keys": lambda lib, t: lib.sort(t[0], "keys"),
    "sort unknown axis": lambda lib, t: lib.sort(t[0], "diagonal"),
    "sort not a string": lambda lib, t: lib.sort(t[0], 3),
    "sort_block": lambda lib, t: lib.sort_block(t[0].block(1)),
    "sort_block descending samples": lambda lib, t: lib.sort_block(
        t[0].block(1), "samples", descending=True
    ),
    "sort_block empty": lambda lib, t: lib.sort_block(_last(t[0])),
    "sort_block keys": lambda lib, t: lib.sort_block(t[0].block(1), "keys"),
    "unique_metadata": lambda lib, t: lib.unique_metadata(t[0], "samples", "system"),
    "unique_metadata two names": lambda lib, t: lib.unique_metadata(
        t[0], "samples", ["atom", "system"]
    ),
    "unique_metadata a tuple": lambda lib, t: lib.unique_metadata(t[0], "properties", ("l",)),
    "unique_metadata gradient": lambda lib, t: lib.unique_metadata(
        t[0], "samples", "atom", gradient="positions"
    ),
    "unique_metadata unknown gradient": lambda lib, t: lib.unique_metadata(
        t[0], "samples", "atom", gradient="cell"
    ),
    "unique_metadata keys": lambda lib, t: lib.unique_metadata(t[0], "keys", "o3_lambda"),
    "unique_metadata unknown name": lambda lib, t: lib.unique_metadata(t[0], "samples", "spin"),
    "unique_metadata_block": lambda lib, t: lib.unique_metadata_block(
        t[0].block(1), "samples", ["system"]
    ),
    "unique_metadata_block empty": lambda lib, t: lib.unique_metadata_block(
        _last(t[0]), "samples", "atom"
    ),
    "unique_metadata_block gradient": lambda lib, t: lib.unique_metadata_block(
        t[0].block(1), "samples", "sample", gradient="strain"
    ),
    "unique_metadata_block properties": lambda lib, t: lib.unique_metadata_block(
        t[0].block(1), "properties", "n"
    ),
    "remove_gradients": lambda lib, t: lib.remove_gradients(t[0]),
    "remove_gradients one": lambda lib, t: lib.remove_gradients(t[0], ["positions"]),
    "remove_gradients unknown": lambda lib, t: lib.remove_gradients(t[0], ["cell"]),
    "remove_gradients_block": lambda lib, t: lib.remove_gradients_block(t[0].block(0), ["strain"]),
    "remove_gradients_block all": lambda lib, t: lib.remove_gradients_block(t[0].block(0)),
}


@pytest.mark.parametrize("case", SELECTIONS)
def test_selections(maps, case):
    same(SELECTIONS[case], *maps)


def test_one_hot():
    atoms = labels(["atom", "types"], [[0, 6], [1, 1], [2, 1], [3, 8], [4, 6]])

    def call(lib, dimension):
        return lib.one_hot(atoms.build(lib.core), dimension.build(lib.core))

    for dimension in (
        column("types", [1, 6, 8]),
        column("types", [8, 6, 1, 9]),
        column("atom", [4, 3, 2, 1, 0]),
        column("types", [1, 6]),  # a value missing: ValueError
        labels(["atom", "types"], [[0, 6]]),  # two names
        column("spin", [0]),  # not in the labels
    ):
        same(lambda lib, _, d=dimension: call(lib, d), None, None)
    result = bops.one_hot(atoms.build(blockmap), column("types", [1, 6, 8]).build(blockmap))
    np.testing.assert_array_equal(result.argmax(axis=1), [1, 0, 0, 2, 1])


BLOCK_FROM_ARRAY = {
    "2d": lambda lib, a: lib.block_from_array(a[0]),
    "4d": lambda lib, a: lib.block_from_array(a[1]),
    "4d names": lambda lib, a: lib.block_from_array(
        a[1], sample_names=["s"], component_names=["c", "d"], property_names=["p"]
    ),
    "float32": lambda lib, a: lib.block_from_array(a[2]),
    "ints": lambda lib, a: lib.block_from_array(a[3], property_names=["q"]),
    "too many sample names": lambda lib, a: lib.block_from_array(a[0], sample_names=["a", "b"]),
    "too few component names": lambda lib, a: lib.block_from_array(a[1], component_names=["c"]),
    "two property names": lambda lib, a: lib.block_from_array(a[0], property_names=["p", "q"]),
    "1d": lambda lib, a: lib.block_from_array(np.zeros(3)),
    "non-contiguous": lambda lib, a: lib.block_from_array(a[1][:, ::2].transpose(0, 2, 1, 3)),
}


@pytest.mark.parametrize("case", BLOCK_FROM_ARRAY)
def test_block_from_array(case):
    rng = np.random.default_rng(5)
    arrays = [
        rng.random((4, 3)),
        rng.random((2, 4, 3, 5)),
        rng.random((3, 2)).astype(np.float32),
        rng.integers(0, 9, (5, 1)),
    ]
    same(BLOCK_FROM_ARRAY[case], arrays, arrays)


# ------------------------------------------------------------ dimensions

DIMENSIONS = {
    "append keys": lambda lib, t: lib.append_dimension(t[0], "keys", "spin", 3),
    "append keys array": lambda lib, t: lib.append_dimension(
        t[0], "keys", "spin", np.arange(len(KEYS))
    ),
    "append samples": lambda lib, t: lib.append_dimension(t[0], "samples", "frame", 0),
    "append properties": lambda lib, t: lib.append_dimension(t[0], "properties", "k", 7),
    "append components": lambda lib, t: lib.append_dimension(t[0], "components", "c", 1),
    "append existing name": lambda lib, t: lib.append_dimension(t[0], "samples", "atom", 0),
    "append unknown axis": lambda lib, t: lib.append_dimension(t[0], "diagonal", "x", 0),
    "insert keys": lambda lib, t: lib.insert_dimension(t[0], "keys", 1, "spin", 2),
    "insert samples": lambda lib, t: lib.insert_dimension(t[0], "samples", 0, "frame", 5),
    "insert properties": lambda lib, t: lib.insert_dimension(t[0], "properties", 2, "k", -1),
    "insert out of range": lambda lib, t: lib.insert_dimension(t[0], "samples", 9, "frame", 5),
    "remove keys": lambda lib, t: lib.remove_dimension(
        lib.append_dimension(t[0], "keys", "spin", 0), "keys", "spin"
    ),
    "remove keys, a duplicate": lambda lib, t: lib.remove_dimension(t[0], "keys", "center_type"),
    "remove keys not unique": lambda lib, t: lib.remove_dimension(t[0], "keys", "o3_lambda"),
    "remove samples": lambda lib, t: lib.remove_dimension(
        lib.insert_dimension(t[0], "samples", 1, "frame", 3), "samples", "frame"
    ),
    "remove samples, a duplicate": lambda lib, t: lib.remove_dimension(t[0], "samples", "system"),
    "remove properties": lambda lib, t: lib.remove_dimension(t[0], "properties", "l"),
    "remove properties not unique": lambda lib, t: lib.remove_dimension(t[0], "properties", "n"),
    "remove a component": lambda lib, t: lib.remove_dimension(t[0], "components", "o3_mu"),
    "remove unknown name": lambda lib, t: lib.remove_dimension(t[0], "samples", "spin"),
    "rename keys": lambda lib, t: lib.rename_dimension(t[0], "keys", "o3_lambda", "l"),
    "rename samples": lambda lib, t: lib.rename_dimension(t[0], "samples", "atom", "center"),
    "rename properties": lambda lib, t: lib.rename_dimension(t[0], "properties", "n", "radial"),
    "rename components": lambda lib, t: lib.rename_dimension(t[0], "components", "o3_mu", "m"),
    "rename to an existing name": lambda lib, t: lib.rename_dimension(
        t[0], "samples", "atom", "system"
    ),
    "rename unknown": lambda lib, t: lib.rename_dimension(t[0], "samples", "spin", "s"),
    "permute keys": lambda lib, t: lib.permute_dimensions(t[0], "keys", [1, 0]),
    "permute samples": lambda lib, t: lib.permute_dimensions(t[0], "samples", [1, 0]),
    "permute properties": lambda lib, t: lib.permute_dimensions(t[0], "properties", [1, 0]),
    "permute components": lambda lib, t: lib.permute_dimensions(t[0], "components", [0]),
    "permute too few": lambda lib, t: lib.permute_dimensions(t[0], "samples", [0]),
    "permute repeated": lambda lib, t: lib.permute_dimensions(t[0], "samples", [0, 0]),
}


@pytest.mark.parametrize("case", DIMENSIONS)
def test_dimensions(maps, case):
    same(DIMENSIONS[case], *maps)


# ------------------------------------------------------------ reductions

REDUCTIONS = [
    f"{kind}_over_{axis}" for kind in ("sum", "mean", "std", "var") for axis in ("samples",)
] + [f"{kind}_over_properties" for kind in ("sum", "mean", "std", "var")]


def _names(operation):
    if operation.endswith("samples"):
        return ["atom", ["system"], ["system", "atom"], "spin", []]
    return ["l", ["n"], ["n", "l"], "spin", []]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
@pytest.mark.parametrize("operation", REDUCTIONS)
def test_reductions(operation, dtype):
    a, b = build(_spec(0, dtype)), build(_spec(1, dtype))
    for names in _names(operation):
        same(lambda lib, t, n=names: getattr(lib, operation)(t[0], n), (a[0], b[0]), (a[1], b[1]))
        same(
            lambda lib, t, n=names: getattr(lib, f"{operation}_block")(t[0].block(1), n),
            (a[0], b[0]),
            (a[1], b[1]),
        )
        # the empty block
        same(
            lambda lib, t, n=names: getattr(lib, f"{operation}_block")(_last(t[0]), n),
            (a[0], b[0]),
            (a[1], b[1]),
        )


def test_reductions_are_reachable_from_blockmap():
    for name in REDUCTIONS:
        for variant in (name, f"{name}_block"):
            assert getattr(blockmap, variant) is getattr(bops, variant)
            assert getattr(bops, variant).__module__.startswith("blockmap.operations.")


# ------------------------------------------------------------ like

LIKE = {
    "zeros_like": lambda lib, t: lib.zeros_like(t[0]),
    "zeros_like gradients": lambda lib, t: lib.zeros_like(t[0], gradients=["positions"]),
    "zeros_like one gradient": lambda lib, t: lib.zeros_like(t[0], gradients="strain"),
    "zeros_like unknown gradient": lambda lib, t: lib.zeros_like(t[0], gradients="cell"),
    "zeros_like requires_grad": lambda lib, t: lib.zeros_like(t[0], requires_grad=True),
    "zeros_like_block": lambda lib, t: lib.zeros_like_block(t[0].block(1), gradients=["strain"]),
    "ones_like": lambda lib, t: lib.ones_like(t[0]),
    "ones_like gradients": lambda lib, t: lib.ones_like(t[0], gradients=["positions", "strain"]),
    "ones_like_block": lambda lib, t: lib.ones_like_block(_last(t[0])),
    "ones_like_block gradient": lambda lib, t: lib.ones_like_block(t[0].block(0), "positions"),
}

LIKE_METADATA = {
    "empty_like": lambda lib, t: lib.empty_like(t[0]),
    "empty_like gradients": lambda lib, t: lib.empty_like(t[0], gradients=["positions"]),
    "empty_like unknown gradient": lambda lib, t: lib.empty_like(t[0], gradients=["cell"]),
    "empty_like_block": lambda lib, t: lib.empty_like_block(t[0].block(0), "strain"),
    "random_uniform_like": lambda lib, t: lib.random_uniform_like(t[0]),
    "random_uniform_like gradients": lambda lib, t: lib.random_uniform_like(
        t[0], gradients=["positions", "strain"]
    ),
    "random_uniform_like_block": lambda lib, t: lib.random_uniform_like_block(
        t[0].block(1), gradients="positions"
    ),
    "random_uniform_like_block empty": lambda lib, t: lib.random_uniform_like_block(_last(t[0])),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
@pytest.mark.parametrize("case", LIKE)
def test_like(case, dtype):
    a, b = build(_spec(0, dtype)), build(_spec(1, dtype))
    same(LIKE[case], (a[0], b[0]), (a[1], b[1]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", LIKE_METADATA)
def test_like_metadata(case, dtype):
    a, b = build(_spec(0, dtype)), build(_spec(1, dtype))
    same(LIKE_METADATA[case], (a[0], b[0]), (a[1], b[1]), values=False)
    if case.startswith("random"):
        result = LIKE_METADATA[case](OURS[0], (a[0], b[0]))
        result = result if isinstance(result, blockmap.TensorBlock) else result.block(0)
        assert np.all((result.values >= 0) & (result.values < 1))


# ---------------------------------------------- contiguity, autograd


def _strided(lib, strided=True):
    """A map whose values (and gradient values) are strided views of larger
    arrays (not C-contiguous) or, with ``strided=False``, C-contiguous."""
    rng = np.random.default_rng(9)
    values, gradient = rng.random((4, 6))[:, ::2], rng.random((3, 3)).T
    if not strided:
        values, gradient = values.copy(), gradient.copy()
    block = lib.TensorBlock(values, lib.Labels.range("s", 4), [], lib.Labels.range("p", 3))
    gradient_samples = lib.Labels(["sample"], np.array([[0], [1], [3]], dtype=np.int32))
    block.add_gradient(
        "g", lib.TensorBlock(gradient, gradient_samples, [], lib.Labels.range("p", 3))
    )
    return lib.TensorMap(lib.Labels.range("key", 1), [block])


CONTIGUITY = {
    "is_contiguous": lambda lib, t: lib.is_contiguous(t[0]),
    "is_contiguous_block": lambda lib, t: lib.is_contiguous_block(t[0].block(1)),
    "make_contiguous": lambda lib, t: lib.make_contiguous(t[0]),
    "make_contiguous then is": lambda lib, t: lib.is_contiguous(lib.make_contiguous(t[0])),
    "make_contiguous_block": lambda lib, t: lib.make_contiguous_block(t[0].block(0)),
    "detach": lambda lib, t: lib.detach(t[0]),
    "detach_block": lambda lib, t: lib.detach_block(t[0].block(2)),
    "requires_grad": lambda lib, t: lib.requires_grad(t[0]),
    "requires_grad False": lambda lib, t: lib.requires_grad(t[0], False),
    "requires_grad_block": lambda lib, t: lib.requires_grad_block(_last(t[0])),
    "requires_grad_block False": lambda lib, t: lib.requires_grad_block(t[0].block(0), False),
}


@pytest.mark.parametrize("case", CONTIGUITY)
def test_contiguity_and_autograd(maps, case):
    same(CONTIGUITY[case], *maps)


def test_strided_values():
    ours, theirs = _strided(blockmap), _strided(metatensor)
    for case in ("make_contiguous", "make_contiguous then is"):
        same(lambda lib, t, c=case: CONTIGUITY[c](lib, (t,)), ours, theirs)
    same(lambda lib, t: lib.make_contiguous_block(t.block(0)), ours, theirs)
    # on purpose (docs/design.md, "Into blockmap"): blockmap copies a strided
    # array into C-contiguous memory of its own, metatensor-core keeps the view
    assert mops.is_contiguous(theirs) is False
    assert mops.is_contiguous_block(theirs.block(0)) is False
    assert bops.is_contiguous(ours) is True
    assert blockmap.is_contiguous_block(ours.block(0)) is True
    assert ours.block(0).values.flags.c_contiguous
    assert ours.block(0).gradient("g").values.flags.c_contiguous
    # contiguous in both
    same(
        lambda lib, t: lib.is_contiguous(t), _strided(blockmap, False), _strided(metatensor, False)
    )
    same(
        lambda lib, t: lib.is_contiguous_block(t.block(0)),
        _strided(blockmap, False),
        _strided(metatensor, False),
    )


def test_requires_grad_warns_with_numpy(maps):
    ours, theirs = maps
    with pytest.warns(UserWarning) as their_warnings:
        mops.requires_grad(theirs[0])
    with pytest.warns(UserWarning) as our_warnings:
        bops.requires_grad(ours[0])
    assert [str(w.message) for w in our_warnings] == [str(w.message) for w in their_warnings]
    # the values are the same arrays: numpy has no autograd to detach from
    assert np.shares_memory(bops.detach(ours[0]).block(0).values, ours[0].block(0).values)
    assert np.shares_memory(mops.detach(theirs[0]).block(0).values, theirs[0].block(0).values)


# ------------------------------------------------------ join and split


JOIN = {
    "join samples": lambda lib, t: lib.join([t[0], t[1]], "samples", add_dimension="tensor"),
    "join properties": lambda lib, t: lib.join(
        [t[0], lib.rename_dimension(t[1], "properties", "n", "k")], "properties"
    ),
    "join duplicated samples": lambda lib, t: lib.join([t[0], t[1]], "samples"),
    "join_blocks": lambda lib, t: lib.join_blocks(
        [t[0].block(0), t[1].block(0)], "samples", add_dimension="b"
    ),
    "split": lambda lib, t: lib.split(
        t[0], "samples", [_selection(lib, ["system"], [[0]]), _selection(lib, ["system"], [[1]])]
    ),
    "split_block": lambda lib, t: lib.split_block(t[0].block(1), "properties", [[0], [2, 1]]),
    "split unknown axis": lambda lib, t: lib.split(t[0], "keys", [[0]]),
}


@pytest.mark.parametrize("case", JOIN)
def test_join_and_split(maps, case):
    # blockmap.operations.join is metatensor-operations', blockmap.join is blockmap's
    same(JOIN[case], *maps)
    assert blockmap.join is not bops.join and blockmap.split is not bops.split


# ------------------------------------------- more arguments, more shapes

MORE = {
    "append a list": lambda lib, t: lib.append_dimension(t[0], "keys", "spin", [0, 1, 2, 3]),
    "append int64 values": lambda lib, t: lib.append_dimension(
        t[0], "keys", "spin", np.array([0, 1, 2, 3], dtype=np.int64)
    ),
    "append a numpy int": lambda lib, t: lib.append_dimension(t[0], "samples", "s", np.int64(4)),
    "append a float": lambda lib, t: lib.append_dimension(t[0], "samples", "spin", 2.5),
    "append a bool": lambda lib, t: lib.append_dimension(t[0], "samples", "spin", True),
    "append too few values": lambda lib, t: lib.append_dimension(
        t[0], "keys", "spin", np.array([0, 1])
    ),
    "append 2-D values": lambda lib, t: lib.append_dimension(
        t[0], "keys", "spin", np.zeros((4, 1), dtype=np.int32)
    ),
    "insert at -1": lambda lib, t: lib.insert_dimension(t[0], "samples", -1, "frame", 5),
    "insert at a numpy int": lambda lib, t: lib.insert_dimension(
        t[0], "keys", np.int64(1), "frame", 5
    ),
    "insert at a float": lambda lib, t: lib.insert_dimension(t[0], "keys", 1.0, "frame", 5),
    "permute an array": lambda lib, t: lib.permute_dimensions(t[0], "samples", np.array([1, 0])),
    "permute a tuple": lambda lib, t: lib.permute_dimensions(t[0], "keys", (1, 0)),
    "permute out of range": lambda lib, t: lib.permute_dimensions(t[0], "keys", [2, 0]),
    "rename to an invalid name": lambda lib, t: lib.rename_dimension(
        t[0], "keys", "o3_lambda", "1x"
    ),
    "rename to an int": lambda lib, t: lib.rename_dimension(t[0], "keys", "o3_lambda", 3),
    "remove every property dimension": lambda lib, t: lib.remove_dimension(
        lib.remove_dimension(t[0], "properties", "l"), "properties", "n"
    ),
    "sum over a tuple": lambda lib, t: lib.sum_over_samples(t[0], ("atom",)),
    "sum over every sample name": lambda lib, t: lib.sum_over_samples(t[0], ["system", "atom"]),
    "sum over None": lambda lib, t: lib.sum_over_samples(t[0], None),
    "mean over an int": lambda lib, t: lib.mean_over_samples(t[0], 3),
    "drop, names in another order": lambda lib, t: lib.drop_blocks(
        t[0], _selection(lib, ["center_type", "o3_lambda"], [[6, 1]])
    ),
    "filter, names in another order": lambda lib, t: lib.filter_blocks(
        t[0], _selection(lib, ["center_type", "o3_lambda"], [[6, 1], [1, 1]])
    ),
    "drop every block": lambda lib, t: lib.drop_blocks(t[0], t[0].keys),
    "filter by empty labels": lambda lib, t: lib.filter_blocks(
        t[0], lib.Labels.empty(["o3_lambda"])
    ),
    "one_hot of samples": lambda lib, t: lib.one_hot(
        t[0].block(1).samples, lib.Labels.range("system", 2)
    ),
    "one_hot of keys": lambda lib, t: lib.one_hot(
        t[0].keys, _selection(lib, ["o3_lambda"], [[0], [1], [2]])
    ),
    "one_hot of empty samples": lambda lib, t: lib.one_hot(
        _last(t[0]).samples, lib.Labels.range("system", 2)
    ),
    "one_hot of an entry": lambda lib, t: lib.one_hot(
        t[0].keys[0], _selection(lib, ["o3_lambda"], [[0], [1], [2]])
    ),
    "unique gradient properties": lambda lib, t: lib.unique_metadata(
        t[0], "properties", ["n"], gradient="strain"
    ),
    "slice by a block's samples": lambda lib, t: lib.slice(t[0], "samples", t[0].block(0).samples),
    "slice_block by an entry": lambda lib, t: lib.slice_block(
        t[0].block(0), "samples", t[0].block(0).samples[0]
    ),
    "slice by int64 labels": lambda lib, t: lib.slice(
        t[0], "samples", lib.Labels(["system"], np.array([[0]], dtype=np.int64))
    ),
    "slice by empty labels": lambda lib, t: lib.slice(t[0], "properties", lib.Labels.empty(["n"])),
    "equal_metadata check two": lambda lib, t: lib.equal_metadata(
        t[0], t[1], check=["components", "properties"]
    ),
    "equal_metadata check a tuple": lambda lib, t: lib.equal_metadata(
        t[0], t[1], check=("samples",)
    ),
    "zeros_like a tuple": lambda lib, t: lib.zeros_like(t[0], gradients=("strain",)),
    "ones_like no gradients": lambda lib, t: lib.ones_like(t[0], gradients=[]),
    "equal maps without blocks": lambda lib, t: lib.equal(
        lib.TensorMap(lib.Labels.empty(["a"]), []), lib.TensorMap(lib.Labels.empty(["b"]), [])
    ),
    "add keys in another order": lambda lib, t: lib.add(t[0], lib.sort(t[1], "keys")),
    "join nothing": lambda lib, t: lib.join([], "samples"),
    "block_from_array a list": lambda lib, t: lib.block_from_array([[1.0, 2.0]]),
    "block_from_array no samples": lambda lib, t: lib.block_from_array(np.zeros((0, 3))),
    "block_from_array bools": lambda lib, t: lib.block_from_array(np.zeros((2, 3), dtype=bool)),
    "block_from_array complex": lambda lib, t: lib.block_from_array(np.ones((2, 3), dtype=complex)),
    "block_from_array fortran": lambda lib, t: lib.block_from_array(
        np.asfortranarray(np.arange(6.0).reshape(2, 3))
    ),
    "block_from_array read-only": lambda lib, t: lib.block_from_array(
        np.broadcast_to(np.arange(3.0), (2, 3))
    ),
    "multiply by a numpy float": lambda lib, t: lib.multiply(t[0], np.float32(2)),
    "add a 0-D array": lambda lib, t: lib.add(t[0], np.array(2.0)),
    "add a bool": lambda lib, t: lib.add(t[0], True),
    "add a complex": lambda lib, t: lib.add(t[0], 1j),
    "pow -1": lambda lib, t: lib.pow(t[0], -1),
    "divide by 0": lambda lib, t: lib.divide(t[0], 0),
}


@pytest.mark.parametrize("case", MORE)
def test_more_arguments(maps, case):
    same(MORE[case], *maps)


def test_deliberate_differences(maps):
    ours, theirs = maps
    # labels values out of int32 are refused, metatensor wraps them around
    # (tests/python/compat/test_labels_api.py)
    wrapped = mops.append_dimension(theirs[0], "samples", "spin", 2**40)
    assert np.all(wrapped.block(0).samples.column("spin") == 0)
    with pytest.raises(ValueError, match="int32"):
        bops.append_dimension(ours[0], "samples", "spin", 2**40)
    # big-endian values are copied to native order (tests/python/core/test_zero_copy.py)
    array = np.arange(6.0).reshape(2, 3).astype(">f8")
    assert mops.block_from_array(array).values.dtype == ">f8"
    ours_block = bops.block_from_array(array)
    assert ours_block.values.dtype == "=f8"
    np.testing.assert_array_equal(ours_block.values, array)


# ------------------------------------------------------------ checks


def test_checks():
    before = (mops.checks_enabled(), bops.checks_enabled())
    try:
        for lib in (THEIRS, *OURS):
            assert lib.checks_enabled() is True
            assert repr(lib.unsafe_disable_checks()) == "checks disabled"
            assert lib.checks_enabled() is False
            assert repr(lib.unsafe_enable_checks()) == "checks enabled"
            assert lib.checks_enabled() is True
            with lib.unsafe_disable_checks():
                assert lib.checks_enabled() is False
                with lib.unsafe_enable_checks():
                    assert lib.checks_enabled() is True
                assert lib.checks_enabled() is False
            assert lib.checks_enabled() is True
        # each copy of metatensor-operations has its own switch
        with bops.unsafe_disable_checks():
            assert mops.checks_enabled() is True
            assert blockmap.checks_enabled() is False
        with mops.unsafe_disable_checks():
            assert bops.checks_enabled() is True
    finally:
        mops._checks._CHECKS_ENABLED, bops._checks._CHECKS_ENABLED = before
    assert (mops.checks_enabled(), bops.checks_enabled()) == before


def test_disabled_checks_skip_the_same_checks(maps):
    ours, theirs = maps
    call = BINARY_ERRORS["different samples"]
    try:
        with mops.unsafe_disable_checks(), bops.unsafe_disable_checks():
            same(call, ours, theirs)
    finally:
        mops.unsafe_enable_checks()
        bops.unsafe_enable_checks()
    assert isinstance(same(call, ours, theirs), Exception)


# ------------------------------------------------------------ operators


def _iadd(tensor, other):
    before = tensor
    tensor += other
    assert tensor is not before  # no __iadd__: a new map
    return tensor


OPERATORS = {
    "t + t": lambda lib, t: t[0] + t[1],
    "t + 2.0": lambda lib, t: t[0] + 2.0,
    "t - t": lambda lib, t: t[0] - t[1],
    "t - 1": lambda lib, t: t[0] - 1,
    "t * 3": lambda lib, t: t[0] * 3,
    "t * t": lambda lib, t: t[0] * t[1],
    "t / t": lambda lib, t: t[0] / t[1],
    "t / 2": lambda lib, t: t[0] / 2,
    "t ** 2": lambda lib, t: t[0] ** 2,
    "t ** 0.5": lambda lib, t: t[0] ** 0.5,
    "t @ other": lambda lib, t: t[0] @ _dot_other(lib),
    "t @ t": lambda lib, t: t[0] @ t[1],
    "-t": lambda lib, t: -t[0],
    "+t": lambda lib, t: +t[0],
    "+t is t": lambda lib, t: (+t[0]) is t[0],
    "3 + t": lambda lib, t: 3 + t[0],
    "3 * t": lambda lib, t: 3 * t[0],
    "t + block": lambda lib, t: t[0] + t[1].block(0),
    "t + other keys": lambda lib, t: t[0] + _other_keys(lib, t[1]),
    "t ** t": lambda lib, t: t[0] ** t[1],
    "t += t": lambda lib, t: _iadd(t[0], t[1]),
    "t @ 3": lambda lib, t: t[0] @ 3,
    "t / 0": lambda lib, t: t[0] / 0,
    "t - block": lambda lib, t: t[0] - t[1].block(0),
    # metatensor-core's __pow__ takes no modulo
    "pow with modulo": lambda lib, t: pow(t[0], 2, 3),
    "pow with None modulo": lambda lib, t: pow(t[0], 2, None),
}


@pytest.mark.parametrize("case", OPERATORS)
def test_operators(maps, case):
    result = same(OPERATORS[case], *maps)
    if case in ("3 + t", "3 * t"):
        assert isinstance(result, TypeError)


def test_operators_are_the_operations(maps):
    (a, b), _ = maps
    assert (a + b) == bops.add(a, b)
    assert (a * 2) == bops.multiply(a, 2)
    assert (-a) == bops.multiply(a, -1)
    assert (+a) is a
    assert (a - a) == bops.subtract(a, a)
    assert bops.equal(a / b, bops.divide(a, b))
    assert bops.equal(a**2, bops.pow(a, 2))


def _rowless_gradients():
    """A map of two blocks whose "positions" gradient has no rows in the first
    block (the keys have none of the names of the cases' keys)."""
    rng = np.random.default_rng(3)
    xyz = [column("xyz", [0, 1, 2])]
    return Spec(
        column("k", [0, 1]),
        [
            block(
                rng,
                labels(["system", "atom"], [[0, 0], [0, 1]]),
                PROPERTIES,
                [],
                {"positions": (labels(["sample", "system", "atom"], []), xyz)},
            ),
            block(
                rng,
                labels(["system", "atom"], [[1, 0]]),
                PROPERTIES,
                [],
                {"positions": (labels(["sample", "system", "atom"], [[0, 1, 0]]), xyz)},
            ),
        ],
    )


ROWLESS = {
    **{f"selections: {k}": v for k, v in SELECTIONS.items()},
    **{f"dimensions: {k}": v for k, v in DIMENSIONS.items()},
    **{f"contiguity: {k}": v for k, v in CONTIGUITY.items()},
    **{f"arithmetic: {k}": v for k, v in ARITHMETIC.items()},
    **{f"comparisons: {k}": v for k, v in COMPARISONS.items()},
    **{f"metadata: {k}": v for k, v in METADATA.items()},
    **{f"more: {k}": v for k, v in MORE.items()},
    **{
        f"{name}: {names}": lambda lib, t, name=name, names=names: getattr(lib, name)(t[0], names)
        for name in REDUCTIONS
        for names in ("atom", "system", ["n"], "l")
    },
}


@pytest.mark.parametrize("case", ROWLESS)
def test_gradients_without_rows_and_other_keys(case):
    ours, theirs = build(_rowless_gradients())
    same(ROWLESS[case], (ours, ours.copy()), (theirs, theirs.copy()))


# ------------------------------------------------------ memory


def _arrays(data):
    """Every values array of the maps or blocks ``data``, gradients included."""
    arrays = []
    for item in data:
        for b in (
            item.blocks() if isinstance(item, blockmap.TensorMap | metatensor.TensorMap) else [item]
        ):
            arrays.append(b.values)
            arrays.extend(b.gradient(p).values for p in sorted(b.gradients_list()))
    return arrays


def _snapshot(data):
    return [a.copy() for a in _arrays(data)]


ALIASING = {
    **{f"selections: {k}": v for k, v in SELECTIONS.items()},
    **{f"dimensions: {k}": v for k, v in DIMENSIONS.items()},
    **{f"contiguity: {k}": v for k, v in CONTIGUITY.items()},
    **{f"arithmetic: {k}": v for k, v in ARITHMETIC.items()},
    **{f"like: {k}": v for k, v in LIKE.items()},
    **{f"operators: {k}": v for k, v in OPERATORS.items() if k != "+t is t"},
}


@pytest.mark.parametrize("case", ALIASING)
def test_results_share_memory_as_in_metatensor(case):
    """Which arrays of a result are the inputs' (a view, not a copy) is the
    same in both libraries, and no input is changed."""
    a, b = build(_spec(0, empty=False)), build(_spec(1, empty=False))
    ours, theirs = (a[0], b[0]), (a[1], b[1])
    before = _snapshot(ours)
    call = ALIASING[case]

    def sharing(lib, data):
        result, error = _run(call, lib, data)
        if error is not None or not isinstance(
            result,
            blockmap.TensorMap
            | metatensor.TensorMap
            | blockmap.TensorBlock
            | metatensor.TensorBlock,
        ):
            return error is None
        inputs = _arrays(data)
        return [[np.shares_memory(r, i) for i in inputs] for r in _arrays([result])]

    expected = sharing(THEIRS, theirs)
    for lib in OURS:
        assert sharing(lib, ours) == expected
    for old, new in zip(before, _arrays(ours), strict=True):
        np.testing.assert_array_equal(old, new)


# ----------------------------------------- metatensor is not disturbed


def _python(code, *, check=True):
    return run_python(code, check=check)


_BOTH = """
import numpy as np

def maps(lib):
    block = lib.TensorBlock(
        np.arange(6.0).reshape(3, 2),
        lib.Labels.range("s", 3),
        [],
        lib.Labels.range("p", 2),
    )
    return lib.TensorMap(lib.Labels.range("k", 1), [block])

ours, theirs = maps(blockmap), maps(metatensor)
assert sys.modules["metatensor.operations"] is metatensor_operations
assert metatensor.operations is metatensor_operations
assert metatensor.equal is metatensor_operations.equal
assert metatensor.equal(theirs, theirs) is True
assert metatensor.equal(theirs, metatensor.add(theirs, 1)) is False
assert blockmap.operations.equal(ours, ours) is True
assert blockmap.equal(ours, blockmap.add(ours, 1)) is False
assert (theirs + theirs).block(0).values[2, 1] == 10.0
assert (ours + ours).block(0).values[2, 1] == 10.0
# the functions that check their arguments refuse the other library's maps
for call in (
    lambda: blockmap.operations.add(theirs, theirs),
    lambda: blockmap.subtract(theirs, 1),
    lambda: blockmap.drop_blocks(theirs, blockmap.Labels.range("k", 1)),
    lambda: blockmap.operations.slice(theirs, "samples", blockmap.Labels.range("s", 1)),
    lambda: blockmap.operations.add(ours, theirs),
    lambda: blockmap.equal(ours, theirs),
    lambda: metatensor.add(ours, ours),
    lambda: metatensor.multiply(ours, 2),
    lambda: metatensor.slice(ours, "samples", metatensor.Labels.range("s", 1)),
    lambda: metatensor.add(theirs, ours),
    lambda: metatensor.equal(theirs, ours),
):
    try:
        call()
    except TypeError:
        pass
    else:
        raise AssertionError("no TypeError")
# metatensor's equal_metadata calls a map of the other library different;
# blockmap's operations refuse metatensor's maps, naming the conversion
assert metatensor.equal_metadata(ours, ours) is False
for call in (
    lambda: blockmap.operations.equal_metadata(theirs, theirs),
    lambda: blockmap.equal_metadata_raise(ours, theirs),
    lambda: blockmap.equal(theirs, theirs),
    lambda: blockmap.equal(ours, theirs),
    lambda: blockmap.allclose(theirs, ours),
    lambda: blockmap.operations.join([ours, theirs], "samples"),
):
    try:
        call()
    except blockmap.BlockMapTypeError as error:
        assert "metatensor.TensorMap" in str(error), error
        assert "blockmap.from_metatensor(x)" in str(error), error
    else:
        raise AssertionError("no BlockMapTypeError")
# metatensor-operations' equal does not check its arguments' types: it
# compares any two maps through their methods
assert metatensor.equal(ours, ours) is True
assert blockmap.operations.TensorMap is blockmap.TensorMap
assert metatensor_operations._backend.TensorMap is metatensor.TensorMap
assert sys.modules["blockmap.operations._backend"].TensorMap is blockmap.TensorMap
assert blockmap.operations._add.TensorMap is blockmap.TensorMap
assert metatensor_operations._add.TensorMap is metatensor.TensorMap
assert blockmap.NotEqualError is not metatensor.NotEqualError
print("ok")
"""


@pytest.mark.parametrize(
    "imports",
    [
        "import sys, blockmap, blockmap.operations, metatensor, metatensor_operations",
        "import sys, metatensor, metatensor.operations, metatensor_operations, blockmap\n"
        "import blockmap.operations",
        "import sys, metatensor_operations, blockmap, blockmap.operations, metatensor",
    ],
)
def test_metatensor_is_not_disturbed(imports):
    assert _python(imports + "\n" + _BOTH).stdout.strip() == "ok"


def test_import_blockmap_is_light():
    result = _python(
        """
        import sys
        import blockmap
        import numpy as np
        t = blockmap.TensorMap(
            blockmap.Labels.range("k", 1),
            [blockmap.TensorBlock(np.zeros((1, 1)), blockmap.Labels.range("s", 1), [],
                                  blockmap.Labels.range("p", 1))],
        )
        t == t
        print(sorted(
            name for name in ("blockmap.operations", "metatensor_operations", "torch",
                              "metatensor", "metatensor.operations")
            if name in sys.modules
        ))
        assert blockmap.HAS_METATENSOR_OPERATIONS is True
        assert "add" in dir(blockmap)
        """
    )
    assert result.stdout.strip() == "[]"


_BLOCKED = """
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "metatensor_operations" or name.startswith("metatensor_operations."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Block())
"""


# two ways of making metatensor-operations unimportable
_BLOCKED_BY_SYS_MODULES = """
import sys
sys.modules["metatensor_operations"] = None
"""


@pytest.mark.parametrize("blocked", [_BLOCKED, _BLOCKED_BY_SYS_MODULES])
def test_without_metatensor_operations(blocked):
    result = _python(
        blocked
        + """
import numpy as np
import blockmap

assert blockmap.HAS_METATENSOR_OPERATIONS is False
assert "add" not in dir(blockmap)
try:
    blockmap.add
except AttributeError as error:
    assert "metatensor-operations" in str(error), error
else:
    raise AssertionError("blockmap.add")
assert not hasattr(blockmap, "equal")
try:
    import blockmap.operations
except ImportError as error:
    assert "pip install metatensor-operations" in str(error), error
else:
    raise AssertionError("import blockmap.operations")
assert "blockmap.operations" not in sys.modules

t = blockmap.TensorMap(
    blockmap.Labels.range("k", 1),
    [blockmap.TensorBlock(np.ones((2, 1)), blockmap.Labels.range("s", 2), [],
                          blockmap.Labels.range("p", 1))],
)
for call in (lambda: t + t, lambda: t * 2, lambda: -t, lambda: t @ t):
    try:
        call()
    except ImportError as error:
        assert "metatensor-operations" in str(error), error
    else:
        raise AssertionError("an operator")
assert +t is t
# the rest of blockmap works
assert t == t.copy()
assert blockmap.join([t, t], "samples", add_dimension="x").block(0).values.shape == (4, 1)
print("ok")
"""
    )
    assert result.stdout.strip() == "ok"


# --------------------------------------------------- regression tests


def test_empty_map():
    # a map without blocks
    def empty(lib):
        return lib.TensorMap(lib.Labels.empty(["k"]), [])

    ours, theirs = empty(blockmap), empty(metatensor)
    for call in (
        lambda lib, t: lib.add(t, t),
        lambda lib, t: lib.equal(t, t),
        lambda lib, t: lib.sort(t),
        lambda lib, t: lib.zeros_like(t),
        lambda lib, t: lib.is_contiguous(t),
        lambda lib, t: lib.unique_metadata(t, "samples", "s"),
        lambda lib, t: lib.drop_empty_blocks(t),
        lambda lib, t: lib.sum_over_samples(t, "s"),
    ):
        same(call, ours, theirs)


def test_gradients_of_gradients():
    spec = _spec(0, components=False, empty=False)
    for b in spec.blocks:
        b.gradients["strain"].gradients["cell"] = BlockSpec(
            np.ones((1, 3, 3, 3)),
            labels(["sample"], [[0]]),
            [],
            PROPERTIES,
        )
    ours, theirs = build(spec)
    for call in (
        lambda lib, t: lib.detach(t),
        lambda lib, t: lib.requires_grad(t, False),
        lambda lib, t: lib.is_contiguous(t),
        lambda lib, t: lib.make_contiguous(t),
        lambda lib, t: lib.add(t, t),
        lambda lib, t: lib.multiply(t, 2),
        lambda lib, t: lib.sum_over_samples(t, "atom"),
        lambda lib, t: lib.slice(t, "samples", lib.Labels(["system"], np.array([[0]]))),
    ):
        same(call, ours, theirs)
