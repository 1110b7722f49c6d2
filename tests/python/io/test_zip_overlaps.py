"""An archive whose central directory lists many entries over the same
bytes (a 1.7 MB `.mts` of 400 blocks over one block's entries) is refused
with a FormatError by the one directory reader every path goes through,
in bounded memory: before, it loaded as 620 MB (373 times the file,
against the bound of docs/format.md, "Bounded reading": 12 times + 16 MB),
and a 1.7 MB DiskDataset zip of 100 members converted into a dataset of
168 MB. Each path runs in a fresh process whose peak resident memory is
reset just before the call, as in test_bounded_memory.py.

Two ways to alias the bytes: every block's entries listed over block 0's
local headers ("one header"), or a local header per entry, naming it,
whose extra field leads to one shared copy of the data ("own headers":
the names agree, only the extents overlap)."""

import json
import subprocess
import sys
import textwrap

import pytest

import blockmap
from helpers import TESTS_DIR
from helpers import crafted_zips as cz
from helpers.child import run_python
from helpers.memory import PEAK

ROOT = TESTS_DIR.parent.parent

#: the bound of docs/format.md ("Bounded reading")
RATIO = 12
SLACK = 16_000_000

CHILD = textwrap.dedent(
    """
    import io, json, sys
    import numpy as np
    sys.path[:0] = [sys.argv[1], sys.argv[2]]
    import blockmap


    op, path, out = sys.argv[3], sys.argv[4], sys.argv[5]
    with open(path, "rb") as file:
        data = file.read()
    keys = blockmap.Labels(["k"], np.array([[3]], dtype=np.int32))
    calls = {
        "load": lambda: blockmap.load(path),
        "load mmap": lambda: blockmap.load(path, mmap=True),
        "load mmap c": lambda: blockmap.load(path, mmap="c"),
        "load keys": lambda: blockmap.load(path, keys=keys),
        "load file object": lambda: blockmap.load(open(path, "rb")),
        "load file object keys": lambda: blockmap.load(open(path, "rb"), keys=keys),
        "load_buffer": lambda: blockmap.load_buffer(data),
        "TensorMap.load_buffer": lambda: blockmap.TensorMap.load_buffer(bytearray(data)),
        "verify": lambda: blockmap.verify(path),
        "dataset version 1": lambda: blockmap.Dataset(path)[0],
        "from_diskdataset": lambda: blockmap.Dataset.from_diskdataset(path, out),
        "metatrain convert": lambda: __import__("blockmap.metatrain").metatrain.convert(path, out),
    }
    reset_peak()
    before = peak_bytes()
    try:
        calls[op]()
        outcome = "loaded"
    except blockmap.BlockMapError as error:
        outcome = type(error).__name__ + ": " + str(error)
    print(json.dumps({"growth": peak_bytes() - before, "outcome": outcome}))
    """
)

MTS_OPS = [
    "load",
    "load mmap",
    "load mmap c",
    "load keys",
    "load file object",
    "load file object keys",
    "load_buffer",
    "TensorMap.load_buffer",
    "verify",
]


def _file(tmp_path, op, how):
    if op == "dataset version 1":
        return "data.bmds", cz.version1_dataset(cz.aliased_map(how))
    if op in ("from_diskdataset", "metatrain convert"):
        return "dataset.zip", cz.aliased_diskdataset(how)
    return "aliased.mts", cz.aliased_map(how)


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/status")
@pytest.mark.parametrize("how", ["one header", "own headers"])
@pytest.mark.parametrize(
    "op", [*MTS_OPS, "dataset version 1", "from_diskdataset", "metatrain convert"]
)
def test_entries_over_the_same_bytes_are_refused_in_bounded_memory(tmp_path, op, how):
    name, data = _file(tmp_path, op, how)
    path = tmp_path / name
    path.write_bytes(data)
    out = tmp_path / "out.bmdata"
    result = run_python(
        PEAK + CHILD, str(TESTS_DIR), str(ROOT), op, str(path), str(out), timeout=300
    )
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    assert measured["outcome"].startswith("FormatError"), measured
    assert "overlaps" in measured["outcome"], measured
    assert measured["growth"] <= RATIO * len(data) + SLACK, (
        f"{op}: {measured['growth'] / len(data):.1f} times the input"
    )
    # nothing was written
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_the_command_line_convert_says_why(tmp_path):
    source = tmp_path / "dataset.zip"
    source.write_bytes(cz.aliased_diskdataset("own headers", samples=3))
    dest = tmp_path / "out.bmdata"
    result = subprocess.run(
        [sys.executable, "-m", "blockmap.metatrain", "convert", str(source), str(dest)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode != 0
    assert result.stderr.startswith("error: ") and "overlaps" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not dest.exists()


def test_a_valid_archive_with_gaps_between_entries_still_loads(tmp_path):
    """Entries that do not overlap load wherever they lie: bytes between
    them (as left by a zip tool that removed an entry) are not an error."""
    archive = cz.Zip()
    archive.add("keys.npy", cz.labels_npy(["k"], [[0]]))
    archive.raw(b"\0" * 100)
    for entry, data in cz._block_entries(5).items():
        archive.add(f"blocks/0/{entry}", data)
        archive.raw(b"removed" * 3)
    tensor = blockmap.load_buffer(archive.finish())
    assert tensor.block(0).values[:, 0].tolist() == [0, 1, 2, 3, 4]
