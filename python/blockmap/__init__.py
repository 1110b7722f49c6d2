"""blockmap: labeled block tensors (TensorMap) whose data moves without being copied.

The data model is metatensor's: :class:`Labels` name the entries of each axis,
a :class:`TensorBlock` is a labeled N-d array with optional gradient blocks,
and a :class:`TensorMap` is a set of blocks keyed by Labels.
"""

import functools
import importlib
import importlib.util

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
from ._shared import get_auto_share_threshold, set_auto_share_threshold, share_memory
from .dataset import Dataset, DatasetWriter, save_dataset
from .exceptions import (
    BlockMapAssertionError,
    BlockMapError,
    BlockMapIndexError,
    BlockMapIOError,
    BlockMapMemoryError,
    BlockMapNotImplementedError,
    BlockMapOverflowError,
    BlockMapRuntimeError,
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


def _has_metatensor_operations() -> bool:
    try:
        return importlib.util.find_spec("metatensor_operations") is not None
    except (ImportError, ValueError):
        # an import hook refusing it, or a module without a spec
        return False


#: whether metatensor-operations is installed, for :mod:`blockmap.operations`
#: (found without importing it: ``import blockmap`` stays light)
HAS_METATENSOR_OPERATIONS = _has_metatensor_operations()

# the names that `metatensor` re-exports from metatensor-operations 0.5; join,
# join_blocks, split and split_block are blockmap's own
_OPERATIONS = frozenset(
    """
    NotEqualError abs add allclose allclose_block allclose_block_raise allclose_raise
    append_dimension block_from_array checks_enabled detach detach_block divide dot
    drop_blocks drop_empty_blocks empty_like empty_like_block equal equal_block
    equal_block_raise equal_metadata equal_metadata_block equal_metadata_block_raise
    equal_metadata_raise equal_raise filter_blocks insert_dimension is_contiguous
    is_contiguous_block lstsq make_contiguous make_contiguous_block
    mean_over_properties mean_over_properties_block mean_over_samples
    mean_over_samples_block multiply one_hot ones_like ones_like_block
    permute_dimensions pow random_uniform_like random_uniform_like_block
    remove_dimension remove_gradients remove_gradients_block rename_dimension
    requires_grad requires_grad_block slice slice_block solve sort sort_block
    std_over_properties std_over_properties_block std_over_samples
    std_over_samples_block subtract sum_over_properties sum_over_properties_block
    sum_over_samples sum_over_samples_block unique_metadata unique_metadata_block
    unsafe_disable_checks unsafe_enable_checks var_over_properties
    var_over_properties_block var_over_samples var_over_samples_block zeros_like
    zeros_like_block
    """.split()
)


# the bridges from metatensor's objects, imported on first use
_BRIDGES = {
    "from_metatensor": "blockmap.metatensor",
    "from_metatensor_torch": "blockmap.metatensor_torch",
}


def __getattr__(name: str) -> object:
    """``blockmap.<op>``: metatensor-operations' ``op`` on blockmap's classes,
    imported on first use (see :mod:`blockmap.operations`);
    ``blockmap.from_metatensor`` (:mod:`blockmap.metatensor`) and
    ``blockmap.from_metatensor_torch`` (:mod:`blockmap.metatensor_torch`,
    which imports torch only when called); the submodules' names stay."""
    if name in _BRIDGES:
        value = getattr(importlib.import_module(_BRIDGES[name]), name)
        globals()[name] = value
        return value
    if name in _OPERATIONS or name == "operations":
        if not HAS_METATENSOR_OPERATIONS:
            raise AttributeError(
                f"blockmap.{name} comes from metatensor-operations, which is not "
                "installed: `pip install metatensor-operations`",
                name=name,
                obj=__name__,
            )
        operations = importlib.import_module("blockmap.operations")
        if name == "operations":
            return operations
        value = getattr(operations, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'blockmap' has no attribute '{name}'", name=name, obj=__name__)


def __dir__() -> list[str]:
    names = set(globals()) | set(_BRIDGES)
    if HAS_METATENSOR_OPERATIONS:
        names |= _OPERATIONS | {"operations"}
    return sorted(names)


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
    "BlockMapRuntimeError",
    "BlockMapOverflowError",
    "BlockMapTypeError",
    "Dataset",
    "DatasetWriter",
    "FormatError",
    "HAS_METATENSOR_OPERATIONS",
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
    "save_dataset",
    "set_auto_share_threshold",
    "share_memory",
    "verify",
]
