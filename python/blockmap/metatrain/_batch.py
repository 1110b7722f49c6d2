"""metatrain's batch path for blockmap items: what ``CollateFn.__call__``
and ``unpack_batch`` do, for batches of :class:`~._dataset.Sample`.

:func:`collate` joins each field of the batch with :func:`blockmap.join`
on the items' views (``axis="samples"``, ``different_keys="union"``,
metatensor-learn's ``group_and_join`` as metatrain calls it), converts each
joined map to metatensor-torch once, builds the systems, attaches the
stored neighbour lists, and runs metatrain's callables in their order,
unchanged. It returns a :class:`Batch` holding the results: in the process
that made it, :func:`unpack` hands them out as they are; sent to another
process (a DataLoader worker's result), it reduces to one flat byte tensor
(which torch's ``ForkingPickler`` moves into shared memory) and small
Python data, and is rebuilt on arrival: no ``save_buffer`` blob.
"""

from __future__ import annotations

from typing import Any

from .._blockmap import Labels, join
from .._systems import (
    check_pair_atoms,
    describe_options,
    neighbor_list_options,
    system_from_tensormaps,
)
from ..exceptions import ValidationError
from ..metatensor_torch import to_metatensor_torch
from . import _neighbors
from ._dataset import SYSTEM_INDEX, Sample, system_index_map


class NeighborTransform:
    """metatrain's neighbour-list transform, with the options it adds
    (the collate attaches the stored lists of these options first)."""

    def __init__(self, transform: Any, options: list[Any]) -> None:
        self.transform = transform
        self.options = list(options)

    def __call__(self, systems: Any, targets: Any, extra: Any) -> Any:
        if all(
            options in system.known_neighbor_lists()
            for system in systems
            for options in self.options
        ):
            # what metatrain's transform would do: nothing (it would
            # convert each system to ase.Atoms first, for nothing)
            return systems, targets, extra
        return self.transform(systems, targets, extra)


class Batch:
    """A collated batch: the systems, targets and extra data metatrain's
    ``unpack_batch`` returns."""

    __slots__ = ("extra", "systems", "targets")

    def __init__(self, systems: list[Any], targets: dict[str, Any], extra: dict[str, Any]) -> None:
        self.systems = systems
        self.targets = targets
        self.extra = extra

    def __reduce__(self) -> tuple[Any, ...]:
        packer = _Packer()
        systems = [_pack_system(packer, s) for s in self.systems]
        targets = {name: _pack_map(packer, m) for name, m in self.targets.items()}
        extra = {name: _pack_map(packer, m) for name, m in self.extra.items()}
        return _rebuild, (packer.buffer(), systems, targets, extra)


def is_blockmap_batch(batch: Any) -> bool:
    """Whether ``batch`` (the list a DataLoader collates) holds blockmap
    items: any of them, so that :func:`collate` refuses a batch that mixes
    them with others whatever comes first (metatrain's collate took it
    when another item came first)."""
    return any(isinstance(item, Sample) for item in batch)


def collate(target_keys: Any, callables: list[Any], batch: list[Sample]) -> Batch:
    """metatrain's ``CollateFn.__call__`` on a batch of blockmap items."""
    dataset = getattr(batch[0], "_dataset", None)
    if any(not isinstance(item, Sample) or item._dataset is not dataset for item in batch):
        raise ValidationError(
            "the items of a batch must all come from one blockmap dataset (a "
            "MetatrainDataset, or a Subset of it): "
            f"{sorted({type(item).__name__ for item in batch})} from "
            f"{len({id(getattr(item, '_dataset', item)) for item in batch})} datasets"
        )
    fields = dataset.sample_fields
    systems = [system_of(item) for item in batch]
    for function in callables:
        if isinstance(function, NeighborTransform):
            for options in function.options:
                attach(dataset, options, batch, systems)

    targets: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for name in fields[1:]:
        if name == SYSTEM_INDEX:
            joined = joined_system_index([item._index for item in batch])
        else:
            maps = [item._views[name] for item in batch]
            joined = to_metatensor_torch(join(maps, axis="samples", different_keys="union"))
        (targets if name in target_keys else extra)[name] = joined

    for function in callables:
        systems, targets, extra = function(systems, targets, extra)
    return Batch(list(systems), targets, extra)


