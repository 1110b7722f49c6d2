"""metatensor-core's objects and blockmap's, both ways, and blockmap's
transports for metatensor-core's own objects.

**Bridges.** :func:`from_metatensor` turns metatensor-core's ``Labels``,
``TensorBlock`` and ``TensorMap`` into blockmap's, and
:func:`to_metatensor` (also the ``to_metatensor()`` method of blockmap's
classes) the other way. Gradients and info come along. Array data is not
copied either way: metatensor-core keeps the numpy array it is given (here,
a view of blockmap's memory, which it keeps alive), and blockmap keeps a
buffer export of metatensor-core's numpy arrays. Labels are copied once
(each library keeps its labels in its own memory).

**Registration.** ``blockmap.metatensor.register()`` is the one line that
moves metatensor-core's objects the way blockmap moves its own:

- pickle (and everything built on it: multiprocessing, torch DataLoader
  workers, ray, joblib) goes through blockmap's wire format: protocol 5
  gives one out-of-band buffer per array and no archive, lower protocols the
  ``.mts`` archive; objects come back as metatensor-core objects;
- dask.distributed gets serializers with one frame per array (workers of
  clusters created after the call register themselves through dask's
  ``distributed.worker.preload``; for a cluster started elsewhere, start its
  workers with ``--preload blockmap.metatensor``);
- :func:`blockmap.share_memory` takes metatensor-core objects, and the
  shared objects cross multiprocessing as a file descriptor and metadata.

It is opt-in because such a pickle needs blockmap to load. Importing
blockmap, or this module, changes nothing about metatensor-core's objects.
A process that unpickles one of these objects is registered too, so that it
sends them back the same way.
"""

from __future__ import annotations

import copyreg
import sys
import weakref
from typing import Any

from . import _hooks, _optional
from ._blockmap import Labels, TensorBlock, TensorMap, _foreign
from ._bridges import LabelsCache, convert_block
from .exceptions import BlockMapTypeError

__all__ = ["from_metatensor", "is_registered", "register", "share_memory", "to_metatensor"]

Blockmap = Labels | TensorBlock | TensorMap


def _metatensor() -> Any:
    try:
        import metatensor
    except ImportError as error:
        raise _optional.missing(
            "blockmap.metatensor converts to and from metatensor-core, which is not installed",
            "metatensor",
            "metatensor-core",
            "metatensor",
        ) from error
    return metatensor


def to_metatensor(obj: Blockmap) -> Any:
    """metatensor-core's ``Labels``, ``TensorBlock`` or ``TensorMap`` with
    the same data as ``obj`` (blockmap's).

    Values and gradients are shared (metatensor-core's block holds a numpy
    view of blockmap's memory, which stays alive as long as it does); labels
    are copied once; info is copied.

    Parameters
    ----------
    obj : Labels, TensorBlock or TensorMap
        blockmap's object.

    Returns
    -------
    metatensor.Labels, metatensor.TensorBlock or metatensor.TensorMap
        metatensor-core's object of the same kind.

    Raises
    ------
    BlockMapTypeError
        If ``obj`` is not one of blockmap's three classes.
    ModuleNotFoundError
        If metatensor-core is not installed.
    """
    mts = _metatensor()
    # blockmap's labels are unique already: metatensor-core need not check
    convert = LabelsCache(
        lambda labels, _: mts.Labels(labels.names, labels.values, assume_unique=True)
    )
    if isinstance(obj, Labels):
        return convert(obj)
    if isinstance(obj, TensorBlock):
        return convert_block(mts.TensorBlock, convert, _same, obj)
    if isinstance(obj, TensorMap):
        keys = convert(obj.keys)
        blocks = [convert_block(mts.TensorBlock, convert, _same, block) for block in obj.blocks()]
        result = mts.TensorMap(keys, blocks)
        for key, value in obj.info().items():
            result.set_info(key, value)
        return result
    raise BlockMapTypeError(
        f"to_metatensor takes blockmap's Labels, TensorBlock or TensorMap, not {type(obj).__name__}"
    )


def from_metatensor(obj: Any) -> Blockmap:
    """blockmap's ``Labels``, ``TensorBlock`` or ``TensorMap`` with the same
    data as ``obj`` (metatensor-core's).

    Values and gradients are shared (blockmap keeps a buffer export of
    metatensor-core's numpy arrays; an array that is not C-contiguous and
    aligned is copied once, as for any array given to
    :class:`blockmap.TensorBlock`); labels are copied once; info is copied.

    Parameters
    ----------
    obj : metatensor.Labels, metatensor.TensorBlock or metatensor.TensorMap
        metatensor-core's object.

    Returns
    -------
    Labels, TensorBlock or TensorMap
        blockmap's object of the same kind.

    Raises
    ------
    BlockMapTypeError
        If ``obj`` is not one of metatensor-core's three classes, or its
        arrays have a dtype blockmap does not hold.
    ValidationError
        If its data breaks blockmap's rules.
    BlockMapMemoryError
        If memory for the labels cannot be allocated.
    """
    mts = sys.modules.get("metatensor")
    convert = LabelsCache(lambda labels, _: Labels(labels.names, labels.values))
    if mts is not None:
        if isinstance(obj, mts.Labels):
            return convert(obj)
        if isinstance(obj, mts.TensorBlock):
            return convert_block(TensorBlock, convert, _same, obj)
        if isinstance(obj, mts.TensorMap):
            keys = convert(obj.keys)
            blocks = [convert_block(TensorBlock, convert, _same, block) for block in obj.blocks()]
            result = TensorMap(keys, blocks)
            for key, value in obj.info().items():
                # metatensor-core's info() gives None for a key whose value
                # is the empty string (it stores the string; its own pickle
                # keeps it)
                result.set_info(key, "" if value is None else value)
            return result
    raise BlockMapTypeError(
        f"from_metatensor takes metatensor-core's Labels, TensorBlock or TensorMap, "
        f"not {type(obj).__module__}.{type(obj).__name__}"
    )


