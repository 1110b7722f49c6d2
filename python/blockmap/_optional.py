"""blockmap's optional dependencies: found without being imported, and the
``ModuleNotFoundError`` that says how to install one when it is missing.

blockmap is not on the Python package index: the command a message gives
installs the dependency itself, and names the extra of blockmap's wheel
(or sdist) that installs it, as README.md ("Install") does; never
``pip install blockmap[...]``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from collections.abc import Iterable
from typing import Any

__all__ = ["find_spec", "install_hint", "missing", "progress"]


def find_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    """The spec of the installed module ``name``, without importing it;
    ``None`` when it is not installed, or an import hook refuses it."""
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        # an import hook refusing it, or a module without a spec
        return None


def install_hint(requirement: str, extra: str | None = None) -> str:
    """How to install ``requirement`` (a pip requirement: a name, with a
    version range where blockmap needs one), and the extra of blockmap's
    that installs it."""
    quoted = f'"{requirement}"' if any(c in requirement for c in "<>=,; ") else requirement
    hint = f"`pip install {quoted}`"
    if extra is None:
        return hint
    return (
        f"{hint}, or blockmap's `{extra}` extra, given after its wheel or sdist: "
        f'`pip install "dist/blockmap-<version>-<tags>.whl[{extra}]"` (README.md, "Install")'
    )


def missing(
    message: str, module: str, requirement: str, extra: str | None = None
) -> ModuleNotFoundError:
    """The error of an optional dependency that is not installed, as
    Python's own (its ``name`` the module's import name, ``module``): the
    ``message`` (what needs it, and that it is not installed), then how to
    install it (:func:`install_hint`)."""
    return ModuleNotFoundError(f"{message}: {install_hint(requirement, extra)}", name=module)


def progress(items: list[Any], wanted: bool, unit: str) -> Iterable[Any]:
    """``items``, with a tqdm progress bar counting ``unit`` when ``wanted``."""
    if not wanted:
        return items
    try:
        from tqdm.auto import tqdm
    except ImportError as error:
        raise missing(
            "progress=True shows a tqdm progress bar, and tqdm is not installed",
            "tqdm",
            "tqdm",
            "progress",
        ) from error
    return tqdm(items, unit=unit)
