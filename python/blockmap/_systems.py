"""metatomic's systems as TensorMaps, both ways (docs/format.md, "Systems as
TensorMaps").

A ``metatomic.torch.System`` holds four arrays: ``positions`` (n, 3) and
``cell`` (3, 3) of one floating dtype, ``types`` (n,) int32 and ``pbc`` (3,)
bool. Its TensorMap has two blocks, keyed by ``array``:

- ``array = 0``, the positions: values (n, 3, 1), samples
  ``(atom_or_vector, type_or_pbc)`` = ``(i, types[i])``;
- ``array = 1``, the cell: values (3, 3, 1), samples
  ``(atom_or_vector, type_or_pbc)`` = ``(i, pbc[i])`` (1 periodic along
  cell vector ``i``, 0 not);

both with the component ``xyz`` (0, 1, 2) and the property ``_`` (0). The
floats keep their dtype; types and pbc are exact in the int32 labels.

:func:`tensormap_from_mta` reads metatomic's ``system.mta`` (the zip that
``metatomic.torch.save`` writes, and metatrain's ``DiskDatasetWriter`` with
it) with blockmap's bounded zip and NPY readers, never ``zipfile``,
``numpy.load`` or ``torch.load``; :func:`tensormap_from_system` and
:func:`system_from_tensormap` convert a ``System`` object. A system's
neighbor lists and extra data are other maps: :func:`tensormaps_from_mta`,
:func:`tensormaps_from_system` and :func:`system_from_tensormaps` convert
them all, as a dict of maps named ``"system"``, ``"pairs/<i>"`` (a neighbor
list: its block, and its options in the map's info) and ``"data/<name>"``
(extra data, the map itself). The one-map functions refuse a system that
holds what the map does not encode, except neighbor lists dropped on
request.

Importing this module does not import torch or metatomic: the functions
that take or make a ``System`` import them when called.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import _optional
from ._blockmap import Labels, TensorBlock, TensorMap, _zip_members, load_block_buffer, load_buffer
from ._bridges import script_class
from .exceptions import BlockMapTypeError, FormatError, ValidationError

__all__ = [
    "CELL",
    "POSITIONS",
    "system_from_tensormap",
    "system_from_tensormaps",
    "tensormap_from_mta",
    "tensormap_from_system",
    "tensormaps_from_mta",
    "tensormaps_from_system",
]

#: the key of the positions' block (``array`` = 0)
POSITIONS = 0
#: the key of the cell's block (``array`` = 1)
CELL = 1

_KEY = "array"
_SAMPLES = ("atom_or_vector", "type_or_pbc")
_SAMPLE_NAMES = list(_SAMPLES)
_COMPONENT = "xyz"
_PROPERTY = "_"

#: the members of ``system.mta`` that hold the four arrays
_ARRAYS = ("positions.npy", "cell.npy", "types.npy", "pbc.npy")
#: a neighbor list's members: ``pairs/<i>/options.json`` and ``.../data.mts``
_PAIRS = re.compile(r"pairs/(0|[1-9][0-9]*)/(options\.json|data\.mts)")
#: extra data: ``data/<name>.mts``
_DATA = re.compile(r"data/([^/]+)\.mts")
#: the fields of a neighbor list's options.json, as metatomic writes them
_OPTIONS = ("class", "cutoff", "full_list", "length_unit", "requestors", "strict")
#: the floating dtypes positions and cell may have
_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
#: how many member names a message lists
_SHOWN = 5


def _listed(names: list[str]) -> str:
    shown = ", ".join(repr(name) for name in names[:_SHOWN])
    if len(names) > _SHOWN:
        shown += f" and {len(names) - _SHOWN} more"
    return shown


def tensormap_from_mta(data: Any, *, drop_neighbor_lists: bool = False) -> TensorMap:
    """The TensorMap of the system saved in ``data``, a ``system.mta`` file.

    ``data`` is what ``metatomic.torch.save`` writes (and metatrain's
    ``DiskDatasetWriter`` stores as ``<i>/system.mta``): a zip of
    ``positions.npy``, ``cell.npy``, ``types.npy`` and ``pbc.npy``, and of
    the system's neighbor lists (``pairs/<i>/``) and extra data
    (``data/<name>.mts``). It is read with blockmap's own zip and NPY readers
    and their bounds (docs/format.md, "Importing"). The map is described in
    docs/format.md, "Systems as TensorMaps"; its floats keep the dtype
    stored (metatomic stores float64).

    Everything in the zip is converted or the zip is refused: a member that
    is not one of these, extra data (which the map does not encode), a
    neighbor list unless ``drop_neighbor_lists`` is true, an array of the
    wrong shape or dtype, a non-periodic direction with a non-zero cell
    vector (which metatomic refuses too).

    Parameters
    ----------
    data : bytes-like
        The bytes of a ``system.mta`` file.
    drop_neighbor_lists : bool, optional
        Leave out the neighbor lists the system holds, instead of refusing it.

    Returns
    -------
    TensorMap
        The system's map: two blocks, the positions and the cell.

    Raises
    ------
    FormatError
        If ``data`` is not a zip of a system that blockmap converts fully.
    BlockMapTypeError
        If ``data`` is not a bytes-like object.
    BlockMapMemoryError
        If memory for the arrays cannot be allocated.
    """
    system, pairs, extra, _ = _read(data, read_other=False)
    if extra:
        raise FormatError(
            f"system.mta: the system holds extra data "
            f"({_listed([f'data/{name}.mts' for name in extra])}), which "
            "tensormap_from_mta does not encode (tensormaps_from_mta does): "
            "refused rather than left out"
        )
    if pairs and not drop_neighbor_lists:
        raise FormatError(
            f"system.mta: the system holds neighbor lists "
            f"({_listed([f'pairs/{index}/' for index in pairs])}), which "
            "tensormap_from_mta does not encode (tensormaps_from_mta does); pass "
            "drop_neighbor_lists=True to leave them out (they can be computed again "
            "from the positions, cell and pbc)"
        )
    return system


def _read(data: Any, read_other: bool) -> tuple[TensorMap, list[int], list[str], dict[str, bytes]]:
    """The system map of ``system.mta`` bytes, its neighbor lists' indices,
    its extra data's names, and (with ``read_other``) the bytes of their
    members, by name."""
    try:
        names, arrays, _ = _zip_members(data, list(_ARRAYS), [])
    except FormatError as error:
        raise FormatError(f"system.mta: {error}") from None
    unknown = []
    pairs: dict[int, set[str]] = {}
    extra = []
    for name in names:
        if name in _ARRAYS:
            continue
        if match := _PAIRS.fullmatch(name):
            pairs.setdefault(int(match[1]), set()).add(match[2])
        elif match := _DATA.fullmatch(name):
            extra.append(match[1])
        else:
            unknown.append(name)
    if unknown:
        raise FormatError(
            f"system.mta: members {_listed(unknown)} are not part of metatomic's "
            "format (positions.npy, cell.npy, types.npy, pbc.npy, pairs/<i>/, "
            "data/<name>.mts): refused rather than left out"
        )
    for index, present in pairs.items():
        if present != {"options.json", "data.mts"}:
            (missing,) = {"options.json", "data.mts"} - present
            raise FormatError(f"system.mta: neighbor list {index} has no {missing}")
    indices = sorted(pairs)
    other = []
    if read_other:
        other = [f"pairs/{i}/{member}" for i in indices for member in ("options.json", "data.mts")]
        other += [f"data/{name}.mts" for name in extra]
    try:
        system = _tensormap(*arrays)
        raw = _zip_members(data, [], other)[2] if other else []
    except ValidationError as error:
        raise FormatError(f"system.mta: {error}") from None
    return system, indices, extra, dict(zip(other, raw, strict=True))


def tensormaps_from_mta(data: Any) -> dict[str, TensorMap]:
    """Every map of the system saved in ``data``, a ``system.mta`` file.

    As :func:`tensormap_from_mta`, with the system's neighbor lists and
    extra data converted too, each to a map of its own: ``"system"`` (the
    positions and cell), ``"pairs/<i>"`` for the zip's ``pairs/<i>/``
    (keys ``_`` = 0; the neighbor list's block as metatomic stores it; its
    options in the map's info: ``cutoff``, ``full_list``, ``strict``,
    ``length_unit``, ``requestors``) and ``"data/<name>"`` for
    ``data/<name>.mts`` (the map stored). The ``.mts`` members are loaded by
    blockmap's own loader.

    Parameters
    ----------
    data : bytes-like
        The bytes of a ``system.mta`` file.

    Returns
    -------
    dict[str, TensorMap]
        The maps, by name.

    Raises
    ------
    FormatError
        If ``data`` is not a zip of a system that blockmap converts fully.
    BlockMapTypeError
        If ``data`` is not a bytes-like object.
    BlockMapMemoryError
        If memory for the arrays cannot be allocated.
    """
    system, indices, extra, raw = _read(data, read_other=True)
    float_dtype = system.block(0).values.dtype
    maps = {"system": system}
    for index in indices:
        member = f"pairs/{index}/data.mts"
        try:
            info = _options_info(raw[f"pairs/{index}/options.json"])
            block = load_block_buffer(raw[member])
        except ValidationError as error:
            raise FormatError(f"system.mta: member '{member}': {error}") from None
        if (
            list(block.samples.names) != list(_PAIR_SAMPLES)
            or [list(c.names) for c in block.components] != [[_COMPONENT]]
            or list(block.properties.names) != ["distance"]
            or block.values.dtype != float_dtype
        ):
            raise FormatError(
                f"system.mta: member '{member}' is not a neighbor list of this system "
                f"(samples {_PAIR_SAMPLES}, component '{_COMPONENT}', property "
                f"'distance', values of the positions' dtype {float_dtype})"
            )
        try:
            check_pair_atoms(
                block.samples.names, block.samples.values, len(system.block(0)), "system.mta"
            )
        except ValidationError as error:
            raise FormatError(f"{error} (member '{member}')") from None
        pairs = TensorMap(Labels(["_"], np.zeros((1, 1), dtype=np.int32)), [block])
        for key, value in info.items():
            pairs.set_info(key, value)
        maps[f"pairs/{index}"] = pairs
    for name in extra:
        member = f"data/{name}.mts"
        try:
            maps[member[:-4]] = load_buffer(raw[member])
        except ValidationError as error:
            raise FormatError(f"system.mta: member '{member}': {error}") from None
    return maps


#: the samples of a neighbor list's block (metatomic's)
_PAIR_SAMPLES = ("first_atom", "second_atom", "cell_shift_a", "cell_shift_b", "cell_shift_c")


def _options_info(text: bytes) -> dict[str, str]:
    """The info of a neighbor list's map, from its options.json."""
    try:
        options = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        # RecursionError: brackets nested deeper than the interpreter's stack
        raise FormatError(f"options.json is not JSON: {error}") from None
    if not isinstance(options, dict) or options.get("class") != "NeighborListOptions":
        raise FormatError("options.json does not hold NeighborListOptions")
    if set(options) - set(_OPTIONS):
        raise FormatError(
            f"options.json has fields {sorted(set(options) - set(_OPTIONS))} blockmap does not know"
        )
    bits = options.get("cutoff")
    full_list, strict = options.get("full_list"), options.get("strict")
    length_unit, requestors = options.get("length_unit", ""), options.get("requestors", [])
    if (
        type(bits) is not int
        or not -(2**63) <= bits < 2**64
        or type(full_list) is not bool
        or type(strict) is not bool
        or not isinstance(length_unit, str)
        or not isinstance(requestors, list)
        or not all(isinstance(r, str) for r in requestors)
    ):
        raise FormatError(
            "options.json must hold cutoff (the bits of a float64), full_list, strict "
            "(booleans), length_unit (a string) and requestors (strings)"
        )
    # metatomic writes the cutoff's float64 bits as an integer
    (cutoff,) = struct.unpack("<d", (bits % 2**64).to_bytes(8, "little"))
    if not math.isfinite(cutoff) or cutoff <= 0:
        raise FormatError(f"options.json: the cutoff is {cutoff}, not a finite positive length")
    return {
        "cutoff": repr(cutoff),
        "full_list": json.dumps(full_list),
        "strict": json.dumps(strict),
        "length_unit": length_unit,
        "requestors": json.dumps(requestors),
    }


