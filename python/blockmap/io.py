"""Saving and loading ``.mts`` files (metatensor's format) and in-memory buffers.

Files flow both ways with metatensor-core: what it writes, blockmap reads, and
the other way around. What blockmap adds:

- saving copies array memory into the file once, a piece at a time (never
  the whole data in memory; each CRC describes the bytes written, even when
  another thread writes the values meanwhile), into a temporary file in the
  target's directory that takes the target's place once complete and synced,
  so a failed or killed save leaves nothing half-written and never truncates
  a file that something has mapped;
- payloads are 64-byte aligned in the archive, so ``load(path, mmap=True)``
  maps the file and views every array in place: its cost does not grow with
  the data (it does not check CRCs; :func:`verify` does);
- ``load_buffer`` views the caller's memory for aligned, uncompressed,
  native-endian entries instead of copying them.

The functions are the native module's (also at the top of :mod:`blockmap`);
this module gathers them, and adds metatensor-core's ``metatensor.io``
functions that choose the array type through a ``create_array`` callback
(``load_custom_array`` and its buffer and block forms, with
``create_numpy_array`` / ``create_torch_array``), mapped onto
``load(..., arrays=...)``. See ``docs/format.md`` for the format as blockmap
writes and reads it.
"""

import sys
from typing import Any

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
from .exceptions import BlockMapTypeError


class _ArrayCreator:
    """The array type a ``create_array`` argument stands for.

    In metatensor-core, ``create_numpy_array`` and ``create_torch_array``
    are C callbacks its loader calls for each array; blockmap loads into its
    own memory and gives it out as numpy arrays or torch tensors, so these
    two name the array type, for :func:`load_custom_array` and its forms.
    """

    def __init__(self, arrays: str) -> None:
        self.arrays = arrays
        self.__name__ = f"create_{arrays}_array"
        self.__qualname__ = self.__name__
        self.__doc__ = (
            f"metatensor-core's ``metatensor.io.{self.__name__}``: given as ``create_array`` "
            f"to :func:`load_custom_array` (or its buffer and block forms), loads "
            f"{arrays} arrays. Not called: blockmap loads into its own memory.\n\n"
            "Parameters\n----------\n*args\n    Anything: the call is refused.\n\n"
            "Raises\n------\nBlockMapTypeError\n    Always: it names an array type, it is "
            "not called."
        )

    def __repr__(self) -> str:
        return f"<blockmap.io.{self.__name__}>"

    def __call__(self, *args: Any) -> None:
        raise BlockMapTypeError(
            f"blockmap.io.{self.__name__} is not called: give it to "
            f"blockmap.io.load_custom_array (or its buffer and block forms) as "
            f"create_array, which then loads {self.arrays} arrays"
        )


create_numpy_array = _ArrayCreator("numpy")
create_torch_array = _ArrayCreator("torch")


def _arrays(create_array: Any) -> str:
    """``"numpy"`` or ``"torch"`` for blockmap's or metatensor-core's
    ``create_numpy_array`` / ``create_torch_array``."""
    if isinstance(create_array, _ArrayCreator):
        return create_array.arrays
    metatensor_io = sys.modules.get("metatensor.io")
    if metatensor_io is not None:
        for arrays in ("numpy", "torch"):
            if create_array is getattr(metatensor_io, f"create_{arrays}_array", None):
                return arrays
    raise BlockMapTypeError(
        "create_array must be create_numpy_array or create_torch_array (blockmap's or "
        "metatensor.io's): blockmap loads into numpy arrays or torch tensors and does not "
        f"call other array callbacks, got {create_array!r}"
    )


def load_custom_array(path: Any, create_array: Any) -> Any:
    """metatensor-core's ``metatensor.io.load_custom_array``: the map saved
    at ``path``, with arrays of the type ``create_array`` names
    (:data:`create_numpy_array` or :data:`create_torch_array`, blockmap's or
    metatensor-core's): ``load(path, arrays=...)``.

    Parameters
    ----------
    path : str, os.PathLike or binary file object
        The path, or a readable binary file object.
    create_array : create_numpy_array or create_torch_array
        The array type, blockmap's or ``metatensor.io``'s.

    Returns
    -------
    TensorMap
        The map.

    Raises
    ------
    BlockMapTypeError
        If ``create_array`` is not one of the two creators, or an argument
        has the wrong type.
    MissingFileError
        If ``path`` does not exist.
    BlockMapIOError
        If the file cannot be read.
    FormatError
        If the data is not a valid archive of a map.
    ValidationError
        If the data breaks the data model's rules.
    BlockMapMemoryError
        If memory for the data cannot be allocated.
    ModuleNotFoundError
        If torch arrays are asked for and torch is not installed.
    """
    return load(path, arrays=_arrays(create_array))


