"""Torch tensors as block values: memory kept, the array type kept, autograd,
labels as int32 tensors, pickling (protocol 5 out of band, lower protocols),
copies, files, shared memory, dask frames, join and split, and the refusals
(another device, an unsupported dtype, non-leaf tensors requiring grad)."""

from __future__ import annotations

import copy
import multiprocessing
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

import blockmap

torch = pytest.importorskip("torch")


def _labels(name, count):
    return blockmap.Labels([name], np.arange(count, dtype=np.int32).reshape(-1, 1))


def _block(values, with_gradient=True):
    n, p = values.shape
    block = blockmap.TensorBlock(values, _labels("system", n), [], _labels("p", p))
    if with_gradient:
        gradient = torch.arange(n * 3 * p, dtype=values.dtype).reshape(n, 3, p) / 7
        samples = blockmap.Labels(
            ["sample", "atom"], np.stack([np.arange(n), np.zeros(n)], axis=1).astype(np.int32)
        )
        block.add_gradient(
            "positions",
            blockmap.TensorBlock(gradient, samples, [_labels("xyz", 3)], _labels("p", p)),
        )
    return block


def _map(*tensors):
    keys = blockmap.Labels(["k"], np.arange(len(tensors), dtype=np.int32).reshape(-1, 1))
    return blockmap.TensorMap(keys, [_block(t) for t in tensors])


def _tensors(tm):
    out = []
    for block in tm.blocks():
        out.append(block.values)
        out.extend(g.values for _, g in block.gradients())
    return out


def test_import_does_not_import_torch():
    code = "import sys, blockmap; blockmap.TensorMap; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_a_block_keeps_the_tensor_and_gives_it_back():
    t = torch.arange(12, dtype=torch.float64).reshape(4, 3)
    block = _block(t)
    assert block.values is t
    assert block._arrays == "torch"
    gradient = block.gradient("positions").values
    assert isinstance(gradient, torch.Tensor)
    tm = blockmap.TensorMap(blockmap.Labels.single(), [block])
    assert tm.block(0).values is t
    assert tm.block(0).values.data_ptr() == t.data_ptr()
    # writes are seen both ways
    t[0, 0] = 42.0
    assert tm.to(arrays="numpy").block(0).values[0, 0] == 42.0


def test_numpy_blocks_still_give_numpy():
    a = np.zeros((2, 3))
    block = blockmap.TensorBlock(a, _labels("s", 2), [], _labels("p", 3))
    assert isinstance(block.values, np.ndarray)
    assert block._arrays == "numpy"


def test_non_contiguous_tensors_are_copied_once_and_autograd_follows():
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6).requires_grad_(True)
    strided = base[:, ::2]
    block = _block(strided, with_gradient=False)
    assert block.values.is_contiguous()
    assert block.values.data_ptr() != base.data_ptr()
    block.values.sum().backward()
    assert base.grad[:, ::2].eq(1).all() and base.grad[:, 1::2].eq(0).all()


def test_autograd_reaches_the_tensor_the_block_was_made_from():
    t = torch.arange(6, dtype=torch.float64).reshape(2, 3).requires_grad_(True)
    tm = _map(t)
    loss = (tm.block(0).values ** 2).sum()
    loss.backward()
    assert torch.equal(t.grad, 2 * t.detach())


def test_gradient_blocks_keep_their_tensors():
    t = torch.ones(2, 3, dtype=torch.float64)
    g = torch.zeros(2, 3, 3, dtype=torch.float64).requires_grad_(True)
    block = blockmap.TensorBlock(t, _labels("system", 2), [], _labels("p", 3))
    samples = blockmap.Labels(["sample"], np.arange(2, dtype=np.int32).reshape(-1, 1))
    block.add_gradient(
        "positions", blockmap.TensorBlock(g, samples, [_labels("xyz", 3)], _labels("p", 3))
    )
    tm = blockmap.TensorMap(blockmap.Labels.single(), [block])
    assert tm.block(0).gradient("positions").values is g


