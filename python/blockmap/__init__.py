"""blockmap: labeled block tensors (TensorMap) whose data moves without being copied.

The data model is metatensor's: :class:`Labels` name the entries of each axis,
a :class:`TensorBlock` is a labeled N-d array with optional gradient blocks,
and a :class:`TensorMap` is a set of blocks keyed by Labels.
"""

import functools
import importlib

from . import _hooks, _shared
from ._blockmap import (
    Labels,
    LabelsEntry,
    TensorBlock,
    TensorMap,
    __version__,
    join,
    join_blocks,
    split,
    split_block,
)
from ._shared import get_auto_share_threshold, set_auto_share_threshold
from .exceptions import (
    BlockMapAssertionError,
    BlockMapError,
    BlockMapIndexError,
    BlockMapIOError,
    BlockMapMemoryError,
    BlockMapNotImplementedError,
    BlockMapOverflowError,
    BlockMapTypeError,
    FormatError,
    InternalError,
    MetatensorError,
    MissingFileError,
    NotEqualError,
    ValidationError,
)
from .io import (
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

_shared.register()
for _module in _shared.LOKY_REDUCTION_MODULES:
    _hooks.when_imported(_module, functools.partial(_shared.register_loky, _module))
_hooks.when_imported("distributed", lambda: importlib.import_module("blockmap.dask"))

__all__ = [
    "BlockMapAssertionError",
    "BlockMapError",
    "BlockMapIOError",
    "BlockMapIndexError",
    "BlockMapMemoryError",
    "BlockMapNotImplementedError",
    "BlockMapOverflowError",
    "BlockMapTypeError",
    "FormatError",
    "InternalError",
    "Labels",
    "LabelsEntry",
    "MetatensorError",
    "MissingFileError",
    "NotEqualError",
    "TensorBlock",
    "TensorMap",
    "ValidationError",
    "__version__",
    "get_auto_share_threshold",
    "join",
    "join_blocks",
    "split",
    "split_block",
    "load",
    "load_block",
    "load_block_buffer",
    "load_buffer",
    "load_labels",
    "load_labels_buffer",
    "save",
    "save_buffer",
    "set_auto_share_threshold",
    "verify",
]
