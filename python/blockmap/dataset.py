"""Datasets: many TensorMaps in one file, mapped, appended to, and sent to
other processes as a reference.

- :class:`DatasetWriter` (``with DatasetWriter(path) as writer:
  writer.write(tensor)``) and :func:`save_dataset` write one;
- :class:`Dataset` maps one: ``len(ds)``, ``ds[i]`` (a :class:`TensorMap`
  viewing the mapping, for the cost of that map's metadata), slices,
  iteration, ``ds.load(i, keys=...)`` for selected blocks. It is a
  map-style ``torch.utils.data.Dataset`` as it is (``len`` and
  ``__getitem__``);
- :meth:`Dataset.from_files` and :meth:`Dataset.from_diskdataset` convert a
  folder of ``.mts`` files and metatrain's ``DiskDataset`` zip.

A :class:`Dataset` pickles as a reference (its class and attributes, path,
identity, number of maps and a checksum of their places in the file and of
their content checksums): a DataLoader worker under spawn or forkserver
receives it in O(1) and maps the file itself. A map read from it travels
as a reference only through multiprocessing's reducer (queues, pipes,
pools, DataLoader workers: processes that share the file while it is
there), while it is unchanged (read-only, as read, a whole map); ``pickle``
itself, ``copy``, dask and files written with ``pickle.dump`` get its data,
so that a pickle outlives the dataset file. A reference opens the file once
and checks that open file (identity and checksum): it gives the maps that
were pickled, or raises :class:`~blockmap.BlockMapIOError` (a file
replaced, one of the same identity with other maps, or rewritten by
another program); maps appended since are not seen (the reference opens
the first maps only). Maps of a dataset opened with ``mmap="c"`` are
writable copy-on-write views and pickle as data.

The file layout is documented in docs/format.md ("Datasets").
"""

from __future__ import annotations

import atexit
import collections
import operator
import os
import sys
import threading
import warnings
import weakref
from collections.abc import Iterable, Iterator
from typing import Any, SupportsIndex, overload

import numpy as np

from . import _namedtuple, _optional
from ._blockmap import DatasetWriter as _DatasetWriter
from ._blockmap import Labels, TensorMap, _Dataset, load
from .exceptions import (
    BlockMapIOError,
    BlockMapTypeError,
    ValidationError,
)

__all__ = ["Dataset", "DatasetField", "DatasetWriter", "save_dataset"]


_Reference = tuple[str, str, str, int, int]

#: datasets opened from map references in this process, by reference: the
#: maps of one dataset received one at a time open its file once
_opened: weakref.WeakValueDictionary[_Reference, Dataset] = weakref.WeakValueDictionary()
#: re-entrant: a signal handler may unpickle a reference while this thread
#: holds it; made again in a forked child, where the thread of the parent
#: that may have held it does not exist
_opened_lock = threading.RLock()


def _new_opened_lock() -> None:
    global _opened_lock
    _opened_lock = threading.RLock()


os.register_at_fork(after_in_child=_new_opened_lock)

#: the datasets of the last few map references received, held open
_RECENT = 4
_recent: collections.OrderedDict[_Reference, Dataset] = collections.OrderedDict()


def _open_checked(cls: type, path: str, mmap: str, id: str, count: int, checksum: int) -> Any:
    """The dataset a reference names, opened once (its first ``count``
    maps) and checked on that same open file: its identity, and a checksum
    of the maps' places and content checksums. It holds the maps that were
    pickled, or this raises."""
    try:
        dataset = _Dataset.__new__(cls, path, mmap=mmap, count=count)
    except ValidationError as error:
        raise BlockMapIOError(
            f"the dataset '{path}' changed since it was pickled: {error}"
        ) from error
    except (OSError, ValueError) as error:
        raise BlockMapIOError(
            f"cannot open the dataset '{path}' a pickle refers to: {error}"
        ) from error
    if dataset.id != id:
        raise BlockMapIOError(
            f"the dataset '{path}' is not the one that was pickled: the file was replaced "
            f"(its identity is {dataset.id}, the pickle's {id})"
        )
    if dataset._checksum() != checksum:
        raise BlockMapIOError(
            f"the dataset '{path}' is not the one that was pickled: its first {count} maps "
            "are not the maps that were pickled (another file of the same identity, or one "
            "changed by another program)"
        )
    return dataset


