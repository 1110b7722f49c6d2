"""blockmap's errors, for the tests of the hosts that carry them from one
process to another (multiprocessing, concurrent.futures, torch's DataLoader,
dask, ray) and of the ways they build them again.

- ``CLASSES``: every exception class of ``blockmap.exceptions``, found by
  enumerating the module (a class added there is tested without being
  listed here);
- ``CASES``: one name per error: each class built in Python (with errno and
  filename for the ``OSError`` classes), and the errors the native module
  raises for bad input;
- ``raise_case(name)``: raises that error (a module-level function workers
  import); ``Raising``: a dataset whose items raise them, for DataLoader
  workers;
- ``caught(name)``: the error ``raise_case`` raises, caught here, to compare
  with what a host hands back;
- ``assert_same_error``: the checks a rebuilt error must pass.
"""

import errno
import os

import numpy as np

import blockmap
import blockmap.exceptions
from blockmap import Labels, LabelsEntry, TensorBlock, TensorMap

#: every exception class blockmap declares, by name
CLASSES = {
    value.__name__: value
    for value in vars(blockmap.exceptions).values()
    if isinstance(value, type) and issubclass(value, BaseException)
}

MESSAGE = "a message: with 'quotes', [brackets] and ünïcödé"


def _python_cases():
    cases = {}
    for name, cls in sorted(CLASSES.items()):
        cases[f"{name}(message)"] = lambda cls=cls: cls(MESSAGE)
        if issubclass(cls, OSError):
            cases[f"{name}(errno, message)"] = lambda cls=cls: cls(errno.EACCES, MESSAGE)
            cases[f"{name}(errno, message, filename)"] = lambda cls=cls: cls(
                errno.ENOENT, MESSAGE, "some file.mts"
            )
    return cases


def _small_map(key):
    block = TensorBlock(np.zeros((1, 1)), Labels.range("s", 1), [], Labels.range("p", 1))
    return TensorMap(Labels(["k"], np.array([[key]])), [block])


def _native_cases():
    """Calls the native module refuses, one per class it raises from Rust."""
    return {
        "native ValidationError": lambda: Labels(["a"], np.array([[0], [0]])),
        "native FormatError": lambda: blockmap.load_buffer(b"not an archive"),
        "native BlockMapTypeError": lambda: Labels(["a"], np.array([["x"]], dtype=object)),
        "native MissingFileError": lambda: blockmap.load("does-not-exist.mts"),
        # a file that exists, where a dataset writer would create one
        "native ExistingFileError": lambda: blockmap.DatasetWriter(__file__),
        "native BlockMapIOError": lambda: blockmap.load(os.curdir),
        "native BlockMapIndexError": lambda: Labels.range("a", 2).entry(5),
        "native BlockMapOverflowError": lambda: _small_map(0).block({"k": 2**40}),
        "native BlockMapAssertionError": lambda: LabelsEntry("a", np.zeros(1, np.int32)),
        "native NotEqualError": lambda: blockmap.join([_small_map(0), _small_map(1)], "samples"),
    }


_BUILD = _python_cases()
_NATIVE = _native_cases()

#: the names of the errors, the ones built in Python first
CASES = [*_BUILD, *_NATIVE]


def raise_case(name):
    """Raise the error called ``name`` (one of ``CASES``)."""
    if name in _BUILD:
        raise _BUILD[name]()
    _NATIVE[name]()
    raise AssertionError(f"{name} did not raise")


def caught(name):
    """The error ``raise_case(name)`` raises."""
    try:
        raise_case(name)
    except blockmap.BlockMapError as error:
        return error
    raise AssertionError(f"{name} did not raise a BlockMapError")


class Raising:
    """A map-style dataset whose item ``i`` raises ``CASES[i]``."""

    def __len__(self):
        return len(CASES)

    def __getitem__(self, index):
        raise_case(CASES[index])


def assert_same_error(rebuilt, original):
    """``rebuilt`` is ``original`` built again: the same class, message,
    arguments and (for OS errors) errno, strerror and filename."""
    assert type(rebuilt) is type(original), (type(rebuilt), type(original))
    assert str(rebuilt) == str(original)
    assert rebuilt.message == original.message
    assert rebuilt.args == original.args
    if isinstance(original, OSError):
        assert (rebuilt.errno, rebuilt.strerror, rebuilt.filename) == (
            original.errno,
            original.strerror,
            original.filename,
        )