def _tensormap(
    positions: np.ndarray, cell: np.ndarray, types: np.ndarray, pbc: np.ndarray
) -> TensorMap:
    """The map of the four arrays, checked (ValidationError)."""
    if positions.ndim != 2 or positions.shape[1] != 3:
        raise ValidationError(f"positions must have the shape (n, 3), not {positions.shape}")
    if positions.dtype not in _FLOATS:
        raise ValidationError(
            f"positions must be float16, float32 or float64, not {positions.dtype}"
        )
    if cell.shape != (3, 3):
        raise ValidationError(f"the cell must have the shape (3, 3), not {cell.shape}")
    if cell.dtype != positions.dtype:
        raise ValidationError(
            f"the cell must have the dtype of the positions ({positions.dtype}), not {cell.dtype}"
        )
    n = positions.shape[0]
    if types.shape != (n,):
        raise ValidationError(
            f"types must have the shape ({n},) of the {n} atoms, not {types.shape}"
        )
    if types.dtype == np.int64:
        info = np.iinfo(np.int32)
        if n and (types.min() < info.min or types.max() > info.max):
            raise ValidationError("types hold values outside int32")
    elif types.dtype != np.int32:
        raise ValidationError(f"types must be int32, not {types.dtype}")
    if pbc.shape != (3,) or pbc.dtype != np.bool_:
        raise ValidationError(f"pbc must be 3 booleans, not {pbc.dtype} of shape {pbc.shape}")
    flags = pbc.view(np.uint8)
    if np.any(flags > 1):
        raise ValidationError("pbc holds bytes other than 0 and 1")
    open_vectors = (flags == 0) & np.any(cell != 0, axis=1)
    if np.any(open_vectors):
        raise ValidationError(
            f"cell vector {int(np.argmax(open_vectors))} is not zero while the "
            "system is not periodic along it (metatomic refuses such a system)"
        )

    components = [Labels([_COMPONENT], np.arange(3, dtype=np.int32).reshape(3, 1))]
    properties = Labels([_PROPERTY], np.zeros((1, 1), dtype=np.int32))
    atoms = np.empty((n, 2), dtype=np.int32)
    atoms[:, 0] = np.arange(n, dtype=np.int32)
    atoms[:, 1] = types
    vectors = np.empty((3, 2), dtype=np.int32)
    vectors[:, 0] = np.arange(3, dtype=np.int32)
    vectors[:, 1] = flags
    blocks = [
        TensorBlock(
            positions.reshape(n, 3, 1), Labels(list(_SAMPLES), atoms), components, properties
        ),
        TensorBlock(cell.reshape(3, 3, 1), Labels(list(_SAMPLES), vectors), components, properties),
    ]
    keys = Labels([_KEY], np.array([[POSITIONS], [CELL]], dtype=np.int32))
    return TensorMap(keys, blocks)


