"""TensorMaps through ``torch.utils.data.DataLoader`` workers.

A dataset returning maps and ``collate_fn=partial(blockmap.join,
axis="samples")`` work with two workers under fork, spawn and forkserver;
batches larger than the auto-share threshold reach the main process as
shared memory (the workers' pipes carry metadata: the bytes are counted in
the workers), with the array type kept; a dataset of shared maps reaches
spawn workers as descriptors (the bytes of the process start are counted,
and the workers write into the parent's memory); fork workers that read
maps do not grow their private memory.
"""

import functools
import multiprocessing
import sys
from multiprocessing import reduction

import numpy as np
import pytest

import blockmap
from bench.batches import structure_arrays, structure_maps, w_pieces
from bench.workload import build_blockmap, make_arrays
from helpers import TESTS_DIR, error_cases, loaders
from helpers.io_cases import assert_identical, run_child
from helpers.memory import address_of, mappings

torch = pytest.importorskip("torch")
DataLoader = pytest.importorskip("torch.utils.data").DataLoader

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="memfd shared memory is Linux only")

METHODS = ["fork", "spawn", "forkserver"]
SEGMENT = "memfd:blockmap"


def _big_structures(count, n_atoms=12_000):
    """Structures whose batches of two hold more than the auto-share
    threshold (a gradient of 12,000 atoms is 288 KB)."""
    rng = np.random.default_rng(7)
    return [build_blockmap(structure_arrays(i, n_atoms, rng)) for i in range(count)]


def _descriptor_pieces(count):
    """A small W in ``count`` maps of whole systems, 1.2 MB each: values
    with 100 properties, as descriptors have (labels are 1% of the bytes)."""
    arrays = make_arrays(n_keys=4, n_samples=count * 120, n_grad_samples=count * 15)
    return w_pieces(build_blockmap(arrays), count)


def _label_bytes(tensor):
    total = 0
    for block in tensor.blocks():
        for part in [block] + [block.gradient(p) for p in block.gradients_list()]:
            total += part.samples.values.nbytes
    return total


def _value_arrays(tensor):
    for block in tensor.blocks():
        yield block.values
        for parameter in block.gradients_list():
            yield block.gradient(parameter).values


def _numpy(tensor):
    return tensor.to(arrays="numpy") if tensor._arrays == "torch" else tensor


def _in_segment(array):
    address = address_of(np.asarray(array))
    return any(m.holds(address, array.nbytes) for m in mappings() if SEGMENT in m.path)


def _loader(dataset, method, batch_size=2, collate_fn=loaders.collate, **kwargs):
    return DataLoader(
        dataset,
        batch_size=batch_size,
        num_workers=2,
        collate_fn=collate_fn,
        multiprocessing_context=method,
        **kwargs,
    )


@pytest.mark.parametrize("arrays", ["numpy", "torch"])
@pytest.mark.parametrize("method", METHODS)
def test_large_batches_reach_the_main_process_in_shared_memory(method, arrays):
    maps = [tensor.to(arrays=arrays) for tensor in _descriptor_pieces(8)]
    counter = multiprocessing.get_context(method).Value("q", 0)
    loader = _loader(
        loaders.MapDataset(maps),
        method,
        collate_fn=loaders.collate_noting_shared,
        worker_init_fn=functools.partial(loaders.count_sent_bytes, counter),
    )
    batches = list(loader)
    assert len(batches) == 4
    value_bytes = 0
    for index, batch in enumerate(batches):
        expected = blockmap.join(maps[2 * index : 2 * index + 2], axis="samples")
        # the worker's join wrote the batch into shared memory: one copy
        assert batch.info() == {"shared_when_joined": "True"}
        batch.set_info("shared_when_joined", "")
        expected.set_info("shared_when_joined", "")
        assert batch._arrays == arrays
        values = batch.block(0).gradient("positions").values
        assert isinstance(values, torch.Tensor if arrays == "torch" else np.ndarray)
        assert batch.is_shared()
        assert all(_in_segment(array) for array in _value_arrays(batch))
        assert_identical(_numpy(batch), _numpy(expected))
        value_bytes += sum(np.asarray(array).nbytes for array in _value_arrays(batch))
    # what went through the workers' pipes: headers, labels, descriptors
    label_bytes = sum(_label_bytes(batch) for batch in batches)
    assert 0 < counter.value < label_bytes + 4 * 8_000 < value_bytes / 20, (
        counter.value,
        label_bytes,
        value_bytes,
    )