def joined_system_index(indices: list[int]) -> Any:
    """The join of the items' ``mtt::aux::system_index`` maps: made at once
    when the indices differ (the join's result then: one row per item, in
    order), joined otherwise."""
    if len(set(indices)) != len(indices):
        maps = [system_index_map(index) for index in indices]
        return to_metatensor_torch(join(maps, axis="samples", different_keys="union"))
    import metatensor.torch as mtt
    import torch

    column = torch.tensor(indices, dtype=torch.int32).reshape(-1, 1)
    zero = torch.zeros((1, 1), dtype=torch.int32)
    block = mtt.TensorBlock(
        values=column.to(torch.float64),
        samples=mtt.Labels(["system"], column),
        components=[],
        properties=mtt.Labels(["_"], zero),
    )
    return mtt.TensorMap(mtt.Labels(["_"], zero), [block])


def system_of(item: Sample) -> Any:
    """The item's ``System`` (a new one: the callables add to it)."""
    return system_from_tensormaps(item._views["system"])


def attach(dataset: Any, options: Any, batch: list[Sample], systems: list[Any]) -> None:
    """Add the stored neighbour lists with ``options`` to the systems that
    do not hold them, as metatrain's ``get_system_with_neighbor_lists``
    would have added them."""
    store = _neighbors.ensure(dataset, options)
    if store is None:
        return  # the systems hold these lists
    for item, system in zip(batch, systems, strict=True):
        # a system of the dataset holds lists only if it stored some
        if len(item._views["system"]) > 1 and options in system.known_neighbor_lists():
            continue
        block = store.block(item._index)
        if block.values.dtype != system.dtype:
            block = block.to(dtype=system.dtype)
        # no register_autograd_neighbors: metatrain's batches lose that
        # link in save_buffer / load_buffer, and evaluate_model registers
        # the lists again on the systems it differentiates
        system.add_neighbor_list(options, block)


def unpack(batch: Batch) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """metatrain's ``unpack_batch`` for a :class:`Batch`."""
    return batch.systems, batch.targets, batch.extra


# ---------------------------------------------------------------------------
# crossing a process: every tensor of the batch goes into one flat uint8
# tensor (each part at a multiple of 8 bytes), the small labels (keys,
# components, properties) as lists, built once per batch on arrival; the
# rest (names, shapes, options) is small Python data

#: labels of at most this many values travel as lists (and are built once
#: per distinct labels on arrival)
_SMALL = 32


class _Packer:
    def __init__(self) -> None:
        self.parts: list[Any] = []
        self.size = 0

    def add(self, tensor: Any) -> tuple[Any, int, tuple[int, ...]]:
        import torch

        tensor = tensor.detach().contiguous()
        offset = self.size
        raw = tensor.reshape(-1).view(torch.uint8)
        self.parts.append(raw)
        self.size += raw.numel()
        padding = -self.size % 8
        if padding:
            self.parts.append(torch.zeros(padding, dtype=torch.uint8))
            self.size += padding
        return (tensor.dtype, offset, tuple(tensor.shape))

    def buffer(self) -> Any:
        import torch

        if not self.parts:
            return torch.zeros(0, dtype=torch.uint8)
        return torch.cat(self.parts)


