"""Converting a dataset and training with metatrain

`blockmap.metatrain` runs metatrain's own `mtt train` with datasets served
by blockmap: convert the data once into a `.bmdata` dataset (from an
options file, read by metatrain's own readers, or from a `DiskDataset`
zip), point `read_from` at it, and train. The items are views of the
mapped file and each batch is joined by blockmap, then handed to
metatrain's model, losses and trainer unchanged. Here: 24 small Cu/Ni
clusters with ASE's EMT energies and forces, and one epoch of SOAP-BPNN.
The same two steps on the command line are
`python -m blockmap.metatrain convert options.yaml data.bmdata` and
`python -m blockmap.metatrain train train.yaml`. metatrain logs its
progress (and the warnings of its dependencies) to standard error.
"""

from pathlib import Path

import ase.io
import numpy as np
from ase import Atoms
from ase.calculators.emt import EMT

import blockmap
import blockmap.metatrain

OPTIONS = """\
seed: 42
device: cpu
base_precision: 64
architecture:
  name: soap_bpnn
  training:
    batch_size: 8
    num_epochs: 1
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
validation_set: 0.25
test_set: 0.125
"""


def clusters(count, seed=0):
    """``count`` random Cu/Ni clusters of 8 to 16 atoms with EMT energies
    and forces, as metatrain's ASE reader expects them."""
    rng = np.random.default_rng(seed)
    frames = []
    for _ in range(count):
        positions = []
        while len(positions) < rng.integers(8, 17):
            point = rng.uniform(0, 6.0, 3)
            if all(np.linalg.norm(point - other) > 2.2 for other in positions):
                positions.append(point)
        atoms = Atoms(rng.choice(["Cu", "Ni"], size=len(positions)), positions=positions)
        atoms.calc = EMT()
        atoms.info["energy"] = atoms.get_potential_energy()
        atoms.arrays["forces"] = atoms.get_forces()
        atoms.calc = None
        frames.append(atoms)
    return frames


def main():
    ase.io.write("data.xyz", clusters(24), format="extxyz")

    # 1. convert: metatrain reads the xyz, blockmap writes the dataset
    Path("options.yaml").write_text(OPTIONS.format(read_from="data.xyz"))
    written = blockmap.metatrain.convert("options.yaml", "data.bmdata")
    print("converted:", written)

    ds = blockmap.Dataset("data.bmdata")
    entry = ds[0]
    print(
        f"{len(ds)} entries, fields {list(entry._fields)}, column n_atoms: "
        f"{ds.column('n_atoms').tolist()[:6]}..."
    )
    # an entry's arrays view the mapped file: reading it again copies nothing
    forces = entry.energy.block(0).gradient("positions").values
    again = ds[0].energy.block(0).gradient("positions").values
    assert np.shares_memory(forces, again) and not forces.flags.writeable

    # 2. train: metatrain's own `mtt train`, reading the .bmdata
    Path("train.yaml").write_text(OPTIONS.format(read_from="data.bmdata"))
    status = blockmap.metatrain.main(["train", "train.yaml", "-o", "model.pt"])
    assert status == 0 and Path("model.pt").is_file()
    print(f"mtt train exited with {status}; model.pt: {Path('model.pt').stat().st_size} bytes")
    # metatrain's own record of the epoch (its log goes to stderr)
    (record,) = Path("outputs").glob("*/*/train.csv")
    header, units, *epochs = [line.split(",") for line in record.read_text().splitlines()]
    for name, unit, value in zip(header, units, epochs[-1], strict=True):
        print(f"  {name.strip()}: {value.strip()} {unit.strip()}")
        if "loss" in name:
            assert np.isfinite(float(value))


if __name__ == "__main__":
    main()
