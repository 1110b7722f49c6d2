"""metatensor-core's TensorBlock API on blockmap.TensorBlock, compared with
metatensor-core 0.2.6 on the same blocks."""

import copy

import metatensor
import numpy as np
import pytest
from tensor_oracle import BlockSpec, Spec, block, build, column, labels, same_outcome

import blockmap


def _spec(components=True, gradients=True, seed=0):
    rng = np.random.default_rng(seed)
    comps = [column("o3_mu", [-1, 0, 1])] if components else []
    grads = {}
    if gradients:
        # added in sorted order: see test_gradients_are_listed_sorted
        grads = {
            "cell": (labels(["sample"], [[0], [2]]), [column("a", [0, 1, 2]), column("b", [0, 1])]),
            "positions": (labels(["sample", "atom"], [[0, 0], [1, 2]]), [column("xyz", [0, 1, 2])]),
        }
    spec = block(
        rng, labels(["system", "atom"], [[0, 0], [0, 1], [1, 0]]), column("n", [0, 1]), comps, grads
    )
    return spec


def _blocks(spec=None):
    """The block of ``spec`` on its own in both libraries."""
    spec = spec or _spec()
    return spec.build(blockmap), spec.build(metatensor)


def _map_blocks(spec=None):
    """The block of ``spec`` taken from a one-block map in both libraries."""
    ours, theirs = build(Spec(column("k", [0]), [spec or _spec()]))
    return ours.block(0), theirs.block(0)


@pytest.mark.parametrize("where", ["alone", "in a map", "a gradient"])
def test_properties(where):
    if where == "alone":
        ours, theirs = _blocks()
    elif where == "in a map":
        ours, theirs = _map_blocks()
    else:
        ours, theirs = (b.gradient("positions") for b in _map_blocks())
    for call in (
        len,
        lambda b: b.shape,
        lambda b: b.dtype,
        lambda b: b.device,
        lambda b: b.is_view,
        lambda b: b.samples,
        lambda b: b.components,
        lambda b: b.properties,
        lambda b: b.gradients_list(),
        lambda b: b.has_gradient("cell"),
        lambda b: b.has_gradient("strain"),
        lambda b: b.gradient("strain"),
        str,
        # repr adds one line of its own (test_repr)
        lambda b: repr(b).split("\n    arrays: ")[0],
    ):
        same_outcome(call, ours, theirs)


def test_is_view():
    ours, theirs = _blocks()
    assert ours.is_view is theirs.is_view is False
    ours, theirs = _map_blocks()
    assert ours.is_view is theirs.is_view is True
    assert ours.gradient("cell").is_view is theirs.gradient("cell").is_view is True
    for deep in (True, False):
        assert ours.copy(deep=deep).is_view is theirs.copy(deep=deep).is_view is False


def test_values_cannot_be_assigned():
    ours, theirs = _blocks()
    for b in (ours, theirs):
        with pytest.raises(AttributeError, match="values"):
            b.values = np.zeros(b.shape)
        b.values[:] = 1.5
    np.testing.assert_array_equal(ours.values, theirs.values)


def test_gradients_is_an_iterator_of_pairs():
    ours, theirs = _map_blocks()
    pairs = ours.gradients()
    assert not isinstance(pairs, list)
    assert next(iter(pairs))[0] == "cell"
    same_outcome(lambda b: list(b.gradients()), ours, theirs, compare=_same_pairs)


def test_gradients_are_listed_sorted():
    """blockmap lists gradients sorted by parameter (as files store them);
    metatensor-core 0.2.6 lists them in the order they were added, and after
    loading a file or an operation in the order of its hash map (which
    changes from one process to the next)."""
    spec = _spec()
    spec.gradients = dict(reversed(list(spec.gradients.items())))
    ours, theirs = _blocks(spec)
    assert theirs.gradients_list() == ["positions", "cell"]
    assert ours.gradients_list() == ["cell", "positions"]
    assert [p for p, _ in ours.gradients()] == ["cell", "positions"]
    loaded = metatensor.io.load_buffer(
        metatensor.io.save_buffer(metatensor.TensorMap(metatensor.Labels.range("k", 1), [theirs]))
    )
    assert sorted(loaded.block(0).gradients_list()) == ours.gradients_list()


