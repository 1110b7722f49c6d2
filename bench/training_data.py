"""The data of the training family (``python -m bench training``): Cu/Ni
clusters with ASE's EMT energies and forces, written in the three layouts
metatrain's ``mtt train`` reads them from.

- ``data.xyz``: the clusters (extended XYZ, energies in ``info["energy"]``,
  forces in ``arrays["forces"]``), read back by metatrain's own readers;
- ``data.zip``: metatrain's ``DiskDataset``, written with its
  ``DiskDatasetWriter`` (the energy's position gradients relabelled from the
  ASE reader's ``[sample, system, atom]`` to the ``[sample, atom]`` that
  ``DiskDataset`` expects);
- ``data_memmap/``: metatrain's ``MemmapDataset`` (float32 on disk), written
  with its ``MemmapWriter`` (each map relabelled to system 0 first, since the
  writer selects by batch-local ids);
- ``data.bmdata``: a blockmap dataset, converted from the zip by
  ``blockmap.metatrain.convert`` when that module is available.

Run in a fresh process by the family (``python -m bench training-data``).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "BLOCKMAP_UNAVAILABLE",
    "blockmap_metatrain",
    "generate",
    "gradients_as_diskdataset",
    "read_xyz",
    "write_all",
]

#: what the report says when the blockmap side cannot run
BLOCKMAP_UNAVAILABLE = "blockmap.metatrain is not available"

XYZ, ZIP, MEMMAP, BMDATA = "data.xyz", "data.zip", "data_memmap", "data.bmdata"


def blockmap_metatrain() -> Any:
    """The ``blockmap.metatrain`` module, or None when it is not there."""
    try:
        import blockmap.metatrain as module  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    return module


def generate(count: int, path: Path, seed: int = 0) -> int:
    """Write ``count`` random Cu/Ni clusters (8 to 29 atoms, at least 2.2 A
    apart in a 7 A box, not periodic) with EMT energies and forces to the
    extended XYZ file ``path``; return the number of atoms."""
    import ase.io
    from ase import Atoms
    from ase.calculators.emt import EMT

    rng = np.random.default_rng(seed)
    frames = []
    for _ in range(count):
        n = int(rng.integers(8, 30))
        positions: list[np.ndarray] = []
        while len(positions) < n:
            point = rng.uniform(0, 7.0, 3)
            if all(np.linalg.norm(point - other) > 2.2 for other in positions):
                positions.append(point)
        symbols = rng.choice(["Cu", "Ni"], size=n)
        atoms = Atoms(symbols=list(symbols), positions=np.array(positions), pbc=False)
        atoms.calc = EMT()
        energy = atoms.get_potential_energy()
        forces = atoms.get_forces()
        atoms.calc = None
        atoms.info["energy"] = energy
        atoms.arrays["forces"] = forces
        frames.append(atoms)
    ase.io.write(path, frames, format="extxyz")
    return sum(len(atoms) for atoms in frames)


def read_xyz(path: Path) -> tuple[list[Any], dict[str, list[Any]]]:
    """The systems and targets of ``path``, read by metatrain's own readers."""
    from metatrain.utils.data import read_systems, read_targets
    from metatrain.utils.omegaconf import expand_dataset_config
    from omegaconf import OmegaConf

    conf = expand_dataset_config(
        OmegaConf.create(
            {
                "systems": {"read_from": str(path), "length_unit": "angstrom"},
                "targets": {"energy": {"key": "energy", "unit": "eV", "forces": {"key": "forces"}}},
            }
        )
    )[0]
    systems = read_systems(conf["systems"]["read_from"], reader=conf["systems"]["reader"])
    targets, _ = read_targets(conf["targets"])
    return systems, targets


def gradients_as_diskdataset(tensor: Any) -> Any:
    """``tensor`` with position-gradient samples ``[sample, atom]`` (metatrain's
    ASE reader gives ``[sample, system, atom]``, which DiskDataset refuses)."""
    from metatensor.torch import Labels, TensorBlock, TensorMap

    blocks = []
    for block in tensor.blocks():
        new = TensorBlock(block.values, block.samples, block.components, block.properties)
        for parameter in block.gradients_list():
            gradient = block.gradient(parameter)
            samples = gradient.samples
            if samples.names == ["sample", "system", "atom"]:
                samples = Labels(["sample", "atom"], samples.values[:, [0, 2]].contiguous())
            new.add_gradient(
                parameter,
                TensorBlock(gradient.values, samples, gradient.components, gradient.properties),
            )
        blocks.append(new)
    return TensorMap(tensor.keys, blocks)


def _system_zero(tensor: Any) -> Any:
    """``tensor`` with its ``system`` sample column set to 0 (MemmapWriter)."""
    from metatensor.torch import Labels, TensorBlock, TensorMap

    blocks = []
    for block in tensor.blocks():
        samples = block.samples.values.clone()
        samples[:, block.samples.names.index("system")] = 0
        new = TensorBlock(
            block.values, Labels(block.samples.names, samples), block.components, block.properties
        )
        for parameter in block.gradients_list():
            new.add_gradient(parameter, block.gradient(parameter).copy())
        blocks.append(new)
    return TensorMap(tensor.keys, blocks)


def write_all(count: int, folder: Path) -> dict[str, Any]:
    """Generate ``count`` clusters into ``folder`` and write every layout;
    what was written, with the seconds each step took."""
    from metatrain.utils.data.writers import DiskDatasetWriter, MemmapWriter

    folder.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"structures": count}
    start = time.perf_counter()
    record["atoms"] = generate(count, folder / XYZ)
    record["generate_s"] = time.perf_counter() - start

    systems, targets = read_xyz(folder / XYZ)
    start = time.perf_counter()
    zip_path = folder / ZIP
    zip_path.unlink(missing_ok=True)
    writer = DiskDatasetWriter(str(zip_path))
    for i, system in enumerate(systems):
        writer.write([system], {n: gradients_as_diskdataset(targets[n][i]) for n in targets})
    writer.finish()
    record["zip_bytes"] = zip_path.stat().st_size
    record["zip_s"] = time.perf_counter() - start

    start = time.perf_counter()
    memmap = folder / MEMMAP
    shutil.rmtree(memmap, ignore_errors=True)
    memmap_writer = MemmapWriter(str(memmap))
    for i, system in enumerate(systems):
        memmap_writer.write(
            [system],
            {n: _system_zero(gradients_as_diskdataset(targets[n][i])) for n in targets},
        )
    memmap_writer.finish()
    record["memmap_bytes"] = sum(entry.stat().st_size for entry in memmap.iterdir())
    record["memmap_s"] = time.perf_counter() - start

    record.update(convert_to_blockmap(zip_path, folder / BMDATA))
    return record


def convert_to_blockmap(zip_path: Path, dest: Path) -> dict[str, Any]:
    """The blockmap dataset, converted from metatrain's zip by blockmap's own
    converter (``blockmap_error`` when it cannot be)."""
    module = blockmap_metatrain()
    if module is None:
        return {"blockmap_error": BLOCKMAP_UNAVAILABLE}
    dest.unlink(missing_ok=True)
    start = time.perf_counter()
    module.convert(zip_path, dest)
    return {"bmdata_bytes": dest.stat().st_size, "bmdata_s": time.perf_counter() - start}


def main(count: int, folder: Path) -> int:
    """``python -m bench training-data``: print the record as JSON."""
    print(json.dumps(write_all(count, folder)), flush=True)
    return 0
