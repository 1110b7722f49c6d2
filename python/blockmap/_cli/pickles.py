"""Pickle files read without running their code.

A pickle is a program: loading one calls whatever it names. This module
first walks the opcodes (``pickletools.genops``, every counted length
bounded by the bytes left in the file) and collects the callables the
stream imports (``GLOBAL`` / ``STACK_GLOBAL``); only a stream whose every
import is one of blockmap's reconstructors (:data:`ALLOWED`) is then
loaded, by an unpickler whose ``find_class`` refuses anything else. Any
other pickle is described by what it would call, never loaded.
"""

from __future__ import annotations

import pickle
import pickletools
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import BlockMapError, BlockMapIOError, BlockMapMemoryError, FormatError

#: what a pickle of blockmap's objects written to a file imports: the
#: reconstructor (docs/pickle.md), and ``bytearray`` (protocol < 5 sends
#: an archive in one)
ALLOWED = {
    ("blockmap._blockmap", "_reconstruct"),
    ("builtins", "bytearray"),
}

_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING"}
_STRING_OPS |= {"BINSTRING", "SHORT_BINSTRING"}


class _Bounded:
    """A file's reads cut at its end: a hostile length never allocates
    more than the bytes the file has (what ``pickletools.genops`` and
    ``pickle.Unpickler`` read through)."""

    def __init__(self, stream: Any, size: int) -> None:
        self._stream = stream
        self._left = size
        self._at = 0

    def _cap(self, size: int | None) -> int:
        return self._left if size is None or size < 0 or size > self._left else size

    def _took(self, data: bytes) -> bytes:
        self._left -= len(data)
        self._at += len(data)
        return data

    def read(self, size: int | None = -1) -> bytes:
        return self._took(self._stream.read(self._cap(size)))

    def readline(self, size: int | None = -1) -> bytes:
        return self._took(self._stream.readline(self._cap(size)))

    def tell(self) -> int:
        return self._at


@dataclass
class Walked:
    """What the opcode walk found."""

    protocol: int
    #: the callables imported, ``module.name``, in stream order, once each
    calls: list[tuple[str, str]] = field(default_factory=list)
    #: whether the stream refers to out-of-band buffers (NEXT_BUFFER)
    out_of_band: bool = False

    @property
    def blockmap(self) -> bool:
        return bool(self.calls) and all(call in ALLOWED for call in self.calls)

    @property
    def foreign(self) -> list[str]:
        return [f"{m}.{n}" for m, n in self.calls if (m, n) not in ALLOWED]


def walk(path: str, size: int) -> Walked:
    """Walk the opcodes of the pickle at ``path`` (``size`` bytes)."""
    found = Walked(protocol=0)
    strings: list[str | None] = []
    memo: dict[int, Any] = {}
    last: Any = None
    with open(path, "rb") as raw:
        stream = _Bounded(raw, size)
        try:
            for opcode, arg, _ in pickletools.genops(stream):  # type: ignore[arg-type]
                if len(strings) > 8:
                    del strings[:-2]
                name = opcode.name
                if name == "PROTO":
                    found.protocol = int(arg or 0)
                elif name in _STRING_OPS:
                    last = arg if isinstance(arg, str) else None
                    strings.append(last)
                    continue
                elif name in ("BINGET", "LONG_BINGET", "GET"):
                    last = memo.get(int(arg or 0))
                    strings.append(last)
                    continue
                elif name in ("MEMOIZE", "BINPUT", "LONG_BINPUT", "PUT"):
                    memo[len(memo) if name == "MEMOIZE" else int(arg or 0)] = last
                    continue
                elif name == "GLOBAL":
                    module, _, attr = str(arg).partition(" ")
                    _called(found, module, attr)
                elif name == "STACK_GLOBAL":
                    pair = (strings[-2:] + [None, None])[:2]
                    if isinstance(pair[0], str) and isinstance(pair[1], str):
                        _called(found, pair[0], pair[1])
                    else:
                        _called(found, "?", "? (a name the walk cannot follow)")
                elif name in ("NEXT_BUFFER", "READONLY_BUFFER"):
                    found.out_of_band |= name == "NEXT_BUFFER"
                last = None
                strings.append(None)
        except (ValueError, EOFError, pickle.UnpicklingError) as error:
            raise FormatError(f"'{path}' is a damaged pickle: {error}") from error
    return found


def _called(found: Walked, module: str, attr: str) -> None:
    if (module, attr) not in found.calls:
        found.calls.append((module, attr))


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED:
            raise FormatError(f"the pickle calls {module}.{name}, which is not blockmap's")
        return super().find_class(module, name)


def load(path: str, size: int) -> Any:
    """The blockmap object pickled in the file at ``path``, loaded by an
    unpickler that imports blockmap's reconstructors only (call after
    :func:`walk` said the stream is blockmap's)."""
    with open(path, "rb") as raw:
        stream = _Bounded(raw, size)
        try:
            obj = _Restricted(stream).load()
        except (BlockMapIOError, BlockMapMemoryError):
            raise
        except BlockMapError as error:
            # the reconstructor refused its arguments
            raise FormatError(f"'{path}' is not a valid blockmap pickle: {error}") from error
        except (pickle.UnpicklingError, EOFError, AttributeError, IndexError, KeyError) as error:
            raise FormatError(f"'{path}' is a damaged pickle: {error}") from error
        except (TypeError, ValueError, OverflowError) as error:
            # the reconstructor given arguments of the wrong shape or type
            raise FormatError(f"'{path}' is not a valid blockmap pickle: {error}") from error
        if stream.read(1):
            raise FormatError(f"'{path}' has bytes after its pickle")
    return obj
