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
copied, and writes by either process are seen by the other.
A map or block that is not in shared memory but holds at least
:func:`blockmap.get_auto_share_threshold` bytes of values (256 KiB by default) is
first copied once into a fresh segment, and that copy is sent the same way:
the data never goes through the pipe, and the sender's object is left as it
was (as torch moves a tensor into shared memory when it is put on a queue,
but without changing the sender's arrays). Smaller objects, and every object
pickled while a process is being started (its arguments: share those with
``share_memory()`` first), are pickled as usual.

Sharing degrades instead of failing when descriptors run short: a sender
with few free descriptors (see :func:`_descriptors_left`) sends the data, and
a receiver keeps a received segment's descriptor only within a budget (the
native module closes it once mapped beyond that: docs/transports.md).

A descriptor sent with ``DupFd`` outside of process start-up is held by the
sender's resource sharer until the receiver unpickles the message; the
sender must stay alive until then (as with torch's shared tensors). So that
the common "put the result on a queue and return" works, a process that has
sent descriptors waits at its exit, for at most :data:`EXIT_WAIT_SECONDS`,
until every receiver has fetched them (blockmap's descriptors: those of
others, torch's among them, are not waited for).

What this needs of multiprocessing beyond its public API (which
descriptors its resource sharer still holds, which messages its queues
have not written, whether a process is starting or exiting) is asked of
:mod:`blockmap._mp_internals`, and only on the CPython versions that module
was tested on: on another one, every object is sent by value.
"""

from __future__ import annotations

import errno
import importlib
import os
import pickle
import threading
import time
import warnings
from collections.abc import Sequence
from multiprocessing.reduction import DupFd, ForkingPickler
from typing import Any

from . import _blockmap, _mp_internals
from ._blockmap import Labels, TensorBlock, TensorMap, _foreign
from .exceptions import BlockMapError, BlockMapIOError, BlockMapTypeError

__all__ = [
    "LOKY_REDUCTION_MODULES",
    "register",
    "register_loky",
    "share_memory",
]

Shareable = TensorMap | TensorBlock | Labels


def _descriptors_left() -> int | None:
    """How many more descriptors this process may open before its soft
    ``RLIMIT_NOFILE``, less a margin (an eighth of the limit, at least 16)
    for everything else it does; ``None`` when unknown or unlimited."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return None
        used = len(os.listdir("/proc/self/fd"))
    except (ImportError, OSError, ValueError):
        return None
    return soft - used - max(16, soft // 8)


def _descriptors_suffice(count: int) -> bool:
    """Whether sending ``count`` descriptors (each duplicated and held until
    the receiver fetches it) leaves this process enough of them."""
    left = _descriptors_left()
    return left is None or count <= left


def _auto_shared(obj: Shareable) -> Shareable | None:
    """A copy of ``obj`` in a fresh shared segment, when it should travel so."""
    if not _blockmap._auto_shares(obj):
        return None
    # a segment (one descriptor) and its duplicate until it is fetched
    if not _descriptors_suffice(2):
        return None
    if _mp_internals.spawning():
        # arguments of a process being started: their descriptors must stay
        # open until the start, which a temporary copy would not
        return None
    try:
        return obj.copy(deep=False).share_memory()
    except (BlockMapError, OSError):
        # no shared memory here (not Linux, or none left): pickle as usual
        return None


#: How long a process that sent shared maps waits at its exit for receivers
#: to fetch the descriptors still held by its resource sharer.
EXIT_WAIT_SECONDS = 5.0

#: The process whose exit finalizer is registered and has not run yet:
#: registered by its first send, or when a multiprocessing child starts
#: (see :func:`register`); importing blockmap registers none.
_exit_wait_pid: int | None = None


#: The resource sharer's keys of the descriptors this process sent for
#: blockmap (the exit wait is for these only: torch's tensors go through the
#: same sharer, and a DataLoader worker whose prefetched batches are dropped
#: would otherwise wait EXIT_WAIT_SECONDS for receivers that never come).
#: Cleared in a forked child, whose sharer starts empty.
_sent_keys: set[Any] = set()


def _descriptors_pending() -> bool:
    """Whether the resource sharer still holds descriptors blockmap sent
    that no receiver fetched."""
    return _mp_internals.sharer_holds(_sent_keys)


def _sent(handles: list[Any]) -> list[Any]:
    """``handles`` (DupFd objects), their sharer keys noted as blockmap's."""
    for handle in handles:
        key = _mp_internals.sharer_key(handle)
        if key is not None:
            _sent_keys.add(key)
    return handles


def _wait_for_pending_descriptors() -> None:
    """Wait (at most EXIT_WAIT_SECONDS) until the queues have written their
    messages and the receivers have fetched every descriptor. Runs first
    among the exit finalizers: the resource sharer's socket is removed at
    priority 0, and the queues are flushed only at -5."""
    global _exit_wait_pid
    try:
        _wait_until_fetched()
    finally:
        # sends from now on come too late for it
        _exit_wait_pid = None


def _wait_until_fetched() -> None:
    deadline = time.monotonic() + EXIT_WAIT_SECONDS
    quiet = 0
    while time.monotonic() < deadline:
        if _reducing or _mp_internals.queues_still_sending() or _descriptors_pending():
            quiet = 0
        else:
            # twice in a row: a feeder thread may be between taking a
            # message from its buffer and registering its descriptors
            quiet += 1
            if quiet == 2:
                return
        time.sleep(0.005)


def _wait_at_exit(force: bool = False) -> bool:
    """Make this process wait at its exit until its pending descriptors are
    fetched (see :func:`_wait_for_pending_descriptors`); registered by the
    first send of each process. False when it may come too late: the
    process is exiting (a queue's feeder thread pickling while the exit
    finalizers run) and a finalizer registered now could run after the
    resource sharer has stopped, so the data is sent instead."""
    global _exit_wait_pid
    if _exit_wait_pid == os.getpid() and not force:
        return True
    # registered before DupFd starts the resource sharer (whose finalizer
    # runs at priority 0): whichever pass of the exit finalizers runs the
    # sharer's also runs this one, first; two threads may both register
    # (harmless: the second wait returns at once)
    _mp_internals.at_exit(_wait_for_pending_descriptors, priority=100)
    _exit_wait_pid = os.getpid()
    return not _mp_internals.exiting()


#: Threads in :func:`_reduce` now (a queue's feeder thread between taking
#: a message from its buffer and registering its descriptors: the exit wait
#: must not see "nothing pending" then). A set: adding and discarding are
#: atomic under the GIL, and no lock is held across a fork.
_reducing: set[int] = set()


def _reduce(obj: Shareable) -> tuple[Any, tuple[Any, ...]]:
    me = threading.get_ident()
    nested = me in _reducing
    _reducing.add(me)
    try:
        return _reduce_now(obj)
    finally:
        if not nested:
            _reducing.discard(me)


def _reduce_now(obj: Shareable) -> tuple[Any, tuple[Any, ...]]:
    if isinstance(obj, TensorMap) and obj._pickles_as_reference:
        # read from a dataset file and unchanged: a reference to it, which
        # the receiver maps itself (no copy, whatever its size); only here,
        # for processes that share the file now (pickle writes the data)
        from .dataset import _reduce_map

        reduced = _reduce_map(obj)
        if reduced is not None:
            return reduced
    if obj._arrays == "torch":
        # its numpy twin (the same memory, reduced by this function again)
        # and which tensors require grad
        return obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    if not _mp_internals.SUPPORTED:
        return _by_value(obj)
    parts = _blockmap._shared_parts(obj)
    if parts is None:
        shared = _auto_shared(obj)
        if shared is not None:
            parts = _blockmap._shared_parts(shared)
    if parts is not None and parts[1] and not _descriptors_suffice(len(parts[1])):
        # descriptors run short: send the data instead of handles to it
        parts = None
    if parts is not None and parts[1] and not _mp_internals.spawning():
        # sent now, held by the resource sharer until fetched: this process
        # must wait for that at its exit (a process being started gets its
        # descriptors at its start)
        if not _wait_at_exit():
            parts = None
    if parts is None:
        return obj.__reduce_ex__(pickle.DEFAULT_PROTOCOL)
    # DupFd duplicates each descriptor now: the segment outlives `shared`
    header, fds, places, labels = parts
    return _rebuild, (header, _sent([DupFd(fd) for fd in fds]), places, labels)


#: Whether this process warned that a map in shared memory went by value
#: (:func:`_by_value`): once per process.
_warned_by_value = False


def _by_value(obj: Shareable) -> tuple[Any, tuple[Any, ...]]:
    """``obj`` pickled with its data, on a Python whose multiprocessing
    internals blockmap does not use (:data:`blockmap._mp_internals.REASON`):
    the receiver gets a copy. An object the user put in shared memory warns
    once per process, as its receiver no longer sees the sender's writes."""
    global _warned_by_value
    if not _warned_by_value and isinstance(obj, (TensorMap, TensorBlock)) and obj.is_shared():
        _warned_by_value = True
        warnings.warn(
            f"blockmap sends this shared {type(obj).__name__} by value, not as shared "
            f"memory (the receiver gets a copy): {_mp_internals.REASON}; see "
            "docs/transports.md",
            RuntimeWarning,
            stacklevel=3,
        )
    return obj.__reduce_ex__(pickle.DEFAULT_PROTOCOL)


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
    except BaseException as error:
        for fd in fds:
            os.close(fd)
        if isinstance(error, (OSError, RuntimeError)) and not isinstance(error, BlockMapError):
            # no descriptor left here (EMFILE on the socket, or the kernel
            # dropped the one sent: "received 0 items of ancdata"), or the
            # sender is gone
            raise BlockMapIOError(
                getattr(error, "errno", None) or errno.EMFILE,
                f"could not receive the shared-memory descriptor of a blockmap "
                f"object ({error}); this process may have run out of file "
                f"descriptors (ulimit -n), or the sender exited",
            ) from error
        raise
    # takes ownership of the descriptors, also on error
    return _blockmap._attach_shared(header, fds, places, labels)


def share_memory(obj: Any) -> Any:
    """Move ``obj``'s data into shared memory: ``obj.share_memory()`` for
    blockmap's TensorMap and TensorBlock (the object itself, shared in
    place), :func:`blockmap.metatensor.share_memory` for metatensor-core's
    (a new object viewing the segment; needs
    :func:`blockmap.metatensor.register`).

    Parameters
    ----------
    obj : TensorMap or TensorBlock
        blockmap's or metatensor-core's.

    Returns
    -------
    TensorMap or TensorBlock
        ``obj`` itself for blockmap's objects; a new metatensor-core object
        for metatensor-core's.

    Raises
    ------
    BlockMapTypeError
        If ``obj`` is of another type, or is metatensor-core's and
        :func:`blockmap.metatensor.register` was not called.
    BlockMapIOError
        If the shared-memory segment cannot be made.
    BlockMapMemoryError
        If memory cannot be allocated.
    """
    if isinstance(obj, (TensorMap, TensorBlock)):
        return obj.share_memory()
    if type(obj).__module__.split(".")[0] == "metatensor":
        from . import metatensor

        return metatensor.share_memory(obj)
    raise BlockMapTypeError(
        f"share_memory takes a TensorMap or a TensorBlock (blockmap's or "
        f"metatensor-core's), not {_foreign(obj) or type(obj).__name__}"
    )


class _AfterFork:
    """The object multiprocessing's after-fork hooks are kept for (they are
    held weakly)."""


_AFTER_FORK = _AfterFork()


def register() -> None:
    """Register the reducer with ``ForkingPickler`` (done on import of
    blockmap).

    The exit finalizer is registered by the first send, except in the
    processes multiprocessing starts, which register it when they start:
    their first send is often the result put on a queue just before the
    target returns, which the queue's feeder thread pickles while the exit
    finalizers already run (too late to register one: that data would go
    by value). A forked child clears the finalizers it inherited and then
    runs the after-fork hooks; a spawned one runs none, and imports
    blockmap while it is being set up (:func:`blockmap._mp_internals.inheriting`).
    """
    for cls in (TensorMap, TensorBlock, Labels):
        ForkingPickler.register(cls, _reduce)
    # the threads of the parent that were reducing are not in a child
    os.register_at_fork(after_in_child=_reducing.clear)
    os.register_at_fork(after_in_child=_sent_keys.clear)
    if not _mp_internals.SUPPORTED:
        return  # no descriptor is ever sent: there is no exit wait
    _mp_internals.after_fork(_AFTER_FORK, lambda _: _wait_at_exit(force=True))
    if _mp_internals.inheriting():
        _wait_at_exit()


#: loky's pickler (joblib's default backend) has its own reducer registry:
#: blockmap registers there too, when that module is imported.
LOKY_REDUCTION_MODULES = ("joblib.externals.loky.backend.reduction", "loky.backend.reduction")


def register_loky(module: str) -> None:
    """Register the reducer with the loky reduction module named ``module``."""
    reduction = importlib.import_module(module)
    for cls in (TensorMap, TensorBlock, Labels):
        reduction.register(cls, _reduce)