class _Arrival:
    """What rebuilding one batch shares: its buffer, the small labels and
    the neighbour-list options already built."""

    def __init__(self, buffer: Any) -> None:
        import metatensor.torch as mtt
        import metatomic.torch as mta
        import torch

        self.buffer = buffer
        self.bool = torch.bool
        self.int32 = torch.int32
        self.mtt = mtt
        self.mta = mta
        self.labels: dict[Any, Any] = {}
        self.options: dict[Any, Any] = {}

    def take(self, ref: tuple[Any, int, tuple[int, ...]]) -> Any:
        import torch

        dtype, offset, shape = ref
        if (
            not isinstance(dtype, torch.dtype)
            or type(offset) is not int
            or type(shape) is not tuple
            or any(type(size) is not int or size < 0 for size in shape)
        ):
            raise _bad(f"a tensor described as {ref!r}")
        count = 1
        for size in shape:
            count *= size
        end = offset + count * dtype.itemsize
        if offset < 0 or offset % 8 != 0 or end > len(self.buffer):
            raise _bad(
                f"a tensor of {count} x {dtype} at byte {offset} of a buffer of "
                f"{len(self.buffer)} bytes"
            )
        raw = self.buffer[offset:end]
        if dtype == self.bool and count:
            # a bool tensor holds the bytes 0 and 1 only (one holding 2 is
            # True to some operations and 2 to others)
            high = int(raw.numpy().max())
            if high > 1:
                raise _bad(f"a bool tensor holds the byte {high}")
        return raw.view(dtype).view(shape)


def _pack_labels(packer: _Packer, labels: Any) -> Any:
    values = labels.values
    names = tuple(labels.names)
    if values.numel() <= _SMALL:
        return (names, tuple(values.shape), tuple(values.reshape(-1).tolist()))
    return (names, packer.add(values))


def _pack_block(packer: _Packer, block: Any) -> Any:
    return (
        packer.add(block.values),
        _pack_labels(packer, block.samples),
        [_pack_labels(packer, c) for c in block.components],
        _pack_labels(packer, block.properties),
        [(p, _pack_block(packer, block.gradient(p))) for p in block.gradients_list()],
    )


def _pack_map(packer: _Packer, tensor: Any) -> Any:
    return (_pack_labels(packer, tensor.keys), [_pack_block(packer, b) for b in tensor.blocks()])


def _pack_system(packer: _Packer, system: Any) -> Any:
    lists = []
    for options in system.known_neighbor_lists():
        block = _pack_block(packer, system.get_neighbor_list(options))
        lists.append((describe_options(options), block))
    data = [(name, _pack_map(packer, system.get_data(name))) for name in system.known_data()]
    arrays = [packer.add(a) for a in (system.types, system.positions, system.cell, system.pbc)]
    return (arrays, lists, data)


def _rebuild_labels(arrival: _Arrival, packed: Any, pairs_of: int | None = None) -> Any:
    """Labels as they arrive, checked: rows unique, and with ``pairs_of``
    (a neighbour list's samples) atoms within the system's ``pairs_of``."""
    if len(packed) == 3:
        found = arrival.labels.get(packed)
        if found is None:
            import torch

            names, shape, values = packed
            tensor = torch.tensor(values, dtype=torch.int32).reshape(shape)
            # small: checked for duplicates (a damaged pickle's repeated
            # key is refused, not looked up wrongly)
            found = (arrival.mtt.Labels(list(names), tensor), tensor)
            arrival.labels[packed] = found
        labels, values = found
        if pairs_of is not None:
            _check_pairs(packed[0], values, pairs_of)
        return labels
    names, ref = packed
    values = arrival.take(ref)
    if values.dtype != arrival.int32 or values.dim() != 2 or values.shape[1] != len(names):
        raise _bad(f"labels {names!r} of {values.dtype} values of shape {tuple(values.shape)}")
    # checked unique by blockmap's Labels (one pass when the rows are
    # sorted, a hash set otherwise: cheaper than metatensor-torch's check
    # of unsorted rows, docs/benchmarks.md), then made without checking
    # again: a repeated row would make lookups and sums wrong
    try:
        Labels(list(names), values.numpy())
    except ValidationError as error:
        raise _bad(f"labels {list(names)}: {error}") from None
    if pairs_of is not None:
        _check_pairs(names, values, pairs_of)
    return arrival.mtt.Labels(list(names), values, assume_unique=True)


