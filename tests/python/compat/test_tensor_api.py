"""metatensor-core's TensorMap API on blockmap.TensorMap: for every name,
the same map in both libraries, the same call, the results compared entry
by entry (errors by type). Where blockmap differs on purpose (a bug of
metatensor-core 0.2.6, or a wider input blockmap accepts), a test pins the
difference."""

import copy

import metatensor
import numpy as np
import pytest
from tensor_oracle import Spec, block, build, column, labels, same_outcome

import blockmap

KEYS = [[0, 1], [1, 1], [1, 6], [2, 8], [-3, 100000]]


def _spec(n_blocks=None, seed=0, dtype=np.float64):
    n_blocks = len(KEYS) if n_blocks is None else n_blocks
    rng = np.random.default_rng(seed)
    blocks = []
    for i in range(n_blocks):
        samples = labels(["system", "atom"], [[0, a] for a in range(i + 1)])
        gradient = labels(["sample", "atom"], [[0, 0], [i, 1]] if i else [[0, 0]])
        blocks.append(
            block(
                rng,
                samples,
                column("n", [0, 1, 2]),
                [column("o3_mu", [-1, 0, 1])],
                {"positions": (gradient, [column("xyz", [0, 1, 2])])},
                dtype=dtype,
            )
        )
    return Spec(labels(["o3_lambda", "center_type"], KEYS[:n_blocks]), blocks, {"a": "b"})


@pytest.fixture
def maps():
    return build(_spec())


def _lib(tensor):
    return blockmap if isinstance(tensor, blockmap.TensorMap) else metatensor


# ---------------------------------------------------------- block access


def test_iteration_yields_blocks(maps):
    ours, theirs = maps
    blocks = list(ours)
    assert all(isinstance(b, blockmap.TensorBlock) for b in blocks)
    same_outcome(list, ours, theirs)
    same_outcome(lambda t: [b.values.shape for b in t], ours, theirs)


def test_items(maps):
    ours, theirs = maps
    pairs = list(ours.items())
    assert iter(ours.items()) is not None and not isinstance(ours.items(), list)
    for (key, ours_block), (their_key, their_block) in zip(pairs, theirs.items(), strict=True):
        assert key.names == their_key.names
        assert list(key) == [int(v) for v in their_key.values]
        same_outcome(lambda b: b, ours_block, their_block)


SELECTIONS = {
    "an int": lambda t: 2,
    "the last int": lambda t: len(KEYS) - 1,
    "out of range": lambda t: len(KEYS),
    "True": lambda t: True,
    "a key entry": lambda t: t.keys[3],
    "a dict": lambda t: {"o3_lambda": 2},
    "a full dict": lambda t: {"o3_lambda": 1, "center_type": 6},
    "a dict matching two": lambda t: {"o3_lambda": 1},
    "a dict matching none": lambda t: {"o3_lambda": 7},
    "a dict with an unknown name": lambda t: {"spin": 0},
    "a dict with a float": lambda t: {"o3_lambda": 1.0},
    "a dict with a str": lambda t: {"o3_lambda": "1"},
    "a dict with numpy ints": lambda t: {"o3_lambda": np.int64(2), "center_type": np.uint8(8)},
    "a dict with a bool": lambda t: {"o3_lambda": True, "center_type": True},
    "a dict with a huge int": lambda t: {"o3_lambda": 2**40},
    "a dict with an int key": lambda t: {1: 1},
    "one-entry labels": lambda t: _lib(t).Labels(["center_type"], np.array([[8]])),
    "labels matching one of two": lambda t: _lib(t).Labels(["center_type"], np.array([[8], [9]])),
    "labels matching two": lambda t: _lib(t).Labels(["center_type"], np.array([[8], [6]])),
    "labels in another order": lambda t: _lib(t).Labels(
        ["center_type", "o3_lambda"], np.array([[6, 1]])
    ),
    "labels with an unknown name": lambda t: _lib(t).Labels(["spin"], np.array([[0]])),
    "labels without dimensions": lambda t: _lib(t).Labels([], np.zeros((1, 0), dtype=np.int32)),
    "a str": lambda t: "o3_lambda",
    "a float": lambda t: 1.0,
    "a list": lambda t: [0, 1],
}