def _same(values: Any) -> Any:
    """The values of a block, given as they are: each library keeps the
    other's numpy array (or a buffer export of it)."""
    return values


# -- shared memory ----------------------------------------------------------

#: id(metatensor object) -> (weak reference to it, blockmap's shared object)
_SHARED: dict[int, tuple[weakref.ref[Any], Blockmap]] = {}


def share_memory(obj: Any) -> Any:
    """metatensor-core's ``obj`` with its data moved into one shared memory
    segment (one copy), as :meth:`blockmap.TensorMap.share_memory` does for
    blockmap's maps: a new metatensor-core object viewing the segment, which
    crosses multiprocessing (Queue, Pipe, Pool, ...) as metadata and a file
    descriptor. Needs :func:`register`.

    Parameters
    ----------
    obj : metatensor.TensorMap or metatensor.TensorBlock
        metatensor-core's object.

    Returns
    -------
    metatensor.TensorMap or metatensor.TensorBlock
        A new metatensor-core object viewing the shared segment.

    Raises
    ------
    BlockMapTypeError
        If :func:`register` was not called, or ``obj`` is of another type.
    BlockMapIOError
        If the shared-memory segment cannot be made.
    BlockMapMemoryError
        If memory cannot be allocated.
    """
    if not _REGISTERED:
        raise BlockMapTypeError(
            "sharing metatensor-core's objects needs blockmap.metatensor.register() "
            "first: it is what makes them cross multiprocessing as shared memory (or "
            "convert it with `blockmap.from_metatensor(x)` and share blockmap's object)"
        )
    mts = _metatensor()
    if not isinstance(obj, (mts.TensorMap, mts.TensorBlock)):
        name = _foreign(obj) or type(obj).__name__
        raise BlockMapTypeError(f"share_memory takes a TensorMap or a TensorBlock, not {name}")
    shared = from_metatensor(obj).share_memory()
    return _remember_shared(to_metatensor(shared), shared)


def _remember_shared(result: Any, shared: Blockmap) -> Any:
    """Note that metatensor-core's ``result`` views blockmap's ``shared``
    (for as long as ``result`` lives), so that it is sent as ``shared``."""
    key = id(result)
    _SHARED[key] = (weakref.ref(result), shared)
    weakref.finalize(result, _SHARED.pop, key, None)
    return result


def _shared_twin(obj: Any) -> Blockmap | None:
    entry = _SHARED.get(id(obj))
    if entry is not None and entry[0]() is obj:
        return entry[1]
    return None


# -- pickle -----------------------------------------------------------------


def _reduce(obj: Any) -> tuple[Any, tuple[Any, ...]]:
    twin = _shared_twin(obj)
    if twin is None:
        twin = from_metatensor(obj)
    return _rebuild, (twin,)


def _rebuild(obj: Blockmap) -> Any:
    """Unpickling: blockmap's object, rebuilt by blockmap's reconstructor
    (viewing the out-of-band buffers), made metatensor-core's again."""
    register()
    result = to_metatensor(obj)
    if isinstance(obj, (TensorMap, TensorBlock)) and obj.is_shared():
        return _remember_shared(result, obj)
    return result


# -- dask -------------------------------------------------------------------


def _dask_serialize(obj: Any) -> tuple[dict[str, Any], list[Any]]:
    from . import dask

    twin = _shared_twin(obj)
    return dask.serialize(twin if twin is not None else from_metatensor(obj))


def _dask_deserialize(header: dict[str, Any], frames: list[Any]) -> Any:
    from . import dask

    return to_metatensor(dask.deserialize(header, frames))


def _register_dask() -> None:
    import dask.config
    from distributed.protocol import dask_deserialize, dask_serialize

    mts = _metatensor()
    for cls in (mts.TensorMap, mts.TensorBlock, mts.Labels):
        dask_serialize.register(cls)(_dask_serialize)
        dask_deserialize.register(cls)(_dask_deserialize)
    preload = list(dask.config.get("distributed.worker.preload", []) or [])
    if __name__ not in preload:
        dask.config.set({"distributed.worker.preload": [*preload, __name__]})


def dask_setup(worker: Any) -> None:
    """dask's preload hook: a worker started with ``--preload
    blockmap.metatensor`` registers itself."""
    del worker
    register()


# -- registration -----------------------------------------------------------

_REGISTERED = False


def register() -> None:
    """Move metatensor-core's TensorMap, TensorBlock and Labels with
    blockmap's transports, in this process (see the module's docs). Calling
    it again does nothing.

    Raises
    ------
    ModuleNotFoundError
        If metatensor-core is not installed.
    """
    global _REGISTERED
    if _REGISTERED:
        return
    mts = _metatensor()
    for cls in (mts.TensorMap, mts.TensorBlock, mts.Labels):
        copyreg.pickle(cls, _reduce)
    _REGISTERED = True
    _hooks.when_imported("distributed", _register_dask)


def is_registered() -> bool:
    """Whether :func:`register` was called in this process.

    Returns
    -------
    bool
        True after :func:`register`.
    """
    return _REGISTERED