def _check_pairs(names: Any, values: Any, n_atoms: int) -> None:
    try:
        check_pair_atoms(names, values.numpy(), n_atoms, "a neighbour list")
    except ValidationError as error:
        raise _bad(str(error)) from None


def _rebuild_block(arrival: _Arrival, packed: Any, pairs_of: int | None = None) -> Any:
    values, samples, components, properties, gradients = packed
    block = arrival.mtt.TensorBlock(
        values=arrival.take(values),
        samples=_rebuild_labels(arrival, samples, pairs_of),
        components=[_rebuild_labels(arrival, c) for c in components],
        properties=_rebuild_labels(arrival, properties),
    )
    for parameter, gradient in gradients:
        block.add_gradient(parameter, _rebuild_block(arrival, gradient))
    return block


def _rebuild_map(arrival: _Arrival, packed: Any) -> Any:
    keys, blocks = packed
    return arrival.mtt.TensorMap(
        _rebuild_labels(arrival, keys), [_rebuild_block(arrival, b) for b in blocks]
    )


def _rebuild_options(arrival: _Arrival, described: Any) -> Any:
    found = arrival.options.get(described)
    if found is None:
        cutoff, full_list, strict, requestors, length_unit = described
        try:
            found = neighbor_list_options(
                arrival.mta, cutoff, full_list, strict, requestors, length_unit
            )
        except ValidationError as error:
            raise _bad(str(error)) from None
        arrival.options[described] = found
    return found


def _rebuild_system(arrival: _Arrival, packed: Any) -> Any:
    (types, positions, cell, pbc), lists, data = packed
    take = arrival.take
    system = arrival.mta.System(
        types=take(types), positions=take(positions), cell=take(cell), pbc=take(pbc)
    )
    # the system checked positions' shape (n, 3) against the types'
    n_atoms = positions[2][0]
    for described, block in lists:
        system.add_neighbor_list(
            _rebuild_options(arrival, described), _rebuild_block(arrival, block, n_atoms)
        )
    for name, tensor in data:
        system.add_data(name, _rebuild_map(arrival, tensor))
    return system


def _bad(what: str) -> Exception:
    from ..exceptions import FormatError

    return FormatError(f"this pickle is not a blockmap batch: {what}")


def _rebuild(buffer: Any, systems: Any, targets: Any, extra: Any) -> Batch:
    """The batch :meth:`Batch.__reduce__` describes. Anything else (a
    damaged or crafted pickle) raises :class:`~blockmap.FormatError`: every
    tensor is checked to lie in the buffer before it is viewed, and what
    torch, metatensor-torch or metatomic refuse is reported as such."""
    import torch

    from ..exceptions import BlockMapError

    if (
        not isinstance(buffer, torch.Tensor)
        or buffer.dtype != torch.uint8
        or buffer.dim() != 1
        or not buffer.is_contiguous()
        or type(systems) is not list
        or type(targets) is not dict
        or type(extra) is not dict
        or any(type(name) is not str for name in [*targets, *extra])
    ):
        raise _bad("its parts are not a flat uint8 tensor, a list and two dicts of str keys")
    arrival = _Arrival(buffer)
    try:
        return Batch(
            [_rebuild_system(arrival, s) for s in systems],
            {name: _rebuild_map(arrival, m) for name, m in targets.items()},
            {name: _rebuild_map(arrival, m) for name, m in extra.items()},
        )
    except BlockMapError:
        raise
    except (TypeError, ValueError, RuntimeError, KeyError, IndexError, AttributeError) as error:
        raise _bad(f"{type(error).__name__}: {error}") from error
