"""The tiny metatrain run of issue 33: Cu/Ni clusters with ASE's EMT
energies and forces, written as extended xyz, as metatrain's DiskDataset
zip (with metatrain's own readers and writer) and as options files."""

from pathlib import Path

from bench import training_data

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
    2.2 Å apart), non-periodic, with EMT energies and forces (the
    benchmark's generator)."""
    training_data.generate(count, Path(path), seed=seed)


def write_options(path, read_from, epochs=1, workers=0):
    Path(path).write_text(OPTIONS.format(read_from=read_from, epochs=epochs, workers=workers))


def write_zip(xyz, path):
    """The xyz as metatrain's DiskDataset zip, read by metatrain's readers
    and written by its DiskDatasetWriter (position gradients relabelled
    ``sample, atom``, which DiskDataset requires), as the benchmark
    writes it."""
    from metatrain.utils.data.writers import DiskDatasetWriter

    systems, targets = training_data.read_xyz(Path(xyz))
    writer = DiskDatasetWriter(str(path))
    for i, system in enumerate(systems):
        writer.write(
            [system],
            {name: training_data.gradients_as_diskdataset(targets[name][i]) for name in targets},
        )
    writer.finish()
