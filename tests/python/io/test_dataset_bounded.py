"""Dataset.from_diskdataset reads foreign zips with blockmap's own reader
and its bounds: a zip bomb (1 MB deflating to 1 GiB) is refused with a
FormatError before it is inflated, in a fresh process whose peak resident
memory grows by a small constant times the input; a bad CRC and a huge
declared NPY header are FormatErrors too, and the dataset the conversion
would have replaced is left as it was."""

import json
import struct
import sys
import textwrap
import zipfile

import numpy as np
import pytest

import blockmap
from bench.batches import structure_maps
from helpers import TESTS_DIR
from helpers.child import run_python
from helpers.memory import PEAK

ROOT = TESTS_DIR.parent.parent


def _npy_header(count):
    text = f"{{'descr': '|u1', 'fortran_order': False, 'shape': ({count},), }}"
    text += " " * (63 - (10 + len(text)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode()


def _bomb(path, size=1 << 30):
    """A DiskDataset whose one member wraps ``size`` zero bytes, deflated."""
    piece = bytes(1 << 20)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("0/energy.mts", "w", force_zip64=True) as member:
            member.write(_npy_header(size))
            for _ in range(size // len(piece)):
                member.write(piece)


CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path[:0] = [sys.argv[1]]
    import blockmap


    reset_peak()
    before = peak_bytes()
    try:
        blockmap.Dataset.from_diskdataset(sys.argv[2], sys.argv[3])
        outcome = "converted"
    except blockmap.BlockMapError as error:
        outcome = type(error).__name__ + ": " + str(error)
    print(json.dumps({"growth": peak_bytes() - before, "outcome": outcome}))
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/status")
def test_a_zip_bomb_is_refused_in_bounded_memory(tmp_path):
    bomb = tmp_path / "bomb.zip"
    _bomb(bomb)
    size = bomb.stat().st_size
    assert size < 4_000_000
    result = run_python(PEAK + CHILD, str(ROOT), str(bomb), str(tmp_path / "out"), timeout=300)
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    assert measured["outcome"].startswith("FormatError"), measured
    assert "zip bomb" in measured["outcome"]
    # the bound of blockmap's readers (test_bounded_memory.py): 12 times the
    # input and 16 MB
    assert measured["growth"] <= 12 * size + 16_000_000, measured
    assert not (tmp_path / "out").exists()


def _diskdataset(path, payloads):
    with zipfile.ZipFile(path, "w") as archive:
        for i, payload in enumerate(payloads):
            archive.writestr(f"{i}/energy.mts", payload)


def _wrapped(tensor):
    import io

    stream = io.BytesIO()
    np.save(stream, np.frombuffer(blockmap.save_buffer(tensor), dtype=np.uint8))
    return stream.getvalue()


def test_bad_crcs_and_npy_headers_are_format_errors(tmp_path):
    maps = structure_maps(3)
    target = tmp_path / "kept.data"
    blockmap.save_dataset(target, maps)
    before = target.read_bytes()
    good = tmp_path / "good.zip"
    _diskdataset(good, [_wrapped(t) for t in maps])
    assert len(blockmap.Dataset.from_diskdataset(good, tmp_path / "converted")) == 3
    # one byte of a member's data flipped: its CRC no longer matches
    data = bytearray(good.read_bytes())
    payload = _wrapped(maps[1])
    at = bytes(data).index(payload) + len(payload) - 10
    data[at] ^= 0xFF
    bad_crc = tmp_path / "crc.zip"
    bad_crc.write_bytes(bytes(data))
    huge_header = tmp_path / "header.zip"
    _diskdataset(huge_header, [b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) + b"{"])
    not_bytes = tmp_path / "floats.zip"
    _diskdataset(not_bytes, [_wrapped_floats()])
    not_a_zip = tmp_path / "plain.zip"
    not_a_zip.write_bytes(b"not a zip at all" * 10)
    for path, match in [
        (bad_crc, "corrupt|CRC|checksum"),
        (huge_header, "npy header"),
        (not_bytes, "array of bytes"),
        (not_a_zip, "zip"),
    ]:
        with pytest.raises(blockmap.FormatError, match=match):
            blockmap.Dataset.from_diskdataset(path, target, overwrite=True)
    with pytest.raises(blockmap.MissingFileError):
        blockmap.Dataset.from_diskdataset(tmp_path / "missing.zip", target)
    with pytest.raises(blockmap.ValidationError, match="keeps no field"):
        blockmap.Dataset.from_diskdataset(good, target, target=[])
    assert target.read_bytes() == before


def _wrapped_floats():
    import io

    stream = io.BytesIO()
    np.save(stream, np.zeros(4))
    return stream.getvalue()


def test_member_names_that_would_be_left_out_refuse_the_zip(tmp_path):
    import warnings

    payload = _wrapped(structure_maps(1)[0])
    target = tmp_path / "target"
    cases = [
        # a superscript two is a digit to str.isdigit, not to int()
        (["0/energy.mts", "\u00b2/energy.mts"], "not DiskDataset fields"),
        # "00" and "0" are both sample 0: one would be dropped
        (["0/energy.mts", "00/energy.mts"], "not DiskDataset fields"),
        # one name twice (zipfile warns, and writes both)
        (["0/energy.mts", "0/energy.mts"], "two entries named"),
    ]
    for i, (names, match) in enumerate(cases):
        path = tmp_path / f"{i}.zip"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with zipfile.ZipFile(path, "w") as archive:
                for name in names:
                    archive.writestr(name, payload)
        with pytest.raises(blockmap.FormatError, match=match):
            blockmap.Dataset.from_diskdataset(path, target)
        assert not target.exists()
