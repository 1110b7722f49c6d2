"""Neighbour lists computed once per structure, stored next to the dataset,
and reused by every later epoch and run that asks for the same options.

A store is a blockmap dataset of single maps, one per entry of the
dataset, each holding the neighbour list's block exactly as metatrain's
``_compute_single_neighbor_list`` returned it (samples ``first_atom,
second_atom, cell_shift_a/b/c`` in vesin's order, component ``xyz``,
property ``distance``, float64 values). Its file is
``<dataset>.neighbors-<cutoff>-<full|half>-<strict|loose>.bmdata`` and the
info of its first map names the dataset it was computed for (identity,
entry count, checksum), the options it was computed with (cutoff,
full_list, strict: a store renamed from other options is not used), the
code that computed it (metatrain and vesin versions) and a CRC32 of the
lists themselves (samples and values, checked
on every open: the dataset format does not check the CRCs of what it
reads): a store that does not match, or that is damaged or not a store, is
computed again and replaced (written to a temporary name, renamed once
complete; a second process writing it at the same time keeps its lists in
memory).
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from typing import Any

import numpy as np

# blockmap.Dataset, from the package: blockmap.dataset imports this package
from .. import Dataset
from .._blockmap import DatasetWriter, Labels, TensorMap
from ..exceptions import BlockMapError, BlockMapIOError, ValidationError
from ..metatensor_torch import _Converter, from_metatensor_torch
from ._version import require_tested

#: how many structures had their neighbour lists computed in this process
#: (tests count the computations with it)
computed = 0

_LOG = logging.getLogger(__name__)

#: the samples of a neighbour list
_SAMPLES = ("first_atom", "second_atom", "cell_shift_a", "cell_shift_b", "cell_shift_c")


def options_key(options: Any) -> tuple[float, bool, bool]:
    """What metatomic's ``NeighborListOptions`` compare: cutoff, full_list, strict."""
    return (float(options.cutoff), bool(options.full_list), bool(options.strict))


def store_path(dataset_path: str, key: tuple[float, bool, bool]) -> str:
    """The file of the store of ``dataset_path``'s lists with options ``key``."""
    cutoff, full_list, strict = key
    return (
        f"{dataset_path}.neighbors-{cutoff!r}-{'full' if full_list else 'half'}-"
        f"{'strict' if strict else 'loose'}.bmdata"
    )


def _engine() -> str:
    import metatrain
    import vesin

    return f"metatrain {metatrain.__version__}, vesin {vesin.__version__}"


def _identity(dataset: Any, options: Any) -> dict[str, str]:
    """What a store's lists depend on, recorded in its first map's info and
    checked when it is opened: the dataset (its identity, entry count and
    checksum), the code that computes them, and the options that change
    them (cutoff, full_list; strict too, as options compare by it). The
    file name says the options as well, but a file can be renamed."""
    data = dataset.data
    cutoff, full_list, strict = options_key(options)
    return {
        "dataset_id": str(data.id),
        "dataset_entries": str(len(data)),
        "dataset_checksum": str(data._checksum()),
        "engine": _engine(),
        "cutoff": repr(cutoff),
        "full_list": json.dumps(full_list),
        "strict": json.dumps(strict),
    }


class Store:
    """The stored neighbour lists of one dataset and one set of options."""

    #: the small labels a store keeps converted (its lists' components and
    #: properties, the same for every list, come first)
    LABELS_KEPT = 8

    def __init__(self, options: Any, maps: Any) -> None:
        self.options = options
        # a Dataset of single maps (or a list of maps, when the file could
        # not be written)
        self.maps = maps
        # made at the first block: it imports metatensor-torch
        self._converter: Any = None

    def block(self, index: int) -> Any:
        """Entry ``index``'s list, a metatensor-torch ``TensorBlock`` of
        new tensors (the stored arrays are read-only views of the file),
        converted as :func:`blockmap.metatensor_torch.to_metatensor_torch`
        converts it, with the components and properties converted once
        for the whole store."""
        if self._converter is None:
            self._converter = _Converter(most=self.LABELS_KEPT)
        return self._converter.block(self.maps[index].block(0))


def _digest(maps: Any) -> str:
    """The CRC32 of the lists (every entry's samples, then values), or
    ``""`` when an entry is not a neighbour list (a damaged or foreign
    file of the store's name)."""
    crc = 0
    for index in range(len(maps)):
        tensor = maps[index]
        block = tensor.block(0) if len(tensor) == 1 else None
        if (
            block is None
            or list(block.samples.names) != list(_SAMPLES)
            or [list(c.names) for c in block.components] != [["xyz"]]
            or list(block.properties.names) != ["distance"]
            or len(block.properties) != 1
            or block.values.shape[1:] != (3, 1)
            or block.values.dtype != np.float64
            or block.gradients_list()
        ):
            return ""
        crc = zlib.crc32(np.ascontiguousarray(block.samples.values, dtype=np.int32), crc)
        crc = zlib.crc32(np.ascontiguousarray(block.values), crc)
    return f"{crc:08x}"


