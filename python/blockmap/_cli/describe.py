"""What a file holds, as the dictionaries of ``blockmap info --json``
(the schema docs/cli.md documents) and their text. Maps are read mapped:
their labels and headers, never their values."""

from __future__ import annotations

import math
import tokenize
import zipfile
from typing import Any

import numpy as np

from ..exceptions import FormatError
from .identify import KINDS, ZIP_ERRORS, Identified

__all__ = ["KINDS", "SCHEMA"]

#: the version of the JSON schema of ``blockmap info --json``
SCHEMA = 1

#: what a pickle holds, in words
KINDS_OF_OBJECTS = {"tensormap": "a TensorMap", "block": "a TensorBlock", "labels": "Labels"}


def size_text(nbytes: int) -> str:
    """``nbytes`` for a reader: ``812.3 MB``."""
    value = float(nbytes)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def _dtype(array_dtype: Any) -> str:
    return str(np.dtype(array_dtype)) if isinstance(array_dtype, np.dtype) else str(array_dtype)


def block(block: Any, key: dict[str, int] | None = None) -> dict[str, Any]:
    """A block: its key, dtype, shape, labels' sizes and names, gradients."""
    found: dict[str, Any] = {}
    if key is not None:
        found["key"] = key
    found.update(
        dtype=_dtype(block.values.dtype),
        shape=list(block.shape),
        samples={"names": list(block.samples.names), "count": len(block.samples)},
        components=[{"names": list(c.names), "count": len(c)} for c in block.components],
        properties={"names": list(block.properties.names), "count": len(block.properties)},
        nbytes=int(block.nbytes),
        gradients={p: _gradient(g) for p, g in sorted(block.gradients())},
    )
    return found


def _gradient(gradient: Any) -> dict[str, Any]:
    found = block(gradient)
    del found["properties"]
    return found


def tensormap(tensor: Any, limit: int | None = None) -> dict[str, Any]:
    """A map: keys, names, info, every block (the first ``limit`` only,
    when given: ``blocks_listed`` says how many)."""
    keys = tensor.keys
    names = list(keys.names)
    values = keys.values
    count = len(keys)
    listed = count if limit is None else min(limit, count)
    blocks = [
        block(tensor.block_by_id(i), dict(zip(names, (int(v) for v in values[i]), strict=True)))
        for i in range(listed)
    ]
    gradients = sorted(tensor.block_by_id(0).gradients_list()) if count else []
    return {
        "keys": {"names": names, "count": count},
        "sample_names": list(tensor.sample_names),
        "component_names": list(tensor.component_names),
        "property_names": list(tensor.property_names),
        "gradients": gradients,
        "info": dict(tensor.info()),
        "nbytes": int(tensor.nbytes),
        "blocks": blocks,
        "blocks_listed": listed,
    }


def labels(found: Any) -> dict[str, Any]:
    return {"names": list(found.names), "count": len(found)}


def _column(values: np.ndarray) -> dict[str, Any]:
    def number(x: Any) -> int | float | None:
        if values.dtype.kind == "f":
            x = float(x)
            return x if math.isfinite(x) else None
        return int(x)

    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    return {
        "dtype": str(values.dtype),
        "min": number(finite.min()) if len(finite) else None,
        "max": number(finite.max()) if len(finite) else None,
    }


def dataset(found: Identified, limit: int | None) -> dict[str, Any]:
    """A dataset: version, identity, entries, fields, columns (min, max),
    commits, dead bytes, and the first entry's maps."""
    from .._blockmap import _inspect_dataset
    from ..dataset import Dataset

    figures = _inspect_dataset(found.path)
    ds = Dataset(found.path)
    columns = {}
    for name in ds.columns:
        columns[name] = _column(ds.column(name))
    fields = list(ds.fields)
    first: dict[str, Any] | None = None
    if len(ds):
        first = {f: tensormap(ds.field(f)[0], limit) for f in fields}
    return {
        "format_version": figures["version"],
        "id": figures["id"],
        "entries": figures["entries"],
        "committed": figures["committed"],
        "fields": fields,
        "single": bool(ds._single),
        "columns": columns,
        "commits": figures["commits"],
        "live_bytes": figures["live_bytes"],
        "dead_bytes": figures["dead_bytes"],
        "first_entry": first,
    }


