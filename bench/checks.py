"""Checks of what an operation produced: W's arrays, in order, exactly.

The implementations' ``finish`` steps call these after the timed call; each
raises :class:`bench.registry.CheckError` on a difference and otherwise returns
the note the report shows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .registry import CheckError, Context
from .workload import WorkloadArrays, flat_arrays

__all__ = ["check_arrays", "check_list", "check_map", "check_unpickled", "first_values"]


def _flat_map(tensor: Any) -> Iterator[tuple[str, np.ndarray]]:
    """The arrays of a blockmap or metatensor map in
    :func:`bench.workload.flat_arrays` order, named."""
    for index in range(len(tensor.keys)):
        block = tensor.block(index)
        yield f"block {index} values", np.asarray(block.values)
        yield f"block {index} samples", np.asarray(block.samples.values)
        for parameter, gradient in block.gradients():
            yield f"block {index} gradient {parameter!r} values", np.asarray(gradient.values)
            yield (
                f"block {index} gradient {parameter!r} samples",
                np.asarray(gradient.samples.values),
            )


def check_arrays(got: Sequence[tuple[str, np.ndarray]], arrays: WorkloadArrays) -> str:
    """Raise :class:`CheckError` unless ``got`` holds W's arrays, in order, exactly."""
    expected = flat_arrays(arrays)
    if len(got) != len(expected):
        raise CheckError(f"{len(got)} arrays loaded, W has {len(expected)}")
    for (name, array), reference in zip(got, expected, strict=True):
        if array.dtype != reference.dtype or array.shape != reference.shape:
            raise CheckError(
                f"{name}: {array.dtype}{list(array.shape)}, "
                f"expected {reference.dtype}{list(reference.shape)}"
            )
        if not np.array_equal(array, reference):
            raise CheckError(f"{name}: values differ from W")
    return "data equal to W"


def check_map(context: Context, tensor: Any) -> str:
    """Raise :class:`CheckError` unless a blockmap or metatensor map holds W."""
    keys = np.asarray(tensor.keys.values)
    if not np.array_equal(keys, context.arrays.keys.values):
        raise CheckError("keys differ from W")
    return check_arrays(list(_flat_map(tensor)), context.arrays)


def check_list(context: Context, loaded: Sequence[np.ndarray]) -> str:
    """Raise :class:`CheckError` unless a list of arrays is W as numpy holds it."""
    return check_arrays([(f"array {i}", a) for i, a in enumerate(loaded)], context.arrays)


def check_unpickled(context: Context, library: str, loaded: Any) -> str:
    """Raise :class:`CheckError` unless an unpickled object holds W."""
    if library == "numpy":
        if not isinstance(loaded, list):
            raise CheckError(f"unpickled a {type(loaded).__name__}, expected a list")
        return check_list(context, loaded)
    return check_map(context, loaded)


def first_values(library: str, loaded: Any) -> np.ndarray:
    """The first block's values of an unpickled object (numpy: the first array)."""
    return np.asarray(loaded[0] if library == "numpy" else loaded.block(0).values)
