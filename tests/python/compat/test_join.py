"""blockmap.join and blockmap.join_blocks (the core's, in Rust) against
metatensor-operations' join and join_blocks on the same data in
metatensor-core: results entry by entry, errors by type."""

import warnings

import numpy as np
import pytest
from tensor_oracle import BlockSpec, Spec, assert_same, block, build, column, expected_type, labels

import blockmap

metatensor = pytest.importorskip("metatensor")
operations = pytest.importorskip("metatensor_operations")


def _expected(error):
    if isinstance(error, operations._utils.NotEqualError):
        return blockmap.NotEqualError
    return expected_type(error)


def same_join(call, ours, theirs):
    """``call(lib, objects)`` with blockmap's join on ours and
    metatensor-operations' on theirs: the same result or errors of the same
    type."""
    try:
        their_result, their_error = call(operations, theirs), None
    except Exception as error:  # noqa: BLE001 - compared below
        their_result, their_error = None, error
    try:
        our_result, our_error = call(blockmap, ours), None
    except Exception as error:  # noqa: BLE001 - compared below
        our_result, our_error = None, error
    if their_error is not None:
        assert our_error is not None, f"metatensor raised {their_error!r}, blockmap returned"
        assert isinstance(our_error, _expected(their_error)), (
            f"metatensor raised {their_error!r}; blockmap raised {our_error!r}"
        )
        return None
    if our_error is not None:
        raise AssertionError(f"metatensor returned, blockmap raised {our_error!r}") from our_error
    assert_same(our_result, their_result)
    return our_result


def _map(rng, keys, samples, properties, gradients=None, components=(), dtype=np.float64):
    """A map of ``len(keys)`` blocks with these labels (LabelsSpec)."""
    blocks = [
        block(rng, samples, properties, components, gradients=gradients, dtype=dtype) for _ in keys
    ]
    return Spec(column("key", keys), blocks)


def _maps(specs):
    built = [build(spec) for spec in specs]
    return [ours for ours, _ in built], [theirs for _, theirs in built]


GRADIENT = {
    "positions": (labels(["sample", "atom"], [[0, 0], [1, 1], [1, 2]]), [column("xyz", [0, 1, 2])])
}


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("add_dimension", [None, "tensor"])
@pytest.mark.parametrize("with_gradients", [False, True])
@pytest.mark.parametrize("count", [2, 3])
def test_join_samples(rng, add_dimension, with_gradients, count):
    gradients = GRADIENT if with_gradients else None
    specs = [
        _map(
            rng,
            [0, 1],
            labels(["system", "atom"], [[i, 0], [i, 1], [i, 2]]),
            column("n", [0, 1]),
            gradients,
        )
        for i in range(count)
    ]
    ours, theirs = _maps(specs)
    same_join(
        lambda lib, maps: lib.join(maps, axis="samples", add_dimension=add_dimension), ours, theirs
    )


def test_join_samples_with_duplicated_samples(rng):
    # the same samples twice: refused unless a dimension tells them apart
    spec = _map(rng, [0], column("s", [0, 1]), column("n", [0, 1]))
    ours, theirs = _maps([spec, spec])
    same_join(lambda lib, maps: lib.join(maps, "samples"), ours, theirs)
    same_join(lambda lib, maps: lib.join(maps, "samples", add_dimension="tensor"), ours, theirs)


@pytest.mark.parametrize("add_dimension", [None, "tensor"])
def test_join_properties(rng, add_dimension):
    specs = [
        _map(
            rng,
            [0, 1],
            column("s", [0, 1, 2]),
            column("n", [3 * i, 3 * i + 1]),
            components=[column("c", [0, 1])],
        )
        for i in range(3)
    ]
    ours, theirs = _maps(specs)
    same_join(
        lambda lib, maps: lib.join(maps, "properties", add_dimension=add_dimension), ours, theirs
    )


