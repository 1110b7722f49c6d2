"""Maps across a multiprocessing Pool

Maps pickle, so they go through `multiprocessing` like any argument or
result. What travels depends on the map:

- a map in shared memory (`tensor.share_memory()`, once) is sent as its
  metadata and a file descriptor: the worker maps the same memory, so what
  it writes, the caller sees;
- a map holding at least 256 KiB of values is moved into a new shared-memory
  segment when it is sent (one copy, `blockmap.get_auto_share_threshold()`),
  and results come back the same way;
- smaller maps travel inside the message, as the `.mts` archive.

With pickle protocol 5 and a `buffer_callback`, in one process, a map is
rebuilt as views of its own memory. The example checks each of these by
address or by a write seen on the other side.
"""

import multiprocessing
import pickle

import numpy as np

import blockmap


def descriptor(seed, n_samples=2000, n_properties=64):
    """A one-block map of ``n_samples * 3 * n_properties`` float64 values."""
    values = np.random.default_rng(seed).normal(size=(n_samples, 3, n_properties))
    block = blockmap.TensorBlock(
        values,
        blockmap.Labels(["system", "atom"], np.array([[seed, a] for a in range(n_samples)])),
        [blockmap.Labels("xyz", np.array([[0], [1], [2]]))],
        blockmap.Labels.range("n", n_properties),
    )
    return blockmap.TensorMap(blockmap.Labels.range("_", 1), [block])


def double_in_place(tensor):
    """Runs in a worker: multiplies the values in place."""
    values = tensor.block(0).values
    values *= 2
    return tensor.is_shared(), float(values.sum())


def squared(tensor):
    """Runs in a worker: a new map, larger than the threshold."""
    block = tensor.block(0)
    new = blockmap.TensorBlock(block.values**2, block.samples, block.components, block.properties)
    return blockmap.TensorMap(tensor.keys, [new])


def main():
    maps = [descriptor(seed) for seed in range(4)]
    print(f"{len(maps)} maps of {maps[0].block(0).values.nbytes / 1e6:.1f} MB of values")

    # pickle protocol 5, out of band: the rebuilt map views the same memory
    buffers = []
    data = pickle.dumps(maps[0], protocol=5, buffer_callback=buffers.append)
    same = pickle.loads(data, buffers=buffers)
    assert np.shares_memory(same.block(0).values, maps[0].block(0).values)
    print(f"pickle p5 out of band: {len(data)} bytes of metadata, values shared")

    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        # 1. shared once: workers write into the caller's memory
        shared = descriptor(10).share_memory()
        before = shared.block(0).values.copy()
        is_shared, total = pool.apply(double_in_place, (shared,))
        assert is_shared and np.array_equal(shared.block(0).values, 2 * before)
        assert np.isclose(total, shared.block(0).values.sum())
        print("share_memory(): the worker's in-place write is seen here")

        # 2. above the threshold: moved into shared memory as they are sent,
        # and the results come back mapped, not through the pipe
        results = pool.map(squared, maps)
        for tensor, result in zip(maps, results, strict=True):
            assert result.is_shared()
            assert np.array_equal(result.block(0).values, tensor.block(0).values ** 2)
        assert not maps[0].is_shared()  # the caller's maps are left as they were
        print(f"pool.map: {len(results)} results received in shared memory")

        # 3. below the threshold: pickled into the message, an independent copy
        small = descriptor(20, n_samples=10)
        result = pool.apply(squared, (small,))
        assert not result.is_shared()
        assert np.array_equal(result.block(0).values, small.block(0).values ** 2)
        print("a small map travels inside the message")


if __name__ == "__main__":  # spawned workers import this file: run only here
    main()
