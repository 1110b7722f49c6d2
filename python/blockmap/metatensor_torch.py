"""metatensor-torch's objects and blockmap's, both ways.

:func:`from_metatensor_torch` turns metatensor-torch's ``Labels``,
``TensorBlock`` and ``TensorMap`` (``metatensor.torch``, TorchScript
classes) into blockmap's, backed by torch tensors; :func:`to_metatensor_torch`
(also the ``to_metatensor_torch()`` method of blockmap's classes) goes the
other way, so that a map made with blockmap can be given to TorchScript code
(a model, ``@torch.jit.script`` functions) written for metatensor-torch.
Gradients (of any parameter name, gradients of gradients included) and info
come along.

Values are not copied either way: metatensor-torch keeps the tensor it is
given and blockmap keeps a torch tensor's memory (and the tensor itself, with
its autograd history), so both libraries hold the same tensor objects, and a
write through one is seen through the other. A numpy-backed blockmap object
is converted with ``torch.from_numpy`` views of its arrays (the same memory),
except for read-only arrays (a read-only file mapping, ray's object store):
torch has no read-only tensors, so these are copied once rather than handed
out writable.

Labels are copied once, into each library's own memory; the small labels
that many blocks share (components, properties) are converted once per
conversion, as in :mod:`blockmap.metatensor`. metatensor-torch's labels need
at least one dimension: blockmap's labels without dimensions are refused.

Only CPU tensors exist on blockmap's side: a metatensor-torch object on
another device must be moved to the CPU first (``tensor.to("cpu")``).

Importing blockmap, or this module, does not import torch: the functions
import it when called.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from . import _optional
from ._blockmap import Labels, TensorBlock, TensorMap
from ._bridges import LabelsCache, convert_block, script_class
from .exceptions import BlockMapTypeError

__all__ = ["from_metatensor_torch", "to_metatensor_torch"]

Blockmap = Labels | TensorBlock | TensorMap

#: metatensor-torch's classes, as TorchScript names them
_QUALIFIED = "__torch__.torch.classes.metatensor."


def _metatensor_torch() -> Any:
    try:
        import metatensor.torch as mtt
    except ImportError as error:
        raise _optional.missing(
            "blockmap.metatensor_torch converts to and from metatensor-torch, which is not "
            "installed",
            "metatensor.torch",
            "metatensor-torch",
            "metatensor-torch",
        ) from error
    _keep_metatensor_operations()
    return mtt


def _keep_metatensor_operations() -> None:
    """Undo what importing metatensor-torch does to metatensor-core.

    metatensor-torch 0.10 loads a second copy of metatensor-operations as
    ``metatensor.torch.operations``, and that copy's ``__init__`` registers
    itself as ``metatensor.operations`` too: from then on metatensor-core's
    operators (``TensorMap.__add__`` imports ``metatensor.operations.add``)
    run the TorchScript version and refuse metatensor-core's maps. Importing
    metatensor-torch on the user's behalf must not break their
    metatensor-core code, so the alias goes back to metatensor-operations'
    own module, which metatensor-torch imported first.
    """
    core = sys.modules.get("metatensor_operations")
    alias = sys.modules.get("metatensor.operations")
    if core is not None and alias is not None and alias is not core:
        if alias.__name__ == "metatensor_torch.operations":
            sys.modules["metatensor.operations"] = core


# -- blockmap -> metatensor-torch ---------------------------------------------


def to_metatensor_torch(obj: Blockmap) -> Any:
    """metatensor-torch's ``Labels``, ``TensorBlock`` or ``TensorMap`` with
    the same data as ``obj`` (blockmap's).

    Values and gradients are shared: a torch-backed block gives its own
    tensors, a numpy-backed one ``torch.from_numpy`` views of its arrays
    (which keep blockmap's memory alive); a read-only array is copied once,
    as torch tensors are always writable. Labels are copied once (small
    shared labels once per call); info is copied.

    Parameters
    ----------
    obj : Labels, TensorBlock or TensorMap
        blockmap's object.

    Returns
    -------
    metatensor.torch.Labels, metatensor.torch.TensorBlock or metatensor.torch.TensorMap
        metatensor-torch's object of the same kind.

    Raises
    ------
    BlockMapTypeError
        If ``obj`` is not one of blockmap's three classes, holds labels
        without dimensions, or values of a dtype torch does not have.
    ModuleNotFoundError
        If metatensor-torch is not installed.
    """
    if not isinstance(obj, Labels | TensorBlock | TensorMap):
        raise BlockMapTypeError(
            "to_metatensor_torch takes blockmap's Labels, TensorBlock or TensorMap, "
            f"not {type(obj).__module__}.{type(obj).__name__}"
        )
    convert = _Converter()
    if isinstance(obj, Labels):
        return convert.labels(obj)
    if isinstance(obj, TensorBlock):
        return convert.block(obj)
    keys = convert.labels(obj.keys)
    result = convert.mtt.TensorMap(keys, [convert.block(block) for block in obj.blocks()])
    for key, value in obj.info().items():
        result.set_info(key, value)
    return result


class _Converter:
    """blockmap's labels and blocks as metatensor-torch's, the small labels
    made once (by content) for everything one converter converts: one per
    :func:`to_metatensor_torch` call, or one per neighbour-list store of
    :mod:`blockmap.metatrain`, which keeps at most ``most`` labels."""

    def __init__(self, most: int | None = None) -> None:
        self.mtt = _metatensor_torch()
        import torch

        self.torch = torch
        self.labels = LabelsCache(self._labels, most)

    def _labels(self, labels: Labels, values: np.ndarray) -> Any:
        names = labels.names
        if len(names) == 0:
            raise BlockMapTypeError(
                "metatensor-torch's Labels need at least one dimension: labels without "
                "dimensions have no metatensor-torch equivalent"
            )
        # metatensor-torch keeps the tensor it is given: a copy of ours,
        # which are read-only; and blockmap's labels are unique already:
        # metatensor-torch need not check
        tensor = self.torch.from_numpy(np.array(values, dtype=np.int32))
        return self.mtt.Labels(list(names), tensor, assume_unique=True)

    def _values(self, values: Any) -> Any:
        """The torch tensor of a block's values: itself, or a view of the
        numpy array (a copy when it is read-only)."""
        torch = self.torch
        if isinstance(values, torch.Tensor):
            return values
        if not values.flags.writeable:
            values = values.copy()
        try:
            return torch.from_numpy(values)
        except TypeError as error:
            raise BlockMapTypeError(
                f"torch has no dtype for blockmap's {values.dtype} values: {error}"
            ) from error

    def block(self, block: TensorBlock) -> Any:
        """metatensor-torch's block of ``block``, with its gradients."""
        return convert_block(self.mtt.TensorBlock, self.labels, self._values, block)


# -- metatensor-torch -> blockmap ---------------------------------------------


def _kind(obj: Any) -> str | None:
    """``"Labels"``, ``"TensorBlock"`` or ``"TensorMap"`` for metatensor-torch's
    objects (TorchScript objects, which ``isinstance`` cannot tell apart),
    else None. torch is not imported: its objects exist only if it was."""
    name = script_class(obj)
    if name is None or not name.startswith(_QUALIFIED):
        return None
    kind = name[len(_QUALIFIED) :]
    return kind if kind in ("Labels", "TensorBlock", "TensorMap") else None


def from_metatensor_torch(obj: Any) -> Blockmap:
    """blockmap's ``Labels``, ``TensorBlock`` or ``TensorMap`` with the same
    data as ``obj`` (metatensor-torch's), backed by torch tensors.

    Values and gradients are shared: blockmap keeps metatensor-torch's tensor
    objects themselves (``result.block(0).values is obj.block(0).values``,
    autograd included; a tensor that is not contiguous is copied once, as
    for any tensor given to :class:`blockmap.TensorBlock`). Labels are copied
    once (small shared labels once per call); info is copied. The tensors
    must be on the CPU.

    Parameters
    ----------
    obj : metatensor.torch.Labels, metatensor.torch.TensorBlock or metatensor.torch.TensorMap
        metatensor-torch's object.

    Returns
    -------
    Labels, TensorBlock or TensorMap
        blockmap's object of the same kind, of torch tensors.

    Raises
    ------
    BlockMapTypeError
        If ``obj`` is not one of metatensor-torch's three classes, or is
        not on the CPU.
    ValidationError
        If its data breaks blockmap's rules.
    BlockMapMemoryError
        If memory for the labels cannot be allocated.
    """
    kind = _kind(obj)
    if kind is None:
        raise BlockMapTypeError(
            "from_metatensor_torch takes metatensor-torch's Labels, TensorBlock or "
            f"TensorMap, not {type(obj).__module__}.{type(obj).__name__}"
        )
    if str(obj.device) != "cpu":
        raise BlockMapTypeError(
            f"blockmap holds CPU tensors only: this {kind} is on {obj.device}, "
            "move it first with .to('cpu')"
        )
    convert = LabelsCache(lambda labels, values: Labels(labels.names, values))
    if kind == "Labels":
        result: Blockmap = convert(obj)
    elif kind == "TensorBlock":
        result = convert_block(TensorBlock, convert, _same, obj)
    else:
        blocks = [convert_block(TensorBlock, convert, _same, block) for block in obj.blocks()]
        result = TensorMap(convert(obj.keys), blocks)
        for key, value in obj.info().items():
            result.set_info(key, value)
    # torch-backed throughout (labels alone, and maps without blocks, too)
    return result.to(arrays="torch")


def _same(values: Any) -> Any:
    """The values of a metatensor-torch block: its tensor, kept by blockmap."""
    return values