def diskdataset(found: Identified, limit: int | None) -> dict[str, Any]:
    """A metatrain DiskDataset zip: samples and their fields, the first
    sample's maps (its system converted as blockmap converts it)."""
    from ..metatrain._diskdataset import open_zip

    archive = open_zip(found.path)
    samples: dict[int, list[str]] = {}
    for name in found.names:
        head, _, stem = name.partition("/")
        if head.isascii() and head.isdigit() and stem:
            samples.setdefault(int(head), []).append(stem)
    fields = sorted({stem for stems in samples.values() for stem in stems})
    first: dict[str, Any] | None = None
    if samples:
        index = min(samples)
        first = {}
        for stem in sorted(samples[index]):
            if stem.endswith(".mts"):
                first[stem[:-4]] = tensormap(archive.load(f"{index}/{stem}"), limit)
    return {
        "samples": len(samples),
        "fields": [f[:-4] if f.endswith(".mts") else f for f in fields],
        "atom_counts": "metadata/atom_counts.npy" in found.names,
        "first_sample": first,
    }


#: what numpy's NPY header parser raises on a hostile header (it parses
#: the header's text with tokenize and ast.literal_eval)
NPY_ERRORS = (
    ValueError,
    EOFError,
    SyntaxError,
    TypeError,
    OverflowError,
    KeyError,
    tokenize.TokenError,
)


def _npy_header(stream: Any) -> dict[str, Any]:
    from numpy.lib import format as npy

    version = npy.read_magic(stream)
    if version == (1, 0):
        shape, fortran, dtype = npy.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, fortran, dtype = npy.read_array_header_2_0(stream)
    else:
        raise ValueError(f"NPY version {version}")
    return {"shape": list(shape), "dtype": str(dtype), "fortran_order": bool(fortran)}


def npy(found: Identified) -> dict[str, Any]:
    try:
        with open(found.path, "rb") as stream:
            return _npy_header(stream)
    except NPY_ERRORS as error:
        raise FormatError(f"'{found.path}' is a damaged .npy file: {error}") from error


def npz(found: Identified) -> dict[str, Any]:
    arrays = {}
    try:
        with zipfile.ZipFile(found.path) as archive:
            for name in archive.namelist():
                with archive.open(name) as stream:
                    arrays[name[:-4]] = _npy_header(stream)
    except (*NPY_ERRORS, *ZIP_ERRORS) as e:
        raise FormatError(f"'{found.path}' is a damaged .npz archive: {e}") from e
    return {"arrays": arrays}


def of_object(obj: Any, limit: int | None) -> tuple[str, dict[str, Any]]:
    """The kind and the description of a TensorMap, TensorBlock or Labels."""
    from .._blockmap import Labels, TensorBlock, TensorMap

    if isinstance(obj, TensorMap):
        return "tensormap", tensormap(obj, limit)
    if isinstance(obj, TensorBlock):
        return "block", block(obj)
    if isinstance(obj, Labels):
        return "labels", labels(obj)
    raise FormatError(f"a {type(obj).__name__}, not a TensorMap, TensorBlock or Labels")


# -- text -------------------------------------------------------------------


def _names(names: list[str]) -> str:
    return "(" + ", ".join(names) + ")" if names else "()"


def _block_line(found: dict[str, Any]) -> str:
    key = found.get("key")
    head = "{" + ", ".join(f"{k}={v}" for k, v in key.items()) + "}  " if key else ""
    shape = "(" + ", ".join(str(n) for n in found["shape"]) + ")"
    line = f"{head}{found['dtype']} {shape}  {size_text(found['nbytes'])}"
    for parameter, gradient in found["gradients"].items():
        shape = "(" + ", ".join(str(n) for n in gradient["shape"]) + ")"
        line += f"  ∂{parameter} {shape}"
    return line


