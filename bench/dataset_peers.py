"""The layouts that users of neighbouring libraries pick for many small maps,
written and read by their own tools (the peers of ``python -m bench
datasets``):

- ``lmdb``: an LMDB file holding ``pickle.dumps(tensormap, protocol=5)`` of
  each blockmap map under the key ``str(i)``, as fairchem's LMDB datasets
  store pickled samples; read-only opens with fairchem's flags
  (``subdir=False, readonly=True, lock=False, readahead=False,
  meminit=False, max_readers=1``), and a read is
  ``pickle.loads(env.begin().get(key))``, a transaction per read as fairchem
  does.
- ``hdf5``: one HDF5 file (h5py) where each kind of array is one dataset
  concatenated along its first axis, with offsets, as MACE's HDF5 files
  store configurations: the keys of every map, the samples and values of
  every block, and per gradient its samples and values; ``map_blocks``,
  ``block_rows`` and ``gradients/<p>/block_rows`` hold the offsets.
  Properties and components, the same for every block, are stored once. A
  read slices each dataset once for the whole map and builds a blockmap
  TensorMap from the slices.
- ``diskdataset``: metatrain's own ``DiskDatasetWriter`` and
  ``DiskDataset``: a zip with ``<i>/system.mta`` (a metatomic ``System``:
  the map's atom types, random positions, a cubic cell) and
  ``<i>/energy.mts`` (the map, as a metatensor-torch TensorMap) per sample;
  a read is ``dataset[i]``, the named tuple of system, energy and system
  index that metatrain's training loop gets.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["PEERS", "as_blockmap", "create", "imports", "inputs", "open_peer", "system_of"]

#: The layouts of this module.
PEERS = ("lmdb", "hdf5", "diskdataset")

#: Bytes the LMDB map may grow to (address space only: the file grows as written).
LMDB_MAP_SIZE = 1 << 40
#: Side of the cubic cell of the DiskDataset's systems, in Angstrom.
CELL = 20.0


# -- LMDB -------------------------------------------------------------------


def _lmdb_create(path: Path, maps: list[Any], append: bool) -> None:
    import lmdb

    env = lmdb.open(str(path), map_size=LMDB_MAP_SIZE, subdir=False, meminit=False)
    try:
        with env.begin(write=True) as txn:
            start = int(txn.get(b"length") or b"0") if append else 0
            for i, tensor in enumerate(maps, start=start):
                txn.put(f"{i}".encode("ascii"), pickle.dumps(tensor, protocol=5))
            txn.put(b"length", str(start + len(maps)).encode("ascii"))
        env.sync(True)
    finally:
        env.close()


class _Lmdb:
    def __init__(self, path: Path) -> None:
        import lmdb

        self.env = lmdb.open(
            str(path),
            subdir=False,
            readonly=True,
            lock=False,
            readahead=False,
            meminit=False,
            max_readers=1,
        )
        with self.env.begin() as txn:
            self.count = int(txn.get(b"length"))

    def read(self, i: int) -> Any:
        return pickle.loads(self.env.begin().get(f"{i}".encode("ascii")))

    def close(self) -> None:
        self.env.close()


# -- HDF5 -------------------------------------------------------------------


def _labels_arrays(labels: Any) -> tuple[list[str], np.ndarray]:
    return list(labels.names), np.ascontiguousarray(labels.values, dtype=np.int32)


def _same(first: Any, other: Any, what: str) -> None:
    if first != other:
        raise ValueError(f"hdf5 layout: every block must have the same {what}")


def _hdf5_create(path: Path, maps: list[Any]) -> None:
    import h5py

    first = maps[0].block(0)
    properties = first.properties
    components = list(first.components)
    parameters = list(first.gradients_list())
    gradient_labels = {
        p: (list(first.gradient(p).components), first.gradient(p).properties) for p in parameters
    }
    keys, map_blocks = [], [0]
    samples, values, rows = [], [], [0]
    gradients: dict[str, dict[str, list[Any]]] = {
        p: {"samples": [], "values": [], "rows": [0]} for p in parameters
    }
    key_names = list(maps[0].keys.names)
    sample_names = list(first.samples.names)
    gradient_names = {p: list(first.gradient(p).samples.names) for p in parameters}
    for tensor in maps:
        _same(key_names, list(tensor.keys.names), "key names")
        keys.append(_labels_arrays(tensor.keys)[1])
        map_blocks.append(map_blocks[-1] + len(tensor))
        for block in tensor.blocks():
            _same(properties, block.properties, "properties")
            _same(components, list(block.components), "components")
            _same(parameters, list(block.gradients_list()), "gradients")
            _same(sample_names, list(block.samples.names), "sample names")
            samples.append(_labels_arrays(block.samples)[1])
            values.append(np.asarray(block.values))
            rows.append(rows[-1] + len(values[-1]))
            for p in parameters:
                gradient = block.gradient(p)
                _same(gradient_labels[p][0], list(gradient.components), "gradient components")
                _same(gradient_labels[p][1], gradient.properties, "gradient properties")
                of = gradients[p]
                of["samples"].append(_labels_arrays(gradient.samples)[1])
                of["values"].append(np.asarray(gradient.values))
                of["rows"].append(of["rows"][-1] + len(of["values"][-1]))

    def labels(group: Any, name: str, value: Any) -> None:
        names, array = _labels_arrays(value)
        group.create_dataset(name, data=array).attrs["names"] = names

    with h5py.File(path, "w") as out:
        out.create_dataset("keys", data=np.concatenate(keys)).attrs["names"] = key_names
        out.create_dataset("map_blocks", data=np.array(map_blocks, dtype=np.int64))
        out.create_dataset("samples", data=np.concatenate(samples)).attrs["names"] = sample_names
        out.create_dataset("values", data=np.concatenate(values))
        out.create_dataset("block_rows", data=np.array(rows, dtype=np.int64))
        labels(out, "properties", properties)
        for c, component in enumerate(components):
            labels(out, f"component_{c}", component)
        out.attrs["components"] = len(components)
        out.attrs["gradients"] = parameters
        for p in parameters:
            group = out.create_group(f"gradients/{p}")
            of = gradients[p]
            group.create_dataset("samples", data=np.concatenate(of["samples"])).attrs["names"] = (
                gradient_names[p]
            )
            group.create_dataset("values", data=np.concatenate(of["values"]))
            group.create_dataset("block_rows", data=np.array(of["rows"], dtype=np.int64))
            labels(group, "properties", gradient_labels[p][1])
            for c, component in enumerate(gradient_labels[p][0]):
                labels(group, f"component_{c}", component)
            group.attrs["components"] = len(gradient_labels[p][0])


def _names(dataset: Any) -> list[str]:
    return [str(name) for name in dataset.attrs["names"]]


class _Hdf5:
    """An HDF5 file of :func:`_hdf5_create`, open for reading: the offsets
    in memory, one slice per dataset for a map."""

    def __init__(self, path: Path) -> None:
        import h5py

        import blockmap

        self.file = h5py.File(path, "r")

        def labels(group: Any, name: str) -> Any:
            return blockmap.Labels(_names(group[name]), group[name][:])

        def part(group: Any) -> dict[str, Any]:
            return {
                "samples": group["samples"],
                "sample_names": _names(group["samples"]),
                "values": group["values"],
                "rows": group["block_rows"][:],
                "properties": labels(group, "properties"),
                "components": [
                    labels(group, f"component_{c}") for c in range(int(group.attrs["components"]))
                ],
            }

        self.keys = self.file["keys"]
        self.key_names = _names(self.keys)
        self.map_blocks = self.file["map_blocks"][:]
        self.count = len(self.map_blocks) - 1
        self.main = part(self.file)
        self.gradients = {
            str(p): part(self.file[f"gradients/{p}"]) for p in self.file.attrs["gradients"]
        }

    @staticmethod
    def _blocks(part: dict[str, Any], b0: int, b1: int) -> list[tuple[Any, Any]]:
        rows = part["rows"]
        first, last = int(rows[b0]), int(rows[b1])
        samples, values = part["samples"][first:last], part["values"][first:last]
        return [
            (
                samples[rows[b] - first : rows[b + 1] - first],
                values[rows[b] - first : rows[b + 1] - first],
            )
            for b in range(b0, b1)
        ]

    def read(self, i: int) -> Any:
        import blockmap

        b0, b1 = int(self.map_blocks[i]), int(self.map_blocks[i + 1])
        keys = blockmap.Labels(self.key_names, self.keys[b0:b1])
        main = self.main
        gradients = {p: self._blocks(part, b0, b1) for p, part in self.gradients.items()}
        blocks = []
        for j, (samples, values) in enumerate(self._blocks(main, b0, b1)):
            block = blockmap.TensorBlock(
                values,
                blockmap.Labels(main["sample_names"], samples),
                main["components"],
                main["properties"],
            )
            for p, part in self.gradients.items():
                g_samples, g_values = gradients[p][j]
                block.add_gradient(
                    p,
                    blockmap.TensorBlock(
                        g_values,
                        blockmap.Labels(part["sample_names"], g_samples),
                        part["components"],
                        part["properties"],
                    ),
                )
            blocks.append(block)
        return blockmap.TensorMap(keys, blocks)


# -- metatrain's DiskDataset ---------------------------------------------------


def system_of(tensor: Any, rng: np.random.Generator) -> Any:
    """A metatomic ``System`` for a QM9-like map: atom types from its blocks'
    keys (``center_type``) and samples (``atom``), random positions in a
    cubic cell."""
    import torch
    from metatomic.torch import System

    n_atoms = sum(len(block.samples) for block in tensor.blocks())
    types = np.zeros(n_atoms, dtype=np.int32)
    for (center,), block in zip(tensor.keys.values, tensor.blocks(), strict=True):
        types[np.asarray(block.samples.column("atom"))] = center
    return System(
        types=torch.from_numpy(types),
        positions=torch.from_numpy(rng.uniform(0.0, CELL, size=(n_atoms, 3))),
        cell=torch.eye(3, dtype=torch.float64) * CELL,
        pbc=torch.ones(3, dtype=torch.bool),
    )


def _diskdataset_create(path: Path, samples: list[tuple[Any, Any]], append: bool) -> None:
    from metatrain.utils.data.writers import DiskDatasetWriter

    writer = DiskDatasetWriter(path, append=append)
    try:
        for system, energy in samples:
            writer.write([system], {"energy": energy})
    finally:
        writer.finish()


class _DiskDataset:
    def __init__(self, path: Path) -> None:
        from metatrain.utils.data import DiskDataset

        self.dataset = DiskDataset(path)
        self.count = len(self.dataset)

    def read(self, i: int) -> Any:
        return self.dataset[i]


# -- entry points ---------------------------------------------------------------


def inputs(layout: str, maps: list[Any]) -> list[Any]:
    """What ``layout``'s writer takes, made from blockmap maps (not timed:
    its users hold their data in that form): the maps themselves, or for
    ``diskdataset`` (system, metatensor-torch map) pairs."""
    if layout != "diskdataset":
        return maps
    rng = np.random.default_rng(0)
    return [(system_of(tensor, rng), tensor.to_metatensor_torch()) for tensor in maps]


def create(layout: str, path: Path, items: list[Any], append: bool = False) -> None:
    """Write ``items`` (of :func:`inputs`) in ``layout`` at ``path`` (after
    its entries when ``append``)."""
    if layout == "lmdb":
        _lmdb_create(path, items, append)
    elif layout == "hdf5":
        if append:
            raise ValueError("the hdf5 layout is written once")
        _hdf5_create(path, items)
    elif layout == "diskdataset":
        _diskdataset_create(path, items, append)
    else:
        raise ValueError(f"unknown layout {layout!r}")


def open_peer(layout: str, path: Path) -> Any:
    """``layout`` at ``path`` open for reading: ``.count`` and ``.read(i)``."""
    return {"lmdb": _Lmdb, "hdf5": _Hdf5, "diskdataset": _DiskDataset}[layout](path)


def as_blockmap(layout: str, item: Any) -> Any:
    """What ``read`` returned, as a blockmap map (for checks)."""
    import blockmap

    if layout == "diskdataset":
        return blockmap.from_metatensor_torch(item.energy)
    return item


def imports(layout: str) -> None:
    """Import what ``layout`` reads with (before any clock starts)."""
    if layout == "lmdb":
        import lmdb  # noqa: F401
    elif layout == "hdf5":
        import h5py  # noqa: F401
    else:
        import metatrain.utils.data  # noqa: F401