def _open(path: str, identity: dict[str, str]) -> Dataset | str:
    """The store at ``path`` if it was computed for this dataset by this
    code and is intact; otherwise why it is not used (it is computed
    again)."""
    if not os.path.exists(path):
        return "there is no store yet"
    why = None
    try:
        stored = Dataset(path)
        if not stored._single:
            why = "it is a dataset of fields"
        elif len(stored) != int(identity["dataset_entries"]) or len(stored) == 0:
            why = f"it holds {len(stored)} entries"
        else:
            info = stored[0].info()
            differs = [name for name, value in identity.items() if info.get(name) != value]
            if differs:
                why = (
                    "it was computed for another dataset, with other options or by another "
                    f"metatrain / vesin ({', '.join(differs)} differ)"
                )
            elif not info.get("lists_crc32") or info.get("lists_crc32") != _digest(stored):
                why = "its lists are damaged"
    except BlockMapError as error:
        why = str(error)
    if why is not None:
        return f"the store there is not used: {why}"
    return stored


def received(dataset: Any, described: Any, maps: Any) -> Store:
    """The store of a pickled dataset (``dataset``, rebuilt from the file):
    options described as :func:`blockmap._systems.describe_options` gives
    them, and a reference to the store file (checked against the file by
    its own reconstructor) or the lists kept in memory, whose recorded
    identity must be this dataset's with these options (ValidationError
    otherwise)."""
    import metatomic.torch as mta

    from .._systems import neighbor_list_options

    if type(described) is not tuple or len(described) != 5:
        raise ValidationError(f"neighbour-list options described as {described!r}"[:200])
    options = neighbor_list_options(mta, *described)
    identity = _identity(dataset, options)
    count = len(dataset.data)
    if isinstance(maps, Dataset):
        whole = maps._single and len(maps) == count > 0
    elif type(maps) is list and all(isinstance(m, TensorMap) for m in maps):
        whole = len(maps) == count > 0
    else:
        raise ValidationError(f"neighbour lists held in a {type(maps).__name__}")
    info = maps[0].info() if whole else {}
    if not whole or any(info.get(name) != value for name, value in identity.items()):
        raise ValidationError(
            "neighbour lists that are not this dataset's with these options, as computed here"
        )
    if type(maps) is list and info.get("lists_crc32") != _digest(maps):
        raise ValidationError("neighbour lists that are damaged or not lists")
    return Store(options, maps)


def ensure(dataset: Any, options: Any) -> Store | None:
    """The store of ``dataset``'s lists with ``options``: opened if it
    exists and matches, computed (and written) otherwise; ``None`` when the
    dataset's systems hold these lists themselves."""
    if any(options == stored for stored in dataset.stored_lists):
        return None
    key = options_key(options)
    found = dataset.neighbors.get(key)
    if found is not None:
        return found  # type: ignore[no-any-return]
    path = store_path(dataset.path, key)
    identity = _identity(dataset, options)
    stored = _open(path, identity)
    if isinstance(stored, str):
        stored = _compute(dataset, options, path, identity, why=stored)
    else:
        _LOG.info(
            "neighbour lists (%s): reusing the store %s, computed for this dataset by %s",
            _described(options),
            path,
            identity["engine"],
        )
    found = Store(options, stored)
    dataset.neighbors[key] = found
    return found


def _described(options: Any) -> str:
    """The options of a list, as the messages say them."""
    cutoff, full_list, strict = options_key(options)
    return (
        f"cutoff {cutoff!r}, {'full' if full_list else 'half'} list, "
        f"{'strict' if strict else 'not strict'}"
    )


def _compute(dataset: Any, options: Any, path: str, identity: dict[str, str], why: str = "") -> Any:
    global computed
    require_tested()  # _compute_single_neighbor_list is metatrain's own
    import time

    from metatrain.utils import neighbor_lists
    from metatrain.utils.data.system_to_ase import system_to_ase

    count = len(dataset)
    _LOG.info(
        "neighbour lists (%s): computing them for the %d structures into %s (%s)",
        _described(options),
        count,
        path,
        why or "asked for",
    )
    keys = Labels(["_"], np.zeros((1, 1), dtype=np.int32))
    maps = []
    start = time.perf_counter()
    # a line at each tenth: a long computation shows that it advances
    step = max(count // 10, 1)
    for index in range(count):
        if index and index % step == 0:
            _LOG.info(
                "neighbour lists: %d of %d structures (%.1f s)",
                index,
                count,
                time.perf_counter() - start,
            )
        system = dataset.system(index)
        block = neighbor_lists._compute_single_neighbor_list(system_to_ase(system), options)
        block = block.to(dtype=system.dtype)
        computed += 1
        maps.append(TensorMap(keys, [from_metatensor_torch(block).to(arrays="numpy")]))
    _LOG.info(
        "neighbour lists: %d structures computed in %.1f s", count, time.perf_counter() - start
    )
    if maps:
        for name, value in {**identity, "lists_crc32": _digest(maps)}.items():
            maps[0].set_info(name, value)
    try:
        if os.path.exists(path) and not os.path.isfile(path):
            # a FIFO (the dataset writer would open it and wait for a
            # writer), a directory...: left alone
            raise BlockMapIOError(f"'{path}' is not a regular file")
        with DatasetWriter(path, overwrite=True) as writer:
            for tensor in maps:
                writer.write(tensor)
    except (BlockMapError, OSError) as error:
        _LOG.warning(
            "the neighbour lists could not be stored in %s (%s): kept in memory", path, error
        )
        return maps
    # another process may have written a store of this name since (two
    # writers of a new file both succeed, the last rename wins): used only
    # if it holds these lists
    if not maps:
        return maps
    expected = maps[0].info()
    try:
        stored = Dataset(path)
        info = stored[0].info() if stored._single and len(stored) == len(maps) else {}
    except (BlockMapError, IndexError):
        info = {}
    if info != expected:
        _LOG.warning("the neighbour-list store %s was replaced meanwhile: kept in memory", path)
        return maps
    return stored
