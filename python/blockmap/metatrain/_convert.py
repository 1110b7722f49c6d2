"""``convert(source, dest)``: a metatrain dataset into a blockmap dataset
(``.bmdata``) that :class:`~._dataset.MetatrainDataset` serves.

SOURCE is metatrain's ``DiskDataset`` zip, or an options file whose
datasets metatrain's own readers read (``read_systems``, ``read_targets``,
``read_extra_data`` after ``expand_dataset_config``). Each entry holds the
field ``system`` (docs/format.md, "Systems as TensorMaps"), with its
neighbour lists and extra data as ``system/pairs/<i>`` and
``system/data/<name>``, one field per target and extra data, and the
column ``n_atoms``. Targets are stored as ``DiskDatasetWriter`` would
write them: float64, the ``system`` sample column holding the entry
number, position gradients with the samples ``sample, atom`` (metatrain's
ASE reader gives ``sample, system, atom``, which its ``DiskDataset``
refuses).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .._blockmap import DatasetWriter, Labels, TensorBlock, TensorMap
from ..dataset import Dataset, _progress
from ..exceptions import (
    BlockMapTypeError,
    FormatError,
    MissingFileError,
    ValidationError,
)

#: the dataset sections of an options file that may name files
_SECTIONS = ("training_set", "validation_set", "test_set")


def require_metatrain() -> None:
    """Raise a ``ModuleNotFoundError`` saying how to install metatrain
    when it is not installed."""
    import importlib.util

    if importlib.util.find_spec("metatrain") is None:
        raise ModuleNotFoundError(
            "blockmap.metatrain needs metatrain, which is not installed: "
            "`pip install blockmap[metatrain]`",
            name="metatrain",
        )


def _path(value: Any, what: str) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise BlockMapTypeError(f"{what} must be a path, not {type(value).__name__}")
    return os.fspath(value)


def section_dest(dest: str, section: str) -> str:
    """Where the options file's ``section`` is written: ``dest`` for the
    training set, ``<dest stem>.validation.bmdata`` and
    ``<dest stem>.test.bmdata`` for the others."""
    if section == "training_set":
        return dest
    stem = dest[: -len(".bmdata")] if dest.endswith(".bmdata") else dest
    return f"{stem}.{section.split('_')[0]}.bmdata"


def convert(
    source: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    progress: bool = False,
    overwrite: bool = False,
) -> list[str]:
    """Convert a metatrain dataset (module docstring) into ``dest``.

    Parameters
    ----------
    source : str or os.PathLike
        A ``DiskDataset`` zip (``.zip``), or an options file (``.yaml`` /
        ``.yml``): its ``training_set`` is written to ``dest``, its
        ``validation_set`` and ``test_set``, when they name files, next to
        it (``<dest stem>.validation.bmdata``, ``<dest stem>.test.bmdata``).
    dest : str or os.PathLike
        The new dataset (``.bmdata``).
    progress : bool, optional
        Show tqdm progress bars.
    overwrite : bool, optional
        Replace ``dest`` if it exists (refused otherwise).

    Returns
    -------
    list of str
        The datasets written.

    Raises
    ------
    MissingFileError
        If ``source`` (or a file its options name) does not exist.
    FormatError
        If ``source`` is not a DiskDataset zip or an options file metatrain reads.
    ValidationError
        If an options file names no systems, or ``dest`` exists and
        ``overwrite`` is false, or ``dest`` does not end in ``.bmdata``.
    """
    source = _path(source, "source")
    dest = _path(dest, "dest")
    if not dest.endswith(".bmdata"):
        raise ValidationError(
            f"the destination '{dest}' must end in '.bmdata' (metatrain serves a "
            "dataset with blockmap by that suffix)"
        )
    if not os.path.exists(source):
        raise MissingFileError(f"no such file: '{source}'")
    directory = os.path.dirname(os.path.abspath(dest))
    if not os.path.isdir(directory):
        raise MissingFileError(f"the directory of '{dest}' does not exist")
    if source.endswith(".zip"):
        jobs = [(dest, lambda path: _from_zip(source, path, progress))]
    elif source.endswith((".yaml", ".yml")):
        jobs = [
            (section_dest(dest, section), _section_writer(config, progress))
            for section, config in _options_sections(source)
        ]
    else:
        raise FormatError(
            f"'{source}' is neither a DiskDataset zip (.zip) nor an options file (.yaml)"
        )
    if not overwrite:
        existing = [path for path, _ in jobs if os.path.exists(path)]
        if existing:
            raise ValidationError(
                f"'{existing[0]}' exists: remove it, or convert with overwrite=True "
                "(`--overwrite` on the command line)"
            )
    written: list[str] = []
    try:
        for path, write in jobs:
            write(path)
            written.append(path)
    except BaseException:
        # each file is written to a temporary name and renamed once
        # complete: remove the ones this call completed, keep none half
        for path in written:
            os.remove(path)
        raise
    return written


def _from_zip(source: str, dest: str, progress: bool) -> None:
    """A DiskDataset zip, through :meth:`Dataset.from_diskdataset`, with
    the ``n_atoms`` column added."""
    # hidden, beside dest; removed as soon as it is open (its maps stay
    # readable), so that a process killed while writing dest leaves it
    # behind only during from_diskdataset, whose own writer leaves nothing
    directory, name = os.path.split(dest)
    temporary = os.path.join(directory, f".{name}.from-zip.tmp")
    try:
        converted = Dataset.from_diskdataset(source, temporary, progress=progress)
        if os.name == "posix":
            os.remove(temporary)
        if converted._single or "system" not in converted.fields:
            raise FormatError(
                f"'{source}' holds no systems ('<index>/system.mta'): not a dataset "
                "metatrain trains from"
            )
        fields = list(converted.fields)
        system = fields.index("system")
        with DatasetWriter(dest) as writer:
            for index in _progress(list(range(len(converted))), progress, "entries"):
                maps = {name: converted._get(index, field=i) for i, name in enumerate(fields)}
                n_atoms = len(converted._get(index, field=system).block(0).samples)
                writer.write(**maps, columns={"n_atoms": n_atoms})
        del converted
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def _options_sections(source: str) -> list[tuple[str, Any]]:
    """The sections of the options file that name files, expanded as
    metatrain expands them."""
    require_metatrain()
    from metatrain.utils.omegaconf import expand_dataset_config
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        options = OmegaConf.load(source)
    except Exception as error:  # yaml's and omegaconf's errors
        raise FormatError(f"'{source}' is not an options file: {error}") from error
    if not isinstance(options, DictConfig) or options.get("training_set") is None:
        raise ValidationError(
            f"the options file '{source}' has no training_set: nothing to convert"
        )
    sections = []
    for section in _SECTIONS:
        value = options.get(section)
        if section == "training_set" and isinstance(value, (int, float)):
            raise ValidationError(f"'{source}': its training_set names no files")
        if value is None or isinstance(value, (int, float)):
            continue  # a fraction of the training set
        if isinstance(value, DictConfig) and "systems" not in value:
            raise ValidationError(f"'{source}': its {section} names no systems")
        try:
            expanded = expand_dataset_config(value)
        except (OmegaConfBaseException, ValueError, TypeError) as error:
            raise FormatError(f"'{source}': metatrain refuses its {section}: {error}") from error
        if len(expanded) != 1:
            raise ValidationError(
                f"'{source}': its {section} lists {len(expanded)} datasets; convert them one "
                "at a time (an options file per dataset)"
            )
        config = expanded[0]
        read_from = config["systems"]["read_from"] if "systems" in config else None
        if not read_from:
            raise ValidationError(f"'{source}': its {section} names no systems (read_from)")
        sections.append((section, config))
    return sections


def _section_writer(config: Any, progress: bool) -> Any:
    def write(dest: str) -> None:
        _from_readers(config, dest, progress)

    return write


def _from_readers(config: Any, dest: str, progress: bool) -> None:
    """A dataset section read by metatrain's own readers."""
    import torch
    from metatrain.utils.data import read_extra_data, read_systems, read_targets

    from .._systems import tensormaps_from_system
    from ..metatensor_torch import from_metatensor_torch

    read_from = config["systems"]["read_from"]
    if not os.path.exists(read_from):
        raise MissingFileError(f"the systems file '{read_from}' does not exist")
    try:
        systems = read_systems(filename=read_from, reader=config["systems"]["reader"])
        targets, _ = read_targets(conf=config["targets"])
        extra: dict[str, Any] = {}
        if "extra_data" in config and config["extra_data"]:
            extra, _ = read_extra_data(conf=config["extra_data"])
    except FileNotFoundError as error:
        raise MissingFileError(f"metatrain's readers: {error}") from error
    except (ValueError, KeyError, TypeError) as error:
        raise FormatError(f"metatrain's readers refuse '{read_from}': {error}") from error
    fields = {**targets, **extra}
    for name, maps in fields.items():
        if len(maps) != len(systems):
            raise FormatError(
                f"'{read_from}': {len(systems)} systems but {len(maps)} maps of '{name}'"
            )

    def stored(tensor: Any, index: int) -> TensorMap:
        return _fixed(from_metatensor_torch(tensor.to(dtype=torch.float64)), index)

    with DatasetWriter(dest) as writer:
        for index in _progress(list(range(len(systems))), progress, "systems"):
            system = systems[index].to(dtype=torch.float64)
            maps = {
                "system" if name == "system" else f"system/{name}": tensor
                for name, tensor in tensormaps_from_system(system).items()
            }
            for name, values in fields.items():
                maps[name] = stored(values[index], index)
            writer.write(**maps, columns={"n_atoms": len(system)})