def _metatomic() -> Any:
    try:
        import metatomic.torch as mta  # type: ignore[import-untyped, unused-ignore]
    except ImportError as error:
        raise _optional.missing(
            "metatomic's systems need metatomic-torch, which is not installed",
            "metatomic",
            "metatomic-torch",
        ) from error
    return mta


def _is_system(obj: object) -> bool:
    name = script_class(obj)
    return name is not None and name.endswith("metatomic.System")


def tensormap_from_system(system: Any, *, drop_neighbor_lists: bool = False) -> TensorMap:
    """The TensorMap of a ``metatomic.torch.System``.

    The map is described in docs/format.md, "Systems as TensorMaps": its
    values are a copy of the system's positions and cell (moved to the CPU,
    of their dtype), its labels hold the types and pbc. A system holding
    extra data is refused, and one holding neighbor lists unless
    ``drop_neighbor_lists`` is true: the map does not encode them.

    Parameters
    ----------
    system : metatomic.torch.System
        The system.
    drop_neighbor_lists : bool, optional
        Leave out the neighbor lists the system holds, instead of refusing it.

    Returns
    -------
    TensorMap
        The system's map: two blocks, the positions and the cell.

    Raises
    ------
    BlockMapTypeError
        If ``system`` is not a ``metatomic.torch.System``.
    ValidationError
        If the system holds what the map does not encode.
    ModuleNotFoundError
        If torch or metatomic-torch is not installed.
    """
    _checked_system(system)
    if system.known_data():
        raise ValidationError(
            f"the system holds extra data ({', '.join(system.known_data())}), which "
            "tensormap_from_system does not encode (tensormaps_from_system does)"
        )
    if system.known_neighbor_lists() and not drop_neighbor_lists:
        raise ValidationError(
            "the system holds neighbor lists, which tensormap_from_system does not "
            "encode (tensormaps_from_system does); pass drop_neighbor_lists=True to "
            "leave them out"
        )

    return _system_map(system)


