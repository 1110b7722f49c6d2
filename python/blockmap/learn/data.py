"""metatensor-learn's data tools on blockmap's maps.

- :class:`Dataset` and :class:`IndexedDataset` are the installed
  metatensor-learn's own code (``metatensor_learn/data/_dataset.py``, loaded again as
  ``blockmap.learn.data._dataset``): the same constructors, ``from_dict``,
  errors and messages. Their samples are the named tuples of
  ``blockmap._namedtuple``, which pickle (so do the datasets, for
  spawn workers).
- :func:`group`, :func:`group_and_join` and :class:`DataLoader` are
  blockmap's: ``group_and_join`` joins blockmap's maps with
  :func:`blockmap.join`, and still joins metatensor-core's and
  metatensor-torch's maps with their own ``join``, as metatensor-learn does.
  The batches are named tuples that pickle: a ``DataLoader`` with workers
  returns them (metatensor-learn's waits forever).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .. import _blockmap, _namedtuple, exceptions
from .._bridges import script_class

__all__ = ["DataLoader", "Dataset", "IndexedDataset", "group", "group_and_join"]

# this module becomes a package whose `_dataset` is metatensor-learn's own
# file, its `_namedtuple` the named tuples that pickle
__path__ = [os.path.join(sys.modules[__package__].__path__[-1], "data")]
__spec__.submodule_search_locations = __path__
__package__ = __name__
sys.modules[f"{__name__}._namedtuple"] = _namedtuple

from ._dataset import Dataset, IndexedDataset  # noqa: E402

for _class in (Dataset, IndexedDataset):
    _class.__module__ = __name__


def group(batch: Sequence[Any]) -> Any:
    """The samples of a minibatch grouped by field: a ``Batch`` named tuple
    with the fields of the samples, each a tuple of the samples' values, as
    metatensor-learn's ``group``.

    Parameters
    ----------
    batch
        the samples (named tuples, all with the same fields)

    Returns
    -------
    Batch
        a named tuple with the samples' fields, each a tuple; it pickles

    Raises
    ------
    ValueError
        the samples do not all have the same number of fields
    blockmap.ValidationError
        the samples do not all have the same fields (whichever comes first)
    """
    names = _fields(batch)
    return _namedtuple.namedtuple("Batch", names)(*zip(*batch, strict=True))


def _fields(batch: Sequence[Any]) -> tuple[str, ...]:
    """The field names of the samples, refused unless every sample has the
    first one's: grouped by position, samples of other fields (of two
    datasets) would be put under the first sample's names, depending on
    which comes first. A sample of another length is left to ``zip``'s
    ``ValueError``, as in metatensor-learn."""
    names: tuple[str, ...] = batch[0]._fields
    first = type(batch[0])
    for sample in batch:
        if type(sample) is not first:
            fields = getattr(sample, "_fields", None)
            if fields is not None and fields != names and len(fields) == len(names):
                raise exceptions.ValidationError(
                    f"the samples of a batch must have the same fields: {names} and {fields}"
                )
    return names


def group_and_join(
    batch: Sequence[Any],
    fields_to_join: Sequence[str] | None = None,
    join_kwargs: dict[str, Any] | None = None,
) -> Any:
    """The samples of a minibatch grouped by field, with maps joined along
    samples and tensors stacked, as metatensor-learn's ``group_and_join``.

    In each field named in ``fields_to_join`` (all by default) but
    ``sample_id``, which stays a tuple: blockmap's maps are joined with
    :func:`blockmap.join` (``axis="samples"``, ``**join_kwargs``),
    metatensor-core's with ``metatensor.join`` and metatensor-torch's with
    ``metatensor.torch.join``; torch tensors are stacked with
    :func:`torch.vstack`; anything else stays a tuple. A field that mixes
    these kinds (maps of two libraries, or of numpy and torch arrays, maps
    or tensors with other values) is refused, whatever the samples' order.

    Parameters
    ----------
    batch
        the samples (named tuples, all with the same fields)
    fields_to_join
        the fields to join or stack; names of other fields, or of no field,
        are ignored
    join_kwargs
        the keyword arguments of the joins (``different_keys``,
        ``sort_samples``, ``remove_tensor_name``; blockmap's ``shared``)

    Returns
    -------
    Batch
        a named tuple with the samples' fields; it pickles

    Raises
    ------
    ValueError
        the samples do not all have the same number of fields
    blockmap.ValidationError
        the samples do not all have the same fields
    blockmap.BlockMapTypeError
        a field holds maps of several libraries or array types, or maps or
        tensors and other values, whichever comes first
    blockmap.BlockMapError
        blockmap's join refused the maps (different keys without
        ``different_keys``, metadata that differs)
    """
    names = _fields(batch)
    if fields_to_join is None:
        fields_to_join = names
    if join_kwargs is None:
        join_kwargs = {}
    data: list[Any] = []
    for name, field in zip(names, zip(*batch, strict=True), strict=True):
        if name == "sample_id" or name not in fields_to_join:
            data.append(field)
            continue
        kind = _one_kind(name, field)
        if kind == "blockmap":
            data.append(_blockmap.join(field, axis="samples", **join_kwargs))
        elif kind == "metatensor-core":
            metatensor = sys.modules["metatensor"]
            data.append(metatensor.join(field, axis="samples", **join_kwargs))
        elif kind == "metatensor-torch":
            import metatensor.torch  # noqa: PLC0415 - loaded already, as its map is here

            data.append(metatensor.torch.join(field, axis="samples", **join_kwargs))
        elif kind == "torch":
            data.append(torch.vstack(field))
        else:
            data.append(field)
    return _namedtuple.namedtuple("Batch", names)(*data)


#: the TorchScript class of metatensor-torch's maps
_METATENSOR_TORCH_MAP = "__torch__.torch.classes.metatensor.TensorMap"

#: what group_and_join joins or stacks, in the order its errors name them
_JOINED = ("blockmap", "metatensor-core", "metatensor-torch", "torch")


def _kind(value: Any) -> tuple[str, str | None]:
    """What ``value`` is to ``group_and_join``: whose map (``"blockmap"``,
    ``"metatensor-core"``, ``"metatensor-torch"``) with its array type
    (``"numpy"``, ``"torch"``, or ``None`` for a map without blocks), a
    torch tensor (``("torch", None)``), or its type's name."""
    if isinstance(value, _blockmap.TensorMap):
        return ("blockmap", value._arrays)
    if _is_metatensor_map(value):
        arrays = None
        if len(value) > 0:
            arrays = "torch" if isinstance(value.block(0).values, torch.Tensor) else "numpy"
        return ("metatensor-core", arrays)
    if script_class(value) == _METATENSOR_TORCH_MAP:
        return ("metatensor-torch", "torch")
    if isinstance(value, torch.Tensor):
        return ("torch", None)
    return (type(value).__name__, None)