def _open_reference(cls: type, path: str, mmap: str, id: str, count: int, checksum: int) -> Dataset:
    """A pickled :class:`Dataset` (of class ``cls``), checked against the file."""
    dataset: Dataset = _open_checked(cls, path, mmap, id, count, checksum)
    return dataset


def _map_from_reference(
    path: str, mmap: str, id: str, count: int, checksum: int, index: int
) -> TensorMap:
    """Map ``index`` of a dataset reference (what multiprocessing's reducer
    sends for a map read from a dataset), read with the base class's
    reading (a subclass's ``__getitem__`` may transform maps)."""
    key = (path, mmap, id, count, checksum)
    with _opened_lock:
        found = _opened.get(key)
    if found is None:
        found = _open_checked(Dataset, path, mmap, id, count, checksum)
        with _opened_lock:
            _opened[key] = found
    with _opened_lock:
        # the last few stay open while no map of theirs lives: maps
        # received and dropped one at a time do not reopen the file each
        _recent[key] = found
        _recent.move_to_end(key)
        while len(_recent) > _RECENT:
            _recent.popitem(last=False)
    entry, field = divmod(index, len(found.fields))
    return _Dataset._get(found, entry, field=field)


#: entries iteration asks the kernel to read ahead at a time
_READ_AHEAD = 256


def _index(index: Any) -> int:
    """An entry's index, as a user means it whichever library it comes
    from: a Python int, a numpy integer scalar or 0-d array, a 0-d torch
    tensor of an integer dtype, or any other object with ``__index__``; a
    bool of any library is refused (``torch.tensor(True)`` is not entry
    1), and so is anything else, with :class:`~blockmap.BlockMapTypeError`.
    Bounds (negative from the end) are checked by the core."""

    def refused(what: str) -> BlockMapTypeError:
        return BlockMapTypeError(f"dataset indices must be integers or slices, not {what}")

    if isinstance(index, (bool, np.bool_)):
        raise refused("bool")
    if isinstance(index, (np.ndarray, np.generic)):
        if index.ndim != 0 or index.dtype.kind not in "iu":
            shape = f"of shape {index.shape} " if index.ndim else ""
            raise refused(f"a numpy array {shape}of dtype {index.dtype}")
        return int(index)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(index, torch.Tensor):
        if (
            index.dim() != 0
            or index.dtype == torch.bool
            or index.is_floating_point()
            or index.is_complex()
        ):
            shape = f"of shape {tuple(index.shape)} " if index.dim() else ""
            raise refused(f"a torch tensor {shape}of {index.dtype}")
        return int(index.item())
    if not hasattr(index, "__index__"):
        raise refused(type(index).__name__)
    try:
        position: int = operator.index(index)
    except TypeError as error:
        raise refused(f"{type(index).__name__} ({error})") from None
    return position


def _entry_type(fields: tuple[str, ...]) -> type:
    """The named tuple of an entry with these fields: one type per tuple of
    names (:mod:`blockmap._namedtuple`, metatensor-learn's named tuples
    that pickle). A field whose name is not an identifier (metatrain's
    "mtt::dipole") keeps its name: ``entry["mtt::dipole"]``, as
    metatensor-learn's samples read it."""
    return _namedtuple.namedtuple("Entry", fields)


def _make_entry(fields: tuple[str, ...], values: tuple[Any, ...]) -> Any:
    """An entry's named tuple, from a pickle made before entries were
    :mod:`blockmap._namedtuple`'s (kept for those pickles)."""
    return _entry_type(tuple(fields))._make(values)


