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

import contextlib
import os
import stat
from typing import Any

import numpy as np

from .._blockmap import DatasetWriter, Labels, TensorBlock, TensorMap
from .._optional import progress as _progress
from ..exceptions import (
    BlockMapIOError,
    BlockMapTypeError,
    FormatError,
    MissingFileError,
    ValidationError,
)
from ._diskdataset import convert_diskdataset
from ._version import require_tested

#: the dataset sections of an options file that may name files
_SECTIONS = ("training_set", "validation_set", "test_set")


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
    BlockMapIOError
        If ``source``, a file its options name or ``dest`` is not a
        regular file (a FIFO, a directory, a device), or a file cannot be
        read or written.
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
    check_regular_file(source, "the source")
    directory = os.path.dirname(os.path.abspath(dest))
    if not os.path.isdir(directory):
        raise MissingFileError(f"the directory of '{dest}' does not exist")
    if source.endswith(".zip"):
        _check_dests([dest], overwrite)
        # written once, the atom counts derived as it goes: a kill at any
        # moment leaves dest as it was, or complete, and nothing beside it
        convert_diskdataset(
            source, dest, target=None, progress=progress, require_system=True, overwrite=overwrite
        )
        return [dest]
    if not source.endswith((".yaml", ".yml")):
        raise FormatError(
            f"'{source}' is neither a DiskDataset zip (.zip) nor an options file (.yaml)"
        )
    sections = _options_sections(source)
    paths = [section_dest(dest, section) for section, _ in sections]
    _check_dests(paths, overwrite)
    # every section written before any is put in place: a failure in any
    # of them leaves every path as it was (each writer builds its file
    # unnamed beside its path, and puts it in place when it is closed)
    with contextlib.ExitStack() as stack:
        writers = [stack.enter_context(DatasetWriter(path, overwrite=overwrite)) for path in paths]
        for writer, (_, config) in zip(writers, sections, strict=True):
            _from_readers(config, writer, progress)
    return paths


def _check_dests(paths: list[str], overwrite: bool) -> None:
    """Refuse destinations that exist (unless ``overwrite``) or that are
    not regular files (the dataset writer would open a FIFO and wait)."""
    for path in paths:
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError as error:
            raise BlockMapIOError(f"cannot write '{path}': {error.strerror}") from None
        if not stat.S_ISREG(mode):
            raise BlockMapIOError(
                f"cannot write '{path}': it is not a regular file but {_kind(mode)}"
            )
        if not overwrite:
            raise ValidationError(
                f"'{path}' exists: remove it, or convert with overwrite=True "
                "(`--overwrite` on the command line)"
            )


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "of another kind"


def open_regular_file(path: str, what: str) -> int:
    """A descriptor of the regular file ``path``, opened without blocking
    (a plain open of a FIFO without a writer waits forever) and refused
    unless it is a regular file, as blockmap's own readers refuse them
    (docs/format.md, "Inputs that are not regular files")."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise MissingFileError(f"no such file: {what} '{path}'") from None
    except OSError as error:
        # a socket (ENXIO), a file without read permission...
        raise BlockMapIOError(f"cannot read {what} '{path}': {error.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as error:
        os.close(fd)
        raise BlockMapIOError(f"cannot read {what} '{path}': {error.strerror}") from None
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise BlockMapIOError(
            f"cannot read {what} '{path}': it is not a regular file but {_kind(mode)}"
        )
    # reads of a regular file never wait: O_NONBLOCK may stay
    return fd


def check_regular_file(path: str, what: str) -> None:
    """Refuse ``path`` unless it is a regular file (:func:`open_regular_file`)."""
    os.close(open_regular_file(path, what))


def _options_sections(source: str) -> list[tuple[str, Any]]:
    """The sections of the options file that name files, expanded as
    metatrain expands them."""
    require_tested()
    from metatrain.utils.omegaconf import expand_dataset_config
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    # read from the descriptor checked to be a regular file's
    with open(open_regular_file(source, "the options file"), "rb") as file:
        try:
            options = OmegaConf.load(file)
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
        if str(read_from).lower().endswith(".zip"):
            raise ValidationError(
                f"'{source}': its {section} reads the DiskDataset zip '{read_from}': convert "
                f"the zip itself (`python -m blockmap.metatrain convert {read_from} "
                f"{section_dest('DEST.bmdata', section)}`), then point read_from at the "
                ".bmdata"
            )
        # every file metatrain's readers will open (the systems', each
        # target's and extra data's, their gradients'): regular files only
        for path in _read_from(config):
            check_regular_file(path, f"the {section}'s file")
        sections.append((section, config))
    return sections


def _read_from(config: Any) -> list[str]:
    """The distinct paths that the ``read_from`` keys of a dataset section
    name, interpolations resolved."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        resolved = OmegaConf.to_container(config, resolve=True)
    except OmegaConfBaseException as error:
        raise FormatError(f"the options cannot be resolved: {error}") from error
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "read_from" and isinstance(item, str):
                    if item not in found:
                        found.append(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(resolved)
    return found


def _from_readers(config: Any, writer: DatasetWriter, progress: bool, start: int = 0) -> None:
    """A dataset section read by metatrain's own readers, written by
    ``writer`` (its structures the entries ``start``, ``start + 1``...:
    :class:`blockmap.metatrain.Writer` appends)."""
    import torch
    from metatrain.utils.data import read_extra_data, read_systems, read_targets

    from .._systems import tensormaps_from_system
    from ..metatensor_torch import from_metatensor_torch

    read_from = config["systems"]["read_from"]
    reader = config["systems"]["reader"]
    try:
        what = f"reading the systems of '{read_from}' ({_reader(reader, read_from)})"
        with _phase(progress, what):
            systems = read_systems(filename=read_from, reader=reader)
        with _phase(progress, "reading the targets (metatrain's readers)"):
            targets, _ = read_targets(conf=config["targets"])
        extra: dict[str, Any] = {}
        if "extra_data" in config and config["extra_data"]:
            with _phase(progress, "reading the extra data (metatrain's readers)"):
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

    entries = _progress(list(range(len(systems))), progress, "systems")
    _describe(entries, f"writing '{os.path.basename(writer.path)}'")
    for index in entries:
        system = systems[index].to(dtype=torch.float64)
        maps = {
            "system" if name == "system" else f"system/{name}": tensor
            for name, tensor in tensormaps_from_system(system).items()
        }
        for name, values in fields.items():
            maps[name] = stored(values[index], start + index)
        writer.write(**maps, columns={"n_atoms": len(system)})


def _reader(reader: Any, read_from: str) -> str:
    """Which reader metatrain uses for ``read_from``, as the progress says it."""
    if reader:
        return f"metatrain's {reader} reader"
    suffix = os.path.splitext(read_from)[1]
    return "ASE, metatrain's reader of " + (suffix or "this file")


@contextlib.contextmanager
def _phase(progress: bool, what: str) -> Any:
    """With ``progress``: ``what`` on stderr when it starts, and its time
    when it ends (a phase that is one call, without a bar)."""
    import sys
    import time

    if not progress:
        yield
        return
    print(f"{what} ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    yield
    print(f"{what}: done in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


def _describe(bar: Any, label: str) -> None:
    """Label a tqdm bar (a plain list without progress: nothing)."""
    if hasattr(bar, "set_description"):
        bar.set_description(label)


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