def tensormap_text(found: dict[str, Any], indent: str = "  ") -> list[str]:
    keys = found["keys"]
    components = found["component_names"]
    lines = [
        f"{indent}keys: {keys['count']} × {_names(keys['names'])}",
        f"{indent}samples: {_names(found['sample_names'])}",
        f"{indent}components: {_names(components) if components else 'none'}",
        f"{indent}properties: {_names(found['property_names'])}",
        f"{indent}gradients: {', '.join(found['gradients']) or 'none'}",
        f"{indent}arrays: {size_text(found['nbytes'])}",
    ]
    if found["info"]:
        shown = ", ".join(f"{k}={v!r}" for k, v in list(found["info"].items())[:8])
        more = len(found["info"]) - 8
        lines.append(f"{indent}info: {shown}" + (f", ... {more} more" if more > 0 else ""))
    lines.append(f"{indent}blocks:")
    for entry in found["blocks"]:
        lines.append(f"{indent}  {_block_line(entry)}")
    rest = keys["count"] - found["blocks_listed"]
    if rest > 0:
        lines.append(f"{indent}  ... {rest} more (--all lists every block)")
    return lines


def block_text(found: dict[str, Any], indent: str = "  ") -> list[str]:
    lines = [f"{indent}samples: {found['samples']['count']} × {_names(found['samples']['names'])}"]
    for c in found["components"]:
        lines.append(f"{indent}component: {c['count']} × {_names(c['names'])}")
    lines.append(
        f"{indent}properties: {found['properties']['count']} × "
        f"{_names(found['properties']['names'])}"
    )
    lines.append(f"{indent}values: {_block_line(found)}")
    return lines


def text(found: dict[str, Any]) -> list[str]:
    """The lines of ``blockmap info`` for the description ``found``."""
    kind = found["kind"]
    head = f"{found['path']}: {found['what']}, {size_text(found['file_bytes'])}"
    if kind == "pickle":
        head += f" (protocol {found['pickle']['protocol']})"
        if not found["pickle"]["blockmap"]:
            calls = ", ".join(found["pickle"]["calls"]) or "nothing"
            return [
                head,
                f"  not blockmap's: loading it would call {calls} (not loaded)",
            ]
        inner = found["pickle"]["holds"]
        return [head, f"  holds {inner['what']}", *_body(inner["kind"], inner["content"])]
    return [head, *_body(kind, found.get("content"))]


def _body(kind: str, content: Any) -> list[str]:
    if kind == "tensormap":
        return tensormap_text(content)
    if kind == "block":
        return block_text(content)
    if kind == "labels":
        return [f"  {content['count']} entries × {_names(content['names'])}"]
    if kind == "npy":
        return [f"  {content['dtype']} {tuple(content['shape'])}"]
    if kind == "npz":
        return [
            f"  {name}: {a['dtype']} {tuple(a['shape'])}" for name, a in content["arrays"].items()
        ]
    if kind == "dataset":
        return _dataset_text(content)
    if kind == "diskdataset":
        lines = [
            f"  samples: {content['samples']}",
            f"  fields: {', '.join(content['fields'])}",
        ]
        for name, first in (content["first_sample"] or {}).items():
            lines.append(f"  first sample, {name}:")
            lines.extend(tensormap_text(first, "    "))
        return lines
    if kind == "zip":
        return [f"  {len(content['names'])} members, none of which blockmap reads as a map"]
    return []


def _dataset_text(content: dict[str, Any]) -> list[str]:
    lines = [
        f"  format version {content['format_version']}, identity {content['id']}",
        f"  entries: {content['entries']}"
        + ("" if content["committed"] else " (recovered: the last write was not committed)"),
        f"  fields: {', '.join(content['fields'])}"
        + (" (single maps)" if content["single"] else ""),
        f"  commits: {content['commits']}",
        f"  dead bytes: {size_text(content['dead_bytes'])} "
        f"(live {size_text(content['live_bytes'])})",
    ]
    if content["columns"]:
        lines.append("  columns:")
        for name, column in content["columns"].items():
            lines.append(f"    {name}: {column['dtype']}, min {column['min']}, max {column['max']}")
    else:
        lines.append("  columns: none")
    for name, first in (content["first_entry"] or {}).items():
        lines.append(f"  entry 0, {name}:")
        lines.extend(tensormap_text(first, "    "))
    return lines
