"""Type stubs for :mod:`blockmap.learn.nn`: metatensor-learn 0.5's and 0.6's ``nn``
modules (its own files, loaded on blockmap's classes), with their
signatures as metatensor-learn declares them."""

from collections.abc import Sequence
from typing import Any

import torch

from .._blockmap import Labels, LabelsEntry, TensorBlock, TensorMap

__all__ = [
    "Buffer",
    "EquivariantLinear",
    "EquivariantTransformation",
    "InvariantLayerNorm",
    "InvariantReLU",
    "InvariantSiLU",
    "InvariantTanh",
    "LayerNorm",
    "Linear",
    "Module",
    "ModuleMap",
    "ReLU",
    "Sequential",
    "SiLU",
    "Tanh",
]

class Buffer:
    # metatensor-learn 0.6 (absent from 0.5): metatensor data assigned to a
    # Module attribute, registered as a buffer
    data: Any
    persistent: bool
    def __init__(self, value: Any, persistent: bool = True) -> None: ...

class Module(torch.nn.Module):
    def __init__(self) -> None: ...
    def register_buffer(self, name: str, value: Any, persistent: bool = True) -> None: ...
    def get_extra_state(self) -> dict[str, Any]: ...
    def set_extra_state(self, extra: dict[str, Any]) -> None: ...

class ModuleMap(Module):
    module_list: torch.nn.ModuleList
    def __init__(
        self,
        in_keys: Labels,
        modules: Sequence[torch.nn.Module],
        out_properties: list[Labels] | None = None,
    ) -> None: ...
    @classmethod
    def from_module(
        cls,
        in_keys: Labels,
        module: torch.nn.Module,
        out_properties: list[Labels] | None = None,
    ) -> ModuleMap: ...
    def forward(self, tensor: TensorMap) -> TensorMap: ...
    def __call__(self, tensor: TensorMap) -> TensorMap: ...
    def _forward_block(self, key: LabelsEntry, block: TensorBlock) -> TensorBlock: ...
    @property
    def in_keys(self) -> Labels: ...
    @property
    def out_properties(self) -> list[Labels] | None: ...

class _MapModule(Module):
    # the modules below hold a ModuleMap and apply it
    module_map: ModuleMap
    def forward(self, tensor: TensorMap) -> TensorMap: ...
    def __call__(self, tensor: TensorMap) -> TensorMap: ...

class Linear(_MapModule):
    def __init__(
        self,
        in_keys: Labels,
        in_features: int | list[int],
        out_features: int | list[int] | None = None,
        out_properties: list[Labels] | None = None,
        *,
        bias: bool | list[bool] = True,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None: ...

class EquivariantLinear(_MapModule):
    def __init__(
        self,
        in_keys: Labels,
        in_features: int | list[int],
        out_features: int | list[int] | None = None,
        out_properties: list[Labels] | None = None,
        invariant_keys: Labels | None = None,
        *,
        bias: bool | list[bool] = True,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None: ...

class EquivariantTransformation(_MapModule):
    def __init__(
        self,
        modules: list[torch.nn.Module],
        in_keys: Labels,
        in_features: int | list[int],
        out_features: int | list[int] | None = None,
        out_properties: list[Labels] | None = None,
        invariant_keys: Labels | None = None,
    ) -> None: ...

class LayerNorm(_MapModule):
    def __init__(
        self,
        in_keys: Labels,
        in_features: list[int],
        out_properties: list[Labels] | None = None,
        *,
        eps: float | list[float] = 1e-05,
        elementwise_affine: bool | list[bool] = True,
        bias: bool | list[bool] = True,
        mean: bool | list[bool] = True,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None: ...

class InvariantLayerNorm(_MapModule):
    def __init__(
        self,
        in_keys: Labels,
        in_features: list[int],
        out_properties: list[Labels] | None = None,
        invariant_keys: Labels | None = None,
        *,
        eps: float | list[float] = 1e-05,
        elementwise_affine: bool | list[bool] = True,
        bias: bool | list[bool] = True,
        mean: bool | list[bool] = True,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None: ...

class ReLU(_MapModule):
    def __init__(
        self, in_keys: Labels, out_properties: list[Labels] | None = None, *, in_place: bool = False
    ) -> None: ...

class InvariantReLU(_MapModule):
    def __init__(
        self,
        in_keys: Labels,
        out_properties: list[Labels] | None = None,
        invariant_keys: Labels | None = None,
        *,
        in_place: bool = False,
    ) -> None: ...

class SiLU(_MapModule):
    def __init__(
        self, in_keys: Labels, out_properties: list[Labels] | None = None, *, in_place: bool = False
    ) -> None: ...

class InvariantSiLU(_MapModule):
    def __init__(
        self,
        in_keys: Labels,
        out_properties: list[Labels] | None = None,
        invariant_keys: Labels | None = None,
        *,
        in_place: bool = False,
    ) -> None: ...

class Tanh(_MapModule):
    def __init__(self, in_keys: Labels, out_properties: list[Labels] | None = None) -> None: ...

class InvariantTanh(_MapModule):
    def __init__(
        self,
        in_keys: Labels,
        out_properties: list[Labels] | None = None,
        invariant_keys: Labels | None = None,
    ) -> None: ...

class Sequential(_MapModule):
    def __init__(self, in_keys: Labels, *args: ModuleMap | _MapModule) -> None: ...
