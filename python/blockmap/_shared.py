"""Sending TensorMaps, TensorBlocks and Labels that live in shared memory
(after ``share_memory()``) through :mod:`multiprocessing`.

A reducer registered with :class:`multiprocessing.reduction.ForkingPickler`
(what Queue, Pipe, Pool, Process arguments and
:class:`concurrent.futures.ProcessPoolExecutor` pickle with), and with loky's
pickler (joblib's default backend), sends such an
object as its pickle header, one duplicated file descriptor per shared
segment (:func:`multiprocessing.reduction.DupFd`, passed over a Unix socket),
where each array lies in the segments, and the label values (labels never
live in a segment another process could write to: each receiver copies and
checks them). The receiver maps the same segments: the values are not
copied, and writes by either process are seen by the other. Objects not in
shared memory are pickled as usual.

A descriptor sent with ``DupFd`` outside of process start-up is held by the
sender's resource sharer until the receiver unpickles the message; the
sender must stay alive until then (as with torch's shared tensors).
"""

from __future__ import annotations

import importlib
import os
import pickle
from collections.abc import Sequence
from multiprocessing.reduction import DupFd, ForkingPickler
from typing import Any

from . import _blockmap
from ._blockmap import Labels, TensorBlock, TensorMap

__all__ = ["LOKY_REDUCTION_MODULES", "register", "register_loky", "share_memory"]

Shareable = TensorMap | TensorBlock | Labels


def _reduce(obj: Shareable) -> tuple[Any, tuple[Any, ...]]:
    parts = _blockmap._shared_parts(obj)
    if parts is None:
        return obj.__reduce_ex__(pickle.DEFAULT_PROTOCOL)
    header, fds, places, labels = parts
    return _rebuild, (header, [DupFd(fd) for fd in fds], places, labels)


def _rebuild(
    header: bytes,
    handles: Sequence[Any],
    places: list[tuple[int, int, int, bool] | None],
    labels: bytes,
) -> Shareable:
    fds: list[int] = []
    try:
        for handle in handles:
            fds.append(handle.detach())
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    # takes ownership of the descriptors, also on error
    return _blockmap._attach_shared(header, fds, places, labels)


def share_memory(obj: Any) -> Any:
    """Move ``obj``'s data into shared memory: ``obj.share_memory()`` for
    blockmap's TensorMap and TensorBlock (the object itself, shared in
    place), :func:`blockmap.metatensor.share_memory` for metatensor-core's
    (a new object viewing the segment; needs
    :func:`blockmap.metatensor.register`)."""
    if isinstance(obj, (TensorMap, TensorBlock)):
        return obj.share_memory()
    if type(obj).__module__.split(".")[0] == "metatensor":
        from . import metatensor

        return metatensor.share_memory(obj)
    from .exceptions import BlockMapTypeError

    raise BlockMapTypeError(
        f"share_memory takes a TensorMap or a TensorBlock (blockmap's or "
        f"metatensor-core's), not {type(obj).__name__}"
    )


def register() -> None:
    """Register the reducer with ``ForkingPickler`` (done on import of blockmap)."""
    for cls in (TensorMap, TensorBlock, Labels):
        ForkingPickler.register(cls, _reduce)


#: loky's pickler (joblib's default backend) has its own reducer registry:
#: blockmap registers there too, when that module is imported.
LOKY_REDUCTION_MODULES = ("joblib.externals.loky.backend.reduction", "loky.backend.reduction")


def register_loky(module: str) -> None:
    """Register the reducer with the loky reduction module named ``module``."""
    reduction = importlib.import_module(module)
    for cls in (TensorMap, TensorBlock, Labels):
        reduction.register(cls, _reduce)