# `blocks([0, 1])` takes a list of indices: test_blocks_by_indices covers it
SELECTION_CASES = [
    (method, case)
    for method in ["block", "blocks", "getitem"]
    for case in SELECTIONS
    if not (method == "blocks" and case == "a list")
]


@pytest.mark.parametrize(("method", "case"), SELECTION_CASES)
def test_selections(maps, method, case):
    ours, theirs = maps

    def call(t):
        selection = SELECTIONS[case](t)
        if method == "block":
            return t.block(selection)
        if method == "blocks":
            return t.blocks(selection)
        return t[selection]

    same_outcome(call, ours, theirs)


KWARGS = [{}, {"o3_lambda": 2}, {"o3_lambda": 1}, {"o3_lambda": 9}, {"spin": 1}]


# `block()` on several blocks differs on purpose: test_block_without_selection
KEYWORD_CASES = [
    (kwargs, n_blocks)
    for kwargs in KWARGS
    for n_blocks in [0, 1, 5]
    if not (n_blocks > 1 and kwargs == {})
]


@pytest.mark.parametrize(("kwargs", "n_blocks"), KEYWORD_CASES, ids=repr)
def test_keyword_selections(kwargs, n_blocks):
    ours, theirs = build(_spec(n_blocks))
    same_outcome(lambda t: t.block(**kwargs), ours, theirs)
    same_outcome(lambda t: t.blocks(**kwargs), ours, theirs)
    same_outcome(lambda t: t.blocks(None, **kwargs), ours, theirs)


def test_block_by_id_and_blocks_by_id(maps):
    ours, theirs = maps
    for index in range(len(KEYS) + 1):
        same_outcome(lambda t, index=index: t.block_by_id(index), ours, theirs)
    for indices in ([0, 4, 2], [], (1, 1), [0, 5]):
        same_outcome(lambda t, indices=indices: t.blocks_by_id(indices), ours, theirs)


def test_blocks_by_indices():
    """``blocks([0, 2])`` is ``blocks_by_id([0, 2])``, as metatensor-core's
    docstring says; metatensor-core 0.2.6 raises TypeError (its code does
    not do what its docstring says)."""
    ours, theirs = build(_spec())
    with pytest.raises(TypeError):
        theirs.blocks([0, 2])
    for selection in ([0, 2], (4, 1), np.array([3])):
        assert [b.values.shape for b in ours.blocks(selection)] == [
            b.values.shape for b in theirs.blocks_by_id(list(selection))
        ]
    with pytest.raises(IndexError):
        ours.blocks([0, 9])
    with pytest.raises(TypeError):
        ours.blocks([0, "a"])


def test_block_without_selection():
    """``block()`` on a map of several blocks: metatensor-core 0.2.6 fails
    with an IndexError while formatting its error message; blockmap raises
    the ValueError metatensor means to raise. With one block, both return
    it; with none, both raise ValueError."""
    ours, theirs = build(_spec())
    with pytest.raises(IndexError):
        theirs.block()
    with pytest.raises(ValueError, match="more than one block"):
        ours.block()
    for n_blocks in (0, 1):
        ours, theirs = build(_spec(n_blocks))
        same_outcome(lambda t: t.block(), ours, theirs)


def test_selection_without_entries():
    """Labels without entries select nothing: metatensor-core 0.2.6 fails
    with an IndexError formatting its message, blockmap raises ValueError."""
    ours, theirs = build(_spec())
    for method in ("block", "blocks"):
        with pytest.raises(IndexError):
            getattr(theirs, method)(metatensor.Labels(["o3_lambda"], np.zeros((0, 1), np.int32)))
        with pytest.raises(ValueError, match="without entries"):
            getattr(ours, method)(blockmap.Labels(["o3_lambda"], np.zeros((0, 1), np.int32)))


def test_wider_inputs_blockmap_accepts():
    """blockmap takes negative indices (Python's meaning) and any integer
    with ``__index__`` (numpy integers) as an index; metatensor-core 0.2.6
    raises (MetatensorError for a negative index, whose unsigned conversion
    overflows, TypeError for numpy integers). A selection given as an
    argument and as keywords is a TypeError in blockmap: metatensor-core
    silently ignores the keywords."""
    ours, theirs = build(_spec())
    with pytest.raises(metatensor.MetatensorError, match="18446744073709551615"):
        theirs.block(-1)
    assert ours.block(-1) == ours.block(len(KEYS) - 1)
    assert ours[-2] == ours.block_by_id(len(KEYS) - 2)
    with pytest.raises(TypeError):
        theirs.block(np.int64(1))
    assert ours.block(np.int64(1)) == ours.block(1)
    assert [b.shape for b in theirs.blocks({"o3_lambda": 1}, center_type=6)] == [
        (2, 3, 3),
        (3, 3, 3),
    ]
    with pytest.raises(TypeError, match="not both"):
        ours.blocks({"o3_lambda": 1}, center_type=6)


