"""Maps on a dask cluster

`blockmap.dask` registers serializers with `distributed` as soon as both
are imported: nothing to call, on the client or the workers. Every array
travels as its own out-of-band frame, on every path (the scheduler's too,
where plain pickle would fall back to protocol 4 and copy), and the frames
are the map's own memory: serializing copies nothing. A worker views the
frames it receives (copying only misaligned ones).
"""

import logging

import numpy as np
from distributed import Client, LocalCluster
from distributed.protocol import deserialize, serialize

import blockmap


def descriptor(seed):
    values = np.random.default_rng(seed).normal(size=(1000, 3, 32))
    block = blockmap.TensorBlock(
        values,
        blockmap.Labels(["system", "atom"], np.array([[seed, a] for a in range(1000)])),
        [blockmap.Labels("xyz", np.array([[0], [1], [2]]))],
        blockmap.Labels.range("n", 32),
    )
    return blockmap.TensorMap(blockmap.Labels.range("_", 1), [block])


def mean_over_atoms(tensor):
    """Runs on a worker: a new map of the mean over samples."""
    block = tensor.block(0)
    values = block.values.mean(axis=0, keepdims=True)
    samples = blockmap.Labels(["system"], np.array([[int(block.samples.values[0, 0])]]))
    new = blockmap.TensorBlock(values, samples, block.components, block.properties)
    return blockmap.TensorMap(tensor.keys, [new])


def main():
    tensor = descriptor(0)
    values = tensor.block(0).values

    # what dask sends: a header and frames viewing the map's memory
    header, frames = serialize(tensor)
    assert header["serializer"] == "dask"  # blockmap's serializer, not pickle
    assert any(np.shares_memory(np.asarray(frame), values) for frame in frames)
    received = deserialize(header, frames)
    assert received == tensor
    assert np.shares_memory(received.block(0).values, values)  # viewed, not copied
    print(f"{len(frames)} frames, {sum(memoryview(f).nbytes for f in frames)} bytes, none copied")

    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    with cluster, Client(cluster) as client:
        maps = [descriptor(seed) for seed in range(4)]
        futures = client.scatter(maps)  # each map to a worker, as frames
        means = client.gather(client.map(mean_over_atoms, futures))
        for tensor, mean in zip(maps, means, strict=True):
            expected = tensor.block(0).values.mean(axis=0, keepdims=True)
            assert np.allclose(mean.block(0).values, expected)
        print(
            f"{len(means)} maps scattered to {len(client.scheduler_info()['workers'])} "
            "workers, reduced there and gathered back"
        )
        print(means[0])


if __name__ == "__main__":  # dask's worker processes import this file
    main()
