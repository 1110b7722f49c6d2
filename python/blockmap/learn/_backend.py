"""The ``_backend`` of metatensor-learn's ``nn``, for blockmap's classes:
what the modules build and check for, as ``metatensor_learn/_backend.py``
names them for metatensor-core."""

from __future__ import annotations

from .._backends import isinstance_metatensor as _refusing
from .._blockmap import Labels, LabelsEntry, TensorBlock, TensorMap

__all__ = [
    "Labels",
    "LabelsEntry",
    "TensorBlock",
    "TensorMap",
    "isinstance_metatensor",
    "torch_jit_is_scripting",
]


def torch_jit_is_scripting() -> bool:
    """Never: blockmap's classes are not TorchScript classes."""
    return False


#: whether a value is blockmap's Labels, TensorBlock or TensorMap;
#: metatensor's own objects are refused naming their conversion, where
#: metatensor-learn on metatensor-core's classes warns about
#: metatensor-torch's and then treats them as other objects
isinstance_metatensor = _refusing("blockmap.learn takes")