def test_join_properties_with_different_names(rng):
    a = _map(rng, [0], column("s", [0, 1]), column("n", [0, 1]))
    b = _map(rng, [0], column("s", [0, 1]), labels(["l", "m"], [[0, 0], [1, 2], [1, 3]]))
    ours, theirs = _maps([a, b])
    same_join(lambda lib, maps: lib.join(maps, "properties"), ours, theirs)
    same_join(lambda lib, maps: lib.join(maps, "properties", add_dimension="t"), ours, theirs)


def test_join_properties_gradients_on_different_samples(rng):
    # gradients missing from one input are zeros in the joined block
    a = _map(
        rng,
        [0],
        column("s", [0, 1]),
        column("n", [0, 1]),
        {"g": (labels(["sample", "x"], [[0, 0], [1, 0]]), [])},
    )
    b = _map(
        rng,
        [0],
        column("s", [0, 1]),
        column("n", [2]),
        {"g": (labels(["sample", "x"], [[1, 0], [1, 5]]), [])},
    )
    ours, theirs = _maps([a, b])
    result = same_join(lambda lib, maps: lib.join(maps, "properties"), ours, theirs)
    assert result is not None and len(result.block(0).gradient("g").samples) == 3


@pytest.mark.parametrize("axis", ["samples", "properties"])
@pytest.mark.parametrize("different_keys", ["error", "intersection", "union", "other"])
def test_different_keys(rng, axis, different_keys):
    if axis == "samples":
        a = _map(rng, [0, 1, 2], column("s", [0, 1]), column("n", [0, 1]), GRADIENT)
        b = _map(rng, [2, 3, 1], column("s", [2, 3]), column("n", [0, 1]), GRADIENT)
    else:
        a = _map(rng, [0, 1, 2], column("s", [0, 1]), column("n", [0, 1]), GRADIENT)
        b = _map(rng, [2, 3, 1], column("s", [0, 1]), column("n", [2, 3]), GRADIENT)
    ours, theirs = _maps([a, b])
    same_join(lambda lib, maps: lib.join(maps, axis, different_keys=different_keys), ours, theirs)


@pytest.mark.parametrize("axis", ["samples", "properties"])
def test_same_keys_in_another_order(rng, axis):
    samples = (
        [column("s", [0, 1]), column("s", [2, 3])]
        if axis == "samples"
        else [column("s", [0, 1])] * 2
    )
    properties = (
        [column("n", [0, 1])] * 2 if axis == "samples" else [column("n", [0]), column("n", [1])]
    )
    a = _map(rng, [0, 1, 2], samples[0], properties[0])
    b = _map(rng, [2, 0, 1], samples[1], properties[1])
    ours, theirs = _maps([a, b])
    same_join(lambda lib, maps: lib.join(maps, axis), ours, theirs)


MISMATCHES = {
    "sample names": lambda rng: (
        _map(rng, [0], column("s", [0]), column("n", [0])),
        _map(rng, [0], column("t", [1]), column("n", [0])),
    ),
    "properties": lambda rng: (
        _map(rng, [0], column("s", [0]), column("n", [0])),
        _map(rng, [0], column("s", [1]), column("n", [1])),
    ),
    "components": lambda rng: (
        _map(rng, [0], column("s", [0]), column("n", [0]), components=[column("c", [0])]),
        _map(rng, [0], column("s", [1]), column("n", [0]), components=[column("c", [1])]),
    ),
    "number of components": lambda rng: (
        _map(rng, [0], column("s", [0]), column("n", [0]), components=[column("c", [0])]),
        _map(rng, [0], column("s", [1]), column("n", [0])),
    ),
    "gradients": lambda rng: (
        _map(rng, [0], column("s", [0, 1]), column("n", [0]), GRADIENT),
        _map(rng, [0], column("s", [2, 3]), column("n", [0])),
    ),
    "key names": lambda rng: (
        _map(rng, [0], column("s", [0]), column("n", [0])),
        Spec(column("other", [0]), [block(rng, column("s", [1]), column("n", [0]))]),
    ),
    "number of keys": lambda rng: (
        _map(rng, [0], column("s", [0]), column("n", [0])),
        _map(rng, [0, 1], column("s", [1]), column("n", [0])),
    ),
}


