"""The tiny metatrain run of issue 33: Cu/Ni clusters with ASE's EMT
energies and forces, written as extended xyz, as metatrain's DiskDataset
zip (with metatrain's own readers and writer) and as options files."""

from pathlib import Path

import numpy as np

OPTIONS = """\
seed: 42
device: cpu
base_precision: 64
architecture:
  name: soap_bpnn
  training:
    batch_size: 8
    num_epochs: {epochs}
    log_interval: 1
    num_workers: {workers}
training_set:
  systems:
    read_from: {read_from}
    length_unit: angstrom
  targets:
    energy:
      key: energy
      unit: eV
      forces:
        key: forces
validation_set: 0.1
test_set: 0.1
"""


def write_xyz(path, count, seed=0):
    """``count`` random compact clusters of 8-29 Cu/Ni atoms (at least
    2.2 Å apart), non-periodic, with EMT energies and forces."""
    import ase.io
    from ase import Atoms
    from ase.calculators.emt import EMT

    rng = np.random.default_rng(seed)
    frames = []
    for _ in range(count):
        n = int(rng.integers(8, 30))
        positions = []
        while len(positions) < n:
            p = rng.uniform(0, 7.0, 3)
            if all(np.linalg.norm(p - q) > 2.2 for q in positions):
                positions.append(p)
        symbols = rng.choice(["Cu", "Ni"], size=n)
        atoms = Atoms(symbols=list(symbols), positions=np.array(positions), pbc=False)
        atoms.calc = EMT()
        energy, forces = atoms.get_potential_energy(), atoms.get_forces()
        atoms.calc = None
        atoms.info["energy"] = energy
        atoms.arrays["forces"] = forces
        frames.append(atoms)
    ase.io.write(path, frames, format="extxyz")


def write_options(path, read_from, epochs=1, workers=0):
    Path(path).write_text(OPTIONS.format(read_from=read_from, epochs=epochs, workers=workers))


def write_zip(xyz, path):
    """The xyz as metatrain's DiskDataset zip, read by metatrain's readers
    and written by its DiskDatasetWriter (position gradients relabelled
    ``sample, atom``, which DiskDataset requires)."""
    from metatensor.torch import Labels, TensorBlock, TensorMap
    from metatrain.utils.data import read_systems, read_targets
    from metatrain.utils.data.writers import DiskDatasetWriter
    from metatrain.utils.omegaconf import expand_dataset_config
    from omegaconf import OmegaConf

    conf = expand_dataset_config(
        OmegaConf.create(
            {
                "systems": {"read_from": str(xyz), "length_unit": "angstrom"},
                "targets": {"energy": {"key": "energy", "unit": "eV", "forces": {"key": "forces"}}},
            }
        )
    )[0]
    systems = read_systems(conf["systems"]["read_from"], reader=conf["systems"]["reader"])
    targets, _ = read_targets(conf["targets"])

    def fixed(tensor):
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

    writer = DiskDatasetWriter(str(path))
    for i, system in enumerate(systems):
        writer.write([system], {name: fixed(targets[name][i]) for name in targets})
    writer.finish()
