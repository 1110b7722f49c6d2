"""TensorMaps, TensorBlocks and Labels as arguments and results of
``joblib.Parallel``, with the loky, multiprocessing and threading backends.

loky and multiprocessing pickle arguments and results with protocol 5, in
band: the worker gets its own writable copy and the caller gets a new map.
A map in shared memory goes through loky as metadata and a file descriptor
(blockmap registers its reducer with loky's pickler). The threading backend
passes the objects themselves.

The module shuts loky's reusable executor down at the end and checks that
no worker process it started is left.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import blockmap
from blockmap import Labels, TensorBlock, TensorMap
from helpers import error_cases
from helpers.io_cases import INFO, assert_identical, block_with_gradients, labels, make_map
from helpers.pickle_cases import doubled, identity, wire_arrays

pytest.importorskip("joblib")

from joblib import Parallel, delayed  # noqa: E402
from joblib.externals.loky import get_reusable_executor  # noqa: E402

BACKENDS = ["loky", "multiprocessing", "threading"]
PROCESS_BACKENDS = ["loky", "multiprocessing"]


def _children():
    """``{pid: command line}`` of this process's children."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            if parent == os.getpid():
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    children[int(entry)] = cmdline.read().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue  # the process ended meanwhile
    return children


@pytest.fixture(scope="module", autouse=True)
def no_stray_workers():
    """Shut loky's reusable executor down after the module and check that no
    process started meanwhile remains, but the resource trackers (loky's and
    multiprocessing's live as long as this process)."""
    before = set(_children())
    yield
    get_reusable_executor().shutdown(wait=True)
    left = {
        pid: cmdline
        for pid, cmdline in _children().items()
        if pid not in before and "resource_tracker" not in cmdline
    }
    assert not left, f"worker processes left: {left}"


# ------------------------------------------------- functions the workers run


def summed(tensor):
    """A new map: per block, the values summed over samples and components,
    as one sample ``(_=0)`` with the block's properties."""
    blocks = []
    for block in tensor.blocks():
        axes = tuple(range(block.values.ndim - 1))
        values = block.values.sum(axis=axes).reshape(1, -1)
        blocks.append(TensorBlock(values, Labels.single(), [], block.properties))
    return TensorMap(tensor.keys, blocks)


def scaled_in_place(tensor, factor):
    """Multiplies every block's values (not the gradients) in place, returns
    ``tensor``."""
    for block in tensor.blocks():
        block.values[...] *= factor
    return tensor


def _maps(rng):
    return [
        make_map(rng, info=INFO),
        make_map(rng, np.float32, component_sizes=(3, 2), n_samples=(4, 1)),
        make_map(rng, np.int64, gradients=False, n_samples=(5, 0, 2)),
        make_map(rng, n_samples=(7,), nested=False),
    ]


def _assert_independent(returned, sent):
    for (name, ours), (_, theirs) in zip(wire_arrays(returned), wire_arrays(sent), strict=True):
        assert not np.shares_memory(ours, theirs), name


# -------------------------------------------------------------------- tests


@pytest.mark.parametrize("backend", BACKENDS)
def test_maps_in_maps_out(rng, backend):
    tensors = _maps(rng)
    results = Parallel(n_jobs=2, backend=backend)(delayed(doubled)(t) for t in tensors)
    assert len(results) == len(tensors)
    for result, tensor in zip(results, tensors, strict=True):
        assert_identical(result, doubled(tensor))
        assert result.info() == tensor.info()


@pytest.mark.parametrize("backend", BACKENDS)
def test_sums_per_block(rng, backend):
    tensors = _maps(rng)
    results = Parallel(n_jobs=2, backend=backend)(delayed(summed)(t) for t in tensors)
    for result, tensor in zip(results, tensors, strict=True):
        assert result.keys == tensor.keys
        for block, original in zip(result.blocks(), tensor.blocks(), strict=True):
            expected = original.values.sum(axis=tuple(range(original.values.ndim - 1)))
            assert block.samples == Labels.single()
            assert block.properties == original.properties
            np.testing.assert_array_equal(block.values, expected.reshape(1, -1))


@pytest.mark.parametrize("backend", PROCESS_BACKENDS)
def test_process_backends_send_copies(rng, backend):
    """The worker edits its own writable copy; the caller's map is unchanged
    and the result is a new, writable map."""
    tensors = _maps(rng)[:2]
    before = [tensor.copy() for tensor in tensors]
    results = Parallel(n_jobs=2, backend=backend)(delayed(scaled_in_place)(t, 3) for t in tensors)
    for result, tensor, original in zip(results, tensors, before, strict=True):
        assert_identical(tensor, original)
        _assert_independent(result, tensor)
        for block, block_before in zip(result.blocks(), original.blocks(), strict=True):
            np.testing.assert_array_equal(block.values, 3 * block_before.values)
            assert block.values.flags.writeable
            block.values[...] = 0  # the result is the caller's own
        assert_identical(tensor, original)


