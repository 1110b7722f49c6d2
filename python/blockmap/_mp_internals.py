"""Every use blockmap makes of CPython's private multiprocessing internals,
in one module, checked at import against the Python versions it was
written and tested for.

The reducer of :mod:`blockmap._reduction` sends a map in shared memory as
descriptors that multiprocessing's resource sharer holds until the
receiver fetches them, and makes the sending process wait at its exit
until they are fetched (docs/transports.md). multiprocessing has no public
seam for either: what the reducer needs is read here, and only here, from
CPython's own modules:

- ``context.get_spawning_popen()``: whether a process is being started
  (its arguments' descriptors reach it at its start, not through the
  sharer);
- ``process.current_process()._inheriting``: whether this process is a
  spawned child still being set up;
- ``util._exiting``: whether the exit finalizers run;
- ``util.Finalize`` with an ``exitpriority`` above the resource sharer's
  (0) and the queues' (-5), and ``util.register_after_fork``: the exit
  wait, registered again in a forked child (which drops the finalizers it
  inherited);
- ``util._finalizer_registry`` and ``queues.Queue._finalize_close``: each
  queue's close finalizer holds the buffer of messages its feeder thread
  has not written yet (``Finalize._callback``, ``Finalize._args``);
- ``resource_sharer._resource_sharer`` (its ``_lock`` and ``_cache``) and
  the ``_id`` of ``resource_sharer.DupFd``: which descriptors the sharer
  still holds, and under which key.

They are the same in CPython 3.11, 3.12 and 3.13 (:data:`TESTED`, the
versions blockmap's wheels are built and tested for). On any other
version, or where one of them is missing, :data:`REASON` says why and
:data:`SUPPORTED` is false: the reducer then never sends descriptors (it
sends every map by value, as pickle does, with one ``RuntimeWarning`` per
process for a map the user put in shared memory), and nothing here is
called. This module imports nothing of blockmap's, so that it can be
checked on an interpreter alone.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from multiprocessing import context, process, queues, resource_sharer, util
from typing import Any

__all__ = [
    "REASON",
    "SUPPORTED",
    "TESTED",
    "after_fork",
    "at_exit",
    "check",
    "exiting",
    "inheriting",
    "queues_still_sending",
    "sharer_holds",
    "sharer_key",
    "spawning",
]

#: the CPython versions whose multiprocessing internals this module was
#: written for and is tested on
TESTED = ((3, 11), (3, 12), (3, 13))

#: (module, attribute) of every internal used here, checked at import
_NAMES = (
    (context, "get_spawning_popen"),
    (util, "_exiting"),
    (util, "Finalize"),
    (util, "register_after_fork"),
    (util, "_finalizer_registry"),
    (queues.Queue, "_finalize_close"),
    (resource_sharer, "_resource_sharer"),
    (resource_sharer, "DupFd"),
)


def check(version: tuple[int, ...]) -> str | None:
    """Why blockmap does not use multiprocessing's internals on CPython
    ``version`` (``(major, minor)``) with the modules loaded here, or
    ``None`` when it does."""
    version = tuple(version[:2])
    if sys.implementation.name != "cpython":
        return (
            "blockmap's multiprocessing reducer relies on internals of CPython, not "
            f"of {sys.implementation.name}"
        )
    if version not in TESTED:
        tested = ", ".join(f"{major}.{minor}" for major, minor in TESTED)
        return (
            f"blockmap's multiprocessing reducer relies on internals of CPython {tested}, "
            f"and this is Python {'.'.join(map(str, version))}"
        )
    missing = [
        f"{getattr(owner, '__name__', owner)}.{name}"
        for owner, name in _NAMES
        if not hasattr(owner, name)
    ]
    sharer = getattr(resource_sharer, "_resource_sharer", None)
    missing += [
        f"multiprocessing.resource_sharer._resource_sharer.{name}"
        for name in ("_lock", "_cache")
        if sharer is not None and not hasattr(sharer, name)
    ]
    if missing:
        return (
            "blockmap's multiprocessing reducer relies on internals this multiprocessing "
            f"does not have: {', '.join(missing)}"
        )
    return None


#: why the internals are not used here, or ``None`` when they are
REASON = check(sys.version_info[:2])
#: whether the internals are used: this is one of :data:`TESTED` and has them
SUPPORTED = REASON is None


def spawning() -> bool:
    """Whether this thread is pickling the arguments of a process being
    started."""
    return context.get_spawning_popen() is not None


def inheriting() -> bool:
    """Whether this process is a child that multiprocessing started and is
    still setting up (its ``spawn`` / ``forkserver`` preparation)."""
    return bool(getattr(process.current_process(), "_inheriting", False))


def exiting() -> bool:
    """Whether multiprocessing's exit finalizers run in this process."""
    return bool(util._exiting)


def at_exit(callback: Callable[[], None], priority: int) -> None:
    """Run ``callback`` among multiprocessing's exit finalizers, in the pass
    of ``priority`` (the resource sharer stops at 0, queues are flushed
    at -5: a higher priority runs before both)."""
    util.Finalize(None, callback, exitpriority=priority)


def after_fork(owner: object, callback: Callable[[object], None]) -> None:
    """Call ``callback(owner)`` in each child multiprocessing forks, once it
    has dropped the finalizers it inherited (``owner`` is held weakly)."""
    util.register_after_fork(owner, callback)


def queues_still_sending() -> bool:
    """Whether a multiprocessing Queue of this process holds messages its
    feeder thread has not written yet."""
    close = queues.Queue._finalize_close
    for finalizer in list(util._finalizer_registry.values()):
        if getattr(finalizer, "_callback", None) is close:
            args = getattr(finalizer, "_args", None)
            if args and args[0]:
                return True
    return False


def sharer_key(handle: Any) -> Any:
    """The resource sharer's key of ``handle`` (what
    :func:`multiprocessing.reduction.DupFd` returned), or ``None`` for a
    handle the sharer does not hold (one for a process being started)."""
    identity = getattr(handle, "_id", None)
    if isinstance(identity, tuple) and len(identity) == 2:
        return identity[1]
    return None


def sharer_holds(keys: set[Any]) -> bool:
    """Whether the resource sharer still holds a descriptor of ``keys``;
    the keys of those it no longer holds (fetched) leave ``keys``."""
    sharer = resource_sharer._resource_sharer
    with sharer._lock:
        keys.intersection_update(sharer._cache)
        return bool(keys)
