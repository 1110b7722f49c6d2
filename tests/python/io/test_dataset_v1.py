"""Datasets of format version 1, stored in tests/data/datasets/ by the
blockmap that wrote that version, still open and read the same maps."""

import pickle

import pytest

import blockmap
from helpers import TESTS_DIR

STORED = TESTS_DIR.parent / "data" / "datasets"


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
        assert blockmap.equal(ds[i], want)
        assert blockmap.equal(ds[i - len(maps)], want)
    with pytest.raises(blockmap.BlockMapIndexError):
        ds[len(maps)]
    # no columns: none listed, and reading one names the upgrade
    assert ds.columns == []
    assert "columns=[]" in repr(ds)
    with pytest.raises(blockmap.ValidationError, match="upgrade"):
        ds.column("n_samples")