def _reduce_map(tensor: TensorMap) -> tuple[Any, tuple[Any, ...]] | None:
    """``(reconstructor, args)`` sending ``tensor`` as a reference to the
    dataset it was read from (see :mod:`blockmap._reduction`), or ``None``."""
    origin = tensor._dataset_origin
    if origin is None:
        return None
    dataset, index = origin
    return _map_from_reference, (*Dataset._reference(dataset), index)


class Dataset(_Dataset):
    """A dataset file, mapped (see :mod:`blockmap.dataset`).

    ``Dataset(path, mmap="r")``: ``mmap="r"`` (or ``True``) maps it
    read-only: maps are read-only views and pickle as references;
    ``mmap="c"`` maps it privately copy-on-write: maps are writable views
    whose writes never reach the file, and pickle as data.
    """

    def _integer(self, index: Any) -> int:
        return _index(index)

    # an entry is a TensorMap or the named tuple of an entry's maps, which
    # the file decides: typed Any, so that both `second: TensorMap = ds[1]`
    # and `ds[0].system`, `ds[0]["energy"]` (docs/format.md) type-check
    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        """``dataset[index]``: one entry, or a list of entries for a slice:
        an entry is a map, or, in a dataset of fields, the named tuple of
        its maps (``entry.system``, ``entry["energy"]``).

        Parameters
        ----------
        index : int or slice
            The position of a map (negative counts from the end), or a slice.

        Returns
        -------
        TensorMap, named tuple of TensorMap, or a list of them
            The entry (views of the mapped file), or the entries of the slice.

        Raises
        ------
        BlockMapIndexError
            If ``index`` is out of range.
        BlockMapTypeError
            If ``index`` is neither an integer nor a slice.
        FormatError
            If the map's data in the file is not valid.
        BlockMapMemoryError
            If memory for the map's labels cannot be allocated.
        """
        if type(index) is int and self._single:
            return self._get(index)  # the common case, first
        if isinstance(index, slice):
            return [self._entry(i) for i in range(*index.indices(len(self)))]
        return self._entry(self._integer(index))

    def _entry(self, index: int) -> Any:
        """Entry ``index``: its map, or the named tuple of its fields' maps."""
        if self._single:
            return self._get(index)
        fields = tuple(self.fields)
        return _entry_type(fields)(*(self._get(index, field=f) for f in range(len(fields))))

    def __iter__(self) -> Iterator[Any]:
        """``for tensor in dataset``: every entry, in order (a map, or the
        named tuple of an entry's maps).

        Yields
        ------
        TensorMap
            Each map (views of the mapped file).

        Raises
        ------
        FormatError
            If a map's data in the file is not valid.
        BlockMapMemoryError
            If memory for a map's labels cannot be allocated.
        """
        for i in range(len(self)):
            if i % _READ_AHEAD == 0:
                self._prefetch(i, _READ_AHEAD)
            yield self._entry(i)

    def load_all(self) -> list[Any]:
        """Every entry, in order (the file read ahead sequentially).

        Returns
        -------
        list
            Each entry: a :class:`TensorMap`, or a named tuple of the
            fields' maps.

        Raises
        ------
        FormatError
            If an entry's data in the file is not valid.
        BlockMapMemoryError
            If memory for the labels cannot be allocated.
        """
        return list(self)

    def field(self, name: str) -> DatasetField:
        """The per-field view of field ``name`` (``len``, ``[i]``, slices,
        iteration, ``load(i, keys=...)``, ``column``).

        Parameters
        ----------
        name : str
            One of :attr:`fields`.

        Returns
        -------
        DatasetField
            The view.

        Raises
        ------
        ValidationError
            If the dataset has no such field.
        """
        fields = self.fields
        if name not in fields:
            raise ValidationError(f"no field {name!r} in this dataset: its fields are {fields}")
        return DatasetField(self, fields.index(name))

    @property
    def columns(self) -> list[str]:
        """The names of the columns: the writer's, then ``n_samples`` (none
        in a file of format version 1, which has no columns: see
        :meth:`upgrade`)."""
        if self.version == 1:
            return []
        return [*self._columns, "n_samples"]

    def column(self, name: str) -> np.ndarray:
        """Column ``name``, one value per entry (int64 or float64), read
        from the index without touching the entries' data (the file's
        COLUMNS record, read at the first call: opening reads none). ``n_samples``
        is the sample count of the first block of the first field (of each
        field: ``ds.field(name).column("n_samples")``).

        Parameters
        ----------
        name : str
            One of :attr:`columns`.

        Returns
        -------
        numpy.ndarray
            The values, a new array.

        Raises
        ------
        ValidationError
            If there is no such column, or the file is of format version 1
            (see :meth:`upgrade`).
        FormatError
            If the file's COLUMNS record is damaged (its entries still
            read).
        """
        if name == "n_samples":
            return np.frombuffer(self._n_samples(0), dtype=np.int64).copy()
        kind, data = self._column(name)
        return np.frombuffer(data, dtype=np.dtype(kind)).copy()

    @staticmethod
    def upgrade(
        src: str | os.PathLike[str], dst: str | os.PathLike[str], *, overwrite: bool = False
    ) -> None:
        """Write the dataset at ``src`` (format version 1, 2, 3 or 4) as a
        new dataset of format version 4 at ``dst``, in one commit (no dead
        bytes: :meth:`compact` is this call), replaced once complete: on
        failure ``dst`` keeps what it held. An existing ``dst`` is refused
        (:class:`~blockmap.ExistingFileError`) unless ``overwrite=True``.
        Each entry is checked against
        the CRC32 of all its bytes before it is copied (a read checks its
        description only): a damaged entry fails the upgrade, naming it,
        rather than being copied under a new, valid checksum
        (:func:`blockmap.verify` lists every problem of a file).

        Parameters
        ----------
        src : str or os.PathLike
            The dataset to convert.
        dst : str or os.PathLike
            Where the new dataset is written.
        overwrite : bool, optional
            Replace what ``dst`` holds.

        Raises
        ------
        FormatError
            If ``src`` is not a valid dataset, or one of its entries is
            damaged.
        ExistingFileError
            If ``dst`` exists and ``overwrite`` is false.
        BlockMapIOError
            If a file cannot be read or written, or ``dst`` is locked.
        """
        _Dataset._upgrade(src, dst, overwrite)

    @staticmethod
    def compact(
        src: str | os.PathLike[str], dst: str | os.PathLike[str], *, overwrite: bool = False
    ) -> None:
        """Rewrite the dataset at ``src`` at ``dst`` without dead bytes: the
        index pieces that commits of version 4 merged, earlier commits of
        versions 2 and 3, the bytes an interrupted write left. The same
        call as :meth:`upgrade` (the result is of format version 4): each
        entry is checked against the CRC32 of all its bytes as it is
        copied, so a damaged entry fails the compaction, naming it, and is
        never copied under a new, valid checksum. ``dst`` must be another
        path than ``src``; it is refused when it exists unless
        ``overwrite=True``, and replaced once complete.

        Parameters
        ----------
        src : str or os.PathLike
            The dataset to compact.
        dst : str or os.PathLike
            Where the compacted dataset is written.
        overwrite : bool, optional
            Replace what ``dst`` holds.

        Raises
        ------
        FormatError
            If ``src`` is not a valid dataset, or one of its entries is
            damaged.
        ExistingFileError
            If ``dst`` exists and ``overwrite`` is false.
        BlockMapIOError
            If a file cannot be read or written, or ``dst`` is locked.
        """
        _Dataset._upgrade(src, dst, overwrite)

    def load(
        self, index: int, *, keys: Labels | None = None, arrays: str | None = None
    ) -> TensorMap:
        """Map ``index``, with only the blocks whose keys match ``keys``
        (see :func:`blockmap.load`), as numpy arrays or ``arrays="torch"``.
        In a dataset of fields, which field is meant must be said:
        ``ds.field(name).load(index, keys=...)``.

        Parameters
        ----------
        index : int
            The position of the map (negative counts from the end).
        keys : Labels, optional
            Load only the blocks whose keys match these entries.
        arrays : {"numpy", "torch"}, optional
            The array type of the map (numpy arrays by default).

        Returns
        -------
        TensorMap
            The map (views of the mapped file).

        Raises
        ------
        BlockMapIndexError
            If ``index`` is out of range.
        BlockMapTypeError
            If ``index`` is not an integer, or ``keys`` is not Labels.
        ValidationError
            If ``arrays`` or ``keys`` has an invalid value, or the dataset's
            entries are fields.
        FormatError
            If the map's data in the file is not valid.
        BlockMapMemoryError
            If memory for the map's labels cannot be allocated.
        ModuleNotFoundError
            If ``arrays="torch"`` and torch is not installed.
        """
        if not self._single:
            raise ValidationError(
                f"the entries of this dataset are the fields {self.fields}: load one field's "
                "map with ds.field(name).load(index, keys=...)"
            )
        return self._get(self._integer(index), keys=keys, arrays=arrays)

    def _reference(self) -> _Reference:
        return (os.fspath(self.path), self.mmap, self.id, len(self), self._checksum())

    def __reduce__(self) -> tuple[Any, ...]:
        state = self.__dict__ if hasattr(self, "__dict__") and self.__dict__ else None
        return _open_reference, (type(self), *self._reference()), state

    def __repr__(self) -> str:
        state = "" if self.committed else ", recovered after an interrupted write"
        what = "maps" if self._single else f"entries, fields={self.fields}"
        return (
            f"Dataset('{os.fspath(self.path)}', {len(self)} {what}, columns={self.columns}, "
            f"version={self.version}, mmap='{self.mmap}'{state})"
        )

    @classmethod
    def from_files(
        cls,
        paths: Iterable[str | os.PathLike[str]],
        path: str | os.PathLike[str],
        *,
        progress: bool = False,
        overwrite: bool = False,
        append: bool = False,
    ) -> Dataset:
        """Write the ``.mts`` files ``paths`` (in that order) into a new
        dataset at ``path`` (an existing one is refused, unless
        ``overwrite=True``: replaced, or ``append=True``: added to), and
        open it. Each file is read once, its CRCs
        checked (a damaged file is a :class:`~blockmap.FormatError`, not an
        entry with a new checksum).

        Parameters
        ----------
        paths : iterable of str or os.PathLike
            The ``.mts`` files, one map each.
        path : str or os.PathLike
            Where the dataset is written.
        progress : bool, optional
            Show a tqdm progress bar (needs tqdm).
        overwrite : bool, optional
            Replace the dataset at ``path`` once the new one is complete.
        append : bool, optional
            Add the maps to the dataset at ``path``.

        Returns
        -------
        Dataset
            The new dataset, opened.

        Raises
        ------
        MissingFileError
            If a file does not exist.
        BlockMapIOError
            If a file cannot be read, the dataset cannot be written, or
            ``path`` is locked by another writer.
        FormatError
            If a file is not a valid ``.mts`` archive of a map, or is
            damaged.
        BlockMapTypeError
            If ``paths`` is not an iterable of paths.
        BlockMapMemoryError
            If memory cannot be allocated.
        ModuleNotFoundError
            If ``progress=True`` and tqdm is not installed.
        """
        paths = list(_iterate(paths, "paths"))
        with DatasetWriter(path, append=append, overwrite=overwrite) as writer:
            for file in _optional.progress(paths, progress, "files"):
                # read, not mapped: a mapped load checks no CRC, and the
                # entry written gets a new one
                writer.write(load(file))
        return cls(path)

    @classmethod
    def from_diskdataset(
        cls,
        zip_path: str | os.PathLike[str],
        path: str | os.PathLike[str],
        *,
        target: str | list[str] | None = None,
        progress: bool = False,
        overwrite: bool = False,
    ) -> Dataset:
        """Convert metatrain's ``DiskDataset`` zip into a new dataset at
        ``path``, one entry per sample, and open it. The conversion is
        :mod:`blockmap.metatrain`'s (its ``convert`` of a zip writes the
        same file), and imports neither metatrain nor torch.

        Every member of each sample ``<index>/`` becomes a field, named by
        the member's stem: ``<index>/energy.mts`` (an ``.mts`` archive
        wrapped in an NPY array of bytes, as ``numpy.save`` of
        ``TensorMap.save_buffer()`` writes it) is field ``energy``;
        ``<index>/system.mta`` (metatomic's zip of the system) is field
        ``system``, converted by ``blockmap._systems.tensormaps_from_mta``
        (docs/format.md, "Systems as TensorMaps"), and its neighbor lists
        and extra data, when it holds some, fields ``system/pairs/<i>`` and
        ``system/data/<name>`` (read with ``ds.field(name)``). Every sample must hold
        the same fields; a member that cannot be converted, or that is not
        one of these (``metadata/atom_counts.npy``, metatrain's own
        index of atom counts, excepted), refuses the zip instead of being
        left out. Samples are taken in the order of their index.

        An existing ``path`` is refused unless ``overwrite=True`` (it is
        then replaced once the dataset is complete).

        ``target`` keeps some fields only: a name gives a dataset of single
        maps (``ds[i]`` is that field's map, as before fields existed), a
        list of names a dataset of those fields. When the ``system`` field
        is kept, each entry has the column ``n_atoms``, its system's atom
        count (what ``blockmap.metatrain`` serves to the atom-count
        sampler).

        The zip is read by blockmap's own reader, with its bounds: a member
        takes at most 8 times the zip's size plus 16 MiB of memory (a zip
        bomb is refused with :class:`~blockmap.FormatError` before it is
        inflated), CRCs are checked, NPY headers are read by blockmap's
        parser; every failure is a blockmap error.

        Parameters
        ----------
        zip_path : str or os.PathLike
            metatrain's ``DiskDataset`` zip.
        path : str or os.PathLike
            Where the dataset is written.
        target : str or list of str, optional
            The field (or fields) to keep.
        progress : bool, optional
            Show a tqdm progress bar (needs tqdm).
        overwrite : bool, optional
            Replace the dataset at ``path`` once the new one is complete.

        Returns
        -------
        Dataset
            The new dataset, opened.

        Raises
        ------
        ValidationError
            If ``target`` names a field the samples do not hold.
        FormatError
            If the zip is not a ``DiskDataset``, its samples differ in their
            fields, or a member is not valid (or a zip bomb) or cannot be
            converted.
        MissingFileError
            If ``zip_path`` does not exist.
        BlockMapIOError
            If the zip cannot be read, the dataset cannot be written, or
            ``path`` is locked by another writer.
        BlockMapTypeError
            If ``zip_path`` is not a path, or ``target`` not a str or list.
        BlockMapMemoryError
            If memory cannot be allocated.
        ModuleNotFoundError
            If ``progress=True`` and tqdm is not installed.
        """
        # what metatrain's and metatomic's formats are, blockmap.metatrain
        # knows (imported here: importing it imports neither of them)
        from .metatrain import _diskdataset

        _diskdataset.convert_diskdataset(
            zip_path, path, target=target, progress=progress, overwrite=overwrite
        )
        return cls(path)