def test_threading_backend_passes_the_objects(rng):
    """Threads share the caller's map: no copy, edits are seen."""
    tensors = _maps(rng)[:2]
    before = [tensor.copy() for tensor in tensors]
    results = Parallel(n_jobs=2, backend="threading")(
        delayed(scaled_in_place)(t, 3) for t in tensors
    )
    for result, tensor, original in zip(results, tensors, before, strict=True):
        assert result is tensor
        for block, block_before in zip(tensor.blocks(), original.blocks(), strict=True):
            np.testing.assert_array_equal(block.values, 3 * block_before.values)


@pytest.mark.parametrize("backend", BACKENDS)
def test_blocks_and_labels(rng, backend):
    data = [block_with_gradients(rng), labels(["a", "b"], [[0, 1], [2, 3]]), Labels.single()]
    results = Parallel(n_jobs=2, backend=backend)(delayed(identity)(d) for d in data)
    for result, sent in zip(results, data, strict=True):
        assert_identical(result, sent)


@pytest.mark.parametrize("backend", PROCESS_BACKENDS)
def test_large_map(rng, backend):
    """Maps of about 10 MB, above joblib's 1 MB threshold for memory-mapping numpy
    arguments (which does not apply to maps: they are pickled), one per worker."""
    tensors = [
        make_map(rng, n_samples=(300, 400), component_sizes=(3,), n_properties=40) for _ in range(2)
    ]
    assert all(t.nbytes > 4_000_000 for t in tensors)
    results = Parallel(n_jobs=2, backend=backend)(delayed(doubled)(t) for t in tensors)
    for result, tensor in zip(results, tensors, strict=True):
        assert_identical(result, doubled(tensor))
        _assert_independent(result, tensor)


@pytest.mark.parametrize("backend", BACKENDS)
def test_shared_memory_map(rng, backend):
    """A map in shared memory (``share_memory()``) is sent as well."""
    tensor = make_map(rng).share_memory()
    assert tensor.is_shared()
    results = Parallel(n_jobs=2, backend=backend)(delayed(doubled)(t) for t in [tensor] * 2)
    for result in results:
        assert_identical(result, doubled(tensor))


def shared_and_doubled_in_place(tensor):
    """In a worker: whether the map arrived in shared memory; doubles its
    values in place."""
    scaled_in_place(tensor, 2)
    return tensor.is_shared()


def test_shared_map_through_loky_is_not_copied(rng):
    """loky's pickler uses blockmap's shared-memory reducer: the worker maps
    the caller's segment, so its in-place writes are seen by the caller."""
    tensor = make_map(rng).share_memory()
    expected = [block.values * 2 for block in tensor.blocks()]
    [arrived_shared] = Parallel(n_jobs=2, backend="loky")(
        [delayed(shared_and_doubled_in_place)(tensor)]
    )
    assert arrived_shared
    for block, values in zip(tensor.blocks(), expected, strict=True):
        np.testing.assert_array_equal(block.values, values)
    # and a shared result comes back mapped, not copied
    [returned] = Parallel(n_jobs=2, backend="loky")([delayed(identity)(tensor)])
    assert returned.is_shared()
    returned.block(0).values[...] = -3
    assert (tensor.block(0).values == -3).all()


@pytest.mark.parametrize("blockmap_first", [True, False])
def test_loky_registration_in_either_import_order(blockmap_first):
    imports = ["import blockmap", "from joblib.externals.loky.backend import reduction"]
    if not blockmap_first:
        imports.reverse()
    code = "\n".join(
        [
            *imports,
            "import io",
            "import numpy as np",
            "tensor = blockmap.TensorMap(blockmap.Labels.range('k', 1), [blockmap.TensorBlock(",
            "    np.zeros((1000, 100)), blockmap.Labels.range('s', 1000), [],",
            "    blockmap.Labels.range('p', 100))]).share_memory()",
            "buffer = io.BytesIO()",
            "reduction.dump(tensor, buffer)",
            "print(len(buffer.getvalue()))",
        ]
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    size = int(result.stdout.split()[0])
    assert size < 5_000, f"the shared map was pickled in {size} bytes: copied"


def test_errors_raised_in_loky_workers_reach_the_caller_whole():
    """Every blockmap error (each class built in Python, and the native
    module's) raised in a loky worker is raised again in the caller: the
    same class, message, arguments, errno and filename. ``Parallel`` once,
    then loky's reusable executor (the one joblib uses) for the rest:
    ``Parallel`` restarts the workers after each error."""
    first, *rest = error_cases.CASES
    with pytest.raises(blockmap.BlockMapError) as error:
        Parallel(n_jobs=2, backend="loky")(delayed(error_cases.raise_case)(first) for _ in range(2))
    error_cases.assert_same_error(error.value, error_cases.caught(first))
    executor = get_reusable_executor(max_workers=2)
    futures = {case: executor.submit(error_cases.raise_case, case) for case in rest}
    for case, future in futures.items():
        with pytest.raises(blockmap.BlockMapError) as error:
            future.result()
        error_cases.assert_same_error(error.value, error_cases.caught(case))
