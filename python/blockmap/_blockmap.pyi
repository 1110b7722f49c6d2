"""Type stubs for the native module ``blockmap._blockmap``.

Everything here is re-exported from :mod:`blockmap`; import it from there.
"""

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any, ClassVar, Literal, Self, SupportsIndex, TypeAlias, final, overload

import numpy as np
import numpy.typing as npt
import torch  # type: ignore[import-not-found, unused-ignore]
from typing_extensions import Buffer, disjoint_base

__all__ = [
    "__version__",
    "join",
    "join_blocks",
    "split",
    "split_block",
    "get_auto_share_threshold",
    "set_auto_share_threshold",
    "BlockMapError",
    "ValidationError",
    "BlockMapTypeError",
    "FormatError",
    "BlockMapIOError",
    "MissingFileError",
    "ExistingFileError",
    "BlockMapMemoryError",
    "InternalError",
    "BlockMapIndexError",
    "BlockMapOverflowError",
    "BlockMapAssertionError",
    "NotEqualError",
    "BlockMapNotImplementedError",
    "BlockMapRuntimeError",
    "Labels",
    "LabelsEntry",
    "TensorBlock",
    "TensorMap",
    "save",
    "save_buffer",
    "load",
    "load_block",
    "load_labels",
    "load_buffer",
    "load_block_buffer",
    "load_labels_buffer",
    "verify",
    "_as_torch",
    "_reconstruct",
    "_set_pickle_piece_size",
    "_foreign",
    "_shared_parts",
    "_attach_shared",
    "_auto_shares",
    "_zip_members",
    "_inspect_dataset",
    "_Dataset",
    "_ForeignZip",
    "DatasetWriter",
]

__version__: str

_File: TypeAlias = str | os.PathLike[str] | IO[bytes]
_Data: TypeAlias = TensorMap | TensorBlock | Labels
_Arrays: TypeAlias = Literal["numpy", "torch"]

# what values are: numpy arrays, or torch tensors for torch-backed objects
# (``arrays="torch"``, or made from tensors: docs/torch.md); without torch
# installed, ``torch.Tensor`` is ``Any`` for type checkers
_Values: TypeAlias = npt.NDArray[Any] | torch.Tensor
_LabelsValues: TypeAlias = npt.NDArray[np.int32] | torch.Tensor

def save(file: _File, data: _Data, use_numpy: object = False, *, durable: bool = True) -> None:
    """Save a TensorMap, TensorBlock or Labels to a path or binary file object.

    Atomic for a path; with ``durable`` (the default), synced to the disk before
    returning. A file object is cut off at its position before it is written.
    """

def save_buffer(data: _Data, use_numpy: object = False) -> memoryview:
    """The ``.mts`` archive of ``data``, in a memoryview over memory blockmap owns."""

def load(
    file: _File,
    use_numpy: object = False,
    *,
    mmap: bool | Literal["r", "c"] = False,
    arrays: _Arrays | None = None,
    keys: Labels | None = None,
) -> TensorMap:
    """Load a TensorMap from a path or a binary file object."""

def load_block(
    file: _File,
    use_numpy: object = False,
    *,
    mmap: bool | Literal["r", "c"] = False,
    arrays: _Arrays | None = None,
) -> TensorBlock:
    """Load a TensorBlock saved on its own."""

def load_labels(file: _File) -> Labels:
    """Load Labels saved on their own (a bare ``.npy`` file)."""

def load_buffer(
    buffer: Buffer,
    use_numpy: object = False,
    *,
    arrays: _Arrays | None = None,
    keys: Labels | None = None,
) -> TensorMap:
    """Load a TensorMap from a bytes-like object, viewing it where possible."""

def load_block_buffer(
    buffer: Buffer, use_numpy: object = False, *, arrays: _Arrays | None = None
) -> TensorBlock:
    """Load a TensorBlock from a bytes-like object."""

def load_labels_buffer(buffer: Buffer) -> Labels:
    """Load Labels from a bytes-like object holding a ``.npy`` file."""

def verify(file: str | os.PathLike[str]) -> None:
    """Check a ``.mts`` file or a dataset file completely."""

def _as_torch(obj: Any, flagged: list[int]) -> Any: ...
def _reconstruct(version: int, *args: Any) -> Any:
    """Rebuild a pickled Labels, TensorBlock or TensorMap (see docs/pickle.md)."""

