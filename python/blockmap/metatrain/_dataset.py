"""The dataset metatrain trains from when ``read_from`` is a ``.bmdata``
file: :class:`MetatrainDataset`, with the contract of metatrain's
``DiskDataset`` (``__len__``, ``__getitem__``, ``get_target_info``,
``get_num_atoms``, ``get_all_atom_counts``), and its items,
:class:`Sample`.

A :class:`Sample` holds blockmap views of the entry's maps: the batch path
(:mod:`blockmap.metatrain._batch`) joins these views, and converts once per
batch. Code of metatrain that reads samples directly (``get_atomic_types``,
``get_stats``, ``check_datasets``, ``get_target_info``) gets a metatomic
``System`` and metatensor-torch maps, converted when read (and kept).
"""

from __future__ import annotations

import operator
import os
import weakref
from typing import Any

import numpy as np

# blockmap.Dataset, from the package: blockmap.dataset imports this package
from .. import Dataset
from .._blockmap import Labels, TensorBlock, TensorMap
from .._systems import POSITIONS, describe_options, system_from_tensormaps
from ..exceptions import (
    BlockMapError,
    BlockMapIndexError,
    BlockMapTypeError,
    FormatError,
    ValidationError,
)
from ..metatensor_torch import to_metatensor_torch
from . import _neighbors
from ._version import require_tested

#: metatrain's extra field: the entry's index in the dataset
SYSTEM_INDEX = "mtt::aux::system_index"

#: the datasets metatrain opened in this process (get_dataset): the ones
#: whose neighbour lists a neighbour-list transform makes sure are stored
opened: weakref.WeakSet[MetatrainDataset] = weakref.WeakSet()

#: set by blockmap.metatrain.install / uninstall: whether metatrain is
#: patched in this process (a dataset pickled then patches the process that
#: unpickles it, see _rebuild_dataset)
patched = False


class Sample:
    """One entry of a :class:`MetatrainDataset`: what metatrain's named
    tuple ``Sample`` offers (``sample.system``, ``sample["energy"]``,
    ``sample[0]``, ``_fields``, ``_asdict()``, iteration, ``len``), with
    each value converted when first read: a metatomic ``System``, or a
    metatensor-torch ``TensorMap``."""

    __slots__ = ("_converted", "_dataset", "_index", "_views")

    def __init__(self, dataset: MetatrainDataset, index: int, views: dict[str, Any]) -> None:
        self._dataset = dataset
        self._index = index
        # sample field name -> blockmap map (the system: a dict of its maps)
        self._views = views
        self._converted: dict[str, Any] = {}

    @property
    def _fields(self) -> tuple[str, ...]:
        return self._dataset.sample_fields

    def _value(self, name: str) -> Any:
        found = self._converted.get(name)
        if found is None:
            if name not in self._fields:
                raise KeyError(name)
            if name == "system":
                found = system_from_tensormaps(self._views["system"])
            elif name == SYSTEM_INDEX:
                found = to_metatensor_torch(system_index_map(self._index))
            else:
                found = to_metatensor_torch(self._views[name])
            self._converted[name] = found
        return found

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self._value(name)
        except KeyError:
            raise AttributeError(
                f"this sample has no field {name!r}: its fields are {self._fields}"
            ) from None

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return self._value(key)
        return self._value(self._fields[key])

    def __len__(self) -> int:
        return len(self._fields)

    def __iter__(self) -> Any:
        return (self._value(name) for name in self._fields)

    def _asdict(self) -> dict[str, Any]:
        return {name: self._value(name) for name in self._fields}

    def __repr__(self) -> str:
        return f"Sample(index={self._index}, fields={self._fields})"


def system_index_map(index: int) -> TensorMap:
    """The ``mtt::aux::system_index`` map of entry ``index``, as
    ``DiskDataset`` makes it: one block, value ``index`` (float64), sample
    ``system = index``."""
    one = np.zeros((1, 1), dtype=np.int32)
    block = TensorBlock(
        values=np.full((1, 1), index, dtype=np.float64),
        samples=Labels(["system"], np.full((1, 1), index, dtype=np.int32)),
        components=[],
        properties=Labels(["_"], one),
    )
    return TensorMap(Labels(["_"], one), [block])