@pytest.mark.parametrize("axis", ["samples", "properties"])
@pytest.mark.parametrize("case", MISMATCHES)
def test_mismatched_inputs(rng, axis, case):
    ours, theirs = _maps(MISMATCHES[case](rng))
    same_join(lambda lib, maps: lib.join(maps, axis), ours, theirs)


ARGUMENTS = {
    "a map, not a list": lambda maps: maps[0],
    "a list with a block": lambda maps: [maps[0], maps[1].block(0)],
    "an empty list": lambda maps: [],
    "a tuple": lambda maps: tuple(maps),
}


@pytest.mark.parametrize("case", ARGUMENTS)
def test_arguments(rng, case):
    spec = _map(rng, [0], column("s", [0]), column("n", [0]))
    other = _map(rng, [0], column("s", [1]), column("n", [0]))
    ours, theirs = _maps([spec, other])
    same_join(lambda lib, maps: lib.join(ARGUMENTS[case](maps), "samples"), ours, theirs)
    same_join(lambda lib, maps: lib.join(maps, "diagonal"), ours, theirs)
    same_join(lambda lib, maps: lib.join(maps, 3), ours, theirs)


def test_one_map_is_returned_as_is(rng):
    ours, theirs = _maps([_map(rng, [0], column("s", [0]), column("n", [0]))])
    assert blockmap.join(ours, "samples") is ours[0]
    assert operations.join(theirs, "samples") is theirs[0]
    # metatensor-operations returns before looking at `different_keys`
    assert blockmap.join(ours, "samples", different_keys="other") is ours[0]


def test_gradients_of_gradients_are_not_implemented(rng):
    nested = _map(rng, [0], column("s", [0, 1]), column("n", [0]), GRADIENT)
    # one more level, with the parent gradient's components
    inner = BlockSpec(
        rng.random((1, 3, 1)), labels(["sample", "cell"], [[0, 0]]), [], column("n", [0])
    )
    nested.blocks[0].gradients["positions"].gradients["cell"] = inner
    ours, theirs = _maps([nested, nested])
    same_join(lambda lib, maps: lib.join(maps, "samples", add_dimension="t"), ours, theirs)


@pytest.mark.parametrize("second", [np.float32, np.int32, np.int16])
def test_lossless_dtypes_follow_the_first_map(rng, second):
    a = _map(rng, [0], column("s", [0]), column("n", [0, 1]), dtype=np.float64)
    b = _map(rng, [0], column("s", [1]), column("n", [0, 1]), dtype=second)
    ours, theirs = _maps([a, b])
    result = same_join(lambda lib, maps: lib.join(maps, "samples"), ours, theirs)
    assert result.block(0).values.dtype == np.float64


def _one_column(lib, values, dtype, start, torch_values=False):
    values = np.array(values, dtype=dtype).reshape(-1, 1)
    if torch_values:
        import torch

        values = torch.from_numpy(values)
    samples = lib.Labels(["s"], np.arange(start, start + len(values)).reshape(-1, 1))
    block = lib.TensorBlock(values, samples, [], lib.Labels(["p"], np.array([[0]])))
    return lib.TensorMap(lib.Labels(["k"], np.array([[0]])), [block])


# the examples of the issue: metatensor-operations assigns every input into
# an array of the first's dtype, which changes these values
LOSSY = [
    (np.int32, np.float64, [0.7, 1e10]),
    (np.float32, np.float64, [1e300]),
    (np.int32, np.int64, [2**40]),
    (np.float64, np.int64, [2**53 + 1]),
]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize(("first", "second", "values"), LOSSY)
def test_lossy_dtypes_are_refused(first, second, values, backend):
    torch_values = backend == "torch"
    if torch_values:
        pytest.importorskip("torch")

    def maps(lib):
        return [
            _one_column(lib, [1], first, 0, torch_values),
            _one_column(lib, values, second, 1, torch_values),
        ]

    # the oracle changes the values ...
    with np.errstate(all="ignore"):
        theirs = operations.join(maps(metatensor), "samples").block(0).values
    assert [v.item() for v in np.asarray(theirs)[1:, 0]] != values
    # ... blockmap refuses, for maps and for blocks
    with pytest.raises(blockmap.ValidationError, match="do not all fit"):
        blockmap.join(maps(blockmap), "samples")
    blocks = [m.block(0) for m in maps(blockmap)]
    with pytest.raises(blockmap.ValidationError, match="do not all fit"):
        blockmap.join_blocks(blocks, "samples")


