"""Datasets of format versions 3 and 4, stored in tests/data/datasets/ by
the blockmap that defined each version (``make_v3.py``, ``make_v4.py``,
never regenerated):
they open and read the same maps, fields and columns, their entries of
every dtype keep their dtype, an append writes in the file's version after the
bytes they hold, and ``blockmap.verify`` finds nothing wrong."""

import pickle

import numpy as np
import pytest

import blockmap
from blockmap import Dataset
from helpers.stored_datasets import STORED, append_to_copy

VERSIONS = (3, 4)
KINDS = ("committed", "appended", "recovered", "empty", "dtypes")
STORED_FILES = [(v, f"v{v}-{kind}.bmds") for v in VERSIONS for kind in KINDS]


@pytest.fixture(scope="module")
def expected():
    """``{version: {file name: what it holds}}``, from each version's
    ``expected-v<version>.pickle``."""
    found = {}
    for version in VERSIONS:
        with open(STORED / f"expected-v{version}.pickle", "rb") as f:
            found[version] = pickle.load(f)
    return found


@pytest.mark.parametrize(("version", "name"), STORED_FILES)
def test_stored_files_read_the_same_entries(version, name, expected):
    want = expected[version][name]
    ds = Dataset(STORED / name)
    assert (ds.version, ds.fields) == (version, want["fields"])
    assert len(ds) == len(want["entries"])
    assert ds.committed == (not name.endswith("-recovered.bmds"))
    for i, entry in enumerate(want["entries"]):
        for f, field in enumerate(want["fields"]):
            assert ds.field(field)[i] == entry[f], (name, i, field)
    assert sorted(ds.columns) == sorted([*want["columns"], "n_samples"])
    for column, values in want["columns"].items():
        assert ds.column(column).tolist() == values
    blockmap.verify(STORED / name)


@pytest.mark.parametrize("version", VERSIONS)
def test_stored_entries_of_every_dtype_keep_it(version, expected):
    name = f"v{version}-dtypes.bmds"
    ds = Dataset(STORED / name)
    dtypes = []
    for i, want in enumerate(expected[version][name]["entries"]):
        tensor = ds[i]
        assert tensor == want[0]
        dtype = tensor.block(0).values.dtype
        assert dtype.name == tensor.info()["dtype"]
        cell = tensor.block(1).gradient("positions").gradient("cell")
        assert cell.values.dtype == dtype
        np.testing.assert_array_equal(
            cell.values, want[0].block(1).gradient("positions").gradient("cell").values
        )
        dtypes.append(dtype)
    assert len(set(dtypes)) == len(dtypes) == 14


@pytest.mark.parametrize(("version", "name"), STORED_FILES)
def test_stored_files_append_after_their_bytes(tmp_path, version, name, expected):
    want = expected[version][name]
    extra = expected[version][f"v{version}-committed.bmds"]["entries"][0][0]
    copy = append_to_copy(name, tmp_path, want["fields"], extra)
    grown = Dataset(copy)
    assert (grown.version, len(grown), grown.committed) == (
        version,
        len(want["entries"]) + 1,
        True,
    )
    assert grown.field(want["fields"][-1])[-1] == extra
    for i, entry in enumerate(want["entries"]):
        assert grown.field(want["fields"][0])[i] == entry[0]
    if not name.endswith("-recovered.bmds"):
        before = (STORED / name).read_bytes()
        assert copy.read_bytes()[: len(before)] == before
    for column, values in want["columns"].items():
        assert grown.column(column).tolist()[:-1] == values
    blockmap.verify(copy)
