"""Datasets of format version 4, stored in tests/data/datasets/ by the
blockmap that defined that version (``make_v4.py``, never regenerated):
they open and read the same maps, fields and columns, their entries of
every dtype keep their dtype, an append writes in version 4 after the
bytes they hold, and ``blockmap.verify`` finds nothing wrong."""

import pickle
import shutil

import numpy as np
import pytest

import blockmap
from blockmap import Dataset, DatasetWriter
from helpers import TESTS_DIR

STORED = TESTS_DIR.parent / "data" / "datasets"
V4 = [
    "v4-committed.bmds",
    "v4-appended.bmds",
    "v4-recovered.bmds",
    "v4-empty.bmds",
    "v4-dtypes.bmds",
]


@pytest.fixture(scope="module")
def expected():
    with open(STORED / "expected-v4.pickle", "rb") as f:
        return pickle.load(f)


@pytest.mark.parametrize("name", V4)
def test_stored_version_4_files_read_the_same_entries(name, expected):
    want = expected[name]
    ds = Dataset(STORED / name)
    assert (ds.version, ds.fields) == (4, want["fields"])
    assert len(ds) == len(want["entries"])
    assert ds.committed == (name != "v4-recovered.bmds")
    for i, entry in enumerate(want["entries"]):
        for f, field in enumerate(want["fields"]):
            assert ds.field(field)[i] == entry[f], (name, i, field)
    assert sorted(ds.columns) == sorted([*want["columns"], "n_samples"])
    for column, values in want["columns"].items():
        assert ds.column(column).tolist() == values
    blockmap.verify(STORED / name)


def test_stored_entries_of_every_dtype_keep_it(expected):
    ds = Dataset(STORED / "v4-dtypes.bmds")
    dtypes = []
    for i, want in enumerate(expected["v4-dtypes.bmds"]["entries"]):
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


@pytest.mark.parametrize("name", V4)
def test_stored_version_4_files_append_after_their_bytes(tmp_path, name, expected):
    want = expected[name]
    copy = tmp_path / name
    shutil.copy(STORED / name, copy)
    extra = expected["v4-committed.bmds"]["entries"][0][0]
    with DatasetWriter(copy, append=True) as writer:
        if want["fields"] == ["tensor"]:
            writer.write(extra)
        else:
            writer.write(
                **{field: extra for field in want["fields"]},
                columns={"n_atoms": 99, "weight": 9.5},
            )
    grown = Dataset(copy)
    assert (grown.version, len(grown), grown.committed) == (4, len(want["entries"]) + 1, True)
    assert grown.field(want["fields"][-1])[-1] == extra
    for i, entry in enumerate(want["entries"]):
        assert grown.field(want["fields"][0])[i] == entry[0]
    if name != "v4-recovered.bmds":
        before = (STORED / name).read_bytes()
        assert copy.read_bytes()[: len(before)] == before
    for column, values in want["columns"].items():
        assert grown.column(column).tolist()[:-1] == values
    blockmap.verify(copy)
