"""Run code when a module is imported, without importing it ourselves.

blockmap registers its dask serializers when distributed is imported, but
importing distributed takes most of a second: it is not done on the mere
import of blockmap. :func:`when_imported` runs a callback at once when the
module is already imported, otherwise right after its first import.

One finder (:data:`_FINDER`) on :data:`sys.meta_path` serves every name
with callbacks waiting: it asks the finders after it for the module's spec
and wraps the spec's loader, which runs the callbacks once the module is
executed; it leaves :data:`sys.meta_path` when nothing waits any more. A
hook is installed at most once per ``(name, key)`` (``key`` defaults to the
callback), however often and in whatever order it is asked for. The finder
never asks itself for a spec, nor the finder of another copy of this
module (blockmap loaded twice, under two names): it lets that one wrap the
spec's loader too, without asking anyone. And it does not re-enter for a
name it is resolving: a finder that calls ``sys.meta_path`` again cannot
send it into a recursion.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import warnings
from collections.abc import Callable, Hashable, Sequence
from types import ModuleType

__all__ = ["when_imported"]

_LOCK = threading.RLock()
#: name -> key -> callback, the hooks waiting for the module's import
_WAITING: dict[str, dict[Hashable, Callable[[], None]]] = {}
#: the (name, key) of the hooks installed in this process (waiting or run)
_INSTALLED: set[tuple[str, Hashable]] = set()


def when_imported(name: str, callback: Callable[[], None], key: Hashable | None = None) -> None:
    """Call ``callback()`` once the module ``name`` is imported: now if it
    is, otherwise right after its import. Asking again with the same
    ``key`` (by default the callback itself) does nothing."""
    key = callback if key is None else key
    with _LOCK:
        if (name, key) in _INSTALLED:
            return
        _INSTALLED.add((name, key))
        if name not in sys.modules:
            _WAITING.setdefault(name, {})[key] = callback
            if _FINDER not in sys.meta_path:
                sys.meta_path.insert(0, _FINDER)
            return
    _call(name, callback)


def _is_ours(finder: object) -> bool:
    # by attribute, not class: a reloaded copy of this module is ours too
    return getattr(finder, "_blockmap_hook", False) is True


def _call(name: str, callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception as error:  # never break the user's import
        warnings.warn(
            f"blockmap could not set itself up for {name}: {error!r}",
            RuntimeWarning,
            stacklevel=3,
        )


def _imported(name: str) -> None:
    """The module ``name`` was executed: run what waited for it."""
    with _LOCK:
        callbacks = list(_WAITING.pop(name, {}).values())
        if not _WAITING and _FINDER in sys.meta_path:
            sys.meta_path.remove(_FINDER)
    for callback in callbacks:
        _call(name, callback)


class _Finder(importlib.abc.MetaPathFinder):
    #: marks blockmap's finders, those of other copies of this module too
    _blockmap_hook = True

    def __init__(self) -> None:
        self.resolving = threading.local()

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _WAITING:
            return None
        names: set[str] = self.resolving.__dict__.setdefault("names", set())
        if fullname in names:
            # a finder after this one asked sys.meta_path again
            return None
        names.add(fullname)
        try:
            spec, ours = self._spec_from_the_others(fullname, path, target)
        finally:
            names.discard(fullname)
        if spec is None:
            return None
        # the other copies' hooks for this name (they are never asked for
        # the spec: each would ask this one back)
        for finder in ours:
            spec = finder.wrap(fullname, spec)
        return self.wrap(fullname, spec)

    def _spec_from_the_others(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> tuple[importlib.machinery.ModuleSpec | None, list[_Finder]]:
        ours = []
        for finder in list(sys.meta_path):
            if _is_ours(finder):
                if finder is not self and hasattr(finder, "wrap"):
                    ours.append(finder)
                continue
            if not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                return spec, ours
        return None, ours

    def wrap(
        self, fullname: str, spec: importlib.machinery.ModuleSpec
    ) -> importlib.machinery.ModuleSpec:
        """``spec`` with a loader that runs this copy's hooks for
        ``fullname`` once the module is executed, if any wait."""
        if fullname in _WAITING and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader, fullname)
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, name: str) -> None:
        self.loader = loader
        self.name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        _imported(self.name)

    def __getattr__(self, name: str) -> object:
        return getattr(self.loader, name)


#: the one finder of this module
_FINDER = _Finder()
