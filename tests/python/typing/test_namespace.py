"""``dir(blockmap)`` lists the public names only: ``__all__``, the names
served on first use (``blockmap.<op>``, ``from_metatensor``,
``from_metatensor_torch``), public
submodules and the module's dunder attributes; not the modules
``__init__.py`` imports for itself (``functools``, ``importlib``, ...)."""

import subprocess
import sys
import types

import blockmap

LAZY = {"from_metatensor", "from_metatensor_torch", "operations"}


def _allowed(name):
    if name in blockmap.__all__ or name in LAZY or name in blockmap._OPERATIONS:
        return True
    if name.startswith("__") and name.endswith("__"):
        return True
    value = getattr(blockmap, name)
    return (
        isinstance(value, types.ModuleType)
        and value.__name__ == f"blockmap.{name}"
        and not name.startswith("_")
    )


def test_dir_lists_public_names_only():
    names = dir(blockmap)
    assert [name for name in names if not _allowed(name)] == []
    for name in ("functools", "importlib", "types", "TYPE_CHECKING", "_hooks", "_reduction"):
        assert name not in names
    assert not [name for name in names if name.startswith("_") and not name.endswith("__")]


def test_dir_lists_every_public_name():
    names = set(dir(blockmap))
    assert set(blockmap.__all__) <= names
    assert {"from_metatensor", "from_metatensor_torch"} <= names
    assert blockmap.HAS_METATENSOR_OPERATIONS
    assert blockmap._OPERATIONS | {"operations"} <= names
    assert {"io", "dataset", "exceptions"} <= names
    # each of them is there at run time
    for name in names:
        getattr(blockmap, name)


def test_dir_of_a_fresh_import_stays_light():
    # dir() lists the operations without importing them (or torch)
    code = (
        "import sys, blockmap; names = dir(blockmap); "
        "assert 'sum_over_samples' in names and 'functools' not in names, names; "
        "heavy = {'torch', 'metatensor_operations', 'blockmap.operations'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
