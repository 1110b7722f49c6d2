"""blockmap.metatrain as one package: one system conversion (the batch path
and an item's ``sample.system`` take and refuse the same maps), one
neighbour-list conversion (every stored list converted as
``to_metatensor_torch`` converts it, with its own labels), the DiskDataset
conversion beside ``convert``, and the patches (and every other use of
metatrain's internals) refusing a metatrain version they were not tested
with."""

import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

import blockmap
import blockmap.metatrain
from blockmap.exceptions import ValidationError

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.:FutureWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:register_new_resolver:UserWarning"),
]
torch = pytest.importorskip("torch")
pytest.importorskip("metatrain")

from metatomic.torch import NeighborListOptions  # noqa: E402

from blockmap._systems import system_from_tensormaps, tensormap_from_system  # noqa: E402
from blockmap.metatensor_torch import to_metatensor_torch  # noqa: E402
from blockmap.metatrain import _batch, _neighbors  # noqa: E402
from blockmap.metatrain._dataset import MetatrainDataset  # noqa: E402

TARGETS = {"energy": {"key": "energy"}}
OPTIONS = NeighborListOptions(cutoff=5.0, full_list=True, strict=True)


def _relabelled(tensor, names):
    """``tensor`` (a system's map) with its samples renamed ``names``:
    not a system's map any more."""
    blocks = [
        blockmap.TensorBlock(
            np.array(block.values),
            blockmap.Labels(names, np.array(block.samples.values)),
            block.components,
            block.properties,
        )
        for block in tensor.blocks()
    ]
    return blockmap.TensorMap(tensor.keys, blocks)


def test_the_batch_path_refuses_the_maps_an_item_refuses(tiny, tmp_path):
    # a dataset whose systems' samples are named otherwise: sample.system
    # refused them, and the batch path made systems of them
    source = MetatrainDataset(tiny / "zip.bmdata", fields=TARGETS)
    path = tmp_path / "renamed.bmdata"
    with blockmap.DatasetWriter(path) as writer:
        for index in range(4):
            item = source[index]
            system = _relabelled(item._views["system"]["system"], ["atom", "type"])
            writer.write(
                system=system,
                energy=item._views["energy"],
                columns={"n_atoms": len(system.block(0))},
            )
    dataset = MetatrainDataset(path, fields=TARGETS)
    items = [dataset[i] for i in range(4)]
    with pytest.raises(ValidationError) as by_item:
        items[0]["system"]
    with pytest.raises(ValidationError) as by_batch:
        _batch.collate(["energy"], [], items)
    assert str(by_batch.value) == str(by_item.value)
    assert "not a system's map" in str(by_item.value)

    # the same maps, named as systems are, go through both
    good = MetatrainDataset(tiny / "zip.bmdata", fields=TARGETS)
    batch = _batch.collate(["energy"], [], [good[i] for i in range(4)])
    for i, system in enumerate(batch.systems):
        expected = good[i].system
        assert torch.equal(system.positions, expected.positions)
        assert torch.equal(system.types, expected.types)
        assert torch.equal(system.cell, expected.cell) and torch.equal(system.pbc, expected.pbc)


def test_a_systems_map_converts_in_either_key_order(tiny):
    # keys (array) = 1, 0: the cell's block first (a dataset refuses such
    # maps at open: its n_samples column counts the first block's rows)
    item = MetatrainDataset(tiny / "zip.bmdata", fields=TARGETS)[0]
    tensor = item._views["system"]["system"]
    swapped = blockmap.TensorMap(
        blockmap.Labels(["array"], np.array([[1], [0]], dtype=np.int32)),
        [tensor.block(1), tensor.block(0)],
    )
    system = system_from_tensormaps({"system": swapped})
    assert tensormap_from_system(system) == tensor
    assert torch.equal(system.positions, item["system"].positions)


def test_every_stored_list_converts_as_to_metatensor_torch_does(tiny):
    dataset = MetatrainDataset(tiny / "zip.bmdata", fields=TARGETS)
    store = _neighbors.ensure(dataset, OPTIONS)
    blocks = [store.block(i) for i in range(len(dataset))]
    for i, block in enumerate(blocks):
        expected = to_metatensor_torch(store.maps[i].block(0))
        assert torch.equal(block.values, expected.values)
        assert block.values.dtype == expected.values.dtype
        assert block.samples == expected.samples
        assert block.components == expected.components and block.properties == expected.properties
        # new tensors: the stored arrays are read-only views of the file
        assert not np.shares_memory(block.values.numpy(), store.maps[i].block(0).values)
    # the components and properties, the same for every list, made once
    # (one Labels object: one tensor of values)
    made = blocks[0].properties.values.data_ptr(), blocks[0].components[0].values.data_ptr()
    for block in blocks:
        assert (block.properties.values.data_ptr(), block.components[0].values.data_ptr()) == made
    # and what the store keeps converted stays bounded
    assert len(store._converter.labels.made) <= _neighbors.Store.LABELS_KEPT


