"""Type stubs for :mod:`blockmap.operations` (metatensor-operations 0.5.0
on blockmap's classes).

Generated from the installed metatensor-operations' signatures by
tests/python/typing/test_operations_stub.py, which fails when they drift apart:
`python tests/python/typing/test_operations_stub.py --write` makes it again.
"""

from typing import Any, Self

import numpy.typing as npt

from ._blockmap import Labels, TensorBlock, TensorMap
from .exceptions import NotEqualError as NotEqualError

__all__ = [
    "NotEqualError",
    "abs",
    "add",
    "allclose",
    "allclose_block",
    "allclose_block_raise",
    "allclose_raise",
    "append_dimension",
    "block_from_array",
    "checks_enabled",
    "detach",
    "detach_block",
    "divide",
    "dot",
    "drop_blocks",
    "drop_empty_blocks",
    "empty_like",
    "empty_like_block",
    "equal",
    "equal_block",
    "equal_block_raise",
    "equal_metadata",
    "equal_metadata_block",
    "equal_metadata_block_raise",
    "equal_metadata_raise",
    "equal_raise",
    "filter_blocks",
    "insert_dimension",
    "is_contiguous",
    "is_contiguous_block",
    "join",
    "join_blocks",
    "lstsq",
    "make_contiguous",
    "make_contiguous_block",
    "mean_over_properties",
    "mean_over_properties_block",
    "mean_over_samples",
    "mean_over_samples_block",
    "multiply",
    "one_hot",
    "ones_like",
    "ones_like_block",
    "permute_dimensions",
    "pow",
    "random_uniform_like",
    "random_uniform_like_block",
    "remove_dimension",
    "remove_gradients",
    "remove_gradients_block",
    "rename_dimension",
    "requires_grad",
    "requires_grad_block",
    "slice",
    "slice_block",
    "solve",
    "sort",
    "sort_block",
    "split",
    "split_block",
    "std_over_properties",
    "std_over_properties_block",
    "std_over_samples",
    "std_over_samples_block",
    "subtract",
    "sum_over_properties",
    "sum_over_properties_block",
    "sum_over_samples",
    "sum_over_samples_block",
    "unique_metadata",
    "unique_metadata_block",
    "unsafe_disable_checks",
    "unsafe_enable_checks",
    "var_over_properties",
    "var_over_properties_block",
    "var_over_samples",
    "var_over_samples_block",
    "zeros_like",
    "zeros_like_block",
]