class DatasetWriter(_DatasetWriter):
    __doc__ = _DatasetWriter.__doc__

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # opened by the native __new__; kept to be finalized at exit
        _OPEN_WRITERS.add(self)

    def __del__(self) -> None:
        # as Python's file objects: a writer never closed (no ``with``,
        # dropped, collected) commits what it wrote, and says so
        _finalize(self)


#: the writers open in this process, finalized at interpreter exit (before
#: modules are torn down, where a ``__del__`` may no longer warn)
_OPEN_WRITERS: weakref.WeakSet[DatasetWriter] = weakref.WeakSet()


def _finalize(writer: DatasetWriter) -> None:
    """Commit and close ``writer`` when it is open in this process (never a
    forked child's copy of its parent's), with a ``ResourceWarning``."""
    try:
        open_here = writer._open_here()
    except Exception:  # a writer whose __new__ failed
        return
    if not open_here:
        return
    try:
        warnings.warn(
            f"unclosed DatasetWriter('{os.fspath(writer.path)}'): what it wrote is committed "
            "now; close it, or write in a `with` block",
            ResourceWarning,
            stacklevel=2,
            source=writer,
        )
    finally:
        writer.close()


@atexit.register
def _finalize_open_writers() -> None:
    for writer in list(_OPEN_WRITERS):
        _finalize(writer)