def _set_pickle_piece_size(nbytes: int) -> int: ...
def _foreign(obj: object) -> str | None: ...
def _shared_parts(
    data: _Data,
) -> tuple[bytes, list[int], list[tuple[int, int, int, bool] | None], bytes] | None: ...
def _auto_shares(obj: object) -> bool: ...
def get_auto_share_threshold() -> int | None:
    """The threshold of :func:`set_auto_share_threshold` (bytes), or None when off."""

def set_auto_share_threshold(nbytes: int | None) -> None:
    """Send maps and blocks of at least ``nbytes`` bytes through shared memory."""

def _attach_shared(
    header: Buffer,
    fds: Sequence[int],
    places: Sequence[tuple[int, int, int, bool] | None],
    labels: Buffer,
) -> Any: ...
def _zip_members(
    data: Buffer, npy: Sequence[str], raw: Sequence[str]
) -> tuple[list[str], list[np.ndarray[Any, Any]], list[bytes]]: ...
def _inspect_dataset(path: str | os.PathLike[str]) -> dict[str, Any]: ...

@disjoint_base
class _Dataset:
    """A dataset file, mapped (see :class:`blockmap.Dataset`)."""

    def __new__(
        cls,
        path: str | os.PathLike[str],
        mmap: bool | Literal["r", "c"] = True,
        count: int | None = None,
    ) -> Self: ...
    def __len__(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def mmap(self) -> Literal["r", "c"]: ...
    @property
    def committed(self) -> bool: ...
    def _checksum(self) -> int: ...
    def _slot(self, index: int) -> tuple[int, int]: ...
    def _get(
        self,
        index: int,
        keys: Labels | None = None,
        arrays: _Arrays | None = None,
        field: int = 0,
    ) -> TensorMap: ...
    def _prefetch(self, start: int, count: int) -> None: ...
    @property
    def version(self) -> int: ...
    @property
    def fields(self) -> list[str]: ...
    @property
    def _single(self) -> bool: ...
    @property
    def _columns(self) -> list[str]: ...
    def _column(self, name: str) -> tuple[str, bytes]: ...
    def _n_samples(self, field: int) -> bytes: ...
    @staticmethod
    def _upgrade(
        src: str | os.PathLike[str], dst: str | os.PathLike[str], overwrite: bool = False
    ) -> None: ...

@final
class _ForeignZip:
    def __new__(cls, path: str | os.PathLike[str]) -> Self: ...
    def names(self) -> list[str]: ...
    def load(self, name: str) -> TensorMap: ...
    def raw(self, name: str) -> bytes: ...

@disjoint_base
class DatasetWriter:
    """Adds maps to a dataset file, one at a time, in constant memory."""

    def __new__(
        cls,
        path: str | os.PathLike[str],
        append: bool = False,
        timeout: float | None = 0.0,
        *,
        overwrite: bool = False,
        _version: int | None = None,
    ) -> Self: ...
    def _open_here(self) -> bool: ...
    def write(
        self,
        tensor: TensorMap | None = None,
        /,
        *,
        columns: dict[str, int | float] | None = None,
        **fields: TensorMap,
    ) -> None: ...
    def commit(self) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...
    def __len__(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def id(self) -> str: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, exc_type: object, *args: object) -> bool: ...

class BlockMapError(Exception):
    """Base class of every error blockmap raises (also ``blockmap.MetatensorError``)."""

    def __init__(self, *args: object, message: str | None = None) -> None: ...
    def __reduce__(self) -> str | tuple[object, ...]: ...
    @property
    def message(self) -> str:
        """The error message (as ``metatensor.MetatensorError.message``)."""

class ValidationError(BlockMapError, ValueError):
    """Invalid data: shapes, labels, gradients or metadata that break a rule."""

class BlockMapTypeError(BlockMapError, TypeError):
    """An argument of the wrong type (e.g. an object dtype array)."""

class FormatError(ValidationError):
    """A file or buffer that is not a valid ``.mts`` archive / ``.npy`` array."""

class BlockMapIOError(BlockMapError, OSError):
    """The operating system refused a read or a write."""

class MissingFileError(BlockMapIOError, FileNotFoundError):
    """The file to load does not exist."""

class ExistingFileError(BlockMapIOError, FileExistsError):
    """A path that holds a file where blockmap would create one (a dataset
    writer without ``overwrite=True`` or ``append=True``)."""

class BlockMapMemoryError(BlockMapError, MemoryError):
    """Memory for the data could not be had (an allocation failed)."""

class InternalError(BlockMapError, RuntimeError):
    """A broken internal invariant: a bug in blockmap, to be reported."""

class BlockMapIndexError(BlockMapError, IndexError):
    """An index out of range, or not an index at all."""

class BlockMapOverflowError(BlockMapError, OverflowError):
    """An integer that does not fit where it goes."""

class BlockMapAssertionError(BlockMapError, AssertionError):
    """An argument refused by a check metatensor-core makes with ``assert``."""

class NotEqualError(BlockMapError):
    """Inputs of an operation whose metadata should match and does not."""

class BlockMapRuntimeError(BlockMapError, RuntimeError):
    """An operation torch refuses with a ``RuntimeError``."""

class BlockMapNotImplementedError(BlockMapError, NotImplementedError):
    """Something an operation does not handle (yet)."""

@final
class LabelsEntry:
    """One row of a :class:`Labels`: a named tuple of int32 values."""

    def __new__(cls, names: list[str], values: npt.NDArray[np.int32]) -> LabelsEntry: ...
    @property
    def names(self) -> list[str]:
        """Names of the dimensions."""
    @property
    def values(self) -> _LabelsValues:
        """The values, a read-only 1-D int32 array viewing the Labels' memory
        (for torch-backed Labels, an int32 tensor holding a copy)."""
    @property
    def device(self) -> Any:
        """The device of the values: ``"cpu"``, or ``torch.device("cpu")`` for torch values."""
    def print(self) -> str:
        """This entry as a named tuple: ``(name_1=value_1, name_2=value_2)``."""
    def __len__(self) -> int: ...
    def __getitem__(self, dimension: SupportsIndex | str, /) -> np.int32: ...
    def __iter__(self) -> Iterator[np.int32]: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

_Entry: TypeAlias = LabelsEntry | Sequence[SupportsIndex] | npt.NDArray[np.integer[Any]]
_Mapping: TypeAlias = npt.NDArray[np.int64]

@final
class Labels:
    """Named int32 columns, one unique row per entry.

    ``names`` is a string or a sequence of strings; ``values`` a 2-D numpy
    array of integers of shape ``(count, len(names))``. It is copied once into
    int32 memory owned by the Labels, which never changes afterwards
    (``.values`` is a read-only view of it). Every operation returns new Labels.
    """

    def __new__(
        cls,
        names: str | Sequence[str],
        values: npt.NDArray[np.integer[Any] | np.bool_] | torch.Tensor,
        assume_unique: bool = False,
    ) -> Labels: ...
    @staticmethod
    def single() -> Labels:
        """One entry with one dimension ``_`` of value 0."""
    @staticmethod
    def empty(names: str | Sequence[str]) -> Labels:
        """Labels without entries, with these dimension names."""
    @staticmethod
    def range(name: str, end: int) -> Labels:
        """One dimension ``name`` with the entries ``0 .. end - 1``."""
    @property
    def names(self) -> list[str]:
        """Names of the dimensions."""
    @property
    def values(self) -> _LabelsValues:
        """The values, a read-only ``(len(labels), len(names))`` int32 array
        (for torch-backed Labels, an int32 tensor holding a copy)."""
    @property
    def device(self) -> Any:
        """The device of the values: ``"cpu"``, or ``torch.device("cpu")`` for torch values."""
    def column(self, dimension: str) -> _LabelsValues:
        """The values of one dimension, as a read-only 1-D view."""
    def entry(self, index: SupportsIndex) -> LabelsEntry:
        """Entry ``index`` (negative: from the end)."""
    def position(self, entry: _Entry) -> int | None:
        """Position of ``entry``, or ``None`` when it is not present."""
    def print(self, max_entries: int, indent: int = 0) -> str:
        """These Labels as text, in metatensor's layout."""
    def to(
        self,
        *args: Any,
        dtype: Any = None,
        device: Any = None,
        arrays: str | None = None,
        non_blocking: bool = False,
    ) -> Labels:
        """These Labels with ``arrays="numpy"`` or ``"torch"`` values, on the CPU."""
    def append(self, name: str, values: npt.NDArray[Any]) -> Labels:
        """New Labels with a last dimension ``name`` of these ``values``."""
    def insert(self, index: SupportsIndex, name: str, values: npt.NDArray[Any]) -> Labels:
        """New Labels with a dimension ``name`` before dimension ``index``."""
    def remove(self, name: str) -> Labels:
        """New Labels without dimension ``name``."""
    def rename(self, old: str, new: str) -> Labels:
        """New Labels with dimension ``old`` named ``new``."""
    def permute(self, dimensions_indexes: Sequence[SupportsIndex]) -> Labels:
        """New Labels with the dimensions in the order ``dimensions_indexes``."""
    def union(self, other: Labels) -> Labels:
        """The entries of these Labels, then those of ``other`` they do not have."""
    def union_and_mapping(self, other: Labels) -> tuple[Labels, _Mapping, _Mapping]:
        """The union, and the position in it of each entry of both operands."""
    def intersection(self, other: Labels) -> Labels:
        """The entries both have, in the order of the one with fewer entries."""
    def intersection_and_mapping(self, other: Labels) -> tuple[Labels, _Mapping, _Mapping]:
        """The intersection, and the position in it of each entry (-1: not there)."""
    def difference(self, other: Labels) -> Labels:
        """The entries of these Labels that ``other`` does not have."""
    def difference_and_mapping(self, other: Labels) -> tuple[Labels, _Mapping]:
        """The difference, and the position in it of each entry (-1: not there)."""
    def select(self, selection: Labels) -> npt.NDArray[np.uint64]:
        """Positions of the entries matching one of the entries of ``selection``."""
    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, index: str, /) -> _LabelsValues: ...
    @overload
    def __getitem__(self, index: SupportsIndex, /) -> LabelsEntry: ...
    def __iter__(self) -> Iterator[LabelsEntry]: ...
    def __contains__(self, entry: object, /) -> bool: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __copy__(self) -> Labels: ...
    def __deepcopy__(self, memo: dict[int, Any], /) -> Labels: ...
    def __reduce_ex__(self, protocol: SupportsIndex, /) -> tuple[Any, tuple[Any, ...]]:
        """Pickle support: out-of-band buffers with protocol 5 (docs/pickle.md)."""
    @property
    def _arrays(self) -> _Arrays: ...
    def to_metatensor_torch(self) -> Any:
        """The same object as metatensor-torch's."""
    def to_metatensor(self) -> Any:
        """metatensor-core's Labels with the same entries."""
    def save(self, file: _File, *, durable: bool = True) -> None:
        """Save to a path or binary file object (see :func:`blockmap.save`)."""
    @staticmethod
    def load(file: _File) -> Labels:
        """Load from a path or binary file object (see :func:`blockmap.load_labels`)."""
    def save_buffer(self) -> memoryview:
        """The Labels as a bare ``.npy`` file in a memoryview (see :func:`blockmap.save_buffer`)."""
    @staticmethod
    def load_buffer(buffer: Buffer) -> Labels:
        """Load from a bytes-like object (see :func:`blockmap.load_labels_buffer`)."""

