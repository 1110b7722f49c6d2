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
:func:`system_from_tensormap` convert a ``System`` object. Neighbor lists
and extra data are not encoded: a system holding them is refused, except
neighbor lists dropped on request (they are recomputed from the positions,
cell and pbc by whoever needs them).

Importing this module does not import torch or metatomic: the functions
that take or make a ``System`` import them when called.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ._blockmap import Labels, TensorBlock, TensorMap, _zip_arrays
from .exceptions import BlockMapTypeError, FormatError, ValidationError

__all__ = [
    "CELL",
    "POSITIONS",
    "system_from_tensormap",
    "tensormap_from_mta",
    "tensormap_from_system",
]

#: the key of the positions' block (``array`` = 0)
POSITIONS = 0
#: the key of the cell's block (``array`` = 1)
CELL = 1

_KEY = "array"
_SAMPLES = ("atom_or_vector", "type_or_pbc")
_COMPONENT = "xyz"
_PROPERTY = "_"

#: the members of ``system.mta`` that hold the four arrays
_ARRAYS = ("positions.npy", "cell.npy", "types.npy", "pbc.npy")
#: a neighbor list's members: ``pairs/<i>/options.json`` and ``.../data.mts``
_PAIRS = re.compile(r"pairs/(0|[1-9][0-9]*)/(options\.json|data\.mts)")
#: extra data: ``data/<name>.mts``
_DATA = re.compile(r"data/[^/]+\.mts")
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
    names, arrays = _zip_arrays(data, list(_ARRAYS))
    unknown = []
    pairs = []
    extra = []
    for name in names:
        if name in _ARRAYS:
            continue
        if _PAIRS.fullmatch(name):
            pairs.append(name)
        elif _DATA.fullmatch(name):
            extra.append(name)
        else:
            unknown.append(name)
    if unknown:
        raise FormatError(
            f"system.mta: members {_listed(unknown)} are not part of metatomic's "
            "format (positions.npy, cell.npy, types.npy, pbc.npy, pairs/<i>/, "
            "data/<name>.mts): refused rather than left out"
        )
    if extra:
        raise FormatError(
            f"system.mta: the system holds extra data ({_listed(extra)}), which "
            "blockmap's system map does not encode (docs/format.md, 'Systems as "
            "TensorMaps'): refused rather than left out"
        )
    if pairs and not drop_neighbor_lists:
        raise FormatError(
            f"system.mta: the system holds neighbor lists ({_listed(pairs)}), which "
            "blockmap's system map does not encode; pass drop_neighbor_lists=True to "
            "leave them out (they can be computed again from the positions, cell "
            "and pbc)"
        )
    positions, cell, types, pbc = arrays
    try:
        return _tensormap(positions, cell, types, pbc)
    except ValidationError as error:
        raise FormatError(f"system.mta: {error}") from None


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
        raise ModuleNotFoundError(
            "metatomic's systems need metatomic-torch, which is not installed: "
            "`pip install metatomic-torch`",
            name="metatomic",
        ) from error
    return mta


def _is_system(obj: object) -> bool:
    import torch

    if not isinstance(obj, torch.ScriptObject):
        return False
    return bool(obj._type().qualified_name().endswith("metatomic.System"))


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
    _metatomic()
    if not _is_system(system):
        raise BlockMapTypeError(f"expected a metatomic.torch.System, got {type(system).__name__}")
    if system.known_data():
        raise ValidationError(
            f"the system holds extra data ({', '.join(system.known_data())}), which "
            "blockmap's system map does not encode"
        )
    if system.known_neighbor_lists() and not drop_neighbor_lists:
        raise ValidationError(
            "the system holds neighbor lists, which blockmap's system map does not "
            "encode; pass drop_neighbor_lists=True to leave them out"
        )

    def copied(tensor: Any) -> np.ndarray:
        return np.array(tensor.detach().cpu().numpy(), copy=True, order="C")

    return _tensormap(
        copied(system.positions), copied(system.cell), copied(system.types), copied(system.pbc)
    )


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

    if not isinstance(tensor, TensorMap):
        raise BlockMapTypeError(f"expected a blockmap TensorMap, got {type(tensor).__name__}")
    keys = tensor.keys
    if list(keys.names) != [_KEY] or sorted(_numpy(keys.values)[:, 0].tolist()) != [
        POSITIONS,
        CELL,
    ]:
        raise ValidationError(
            f"not a system's map: its keys must be '{_KEY}' = {POSITIONS} (positions) and "
            f"{CELL} (cell), see docs/format.md 'Systems as TensorMaps'"
        )
    arrays = []
    for key in (POSITIONS, CELL):
        block = tensor.block({_KEY: key})
        name = "positions" if key == POSITIONS else "cell"
        components = block.components
        if (
            list(block.samples.names) != list(_SAMPLES)
            or len(components) != 1
            or list(components[0].names) != [_COMPONENT]
            or _numpy(components[0].values).ravel().tolist() != [0, 1, 2]
            or list(block.properties.names) != [_PROPERTY]
            or len(block.properties) != 1
            or block.gradients_list()
        ):
            raise ValidationError(
                f"not a system's map: the {name} block must have the samples "
                f"{_SAMPLES}, the component '{_COMPONENT}' (0, 1, 2), one property "
                f"'{_PROPERTY}' and no gradients"
            )
        samples = _numpy(block.samples.values)
        values = _numpy(block.values)
        if samples[:, 0].tolist() != list(range(len(samples))):
            raise ValidationError(f"not a system's map: the {name} rows must be numbered 0, 1, ...")
        arrays.append((values.reshape(values.shape[0], 3), samples[:, 1]))
    (positions, types), (cell, pbc) = arrays
    if cell.shape != (3, 3):
        raise ValidationError(f"not a system's map: the cell block has {cell.shape[0]} rows, not 3")
    if not np.all((pbc == 0) | (pbc == 1)):
        raise ValidationError("not a system's map: the cell's pbc labels must be 0 or 1")
    if positions.dtype not in _FLOATS or cell.dtype != positions.dtype:
        raise ValidationError(
            f"not a system's map: positions and cell must have one floating dtype, not "
            f"{positions.dtype} and {cell.dtype}"
        )
    if np.any((pbc == 0) & np.any(cell != 0, axis=1)):
        raise ValidationError("a cell vector is not zero while the system is not periodic along it")
    floats = (torch.float16, torch.float32, torch.float64)
    if dtype is not None and not isinstance(dtype, torch.dtype):
        raise BlockMapTypeError(f"dtype must be a torch.dtype, not {type(dtype).__name__}")
    if dtype is not None and dtype not in floats:
        raise ValidationError(f"dtype must be torch.float16, float32 or float64, not {dtype}")
    positions_t = torch.from_numpy(np.array(positions, copy=True, order="C"))
    cell_t = torch.from_numpy(np.array(cell, copy=True, order="C"))
    if dtype is not None:
        positions_t = positions_t.to(dtype)
        cell_t = cell_t.to(dtype)
    return mta.System(
        types=torch.from_numpy(np.array(types, dtype=np.int32, copy=True)),
        positions=positions_t,
        cell=cell_t,
        pbc=torch.from_numpy(np.array(pbc == 1, copy=True)),
    )
