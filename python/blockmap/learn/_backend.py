"""The ``_backend`` of metatensor-learn's ``nn``, for blockmap's classes:
what the modules build and check for, as ``metatensor_learn/_backend.py``
names them for metatensor-core."""

from __future__ import annotations

import re
from typing import Any

from .. import exceptions
from .._blockmap import Labels, LabelsEntry, TensorBlock, TensorMap, _foreign

__all__ = [
    "Labels",
    "LabelsEntry",
    "TensorBlock",
    "TensorMap",
    "isinstance_metatensor",
    "torch_jit_is_scripting",
]

_CLASSES = {"Labels": Labels, "TensorBlock": TensorBlock, "TensorMap": TensorMap}


def torch_jit_is_scripting() -> bool:
    """Never: blockmap's classes are not TorchScript classes."""
    return False


_VERSION = re.compile(r"(\d+)\.(\d+)\.*.")


def _version_at_least(version: str, expected: str) -> bool:
    def parse(text: str) -> tuple[int, ...]:
        match = _VERSION.match(text)
        assert match is not None, text  # noqa: S101 - metatensor-learn's own assumption
        return tuple(int(part) for part in match.groups())

    return parse(version) >= parse(expected)


def isinstance_metatensor(value: Any, typename: str) -> bool:
    """Whether ``value`` is blockmap's ``typename``; metatensor's own objects
    (metatensor-core's, metatensor-torch's) are refused naming their
    conversion, where metatensor-learn on metatensor-core's classes warns
    about metatensor-torch's and then treats them as other objects."""
    assert typename in _CLASSES  # noqa: S101 - metatensor-learn's own assertion
    if isinstance(value, _CLASSES[typename]):
        return True
    foreign = _foreign(value)
    if foreign is not None:
        raise exceptions.BlockMapTypeError(
            f"blockmap.learn takes blockmap's {typename}, not {foreign}"
        )
    return False