def test_to_switches_backends_without_copying():
    tm = _map(torch.rand(3, 2, dtype=torch.float64), torch.rand(4, 2, dtype=torch.float64))
    as_numpy = tm.to(arrays="numpy")
    assert as_numpy._arrays == "numpy"
    for tensor, array in zip(_tensors(tm), _tensors(as_numpy), strict=True):
        assert isinstance(array, np.ndarray)
        assert array.ctypes.data == tensor.data_ptr()
    back = as_numpy.to(arrays="torch")
    for tensor, again in zip(_tensors(tm), _tensors(back), strict=True):
        # the very tensors the blocks were made from
        assert again is tensor


def test_numpy_maps_become_torch_views():
    a = np.random.default_rng(0).random((3, 2))
    block = blockmap.TensorBlock(a, _labels("s", 3), [], _labels("p", 2))
    tm = blockmap.TensorMap(blockmap.Labels.single(), [block]).to(arrays="torch")
    values = tm.block(0).values
    assert isinstance(values, torch.Tensor)
    assert values.data_ptr() == a.ctypes.data


def test_to_dtype_converts_and_accepts_torch_dtypes():
    tm = _map(torch.rand(3, 2, dtype=torch.float64))
    for dtype in (torch.float32, np.float32):
        converted = tm.to(dtype=dtype)
        assert converted.block(0).values.dtype == torch.float32
        assert converted.block(0).gradient("positions").values.dtype == torch.float32
    assert tm.to(torch.float32).block(0).values.dtype == torch.float32
    assert tm.to(torch.device("cpu"))._arrays == "torch"


def test_other_devices_and_dtypes_are_refused():
    samples, properties = _labels("s", 2), _labels("p", 2)
    with pytest.raises(blockmap.ValidationError, match="device"):
        blockmap.TensorBlock(torch.empty(2, 2, device="meta"), samples, [], properties)
    with pytest.raises(blockmap.BlockMapTypeError, match="bfloat16"):
        blockmap.TensorBlock(torch.zeros(2, 2, dtype=torch.bfloat16), samples, [], properties)
    with pytest.raises(blockmap.ValidationError, match="0-dimensional"):
        blockmap.TensorBlock(torch.tensor(1.0), samples, [], properties)
    sparse = torch.zeros(2, 2).to_sparse()
    with pytest.raises(blockmap.ValidationError, match="sparse"):
        blockmap.TensorBlock(sparse, samples, [], properties)
    tm = _map(torch.zeros(2, 2))
    with pytest.raises(ValueError, match="non-cpu"):
        tm.to(device="cuda")
    with pytest.raises(ValueError, match="backend"):
        tm.to(arrays="jax")


def test_blocks_of_one_map_hold_one_array_type():
    torch_block = _block(torch.zeros(2, 2, dtype=torch.float64), with_gradient=False)
    numpy_block = blockmap.TensorBlock(np.zeros((2, 2)), _labels("system", 2), [], _labels("p", 2))
    keys = _labels("k", 2)
    with pytest.raises(blockmap.ValidationError, match="torch"):
        blockmap.TensorMap(keys, [torch_block, numpy_block])