def _checked_system(system: Any) -> Any:
    mta = _metatomic()
    if not _is_system(system):
        raise BlockMapTypeError(f"expected a metatomic.torch.System, got {type(system).__name__}")
    return mta


def _system_map(system: Any) -> TensorMap:
    def copied(tensor: Any) -> np.ndarray:
        return np.array(tensor.detach().cpu().numpy(), copy=True, order="C")

    return _tensormap(
        copied(system.positions), copied(system.cell), copied(system.types), copied(system.pbc)
    )


def tensormaps_from_system(system: Any) -> dict[str, TensorMap]:
    """Every map of a ``metatomic.torch.System``: the names and maps of
    :func:`tensormaps_from_mta`.

    ``"system"`` is :func:`tensormap_from_system`'s map; each neighbor list
    (in the system's order) is a map ``"pairs/<i>"`` and each extra data a
    map ``"data/<name>"``, their arrays copied to the CPU as numpy arrays.

    Parameters
    ----------
    system : metatomic.torch.System
        The system.

    Returns
    -------
    dict[str, TensorMap]
        The maps, by name.

    Raises
    ------
    BlockMapTypeError
        If ``system`` is not a ``metatomic.torch.System``.
    ModuleNotFoundError
        If torch or metatomic-torch is not installed.
    """
    _checked_system(system)
    from .metatensor_torch import from_metatensor_torch

    def copied(obj: Any) -> Any:
        converted: Any = from_metatensor_torch(obj.to("cpu"))
        return converted.to(arrays="numpy").copy()

    maps = {"system": _system_map(system)}
    for index, options in enumerate(system.known_neighbor_lists()):
        block = copied(system.get_neighbor_list(options))
        pairs = TensorMap(Labels(["_"], np.zeros((1, 1), dtype=np.int32)), [block])
        pairs.set_info("cutoff", repr(float(options.cutoff)))
        pairs.set_info("full_list", json.dumps(bool(options.full_list)))
        pairs.set_info("strict", json.dumps(bool(options.strict)))
        pairs.set_info("length_unit", str(options.length_unit))
        pairs.set_info("requestors", json.dumps(list(options.requestors())))
        maps[f"pairs/{index}"] = pairs
    for name in system.known_data():
        maps[f"data/{name}"] = copied(system.get_data(name))
    return maps


