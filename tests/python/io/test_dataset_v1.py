"""Datasets of format version 1, stored in tests/data/datasets/ by the
blockmap that wrote that version, still open and read the same maps."""

import pickle

import pytest

import blockmap
from helpers.stored_datasets import STORED


@pytest.fixture(scope="module")
def expected():
    with open(STORED / "expected.pickle", "rb") as f:
        return pickle.load(f)


@pytest.mark.parametrize(
    "name", ["v1-committed.bmds", "v1-appended.bmds", "v1-recovered.bmds", "v1-empty.bmds"]
)
def test_stored_v1_datasets_read_the_same_maps(name, expected):
    ds = blockmap.Dataset(STORED / name)
    maps = expected[name]
    assert len(ds) == len(maps)
    assert ds.committed == (name != "v1-recovered.bmds")
    for i, want in enumerate(maps):
        assert ds[i] == want
        assert ds[i - len(maps)] == want
    with pytest.raises(blockmap.BlockMapIndexError):
        ds[len(maps)]
    # no columns: none listed, and reading one names the upgrade
    assert ds.columns == []
    assert "columns=[]" in repr(ds)
    with pytest.raises(blockmap.ValidationError, match="upgrade"):
        ds.column("n_samples")


def test_upgrade_onto_its_own_path(tmp_path, expected):
    import shutil

    path = tmp_path / "in-place.bmds"
    shutil.copy(STORED / "v1-appended.bmds", path)
    old = blockmap.Dataset(path)
    reference = pickle.dumps(old)
    blockmap.Dataset.upgrade(path, path, overwrite=True)
    new = blockmap.Dataset(path)
    maps = expected["v1-appended.bmds"]
    assert (new.version, len(new)) == (4, len(maps))
    assert all(new[i] == want for i, want in enumerate(maps))
    # the reader of the replaced file keeps its mapping; its reference
    # now names another file
    assert all(old[i] == want for i, want in enumerate(maps))
    with pytest.raises(blockmap.BlockMapIOError, match="replaced"):
        pickle.loads(reference)