class DatasetField:
    """One field of a :class:`Dataset` (``ds.field(name)``): its maps,
    ``len``, ``[i]``, slices, iteration, ``load(i, keys=...)`` and the
    dataset's columns (``n_samples`` of this field)."""

    def __init__(self, dataset: Dataset, index: int) -> None:
        self.dataset = dataset
        self.index = index
        self.name = dataset.fields[index]

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        if isinstance(index, slice):
            return [
                self.dataset._get(i, field=self.index)
                for i in range(*index.indices(len(self.dataset)))
            ]
        return self.dataset._get(_index(index), field=self.index)

    def __iter__(self) -> Iterator[TensorMap]:
        for i in range(len(self.dataset)):
            if i % _READ_AHEAD == 0:
                self.dataset._prefetch(i, _READ_AHEAD)
            yield self.dataset._get(i, field=self.index)

    def load(
        self, index: int, *, keys: Labels | None = None, arrays: str | None = None
    ) -> TensorMap:
        """This field's map of entry ``index``, with only the blocks whose
        keys match ``keys`` (see :meth:`Dataset.load`)."""
        return self.dataset._get(_index(index), keys=keys, arrays=arrays, field=self.index)

    def column(self, name: str) -> np.ndarray:
        """Column ``name`` of the dataset; ``n_samples`` is this field's."""
        if name == "n_samples":
            return np.frombuffer(self.dataset._n_samples(self.index), dtype=np.int64).copy()
        return self.dataset.column(name)

    def __repr__(self) -> str:
        return f"<field {self.name!r} of {self.dataset!r}>"