def test_blocks_matching_is_kept(maps):
    ours, _ = maps
    assert ours.blocks_matching({"o3_lambda": 1}) == [1, 2]
    assert ours.blocks_matching({"o3_lambda": 9}) == []
    assert ours.blocks_matching(blockmap.Labels(["center_type"], np.array([[8], [1]]))) == [0, 1, 3]


# ---------------------------------------------------- names and properties


@pytest.mark.parametrize("n_blocks", [0, 1, 5])
def test_metadata(n_blocks):
    ours, theirs = build(_spec(n_blocks))
    for name in ("sample_names", "component_names", "property_names", "dtype", "device"):
        same_outcome(lambda t, name=name: getattr(t, name), ours, theirs)
    same_outcome(len, ours, theirs)
    same_outcome(lambda t: t.keys, ours, theirs)
    same_outcome(lambda t: t.is_view, ours, theirs)
    same_outcome(lambda t: t.info(), ours, theirs)
    same_outcome(lambda t: (t.get_info("a"), t.get_info("missing")), ours, theirs)


@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.complex64, np.bool_])
def test_dtype(dtype):
    ours, theirs = build(_spec(dtype=dtype))
    assert ours.dtype == theirs.dtype == np.dtype(dtype)


# ------------------------------------------------------------------ to()

TO_CALLS = {
    "nothing": lambda t: t.to(),
    "dtype keyword": lambda t: t.to(dtype=np.float32),
    "dtype positional": lambda t: t.to(np.float32),
    "numpy dtype positional": lambda t: t.to(np.dtype("int32")),
    "dtype name keyword": lambda t: t.to(dtype="float16"),
    "dtype name positional (a device)": lambda t: t.to("float32"),
    "same dtype": lambda t: t.to(dtype=np.float64),
    "complex": lambda t: t.to(dtype=np.complex128),
    "bool positional (not a number)": lambda t: t.to(np.bool_),
    "cpu": lambda t: t.to("cpu"),
    "cpu keyword": lambda t: t.to(device="cpu"),
    "cpu and dtype": lambda t: t.to("cpu", np.float32),
    "another device": lambda t: t.to(device="cuda"),
    "a device twice": lambda t: t.to("cpu", "cpu"),
    "a dtype twice": lambda t: t.to(np.float32, np.float16),
    "an int": lambda t: t.to(1),
    "numpy arrays": lambda t: t.to(arrays="numpy"),
    "unknown arrays": lambda t: t.to(arrays="jax"),
    "non_blocking": lambda t: t.to(dtype=np.float32, non_blocking=True),
    "a str dtype": lambda t: t.to(dtype=str),
    "an object dtype": lambda t: t.to(dtype=object),
}


@pytest.mark.parametrize("case", TO_CALLS)
def test_to(maps, case):
    ours, theirs = maps
    result, _ = same_outcome(TO_CALLS[case], ours, theirs)
    if isinstance(result, blockmap.TensorMap):
        assert result.is_view is False
        assert result.info() == {"a": "b"}


def test_to_shares_or_converts_like_metatensor(maps):
    ours, theirs = maps
    for call in (lambda t: t.to(), lambda t: t.to(dtype=np.float64), lambda t: t.to(np.float32)):
        ours_result, theirs_result = call(ours), call(theirs)
        for i in range(len(KEYS)):
            shares = np.shares_memory(ours_result.block(i).values, ours.block(i).values)
            assert shares == np.shares_memory(theirs_result.block(i).values, theirs.block(i).values)
    converted = ours.to(dtype=np.float32)
    gradient = converted.block(1).gradient("positions")
    assert gradient.values.dtype == np.float32
    np.testing.assert_array_equal(
        gradient.values, ours.block(1).gradient("positions").values.astype(np.float32)
    )
    # blocks of the converted map may be saved and read by metatensor-core
    loaded = metatensor.io.load_buffer(blockmap.save_buffer(converted))
    assert loaded.dtype == np.float32