class MetatrainDataset:
    """A blockmap dataset (``.bmdata``, written by
    :func:`blockmap.metatrain.convert`) served to metatrain.

    ``fields`` is what ``DiskDataset`` takes: the targets' (and extra
    data's) configuration, a dict from target name to its options, where
    ``key`` names the stored field (the target's own name when that field
    does not exist); or a list of field names; or ``None`` for every field.
    Items are :class:`Sample` with the fields ``system``, the targets, and
    ``mtt::aux::system_index``, as ``DiskDataset``'s.
    """

    def __init__(self, path: str | os.PathLike[str], fields: Any = None) -> None:
        self._setup(Dataset(os.fspath(path)), fields)

    def _setup(self, data: Dataset, fields: Any) -> None:
        """Serve ``data`` with ``fields`` (what ``__init__`` takes): every
        attribute is derived here from the file, so that a pickle (which
        sends the dataset and the fields, :meth:`__reduce__`) cannot bring
        others."""
        self.data = data
        self.path = os.fspath(data.path)
        stored = list(self.data.fields) if not self.data._single else []
        if "system" not in stored:
            raise ValidationError(
                f"'{self.path}' is not a metatrain dataset: it has no 'system' field (its "
                f"fields are {stored or ['(single maps)']}); write one with "
                "`python -m blockmap.metatrain convert SOURCE DEST.bmdata`"
            )
        # the system's own maps: system, system/pairs/<i>, system/data/<name>
        self._system_fields = {
            name[len("system/") :] if name != "system" else name: stored.index(name)
            for name in stored
            if name == "system" or name.startswith("system/")
        }
        others = [name for name in stored if name != "system" and not name.startswith("system/")]
        if fields is None:
            mapping = {name: name for name in others}
        else:
            if isinstance(fields, (str, bytes)) or not hasattr(fields, "__iter__"):
                raise ValidationError(
                    f"fields must be a dict of target options or a list of names, not {fields!r}"
                )
            items = fields.items() if hasattr(fields, "items") else [(f, {}) for f in fields]
            mapping = {}
            for target, options in items:
                key = options.get("key", target) if hasattr(options, "get") else target
                if key in others:
                    mapping[str(target)] = key
                elif target in others:
                    mapping[str(target)] = str(target)
                else:
                    raise ValidationError(
                        f"'{self.path}' has no field for the target {target!r} (key {key!r}): "
                        f"its fields are {others}"
                    )
        # sample field name -> stored field name, and its index
        self._mapping = mapping
        self._target_fields = {target: stored.index(key) for target, key in mapping.items()}
        self.sample_fields: tuple[str, ...] = ("system", *mapping, SYSTEM_INDEX)
        self._atom_counts = self._checked_atom_counts()
        # the options of the lists stored with the systems (system/pairs/<i>)
        self.stored_lists = []
        if len(self.data) > 0:
            for name in self._system_fields:
                if name.startswith("pairs/"):
                    maps = {"system": self.data._get(0, field=self._system_fields["system"])}
                    maps[name] = self.data._get(0, field=self._system_fields[name])
                    system = system_from_tensormaps(maps)
                    self.stored_lists.extend(system.known_neighbor_lists())
        # (cutoff, full_list, strict) -> the stored neighbour lists
        self.neighbors: dict[tuple[float, bool, bool], _neighbors.Store] = {}
        #: how many times each entry was read (``ds[i]``) in this process:
        #: what a rank of a distributed training reads (docs/training.md)
        self.read_counts = np.zeros(len(self.data), dtype=np.int64)

    def bytes_read(self) -> int:
        """The bytes of the entries read (``ds[i]``) in this process so
        far, each entry counted at each read: the file's span of each
        entry (all its fields) times its :attr:`read_counts`."""
        read = np.flatnonzero(self.read_counts)
        return int(sum(self.data._slot(int(i))[1] * int(self.read_counts[i]) for i in read))

    def _checked_atom_counts(self) -> np.ndarray:
        """The atom count of every entry, from the index: the ``n_atoms``
        column, refused when it disagrees with the ``n_samples`` column of
        the systems (the row count of a system map's first block, the
        positions as blockmap writes them) or is not a count; the
        ``n_samples`` column in a dataset written without it.

        Both columns are what the file says: a file whose columns lie
        together (or whose system maps put the cell first) opens, and each
        entry's count is checked against its system when the entry is read
        (:meth:`_checked_system`): reading every entry here would read the
        whole file at each open (docs/training.md)."""
        positions = self.data.field("system").column("n_samples").astype(np.int64)
        counts = positions
        if "n_atoms" in self.data.columns:
            counts = self.data.column("n_atoms")
            if counts.dtype.kind not in "iu":
                raise FormatError(
                    f"'{self.path}': its n_atoms column holds {counts.dtype} values, not "
                    "integers; convert the dataset again"
                )
            wrong = np.flatnonzero(counts != positions)
            if len(wrong):
                first = int(wrong[0])
                raise FormatError(
                    f"'{self.path}': its n_atoms column disagrees with its systems at "
                    f"{len(wrong)} entries (entry {first}: {int(counts[first])} against "
                    f"{int(positions[first])} atoms); convert the dataset again"
                )
            counts = counts.astype(np.int64, copy=False)
        negative = np.flatnonzero(counts < 0)
        if len(negative):
            first = int(negative[0])
            raise FormatError(
                f"'{self.path}': the atom count of entry {first} is {int(counts[first])}, not a "
                "count; convert the dataset again"
            )
        return counts

    def _checked_system(self, index: int, tensor: TensorMap) -> TensorMap:
        """Entry ``index``'s system map, refused unless its positions (the
        block of key ``array = 0``) have the entry's atom count: what the
        atom-count sampler batched by is what the batch holds."""
        try:
            count = len(tensor.block({"array": POSITIONS}))
        except BlockMapError as error:
            raise FormatError(
                f"'{self.path}': entry {index}'s system is not a system's map ({error})"
            ) from None
        if count != self._atom_counts[index]:
            raise FormatError(
                f"'{self.path}': entry {index}'s system has {count} atoms, and the dataset's "
                f"atom counts (its n_atoms and n_samples columns) say "
                f"{int(self._atom_counts[index])}; convert the dataset again"
            )
        return tensor

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as what it is made of: the dataset (a reference to the
        file, checked against it on arrival), the fields, the neighbour
        lists found so far (their options and a reference to their store,
        or the lists kept in memory) and whether metatrain is patched here.
        Everything else (atom counts, field indices, the lists stored with
        the systems) is derived again from the file on arrival, where a
        pickled state would have been taken as it came."""
        stores = [
            (describe_options(store.options), store.maps) for store in self.neighbors.values()
        ]
        return (_rebuild_dataset, (self.data, dict(self._mapping), stores, patched))

    def __len__(self) -> int:
        return len(self.data)

    def _index(self, index: Any) -> int:
        if not isinstance(index, (int, np.integer)):
            try:
                index = operator.index(index)
            except TypeError:
                raise BlockMapIndexError(
                    f"a dataset is indexed by an integer, not by {type(index).__name__}"
                ) from None
        if not 0 <= index < len(self.data):
            # IndexError: iteration of a Subset stops on it
            raise BlockMapIndexError(
                f"index {index} is out of range for a dataset of {len(self.data)} entries"
            )
        return int(index)

    def __getitem__(self, index: int) -> Sample:
        index = self._index(index)
        get = self.data._get
        views: dict[str, Any] = {
            name: get(index, field=field) for name, field in self._target_fields.items()
        }
        views["system"] = {
            name: get(index, field=field) for name, field in self._system_fields.items()
        }
        self._checked_system(index, views["system"]["system"])
        self.read_counts[index] += 1
        return Sample(self, index, views)

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def system(self, index: int) -> Any:
        """Entry ``index``'s system, without neighbour lists."""
        field = self._system_fields["system"]
        tensor = self._checked_system(index, self.data._get(index, field=field))
        return system_from_tensormaps({"system": tensor})

    def get_all_atom_counts(self) -> np.ndarray:
        """The atom count of every entry (int64), from the ``n_atoms``
        column (or, in a dataset written without it, the row count of the
        systems' positions), checked against the ``n_samples`` column when
        opened and against each entry's system when the entry is read."""
        return self._atom_counts

    def get_num_atoms(self, i: int) -> int:
        """The atom count of entry ``i``, checked against its system."""
        index = self._index(i)
        field = self._system_fields["system"]
        self._checked_system(index, self.data._get(index, field=field))
        return int(self._atom_counts[index])

    def get_target_info(self, target_config: Any, is_extra_data: bool = False) -> Any:
        """metatrain's target information, as ``DiskDataset.get_target_info``
        gives it (from the first entry)."""
        require_tested()  # DiskDataset's own method, on this dataset
        from metatrain.utils.data.dataset import DiskDataset

        return DiskDataset.get_target_info(self, target_config, is_extra_data)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"MetatrainDataset('{self.path}', {len(self)} entries, fields={self.sample_fields})"


