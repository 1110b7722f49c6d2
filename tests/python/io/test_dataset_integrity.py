"""What a dataset file guarantees about its bytes: the description of each
entry is checked against its CRC32 at every read (format version 3), a
whole file is checked by ``blockmap.verify``, ``Dataset.upgrade`` and
``Dataset.from_files`` copy no damaged entry, files of version 2 (stored in
tests/data/datasets/) keep opening, reading and appending in version 2, and
offsets no file can hold are no error of the system."""

import pickle
import struct
import zlib

import pytest

import blockmap
from bench.batches import qm9_maps
from blockmap import Dataset, DatasetWriter
from helpers.stored_datasets import STORED, append_to_copy

V2 = ["v2-committed.bmds", "v2-appended.bmds", "v2-recovered.bmds", "v2-empty.bmds"]


@pytest.fixture(scope="module")
def maps():
    return qm9_maps(6, seed=11)


def _arrays(path, ds):
    """The byte ranges of each entry's arrays (after its description)."""
    data = path.read_bytes()
    ranges = []
    for i in range(len(ds)):
        offset, length = ds._slot(i)
        (desc_len,) = struct.unpack_from("<Q", data, offset + 16)
        start = -(-(offset + 24 + desc_len) // 64) * 64
        ranges.append((start, offset + length))
    return ranges


def test_a_flipped_bit_outside_the_arrays_never_reads_as_another_map(tmp_path, maps):
    """The review's experiment (single-bit flips of a dataset file, each
    entry read): a flip in an entry's description, a labels record, the
    index or a header either fails the read (FormatError) or leaves what
    is read as written; none gives another dtype, array or labels."""
    path = tmp_path / "d"
    with DatasetWriter(path) as writer:
        for tensor in maps[:2]:
            writer.write(tensor)
        writer.commit()
        writer.write(maps[2])
    ds = Dataset(path)
    assert ds.version == 4
    arrays = _arrays(path, ds)
    good = path.read_bytes()
    bad = tmp_path / "bad"
    outcomes = {"refused": 0, "same": 0}
    for at in range(len(good)):
        if any(start <= at < end for start, end in arrays):
            continue
        data = bytearray(good)
        data[at] ^= 1 << (at % 8)
        bad.write_bytes(bytes(data))
        try:
            damaged = Dataset(bad)
        except blockmap.FormatError:
            outcomes["refused"] += 1
            continue
        for i in range(len(damaged)):
            try:
                tensor = damaged[i]
            except blockmap.FormatError:
                outcomes["refused"] += 1
                continue
            assert tensor == maps[i], f"byte {at}, entry {i}"
            assert tensor.block(0).values.dtype == maps[i].block(0).values.dtype
            outcomes["same"] += 1
    assert outcomes["refused"] > 0 and outcomes["same"] > 0


def test_verify_checks_a_dataset_whole(tmp_path, maps):
    path = tmp_path / "d"
    with DatasetWriter(path) as writer:
        for tensor in maps:
            writer.write(system=tensor, energy=tensor, columns={"n": 1})
    assert blockmap.verify(path) is None
    assert blockmap.io.verify(str(path)) is None
    ds = Dataset(path)
    arrays = _arrays(path, ds)
    data = bytearray(path.read_bytes())
    # an array byte of entry 2 (reads give its changed value: only verify
    # sees it), and a description byte of entry 4
    data[arrays[2][1] - 1] ^= 0x04
    offset, _ = ds._slot(4)
    data[offset + 24] ^= 0x01
    bad = tmp_path / "bad"
    bad.write_bytes(bytes(data))
    blockmap.Dataset(bad)[2]
    with pytest.raises(blockmap.FormatError, match="entry 4") as raised:
        blockmap.Dataset(bad)[4]
    with pytest.raises(blockmap.FormatError) as raised:
        blockmap.verify(bad)
    lines = str(raised.value).splitlines()
    assert "bad" in lines[0] and "problems" in lines[0], lines
    assert any(line.strip().startswith("entry 2 ") and "CRC32" in line for line in lines)
    assert any(line.strip().startswith("entry 4 ") for line in lines)
    assert not any(f"entry {i} " in line for line in lines for i in (0, 1, 3, 5))
    # an interrupted write is no damage: verify passes, the reader recovers
    cut = tmp_path / "cut"
    cut.write_bytes(path.read_bytes()[: ds._slot(5)[0] + 100])
    blockmap.verify(cut)
    assert len(Dataset(cut)) == 5
    # the stored files of versions 1 and 2
    for name in [*V2, "v1-committed.bmds", "v1-recovered.bmds"]:
        blockmap.verify(STORED / name)
    # not a dataset (nor an .mts archive)
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x89BMDS\r\n\x1a" + bytes(100))
    with pytest.raises(blockmap.FormatError):
        blockmap.verify(junk)


def test_upgrade_and_from_files_copy_no_damaged_entry(tmp_path, maps):
    path = tmp_path / "d"
    blockmap.save_dataset(path, maps)
    ds = Dataset(path)
    arrays = _arrays(path, ds)
    data = bytearray(path.read_bytes())
    data[arrays[3][0]] ^= 0x80
    bad = tmp_path / "bad"
    bad.write_bytes(bytes(data))
    dst = tmp_path / "dst"
    dst.write_bytes(b"kept")
    with pytest.raises(blockmap.FormatError, match="entry 3") as raised:
        Dataset.upgrade(bad, dst, overwrite=True)
    assert "verify" in str(raised.value)
    assert dst.read_bytes() == b"kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "d", "dst"]
    # an .mts file damaged in its arrays: from_files reads it with its CRCs
    folder = tmp_path / "mts"
    folder.mkdir()
    for i, tensor in enumerate(maps[:3]):
        blockmap.save(folder / f"{i}.mts", tensor)
    archive = folder / "1.mts"
    raw = bytearray(archive.read_bytes())
    values = maps[1].block(0).values.tobytes()
    at = bytes(raw).index(values[:64])
    raw[at] ^= 0x01
    archive.write_bytes(bytes(raw))
    with pytest.raises(blockmap.FormatError):
        Dataset.from_files(sorted(folder.glob("*.mts")), dst, overwrite=True)
    assert dst.read_bytes() == b"kept"


@pytest.fixture(scope="module")
def stored_v2():
    with open(STORED / "expected-v2.pickle", "rb") as f:
        return pickle.load(f)


@pytest.mark.parametrize("name", V2)
def test_stored_version_2_files_read_append_and_upgrade(tmp_path, name, stored_v2):
    expected = stored_v2[name]
    ds = Dataset(STORED / name)
    assert ds.version == 2
    assert ds.fields == expected["fields"]
    assert len(ds) == len(expected["entries"])
    assert ds.committed == (name != "v2-recovered.bmds")
    for i, entry in enumerate(expected["entries"]):
        for f, field in enumerate(expected["fields"]):
            assert ds.field(field)[i] == entry[f]
    for column, values in expected["columns"].items():
        assert ds.column(column).tolist() == values
    assert "version=2" in repr(ds)
    # appended: in version 2, the bytes before the append kept
    extra = qm9_maps(1, seed=5)[0]
    copy = append_to_copy(name, tmp_path, expected["fields"], extra)
    grown = Dataset(copy)
    assert (grown.version, len(grown)) == (2, len(expected["entries"]) + 1)
    assert grown.field(expected["fields"][0])[-1] == extra
    if ds.committed:
        before = (STORED / name).read_bytes()
        assert copy.read_bytes()[: len(before)] == before
    blockmap.verify(copy)
    # upgraded: version 3, the same entries and columns
    upgraded = tmp_path / "upgraded"
    Dataset.upgrade(copy, upgraded)
    new = Dataset(upgraded)
    assert (new.version, len(new), new.fields) == (4, len(grown), grown.fields)
    for i in range(len(grown)):
        for field in grown.fields:
            assert new.field(field)[i] == grown.field(field)[i]
    for column in grown.columns:
        assert new.column(column).tolist() == grown.column(column).tolist()


def _with_trailer(data, commit_at, count):
    head = b"BMDSEND2" + struct.pack("<QQ", commit_at, count)
    return data[:-32] + head + struct.pack("<II", zlib.crc32(head), 0)


def test_offsets_no_file_holds_are_no_error_of_the_system(tmp_path, maps):
    """A trailer or a commit's schema offset of 2**63 or more (which
    ``pread`` refuses with EINVAL): the file is opened by walking its
    records, with every entry; when the walk fails too, the error is a
    FormatError, never a BlockMapIOError."""
    path = tmp_path / "d"
    blockmap.save_dataset(path, maps[:3])
    good = path.read_bytes()
    bad = tmp_path / "bad"
    (commit_at, count) = struct.unpack_from("<QQ", good, len(good) - 24)
    for huge in (2**63, 2**64 - 64, 2**63 + 4096):
        bad.write_bytes(_with_trailer(good, huge, count))
        ds = Dataset(bad)
        assert (len(ds), ds.committed) == (3, False)
        assert all(ds[i] == maps[i] for i in range(3))
        # the commit's schema offset, its CRC made right
        data = bytearray(good)
        payload_len = struct.unpack_from("<Q", data, commit_at + 8)[0]
        struct.pack_into("<Q", data, commit_at + 16 + 8, huge)
        crc = zlib.crc32(bytes(data[commit_at + 16 : commit_at + 16 + payload_len]))
        struct.pack_into("<I", data, commit_at + 4, crc)
        bad.write_bytes(bytes(data))
        ds = Dataset(bad)
        assert (len(ds), ds.committed) == (3, False)
        with pytest.raises(blockmap.FormatError, match="SCHEMA"):
            blockmap.verify(bad)
        # and the schema record damaged too: no walk opens it
        (schema_at,) = struct.unpack_from("<Q", good, commit_at + 16 + 8)
        data[schema_at + 16] ^= 0xFF
        bad.write_bytes(bytes(data))
        with pytest.raises(blockmap.FormatError):
            Dataset(bad)
        with pytest.raises(blockmap.FormatError):
            with DatasetWriter(bad, append=True):
                pass