def test_lossless_cast_rule_against_numpy():
    """``join_blocks`` accepts exactly the dtype pairs whose cast keeps the
    extreme values of the second dtype (checked here through numpy), and
    gives those values in the first's dtype."""
    dtypes = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16]
    dtypes += [np.uint32, np.uint64, np.float16, np.float32, np.float64]
    dtypes += [np.complex64, np.complex128]

    def extremes(dtype):
        if dtype is np.bool_:
            return [False, True]
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            return [info.min, info.max, info.max - 1]
        info = np.finfo(dtype)
        extremes = [info.max, info.tiny, 1 + info.eps, -info.max]
        if np.issubdtype(dtype, np.complexfloating):
            extremes.append(1j)
        return extremes

    for first in dtypes:
        for second in dtypes:
            values = np.array(extremes(second), dtype=second)
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
                cast = values.astype(first)
            # Python compares ints, floats and complex numbers exactly
            kept = [x.item() for x in cast] == [x.item() for x in values]
            a = _one_column(blockmap, [1], first, 0)
            b = _one_column(blockmap, values, second, 1)
            if kept:
                joined = blockmap.join_blocks([a.block(0), b.block(0)], "samples").values
                assert joined.dtype == first
                assert [x.item() for x in joined[1:, 0]] == [x.item() for x in values]
            else:
                with pytest.raises(blockmap.ValidationError):
                    blockmap.join_blocks([a.block(0), b.block(0)], "samples")


@pytest.mark.parametrize("axis", ["samples", "properties"])
@pytest.mark.parametrize("add_dimension", [None, "tensor"])
def test_join_blocks(rng, axis, add_dimension):
    if axis == "samples":
        specs = [
            block(rng, column("s", [2 * i, 2 * i + 1]), column("n", [0, 1]), gradients=GRADIENT)
            for i in range(3)
        ]
    else:
        specs = [
            block(rng, column("s", [0, 1]), column("n", [i]), gradients=GRADIENT) for i in range(3)
        ]
    ours = [spec.build(blockmap) for spec in specs]
    theirs = [spec.build(metatensor) for spec in specs]
    same_join(
        lambda lib, blocks: lib.join_blocks(blocks, axis, add_dimension=add_dimension), ours, theirs
    )
    same_join(lambda lib, blocks: lib.join_blocks(blocks[0], axis), ours, theirs)
    same_join(lambda lib, blocks: lib.join_blocks([], axis), ours, theirs)
    same_join(lambda lib, blocks: lib.join_blocks(blocks, "neither"), ours, theirs)


def test_the_result_owns_new_memory_and_the_inputs_are_unchanged(rng):
    specs = [
        _map(rng, [0], column("s", [2 * i, 2 * i + 1]), column("n", [0, 1]), GRADIENT)
        for i in range(2)
    ]
    ours, _ = _maps(specs)
    before = [m.block(0).values.copy() for m in ours]
    joined = blockmap.join(ours, "samples")
    for m, values in zip(ours, before, strict=True):
        np.testing.assert_array_equal(m.block(0).values, values)
        assert not np.shares_memory(joined.block(0).values, m.block(0).values)


# ------------------------------------------------------------------ split


