"""TensorMaps, TensorBlocks and Labels through ray: its object store and tasks.

ray pickles with protocol 5 and keeps the out-of-band buffers in its
shared-memory object store (plasma: a file in /dev/shm, deleted once mapped,
that every ray process maps with MAP_SHARED). ``ray.get`` hands the buffers
back as read-only views of that memory, so a map from ``ray.get`` must view
the store: nothing copied, nothing writable. Objects below ray's inline
threshold (100 kB) travel as task arguments and task results inside ray's
messages instead; they come back as read-only views of those.

One local ray instance serves the whole module (starting one takes seconds).
"""

import gc
import os
from pathlib import Path

import numpy as np
import pytest

import blockmap
from blockmap import Labels
from helpers import TESTS_DIR, error_cases
from helpers.io_cases import (
    INFO,
    LABELS_CASES,
    MAP_CASES,
    all_blocks,
    assert_identical,
    block_with_gradients,
    labels,
    make_map,
)
from helpers.memory import mapping_containing
from helpers.pickle_cases import doubled, is_values, wire_arrays

ray = pytest.importorskip("ray")

HERE = Path(__file__).resolve().parent

#: ray inlines task arguments and results smaller than this (its default
#: ``max_direct_call_object_size``); larger ones go through the object store
RAY_INLINE_LIMIT = 100 * 1024


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    """A local ray instance with two CPUs, no dashboard, no usage statistics and
    a small object store; the workers import the test helpers from this
    directory. ``address="local"`` starts a new instance even when another
    one runs on the machine (``ray.init()`` would join it)."""
    previous = os.environ.get("RAY_USAGE_STATS_ENABLED")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=200 * 1024 * 1024,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(HERE), str(TESTS_DIR)])}},
    )
    try:
        yield
    finally:
        ray.shutdown()
        if previous is None:
            del os.environ["RAY_USAGE_STATS_ENABLED"]
        else:
            os.environ["RAY_USAGE_STATS_ENABLED"] = previous


# ------------------------------------------------------------------ helpers


def _in_object_store(array):
    """Whether ``array``'s memory lies in a shared mapping of ray's object
    store (``rw-s ... /dev/shm/plasmaXXXXXX (deleted)``)."""
    mapping = mapping_containing(array.ctypes.data)
    if mapping is None:
        return False
    line = mapping.line
    fields = line.split(maxsplit=5)
    return fields[1][3] == "s" and len(fields) == 6 and "plasma" in fields[5]


def _placement(data):
    """``[(name, writable, in the object store)]`` for every non-empty array of
    ``data``, in wire order."""
    return [
        (name, array.flags.writeable, _in_object_store(array))
        for name, array in wire_arrays(data)
        if array.size
    ]


def _wire_bytes(data):
    return sum(array.nbytes for _, array in wire_arrays(data))


def _big_map(rng):
    """A map with nested gradients whose block values are ~400 kB each, so the
    map goes through the object store."""
    tensor = make_map(rng, n_samples=(600, 900), component_sizes=(3,), n_properties=20)
    assert min(b.values.nbytes for b in tensor.blocks()) > RAY_INLINE_LIMIT
    return tensor


def _small_map(rng):
    tensor = make_map(rng, n_samples=(2, 3), component_sizes=(3,), n_properties=2, info=INFO)
    assert _wire_bytes(tensor) < RAY_INLINE_LIMIT // 10
    return tensor


@ray.remote
def doubled_task(tensor):
    return doubled(tensor)


@ray.remote
def placement_task(data):
    """Where the worker finds the arrays of its argument."""
    return _placement(data)


@ray.remote
def identity_task(data):
    return data


# -------------------------------------------------------------- round trips


@pytest.mark.parametrize("case", sorted(MAP_CASES))
def test_put_get_map(rng, case):
    tensor = MAP_CASES[case](rng, np.float64)
    assert_identical(ray.get(ray.put(tensor)), tensor)


def test_put_get_map_with_gradients_two_deep(rng):
    tensor = make_map(rng, nested=True, info=INFO)
    depths = [name.count("/gradients/") for name, _ in all_blocks(tensor)]
    assert max(depths) == 2
    returned = ray.get(ray.put(tensor))
    assert_identical(returned, tensor)
    assert returned.info() == INFO


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.uint64, np.bool_, np.complex128])
def test_put_get_map_dtypes(rng, dtype):
    tensor = make_map(rng, dtype)
    assert_identical(ray.get(ray.put(tensor)), tensor)


def test_put_get_block(rng):
    block = block_with_gradients(rng, nested=True)
    assert_identical(ray.get(ray.put(block)), block)


@pytest.mark.parametrize("case", sorted(LABELS_CASES))
def test_put_get_labels(case):
    data = LABELS_CASES[case]()
    assert_identical(ray.get(ray.put(data)), data)


def test_put_get_inside_containers(rng):
    tensor = make_map(rng)
    block = block_with_gradients(rng)
    keys = labels(["a", "b"], [[0, 1], [2, 3]])
    returned = ray.get(ray.put({"map": tensor, "rest": [block, keys, tensor]}))
    assert_identical(returned["map"], tensor)
    assert_identical(returned["rest"][0], block)
    assert_identical(returned["rest"][1], keys)
    assert_identical(returned["rest"][2], tensor)


# ---------------------------------------------------------------- zero copy


