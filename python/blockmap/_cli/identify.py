"""What a file is, from its first bytes (and a zip's member names): the
first step of every command. Nothing here reads arrays.

A path is opened without blocking (a FIFO would wait for a writer) and
refused unless it is a regular file.
"""

from __future__ import annotations

import os
import re
import stat
import zipfile
from dataclasses import dataclass, field

from ..exceptions import BlockMapIOError, FormatError, MissingFileError

#: the kinds of file `blockmap info` tells apart, with their words
KINDS = {
    "tensormap": "a TensorMap (.mts)",
    "block": "a TensorBlock (.mts)",
    "labels": "Labels (.mts: a bare NPY file)",
    "dataset": "a blockmap dataset",
    "diskdataset": "a metatrain DiskDataset zip",
    "pickle": "a pickle",
    "npy": "a NumPy .npy array",
    "npz": "a NumPy .npz archive",
    "zip": "a zip archive blockmap does not read",
}

DATASET_MAGIC = b"\x89BMDS\r\n\x1a"
NPY_MAGIC = b"\x93NUMPY"
ZIP_LOCAL = b"PK\x03\x04"
V1_HEADER = b"blockmap-dataset.json"
# a DiskDataset member: metatrain's str(index), then a field
_DISK_MEMBER = re.compile(r"(0|[1-9][0-9]*)/(system\.mta|.+\.mts)")


@dataclass
class Identified:
    """A file and what its first bytes say it is."""

    path: str
    kind: str
    size: int
    #: a dataset's format version, a pickle's protocol
    version: int | None = None
    #: a zip's member names (those of a zip that is not a dataset)
    names: list[str] = field(default_factory=list)

    @property
    def words(self) -> str:
        return KINDS[self.kind]


def _head(path: str, length: int) -> tuple[bytes, int]:
    """The first ``length`` bytes of the regular file ``path`` and its size."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as error:
        raise MissingFileError(f"'{path}' does not exist") from error
    except OSError as error:
        raise BlockMapIOError(f"cannot open '{path}': {error.strerror}") from error
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = (
                "a directory"
                if stat.S_ISDIR(info.st_mode)
                else "a FIFO"
                if stat.S_ISFIFO(info.st_mode)
                else "a device or socket"
            )
            raise BlockMapIOError(f"'{path}' is {what}, not a regular file")
        try:
            return os.pread(fd, length, 0), info.st_size
        except OSError as error:
            raise BlockMapIOError(f"cannot read '{path}': {error.strerror}") from error
    finally:
        os.close(fd)


#: what Python's zipfile raises on a hostile or foreign zip (a damaged
#: record, an unknown compression method, an encrypted member: a
#: RuntimeError), turned into FormatError wherever the command uses it
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    ValueError,
    OverflowError,
    NotImplementedError,
    EOFError,
    UnicodeDecodeError,
    RuntimeError,
    KeyError,
)


def zip_names(path: str) -> list[str]:
    """The member names of the zip at ``path`` (its central directory
    only), or a :class:`FormatError` saying why it is not a readable zip."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.namelist()
    except ZIP_ERRORS as error:
        raise FormatError(
            f"'{path}' is a zip archive Python's zipfile cannot read: {error}"
        ) from error


def _zip_kind(names: list[str]) -> str:
    if "keys.npy" in names:
        return "tensormap"
    if "values.npy" in names:
        return "block"
    if any(_DISK_MEMBER.fullmatch(name) for name in names):
        return "diskdataset"
    if names and all(name.endswith(".npy") for name in names):
        return "npz"
    return "zip"


def identify(path: str | os.PathLike[str]) -> Identified:
    """What the file at ``path`` is; :class:`FormatError` for a file of no
    kind blockmap knows (with what its first bytes are), an OS error for
    one that cannot be opened or is not a regular file."""
    path = os.fsdecode(path)
    head, size = _head(path, 64)
    if head.startswith(DATASET_MAGIC):
        version = int.from_bytes(head[8:12], "little") if len(head) >= 12 else None
        return Identified(path, "dataset", size, version=version)
    if head.startswith(ZIP_LOCAL):
        name_len = int.from_bytes(head[26:28], "little") if len(head) >= 30 else 0
        if head[30 : 30 + name_len] == V1_HEADER:
            return Identified(path, "dataset", size, version=1)
        names = zip_names(path)
        return Identified(path, _zip_kind(names), size, names=names)
    if head.startswith(NPY_MAGIC):
        return Identified(path, "npy", size)
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return Identified(path, "pickle", size, version=head[1])
    if size == 0:
        raise FormatError(f"'{path}' is empty: not a file blockmap reads")
    # an archive after other bytes (read as zipfile reads it)
    try:
        is_zip = zipfile.is_zipfile(path)
    except OSError:
        is_zip = False
    if is_zip:
        names = zip_names(path)
        return Identified(path, _zip_kind(names), size, names=names)
    shown = head[:8].hex(" ")
    raise FormatError(
        f"'{path}' is not a file blockmap reads (not an .mts archive, a dataset, a pickle, "
        f"a .npy or a zip; it starts with the bytes {shown})"
    )