def abs(A: TensorMap) -> TensorMap: ...
def add(A: TensorMap, B: int | float | TensorMap) -> TensorMap: ...
def allclose(
    tensor_1: TensorMap,
    tensor_2: TensorMap,
    rtol: float = 1e-13,
    atol: float = 1e-12,
    equal_nan: bool = False,
) -> bool: ...
def allclose_block(
    block_1: TensorBlock,
    block_2: TensorBlock,
    rtol: float = 1e-13,
    atol: float = 1e-12,
    equal_nan: bool = False,
) -> bool: ...
def allclose_block_raise(
    block_1: TensorBlock,
    block_2: TensorBlock,
    rtol: float = 1e-13,
    atol: float = 1e-12,
    equal_nan: bool = False,
) -> Any: ...
def allclose_raise(
    tensor_1: TensorMap,
    tensor_2: TensorMap,
    rtol: float = 1e-13,
    atol: float = 1e-12,
    equal_nan: bool = False,
) -> Any: ...
def append_dimension(tensor: TensorMap, axis: str, name: str, values: Any | int) -> TensorMap: ...
def block_from_array(
    array: Any,
    sample_names: list[str] | None = None,
    component_names: list[str] | None = None,
    property_names: list[str] | None = None,
) -> TensorBlock: ...
def checks_enabled() -> bool: ...
def detach(tensor: TensorMap) -> TensorMap: ...
def detach_block(block: TensorBlock) -> TensorBlock: ...
def divide(A: TensorMap, B: float | int | TensorMap) -> TensorMap: ...
def dot(tensor_1: TensorMap, tensor_2: TensorMap) -> TensorMap: ...
def drop_blocks(tensor: TensorMap, keys: Labels, copy: bool = False) -> TensorMap: ...
def drop_empty_blocks(tensor: TensorMap, copy: bool = False) -> TensorMap: ...
def empty_like(
    tensor: TensorMap, gradients: list[str] | str | None = None, requires_grad: bool = False
) -> TensorMap: ...
def empty_like_block(
    block: TensorBlock, gradients: list[str] | str | None = None, requires_grad: bool = False
) -> TensorBlock: ...
def equal(tensor_1: TensorMap, tensor_2: TensorMap) -> bool: ...
def equal_block(block_1: TensorBlock, block_2: TensorBlock) -> bool: ...
def equal_block_raise(block_1: TensorBlock, block_2: TensorBlock) -> None: ...
def equal_metadata(
    tensor_1: TensorMap,
    tensor_2: TensorMap,
    check: list[str] | str = "all",
    check_gradients: bool = True,
) -> bool: ...
def equal_metadata_block(
    block_1: TensorBlock,
    block_2: TensorBlock,
    check: list[str] | str = "all",
    check_gradients: bool = True,
) -> bool: ...
def equal_metadata_block_raise(
    block_1: TensorBlock,
    block_2: TensorBlock,
    check: list[str] | str = "all",
    check_gradients: bool = True,
) -> Any: ...
def equal_metadata_raise(
    tensor_1: TensorMap,
    tensor_2: TensorMap,
    check: list[str] | str = "all",
    check_gradients: bool = True,
) -> Any: ...
def equal_raise(tensor_1: TensorMap, tensor_2: TensorMap) -> None: ...
def filter_blocks(tensor: TensorMap, keys: Labels, copy: bool = False) -> TensorMap: ...
def insert_dimension(
    tensor: TensorMap, axis: str, index: int, name: str, values: Any | int
) -> TensorMap: ...
def is_contiguous(tensor: TensorMap) -> bool: ...
def is_contiguous_block(block: TensorBlock) -> bool: ...
def join(
    tensors: list[TensorMap],
    axis: str,
    different_keys: str = "error",
    add_dimension: str | None = None,
) -> TensorMap: ...
def join_blocks(
    blocks: list[TensorBlock], axis: str, add_dimension: str | None = None
) -> TensorBlock: ...
def lstsq(
    X: TensorMap, Y: TensorMap, rcond: float | None, driver: str | None = None
) -> TensorMap: ...
def make_contiguous(tensor: TensorMap) -> TensorMap: ...
def make_contiguous_block(block: TensorBlock) -> TensorBlock: ...
def mean_over_properties(tensor: TensorMap, property_names: str | list[str]) -> TensorMap: ...
def mean_over_properties_block(
    block: TensorBlock, property_names: list[str] | str
) -> TensorBlock: ...
def mean_over_samples(tensor: TensorMap, sample_names: str | list[str]) -> TensorMap: ...
def mean_over_samples_block(block: TensorBlock, sample_names: list[str] | str) -> TensorBlock: ...
def multiply(A: TensorMap, B: float | int | TensorMap) -> TensorMap: ...
def one_hot(labels: Labels, dimension: Labels) -> Any: ...
def ones_like(
    tensor: TensorMap, gradients: list[str] | str | None = None, requires_grad: bool = False
) -> TensorMap: ...
def ones_like_block(
    block: TensorBlock, gradients: list[str] | str | None = None, requires_grad: bool = False
) -> TensorBlock: ...
def permute_dimensions(
    tensor: TensorMap, axis: str, dimensions_indexes: list[int]
) -> TensorMap: ...
def pow(A: TensorMap, B: float | int) -> TensorMap: ...
def random_uniform_like(
    tensor: TensorMap, gradients: list[str] | str | None = None, requires_grad: bool = False
) -> TensorMap: ...
def random_uniform_like_block(
    block: TensorBlock, gradients: list[str] | str | None = None, requires_grad: bool = False
) -> TensorBlock: ...
def remove_dimension(tensor: TensorMap, axis: str, name: str) -> TensorMap: ...
def remove_gradients(tensor: TensorMap, remove: list[str] | None = None) -> TensorMap: ...
def remove_gradients_block(block: TensorBlock, remove: list[str] | None = None) -> TensorBlock: ...
def rename_dimension(tensor: TensorMap, axis: str, old: str, new: str) -> TensorMap: ...
def requires_grad(tensor: TensorMap, requires_grad: bool = True) -> TensorMap: ...
def requires_grad_block(block: TensorBlock, requires_grad: bool = True) -> TensorBlock: ...
def slice(tensor: TensorMap, axis: str, selection: Labels) -> TensorMap: ...
def slice_block(
    block: TensorBlock, axis: str, selection: list[int] | npt.NDArray[Any] | Labels
) -> TensorBlock: ...
def solve(X: TensorMap, Y: TensorMap) -> TensorMap: ...
def sort(
    tensor: TensorMap, axes: str | list[str] = "all", descending: bool = False
) -> TensorMap: ...
def sort_block(
    block: TensorBlock, axes: str | list[str] = "all", descending: bool = False
) -> TensorBlock: ...
def split(
    tensor: TensorMap, axis: str, selections: list[list[int] | npt.NDArray[Any] | Labels]
) -> list[TensorMap]: ...
def split_block(
    block: TensorBlock, axis: str, selections: list[list[int] | npt.NDArray[Any] | Labels]
) -> list[TensorBlock]: ...
def std_over_properties(tensor: TensorMap, property_names: str | list[str]) -> TensorMap: ...
def std_over_properties_block(
    block: TensorBlock, property_names: list[str] | str
) -> TensorBlock: ...
def std_over_samples(tensor: TensorMap, sample_names: str | list[str]) -> TensorMap: ...
def std_over_samples_block(block: TensorBlock, sample_names: list[str] | str) -> TensorBlock: ...
def subtract(A: TensorMap, B: float | int | TensorMap) -> TensorMap: ...
def sum_over_properties(tensor: TensorMap, property_names: list[str] | str) -> TensorMap: ...
def sum_over_properties_block(
    block: TensorBlock, property_names: list[str] | str
) -> TensorBlock: ...
def sum_over_samples(tensor: TensorMap, sample_names: list[str] | str) -> TensorMap: ...
def sum_over_samples_block(block: TensorBlock, sample_names: list[str] | str) -> TensorBlock: ...
def unique_metadata(
    tensor: TensorMap, axis: str, names: list[str] | tuple[str] | str, gradient: str | None = None
) -> Labels: ...
def unique_metadata_block(
    block: TensorBlock, axis: str, names: list[str] | tuple[str] | str, gradient: str | None = None
) -> Labels: ...

class unsafe_disable_checks:
    def __init__(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, type: object, value: object, traceback: object) -> None: ...

class unsafe_enable_checks:
    def __init__(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, type: object, value: object, traceback: object) -> None: ...

def var_over_properties(tensor: TensorMap, property_names: str | list[str]) -> TensorMap: ...
def var_over_properties_block(
    block: TensorBlock, property_names: list[str] | str
) -> TensorBlock: ...
def var_over_samples(tensor: TensorMap, sample_names: str | list[str]) -> TensorMap: ...
def var_over_samples_block(block: TensorBlock, sample_names: list[str] | str) -> TensorBlock: ...
def zeros_like(
    tensor: TensorMap, gradients: list[str] | str | None = None, requires_grad: bool = False
) -> TensorMap: ...
def zeros_like_block(
    block: TensorBlock, gradients: list[str] | str | None = None, requires_grad: bool = False
) -> TensorBlock: ...
