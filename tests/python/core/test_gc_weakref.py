"""Garbage collection and weak references of maps, blocks and labels.

A map or a block holding a torch tensor as values reaches the tensor's hooks;
a hook referring back to the map (``t.register_hook(lambda g: tensor_map)``)
is a cycle that only the collector can free: the classes report what they
hold alone to it (``__traverse__``) and drop it when asked (``__clear__``).
What another holder also reaches (a block object sharing the map's memory)
is not reported, and stays alive. Weak references work on the four classes,
as on metatensor-core's.
"""

import gc
import weakref

import numpy as np
import pytest

import blockmap

torch = pytest.importorskip("torch")
metatensor = pytest.importorskip("metatensor")


class _Marker:
    """An object the hooks hold, whose weak reference tells they are gone."""


def _labels(lib, name, count):
    return lib.Labels([name], np.arange(count).reshape(count, 1))


def _map_over(tensor, lib=blockmap):
    block = lib.TensorBlock(
        values=tensor,
        samples=_labels(lib, "s", tensor.shape[0]),
        components=[],
        properties=_labels(lib, "p", tensor.shape[1]),
    )
    return lib.TensorMap(_labels(lib, "k", 1), [block])


@pytest.mark.parametrize("lib", [blockmap, metatensor], ids=["blockmap", "metatensor"])
def test_weak_references_to_every_class(lib):
    tensor = _map_over(np.zeros((3, 2)), lib)
    objects = [tensor, tensor.block(0), tensor.keys, tensor.keys[0]]
    fired = []
    refs = [weakref.ref(o, lambda _, i=i: fired.append(i)) for i, o in enumerate(objects)]
    for ref, obj in zip(refs, objects, strict=True):
        assert ref() is obj
    del tensor, objects, obj
    gc.collect()
    assert all(ref() is None for ref in refs)
    assert sorted(fired) == [0, 1, 2, 3]


def test_cycles_through_torch_hooks_are_collected():
    # 200 maps of 1 MB each, each referred to by a hook of its own tensor:
    # all freed by the collector (before, and with metatensor-core, all
    # stayed: 200 MB); the marker in the hook tells that the hook is gone
    refs = []
    gc.disable()  # the automatic collections would free some meanwhile
    try:
        for _ in range(200):
            values = torch.zeros(1024, 128, dtype=torch.float64, requires_grad=True)
            tensor_map = _map_over(values)
            marker = _Marker()
            values.register_hook(lambda grad, m=tensor_map, marker=marker: (m, marker))
            refs.append((weakref.ref(marker), weakref.ref(tensor_map)))
            del values, tensor_map, marker
        assert sum(marker() is not None for marker, _ in refs) == 200
    finally:
        gc.enable()
    gc.collect()
    assert sum(marker() is not None for marker, _ in refs) == 0
    assert sum(tensor_map() is not None for _, tensor_map in refs) == 0


def test_cycles_through_a_block_are_collected():
    values = torch.zeros(3, 2, dtype=torch.float64, requires_grad=True)
    block = blockmap.TensorBlock(values, _labels(blockmap, "s", 3), [], _labels(blockmap, "p", 2))
    marker = _Marker()
    values.register_hook(lambda grad, block=block, marker=marker: (block, marker))
    refs = weakref.ref(marker), weakref.ref(block)
    del values, block, marker
    gc.collect()
    assert [ref() for ref in refs] == [None, None]


def test_memory_reached_from_outside_stays_alive():
    # the block object shares the map's memory: the map's path to the
    # tensor is not its alone, so nothing is reported, and the collector
    # frees nothing that is still in use
    values = torch.arange(6, dtype=torch.float64).reshape(3, 2).requires_grad_()
    block = blockmap.TensorBlock(values, _labels(blockmap, "s", 3), [], _labels(blockmap, "p", 2))
    tensor_map = blockmap.TensorMap(_labels(blockmap, "k", 1), [block])
    values.register_hook(lambda grad, tensor_map=tensor_map: tensor_map)
    map_ref = weakref.ref(tensor_map)
    del values, tensor_map
    for _ in range(3):
        gc.collect()
    assert map_ref() is not None
    assert map_ref().block(0).values.tolist() == [[0, 1], [2, 3], [4, 5]]
    assert block.values.sum().item() == 15
    # once the block object is gone, the cycle is the map's alone
    del block
    gc.collect()
    assert map_ref() is None


def test_a_map_kept_by_a_view_of_its_values_stays_whole():
    values = torch.arange(6, dtype=torch.float64).reshape(3, 2).requires_grad_()
    tensor_map = _map_over(values)
    values.register_hook(lambda grad, tensor_map=tensor_map: tensor_map)
    view = tensor_map.block(0).values
    map_ref = weakref.ref(tensor_map)
    del values, tensor_map
    gc.collect()
    assert map_ref() is not None
    assert view.tolist() == [[0, 1], [2, 3], [4, 5]]
    del view
    gc.collect()
    assert map_ref() is None
