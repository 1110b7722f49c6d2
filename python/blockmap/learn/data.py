"""metatensor-learn's data tools on blockmap's maps.

- :class:`Dataset` and :class:`IndexedDataset` are metatensor-learn 0.5's
  own code (``metatensor_learn/data/_dataset.py``, loaded again as
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
    """
    return _namedtuple.namedtuple("Batch", batch[0]._fields)(*zip(*batch, strict=True))


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
    :func:`torch.vstack`; anything else stays a tuple. Which applies is read
    off the field's first value.

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
    blockmap.BlockMapTypeError
        a field holds maps of several libraries (or maps and other
        values), whichever comes first
    blockmap.BlockMapError
        blockmap's join refused the maps (different keys without
        ``different_keys``, metadata that differs)
    """
    names = batch[0]._fields
    if fields_to_join is None:
        fields_to_join = names
    if join_kwargs is None:
        join_kwargs = {}
    data: list[Any] = []
    for name, field in zip(names, zip(*batch, strict=True), strict=True):
        if name == "sample_id" or name not in fields_to_join:
            data.append(field)
            continue
        first = field[0]
        _check_one_library(name, field)
        if isinstance(first, _blockmap.TensorMap):
            data.append(_blockmap.join(field, axis="samples", **join_kwargs))
        elif _is_metatensor_map(first):
            metatensor = sys.modules["metatensor"]
            data.append(metatensor.join(field, axis="samples", **join_kwargs))
        elif isinstance(first, torch.ScriptObject) and first._type().name() == "TensorMap":
            import metatensor.torch  # noqa: PLC0415 - loaded already, as its map is here

            data.append(metatensor.torch.join(field, axis="samples", **join_kwargs))
        elif isinstance(first, torch.Tensor):
            data.append(torch.vstack(field))
        else:
            data.append(field)
    return _namedtuple.namedtuple("Batch", names)(*data)


def _library(value: Any) -> str:
    """Whose map ``value`` is (``"blockmap"``, ``"metatensor-core"``,
    ``"metatensor-torch"``), or its type's name when it is no map."""
    if isinstance(value, _blockmap.TensorMap):
        return "blockmap"
    if _is_metatensor_map(value):
        return "metatensor-core"
    if isinstance(value, torch.ScriptObject) and value._type().name() == "TensorMap":
        return "metatensor-torch"
    return type(value).__name__


def _check_one_library(name: str, field: Sequence[Any]) -> None:
    """Refuse a field of maps that are not all of one library (each
    library's join would refuse the others' with its own error, or not at
    all)."""
    libraries = ("blockmap", "metatensor-core", "metatensor-torch")
    first = _library(field[0])
    if first not in libraries:
        return
    others = sorted({_library(value) for value in field} - {first})
    if others:
        described = [f"{o} maps" if o in libraries else f"{o} values" for o in others]
        raise exceptions.BlockMapTypeError(
            f"the field {name!r} holds {first} maps and {', '.join(described)}: the maps "
            "of a field are joined by one library, convert them to one first "
            "(blockmap.metatensor / blockmap.metatensor_torch)"
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