@final
class TensorBlock:
    """A labeled N-d array with axes ``[samples, *components, properties]``.

    ``values`` is kept without a copy when it is a C-contiguous, aligned,
    native-byte-order array: edits through either side are seen by both.
    Other inputs are copied once into such an array.
    """

    def __new__(
        cls,
        values: npt.ArrayLike | torch.Tensor,
        samples: Labels,
        components: Sequence[Labels],
        properties: Labels,
    ) -> TensorBlock: ...
    @property
    def values(self) -> _Values:
        """The values, viewing the block's memory (assigning raises AttributeError)."""
    @values.setter
    def values(self, value: object) -> None: ...
    @property
    def samples(self) -> Labels: ...
    @property
    def components(self) -> list[Labels]: ...
    @property
    def properties(self) -> Labels: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> Any:
        """A numpy dtype, or a ``torch.dtype`` for torch values."""
    @property
    def device(self) -> Any:
        """``"cpu"``, or ``torch.device("cpu")`` for torch values."""
    @property
    def is_view(self) -> bool:
        """Whether the block is a view inside a map or another block."""
    def __len__(self) -> int: ...
    def to(
        self,
        *args: Any,
        dtype: npt.DTypeLike | torch.dtype | None = None,
        device: str | torch.device | None = None,
        arrays: str | None = None,
        non_blocking: bool = False,
    ) -> TensorBlock:
        """The block with every array of ``dtype``, as numpy arrays or torch tensors."""
    @property
    def nbytes(self) -> int:
        """Bytes of array data: values, all labels, and gradients (recursively)."""
    def share_memory(self) -> Self:
        """Move the block's values into one shared-memory segment, in place."""
    def is_shared(self) -> bool:
        """Whether all of the block's data lives in shared memory."""
    def add_gradient(self, parameter: str, gradient: TensorBlock) -> None: ...
    def gradient(self, parameter: str) -> TensorBlock: ...
    def gradients_list(self) -> list[str]: ...
    def gradients(self) -> Iterator[tuple[str, TensorBlock]]: ...
    def has_gradient(self, parameter: str) -> bool: ...
    def copy(self, deep: bool = True) -> TensorBlock: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]
    def __copy__(self) -> TensorBlock: ...
    def __deepcopy__(self, memo: dict[int, Any], /) -> TensorBlock: ...
    def __reduce_ex__(self, protocol: SupportsIndex, /) -> tuple[Any, tuple[Any, ...]]:
        """Pickle support: out-of-band buffers with protocol 5 (docs/pickle.md)."""
    def to_metatensor_torch(self) -> Any:
        """The same object as metatensor-torch's (values shared)."""
    @property
    def _arrays(self) -> _Arrays: ...
    def to_metatensor(self) -> Any:
        """metatensor-core's object with the same data (arrays shared)."""
    def save(self, file: _File, use_numpy: object = False, *, durable: bool = True) -> None:
        """Save to a path or binary file object (see :func:`blockmap.save`)."""
    @staticmethod
    def load(
        file: _File,
        use_numpy: object = False,
        *,
        mmap: bool | Literal["r", "c"] = False,
        arrays: _Arrays | None = None,
    ) -> TensorBlock:
        """Load from a path or binary file object (see :func:`blockmap.load`)."""
    def save_buffer(self, use_numpy: object = False) -> memoryview:
        """The ``.mts`` data in a memoryview (see :func:`blockmap.save_buffer`)."""
    @staticmethod
    def load_buffer(
        buffer: Buffer, use_numpy: object = False, *, arrays: _Arrays | None = None
    ) -> TensorBlock:
        """Load from a bytes-like object (see :func:`blockmap.load_buffer`)."""

