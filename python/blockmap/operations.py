"""metatensor-operations, running on blockmap's classes.

metatensor-operations (``pip install metatensor-operations``) is pure Python
over metatensor-core's API: ``slice``, ``drop_blocks``, ``sort``, ``equal``,
``allclose``, ``add``, ``reduce_*``, ``*_dimension`` and the rest. This
module is a second copy of the installed package, loaded under the name
``blockmap.operations`` with its ``_backend`` (the module that names the
classes it builds and checks for) pointing at :class:`blockmap.Labels`,
:class:`blockmap.TensorBlock` and :class:`blockmap.TensorMap` instead of
metatensor-core's. ``blockmap.<op>`` reaches these for every name that
``metatensor`` re-exports, except :func:`blockmap.join`,
:func:`blockmap.join_blocks`, :func:`blockmap.split` and
:func:`blockmap.split_block`, which are blockmap's own (in Rust, with the
same semantics); ``blockmap.operations.join`` is metatensor-operations'.

Nothing of metatensor-core is imported or changed: ``metatensor.operations``,
when metatensor-core is installed, keeps working on metatensor-core's
objects, in the same process. ``NotEqualError`` is
:class:`blockmap.NotEqualError`, whichever of the two raised it.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import sys
import textwrap
import types
from typing import Any

import numpy as np

from . import _backends, _optional, exceptions

# the classes too, in the namespace of the operations (users find them there)
from ._blockmap import Labels, TensorBlock, TensorMap, _foreign  # noqa: F401

__all__: list[str] = []


def _find_package() -> Any:
    spec = _optional.find_spec("metatensor_operations")
    if spec is None or spec.origin is None or not spec.submodule_search_locations:
        raise _optional.missing(
            "blockmap.operations runs metatensor-operations on blockmap's maps, and "
            "metatensor-operations is not installed",
            "metatensor_operations",
            "metatensor-operations",
            "operations",
        )
    return spec


def _make_backend() -> types.ModuleType:
    """The ``_backend`` module of metatensor-operations, for blockmap's classes."""
    backend = types.ModuleType(f"{__name__}._backend")
    backend.__dict__.update(
        **_backends.CLASSES,
        LabelsValues=np.ndarray,
        Array=Any,
        torch_jit_is_scripting=lambda: False,
        torch_jit_script=lambda function: function,
        torch_jit_annotate=lambda type, value: value,
    )

    backend.isinstance_metatensor = _backends.isinstance_metatensor("blockmap's operations take")
    backend._version_at_least = _backends.version_at_least
    return backend


def _load() -> None:
    spec = _find_package()
    module = sys.modules[__name__]
    # this module becomes a package whose submodules are metatensor-operations'
    module.__path__ = list(spec.submodule_search_locations)
    module.__spec__.submodule_search_locations = module.__path__
    module.__package__ = __name__
    sys.modules[f"{__name__}._backend"] = _make_backend()

    # metatensor-operations' own error class becomes blockmap's, before any
    # of its modules binds the name
    utils = importlib.import_module(f"{__name__}._utils")
    utils.NotEqualError = exceptions.NotEqualError

    # its __init__ makes itself `metatensor.operations`: keep metatensor's
    own_names = set(module.__dict__)
    absent = object()
    previous = sys.modules.get("metatensor.operations", absent)
    try:
        with open(spec.origin, encoding="utf-8") as file:
            source = file.read()
        code = compile(source, spec.origin, "exec")
        exec(code, module.__dict__)  # noqa: S102 - the installed package's own code
    finally:
        if previous is absent:
            sys.modules.pop("metatensor.operations", None)
        else:
            sys.modules["metatensor.operations"] = previous

    # what `from metatensor.operations import *` gives
    module.__all__[:] = sorted(
        name
        for name, value in module.__dict__.items()
        if not name.startswith("_")
        and name not in own_names
        and not isinstance(value, types.ModuleType)
    )
    module.__doc__ = _DOC
    for name in module.__all__:
        value = module.__dict__[name]
        if isinstance(value, types.FunctionType):
            if value.__doc__ is None:
                value.__doc__ = _misplaced_docstring(value)
            module.__dict__[name] = _refusing_foreign(value)


def _misplaced_docstring(function: Any) -> str | None:
    """The docstring ``function`` writes after its first statement, which
    Python does not take as one: metatensor-operations 0.5's ``divide``
    checks its argument before it. None when there is no such string."""
    try:
        source = textwrap.dedent(inspect.getsource(function))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    definition = tree.body[0] if tree.body else None
    if not isinstance(definition, ast.FunctionDef):
        return None
    for statement in definition.body:
        if (
            isinstance(statement, ast.Expr)
            and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str)
        ):
            return inspect.cleandoc(statement.value.value)
    return None


def _refusing_foreign(function: Any) -> Any:
    """``function``, refusing metatensor's own objects (alone or in a list
    or tuple) with a message naming their conversion: metatensor-operations
    would otherwise take them in some places (``equal`` compares any two
    maps through their methods) and fail in others with messages such as
    "must be a metatensor TensorMap, not <class 'metatensor.TensorMap'>"."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for value in (*args, *kwargs.values()):
            items = value if isinstance(value, list | tuple) else (value,)
            for item in items:
                foreign = _foreign(item)
                if foreign is not None:
                    raise exceptions.BlockMapTypeError(
                        f"blockmap.{function.__name__} takes blockmap's objects, not {foreign}"
                    )
        return function(*args, **kwargs)

    return wrapper


_DOC = __doc__
_load()