def _numpy(array: Any) -> np.ndarray:
    """A numpy array of a map's values or labels (numpy or torch-backed)."""
    if isinstance(array, np.ndarray):
        return array
    return np.asarray(array.detach().cpu().numpy())


def system_from_tensormap(tensor: TensorMap, dtype: Any = None) -> Any:
    """The ``metatomic.torch.System`` a system's TensorMap encodes.

    The inverse of :func:`tensormap_from_mta` and
    :func:`tensormap_from_system` (docs/format.md, "Systems as
    TensorMaps"): positions and cell are torch tensors of the values'
    dtype (or ``dtype``), copies of the map's memory, types int32 and pbc
    bool.

    Parameters
    ----------
    tensor : TensorMap
        A map in the system encoding.
    dtype : torch.dtype, optional
        The dtype of the positions and cell; the values' own by default.

    Returns
    -------
    metatomic.torch.System
        The system, on the CPU.

    Raises
    ------
    BlockMapTypeError
        If ``tensor`` is not a TensorMap.
    ValidationError
        If ``tensor`` is not a system's map, or ``dtype`` not a floating dtype.
    ModuleNotFoundError
        If torch or metatomic-torch is not installed.
    """
    mta = _metatomic()
    import torch

    # the batch path converts every system of every batch with this
    # function: its checks read what they check once, small arrays as
    # Python lists (numpy's reductions cost more than a 3-element list)
    if not isinstance(tensor, TensorMap):
        raise BlockMapTypeError(f"expected a blockmap TensorMap, got {type(tensor).__name__}")
    keys = tensor.keys
    order = _numpy(keys.values)[:, 0].tolist() if keys.names == [_KEY] else []
    if sorted(order) != [POSITIONS, CELL]:
        raise ValidationError(
            f"not a system's map: its keys must be '{_KEY}' = {POSITIONS} (positions) and "
            f"{CELL} (cell), see docs/format.md 'Systems as TensorMaps'"
        )
    arrays = []
    for key in (POSITIONS, CELL):
        block = tensor.block(order.index(key))
        name = "positions" if key == POSITIONS else "cell"
        labels = block.samples
        components = block.components
        properties = block.properties
        if (
            labels.names != _SAMPLE_NAMES
            or len(components) != 1
            or components[0].names != [_COMPONENT]
            or _numpy(components[0].values).ravel().tolist() != [0, 1, 2]
            or properties.names != [_PROPERTY]
            or len(properties) != 1
            or block.gradients_list()
        ):
            raise ValidationError(
                f"not a system's map: the {name} block must have the samples "
                f"{_SAMPLES}, the component '{_COMPONENT}' (0, 1, 2), one property "
                f"'{_PROPERTY}' and no gradients"
            )
        samples = _numpy(labels.values)
        values = _numpy(block.values)
        if not (samples[:, 0] == np.arange(len(samples))).all():
            raise ValidationError(f"not a system's map: the {name} rows must be numbered 0, 1, ...")
        arrays.append((values.reshape(values.shape[0], 3), samples[:, 1]))
    (positions, types), (cell, pbc) = arrays
    if cell.shape != (3, 3):
        raise ValidationError(f"not a system's map: the cell block has {cell.shape[0]} rows, not 3")
    flags = pbc.tolist()
    if any(flag != 0 and flag != 1 for flag in flags):
        raise ValidationError("not a system's map: the cell's pbc labels must be 0 or 1")
    if positions.dtype not in _FLOATS or cell.dtype != positions.dtype:
        raise ValidationError(
            f"not a system's map: positions and cell must have one floating dtype, not "
            f"{positions.dtype} and {cell.dtype}"
        )
    if any(flag == 0 and any(row) for flag, row in zip(flags, cell.tolist(), strict=True)):
        raise ValidationError("a cell vector is not zero while the system is not periodic along it")
    floats = (torch.float16, torch.float32, torch.float64)
    if dtype is not None and not isinstance(dtype, torch.dtype):
        raise BlockMapTypeError(f"dtype must be a torch.dtype, not {type(dtype).__name__}")
    if dtype is not None and dtype not in floats:
        raise ValidationError(f"dtype must be torch.float16, float32 or float64, not {dtype}")
    # copies: the map's arrays may be read-only views of a file
    positions_t = torch.from_numpy(np.array(positions, copy=True, order="C"))
    cell_t = torch.from_numpy(np.array(cell, copy=True, order="C"))
    if dtype is not None:
        positions_t = positions_t.to(dtype)
        cell_t = cell_t.to(dtype)
    return mta.System(
        types=torch.from_numpy(np.array(types, dtype=np.int32, copy=True)),
        positions=positions_t,
        cell=cell_t,
        pbc=torch.from_numpy(pbc == 1),
    )