@pytest.mark.parametrize("method", METHODS)
def test_batches_of_small_maps_cross_every_start_method(method):
    # QM9-like batches are far below the threshold: pickled, which is cheaper
    maps = [tensor.to(arrays="torch") for tensor in structure_maps(24)]
    batches = list(_loader(loaders.MapDataset(maps), method, batch_size=8))
    assert len(batches) == 3
    for index, batch in enumerate(batches):
        expected = blockmap.join(maps[8 * index : 8 * index + 8], axis="samples")
        assert batch._arrays == "torch"
        assert not batch.is_shared()
        assert_identical(_numpy(batch), _numpy(expected))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_errors_raised_in_a_worker_reach_the_loop_as_blockmap_errors(method):
    """torch sends a worker's error as its class and formatted traceback and
    builds it again with ``cls(message=...)``: every blockmap error (each
    class built in Python, and the native module's) reaches the training
    loop as its own class, its message holding the original one."""
    loader = DataLoader(
        error_cases.Raising(), batch_size=None, num_workers=1, multiprocessing_context=method
    )
    items = iter(loader)
    for case in error_cases.CASES:
        original = error_cases.caught(case)
        with pytest.raises(blockmap.BlockMapError) as error:
            next(items)
        assert type(error.value) is type(original), case
        assert "in DataLoader worker process 0" in str(error.value)
        assert f"blockmap.{type(original).__name__}: {original}\n" in str(error.value)
    with pytest.raises(StopIteration):
        next(items)


def test_without_workers_batches_are_the_joins():
    maps = structure_maps(10)
    loader = DataLoader(loaders.MapDataset(maps), batch_size=4, collate_fn=loaders.collate)
    sizes = [len(batch.block(0).samples) for batch in loader]
    assert sizes == [4, 4, 2]


def _count_process_start_bytes(monkeypatch):
    """The bytes pickled to start processes (the spawn and forkserver
    launchers write ``reduction.dump``'s output to the child)."""
    sizes = []
    dump = reduction.dump

    def counting_dump(obj, file, protocol=None):
        before = file.tell()
        dump(obj, file, protocol)
        sizes.append(file.tell() - before)

    monkeypatch.setattr(reduction, "dump", counting_dump)
    return sizes


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_dataset_of_shared_maps_reaches_workers_as_descriptors(method, monkeypatch):
    maps = [tensor.share_memory() for tensor in _descriptor_pieces(8)]
    before = [float(tensor.block(0).values.sum()) for tensor in maps]
    value_bytes = sum(array.nbytes for tensor in maps for array in _value_arrays(tensor))
    sizes = _count_process_start_bytes(monkeypatch)
    loader = DataLoader(
        loaders.DoublingDataset(maps),
        batch_size=2,
        num_workers=2,
        multiprocessing_context=method,
    )
    indices = sorted(int(i) for batch in loader for i in batch)
    assert indices == list(range(8))
    # the workers wrote into the parent's memory: they viewed it
    after = [float(tensor.block(0).values.sum()) for tensor in maps]
    assert after == [2 * value for value in before]
    # what each worker's start carried: the dataset as headers, labels and
    # descriptors (gradient samples are 12 bytes a row), not its values
    label_bytes = sum(_label_bytes(tensor) for tensor in maps)
    assert sizes, "no process was started through reduction.dump"
    start = max(sizes)
    assert start < label_bytes + 64_000 < value_bytes / 5, (start, label_bytes, value_bytes)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_dataset_of_unshared_maps_is_sent_as_data(method, monkeypatch):
    # the other side of the measure above: without share_memory() the
    # arguments of a process being started are pickled as they are
    maps = _descriptor_pieces(4)
    value_bytes = sum(array.nbytes for tensor in maps for array in _value_arrays(tensor))
    sizes = _count_process_start_bytes(monkeypatch)
    loader = DataLoader(
        loaders.MapDataset(maps),
        batch_size=2,
        num_workers=2,
        collate_fn=loaders.collate,
        multiprocessing_context=method,
    )
    assert len(list(loader)) == 2
    assert max(sizes) > value_bytes


