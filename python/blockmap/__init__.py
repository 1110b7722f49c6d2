"""blockmap: labeled block tensors (TensorMap) whose data moves without being copied.

The data model is metatensor's: :class:`Labels` name the entries of each axis,
a :class:`TensorBlock` is a labeled N-d array with optional gradient blocks,
and a :class:`TensorMap` is a set of blocks keyed by Labels.
"""

import functools
import importlib
import types
from typing import TYPE_CHECKING

from . import _hooks, _optional, _reduction
from ._blockmap import (
    Labels,
    LabelsEntry,
    TensorBlock,
    TensorMap,
    __version__,
    get_auto_share_threshold,
    join,
    join_blocks,
    set_auto_share_threshold,
    split,
    split_block,
)
from ._reduction import share_memory
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
    ExistingFileError,
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

if TYPE_CHECKING:
    # what __getattr__ serves, declared for type checkers (the signatures of
    # the operations are in operations.pyi; tests/python/typing checks both)
    # isort: off
    from .metatensor import from_metatensor as from_metatensor
    from .metatensor_torch import from_metatensor_torch as from_metatensor_torch
    from .operations import (
        abs as abs,
        add as add,
        allclose as allclose,
        allclose_block as allclose_block,
        allclose_block_raise as allclose_block_raise,
        allclose_raise as allclose_raise,
        append_dimension as append_dimension,
        block_from_array as block_from_array,
        checks_enabled as checks_enabled,
        detach as detach,
        detach_block as detach_block,
        divide as divide,
        dot as dot,
        drop_blocks as drop_blocks,
        drop_empty_blocks as drop_empty_blocks,
        empty_like as empty_like,
        empty_like_block as empty_like_block,
        equal as equal,
        equal_block as equal_block,
        equal_block_raise as equal_block_raise,
        equal_metadata as equal_metadata,
        equal_metadata_block as equal_metadata_block,
        equal_metadata_block_raise as equal_metadata_block_raise,
        equal_metadata_raise as equal_metadata_raise,
        equal_raise as equal_raise,
        filter_blocks as filter_blocks,
        insert_dimension as insert_dimension,
        is_contiguous as is_contiguous,
        is_contiguous_block as is_contiguous_block,
        lstsq as lstsq,
        make_contiguous as make_contiguous,
        make_contiguous_block as make_contiguous_block,
        mean_over_properties as mean_over_properties,
        mean_over_properties_block as mean_over_properties_block,
        mean_over_samples as mean_over_samples,
        mean_over_samples_block as mean_over_samples_block,
        multiply as multiply,
        one_hot as one_hot,
        ones_like as ones_like,
        ones_like_block as ones_like_block,
        permute_dimensions as permute_dimensions,
        pow as pow,
        random_uniform_like as random_uniform_like,
        random_uniform_like_block as random_uniform_like_block,
        remove_dimension as remove_dimension,
        remove_gradients as remove_gradients,
        remove_gradients_block as remove_gradients_block,
        rename_dimension as rename_dimension,
        requires_grad as requires_grad,
        requires_grad_block as requires_grad_block,
        slice as slice,
        slice_block as slice_block,
        solve as solve,
        sort as sort,
        sort_block as sort_block,
        std_over_properties as std_over_properties,
        std_over_properties_block as std_over_properties_block,
        std_over_samples as std_over_samples,
        std_over_samples_block as std_over_samples_block,
        subtract as subtract,
        sum_over_properties as sum_over_properties,
        sum_over_properties_block as sum_over_properties_block,
        sum_over_samples as sum_over_samples,
        sum_over_samples_block as sum_over_samples_block,
        unique_metadata as unique_metadata,
        unique_metadata_block as unique_metadata_block,
        unsafe_disable_checks as unsafe_disable_checks,
        unsafe_enable_checks as unsafe_enable_checks,
        var_over_properties as var_over_properties,
        var_over_properties_block as var_over_properties_block,
        var_over_samples as var_over_samples,
        var_over_samples_block as var_over_samples_block,
        zeros_like as zeros_like,
        zeros_like_block as zeros_like_block,
    )
    # isort: on


#: whether metatensor-operations is installed, for :mod:`blockmap.operations`
#: (found without importing it: ``import blockmap`` stays light)
HAS_METATENSOR_OPERATIONS = _optional.find_spec("metatensor_operations") is not None

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
                f"blockmap.{name} comes from metatensor-operations, which is not installed: "
                + _optional.install_hint("metatensor-operations", "operations"),
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
    """The public names: ``__all__``, the names served on first use, the
    public submodules imported so far, and the module's dunder attributes
    (not ``functools``, ``importlib`` and the other imports of this file)."""
    names = set(__all__) | set(_BRIDGES)
    if HAS_METATENSOR_OPERATIONS:
        names |= _OPERATIONS | {"operations"}
    for name, value in globals().items():
        if name.startswith("__") and name.endswith("__"):
            names.add(name)
        elif (
            isinstance(value, types.ModuleType)
            and not name.startswith("_")
            and value.__name__ == f"{__name__}.{name}"
        ):
            names.add(name)
    return sorted(names)


_reduction.register()
for _module in _reduction.LOKY_REDUCTION_MODULES:
    _hooks.when_imported(
        _module, functools.partial(_reduction.register_loky, _module), key="blockmap loky"
    )
_hooks.when_imported(
    "distributed", functools.partial(importlib.import_module, "blockmap.dask"), key="blockmap.dask"
)

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
    "ExistingFileError",
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
