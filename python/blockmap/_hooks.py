"""Run code when a module is imported, without importing it ourselves.

blockmap registers its dask serializers when distributed is imported, but
importing distributed takes most of a second: it is not done on the mere
import of blockmap. :func:`when_imported` runs a callback at once when the
module is already imported, otherwise right after its first import (a
finder on :data:`sys.meta_path` wraps the module's loader, then removes
itself).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType

__all__ = ["when_imported"]


def when_imported(name: str, callback: Callable[[], None]) -> None:
    """Call ``callback()`` once the module ``name`` is imported."""
    if name in sys.modules:
        _call(name, callback)
    else:
        sys.meta_path.insert(0, _Finder(name, callback))


def _call(name: str, callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception as error:  # never break the user's import
        warnings.warn(
            f"blockmap could not set itself up for {name}: {error!r}",
            RuntimeWarning,
            stacklevel=3,
        )


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, callback: Callable[[], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader, self)
        return spec

    def done(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        _call(self.name, self.callback)


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, finder: _Finder) -> None:
        self.loader = loader
        self.finder = finder

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        self.finder.done()

    def __getattr__(self, name: str) -> object:
        return getattr(self.loader, name)