def test_get_views_the_object_store(rng):
    """Every values array of a map from ``ray.get`` lies in ray's
    shared-memory store, read-only, not in the original's memory; two gets of
    one reference view the same memory. Labels own a copy of what they
    validated, outside the store."""
    tensor = _big_map(rng)
    ref = ray.put(tensor)
    first = ray.get(ref)
    second = ray.get(ref)
    assert_identical(first, tensor)

    placement = _placement(first)
    assert len(placement) == len(wire_arrays(tensor))
    assert placement == [(name, False, is_values(name)) for name, _, _ in placement]

    pairs = zip(wire_arrays(first), wire_arrays(second), wire_arrays(tensor), strict=True)
    for (name, ours), (_, again), (_, original) in pairs:
        if is_values(name):
            assert ours.ctypes.data == again.ctypes.data, name
            assert np.shares_memory(ours, again), name
        else:
            assert not np.shares_memory(ours, again), name
        assert not np.shares_memory(ours, original), name
        assert not _in_object_store(original), name


def test_get_values_are_read_only(rng):
    tensor = _big_map(rng)
    returned = ray.get(ray.put(tensor))
    for name, block in all_blocks(returned):
        values = block.values
        assert not values.flags.writeable, name
        with pytest.raises(ValueError, match="read-only"):
            values[...] = 0
        with pytest.raises(ValueError):
            values.flags.writeable = True
    with pytest.raises(ValueError, match="read-only"):
        returned.keys.values[0, 0] = 7
    assert_identical(returned, tensor)


def test_small_put_get_is_read_only(rng):
    tensor = _small_map(rng)
    returned = ray.get(ray.put(tensor))
    assert_identical(returned, tensor)
    assert all(not writable for _, writable, _ in _placement(returned))
    with pytest.raises(ValueError, match="read-only"):
        returned.block_by_id(0).values[0] = 1.0


def test_get_keeps_the_store_buffer_alive(rng):
    """The map holds ray's buffer: dropping the reference and cycling other
    objects through the store leaves its values as they were."""
    tensor = _big_map(rng)
    ref = ray.put(tensor)
    returned = ray.get(ref)
    del ref
    gc.collect()
    for i in range(4):
        filler = ray.put(np.full(5_000_000, float(i)))  # 40 MB, a fifth of the store
        del filler
        gc.collect()
    assert all(in_store == is_values(name) for name, _, in_store in _placement(returned))
    assert_identical(returned, tensor)


# -------------------------------------------------------------------- tasks


def test_task_map_argument_and_result_through_the_store(rng):
    tensor = _big_map(rng)
    expected = doubled(tensor)
    assert_identical(ray.get(doubled_task.remote(tensor)), expected)
    # the worker received views of the store, read-only
    placement = ray.get(placement_task.remote(tensor))
    assert placement == [(name, False, is_values(name)) for name, _, _ in placement]
    # the result came back through the store as well
    returned = ray.get(doubled_task.remote(ray.put(tensor)))
    assert_identical(returned, expected)
    assert all(not w and in_store == is_values(n) for n, w, in_store in _placement(returned))


def test_task_map_argument_and_result_inlined(rng):
    """A small map travels inside ray's task messages, not the store."""
    tensor = _small_map(rng)
    returned = ray.get(doubled_task.remote(tensor))
    assert_identical(returned, doubled(tensor))
    assert returned.info() == INFO
    assert all(not w and not in_store for _, w, in_store in _placement(returned))
    placement = ray.get(placement_task.remote(tensor))
    assert placement
    assert all(not w and not in_store for _, w, in_store in placement)


def test_task_returns_a_map_viewing_the_store(rng):
    """A map from ``ray.get`` (views of the store) pickles again: sent to a task
    and sent back, big and small."""
    for tensor in (_big_map(rng), _small_map(rng)):
        viewing = ray.get(ray.put(tensor))
        assert_identical(ray.get(identity_task.remote(viewing)), tensor)
        assert_identical(ray.get(ray.put(viewing)), tensor)


def test_tasks_in_parallel(rng):
    tensors = [make_map(rng, n_samples=(4 + i, 2)) for i in range(6)]
    results = ray.get([doubled_task.remote(tensor) for tensor in tensors])
    for result, tensor in zip(results, tensors, strict=True):
        assert_identical(result, doubled(tensor))


def test_task_block_and_labels(rng):
    block = block_with_gradients(rng)
    keys = Labels(["a"], np.arange(5_000).reshape(-1, 1))
    assert_identical(ray.get(identity_task.remote(block)), block)
    assert_identical(ray.get(identity_task.remote(keys)), keys)


@ray.remote
def raising_task(case):
    error_cases.raise_case(case)


def test_errors_raised_in_a_task_reach_the_caller_as_blockmap_errors():
    """ray raises a task's error as ``RayTaskError(cls)``, an instance of
    both ``RayTaskError`` and the original class, holding the original
    error (``cause``): for every blockmap error (each class built in
    Python, and the native module's) it is an instance of blockmap's class,
    its message holds the original one and its cause is the original
    error built again."""
    refs = {case: raising_task.remote(case) for case in error_cases.CASES}
    for case, ref in refs.items():
        original = error_cases.caught(case)
        with pytest.raises(blockmap.BlockMapError) as error:
            ray.get(ref)
        assert isinstance(error.value, ray.exceptions.RayTaskError), case
        assert isinstance(error.value, type(original)), case
        assert f"{type(original).__name__}: {original}" in str(error.value)
        error_cases.assert_same_error(error.value.cause, original)
