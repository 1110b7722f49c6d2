"""What the ``_backend`` modules of metatensor-operations and
metatensor-learn name, for blockmap's classes. Both libraries are Python
over metatensor's API and read their classes and type checks from their
``_backend``: blockmap loads them again with one of its own
(:mod:`blockmap.operations` builds it, ``blockmap.learn._backend`` is
metatensor-learn's), made of these."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ._blockmap import Labels, TensorBlock, TensorMap, _foreign
from .exceptions import BlockMapTypeError

__all__ = ["CLASSES", "isinstance_metatensor", "version_at_least"]

#: the classes metatensor's code builds and checks for, by name
CLASSES = {"Labels": Labels, "TensorBlock": TensorBlock, "TensorMap": TensorMap}

_VERSION = re.compile(r"(\d+)\.(\d+)\.*.")


def version_at_least(version: str, expected: str) -> bool:
    """The backends' ``_version_at_least``: whether ``version``'s major
    and minor numbers are at least ``expected``'s, read as metatensor's
    backends read them."""

    def parse(text: str) -> tuple[int, ...]:
        match = _VERSION.match(text)
        assert match is not None, text  # noqa: S101 - metatensor's own assumption
        return tuple(int(part) for part in match.groups())

    return parse(version) >= parse(expected)


def isinstance_metatensor(who: str) -> Callable[[Any, str], bool]:
    """The backends' ``isinstance_metatensor(value, typename)``: whether
    ``value`` is blockmap's ``typename``. Every type check of the code
    loaded again goes through it, so metatensor's own objects
    (metatensor-core's, metatensor-torch's) are refused there, naming their
    conversion (``who``, "blockmap.learn takes", starts the message), never
    as "must be a metatensor TensorMap, not <class 'metatensor.TensorMap'>"
    or treated as other objects."""

    def check(value: Any, typename: str) -> bool:
        assert typename in CLASSES  # noqa: S101 - metatensor's own assertion
        if isinstance(value, CLASSES[typename]):
            return True
        foreign = _foreign(value)
        if foreign is not None:
            raise BlockMapTypeError(f"{who} blockmap's {typename}, not {foreign}")
        return False

    check.__name__ = check.__qualname__ = "isinstance_metatensor"
    return check
