"""metatrain's ``DiskDataset`` zip read into a blockmap dataset: the
conversion behind :meth:`blockmap.Dataset.from_diskdataset` and the zip
path of :func:`blockmap.metatrain.convert`.

A ``DiskDataset`` zip holds one folder per sample, ``<index>/``, whose
members are its fields: ``<name>.mts`` (an ``.mts`` archive wrapped in an
NPY array of bytes, as metatrain writes it) and ``system.mta`` (metatomic's
zip of the system, converted by :func:`blockmap._systems.tensormaps_from_mta`),
with metatrain's own index of atom counts, ``metadata/atom_counts.npy``.
Everything is read with blockmap's bounded zip reader; torch, metatrain and
metatomic are not imported.
"""

from __future__ import annotations

import os
from typing import Any

from .._blockmap import DatasetWriter, TensorMap, _ForeignZip
from .._optional import progress as _progress
from ..exceptions import BlockMapTypeError, FormatError, ValidationError

__all__ = ["convert_diskdataset", "open_zip"]


def convert_diskdataset(
    zip_path: str | os.PathLike[str],
    path: str | os.PathLike[str],
    *,
    target: str | list[str] | None,
    progress: bool,
    require_system: bool = False,
    overwrite: bool = False,
) -> None:
    """The conversion of :meth:`blockmap.Dataset.from_diskdataset` (its
    docstring says what it does), written once to ``path``: with
    ``require_system`` (:func:`blockmap.metatrain.convert`), a zip without
    systems is refused before anything is written."""
    archive = open_zip(zip_path)
    shown = os.fspath(zip_path)
    samples: dict[int, dict[str, str]] = {}
    others = []
    for name in archive.names():
        parts = name.split("/")
        head, stem = (parts[0], parts[1]) if len(parts) == 2 else ("", "")
        # metatrain writes str(index): ASCII digits ("²".isdigit() too,
        # and int() refuses it), no leading zero ("00" would be 0 again)
        index = head.isascii() and head.isdigit() and (head == "0" or head[0] != "0")
        if index and stem == "system.mta":
            field = "system"
        elif index and stem.endswith(".mts") and len(stem) > 4:
            field = stem[:-4]
        else:
            if name != "metadata/atom_counts.npy" and not name.endswith("/"):
                others.append(name)
            continue
        # one name twice: blockmap's zip reader refused the zip already
        samples.setdefault(int(head), {})[field] = name
    if not samples:
        raise FormatError(
            f"'{shown}' holds no '<index>/<name>.mts' or '<index>/system.mta' member: "
            "not a DiskDataset"
        )
    if others:
        raise FormatError(
            f"'{shown}' holds members that are not DiskDataset fields, which would be "
            f"left out: {others[:5]}{' ...' if len(others) > 5 else ''}"
        )
    first = min(samples)
    fields = list(samples[first])
    for index in sorted(samples):
        if set(samples[index]) != set(fields):
            missing = sorted(set(fields) - set(samples[index]))
            extra = sorted(set(samples[index]) - set(fields))
            raise FormatError(
                f"sample {index} of '{shown}' does not hold the fields of sample "
                f"{first} ({fields}): missing {missing}, extra {extra}"
            )
    single = isinstance(target, str)
    if target is not None:
        if not single and not (
            isinstance(target, list) and all(isinstance(t, str) for t in target)
        ):
            raise BlockMapTypeError(
                f"target must be a field name or a list of them, not {type(target).__name__}"
            )
        wanted = [target] if single else list(target)  # type: ignore[list-item]
        if not wanted:
            raise ValidationError(
                f"target=[] keeps no field: the DiskDataset's samples hold {fields}"
            )
        absent = [name for name in wanted if name not in fields]
        if absent:
            raise ValidationError(
                f"the DiskDataset's samples hold the fields {fields}, not {absent}"
            )
        fields = wanted
    if require_system and "system" not in fields:
        raise FormatError(
            f"'{shown}' holds no systems ('<index>/system.mta'): not a dataset metatrain "
            "trains from"
        )
    from_mta = None
    if "system" in fields:
        # imported only when a zip holds systems
        from .._systems import tensormaps_from_mta as from_mta

    def read(field: str, member: str) -> dict[str, TensorMap]:
        """The maps of one member, by field name."""
        if not member.endswith("/system.mta"):
            return {field: archive.load(member)}
        try:
            maps = from_mta(archive.raw(member))  # type: ignore[misc]
        except FormatError as error:
            raise FormatError(f"member '{member}' of '{shown}': {error}") from error
        return {name if name == "system" else f"system/{name}": m for name, m in maps.items()}

    first_names: list[str] | None = None
    with DatasetWriter(path, overwrite=overwrite) as writer:
        entries = _progress(sorted(samples), progress, "samples")
        if hasattr(entries, "set_description"):
            entries.set_description(
                f"converting '{os.path.basename(shown)}' into '{os.path.basename(os.fspath(path))}'"
            )
        for index in entries:
            members = samples[index]
            entry: dict[str, TensorMap] = {}
            for name in fields:
                entry.update(read(name, members[name]))
            if first_names is None:
                first_names = list(entry)
            elif set(entry) != set(first_names):
                # systems of one sample with other neighbor lists or data
                raise FormatError(
                    f"sample {index} of '{shown}' does not hold the fields of sample "
                    f"{first} ({first_names}): it holds {list(entry)}"
                )
            # the atom count of each system (its positions block, first in
            # the map tensormaps_from_mta makes), as the column metatrain's
            # atom-count sampler reads (metatrain keeps them apart, in
            # metadata/atom_counts.npy)
            columns = {"n_atoms": len(entry["system"].block(0))} if "system" in entry else {}
            if single and len(entry) == 1:
                writer.write(*entry.values(), columns=columns)
            else:
                writer.write(**entry, columns=columns)


def open_zip(path: Any) -> Any:
    """The zip at ``path``, read by blockmap's bounded reader."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise BlockMapTypeError(f"the zip's path must be a path, not {type(path).__name__}")
    try:
        return _ForeignZip(os.fsdecode(path))
    except FormatError as error:
        raise FormatError(f"not a DiskDataset zip: {error}") from error