def test_each_stored_list_keeps_its_own_labels(tiny):
    # a store whose second list has other component values (damaged: the
    # store's CRC covers samples and values) is converted as it is, not
    # with the first list's labels
    dataset = MetatrainDataset(tiny / "zip.bmdata", fields=TARGETS)
    stored = _neighbors.ensure(dataset, OPTIONS).maps
    first, second = stored[0].block(0), stored[1].block(0)
    reversed_xyz = blockmap.Labels(["xyz"], np.array([[2], [1], [0]], dtype=np.int32))
    changed = blockmap.TensorBlock(
        np.array(second.values), second.samples, [reversed_xyz], second.properties
    )
    keys = stored[1].keys
    maps = [stored[0], blockmap.TensorMap(keys, [changed])]
    store = _neighbors.Store(OPTIONS, maps)
    assert store.block(0).components[0].values.flatten().tolist() == [0, 1, 2]
    assert store.block(1).components[0].values.flatten().tolist() == [2, 1, 0]
    assert first.components[0] == blockmap.Labels.range("xyz", 3)


def test_the_diskdataset_conversion_is_the_metatrain_packages(tiny, tmp_path):
    # Dataset.from_diskdataset delegates to blockmap.metatrain, which
    # imports neither metatrain nor torch for it (in a fresh interpreter)
    import subprocess

    code = (
        "import sys, blockmap\n"
        f"ds = blockmap.Dataset.from_diskdataset({str(tiny / 'data.zip')!r}, "
        f"{str(tmp_path / 'from.bmdata')!r})\n"
        "print(len(ds), ds.fields[:1], 'blockmap.metatrain._diskdataset' in sys.modules,\n"
        "      [m for m in ('torch', 'metatrain', 'metatomic') if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["40", "['system']", "True", "[]"]
    converted = blockmap.Dataset(tmp_path / "from.bmdata")
    reference = blockmap.Dataset(tiny / "zip.bmdata")
    assert converted.fields == reference.fields
    assert converted[7].system == reference[7].system
    assert np.array_equal(converted.column("n_atoms"), reference.column("n_atoms"))


ROOT = Path(__file__).resolve().parents[3]


def test_the_patches_name_the_range_of_the_extra():
    from blockmap.metatrain import _patch

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert extras["metatrain"] == [f"metatrain{_patch.SUPPORTED}"]
    import metatrain

    _patch.check_version(metatrain.__version__)  # the version tested here


@pytest.mark.parametrize("version", ["2026.5.0", "2026.3.2", "2027.4.1", "2026", "main"])
def test_an_untested_metatrain_is_refused_and_nothing_is_patched(monkeypatch, version):
    import metatrain
    from metatrain.utils.data import dataset as data_module

    from blockmap.metatrain import _patch

    blockmap.metatrain.uninstall()
    original = data_module.CollateFn.__call__
    monkeypatch.setattr(metatrain, "__version__", version)
    with pytest.raises(ImportError) as error:
        blockmap.metatrain.install()
    message = str(error.value)
    assert error.value.name == "metatrain"
    assert f"metatrain {version} is installed" in message
    assert 'pip install "metatrain>=2026.4,<2026.5"' in message
    assert "pip install blockmap[" not in message
    assert not _patch._patched and data_module.CollateFn.__call__ is original
    # the command line refuses before running metatrain
    with pytest.raises(ImportError, match="nothing was patched"):
        blockmap.metatrain.main(["train", "options.yaml"])
    monkeypatch.undo()
    blockmap.metatrain.install()
    try:
        assert data_module.CollateFn.__call__ is not original
    finally:
        blockmap.metatrain.uninstall()
    assert data_module.CollateFn.__call__ is original


@pytest.mark.parametrize("version", ["2026.4.0", "2026.4.1", "2026.4.17", "2026.4.2rc1"])
def test_the_tested_versions_are_patched(version):
    from blockmap.metatrain import _patch

    _patch.check_version(version)


def test_every_use_of_metatrains_internals_refuses_an_untested_metatrain(
    monkeypatch, tiny, tmp_path
):
    # the neighbour-list computation (metatrain's _compute_single_neighbor_list),
    # DiskDataset.get_target_info on a blockmap dataset, and metatrain's
    # readers for an options file: none runs on a version not tested
    import metatrain

    from blockmap.metatrain import _convert

    dataset = MetatrainDataset(tiny / "zip.bmdata", fields=TARGETS)
    options = NeighborListOptions(cutoff=3.25, full_list=False, strict=True)
    store = _neighbors.store_path(str(tiny / "zip.bmdata"), _neighbors.options_key(options))
    computed = _neighbors.computed
    monkeypatch.setattr(metatrain, "__version__", "2026.5.0")
    with pytest.raises(ImportError, match="metatrain 2026.5.0 is installed"):
        _neighbors.ensure(dataset, options)
    assert _neighbors.computed == computed and not Path(store).exists()
    with pytest.raises(ImportError, match="metatrain 2026.5.0 is installed"):
        dataset.get_target_info({"energy": {"key": "energy"}})
    with pytest.raises(ImportError, match="metatrain 2026.5.0 is installed"):
        _convert.convert(tiny / "options.yaml", tmp_path / "options.bmdata")
    assert not (tmp_path / "options.bmdata").exists()
    # a zip needs no metatrain: its conversion is blockmap's alone
    assert _convert.convert(tiny / "data.zip", tmp_path / "zip.bmdata") == [
        str(tmp_path / "zip.bmdata")
    ]
