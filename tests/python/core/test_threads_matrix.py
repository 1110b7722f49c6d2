"""A map is a value that many threads read: every method, from several
threads at once, works while another thread shares, copies, saves or pickles
the same map (no "already borrowed", no wait for the long operation)."""

import copy
import io
import pickle
import threading

import numpy as np
import pytest

import blockmap
from blockmap import Labels, TensorBlock, TensorMap


def _map():
    rng = np.random.default_rng(11)
    keys = Labels(["k"], np.arange(4).reshape(-1, 1))
    blocks = []
    for _ in range(4):
        block = TensorBlock(
            rng.normal(size=(40_000, 3, 50)),  # 48 MB each
            Labels(["s"], np.arange(40_000).reshape(-1, 1)),
            [Labels.range("c", 3)],
            Labels.range("p", 50),
        )
        gradient = TensorBlock(
            rng.normal(size=(10, 3, 50)),
            Labels(["sample"], np.arange(10).reshape(-1, 1)),
            [Labels.range("c", 3)],
            Labels.range("p", 50),
        )
        block.add_gradient("g", gradient)
        blocks.append(block)
    tensor = TensorMap(keys, blocks)
    tensor.set_info("origin", "threads")
    return tensor


def _readers(tensor):
    """Every method of the map, its blocks and labels that does not change
    the map, each a call returning something to check."""
    block = tensor.block(0)
    keys = tensor.keys
    return {
        "len": lambda: len(tensor) == 4,
        "keys": lambda: tensor.keys == keys,
        "repr": lambda: "TensorMap" in repr(tensor),
        "block": lambda: tensor.block(k=2).values.shape == (40_000, 3, 50),
        "blocks": lambda: len(tensor.blocks()) == 4,
        "block_by_id": lambda: tensor.block_by_id(-1).samples == block.samples,
        "items": lambda: len(list(tensor.items())) == 4,
        "iterate": lambda: len(list(tensor)) == 4,
        "names": lambda: tensor.sample_names == ["s"] and tensor.property_names == ["p"],
        "components": lambda: tensor.component_names == ["c"],
        "info": lambda: tensor.info()["origin"] == "threads",
        "get_info": lambda: tensor.get_info("origin") == "threads",
        "nbytes": lambda: tensor.nbytes > 0,
        "is_shared": lambda: tensor.is_shared() in (True, False),
        "eq": lambda: tensor == tensor,
        "copy.copy": lambda: len(copy.copy(tensor)) == 4,
        "pickle 5": lambda: len(pickle.dumps(tensor, 5, buffer_callback=lambda b: None)) > 0,
        "gradient": lambda: tensor.block(1).gradient("g").values.shape == (10, 3, 50),
        "gradients_list": lambda: tensor.block(1).gradients_list() == ["g"],
        "labels": lambda: keys.position([3]) == 3 and [2] in keys and len(keys[1]) == 1,
        "labels pickle": lambda: pickle.loads(pickle.dumps(keys)) == keys,
        "labels save_buffer": lambda: blockmap.load_labels_buffer(keys.save_buffer()) == keys,
        "block repr": lambda: "TensorBlock" in repr(tensor.block(3)),
        "set_info": lambda: tensor.set_info("reader", "yes") is None,
    }


LONG = {
    "share_memory": lambda tensor, _: tensor.share_memory(),
    "copy": lambda tensor, _: tensor.copy(),
    "deepcopy": lambda tensor, _: copy.deepcopy(tensor),
    "save": lambda tensor, path: blockmap.save(path, tensor),
    "save to a file object": lambda tensor, _: blockmap.save(io.BytesIO(), tensor),
    "save_buffer": lambda tensor, _: tensor.save_buffer(),
    "pickle 4": lambda tensor, _: pickle.dumps(tensor, protocol=4),
}


@pytest.mark.parametrize("long", sorted(LONG))
def test_every_method_works_while_a_long_operation_runs(tmp_path, long):
    tensor = _map()
    readers = _readers(tensor)
    failures = []
    calls = {name: 0 for name in readers}
    done = threading.Event()

    def read():
        while not done.is_set():
            for name, call in readers.items():
                try:
                    if not call():
                        failures.append(f"{name}: wrong result")
                except Exception as error:  # noqa: BLE001 - reported below
                    failures.append(f"{name}: {type(error).__name__}: {error}")
                calls[name] += 1

    threads = [threading.Thread(target=read) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(2):
            LONG[long](tensor, tmp_path / "data.mts")
    finally:
        done.set()
        for thread in threads:
            thread.join()
    assert not failures, failures[:5]
    assert all(count > 0 for count in calls.values())
    if long == "share_memory":
        assert tensor.is_shared()


def test_two_threads_sharing_one_map_share_it_once():
    tensor = _map()
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(tensor.share_memory())) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(result is tensor for result in results)
    assert tensor.is_shared()
    # one segment: both calls gave the same memory
    first = tensor.block(0).values.ctypes.data
    tensor.share_memory()
    assert tensor.block(0).values.ctypes.data == first
