"""metatensor-learn, running on blockmap's classes.

metatensor-learn 0.5 (which metatrain 2026.4 uses) or 0.6 (``pip install
metatensor-learn``) brings the data tools of a training loop (``Dataset``,
``IndexedDataset``, ``group``, ``group_and_join``, ``DataLoader``) and
``nn`` modules over maps (``ModuleMap``, ``Linear``, ``EquivariantLinear``,
``LayerNorm``, the activations, ``Sequential``). ``blockmap.learn`` offers
the same API on blockmap's maps, with no renaming of ``metatensor``:

- :mod:`blockmap.learn.data`: the installed ``Dataset`` and
  ``IndexedDataset`` (same constructors, errors and messages), with sample
  and batch named tuples that pickle (metatensor-learn's cannot, so its
  ``DataLoader`` with workers hangs), and blockmap's own ``group``,
  ``group_and_join`` (blockmap maps joined with :func:`blockmap.join`) and
  ``DataLoader``;
- :mod:`blockmap.learn.nn`: the installed ``metatensor_learn.nn`` loaded a
  second time with its ``_backend`` naming :class:`blockmap.Labels`,
  :class:`blockmap.TensorBlock` and :class:`blockmap.TensorMap`; the
  modules work on torch-backed blockmap maps and autograd flows through
  them.

Nothing of metatensor is imported or changed: ``metatensor.learn`` keeps
working on metatensor's objects in the same process.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from .. import _optional
from ..exceptions import BlockMapTypeError


def _find(name: str, requirement: str) -> str:
    """The folder of the installed package ``name``, or a
    ModuleNotFoundError naming what to install."""
    spec = _optional.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise _optional.missing(
            f"blockmap.learn runs metatensor-learn on blockmap's maps, and {requirement} is "
            "not installed",
            name,
            requirement,
            "learn",
        )
    return list(spec.submodule_search_locations)[0]


try:
    import torch  # noqa: F401 - metatensor-learn's data and nn need it
except ImportError as error:
    raise _optional.missing(
        "blockmap.learn needs torch, which is not installed", "torch", "torch", "learn"
    ) from error

# this package's own modules first (_backend, data), then metatensor-learn's
# (nn, _dispatch), which are loaded again under this package's name
__path__.append(_find("metatensor_learn", "metatensor-learn"))  # noqa: F821
assert os.path.basename(__path__[-1]) == "metatensor_learn"  # noqa: F821, S101

import warnings  # noqa: E402

from . import data  # noqa: E402

with warnings.catch_warnings():
    # nn/_module_map.py decorates a class with `torch.jit.interface`, which
    # torch 2.14 deprecates with a FutureWarning at import: metatensor-learn's
    # concern, not the user's
    warnings.filterwarnings("ignore", r"`torch\.jit\.", FutureWarning)
    from . import nn  # noqa: E402
from .data import DataLoader, Dataset, IndexedDataset  # noqa: E402
from .nn import Linear, ModuleMap  # noqa: E402


def _writable_buffers(deserialize: Any) -> Any:
    """``nn._module._deserialize_metatensor``, given a writable copy of each
    block's and map's buffer: blockmap's ``load_buffer`` views the memory it
    is given, and a ``bytes`` object (how ``get_extra_state`` stores
    metatensor data) would give read-only tensors, where metatensor-core's
    copies. Its recursion into containers reaches this wrapper again."""

    @functools.wraps(deserialize)
    def wrapper(value: Any) -> Any:
        if (
            isinstance(value, tuple)
            and len(value) == 3
            and value[0] in ("metatensor.TensorBlock", "metatensor.TensorMap")
            and isinstance(value[1], bytes)
        ):
            value = (value[0], bytearray(value[1]), value[2])
        return deserialize(value)

    return wrapper


nn._module._deserialize_metatensor = _writable_buffers(nn._module._deserialize_metatensor)


def _checked_init(init: Any) -> Any:
    """``ModuleMap.__init__`` (which every module over maps builds, and
    whose keys and properties they all keep), refusing at construction
    what is not blockmap's: metatensor's Labels were accepted and failed
    only at ``state_dict()`` or ``.to()``."""

    @functools.wraps(init)
    def __init__(self: Any, in_keys: Any, modules: Any, out_properties: Any = None) -> None:
        _labels(in_keys, "in_keys")
        if out_properties is not None:
            if isinstance(out_properties, (str, bytes)) or not hasattr(out_properties, "__iter__"):
                raise BlockMapTypeError(
                    "out_properties must be a list of blockmap.Labels, not "
                    f"{type(out_properties).__name__}"
                )
            for i, labels in enumerate(out_properties):
                _labels(labels, f"out_properties[{i}]")
        init(self, in_keys, modules, out_properties)

    return __init__


def _labels(value: Any, what: str) -> None:
    from ._backend import isinstance_metatensor

    if not isinstance_metatensor(value, "Labels"):  # metatensor's: refused naming it
        raise BlockMapTypeError(
            f"blockmap.learn.nn takes blockmap.Labels as {what}, not {type(value).__name__}"
        )


def _checked_forward(forward: Any) -> Any:
    """``ModuleMap.forward`` (which every module over maps calls), refusing
    a map that is not blockmap's, or whose arrays are numpy's (a
    ``blockmap.Dataset``'s read-only views): torch's modules would raise
    their own ``TypeError`` on a numpy array."""

    @functools.wraps(forward)
    def wrapper(self: Any, tensor: Any) -> Any:
        from ._backend import isinstance_metatensor

        if not isinstance_metatensor(tensor, "TensorMap"):
            raise BlockMapTypeError(
                f"blockmap.learn.nn modules take a blockmap.TensorMap, not {type(tensor).__name__}"
            )
        if tensor._arrays == "numpy":
            raise BlockMapTypeError(
                "blockmap.learn.nn modules take maps of torch tensors, and this map holds "
                "numpy arrays (a blockmap.Dataset's entries are numpy views of the file): "
                'convert it with `tensor.to(arrays="torch")` (the same memory, no copy) '
                "before calling the module, or in a DataLoader's collate_fn (a dataset opened "
                'with mmap="c" gives writable views, of which torch makes tensors without '
                "its warning on read-only arrays)"
            )
        return forward(self, tensor)

    return wrapper


nn.ModuleMap.__init__ = _checked_init(nn.ModuleMap.__init__)
nn.ModuleMap.forward = _checked_forward(nn.ModuleMap.forward)

__all__ = ["DataLoader", "Dataset", "IndexedDataset", "Linear", "ModuleMap", "data", "nn"]