def test_labels_give_int32_tensors_without_warnings():
    tm = _map(torch.zeros(3, 2, dtype=torch.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for labels in (tm.keys, tm.block(0).samples, tm.block(0).properties):
            assert isinstance(labels.values, torch.Tensor)
            assert labels.values.dtype == torch.int32
            assert labels._arrays == "torch"
        entry = tm.keys[0]
        assert isinstance(entry.values, torch.Tensor)
        assert isinstance(tm.block(0).samples.column("system"), torch.Tensor)
    # the tensors are copies: writing into them leaves the Labels as they were
    values = tm.keys.values
    values[0, 0] = 99
    assert tm.keys.values[0, 0] == 0
    # Labels made from tensors give tensors; equal to the numpy ones
    labels = blockmap.Labels(["a"], torch.tensor([[1], [2]]))
    assert isinstance(labels.values, torch.Tensor)
    assert labels == blockmap.Labels(["a"], np.array([[1], [2]]))
    assert labels.to(arrays="numpy")._arrays == "numpy"
    assert isinstance(labels.union(labels).values, torch.Tensor)


def _pointer_ranges(buffers):
    ranges = []
    for buffer in buffers:
        view = buffer.raw()
        start = np.frombuffer(view, dtype=np.uint8).ctypes.data if len(view) else 0
        ranges.append((start, start + len(view)))
    return ranges


def test_protocol_5_gives_one_buffer_per_array_and_views_them():
    tm = _map(torch.rand(5, 3, dtype=torch.float64), torch.rand(2, 3, dtype=torch.float64))
    buffers = []
    data = pickle.dumps(tm, protocol=5, buffer_callback=buffers.append)
    tensors = _tensors(tm)
    ranges = _pointer_ranges(buffers)
    for tensor in tensors:
        start = tensor.data_ptr()
        # every tensor is handed out as a buffer over its own memory
        assert (start, start + tensor.numel() * tensor.element_size()) in ranges
    assert len(data) < 4096
    loaded = pickle.loads(data, buffers=buffers)
    assert loaded._arrays == "torch"
    for original, received in zip(tensors, _tensors(loaded), strict=True):
        assert isinstance(received, torch.Tensor)
        assert received.data_ptr() == original.data_ptr()
        assert torch.equal(received, original)


def test_requires_grad_survives_pickling_and_non_leaf_tensors_are_refused():
    leaf = torch.rand(3, 2, dtype=torch.float64).requires_grad_(True)
    tm = _map(leaf)
    for protocol in (2, 4, 5):
        loaded = pickle.loads(pickle.dumps(tm, protocol=protocol))
        values = loaded.block(0).values
        assert values.requires_grad and values.is_leaf
        assert not loaded.block(0).gradient("positions").values.requires_grad
        # the same leaf every time, so gradients accumulate on it
        assert loaded.block(0).values is values
        torch.testing.assert_close(values.detach(), leaf.detach())
    non_leaf = _map(leaf * 2)
    for protocol in (2, 4, 5):
        with pytest.raises(RuntimeError, match="non-leaf"):
            pickle.dumps(non_leaf, protocol=protocol)
    # deep copies clone, as metatensor-core's do: the copy stays in the graph
    deep = copy.deepcopy(non_leaf).block(0).values
    assert deep.grad_fn is not None and deep.data_ptr() != leaf.data_ptr()
    assert pickle.loads(pickle.dumps(_map((leaf * 2).detach())))._arrays == "torch"


@pytest.mark.parametrize("protocol", [0, 2, 4])
def test_lower_protocols_keep_the_backend(protocol):
    tm = _map(torch.rand(4, 2, dtype=torch.float32))
    loaded = pickle.loads(pickle.dumps(tm, protocol=protocol))
    assert loaded._arrays == "torch"
    for original, received in zip(_tensors(tm), _tensors(loaded), strict=True):
        assert isinstance(received, torch.Tensor)
        assert torch.equal(original, received)
    block = pickle.loads(pickle.dumps(tm.block(0).copy(), protocol=protocol))
    assert isinstance(block.values, torch.Tensor)
    labels = pickle.loads(pickle.dumps(tm.keys, protocol=protocol))
    assert isinstance(labels.values, torch.Tensor)


def test_copies_keep_the_backend():
    leaf = torch.rand(3, 2, dtype=torch.float64).requires_grad_(True)
    tm = _map(leaf)
    shallow = copy.copy(tm)
    assert shallow._arrays == "torch"
    assert shallow.block(0).values is leaf
    deep = copy.deepcopy(tm)
    assert deep.block(0).values.data_ptr() != leaf.data_ptr()
    assert deep.block(0).values.requires_grad
    torch.testing.assert_close(deep.block(0).values.detach(), leaf.detach())
    block = tm.block(0).copy()
    assert isinstance(block.values, torch.Tensor) and block.values.requires_grad
    # the gradient array does not require grad: copied, not cloned
    gradient = block.gradient("positions").values
    assert not gradient.requires_grad
    assert gradient.data_ptr() != tm.block(0).gradient("positions").values.data_ptr()


# read-only memory (a bytes buffer) gives tensors torch warns about once per
# process, as for any read-only array; mmap="c" gives writable ones
@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
def test_save_and_load_with_arrays_torch(tmp_path):
    tm = _map(torch.rand(4, 2, dtype=torch.float64))
    path = tmp_path / "map.mts"
    tm.save(path)
    assert blockmap.load(path)._arrays == "numpy"
    for loaded in (
        blockmap.load(path, arrays="torch"),
        blockmap.load(path, mmap="c", arrays="torch"),
        blockmap.TensorMap.load(path, arrays="torch"),
        blockmap.load_buffer(path.read_bytes(), arrays="torch"),
    ):
        assert loaded._arrays == "torch"
        for original, received in zip(_tensors(tm), _tensors(loaded), strict=True):
            assert isinstance(received, torch.Tensor)
            assert torch.equal(original, received)
    tm.block(0).save(tmp_path / "block.mts")
    block = blockmap.load_block(tmp_path / "block.mts", arrays="torch")
    assert isinstance(block.values, torch.Tensor)
    with pytest.raises(ValueError, match="backend"):
        blockmap.load(path, arrays="cupy")


def test_share_memory_of_a_torch_map():
    tm = _map(torch.rand(4, 2, dtype=torch.float64))
    expected = [t.clone() for t in _tensors(tm)]
    tm.share_memory()
    assert tm.is_shared()
    assert tm._arrays == "torch"
    for original, shared in zip(expected, _tensors(tm), strict=True):
        assert isinstance(shared, torch.Tensor)
        assert torch.equal(original, shared)


def _send_back(queue_in, queue_out):
    tm = queue_in.get()
    values = tm.block(0).values
    values += 1  # writes into the shared segment
    queue_out.put((type(values).__name__, tm._arrays, tm.is_shared()))


def test_a_torch_map_crosses_a_spawn_queue_through_shared_memory():
    context = multiprocessing.get_context("spawn")
    tm = _map(torch.zeros(256, 256, dtype=torch.float64)).share_memory()
    queue_in, queue_out = context.Queue(), context.Queue()
    process = context.Process(target=_send_back, args=(queue_in, queue_out))
    process.start()
    queue_in.put(tm)
    kind, arrays, shared = queue_out.get(timeout=60)
    process.join(timeout=60)
    assert (kind, arrays, shared) == ("Tensor", "torch", True)
    assert tm.block(0).values.eq(1).all()


def test_dask_frames_keep_the_backend():
    from blockmap import dask as bmdask

    leaf = torch.rand(3, 2, dtype=torch.float64).requires_grad_(True)
    tm = _map(leaf)
    header, frames = bmdask.serialize(tm)
    assert header["arrays"] == "torch"
    loaded = bmdask.deserialize(header, frames)
    assert loaded._arrays == "torch"
    assert loaded.block(0).values.requires_grad
    assert loaded.block(0).values.data_ptr() == leaf.data_ptr()
    header["requires_grad"] = ["x"]
    with pytest.raises(blockmap.FormatError, match="requires_grad"):
        bmdask.deserialize(header, frames)


def test_join_and_split_keep_torch():
    maps = [_map(torch.rand(n, 2, dtype=torch.float64)) for n in (2, 3)]
    joined = blockmap.join(maps, axis="samples", add_dimension="batch")
    assert joined._arrays == "torch"
    assert isinstance(joined.block(0).values, torch.Tensor)
    torch.testing.assert_close(joined.block(0).values, torch.cat([m.block(0).values for m in maps]))
    parts = blockmap.split(
        joined,
        axis="samples",
        selections=[
            blockmap.Labels(["batch"], np.array([[0]], dtype=np.int32)),
            blockmap.Labels(["batch"], np.array([[1]], dtype=np.int32)),
        ],
    )
    assert all(isinstance(p.block(0).values, torch.Tensor) for p in parts)
    torch.testing.assert_close(parts[1].block(0).values, maps[1].block(0).values)
    block = blockmap.join_blocks([m.block(0) for m in maps], axis="samples", add_dimension="b")
    assert isinstance(block.values, torch.Tensor)


@pytest.mark.parametrize("axis", ["samples", "properties"])
@pytest.mark.parametrize("leaf", [True, False])
def test_join_and_split_keep_autograd(axis, leaf):
    """Tensors that require grad are joined and split by
    metatensor-operations' functions on blockmap's classes (tensor
    operations autograd follows), with the results the Rust path gives
    for the same data without grad."""
    pytest.importorskip("metatensor_operations")
    leaves = [torch.rand(2, 2, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    inputs = leaves if leaf else [t * 1 for t in leaves]
    # the gradient blocks are plain: only the values require grad
    maps = [_map(t) for t in inputs]
    plain = [_map(t.detach()) for t in inputs]
    kwargs = {"add_dimension": "batch"}
    joined = blockmap.join(maps, axis=axis, **kwargs)
    assert joined._arrays == "torch"
    assert joined == blockmap.join(plain, axis=axis, **kwargs)
    values = joined.block(0).values
    assert values.grad_fn is not None
    block = blockmap.join_blocks([m.block(0) for m in maps], axis=axis, **kwargs)
    assert block.values.grad_fn is not None
    assert block == blockmap.join_blocks([m.block(0) for m in plain], axis=axis, **kwargs)
    selections = [blockmap.Labels(["batch"], np.array([[i]], dtype=np.int32)) for i in (0, 1)]
    parts = blockmap.split(joined, axis=axis, selections=selections)
    assert [p._arrays for p in parts] == ["torch", "torch"]
    assert (
        parts[1] == blockmap.split(blockmap.join(plain, axis=axis, **kwargs), axis, selections)[1]
    )
    pieces = blockmap.split_block(block, axis=axis, selections=selections)
    (values.sum() + 2 * parts[1].block(0).values.sum() + 3 * pieces[0].values.sum()).backward()
    assert torch.equal(leaves[0].grad, torch.full_like(leaves[0], 4.0))
    assert torch.equal(leaves[1].grad, torch.full_like(leaves[1], 3.0))
    with pytest.raises(blockmap.ValidationError, match="shared memory"):
        blockmap.join(maps, axis=axis, shared=True, **kwargs)
    # without grad, the Rust path: a copy, no graph
    assert blockmap.join(plain, axis=axis, **kwargs).block(0).values.grad_fn is None


def test_operations_run_on_torch_maps_with_autograd():
    pytest.importorskip("metatensor_operations")
    t = torch.rand(4, 3, dtype=torch.float64, requires_grad=True)
    block = blockmap.TensorBlock(t, _labels("system", 4), [], _labels("p", 3))
    tm = blockmap.TensorMap(blockmap.Labels.single(), [block])
    total = blockmap.operations.sum_over_samples(tm * 2, "system")
    assert total._arrays == "torch"
    joined = blockmap.operations.join([tm, tm], axis="samples", add_dimension="batch")
    (total.block(0).values.sum() + joined.block(0).values.sum()).backward()
    assert torch.equal(t.grad, torch.full_like(t, 4.0))


def test_to_dtype_of_tensors_is_followed_by_autograd():
    t = torch.rand(3, 2, dtype=torch.float64, requires_grad=True)
    tm = _map(t).to(dtype=torch.float32)
    values = tm.block(0).values
    assert values.dtype == torch.float32 and values.requires_grad
    values.sum().backward()
    assert torch.equal(t.grad, torch.ones_like(t))


def test_an_unknown_arrays_value_lists_the_valid_ones(tmp_path):
    from helpers.arrays_calls import arrays_calls

    calls = arrays_calls(tmp_path)
    assert len(calls) == 12
    for name, call in calls.items():
        with pytest.raises(blockmap.ValidationError) as error:
            call("pytorch")
        assert str(error.value) == (
            "unknown array backend: 'pytorch' (arrays must be 'numpy' or 'torch')"
        ), name
        call("numpy")


WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None  # as when torch is not installed
import pathlib, tempfile
import blockmap
sys.path.insert(0, sys.argv[1])
from helpers.arrays_calls import arrays_calls
calls = arrays_calls(pathlib.Path(tempfile.mkdtemp()))
for name, call in calls.items():
    call("numpy")
    try:
        call("torch")
    except ModuleNotFoundError as error:
        assert error.name == "torch", (name, error.name)
        assert "`pip install torch`, or blockmap's `torch` extra" in str(error), name
        assert "pip install blockmap[" not in str(error), name
        assert isinstance(error.__cause__, ImportError), name
    else:
        raise AssertionError(name + ": no ModuleNotFoundError")
print(len(calls))
"""


def test_arrays_torch_without_torch_says_how_to_install_it():
    import os

    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, os.path.dirname(os.path.dirname(__file__))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "12"