def _same_pairs(ours, theirs):
    assert [p for p, _ in ours] == sorted(p for p, _ in theirs)
    theirs = dict(theirs)
    for parameter, gradient in ours:
        same_outcome(lambda g: g, gradient, theirs[parameter])
        assert str(gradient) == repr(theirs[parameter])


@pytest.mark.parametrize("components", [True, False])
@pytest.mark.parametrize("gradients", [True, False])
def test_repr(components, gradients):
    ours, theirs = _blocks(_spec(components, gradients))
    # str is metatensor's repr; repr adds what metatensor's does not show
    assert str(ours) == str(theirs) == repr(theirs)
    assert repr(ours) == (
        repr(theirs) + "\n    arrays: numpy, float64, writable, viewing another object's memory"
    )
    if gradients:
        for parameter in ("positions", "cell"):
            assert str(ours.gradient(parameter)) == repr(theirs.gradient(parameter))


def test_repr_of_gradients_of_gradients():
    rng = np.random.default_rng(1)
    inner = block(rng, labels(["sample"], [[0]]), column("p", [0]))
    outer = BlockSpec(
        rng.random((1, 1)), labels(["sample"], [[0]]), [], column("p", [0]), {"b": inner}
    )
    spec = block(rng, column("s", [0, 1]), column("p", [0]))
    spec.gradients["a-long-name"] = outer
    spec.gradients["x"] = BlockSpec(
        rng.random((1, 1)), labels(["sample"], [[1]]), [], column("p", [0])
    )
    ours, theirs = _map_blocks(spec)
    assert str(ours) == repr(theirs)
    assert str(ours.gradient("a-long-name").gradient("b")) == repr(
        theirs.gradient("a-long-name").gradient("b")
    )
    assert "gradient for 'a-long-name/b'" in repr(ours.gradient("a-long-name").gradient("b"))


@pytest.mark.parametrize(
    "call",
    [
        lambda b: b.to(),
        lambda b: b.to(np.float32),
        lambda b: b.to(dtype=np.int64),
        lambda b: b.to("cpu"),
        lambda b: b.to(device="cuda"),
        lambda b: b.to(arrays="numpy"),
        lambda b: b.to(arrays="other"),
        lambda b: b.to(np.float32, np.float32),
    ],
)
@pytest.mark.parametrize("where", ["alone", "in a map"])
def test_to(where, call):
    ours, theirs = _blocks() if where == "alone" else _map_blocks()
    result, _ = same_outcome(call, ours, theirs)
    if isinstance(result, blockmap.TensorBlock):
        assert result.is_view is False


@pytest.mark.parametrize("deep", [True, False, None])
def test_copy(deep):
    ours, theirs = _map_blocks()

    def call(b):
        return b.copy() if deep is None else b.copy(deep=deep)

    ours_copy, theirs_copy = same_outcome(call, ours, theirs)
    for get in (lambda b: b, lambda b: b.gradient("positions"), lambda b: b.gradient("cell")):
        assert (
            np.shares_memory(get(ours_copy).values, get(ours).values)
            == np.shares_memory(get(theirs_copy).values, get(theirs).values)
            == (deep is False)
        )
    # a copy is a block of its own: it may get new gradients
    gradient = blockmap.TensorBlock(
        np.zeros((1, 3, 2)), blockmap.Labels.range("sample", 1), ours.components, ours.properties
    )
    ours_copy.add_gradient("strain", gradient)
    assert ours_copy.gradients_list() == ["cell", "positions", "strain"]
    assert ours.gradients_list() == ["cell", "positions"]


def test_copy_module():
    ours, theirs = _blocks()
    same_outcome(copy.copy, ours, theirs)
    same_outcome(copy.deepcopy, ours, theirs)
    assert np.shares_memory(copy.copy(ours).values, ours.values)
    assert not np.shares_memory(copy.deepcopy(ours).values, ours.values)


