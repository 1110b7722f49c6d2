"""What the bridges to metatensor-core (:mod:`blockmap.metatensor`) and to
metatensor-torch (:mod:`blockmap.metatensor_torch`) share, in both
directions: labels made once per conversion, and blocks converted with
their gradients."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["LabelsCache", "convert_block", "script_class"]


def script_class(obj: Any) -> str | None:
    """The qualified name of the TorchScript class of ``obj``
    (``"__torch__.torch.classes.metatensor.TensorMap"``), or ``None`` for
    any other object. metatensor-torch's and metatomic's classes are
    TorchScript classes, which ``isinstance`` cannot tell apart: their name
    is read with torch's ``ScriptObject._type()``, as metatensor reads it
    itself, here only. torch is not imported: its objects exist only if it
    was."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.ScriptObject):
        return None
    return str(obj._type().qualified_name())


class LabelsCache:
    """Labels converted once per conversion: the small labels (at most
    :attr:`SMALL` bytes of values) that many blocks have in common
    (components, properties) are looked up by content and made once, as
    each library's labels are a native object, costly to build and to read
    (docs/benchmarks.md, "Figures behind design choices").

    ``make(labels, values)`` makes the other library's labels of
    ``labels``, whose values ``values`` views as a numpy array (blockmap's
    int32 array, or a CPU torch tensor's memory). ``most``, when given,
    bounds how many labels are kept: for a cache that outlives one
    conversion (a neighbour-list store's), where every small labels
    converted would otherwise stay."""

    #: labels of at most this many bytes of values are looked up by content
    SMALL = 4096

    def __init__(self, make: Callable[[Any, np.ndarray], Any], most: int | None = None) -> None:
        self.make = make
        self.most = most
        self.made: dict[tuple[tuple[str, ...], int, bytes], Any] = {}

    def __call__(self, labels: Any) -> Any:
        # a numpy view either way, no copy
        values = np.asarray(labels.values)
        if values.nbytes > self.SMALL:
            return self.make(labels, values)
        key = (tuple(labels.names), values.shape[0], values.tobytes())
        made = self.made.get(key)
        if made is None:
            made = self.make(labels, values)
            if self.most is None or len(self.made) < self.most:
                self.made[key] = made
        return made


def convert_block(
    make_block: Callable[..., Any],
    labels: LabelsCache,
    values: Callable[[Any], Any],
    block: Any,
) -> Any:
    """``block`` (of either library) as ``make_block`` (the other library's
    ``TensorBlock``) makes it: its labels through ``labels``, its arrays
    through ``values``, and each gradient converted whole (its own
    gradients added) before it is added, as metatensor-torch moves an
    added gradient into its parent."""
    result = make_block(
        values=values(block.values),
        samples=labels(block.samples),
        components=[labels(component) for component in block.components],
        properties=labels(block.properties),
    )
    for parameter, gradient in block.gradients():
        result.add_gradient(parameter, convert_block(make_block, labels, values, gradient))
    return result