def system_from_tensormaps(maps: Any, dtype: Any = None) -> Any:
    """The ``metatomic.torch.System`` that the maps of
    :func:`tensormaps_from_mta` or :func:`tensormaps_from_system` encode.

    ``maps["system"]`` gives the system (:func:`system_from_tensormap`),
    each ``"pairs/<i>"`` a neighbor list (added in the order of ``i``), each
    ``"data/<name>"`` extra data; the neighbor lists and extra data are
    converted to ``dtype`` too when it is given.

    Parameters
    ----------
    maps : Mapping[str, TensorMap]
        The maps, by name.
    dtype : torch.dtype, optional
        The dtype of the system's floats; the values' own by default.

    Returns
    -------
    metatomic.torch.System
        The system, on the CPU, with its neighbor lists and extra data.

    Raises
    ------
    BlockMapTypeError
        If ``maps`` is not a mapping of maps.
    ValidationError
        If the maps do not encode a system.
    ModuleNotFoundError
        If torch or metatomic-torch is not installed.
    """
    mta = _metatomic()
    if not isinstance(maps, Mapping) or not all(isinstance(m, TensorMap) for m in maps.values()):
        raise BlockMapTypeError("expected a mapping of names to blockmap TensorMaps")
    if "system" not in maps:
        raise ValidationError("the maps of a system need one named 'system'")
    system = system_from_tensormap(maps["system"], dtype)
    pairs = {}
    extra = {}
    for name, tensor in maps.items():
        if name == "system":
            continue
        if match := re.fullmatch(r"pairs/(0|[1-9][0-9]*)", name):
            pairs[int(match[1])] = tensor
        elif match := re.fullmatch(r"data/([^/]+)", name):
            extra[match[1]] = tensor
        else:
            raise ValidationError(
                f"'{name}' is not a map of a system (system, pairs/<i>, data/<name>)"
            )
    if not pairs and not extra:
        return system  # the batch path's common case: nothing more to read
    from .metatensor_torch import to_metatensor_torch

    float_dtype = system.positions.dtype
    try:
        for index in sorted(pairs):
            tensor = pairs[index]
            if list(tensor.keys.names) != ["_"] or len(tensor) != 1:
                raise ValidationError(f"the map 'pairs/{index}' must have one block, key '_'")
            options = _options(mta, tensor.info(), f"pairs/{index}")
            stored = tensor.block(0)
            check_pair_atoms(
                stored.samples.names, _numpy(stored.samples.values), len(system), f"pairs/{index}"
            )
            block = to_metatensor_torch(stored)
            system.add_neighbor_list(options, block.to(dtype=float_dtype))
        for name, tensor in extra.items():
            system.add_data(name, to_metatensor_torch(tensor).to(dtype=float_dtype))
    except (ValueError, RuntimeError) as error:
        if isinstance(error, ValidationError):
            raise
        raise ValidationError(f"metatomic refuses the system's maps: {error}") from None
    return system


