"""Zip archives written byte by byte, whose central directory may say what
the bytes do not: entries over the same bytes (one local header listed many
times, or local headers whose extra fields all lead to one shared block of
data), local headers naming other entries, archives cut off inside an entry.
The test files of tests/python/io build their hostile archives from these;
child processes import this module too (it needs numpy only).
"""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np

LOCAL = 0x04034B50
CENTRAL = 0x02014B50
END = 0x06054B50
ZIP64_END = 0x06064B50
ZIP64_LOCATOR = 0x07064B50
# 2000-01-01 00:00, as metatensor writes it
DOS_DATE = ((2000 - 1980) << 9) | (1 << 5) | 1


def npy(descr, shape, body: bytes) -> bytes:
    """An NPY 1.0 file, its header padded as blockmap and numpy pad it."""
    text = f"{{'descr': {descr!r}, 'fortran_order': False, 'shape': {shape!r}, }}".encode()
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + body


def labels_npy(names, rows) -> bytes:
    rows = np.asarray(rows, dtype=np.int32).reshape(-1, len(names))
    return npy([(name, "<i4") for name in names], (len(rows),), rows.tobytes())


def array_npy(array) -> bytes:
    array = np.ascontiguousarray(array)
    return npy(array.dtype.str, array.shape, array.tobytes())


def local_header(name: bytes, data: bytes, *, extra: bytes = b"", method: int = 0) -> bytes:
    crc = zlib.crc32(data)
    return (
        struct.pack(
            "<IHHHHHIIIHH",
            LOCAL,
            20,
            0,
            method,
            0,
            DOS_DATE,
            crc,
            len(data),
            len(data),
            len(name),
            len(extra),
        )
        + name
        + extra
    )


