"""Saving and loading ``.mts`` files (metatensor's format) and in-memory buffers.

Files flow both ways with metatensor-core: what it writes, blockmap reads, and
the other way around. What blockmap adds:

- saving streams array memory straight into the file (no copy of the data in
  memory), to a temporary file beside the target that is then renamed, so a
  failed save leaves nothing half-written and never truncates a file that
  something has mapped;
- payloads are 64-byte aligned in the archive, so ``load(path, mmap=True)``
  maps the file and views every array in place: its cost does not grow with
  the data (it does not check CRCs; :func:`verify` does);
- ``load_buffer`` views the caller's memory for aligned, uncompressed,
  native-endian entries instead of copying them.

See ``docs/format.md`` for the format as blockmap writes and reads it.
"""

from __future__ import annotations

import os
from typing import IO, Any, Literal

from . import _blockmap
from ._blockmap import BlockMapTypeError, Labels, TensorBlock, TensorMap

__all__ = [
    "load",
    "load_block",
    "load_block_buffer",
    "load_buffer",
    "load_labels",
    "load_labels_buffer",
    "save",
    "save_buffer",
    "verify",
]

_Kind = Literal["tensor", "block", "labels"]
_File = str | os.PathLike[str] | IO[bytes]
_Data = TensorMap | TensorBlock | Labels


def _check_data(data: object) -> None:
    if not isinstance(data, TensorMap | TensorBlock | Labels):
        raise BlockMapTypeError(
            f"data must be a TensorMap, TensorBlock or Labels, not {type(data).__name__}"
        )


def _path(file: object) -> str | None:
    """The path in ``file``, or None when it is a file object."""
    if isinstance(file, str | os.PathLike):
        path = os.fspath(file)
        return os.fsdecode(path) if isinstance(path, bytes) else path
    return None


def save(file: _File, data: _Data) -> None:
    """Save a TensorMap, TensorBlock or Labels to ``file``.

    ``file`` is a path (``str`` or :class:`os.PathLike`) or a binary file object.
    A path that does not end with ``.mts`` gets ``.mts`` appended, as metatensor
    does. Saving to a path streams the arrays' memory straight into a temporary
    file beside the target, renamed over it once complete, with the GIL
    released. A seekable file object receives the archive in chunks of at most
    8 MB; a file object that cannot seek receives the archive built in memory.
    """
    _check_data(data)
    path = _path(file)
    if path is not None:
        if not path.endswith(".mts"):
            path += ".mts"
        _blockmap._save_path(path, data)
    elif hasattr(file, "write"):
        if getattr(file, "seekable", lambda: False)():
            _blockmap._save_file(file, data)
        else:
            file.write(_blockmap._save_buffer(data))
    else:
        raise BlockMapTypeError(
            f"file must be a path or a binary file object, not {type(file).__name__}"
        )


def save_buffer(data: _Data) -> memoryview:
    """The ``.mts`` archive of ``data``, in a memoryview over memory blockmap owns."""
    _check_data(data)
    return _blockmap._save_buffer(data)


def _load(file: _File, kind: _Kind, mmap: bool) -> Any:
    path = _path(file)
    if path is not None:
        return _blockmap._load_path(path, kind, mmap)
    if hasattr(file, "read"):
        if mmap:
            raise BlockMapTypeError("mmap=True needs a path, not a file object")
        return _blockmap._load_buffer(file.read(), kind)
    raise BlockMapTypeError(
        f"file must be a path or a binary file object, not {type(file).__name__}"
    )


def load(file: _File, mmap: bool = False) -> TensorMap:
    """Load a TensorMap from a path or a binary file object.

    With ``mmap=True`` (paths only) the file is mapped instead of read: every
    uncompressed, aligned, native-endian array is a view of the mapping
    (copy-on-write: writing to it never changes the file), other arrays are
    copied. Mapping costs only the metadata; CRCs are not checked (use
    :func:`verify`). Without it, the data is read once into memory blockmap
    owns and every CRC is checked.
    """
    return _load(file, "tensor", mmap)


def load_block(file: _File, mmap: bool = False) -> TensorBlock:
    """Load a TensorBlock saved on its own; see :func:`load`."""
    return _load(file, "block", mmap)


def load_labels(file: _File) -> Labels:
    """Load Labels saved on their own (a bare ``.npy`` file)."""
    return _load(file, "labels", False)


def load_buffer(buffer: Any) -> TensorMap:
    """Load a TensorMap from a bytes-like object (``bytes``, ``bytearray``,
    ``memoryview``, numpy array, ...).

    Uncompressed, aligned, native-endian arrays are views of ``buffer``
    (read-only when it is), which they keep alive; others are copied.
    """
    return _blockmap._load_buffer(buffer, "tensor")


def load_block_buffer(buffer: Any) -> TensorBlock:
    """Load a TensorBlock from a bytes-like object; see :func:`load_buffer`."""
    return _blockmap._load_buffer(buffer, "block")


def load_labels_buffer(buffer: Any) -> Labels:
    """Load Labels from a bytes-like object holding a ``.npy`` file."""
    return _blockmap._load_buffer(buffer, "labels")


def verify(file: str | os.PathLike[str]) -> None:
    """Check a ``.mts`` file completely: structure, every CRC, and the data
    model's rules. Raises :class:`blockmap.FormatError` (a ``ValueError``)
    when something is wrong."""
    path = _path(file)
    if path is None:
        raise BlockMapTypeError(f"file must be a path, not {type(file).__name__}")
    _blockmap._verify_path(path)
