"""A dataset file for a torch DataLoader

`blockmap.DatasetWriter` writes many maps into one file; `blockmap.Dataset`
maps that file and reads an entry for the cost of its metadata: the arrays
of `ds[i]` view the mapping. A `Dataset` is a map-style torch dataset as it
is (`len` and `__getitem__`) and pickles as a reference, so spawned
DataLoader workers open the file themselves instead of receiving its data.
In a worker, `blockmap.join` writes a batch straight into shared memory
when it holds at least 256 KiB: the batch reaches the training process as a
file descriptor, not through the pipe.
"""

import functools

import numpy as np
import torch

import blockmap


def structure(i, rng):
    """A map of one structure: per-atom descriptors, 20 to 40 atoms."""
    n_atoms = int(rng.integers(20, 41))
    values = rng.normal(size=(n_atoms, 3, 128))
    samples = blockmap.Labels(["system", "atom"], np.array([[i, a] for a in range(n_atoms)]))
    block = blockmap.TensorBlock(
        values,
        samples,
        [blockmap.Labels("xyz", np.array([[0], [1], [2]]))],
        blockmap.Labels.range("n", 128),
    )
    return blockmap.TensorMap(blockmap.Labels.range("_", 1), [block])


def main():
    rng = np.random.default_rng(0)
    # overwrite=True: run again, the example replaces its own file
    with blockmap.DatasetWriter("train.bmdata", overwrite=True) as writer:
        for i in range(64):
            writer.write(structure(i, rng))

    ds = blockmap.Dataset("train.bmdata")
    first, again = ds[0], ds[0]
    # two reads of an entry view the same pages of the mapping: nothing copied
    assert np.shares_memory(first.block(0).values, again.block(0).values)
    assert not first.block(0).values.flags.writeable  # the file is mapped read-only
    print(f"{len(ds)} maps in train.bmdata; ds[0]: {first.block(0).values.shape}")

    loader = torch.utils.data.DataLoader(
        ds,
        batch_size=8,
        num_workers=2,
        multiprocessing_context="spawn",  # the dataset travels as a reference
        collate_fn=functools.partial(blockmap.join, axis="samples"),
    )
    n_samples = 0
    for number, batch in enumerate(loader):
        # joined in a worker, straight into a shared-memory segment
        assert batch.is_shared()
        expected = blockmap.join(ds[number * 8 : (number + 1) * 8], axis="samples")
        assert batch == expected
        n_samples += len(batch.block(0).samples)
    print(
        f"{len(loader)} batches from 2 spawned workers, {n_samples} atoms, "
        "each batch received in shared memory"
    )


if __name__ == "__main__":  # spawned workers import this file
    main()
