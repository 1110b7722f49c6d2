"""Torch-backed objects against metatensor-core's torch-backed ones, in the
same run: dtype and device, Labels.to(torch.device), deep copies of tensors
in an autograd graph; and blocks whose tensor's storage is swapped after
the block took it (no oracle: metatensor-core follows the swapped tensor)."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import blockmap

torch = pytest.importorskip("torch")
mts = pytest.importorskip("metatensor")


def _block(lib, values):
    n, p = values.shape
    samples = lib.Labels(["s"], np.arange(n, dtype=np.int32).reshape(-1, 1))
    properties = lib.Labels(["p"], np.arange(p, dtype=np.int32).reshape(-1, 1))
    return lib.TensorBlock(values, samples, [], properties)


def _map(lib, values):
    return lib.TensorMap(lib.Labels(["k"], np.array([[0]], dtype=np.int32)), [_block(lib, values)])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.int32, torch.bool])
def test_dtype_and_device_are_torch_objects(dtype):
    values = torch.zeros(2, 3, dtype=dtype)
    for attribute in ("dtype", "device"):
        for make in (_block, _map):
            theirs = getattr(make(mts, values), attribute)
            ours = getattr(make(blockmap, values), attribute)
            assert type(ours) is type(theirs), (attribute, ours, theirs)
            assert ours == theirs
    # numpy-backed objects keep numpy's dtype and the string "cpu"
    array = np.zeros((2, 3))
    for make in (_block, _map):
        assert make(blockmap, array).dtype == make(mts, array).dtype == np.float64
        assert make(blockmap, array).device == make(mts, array).device == "cpu"
    # so do their labels, as metatensor-core's torch Labels
    keys = _map(blockmap, values).keys
    their_keys = mts.Labels(["k"], torch.tensor([[0]], dtype=torch.int32))
    assert keys.device == their_keys.device == torch.device("cpu")
    assert type(keys.device) is type(their_keys.device)
    assert keys[0].device == torch.device("cpu")


def test_labels_to_a_torch_device():
    for lib in (mts, blockmap):
        labels = lib.Labels(["s"], np.array([[0], [1]], dtype=np.int32))
        moved = labels.to(torch.device("cpu"))
        assert moved == labels
        assert moved.to(torch.device("cpu"), arrays="torch").device == torch.device("cpu")
        with pytest.raises(ValueError, match="non-cpu"):
            labels.to(torch.device("meta"))
        with pytest.raises(ValueError, match="dtype"):
            labels.to(torch.int64)


@pytest.mark.parametrize("kind", ["leaf", "non-leaf", "plain"])
@pytest.mark.parametrize("how", ["copy", "deepcopy"])
def test_deep_copies_clone_tensors_in_a_graph(kind, how):
    leaf = torch.rand(3, 2, dtype=torch.float64, requires_grad=True)
    values = {"leaf": leaf, "non-leaf": leaf * 2, "plain": leaf.detach() * 2}[kind]

    def copied(lib):
        tm = _map(lib, values)
        tm = tm.copy() if how == "copy" else copy.deepcopy(tm)
        return tm.block(0).values

    theirs, ours = copied(mts), copied(blockmap)
    assert ours.data_ptr() != values.data_ptr()
    assert torch.equal(ours.detach(), theirs.detach())
    assert ours.requires_grad == theirs.requires_grad
    assert ours.is_leaf == theirs.is_leaf
    assert type(ours.grad_fn) is type(theirs.grad_fn)
    block = _block(blockmap, values)
    block_copy = block.copy() if how == "copy" else copy.deepcopy(block)
    assert type(block_copy.values.grad_fn) is type(theirs.grad_fn)
    if kind != "plain":
        # the copies stay in the graph: gradients reach the leaf
        (ours.sum() + block_copy.values.sum()).backward()
        assert torch.equal(leaf.grad, torch.full_like(leaf, 2.0 if kind == "leaf" else 4.0))


def _swap(tensor, how):
    if how == "set_":
        tensor.set_(torch.full((5, 4), 9.0, dtype=torch.float64))
    elif how == "data":
        tensor.data = torch.full((3, 2), 9.0, dtype=torch.float32)
    else:
        tensor.resize_(1, 1)


@pytest.mark.parametrize("how", ["set_", "data", "resize_"])
def test_a_swapped_storage_is_never_given_back(tmp_path, how):
    """``TensorBlock(values=t)`` then ``t.set_(other)`` (or ``t.data =
    other``, ``t.resize_``): every path gives the memory the block took,
    which its labels describe, never the new storage."""
    t = torch.arange(6, dtype=torch.float64).reshape(3, 2)
    expected = t.clone()
    block = _block(blockmap, t)
    tm = blockmap.TensorMap(blockmap.Labels(["k"], np.array([[0]], dtype=np.int32)), [block])
    assert block.values is t
    _swap(t, how)
    assert not torch.equal(t, expected)

    def check(values):
        assert isinstance(values, torch.Tensor)
        assert values is not t
        assert torch.equal(values, expected)

    check(block.values)
    check(tm.block(0).values)
    check(tm.copy().block(0).values)
    check(block.copy().values)
    check(copy.deepcopy(tm).block(0).values)
    for protocol in (4, 5):
        check(pickle.loads(pickle.dumps(tm, protocol=protocol)).block(0).values)
    tm.save(tmp_path / "swapped.mts")
    check(blockmap.load(tmp_path / "swapped.mts", arrays="torch").block(0).values)
    check(blockmap.load_buffer(tm.save_buffer(), arrays="torch").block(0).values)
    check(blockmap.join([tm, tm], "samples", add_dimension="t").block(0).values[:3])
    check(tm.to(arrays="numpy").to(arrays="torch").block(0).values)
    check(torch.from_numpy(np.asarray(tm.to(arrays="numpy").block(0).values)))
    shared = tm.copy().share_memory()
    check(shared.block(0).values)
    del shared
    pytest.importorskip("metatensor.torch")
    from blockmap.metatensor_torch import to_metatensor_torch

    converted = to_metatensor_torch(tm)
    assert torch.equal(converted.block(0).values, expected)