def _options(mta: Any, info: dict[str, str], name: str) -> Any:
    """A neighbor list's options, from its map's info."""
    try:
        cutoff = float(info["cutoff"])
        full_list = json.loads(info["full_list"])
        strict = json.loads(info["strict"])
        requestors = json.loads(info["requestors"])
        length_unit = info["length_unit"]
    except (KeyError, ValueError, RecursionError) as error:
        raise ValidationError(
            f"the info of '{name}' must hold cutoff, full_list, strict, length_unit and "
            f"requestors: {error!r}"
        ) from None
    if (
        type(full_list) is not bool
        or type(strict) is not bool
        or not isinstance(requestors, list)
        or not all(isinstance(r, str) for r in requestors)
    ):
        raise ValidationError(
            f"the info of '{name}': full_list and strict must be true or false, "
            "requestors a JSON list of strings"
        )
    return neighbor_list_options(mta, cutoff, full_list, strict, requestors, length_unit)


def describe_options(options: Any) -> tuple[float, bool, bool, tuple[str, ...], str]:
    """``NeighborListOptions`` as plain values, the arguments of
    :func:`neighbor_list_options` (``options`` made again from them is
    equal, with the same requestors and length unit)."""
    return (
        float(options.cutoff),
        bool(options.full_list),
        bool(options.strict),
        tuple(options.requestors()),
        str(options.length_unit),
    )


