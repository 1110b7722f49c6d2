"""blockmap: labeled block tensors (TensorMap) whose data moves without being copied.

The data model is metatensor's: :class:`Labels` name the entries of each axis,
a :class:`TensorBlock` is a labeled N-d array with optional gradient blocks,
and a :class:`TensorMap` is a set of blocks keyed by Labels.
"""

from ._blockmap import (
    BlockMapError,
    BlockMapTypeError,
    Labels,
    LabelsEntry,
    TensorBlock,
    TensorMap,
    ValidationError,
    __version__,
)

__all__ = [
    "BlockMapError",
    "BlockMapTypeError",
    "Labels",
    "LabelsEntry",
    "TensorBlock",
    "TensorMap",
    "ValidationError",
    "__version__",
]