# Each memory test runs in a fresh interpreter: what a fork worker dirties
# includes the pages of every Python object the garbage collector visits,
# and a long test session's process holds many more than a training script.
GROWTH = """
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import torch
from helpers import loaders
from bench.batches import structure_arrays, structure_maps
from bench.workload import build_blockmap

if sys.argv[3] == "big":
    # 160 MB in 400 maps of 400 KB
    rng = np.random.default_rng(7)
    maps = [build_blockmap(structure_arrays(i, 16_000, rng)) for i in range(400)]
    batch_size = 64
else:
    maps = structure_maps(40_000)
    batch_size = 256
data = sum(
    array.nbytes
    for tensor in maps
    for block in tensor.blocks()
    for array in (block.values, block.gradient("positions").values)
)
held = sum(len(blockmap.save_buffer(tensor)) for tensor in maps[:100]) * len(maps) // 100
print(json.dumps({"growth": loaders.worker_growth(maps, batch_size), "data": data, "held": held}))
"""


def _worker_growth(which):
    report = run_child(GROWTH, TESTS_DIR, TESTS_DIR.parent.parent, which, timeout=300)
    growth = report["growth"]
    assert len(growth) == 2
    return growth, report


def test_fork_workers_reading_maps_do_not_grow():
    # each of two workers reads half of 160 MB of maps
    growth, report = _worker_growth("big")
    data = report["data"]
    assert data > 150e6
    for pid, grown in growth.items():
        # the pages a worker reads stay the parent's: what it holds alone
        # grows by a few MB of Python objects, not by the half it read
        assert grown["uss"] < 0.05 * data, (pid, grown, data)
        assert grown["pss"] < 0.05 * data, (pid, grown, data)


def test_fork_workers_reading_many_small_maps_do_not_grow():
    # 40,000 QM9-like maps: the refcounts a worker touches dirty the pages of
    # the maps' Python objects, never their metadata's or their arrays'
    growth, report = _worker_growth("small")
    held = report["held"]
    for pid, grown in growth.items():
        assert grown["uss"] < 0.08 * held, (pid, grown, held)  # measured: 4.4 MB of 108


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_dataset_file_reaches_workers_as_a_reference(method, monkeypatch, tmp_path):
    maps = structure_maps(64)
    path = tmp_path / "train"
    blockmap.save_dataset(path, maps)
    sizes = _count_process_start_bytes(monkeypatch)
    loader = DataLoader(
        blockmap.Dataset(path),  # a map-style dataset as it is
        batch_size=8,
        num_workers=2,
        collate_fn=loaders.collate,
        multiprocessing_context=method,
    )
    batches = list(loader)
    assert len(batches) == 8
    for index, batch in enumerate(batches):
        assert_identical(batch, blockmap.join(maps[8 * index : 8 * index + 8], axis="samples"))
    # each worker's start carries the reference (path, identity, count,
    # checksum), not the 64 maps it holds
    data = sum(len(blockmap.save_buffer(tensor)) for tensor in maps)
    assert max(sizes) < 16_000 < data, (max(sizes), data)
    # the same maps in a list travel whole
    sizes.clear()
    assert len(list(_loader(loaders.MapDataset(maps), method, batch_size=8))) == 8
    assert max(sizes) > data


def test_a_dataset_subclass_keeps_its_transform_in_spawn_workers(tmp_path):
    maps = structure_maps(8)
    path = tmp_path / "tagged"
    blockmap.save_dataset(path, maps)
    dataset = loaders.TaggedDataset(path)
    dataset.tag = "worker"
    loader = DataLoader(
        dataset, batch_size=4, num_workers=2, collate_fn=list, multiprocessing_context="spawn"
    )
    batches = list(loader)
    assert [len(batch) for batch in batches] == [4, 4]
    for index, tensor in enumerate([tensor for batch in batches for tensor in batch]):
        assert tensor.info() == {"tag": "worker"}
        assert_identical(tensor.block(0), maps[index].block(0))