def _writable(buffer: Any) -> Any:
    """``buffer``, copied once into a ``bytearray`` when it is read-only:
    metatensor-core's callbacks fill fresh, writable arrays (and torch has
    no read-only tensors), where ``load_buffer`` would view read-only
    memory."""
    try:
        readonly = memoryview(buffer).readonly
    except TypeError:
        return buffer  # refused by the loader with its own error
    return bytearray(buffer) if readonly else buffer


def load_buffer_custom_array(buffer: Any, create_array: Any) -> Any:
    """metatensor-core's ``load_buffer_custom_array``:
    ``load_buffer(buffer, arrays=...)`` (a read-only buffer is copied once:
    the arrays are writable there).

    Parameters
    ----------
    buffer : bytes-like object
        The archive (copied once when read-only).
    create_array : create_numpy_array or create_torch_array
        The array type, blockmap's or ``metatensor.io``'s.

    Returns
    -------
    TensorMap
        The map.

    Raises
    ------
    BlockMapTypeError
        If ``create_array`` is not one of the two creators, or an argument
        has the wrong type.
    FormatError
        If the data is not a valid archive of a map.
    ValidationError
        If the data breaks the data model's rules.
    BlockMapMemoryError
        If memory for the data cannot be allocated.
    ModuleNotFoundError
        If torch arrays are asked for and torch is not installed.
    """
    arrays = _arrays(create_array)
    return load_buffer(_writable(buffer), arrays=arrays)


def load_block_custom_array(path: Any, create_array: Any) -> Any:
    """metatensor-core's ``load_block_custom_array``:
    ``load_block(path, arrays=...)``.

    Parameters
    ----------
    path : str, os.PathLike or binary file object
        The path, or a readable binary file object.
    create_array : create_numpy_array or create_torch_array
        The array type, blockmap's or ``metatensor.io``'s.

    Returns
    -------
    TensorBlock
        The block.

    Raises
    ------
    BlockMapTypeError
        If ``create_array`` is not one of the two creators, or an argument
        has the wrong type.
    MissingFileError
        If ``path`` does not exist.
    BlockMapIOError
        If the file cannot be read.
    FormatError
        If the data is not a valid archive of a block.
    ValidationError
        If the data breaks the data model's rules.
    BlockMapMemoryError
        If memory for the data cannot be allocated.
    ModuleNotFoundError
        If torch arrays are asked for and torch is not installed.
    """
    return load_block(path, arrays=_arrays(create_array))


def load_block_buffer_custom_array(buffer: Any, create_array: Any) -> Any:
    """metatensor-core's ``load_block_buffer_custom_array``:
    ``load_block_buffer(buffer, arrays=...)`` (a read-only buffer is copied
    once: the arrays are writable there).

    Parameters
    ----------
    buffer : bytes-like object
        The archive (copied once when read-only).
    create_array : create_numpy_array or create_torch_array
        The array type, blockmap's or ``metatensor.io``'s.

    Returns
    -------
    TensorBlock
        The block.

    Raises
    ------
    BlockMapTypeError
        If ``create_array`` is not one of the two creators, or an argument
        has the wrong type.
    FormatError
        If the data is not a valid archive of a block.
    ValidationError
        If the data breaks the data model's rules.
    BlockMapMemoryError
        If memory for the data cannot be allocated.
    ModuleNotFoundError
        If torch arrays are asked for and torch is not installed.
    """
    arrays = _arrays(create_array)
    return load_block_buffer(_writable(buffer), arrays=arrays)


__all__ = [
    "create_numpy_array",
    "create_torch_array",
    "load_block_buffer_custom_array",
    "load_block_custom_array",
    "load_buffer_custom_array",
    "load_custom_array",
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
