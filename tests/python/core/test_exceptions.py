"""The exception classes: declared in ``blockmap.exceptions``, raised by the
native module, each also the builtin a user would catch."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import blockmap
import blockmap.exceptions
from blockmap import _blockmap

BUILTINS = {
    "BlockMapError": Exception,
    "ValidationError": ValueError,
    "BlockMapTypeError": TypeError,
    "FormatError": ValueError,
    "BlockMapIOError": OSError,
    "MissingFileError": FileNotFoundError,
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