def _one_kind(name: str, field: Sequence[Any]) -> str:
    """The one kind of the values of a field: a library whose maps are
    joined, ``"torch"`` for tensors, or ``""`` for values kept as a tuple.
    A field that mixes kinds is refused, whichever value comes first
    (each library's join would refuse the others' maps with its own error,
    torch.vstack other values with its own, or the field would be kept as
    a tuple when another value came first; maps of numpy and torch arrays
    would give the array type of the first)."""
    kinds = {_kind(value) for value in field}
    libraries = {library for library, _ in kinds}
    arrays = {arrays for _, arrays in kinds} - {None}
    joined = [library for library in _JOINED if library in libraries]
    if not joined:
        return ""
    if len(libraries) == 1 and len(arrays) <= 1:
        return joined[0]

    def described(library: str) -> str:
        if library == "torch":
            return "torch tensors"
        if library not in _JOINED:
            return f"{library} values"
        if len(libraries) == 1:
            of = [a for a in ("numpy", "torch") if (library, a) in kinds]
            return f"{library} maps of {' and of '.join(f'{a} arrays' for a in of)}"
        return f"{library} maps"

    others = sorted(libraries - set(_JOINED))
    if others or "torch" in libraries:
        remedy = (
            "a field's values are joined (maps), stacked (tensors) or kept as they are "
            "(other values) together: give every sample a value of one kind"
        )
    else:
        remedy = (
            "the maps of a field are joined by one library, convert them to one first "
            "(blockmap.metatensor / blockmap.metatensor_torch, map.to(arrays=...))"
        )
    raise exceptions.BlockMapTypeError(
        f"the field {name!r} holds {' and '.join(described(k) for k in [*joined, *others])}: "
        f"{remedy}"
    )


def _is_metatensor_map(value: Any) -> bool:
    """Whether ``value`` is metatensor-core's TensorMap, without importing
    metatensor (imported already when one exists)."""
    metatensor = sys.modules.get("metatensor")
    cls = getattr(metatensor, "TensorMap", None)
    return isinstance(cls, type) and isinstance(value, cls)


class DataLoader(torch.utils.data.DataLoader):
    """A :class:`torch.utils.data.DataLoader` whose ``collate_fn`` is
    :func:`group_and_join` unless given, as metatensor-learn's
    ``DataLoader``. Its batches pickle, so it works with ``num_workers``
    (``fork``, ``spawn`` or ``forkserver``); batches of blockmap's maps
    come back from the workers through shared memory (see docs/torch.md).

    Parameters
    ----------
    dataset
        a map-style dataset (:class:`Dataset`, :class:`IndexedDataset`,
        :class:`blockmap.Dataset` or any other)
    collate_fn
        the function that makes a batch of a list of samples
    **kwargs
        the other arguments of :class:`torch.utils.data.DataLoader`
    """

    def __init__(
        self,
        dataset: Any,
        collate_fn: Callable[[list[Any]], Any] = group_and_join,
        **kwargs: Any,
    ) -> None:
        super().__init__(dataset, collate_fn=collate_fn, **kwargs)
