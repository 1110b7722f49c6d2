"""The oracle of the compatibility tests: metatensor-core.

``same_outcome(call)`` runs ``call(lib)`` with ``lib`` metatensor, then blockmap,
and checks that both give the same result (compared entry by entry by
``assert_same``) or that, where metatensor raises, blockmap raises the same
builtin exception (a ``blockmap.MetatensorError`` where metatensor raises its
``MetatensorError``). It returns blockmap's result (None after an error).
"""

import sys

import numpy as np
import pytest

import blockmap

mts = pytest.importorskip("metatensor")


@pytest.fixture(autouse=True)
def _metatensor_operations_of_metatensor_core(monkeypatch):
    """metatensor-core's operators run metatensor-operations' own module.

    Importing metatensor-torch (test_torch_bridges does, at collection)
    registers its TorchScript copy of metatensor-operations as
    ``metatensor.operations`` too, after which metatensor-core's
    ``TensorMap.__add__`` refuses metatensor-core's maps: an upstream alias
    bug that would turn the oracle into metatensor-torch. blockmap undoes it
    when it imports metatensor-torch itself (test_torch_bridges checks that).
    """
    core = sys.modules.get("metatensor_operations")
    if core is not None:
        monkeypatch.setitem(sys.modules, "metatensor.operations", core)


def _builtin_base(error):
    """The builtin exception class ``error`` is an instance of."""
    for cls in type(error).__mro__:
        if cls.__module__ == "builtins":
            return cls
    raise AssertionError(f"{error!r} is no builtin exception")


def _outcome(call, lib):
    try:
        return call(lib), None
    except Exception as error:  # compared by the caller
        return None, error


def _assert_same_error(expected, actual):
    """``actual`` (blockmap's) is the kind of error ``expected`` (metatensor's) is."""
    assert actual is not None, f"metatensor raised {expected!r}, blockmap did not"
    if isinstance(expected, mts.MetatensorError):
        assert isinstance(actual, blockmap.MetatensorError), (expected, actual)
    else:
        base = _builtin_base(expected)
        assert base is not Exception, f"metatensor raised a bare {expected!r}"
        assert isinstance(actual, base), (expected, actual)


def _assert_same(expected, actual):
    """metatensor's result ``expected`` and blockmap's ``actual`` are the same."""
    if isinstance(expected, mts.Labels):
        assert isinstance(actual, blockmap.Labels), actual
        assert actual.names == expected.names
        assert len(actual) == len(expected)
        _assert_same(expected.values, actual.values)
    elif isinstance(expected, mts.LabelsEntry):
        assert isinstance(actual, blockmap.LabelsEntry), actual
        assert actual.names == expected.names
        _assert_same(expected.values, actual.values)
    elif isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), actual
        assert actual.dtype == expected.dtype
        assert actual.shape == expected.shape
        if expected.size:
            # metatensor gives empty labels writable values of their own
            assert actual.flags.writeable == expected.flags.writeable
        np.testing.assert_array_equal(actual, expected)
    elif isinstance(expected, tuple | list):
        assert type(actual) is type(expected)
        assert len(actual) == len(expected)
        for e, a in zip(expected, actual, strict=True):
            _assert_same(e, a)
    elif isinstance(expected, np.bool_):
        # metatensor compares entries with numpy, blockmap gives a bool
        assert type(actual) is bool and actual == expected
    else:
        assert type(actual) is type(expected), (expected, actual)
        assert actual == expected


def _same_outcome(call):
    expected, expected_error = _outcome(call, mts)
    actual, actual_error = _outcome(call, blockmap)
    if expected_error is not None:
        _assert_same_error(expected_error, actual_error)
    else:
        assert actual_error is None, f"blockmap raised {actual_error!r}, metatensor did not"
        _assert_same(expected, actual)
    return actual


@pytest.fixture(scope="session")
def same_outcome():
    """``same_outcome(call)``: see the module docs."""
    return _same_outcome


@pytest.fixture(scope="session")
def assert_same():
    """``assert_same(metatensor_result, blockmap_result)``: see the module docs."""
    return _assert_same