def test_to_torch_and_unknown_keywords():
    """``arrays="torch"`` gives torch tensors as metatensor-core does (values
    and label values); unknown keywords are a TypeError (metatensor-core
    ignores them)."""
    torch = pytest.importorskip("torch")
    ours, theirs = build(_spec())
    for moved in (theirs.to(arrays="torch"), ours.to(arrays="torch")):
        assert isinstance(moved.block(0).values, torch.Tensor)
        assert isinstance(moved.keys.values, torch.Tensor)
        assert isinstance(moved.block(0).samples.values, torch.Tensor)
    with pytest.raises(ValueError, match="backend"):
        ours.to(arrays="jax")
    theirs.to(dtype=np.float32, devise="cuda")
    with pytest.raises(TypeError, match="devise"):
        ours.to(dtype=np.float32, devise="cuda")


# ---------------------------------------------------------------- copies


@pytest.mark.parametrize("deep", [True, False, None])
def test_copy(maps, deep):
    ours, theirs = maps

    def call(t):
        return t.copy() if deep is None else t.copy(deep=deep)

    ours_copy, theirs_copy = same_outcome(call, ours, theirs)
    for i in range(len(KEYS)):
        for get in (lambda b: b, lambda b: b.gradient("positions")):
            ours_shares = np.shares_memory(
                get(ours_copy.block(i)).values, get(ours.block(i)).values
            )
            theirs_shares = np.shares_memory(
                get(theirs_copy.block(i)).values, get(theirs.block(i)).values
            )
            assert ours_shares == theirs_shares == (deep is False)


def test_copy_module(maps):
    ours, theirs = maps
    for function, shared in ((copy.copy, True), (copy.deepcopy, False)):
        ours_copy, theirs_copy = same_outcome(function, ours, theirs)
        assert np.shares_memory(ours_copy.block(0).values, ours.block(0).values) == shared
        assert np.shares_memory(theirs_copy.block(0).values, theirs.block(0).values) == shared


# ----------------------------------------------------------------- text

TEXT_MAPS = {
    "five blocks": lambda: _spec(),
    "no blocks": lambda: _spec(0),
    "one block": lambda: _spec(1),
    "twelve blocks": lambda: Spec(
        column("spin", np.arange(12) * 11 - 40),
        [block(np.random.default_rng(i), column("s", [0]), column("p", [0, 1])) for i in range(12)],
    ),
    "three dimensions": lambda: Spec(
        labels(["a", "bb", "c"], [[1, 2, 3], [-100, 5, 7]]),
        [block(np.random.default_rng(i), column("s", [0]), column("p", [0])) for i in range(2)],
    ),
}


@pytest.mark.parametrize("case", TEXT_MAPS)
def test_text(case):
    ours, theirs = build(TEXT_MAPS[case]())
    # repr adds one line to metatensor's: what metatensor's does not show
    text, arrays = repr(ours).rsplit("\n", 1)
    assert text == repr(theirs)
    assert arrays.startswith("    arrays: numpy")
    assert str(ours) == str(theirs)
    for max_keys in (-1, 0, 1, 2, 3, 7, 100):
        assert ours.print(max_keys) == theirs.print(max_keys), max_keys
    same_outcome(lambda t: t.print("a"), ours, theirs)
    # metatensor-core prints with a float when it is more than the number
    # of blocks (and fails otherwise): blockmap takes integers only
    with pytest.raises(TypeError):
        ours.print(2.5)


# -------------------------------------------------------------- the names


# metatensor-core's C-API pointer methods, the HTML repr (Jupyter), the
# arithmetic operators (added with metatensor-operations), and private
# helpers of its implementation
SKIPPED = {
    "as_mts_tensormap_t",
    "unsafe_from_ptr",
    "unsafe_view_from_ptr",
    "release",
    "_repr_html_",
    "_from_ptr",
    "_from_pickle",
    "__del__",
    "__dict__",
    "__weakref__",
}


def test_every_metatensor_name_exists():
    missing = set(dir(metatensor.TensorMap)) - set(dir(blockmap.TensorMap)) - SKIPPED
    assert missing == set()
    assert issubclass(blockmap.ValidationError, blockmap.MetatensorError)
