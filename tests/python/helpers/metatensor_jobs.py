"""Functions that child processes run on metatensor-core's objects (importable
by name, so that spawn and forkserver workers and dask workers find them)."""

import numpy as np


def map_of(seed=0, n_blocks=3, n_samples=2000, n_properties=64):
    """A metatensor-core map of a few MB with gradients and info."""
    import metatensor

    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(n_blocks):
        samples = metatensor.Labels(
            ["system", "atom"], np.array([[s // 10, s % 10] for s in range(n_samples)], np.int32)
        )
        block = metatensor.TensorBlock(
            rng.random((n_samples, 3, n_properties)),
            samples,
            [metatensor.Labels.range("xyz", 3)],
            metatensor.Labels.range("n", n_properties),
        )
        gradient = metatensor.TensorBlock(
            rng.random((n_samples, 3, n_properties)),
            metatensor.Labels(
                ["sample", "system", "atom"],
                np.array([[s, s // 10, s % 10] for s in range(n_samples)], np.int32),
            ),
            [metatensor.Labels.range("xyz", 3)],
            metatensor.Labels.range("n", n_properties),
        )
        block.add_gradient("positions", gradient)
        blocks.append(block)
    keys = metatensor.Labels(["center_type"], np.array([[i] for i in range(n_blocks)], np.int32))
    tensor = metatensor.TensorMap(keys, blocks)
    tensor.set_info("unit", "eV")
    return tensor


def describe(tensor):
    """What the receiving process got: its type, whether it was registered,
    and a checksum of the values."""
    import blockmap.metatensor

    return (
        f"{type(tensor).__module__}.{type(tensor).__name__}",
        blockmap.metatensor.is_registered(),
        float(sum(block.values.sum() for block in tensor.blocks())),
    )


def doubled_metatensor(tensor):
    """A new metatensor-core map with every value doubled."""
    import metatensor

    blocks = []
    for block in tensor.blocks():
        new = metatensor.TensorBlock(
            block.values * 2, block.samples, block.components, block.properties
        )
        blocks.append(new)
    return metatensor.TensorMap(tensor.keys, blocks)


def write_first_value(queue, done):
    """Receive a shared map, write into it, report its type."""
    tensor = queue.get()
    tensor.block(0).values[0, 0, 0] = 4321.0
    done.put(f"{type(tensor).__module__}.{type(tensor).__name__}")