class Zip:
    """An archive built record by record: :meth:`add` writes an entry (its
    local header and data) and lists it; :meth:`list` lists an entry over
    any local header; :meth:`finish` writes the central directory and the
    end record."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.listed: list[tuple[bytes, int, int, int, int]] = []

    def raw(self, data: bytes) -> int:
        at = len(self.out)
        self.out += data
        return at

    def add(self, name: str, data: bytes, *, method: int = 0) -> int:
        """Write entry ``name`` here and list it; returns where its local
        header starts."""
        at = self.raw(local_header(name.encode(), data, method=method) + data)
        self.list(name, at, data, method=method)
        return at

    def list(self, name: str, at: int, data: bytes, *, method: int = 0) -> None:
        """List entry ``name`` (of ``data``'s size and CRC) over the local
        header at ``at``."""
        self.listed.append((name.encode(), at, len(data), zlib.crc32(data), method))

    def shared(self, names: list[str], data: bytes) -> None:
        """One local header per name, each naming its entry truthfully, all
        leading to one copy of ``data``: each header's extra field spans
        the headers after it, up to the data."""
        starts = []
        at = len(self.out)
        for name in names:
            starts.append(at)
            at += 30 + len(name)
        data_at = at
        for name, start in zip(names, starts, strict=True):
            extra = bytes(data_at - (start + 30 + len(name)))
            header = local_header(name.encode(), data, extra=extra)
            # the fixed part and the name: the extra field is the headers
            # that follow (and, for the last, nothing)
            self.raw(header[: 30 + len(name)])
            self.list(name, start, data)
        self.raw(data)

    def finish(self, comment: bytes = b"") -> bytes:
        central = bytearray()
        for name, at, size, crc, method in self.listed:
            central += struct.pack(
                "<IHHHHHHIIIHHHHHII",
                CENTRAL,
                20,
                20,
                0,
                method,
                0,
                DOS_DATE,
                crc,
                size,
                size,
                len(name),
                0,
                0,
                0,
                0,
                0o100644 << 16,
                at,
            )
            central += name
        cd_offset = len(self.out)
        count = len(self.listed)
        end = struct.pack(
            "<IHHHHIIH", END, 0, 0, count, count, len(central), cd_offset, len(comment)
        )
        return bytes(self.out + central + end + comment)


# --------------------------------------------- maps whose blocks share bytes

#: the sizes of the issue's example: a 1.7 MB file of 400 blocks over one
#: entry's bytes
BLOCKS = 400
ROWS = 140_000


def _block_entries(rows: int) -> dict[str, bytes]:
    return {
        "values.npy": array_npy(np.arange(rows, dtype=np.float64).reshape(rows, 1)),
        "samples.npy": labels_npy(["s"], np.arange(rows)),
        "properties.npy": labels_npy(["p"], [[0]]),
    }


def aliased_map(how: str, blocks: int = BLOCKS, rows: int = ROWS) -> bytes:
    """The archive of a map of ``blocks`` blocks of ``rows`` samples whose
    entries all lie over the bytes of block 0's: ``how`` is ``"one
    header"`` (every block's entries listed over block 0's local headers)
    or ``"own headers"`` (each entry has a local header naming it, whose
    extra field leads to the shared data)."""
    archive = Zip()
    archive.add("keys.npy", labels_npy(["k"], np.arange(blocks)))
    for entry, data in _block_entries(rows).items():
        names = [f"blocks/{b}/{entry}" for b in range(blocks)]
        if how == "one header":
            at = archive.add(names[0], data)
            for name in names[1:]:
                archive.list(name, at, data)
        elif how == "own headers":
            archive.shared(names, data)
        else:
            raise ValueError(how)
    return archive.finish()


def aliased_diskdataset(how: str, samples: int = 100, payload: bytes | None = None) -> bytes:
    """metatrain's DiskDataset zip of ``samples`` members ``<i>/energy.mts``
    over the bytes of one (``how`` as in :func:`aliased_map`)."""
    if payload is None:
        payload = wrapped_archive(ROWS)
    archive = Zip()
    names = [f"{i}/energy.mts" for i in range(samples)]
    if how == "one header":
        at = archive.add(names[0], payload)
        for name in names[1:]:
            archive.list(name, at, payload)
    else:
        archive.shared(names, payload)
    return archive.finish()


def wrapped_archive(rows: int) -> bytes:
    """An `.mts` archive of one block of ``rows`` samples wrapped in an NPY
    array of bytes, as metatrain's DiskDatasetWriter stores a target."""
    archive = Zip()
    archive.add("keys.npy", labels_npy(["k"], [[0]]))
    for entry, data in _block_entries(rows).items():
        archive.add(f"blocks/0/{entry}", data)
    mts = archive.finish()
    return npy("|u1", (len(mts),), mts)


def version1_dataset(map_archive: bytes) -> bytes:
    """A dataset file of format version 1 (docs/format.md) holding one map,
    ``map_archive``: the header entry, ``maps/0.mts`` 64-byte aligned, the
    index, the central directory and the ZIP64 end records whose comment
    names the index."""
    identity = "0123456789abcdef" * 2
    header = json.dumps({"format": "blockmap dataset", "version": 1, "id": identity}).encode()
    out = bytearray()
    listed = []

    def entry(name: bytes, data: bytes, align: bool) -> int:
        at = len(out)
        extra = b""
        if align:
            pad = -(at + 30 + len(name)) % 64
            if pad and pad < 4:
                pad += 64
            extra = struct.pack("<HH", 0xA11E, pad - 4) + bytes(pad - 4) if pad else b""
        out.extend(local_header(name, data, extra=extra) + data)
        listed.append((name, at, data))
        return at

    entry(b"blockmap-dataset.json", header, False)
    map_at = entry(b"maps/0.mts", map_archive, True)
    data_at = map_at + 30 + len(b"maps/0.mts")
    data_at += struct.unpack_from("<H", out, map_at + 28)[0]
    index = np.array([[data_at, len(map_archive)]], dtype="<u8")
    index_at = entry(b"blockmap-index.npy", array_npy(index), False)
    central = bytearray()
    for name, at, data in listed:
        central += struct.pack(
            "<IHHHHHHIIIHHHHHII",
            CENTRAL,
            45,
            45,
            0,
            0,
            0,
            DOS_DATE,
            zlib.crc32(data),
            len(data),
            len(data),
            len(name),
            0,
            0,
            0,
            0,
            0o100644 << 16,
            at,
        )
        central += name
    cd_offset = len(out)
    out += central
    zip64_at = len(out)
    count = len(listed)
    out += struct.pack(
        "<IQHHIIQQQQ", ZIP64_END, 44, 45, 45, 0, 0, count, count, len(central), cd_offset
    )
    out += struct.pack("<IIQI", ZIP64_LOCATOR, 0, zip64_at, 1)
    comment = f"blockmap-dataset 1 {identity} {index_at} 1".encode()
    out += struct.pack("<IHHHHIIH", END, 0, 0, count, count, len(central), cd_offset, len(comment))
    return bytes(out + comment)
