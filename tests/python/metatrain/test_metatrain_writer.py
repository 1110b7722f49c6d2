"""``blockmap.metatrain.Writer``: training structures added from Python
(``ase.Atoms`` read under metatrain's ``targets`` options, or metatomic
systems with their targets as maps) are, entry for entry, what ``convert``
writes for the same structures in an xyz file, checked against convert in
the same run; an existing path is refused unless ``append`` or
``overwrite``."""

import pytest

import blockmap
import blockmap.metatrain
from blockmap import Dataset

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.:FutureWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning"),
    # metatrain 2026.4.1 on omegaconf's newer API
    pytest.mark.filterwarnings("ignore:register_new_resolver:UserWarning"),
]
pytest.importorskip("torch")
pytest.importorskip("metatrain")

TARGETS = {"energy": {"key": "energy", "unit": "eV", "forces": {"key": "forces"}}}


def _assert_same_entries(ours, theirs, count):
    assert ours.fields == theirs.fields
    assert ours.columns == theirs.columns
    for column in theirs.columns:
        assert ours.column(column).tolist() == theirs.column(column).tolist()[:count], column
    for i in range(count):
        for field in theirs.fields:
            a, b = ours.field(field)[i], theirs.field(field)[i]
            assert a == b, (i, field)
            for x, y in zip(a.blocks(), b.blocks(), strict=True):
                assert x.values.dtype == y.values.dtype
                assert x.samples == y.samples and x.properties == y.properties


def test_atoms_are_written_as_convert_writes_them(tiny, tmp_path):
    import ase.io

    frames = ase.io.read(tiny / "data.xyz", ":")
    path = tmp_path / "grown.bmdata"
    with blockmap.metatrain.Writer(path, TARGETS) as writer:
        for atoms in frames[:25]:
            writer.write(atoms)
    # an active-learning iteration: more structures appended
    with blockmap.metatrain.Writer(path, TARGETS, append=True) as writer:
        assert len(writer) == 25
        for atoms in frames[25:]:
            writer.write(atoms)
    converted = Dataset(tiny / "xyz.bmdata")
    grown = Dataset(path)
    assert len(grown) == len(converted) == 40
    _assert_same_entries(grown, converted, 40)
    blockmap.verify(path)


def test_systems_with_their_target_maps_are_written_as_convert_writes_them(tiny, tmp_path):
    import torch
    from metatrain.utils.data import read_systems, read_targets
    from metatrain.utils.omegaconf import expand_dataset_config
    from omegaconf import OmegaConf

    config = expand_dataset_config(
        OmegaConf.create(
            {
                "systems": {"read_from": str(tiny / "data.xyz"), "reader": "ase"},
                "targets": TARGETS,
            }
        )
    )[0]
    systems = read_systems(filename=str(tiny / "data.xyz"), reader="ase")
    targets, _ = read_targets(conf=config["targets"])
    path = tmp_path / "systems.bmdata"
    with blockmap.metatrain.Writer(path, TARGETS) as writer:
        for i in range(6):
            writer.write(systems[i].to(dtype=torch.float64), energy=targets["energy"][i])
    _assert_same_entries(Dataset(path), Dataset(tiny / "xyz.bmdata"), 6)


def test_the_writer_refuses_an_existing_path_and_wrong_input(tiny, tmp_path):
    import ase.io

    path = tmp_path / "kept.bmdata"
    atoms = ase.io.read(tiny / "data.xyz", "0")
    with blockmap.metatrain.Writer(path, TARGETS) as writer:
        writer.write(atoms)
    before = path.read_bytes()
    with pytest.raises(blockmap.ExistingFileError, match="overwrite=True"):
        blockmap.metatrain.Writer(path, TARGETS)
    assert path.read_bytes() == before
    with blockmap.metatrain.Writer(path, TARGETS, overwrite=True) as writer:
        writer.write(atoms)
        writer.write(atoms)
    assert len(Dataset(path)) == 2
    with pytest.raises(blockmap.ValidationError, match=".bmdata"):
        blockmap.metatrain.Writer(tmp_path / "x.data", TARGETS)
    with blockmap.metatrain.Writer(tmp_path / "y.bmdata", TARGETS) as writer:
        with pytest.raises(blockmap.BlockMapTypeError):
            writer.write("not a structure")
        with pytest.raises(blockmap.ValidationError):
            writer.write(atoms, energy=None)
