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

The functions are the native module's (also at the top of :mod:`blockmap`);
this module gathers them. See ``docs/format.md`` for the format as blockmap
writes and reads it.
"""

from ._blockmap import (
    load,
    load_block,
    load_block_buffer,
    load_buffer,
    load_labels,
    load_labels_buffer,
    save,
    save_buffer,
    verify,
)

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
