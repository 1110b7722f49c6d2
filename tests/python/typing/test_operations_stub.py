"""``python/blockmap/operations.pyi``: the signatures type checkers see for
``blockmap.operations.<op>`` and ``blockmap.<op>``, made from the installed
metatensor-operations' own signatures (its functions loaded on blockmap's
classes by :mod:`blockmap.operations`, so their annotations already name
blockmap's ``Labels``, ``TensorBlock`` and ``TensorMap``), defaults kept.

The test fails when the stub and the installed metatensor-operations drift
apart (a name, a parameter, a default or an annotation), and when
``blockmap/__init__.py`` does not declare every ``blockmap.<op>`` for type
checkers. Regenerate the stub with::

    python tests/python/typing/test_operations_stub.py --write
"""

import ast
import inspect
import sys
import types
import typing
from pathlib import Path

import numpy as np

import blockmap

STUB = Path(blockmap.__file__).with_name("operations.pyi")
INIT = Path(blockmap.__file__)

# blockmap's own functions, with their own signatures in _blockmap.pyi
OWN = {"join", "join_blocks", "split", "split_block"}


def _annotation(value: object) -> str:
    """``value`` (an annotation of metatensor-operations) as stub text."""
    if value is inspect.Parameter.empty or value is typing.Any:
        return "Any"
    if value is None or value is type(None):
        return "None"
    if value in (blockmap.Labels, blockmap.TensorBlock, blockmap.TensorMap):
        return value.__name__
    if value is np.ndarray:
        return "npt.NDArray[Any]"
    if value in (int, float, bool, str):
        return value.__name__
    origin, args = typing.get_origin(value), typing.get_args(value)
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(_annotation(arg) for arg in args)
    if origin in (list, tuple) and args:
        return f"{origin.__name__}[{', '.join(_annotation(arg) for arg in args)}]"
    raise AssertionError(f"an annotation this generator does not know: {value!r}")


def _default(value: object) -> str:
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)
    raise AssertionError(f"a default this generator does not know: {value!r}")


def _function(name: str, function: typing.Callable[..., object]) -> str:
    signature = inspect.signature(function)
    parameters = []
    keyword_only = False
    for parameter in signature.parameters.values():
        text = parameter.name
        if parameter.kind is parameter.VAR_POSITIONAL:
            text = "*" + text
            keyword_only = True
        elif parameter.kind is parameter.VAR_KEYWORD:
            text = "**" + text
        elif parameter.kind is parameter.KEYWORD_ONLY and not keyword_only:
            parameters.append("*")
            keyword_only = True
        assert parameter.kind is not parameter.POSITIONAL_ONLY, (name, parameter)
        text += f": {_annotation(parameter.annotation)}"
        if parameter.default is not parameter.empty:
            text += f" = {_default(parameter.default)}"
        parameters.append(text)
    result = _annotation(signature.return_annotation)
    return f"def {name}({', '.join(parameters)}) -> {result}: ...\n"


def _context_class(name: str, cls: type) -> str:
    # unsafe_disable_checks / unsafe_enable_checks: a call, or a `with` block
    assert not inspect.signature(cls).parameters, name
    assert callable(cls.__enter__) and callable(cls.__exit__), name
    return (
        f"class {name}:\n"
        "    def __init__(self) -> None: ...\n"
        "    def __enter__(self) -> Self: ...\n"
        "    def __exit__(self, type: object, value: object, traceback: object) -> None: ...\n"
    )


def render() -> str:
    """The text of operations.pyi for the installed metatensor-operations."""
    import metatensor_operations

    import blockmap.operations as operations

    lines = [
        '"""Type stubs for :mod:`blockmap.operations` (metatensor-operations '
        f"{metatensor_operations.__version__}\n",
        "on blockmap's classes).\n\n",
        "Generated from the installed metatensor-operations' signatures by\n",
        "tests/python/typing/test_operations_stub.py, which fails when they drift apart:\n",
        "`python tests/python/typing/test_operations_stub.py --write` makes it again.\n",
        '"""\n\n',
        "from typing import Any, Self\n\n",
        "import numpy.typing as npt\n\n",
        "from ._blockmap import Labels, TensorBlock, TensorMap\n",
        "from .exceptions import NotEqualError as NotEqualError\n\n",
        f"__all__ = {sorted(operations.__all__)!r}\n\n",
    ]
    for name in sorted(operations.__all__):
        value = getattr(operations, name)
        if name == "NotEqualError":
            assert value is blockmap.NotEqualError
        elif inspect.isclass(value):
            lines.append(_context_class(name, value))
        else:
            assert inspect.isfunction(value), name
            lines.append(_function(name, value))
    return "".join(lines)


def _declared_in_init() -> dict[str, set[str]]:
    """The names ``blockmap/__init__.py`` imports under ``if TYPE_CHECKING:``,
    by module (``from .operations import add as add``: an explicit re-export)."""
    declared: dict[str, set[str]] = {}
    for node in ast.parse(INIT.read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
                for alias in statement.names:
                    assert alias.asname == alias.name, f"{alias.name}: not re-exported"
                    declared.setdefault(str(statement.module), set()).add(alias.name)
    return declared


def test_the_stub_matches_the_installed_metatensor_operations():
    expected = ast.dump(ast.parse(render()))
    # the syntax trees: the formatting (ruff's) does not count, every name,
    # parameter, default and annotation does
    assert ast.dump(ast.parse(STUB.read_text())) == expected, (
        "operations.pyi and metatensor-operations drifted apart: "
        "`python tests/python/typing/test_operations_stub.py --write`"
    )


def test_every_served_operation_is_in_the_stub():
    import blockmap.operations as operations

    stub = ast.parse(STUB.read_text())
    defined = {node.name for node in stub.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
    assert blockmap._OPERATIONS - {"NotEqualError"} <= defined
    assert set(operations.__all__) == blockmap._OPERATIONS | OWN


def test_init_declares_every_lazy_name_for_type_checkers():
    declared = _declared_in_init()
    # NotEqualError is imported for real (blockmap.exceptions)
    assert declared["operations"] == blockmap._OPERATIONS - {"NotEqualError"}
    assert "NotEqualError" in blockmap.__all__
    assert declared["metatensor_torch"] == {"from_metatensor_torch"}
    assert declared["metatensor"] == {"from_metatensor"}
    # and at run time, the operations are served under those names
    for name in declared["operations"]:
        assert getattr(blockmap, name) is getattr(blockmap.operations, name)
    assert blockmap.from_metatensor_torch is blockmap.metatensor_torch.from_metatensor_torch
    assert blockmap.from_metatensor is blockmap.metatensor.from_metatensor


def test_a_drifted_stub_is_caught(tmp_path):
    # the comparison sees a changed default: it can fail
    text = STUB.read_text()
    changed = text.replace("rtol: float = 1e-13", "rtol: float = 1e-12", 1)
    assert changed != text
    assert ast.dump(ast.parse(changed)) != ast.dump(ast.parse(render()))


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(f"usage: {sys.argv[0]} --write")
    STUB.write_text(render())
    import subprocess

    subprocess.run([sys.executable, "-m", "ruff", "format", str(STUB)], check=True)