def _rebuild_dataset(data: Any, mapping: Any, stores: Any, was_patched: Any) -> MetatrainDataset:
    """A :class:`MetatrainDataset` from its pickle (:meth:`~MetatrainDataset.__reduce__`),
    checked: a crafted pickle raises :class:`~blockmap.BlockMapTypeError`
    or :class:`~blockmap.FormatError`."""
    if (
        not isinstance(data, Dataset)
        or type(mapping) is not dict
        or any(type(key) is not str or type(value) is not str for key, value in mapping.items())
        or type(stores) is not list
        or any(type(store) is not tuple or len(store) != 2 for store in stores)
        or type(was_patched) is not bool
    ):
        raise BlockMapTypeError(
            "this pickle is not a MetatrainDataset: it holds a dataset, a dict of str field "
            "names, a list of (options, lists) and a bool"
        )
    # a DataLoader worker started by spawn or forkserver imports metatrain
    # afresh: without the patches its CollateFn would take metatrain's own
    # path on these items (right, but slow)
    if was_patched and not patched:
        from . import install

        install()
    dataset = MetatrainDataset.__new__(MetatrainDataset)
    try:
        dataset._setup(data, {target: {"key": key} for target, key in mapping.items()})
        for described, maps in stores:
            store = _neighbors.received(dataset, described, maps)
            dataset.neighbors[_neighbors.options_key(store.options)] = store
    except ValidationError as error:
        raise FormatError(f"this pickle is not a MetatrainDataset: {error}") from None
    return dataset
