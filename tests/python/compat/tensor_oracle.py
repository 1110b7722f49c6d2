"""metatensor-core as the oracle for blockmap's TensorMap and TensorBlock.

The same map is built in both libraries from the same numpy arrays
(:func:`build`), the same call is made on both (:func:`same_outcome`), and
the results are compared entry by entry (:func:`assert_same`): keys, labels,
values, gradients, dtypes and info; or, when metatensor-core raises, the
exception types (metatensor's ``MetatensorError`` is matched by
``blockmap.MetatensorError``, every other type by itself).

A map is described by :class:`Spec`, plain numpy arrays and names.
"""

from __future__ import annotations

import dataclasses
import warnings

import metatensor
import numpy as np

import blockmap


@dataclasses.dataclass
class LabelsSpec:
    names: list[str]
    values: np.ndarray

    def build(self, lib):
        return lib.Labels(
            list(self.names), np.array(self.values, dtype=np.int32).reshape(-1, len(self.names))
        )


@dataclasses.dataclass
class BlockSpec:
    values: np.ndarray
    samples: LabelsSpec
    components: list[LabelsSpec]
    properties: LabelsSpec
    # parameter -> (BlockSpec of the gradient, whose components are its own
    # extra components only: the parent's are added when built)
    gradients: dict[str, BlockSpec] = dataclasses.field(default_factory=dict)

    def build(self, lib, parent_components=()):
        components = [c.build(lib) for c in self.components]
        block = lib.TensorBlock(
            # each library gets its own copy: neither may see the other's edits
            np.array(self.values, copy=True),
            self.samples.build(lib),
            components + list(parent_components),
            self.properties.build(lib),
        )
        for parameter, gradient in self.gradients.items():
            all_components = components + list(parent_components)
            block.add_gradient(parameter, gradient.build(lib, all_components))
        return block


@dataclasses.dataclass
class Spec:
    keys: LabelsSpec
    blocks: list[BlockSpec]
    info: dict[str, str] = dataclasses.field(default_factory=dict)

    def build(self, lib):
        tensor = lib.TensorMap(self.keys.build(lib), [b.build(lib) for b in self.blocks])
        for key, value in self.info.items():
            tensor.set_info(key, value)
        return tensor


def build(spec: Spec):
    """``(ours, theirs)``: the map of ``spec`` in blockmap and in metatensor-core."""
    return spec.build(blockmap), spec.build(metatensor)


# ------------------------------------------------------------- comparisons


def assert_same_labels(ours, theirs, what="labels"):
    assert isinstance(ours, blockmap.Labels), what
    assert ours.names == theirs.names, f"{what}: names {ours.names} != {theirs.names}"
    np.testing.assert_array_equal(
        np.asarray(ours.values), np.asarray(theirs.values), err_msg=f"{what}: values"
    )


def assert_same_block(ours, theirs, what="block"):
    assert isinstance(ours, blockmap.TensorBlock), what
    assert_same_labels(ours.samples, theirs.samples, f"{what} samples")
    assert len(ours.components) == len(theirs.components), f"{what}: components"
    for i, (a, b) in enumerate(zip(ours.components, theirs.components, strict=True)):
        assert_same_labels(a, b, f"{what} component {i}")
    assert_same_labels(ours.properties, theirs.properties, f"{what} properties")
    assert ours.values.dtype == theirs.values.dtype, f"{what}: dtype"
    assert ours.values.shape == theirs.values.shape, f"{what}: shape"
    np.testing.assert_array_equal(ours.values, theirs.values, err_msg=f"{what}: values")
    assert ours.gradients_list() == sorted(theirs.gradients_list()), f"{what}: gradients"
    for parameter in theirs.gradients_list():
        assert_same_block(
            ours.gradient(parameter), theirs.gradient(parameter), f"{what} gradient {parameter!r}"
        )


def assert_same_map(ours, theirs):
    assert isinstance(ours, blockmap.TensorMap)
    assert_same_labels(ours.keys, theirs.keys, "keys")
    assert len(ours) == len(theirs)
    for i in range(len(theirs)):
        assert_same_block(ours.block_by_id(i), theirs.block_by_id(i), f"block {i}")
    assert ours.info() == theirs.info()


def assert_same(ours, theirs):
    """Compare two results of the same call: maps, blocks, labels, lists of
    them, or plain values."""
    if isinstance(theirs, metatensor.TensorMap):
        assert_same_map(ours, theirs)
    elif isinstance(theirs, metatensor.TensorBlock):
        assert_same_block(ours, theirs)
    elif isinstance(theirs, metatensor.Labels):
        assert_same_labels(ours, theirs)
    elif isinstance(theirs, list | tuple):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            assert_same(a, b)
    else:
        assert ours == theirs


def _run(call, lib_obj):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return call(lib_obj), None
        except Exception as error:  # noqa: BLE001 - the oracle's errors are compared
            return None, error


def expected_type(error):
    """The exception type blockmap must raise where metatensor-core raised ``error``."""
    if isinstance(error, metatensor.MetatensorError):
        return blockmap.MetatensorError
    return type(error)


def same_outcome(call, ours, theirs, compare=assert_same):
    """Run ``call`` on both objects: equal results, or errors of matching
    types. Returns the two results (or the two errors)."""
    our_result, our_error = _run(call, ours)
    their_result, their_error = _run(call, theirs)
    if their_error is not None:
        assert our_error is not None, (
            f"metatensor-core raised {type(their_error).__name__}: {their_error}; "
            f"blockmap returned {our_result!r}"
        )
        assert isinstance(our_error, expected_type(their_error)), (
            f"metatensor-core raised {type(their_error).__name__}: {their_error}; "
            f"blockmap raised {type(our_error).__name__}: {our_error}"
        )
        return our_error, their_error
    if our_error is not None:
        raise AssertionError(
            f"blockmap raised {type(our_error).__name__}: {our_error}; metatensor-core returned "
            f"{their_result!r}"
        ) from our_error
    compare(our_result, their_result)
    return our_result, their_result


# ------------------------------------------------------------ small specs


def labels(names, values):
    names = [names] if isinstance(names, str) else list(names)
    return LabelsSpec(names, np.array(values, dtype=np.int32).reshape(-1, len(names)))


def column(name, values):
    return labels([name], np.array(values).reshape(-1, 1))


def block(rng, samples, properties, components=(), gradients=None, dtype=np.float64):
    """A block of random values: ``samples`` and ``properties`` are
    LabelsSpec, ``components`` a list of LabelsSpec, ``gradients`` a dict
    ``parameter -> (gradient samples LabelsSpec, extra components)``."""
    shape = (len(samples.values), *(len(c.values) for c in components), len(properties.values))
    spec = BlockSpec(random(rng, shape, dtype), samples, list(components), properties)
    for parameter, (gradient_samples, extra) in (gradients or {}).items():
        gradient_shape = (
            len(gradient_samples.values),
            *(len(c.values) for c in extra),
            *shape[1:],
        )
        spec.gradients[parameter] = BlockSpec(
            random(rng, gradient_shape, dtype), gradient_samples, list(extra), properties
        )
    return spec


def random(rng, shape, dtype=np.float64):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(0, 100, size=shape).astype(dtype)
    values = rng.integers(1, 1000, size=shape).astype(np.float64) / 8
    if dtype.kind == "c":
        return (values + 1j * values[::-1]).astype(dtype)
    return values.astype(dtype)