def _split_map(rng, with_gradients=True):
    gradients = (
        {"positions": (labels(["sample", "atom"], [[0, 0], [2, 1], [2, 2], [3, 0]]), [])}
        if with_gradients
        else None
    )
    return _map(
        rng,
        [0, 1],
        labels(["system", "atom"], [[0, 0], [0, 1], [1, 0], [1, 1]]),
        labels(["n", "l"], [[0, 0], [1, 0], [2, 1]]),
        gradients,
    )


def _core(lib):
    """The library of the classes: metatensor-core for metatensor-operations."""
    return metatensor if lib is operations else blockmap


def _selections(lib, axis):
    lib = _core(lib)
    if axis == "samples":
        return [
            lib.Labels(["system"], np.array([[1]], dtype=np.int32)),
            lib.Labels(["system", "atom"], np.array([[1, 1], [0, 0]], dtype=np.int32)),
            [3, 0],
            np.array([-1, 1]),
            np.array([True, True, True, True]),
            [],
            lib.Labels(["system"], np.array([[9]], dtype=np.int32)),
        ]
    return [
        lib.Labels(["l"], np.array([[0]], dtype=np.int32)),
        [2, 0],
        np.array([1]),
        np.array([True, False, True]),
        [],
    ]


@pytest.mark.parametrize("axis", ["samples", "properties"])
def test_split(rng, axis):
    ours, theirs = build(_split_map(rng))
    result = same_join(lambda lib, t: lib.split(t, axis, _selections(lib, axis)), ours, theirs)
    assert result is not None and len(result) == len(_selections(blockmap, axis))
    same_join(
        lambda lib, t: lib.split_block(t.block(0), axis, _selections(lib, axis)), ours, theirs
    )


SPLIT_ERRORS = {
    "no list": lambda lib, t: lib.split(t, "samples", (_core(lib).Labels.range("system", 1),)),
    "axis not a string": lambda lib, t: lib.split(t, 0, []),
    "unknown axis": lambda lib, t: lib.split(t, "keys", []),
    "no selections": lambda lib, t: lib.split(t, "samples", []),
    "2-D array": lambda lib, t: lib.split(t, "samples", [np.zeros((2, 2), dtype=int)]),
    "a dict": lambda lib, t: lib.split(t, "samples", [{"system": 0}]),
    "unknown name": lambda lib, t: lib.split(t, "samples", [_core(lib).Labels.range("n", 1)]),
    "unknown property": lambda lib, t: lib.split(
        t, "properties", [_core(lib).Labels.range("q", 1)]
    ),
    "partial mask of samples": lambda lib, t: lib.split(
        t, "samples", [np.array([True, False, True, False])]
    ),
    "out of range": lambda lib, t: lib.split(t, "samples", [[7]]),
    "float array": lambda lib, t: lib.split(t, "properties", [np.array([0.5])]),
    "not a map": lambda lib, t: lib.split(t.block(0), "samples", []),
    "not a block": lambda lib, t: lib.split_block(t, "samples", []),
}


@pytest.mark.parametrize("case", SPLIT_ERRORS)
def test_split_arguments(rng, case):
    ours, theirs = build(_split_map(rng))
    same_join(SPLIT_ERRORS[case], ours, theirs)


def test_split_then_join_gives_the_map_back(rng):
    ours, theirs = build(_split_map(rng))
    parts = blockmap.split(ours, "samples", [[0, 1], [2, 3]])
    joined = blockmap.join(parts, "samples")
    assert joined == ours
    assert_same(joined, theirs)


def test_split_with_gradients_of_gradients_is_not_implemented(rng):
    nested = _split_map(rng)
    for spec in nested.blocks:
        spec.gradients["positions"].gradients["cell"] = BlockSpec(
            rng.random((1, 3)), labels(["sample", "cell"], [[0, 0]]), [], spec.properties
        )
    ours, theirs = build(nested)
    same_join(lambda lib, t: lib.split(t, "samples", [[0]]), ours, theirs)
    same_join(lambda lib, t: lib.split(t, "properties", [[0]]), ours, theirs)
    same_join(lambda lib, t: lib.split(t, "samples", []), ours, theirs)