def _fixed(tensor: TensorMap, index: int) -> TensorMap:
    """``tensor`` (one system's map) as DiskDatasetWriter stores it: its
    ``system`` sample column set to ``index``, position gradients with the
    samples ``sample, atom``; numpy-backed."""
    tensor = tensor.to(arrays="numpy")
    blocks = []
    for block in tensor.blocks():
        names = list(block.samples.names)
        samples = np.array(block.samples.values, dtype=np.int32, copy=True)
        if "system" in names:
            samples[:, names.index("system")] = index
        new = TensorBlock(
            values=np.array(block.values, copy=True),
            samples=Labels(names, samples),
            components=block.components,
            properties=block.properties,
        )
        for parameter in block.gradients_list():
            gradient = block.gradient(parameter)
            g_names = list(gradient.samples.names)
            g_samples = np.asarray(gradient.samples.values)
            if g_names == ["sample", "system", "atom"]:
                g_names = ["sample", "atom"]
                g_samples = g_samples[:, [0, 2]]
            new.add_gradient(
                parameter,
                TensorBlock(
                    values=np.array(gradient.values, copy=True),
                    samples=Labels(g_names, np.ascontiguousarray(g_samples, dtype=np.int32)),
                    components=gradient.components,
                    properties=gradient.properties,
                ),
            )
        blocks.append(new)
    return TensorMap(tensor.keys, blocks)