def _iterate(items: Any, what: str) -> Iterator[Any]:
    try:
        return iter(items)
    except TypeError:
        raise BlockMapTypeError(f"{what} must be an iterable, not {type(items).__name__}") from None


def save_dataset(
    path: str | os.PathLike[str],
    maps: Iterable[TensorMap],
    *,
    timeout: float | None = 0.0,
    overwrite: bool = False,
    append: bool = False,
) -> None:
    """Write ``maps`` into a new dataset at ``path`` (see :class:`DatasetWriter`,
    and its ``timeout``). A path that holds a file is refused
    (:class:`~blockmap.ExistingFileError`) unless ``overwrite=True`` (it is
    replaced once every map is written) or ``append=True`` (the maps are
    added to it); when ``maps`` raises, or a map is refused, a new or
    replaced ``path`` keeps what it held and nothing is left behind.

    Parameters
    ----------
    path : str or os.PathLike
        Where the dataset is written.
    maps : iterable of TensorMap
        The maps, in order.
    timeout : float or None, optional
        Seconds to wait for another writer's lock on ``path`` (0: fail at
        once; None: wait as long as it takes).
    overwrite : bool, optional
        Replace what ``path`` holds.
    append : bool, optional
        Add the maps to the dataset ``path`` holds.

    Raises
    ------
    ExistingFileError
        If ``path`` exists and neither ``overwrite`` nor ``append`` is set.
    ValidationError
        If a map is refused, or ``timeout`` is negative.
    BlockMapTypeError
        If ``maps`` is not an iterable of TensorMap.
    BlockMapIOError
        If the dataset cannot be written, or ``path`` stays locked by
        another writer past ``timeout``.
    BlockMapMemoryError
        If memory cannot be allocated.
    """
    items = _iterate(maps, "maps")
    with DatasetWriter(path, append=append, timeout=timeout, overwrite=overwrite) as writer:
        for tensor in items:
            writer.write(tensor)
