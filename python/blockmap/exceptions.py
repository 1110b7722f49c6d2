"""The exceptions blockmap raises.

Every error blockmap raises is a :class:`BlockMapError`; each subclass also
inherits the builtin exception a user would catch, so that ``except
ValueError`` works as well as ``except blockmap.ValidationError``. Two
exceptions: Python's own ``TypeError`` for a call that does not match a
signature (a missing argument, or one that cannot be converted to the
declared type), raised before any of blockmap's code runs; and Python's
``ModuleNotFoundError`` for an optional dependency a call needs and that
is not installed (``ImportError`` for a metatrain that
``blockmap.metatrain`` was not tested with).

:data:`MetatensorError` is the same class as :class:`BlockMapError`, under the
name metatensor-core gives its exception: code written for metatensor that
catches ``metatensor.MetatensorError`` catches every blockmap error.
"""

from __future__ import annotations

__all__ = [
    "BlockMapAssertionError",
    "BlockMapError",
    "BlockMapIOError",
    "BlockMapIndexError",
    "BlockMapMemoryError",
    "BlockMapNotImplementedError",
    "BlockMapOverflowError",
    "BlockMapRuntimeError",
    "BlockMapTypeError",
    "FormatError",
    "InternalError",
    "MetatensorError",
    "MissingFileError",
    "ExistingFileError",
    "NotEqualError",
    "ValidationError",
]


class BlockMapError(Exception):
    """Base class of every error blockmap raises.

    Every class can be built again the ways the hosts that carry errors
    between processes build them: ``cls(*args)`` (pickle, hence
    multiprocessing, concurrent.futures, dask and ray) and
    ``cls(message=...)`` (torch's DataLoader, which passes the message by
    keyword to any exception class with a ``message`` attribute).
    """

    def __init__(self, *args: object, message: str | None = None) -> None:
        if message is not None:
            if args:
                raise BlockMapTypeError(
                    f"{type(self).__name__}() takes its message either as an argument "
                    "or as message=, not both"
                )
            args = (message,)
        super().__init__(*args)

    def __reduce__(self) -> str | tuple[object, ...]:
        # the builtin's own reduction (``(cls, args, state)``, with errno,
        # strerror and filename for OS errors), declared here so that
        # tblib (dask's pickling of errors) rebuilds with ``cls(*args)``: it
        # takes a class with its own ``__init__`` and the builtin
        # ``__reduce__`` for one whose arguments cannot be trusted and calls
        # ``cls.__new__(cls)``, which CPython refuses for BlockMapMemoryError
        # (``MemoryError.__new__(BlockMapMemoryError) is not safe``), and
        # dask then sends a plain ``Exception``
        return super().__reduce__()

    @property
    def message(self) -> str:
        """The error message (as ``metatensor.MetatensorError.message``)."""
        if isinstance(self, OSError) and self.strerror is not None:
            return self.strerror
        return str(self.args[0]) if self.args else ""


# metatensor-core's name for its one exception class: the same class here
MetatensorError = BlockMapError


class ValidationError(BlockMapError, ValueError):
    """Invalid data: shapes, labels, gradients or metadata that break a rule."""


class BlockMapTypeError(BlockMapError, TypeError):
    """An argument of the wrong type (e.g. an object dtype array)."""


class FormatError(ValidationError):
    """A file or buffer that is not a valid ``.mts`` archive / ``.npy`` array."""


class BlockMapIOError(BlockMapError, OSError):
    """The operating system refused a read or a write."""


class MissingFileError(BlockMapIOError, FileNotFoundError):
    """The file to load does not exist."""


class ExistingFileError(BlockMapIOError, FileExistsError):
    """A path that holds a file where blockmap would create one (a dataset
    writer without ``overwrite=True`` or ``append=True``)."""


class BlockMapMemoryError(BlockMapError, MemoryError):
    """Memory for the data could not be had (an allocation failed)."""


class InternalError(BlockMapError, RuntimeError):
    """A broken internal invariant: a bug in blockmap, to be reported."""


class BlockMapIndexError(BlockMapError, IndexError):
    """An index out of range, or not an index at all where metatensor-core
    raises ``IndexError`` for it (``labels.entry("x")``)."""


class BlockMapOverflowError(BlockMapError, OverflowError):
    """An integer that does not fit where it goes (a selected label value
    beyond int32)."""


class NotEqualError(BlockMapError):
    """Inputs of an operation whose metadata should match and does not (the
    error metatensor-operations raises under this name, e.g. maps with
    different keys given to :func:`blockmap.join`)."""


class BlockMapNotImplementedError(BlockMapError, NotImplementedError):
    """Something the data model allows but an operation does not handle,
    e.g. gradients of gradients in :func:`blockmap.join`."""


class BlockMapAssertionError(BlockMapError, AssertionError):
    """An argument refused by a check that metatensor-core makes with
    ``assert`` (the types given to ``LabelsEntry``)."""


class BlockMapRuntimeError(BlockMapError, RuntimeError):
    """An operation torch refuses with a ``RuntimeError``, refused the same
    way (pickling or deep-copying a non-leaf tensor that requires grad)."""


#: metatensor-core's error class, for code written for it: every error
#: blockmap raises is one (``except metatensor.MetatensorError`` works with
#: ``import blockmap as metatensor``).
MetatensorError = BlockMapError

# shown (and pickled) as members of the top-level module, where users meet them
for _class in (
    BlockMapError,
    ValidationError,
    BlockMapTypeError,
    FormatError,
    BlockMapIOError,
    MissingFileError,
    ExistingFileError,
    BlockMapMemoryError,
    InternalError,
    BlockMapIndexError,
    BlockMapOverflowError,
    BlockMapAssertionError,
    NotEqualError,
    BlockMapNotImplementedError,
    BlockMapRuntimeError,
):
    _class.__module__ = "blockmap"
del _class