def neighbor_list_options(
    mta: Any,
    cutoff: float,
    full_list: bool,
    strict: bool,
    requestors: Sequence[str],
    length_unit: str,
) -> Any:
    """metatomic's ``NeighborListOptions`` (``mta``: ``metatomic.torch``)
    with every requestor and the length unit; the one place options are
    made of stored or received values (a system's map info, a batch
    pickle), so they are checked here: metatomic takes a cutoff that is
    NaN, infinite or negative, and an int for a bool (ValidationError)."""
    if (
        type(cutoff) is not float
        or not math.isfinite(cutoff)
        or cutoff <= 0
        or type(full_list) is not bool
        or type(strict) is not bool
        or not isinstance(requestors, (list, tuple))
        or not all(type(r) is str for r in requestors)
        or type(length_unit) is not str
    ):
        raise ValidationError(
            "neighbor list options need a finite positive float cutoff, booleans full_list "
            "and strict, str requestors and a str length unit, not "
            f"{(cutoff, full_list, strict, requestors, length_unit)!r}"[:300]
        )
    options = mta.NeighborListOptions(
        cutoff=cutoff,
        full_list=full_list,
        strict=strict,
        requestor=requestors[0] if requestors else "",
    )
    for requestor in requestors[1:]:
        options.add_requestor(requestor)
    options.length_unit = length_unit
    return options


def check_pair_atoms(names: Sequence[str], samples: Any, n_atoms: int, what: str) -> None:
    """Refuse a neighbor list whose pairs name atoms the system does not
    have (metatomic's ``add_neighbor_list`` takes them): the columns
    ``first_atom`` and ``second_atom`` of ``samples`` (numpy or torch
    values) in ``[0, n_atoms)`` (ValidationError)."""
    names = list(names)
    if len(samples) == 0 or "first_atom" not in names or "second_atom" not in names:
        return  # not a neighbor list: metatomic refuses it
    values = np.asarray(samples)
    first, second = names.index("first_atom"), names.index("second_atom")
    atoms = values[:, first : first + 2] if second == first + 1 else values[:, [first, second]]
    low, high = int(atoms.min()), int(atoms.max())
    if low < 0 or high >= n_atoms:
        bad = low if low < 0 else high
        column = "first_atom" if bad in values[:, first] else "second_atom"
        raise ValidationError(
            f"{what}: a pair names atom {bad} as its {column}, and the system has {n_atoms} atoms"
        )