_Selection: TypeAlias = int | dict[str, int] | LabelsEntry | Labels | None
_KeysToMove: TypeAlias = str | Sequence[str] | Labels

@final
class TensorMap:
    """A set of :class:`TensorBlock`, one per entry of ``keys``.

    The blocks given to the constructor are not consumed: they stay usable
    and share their array memory with the map.
    """

    def __new__(cls, keys: Labels, blocks: Sequence[TensorBlock]) -> TensorMap: ...
    @property
    def keys(self) -> Labels: ...
    @property
    def sample_names(self) -> list[str]: ...
    @property
    def component_names(self) -> list[str]: ...
    @property
    def property_names(self) -> list[str]: ...
    @property
    def nbytes(self) -> int:
        """Bytes of array data: keys and every block's :attr:`TensorBlock.nbytes`."""
    def __add__(self, value: object, /) -> TensorMap: ...
    def __sub__(self, value: object, /) -> TensorMap: ...
    def __mul__(self, value: object, /) -> TensorMap: ...
    def __matmul__(self, value: object, /) -> TensorMap: ...
    def __truediv__(self, value: object, /) -> TensorMap: ...
    def __pow__(self, value: object, mod: object = None, /) -> TensorMap: ...
    def __neg__(self) -> TensorMap: ...
    def __pos__(self) -> Self: ...
    def share_memory(self) -> Self:
        """Move the map's values into one shared-memory segment, in place.

        Sending the map through multiprocessing then sends only metadata (the
        labels included) and a file descriptor; the receiver maps the same
        memory.
        """
    def is_shared(self) -> bool:
        """Whether all of the map's data lives in shared memory."""
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[TensorBlock]: ...
    def __getitem__(self, selection: _Selection, /) -> TensorBlock: ...
    def block(self, selection: _Selection = None, **kwargs: int) -> TensorBlock: ...
    def blocks(
        self, selection: _Selection | Sequence[int] = None, **kwargs: int
    ) -> list[TensorBlock]: ...
    def blocks_matching(self, selection: dict[str, int] | Labels | LabelsEntry) -> list[int]: ...
    def block_by_id(self, index: SupportsIndex) -> TensorBlock: ...
    def blocks_by_id(self, indices: Iterable[SupportsIndex]) -> list[TensorBlock]: ...
    def items(self) -> Iterator[tuple[LabelsEntry, TensorBlock]]: ...
    def keys_to_samples(
        self, keys_to_move: _KeysToMove, *, fill_value: Any = 0.0, sort_samples: bool = True
    ) -> TensorMap:
        """Merge blocks along the samples, moving ``keys_to_move`` to the sample dimensions."""
    def keys_to_properties(
        self, keys_to_move: _KeysToMove, *, fill_value: Any = 0.0, sort_samples: bool = True
    ) -> TensorMap:
        """Merge blocks along the properties, moving ``keys_to_move`` to the properties."""
    def components_to_properties(self, dimensions: str | Sequence[str]) -> TensorMap:
        """Move component dimensions to the front of the properties."""
    @property
    def dtype(self) -> Any:
        """A numpy dtype, or a ``torch.dtype`` for torch values (None without blocks)."""
    @property
    def device(self) -> Any:
        """``"cpu"``, or ``torch.device("cpu")`` for torch values."""
    @property
    def is_view(self) -> bool:
        """Always False."""
    def to(
        self,
        *args: Any,
        dtype: npt.DTypeLike | torch.dtype | None = None,
        device: str | torch.device | None = None,
        arrays: str | None = None,
        non_blocking: bool = False,
    ) -> TensorMap:
        """The map with every array of ``dtype``, as numpy arrays or torch tensors."""
    def print(self, max_keys: int) -> str:
        """The map as text with at most ``max_keys`` keys (all when negative)."""
    def info(self) -> dict[str, str]: ...
    def get_info(self, key: str) -> str | None: ...
    def set_info(self, key: str, value: str) -> None: ...
    def copy(self, deep: bool = True) -> TensorMap: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]
    def __copy__(self) -> TensorMap: ...
    def __deepcopy__(self, memo: dict[int, Any], /) -> TensorMap: ...
    def __reduce_ex__(self, protocol: SupportsIndex, /) -> tuple[Any, tuple[Any, ...]]:
        """Pickle support: out-of-band buffers with protocol 5 (docs/pickle.md)."""
    def to_metatensor_torch(self) -> Any:
        """The same object as metatensor-torch's (values shared)."""
    @property
    def _arrays(self) -> _Arrays: ...
    @property
    def _pickles_as_reference(self) -> bool: ...
    @property
    def _dataset_origin(self) -> tuple[Any, int] | None: ...
    def to_metatensor(self) -> Any:
        """metatensor-core's object with the same data (arrays shared)."""
    def save(self, file: _File, use_numpy: object = False, *, durable: bool = True) -> None:
        """Save to a path or binary file object (see :func:`blockmap.save`)."""
    @staticmethod
    def load(
        file: _File,
        use_numpy: object = False,
        *,
        mmap: bool | Literal["r", "c"] = False,
        arrays: _Arrays | None = None,
        keys: Labels | None = None,
    ) -> TensorMap:
        """Load from a path or binary file object (see :func:`blockmap.load`)."""
    def save_buffer(self, use_numpy: object = False) -> memoryview:
        """The ``.mts`` data in a memoryview (see :func:`blockmap.save_buffer`)."""
    @staticmethod
    def load_buffer(
        buffer: Buffer,
        use_numpy: object = False,
        *,
        arrays: _Arrays | None = None,
        keys: Labels | None = None,
    ) -> TensorMap:
        """Load from a bytes-like object (see :func:`blockmap.load_buffer`)."""

def join(
    tensors: list[TensorMap] | tuple[TensorMap, ...],
    axis: str,
    different_keys: str = "error",
    add_dimension: str | None = None,
    *,
    shared: bool | None = None,
) -> TensorMap:
    """Join maps along ``"samples"`` or ``"properties"`` (metatensor-operations' ``join``)."""

def join_blocks(
    blocks: list[TensorBlock] | tuple[TensorBlock, ...],
    axis: str,
    add_dimension: str | None = None,
) -> TensorBlock:
    """Join blocks along ``"samples"`` or ``"properties"``."""

_SplitSelection = Labels | list[int] | npt.NDArray[Any]

def split(tensor: TensorMap, axis: str, selections: list[_SplitSelection]) -> list[TensorMap]:
    """One map per selection along ``"samples"`` or ``"properties"`` (metatensor's ``split``)."""

def split_block(
    block: TensorBlock, axis: str, selections: list[_SplitSelection]
) -> list[TensorBlock]:
    """One block per selection along ``"samples"`` or ``"properties"``."""