def test_add_gradient_to_a_view_is_a_value_error():
    ours, theirs = _map_blocks()
    for b, lib in ((ours, blockmap), (theirs, metatensor)):
        gradient = lib.TensorBlock(
            np.zeros((1, 3, 2)), lib.Labels.range("sample", 1), b.components, b.properties
        )
        with pytest.raises(ValueError):
            b.add_gradient("strain", gradient)


CONSTRUCTOR_ERRORS = {
    "samples not labels": lambda lib: lib.TensorBlock(
        np.zeros((2, 2)), np.zeros((2, 1)), [], lib.Labels.range("p", 2)
    ),
    "a component not labels": lambda lib: lib.TensorBlock(
        np.zeros((2, 1, 2)), lib.Labels.range("s", 2), [1], lib.Labels.range("p", 2)
    ),
    "properties not labels": lambda lib: lib.TensorBlock(
        np.zeros((2, 2)), lib.Labels.range("s", 2), [], None
    ),
    "shape mismatch": lambda lib: lib.TensorBlock(
        np.zeros((3, 2)), lib.Labels.range("s", 2), [], lib.Labels.range("p", 2)
    ),
    "two components of one name": lambda lib: lib.TensorBlock(
        np.zeros((2, 2, 2, 2)),
        lib.Labels.range("s", 2),
        [lib.Labels.range("c", 2), lib.Labels.range("c", 2)],
        lib.Labels.range("p", 2),
    ),
    "a component of two dimensions": lambda lib: lib.TensorBlock(
        np.zeros((2, 2, 2)),
        lib.Labels.range("s", 2),
        [lib.Labels(["a", "b"], np.array([[0, 0], [0, 1]]))],
        lib.Labels.range("p", 2),
    ),
}


@pytest.mark.parametrize("case", CONSTRUCTOR_ERRORS)
def test_constructor_errors(case):
    same_outcome(CONSTRUCTOR_ERRORS[case], blockmap, metatensor)


GRADIENT_ERRORS = {
    "twice": lambda lib, b: b.add_gradient("positions", _gradient(lib, b)),
    "first sample not 'sample'": lambda lib, b: b.add_gradient(
        "g", _gradient(lib, b, samples=lib.Labels.range("atom", 1))
    ),
    "sample out of range": lambda lib, b: b.add_gradient(
        "g", _gradient(lib, b, samples=lib.Labels(["sample"], np.array([[5]])))
    ),
    "other dtype": lambda lib, b: b.add_gradient("g", _gradient(lib, b, dtype=np.float32)),
}


def _gradient(lib, parent, samples=None, dtype=np.float64):
    samples = samples if samples is not None else lib.Labels.range("sample", 1)
    shape = (len(samples), *parent.shape[1:])
    return lib.TensorBlock(
        np.zeros(shape, dtype=dtype), samples, parent.components, parent.properties
    )


@pytest.mark.parametrize("case", GRADIENT_ERRORS)
def test_add_gradient_errors(case):
    ours, theirs = _blocks()
    our_error, _ = same_outcome(
        lambda b: GRADIENT_ERRORS[case](
            blockmap if isinstance(b, blockmap.TensorBlock) else metatensor, b
        ),
        ours,
        theirs,
    )
    assert isinstance(our_error, blockmap.MetatensorError)


# metatensor-core's C-API pointer methods, the HTML repr, and private
# helpers of its implementation
SKIPPED = {
    "as_mts_block_t",
    "unsafe_from_ptr",
    "unsafe_view_from_ptr",
    "release",
    "_repr_html_",
    "_from_pickle",
    "_labels",
    "_raw_values",
    "__del__",
    "__dict__",
    "__weakref__",
}


def test_every_metatensor_name_exists():
    missing = set(dir(metatensor.TensorBlock)) - set(dir(blockmap.TensorBlock)) - SKIPPED
    assert missing == set()
