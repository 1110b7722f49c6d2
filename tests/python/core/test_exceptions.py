"""The exception classes: declared in ``blockmap.exceptions``, raised by the
native module, each also the builtin a user would catch."""

import copy
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import blockmap
import blockmap.exceptions
from blockmap import _blockmap
from helpers.error_cases import CASES, CLASSES, MESSAGE, assert_same_error, caught

BUILTINS = {
    "BlockMapError": Exception,
    "ValidationError": ValueError,
    "BlockMapTypeError": TypeError,
    "FormatError": ValueError,
    "BlockMapIOError": OSError,
    "MissingFileError": FileNotFoundError,
    "ExistingFileError": FileExistsError,
    "BlockMapMemoryError": MemoryError,
    "InternalError": RuntimeError,
    "BlockMapIndexError": IndexError,
    "BlockMapOverflowError": OverflowError,
    "BlockMapAssertionError": AssertionError,
    "BlockMapRuntimeError": RuntimeError,
    "NotEqualError": Exception,
    "BlockMapNotImplementedError": NotImplementedError,
}


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_one_class_everywhere(name):
    cls = getattr(blockmap.exceptions, name)
    assert getattr(blockmap, name) is cls
    assert getattr(_blockmap, name) is cls, "the native module raises the Python class"
    assert issubclass(cls, BUILTINS[name])
    assert issubclass(cls, blockmap.BlockMapError)
    assert cls.__module__ == "blockmap"
    assert name in blockmap.exceptions.__all__


def test_every_class_of_the_module_is_tested():
    """The classes are found by enumerating ``blockmap.exceptions``: one
    added there fails here until it is given its builtin above (and so goes
    through every test of this file and of the hosts)."""
    assert set(CLASSES) == set(BUILTINS)
    assert set(CLASSES) == set(blockmap.exceptions.__all__) - {"MetatensorError"}


@pytest.mark.parametrize("case", CASES)
def test_copy_and_pickle_rebuild_every_error(case):
    """copy, deepcopy and pickle (every protocol: multiprocessing, dask and
    ray send errors this way) keep the class, message, arguments, errno,
    strerror and filename."""
    error = caught(case)
    assert_same_error(copy.copy(error), error)
    assert_same_error(copy.deepcopy(error), error)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert_same_error(pickle.loads(pickle.dumps(error, protocol=protocol)), error)


@pytest.mark.parametrize("case", CASES)
def test_tblib_pickling_rebuilds_every_error(case):
    """dask pickles a task's error with tblib's reducers installed (the
    traceback comes along): the error is rebuilt whole, not replaced by a
    plain ``Exception`` (which BlockMapMemoryError was)."""
    pickling_support = pytest.importorskip("tblib.pickling_support")
    try:
        raise caught(case)
    except blockmap.BlockMapError as error:
        pickling_support.install(error)
        rebuilt = pickle.loads(pickle.dumps(error))
        assert_same_error(rebuilt, error)
        assert rebuilt.__traceback__ is not None


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_message_by_keyword(name):
    """``cls(message=...)``, as torch builds any exception class that has a
    ``message`` attribute again."""
    cls = CLASSES[name]
    error = cls(message=MESSAGE)
    assert type(error) is cls
    assert (str(error), error.message, error.args) == (MESSAGE, MESSAGE, (MESSAGE,))
    assert_same_error(pickle.loads(pickle.dumps(error)), error)
    with pytest.raises(blockmap.BlockMapTypeError, match="either as an argument or as message="):
        cls("one", message="two")


@pytest.mark.parametrize("case", CASES)
def test_torch_exception_wrapper_gives_the_class_and_message(case):
    """torch's ExceptionWrapper (what a DataLoader worker sends) raises
    blockmap's class again, its message holding the original one."""
    exception_wrapper = pytest.importorskip("torch._utils").ExceptionWrapper
    try:
        raise caught(case)
    except blockmap.BlockMapError:
        wrapper = exception_wrapper(exc_info=sys.exc_info(), where="in a test")
    original = caught(case)
    with pytest.raises(type(original)) as error:
        wrapper.reraise()
    assert type(error.value) is type(original)
    assert f"{type(original).__module__}.{type(original).__name__}: {original}" in str(error.value)
    assert error.value.message == str(error.value)


def test_the_native_module_raises_them():
    with pytest.raises(blockmap.ValidationError):
        blockmap.Labels(["a"], np.array([[1], [1]]))
    with pytest.raises(blockmap.MissingFileError) as error:
        blockmap.load("does-not-exist.mts")
    assert error.value.errno == 2
    with pytest.raises(blockmap.BlockMapTypeError):
        blockmap.save(42, blockmap.Labels.single())


def test_a_failed_allocation_is_a_memory_error():
    """A deep copy that cannot get its memory raises MemoryError (the
    address space of a child process is limited to leave no room for it)."""
    code = textwrap.dedent(
        """
        import resource
        import numpy as np
        import blockmap

        values = np.ones((40_000_000, 1))  # 320 MB
        block = blockmap.TensorBlock(
            values, blockmap.Labels.range("s", len(values)), [], blockmap.Labels.range("p", 1)
        )
        with open("/proc/self/status") as status:
            size = next(int(l.split()[1]) for l in status if l.startswith("VmSize")) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size + 100_000_000, resource.RLIM_INFINITY))
        try:
            block.copy()
        except MemoryError as error:
            assert isinstance(error, blockmap.BlockMapMemoryError), type(error)
            print("MemoryError:", error)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "MemoryError: cannot allocate 320000000 bytes" in result.stdout
