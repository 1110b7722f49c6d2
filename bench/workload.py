"""The benchmark workload W, as plain numpy arrays, and the maps built from them.

W is shaped like a spherical-expansion TensorMap (see ``docs`` and the shared
``workload.md``): 100 keys ``["o3_lambda", "center_type"]``; each block holds
values ``(2400, 3, 100)`` float64 with samples ``["system", "atom"]``,
components ``[["o3_mu"] = -1, 0, 1]`` and properties ``["n"] = 0..99``, plus a
``"positions"`` gradient with values ``(300, 3, 3, 100)`` float64, samples
``["sample", "system", "atom"]`` and components ``[["xyz"] = 0, 1, 2], ["o3_mu"]``.
That is about 794 MB of array data.

:func:`make_arrays` describes W with numpy arrays only, so that the same arrays
can be wrapped by blockmap (:func:`build_blockmap`) and by metatensor-core
(:func:`build_metatensor`) without copying their data; numpy's side holds them as
a flat list (:func:`flat_arrays`). Every size is a parameter so that tests and
quick checks can use a tiny W (:data:`SMALL`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import blockmap

__all__ = [
    "BlockArrays",
    "GradientArrays",
    "LabelsArrays",
    "WorkloadArrays",
    "build_blockmap",
    "build_metatensor",
    "flat_arrays",
    "make_arrays",
    "nbytes",
]

Int32Array = npt.NDArray[np.int32]
Float64Array = npt.NDArray[np.float64]

#: Atomic numbers used as ``center_type`` (ten distinct values, H to I).
CENTER_TYPES: tuple[int, ...] = (1, 6, 7, 8, 9, 15, 16, 17, 35, 53)
#: Atoms per system in the ``samples`` of every block.
ATOMS_PER_SYSTEM = 24
#: Sizes of the small W used by ``--small``.
SMALL: dict[str, int] = {
    "n_keys": 4,
    "n_samples": 24,
    "n_grad_samples": 6,
    "n_properties": 8,
}


@dataclass(frozen=True)
class LabelsArrays:
    """The content of one Labels: column names and an int32 ``(count, len(names))`` array."""

    names: list[str]
    values: Int32Array


@dataclass(frozen=True)
class GradientArrays:
    """One gradient of a block: its parameter, values, samples and leading components.

    The gradient's full component list is ``components`` followed by the parent
    block's components; its properties are the parent's.
    """

    parameter: str
    values: Float64Array
    samples: LabelsArrays
    components: list[LabelsArrays]


@dataclass(frozen=True)
class BlockArrays:
    """One block: values ``[samples, *components, properties]`` and their labels."""

    values: Float64Array
    samples: LabelsArrays
    components: list[LabelsArrays]
    properties: LabelsArrays
    gradients: list[GradientArrays] = field(default_factory=list)


@dataclass(frozen=True)
class WorkloadArrays:
    """The whole workload: keys and one :class:`BlockArrays` per key row."""

    keys: LabelsArrays
    blocks: list[BlockArrays]

    def __len__(self) -> int:
        return len(self.blocks)


def _column(name: str, values: npt.ArrayLike) -> LabelsArrays:
    """A one-dimension Labels content from a 1-D sequence of integers."""
    column = np.asarray(values, dtype=np.int32).reshape(-1, 1)
    return LabelsArrays([name], np.ascontiguousarray(column))


def make_arrays(
    n_keys: int = 100,
    n_samples: int = 2400,
    n_grad_samples: int = 300,
    n_properties: int = 100,
    seed: int = 0,
) -> WorkloadArrays:
    """Build the arrays of W (or of a smaller W of the same shape) with numpy only.

    Args:
        n_keys: number of blocks; key rows are ``(o3_lambda, center_type)`` with
            ``o3_lambda = i // 10`` and ``center_type`` cycling over ten atomic numbers.
        n_samples: rows of each block's samples ``["system", "atom"]`` (unique).
        n_grad_samples: rows of each ``"positions"`` gradient's samples
            ``["sample", "system", "atom"]``; at most ``n_samples``.
        n_properties: entries of the ``["n"]`` properties.
        seed: seed of the ``np.random.default_rng`` that fills the values.

    Returns:
        A :class:`WorkloadArrays` whose every array is C-contiguous, aligned and
        native-endian (int32 labels, float64 values), owned by nobody else.
    """
    if n_keys < 1 or n_samples < 1 or n_properties < 1 or n_grad_samples < 0:
        raise ValueError("workload sizes must be positive")
    if n_grad_samples > n_samples:
        raise ValueError(f"n_grad_samples ({n_grad_samples}) cannot exceed n_samples ({n_samples})")

    rng = np.random.default_rng(seed)
    n_types = len(CENTER_TYPES)
    key_index = np.arange(n_keys)
    keys = np.empty((n_keys, 2), dtype=np.int32)
    keys[:, 0] = key_index // n_types
    keys[:, 1] = np.asarray(CENTER_TYPES, dtype=np.int32)[key_index % n_types]

    # Metadata shared by every block: Labels copy it anyway, and it is tiny.
    o3_mu = _column("o3_mu", [-1, 0, 1])
    xyz = _column("xyz", [0, 1, 2])
    properties = _column("n", np.arange(n_properties))
    sample_index = np.arange(n_samples)

    blocks = []
    for _ in range(n_keys):
        samples = np.empty((n_samples, 2), dtype=np.int32)
        samples[:, 0] = sample_index // ATOMS_PER_SYSTEM
        samples[:, 1] = sample_index % ATOMS_PER_SYSTEM
        values = rng.random((n_samples, len(o3_mu.values), n_properties))

        # Gradient rows: distinct parent samples (so rows are unique), each paired
        # with a neighbour atom of the same system.
        parents = np.sort(rng.choice(n_samples, size=n_grad_samples, replace=False))
        grad_samples = np.empty((n_grad_samples, 3), dtype=np.int32)
        grad_samples[:, 0] = parents
        grad_samples[:, 1] = samples[parents, 0]
        grad_samples[:, 2] = rng.integers(0, ATOMS_PER_SYSTEM, size=n_grad_samples)
        grad_values = rng.random((n_grad_samples, len(xyz.values), len(o3_mu.values), n_properties))
        gradient = GradientArrays(
            parameter="positions",
            values=grad_values,
            samples=LabelsArrays(["sample", "system", "atom"], grad_samples),
            components=[xyz],
        )
        blocks.append(
            BlockArrays(
                values=values,
                samples=LabelsArrays(["system", "atom"], samples),
                components=[o3_mu],
                properties=properties,
                gradients=[gradient],
            )
        )

    return WorkloadArrays(LabelsArrays(["o3_lambda", "center_type"], keys), blocks)


def nbytes(arrays: WorkloadArrays) -> int:
    """Total bytes of the arrays that make W's size.

    Counts each block's values and samples and each gradient's values and
    samples (about 794 MB for the full W); the key, component and property
    labels are negligible and not counted.
    """
    total = 0
    for block in arrays.blocks:
        total += block.values.nbytes + block.samples.values.nbytes
        for gradient in block.gradients:
            total += gradient.values.nbytes + gradient.samples.values.nbytes
    return total


def flat_arrays(arrays: WorkloadArrays) -> list[np.ndarray]:
    """W as numpy's side holds it: per block, values, samples, then for each
    gradient its values and samples."""
    flat: list[np.ndarray] = []
    for block in arrays.blocks:
        flat += [block.values, block.samples.values]
        for gradient in block.gradients:
            flat += [gradient.values, gradient.samples.values]
    return flat


def _build(library: Any, arrays: WorkloadArrays) -> Any:
    """Build a TensorMap with ``library``: blockmap and metatensor-core share this API."""

    def labels(content: LabelsArrays) -> Any:
        return library.Labels(content.names, content.values)

    blocks = []
    for block_arrays in arrays.blocks:
        components = [labels(c) for c in block_arrays.components]
        properties = labels(block_arrays.properties)
        block = library.TensorBlock(
            block_arrays.values, labels(block_arrays.samples), components, properties
        )
        for gradient in block_arrays.gradients:
            block.add_gradient(
                gradient.parameter,
                library.TensorBlock(
                    gradient.values,
                    labels(gradient.samples),
                    [labels(c) for c in gradient.components] + components,
                    properties,
                ),
            )
        blocks.append(block)
    return library.TensorMap(labels(arrays.keys), blocks)


def build_blockmap(arrays: WorkloadArrays) -> blockmap.TensorMap:
    """Wrap the arrays in a :class:`blockmap.TensorMap`; values are not copied."""
    import blockmap

    tensor: blockmap.TensorMap = _build(blockmap, arrays)
    return tensor


def build_metatensor(arrays: WorkloadArrays) -> Any:
    """Wrap the arrays in a ``metatensor.TensorMap`` (metatensor-core); values are not copied.

    metatensor moves the blocks into the map: they are not usable afterwards.

    Raises:
        ImportError: when metatensor-core is not installed.
    """
    import metatensor

    return _build(metatensor, arrays)
