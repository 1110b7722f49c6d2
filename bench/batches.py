"""The data of the DataLoader benchmark: QM9-like structures and W in pieces.

- :func:`structure_arrays`: one small molecule as metatrain sees it, an
  energy target (one value, samples ``["system"]``) with its ``"positions"``
  gradient (``(n_atoms, 3, 1)``, samples ``["sample", "system", "atom"]``,
  components ``[["xyz"]]``); QM9's molecules have 3 to 29 atoms, about 18
  on average.
- :func:`structure_maps`: many of them as blockmap maps, ``system`` being
  each structure's index (so that a batch joins along samples).
- :func:`w_pieces`: W split along samples into maps of whole systems, so
  that a batch of them joins back into a map the size of W.

The other libraries get the same arrays: :func:`to_library` turns blockmap
maps into torch-backed ones, metatensor-torch maps, or plain lists of torch
tensors (values, samples, gradient values, gradient samples, block after
block).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .workload import BlockArrays, GradientArrays, LabelsArrays, WorkloadArrays, build_blockmap

if TYPE_CHECKING:
    import blockmap

__all__ = [
    "MEAN_ATOMS",
    "QM9_TYPES",
    "qm9_maps",
    "structure_arrays",
    "structure_maps",
    "to_library",
    "w_pieces",
]

#: Atoms per QM9-like structure: drawn uniformly from 9 to 27 (18 on average).
MEAN_ATOMS = 18


def structure_arrays(index: int, n_atoms: int, rng: np.random.Generator) -> WorkloadArrays:
    """One structure's energy with its position gradient, as plain arrays."""
    xyz = LabelsArrays(["xyz"], np.arange(3, dtype=np.int32).reshape(3, 1))
    gradient_samples = np.zeros((n_atoms, 3), dtype=np.int32)
    gradient_samples[:, 1] = index
    gradient_samples[:, 2] = np.arange(n_atoms)
    gradient = GradientArrays(
        parameter="positions",
        values=rng.normal(size=(n_atoms, 3, 1)),
        samples=LabelsArrays(["sample", "system", "atom"], gradient_samples),
        components=[xyz],
    )
    block = BlockArrays(
        values=rng.normal(size=(1, 1)),
        samples=LabelsArrays(["system"], np.array([[index]], dtype=np.int32)),
        components=[],
        properties=LabelsArrays(["energy"], np.zeros((1, 1), dtype=np.int32)),
        gradients=[gradient],
    )
    return WorkloadArrays(LabelsArrays(["_"], np.zeros((1, 1), dtype=np.int32)), [block])


def structure_maps(count: int, seed: int = 0) -> list[blockmap.TensorMap]:
    """``count`` QM9-like structures as blockmap maps (numpy-backed)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(MEAN_ATOMS - 9, MEAN_ATOMS + 10, size=count)
    return [build_blockmap(structure_arrays(i, int(n), rng)) for i, n in enumerate(sizes)]


def w_pieces(tensor: blockmap.TensorMap, count: int) -> list[blockmap.TensorMap]:
    """``tensor`` (W) split along samples into ``count`` maps of whole
    systems: joining them all along samples gives W back."""
    import blockmap

    systems = np.unique(tensor.block(0).samples.column("system"))
    groups = np.array_split(systems, count)
    selections = [
        blockmap.Labels(["system"], group.reshape(-1, 1).astype(np.int32)) for group in groups
    ]
    pieces: list[blockmap.TensorMap] = blockmap.split(tensor, "samples", selections)
    return pieces


def _flat_tensors(tensor: blockmap.TensorMap) -> list[Any]:
    """A numpy-backed map as the plain tensors holding the same data: per
    block, values (the same memory) and samples (a copy: labels are
    read-only), then each gradient's values and samples."""
    import torch

    flat = []
    for block in tensor.blocks():
        parts = [block] + [block.gradient(p) for p in block.gradients_list()]
        for part in parts:
            flat += [torch.from_numpy(part.values), torch.from_numpy(part.samples.values.copy())]
    return flat


def to_library(maps: list[blockmap.TensorMap], library: str) -> list[Any]:
    """The same data for ``library``: ``"blockmap"`` (torch-backed maps),
    ``"metatensor-torch"`` or ``"torch"`` (lists of tensors)."""
    if library == "blockmap":
        return [tensor.to(arrays="torch") for tensor in maps]
    if library == "metatensor-torch":
        return [tensor.to_metatensor_torch() for tensor in maps]
    if library == "torch":
        return [_flat_tensors(tensor) for tensor in maps]
    raise ValueError(f"unknown library {library!r}")


#: QM9's elements: H, C, N, O, F
QM9_TYPES = (1, 6, 7, 8, 9)


def qm9_maps(count: int, start: int = 0, seed: int = 0) -> list[blockmap.TensorMap]:
    """``count`` QM9-like structures with a few blocks each (numpy-backed),
    ``system`` numbered from ``start``: per-atom energies keyed by the
    atoms' ``center_type`` (the types a molecule has: 3 or 4 blocks), with
    the forces as their ``"positions"`` gradient (each atom's row, with the
    ``xyz`` component)."""
    import blockmap

    rng = np.random.default_rng(seed + start)
    xyz = blockmap.Labels(["xyz"], np.arange(3, dtype=np.int32).reshape(3, 1))
    energy = blockmap.Labels(["energy"], np.zeros((1, 1), dtype=np.int32))
    maps = []
    for system in range(start, start + count):
        n_atoms = int(rng.integers(MEAN_ATOMS - 9, MEAN_ATOMS + 10))
        # hydrogens about half of the atoms, then carbons, and one N or O or F
        types = rng.choice(QM9_TYPES, size=n_atoms, p=(0.5, 0.3, 0.07, 0.1, 0.03))
        present = sorted(set(types.tolist()))
        blocks = []
        for center in present:
            atoms = np.flatnonzero(types == center).astype(np.int32)
            samples = np.stack([np.full_like(atoms, system), atoms], axis=1)
            block = blockmap.TensorBlock(
                rng.normal(size=(len(atoms), 1)),
                blockmap.Labels(["system", "atom"], samples),
                [],
                energy,
            )
            rows = np.arange(len(atoms), dtype=np.int32)
            gradient_samples = np.stack([rows, np.full_like(atoms, system), atoms], axis=1)
            block.add_gradient(
                "positions",
                blockmap.TensorBlock(
                    rng.normal(size=(len(atoms), 3, 1)),
                    blockmap.Labels(["sample", "system", "atom"], gradient_samples),
                    [xyz],
                    energy,
                ),
            )
            blocks.append(block)
        keys = blockmap.Labels(["center_type"], np.array(present, dtype=np.int32).reshape(-1, 1))
        maps.append(blockmap.TensorMap(keys, blocks))
    return maps
