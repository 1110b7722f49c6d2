"""A user's script over blockmap's public API, for ``mypy --strict``
(tests/python/typing/test_mypy.py checks it, then runs it in a temporary
directory). Not a test module: pytest does not collect it."""

import functools
import pickle

import numpy as np
import numpy.typing as npt
import torch

import blockmap
import blockmap.learn
import blockmap.metatensor
import blockmap.operations


def make_map(seed: int, n_samples: int = 4) -> blockmap.TensorMap:
    rng = np.random.default_rng(seed)
    values: npt.NDArray[np.float64] = rng.normal(size=(n_samples, 3, 2))
    block = blockmap.TensorBlock(
        values=values,
        samples=blockmap.Labels(
            ["system", "atom"], np.array([[seed, a] for a in range(n_samples)])
        ),
        components=[blockmap.Labels("o3_mu", np.array([[-1], [0], [1]]))],
        properties=blockmap.Labels.range("n", 2),
    )
    keys = blockmap.Labels(["o3_lambda"], np.array([[1]]))
    return blockmap.TensorMap(keys, [block])


def labels_api() -> None:
    labels = blockmap.Labels(["a", "b"], np.array([[0, 1], [1, 2]]))
    column = labels.column("a")
    entry: blockmap.LabelsEntry = labels[0]
    position: int | None = labels.position(entry)
    assert position == 0
    union, first, second = labels.union_and_mapping(labels)
    assert len(union) == 2 and first.dtype == np.int64 and second.shape == (2,)
    selected: npt.NDArray[np.uint64] = labels.select(blockmap.Labels(["a"], np.array([[1]])))
    assert selected.tolist() == [1] and len(column) == 2
    # torch-backed Labels give int32 tensors
    values = labels.to(arrays="torch").values
    assert isinstance(values, torch.Tensor) and values.dtype == torch.int32


def tensor_api(tmp: str) -> None:
    tensor = make_map(0)
    block: blockmap.TensorBlock = tensor.block(o3_lambda=1)
    values = block.values
    assert isinstance(values, np.ndarray)
    total: float = float(values.sum())
    assert np.isfinite(total)

    blockmap.save(f"{tmp}/map.mts", tensor)
    loaded: blockmap.TensorMap = blockmap.load(f"{tmp}/map.mts", mmap=True)
    same: blockmap.TensorMap = blockmap.load_buffer(blockmap.save_buffer(tensor))
    copied: blockmap.TensorMap = pickle.loads(pickle.dumps(tensor, protocol=5))

    # metatensor-operations' functions, served by blockmap's __getattr__
    equal: bool = blockmap.equal(loaded, same)
    close: bool = blockmap.allclose(loaded, copied, rtol=1e-12)
    assert equal and close
    summed: blockmap.TensorMap = blockmap.sum_over_samples(tensor, "atom")
    assert summed.block(0).values.shape == (1, 3, 2)
    sliced = blockmap.slice(tensor, "samples", blockmap.Labels(["atom"], np.array([[0]])))
    assert len(sliced.block(0).samples) == 1
    with blockmap.unsafe_disable_checks():
        assert not blockmap.checks_enabled()
    assert blockmap.operations.equal_metadata(tensor, same, check=["samples"])

    # join / split, and a dataset of maps
    joined = blockmap.join([make_map(1), make_map(2)], axis="samples")
    parts: list[blockmap.TensorMap] = blockmap.split(joined, "samples", [[0, 1], [2]])
    assert len(parts) == 2
    with blockmap.DatasetWriter(f"{tmp}/train.data") as writer:
        for seed in range(3):
            writer.write(make_map(seed))
    dataset = blockmap.Dataset(f"{tmp}/train.data")
    first: blockmap.TensorMap = dataset.load(0, keys=keys_of(tensor))
    second: blockmap.TensorMap = dataset[1]
    some: list[blockmap.TensorMap] = dataset[1:]
    assert second.block(0).samples.column("system").tolist() == [1] * 4 and len(some) == 2
    batch = functools.partial(blockmap.join, axis="samples")(list(dataset))
    assert len(first) == 1 and len(batch.block(0).samples) == 12

    # torch-backed maps: values are tensors
    torch_map = tensor.to(arrays="torch", dtype=torch.float32)
    torch_values = torch_map.block(0).values
    assert isinstance(torch_values, torch.Tensor) and torch_values.dtype == torch.float32
    back = blockmap.from_metatensor_torch(torch_map.to_metatensor_torch())
    assert isinstance(back, blockmap.TensorMap) and back.keys == tensor.keys

    core = blockmap.metatensor.from_metatensor(tensor.to_metatensor())
    assert isinstance(core, blockmap.TensorMap)


def keys_of(tensor: blockmap.TensorMap) -> blockmap.Labels:
    return tensor.keys


def learn_api() -> None:
    """blockmap.learn: datasets, a loader and an nn module (nn.pyi)."""
    maps = [make_map(seed).to(arrays="torch") for seed in range(4)]
    dataset = blockmap.learn.Dataset(descriptor=maps)
    loader = blockmap.learn.DataLoader(dataset, batch_size=2)
    model: blockmap.learn.nn.Module = blockmap.learn.nn.Linear(
        maps[0].keys, 2, 1, dtype=torch.float64
    )
    for batch in loader:
        output: blockmap.TensorMap = model(batch.descriptor)
        assert output.block(0).values.shape == (8, 3, 1)


if __name__ == "__main__":
    import sys

    labels_api()
    tensor_api(sys.argv[1])
    learn_api()
