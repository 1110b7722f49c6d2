"""The commands: ``info``, ``verify``, ``show``, ``upgrade``, ``compact``.
Each takes the parsed arguments and returns the exit status; errors are
raised (``__init__.main`` prints them in one line)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np

from ..exceptions import BlockMapError, BlockMapIOError, FormatError, ValidationError
from . import describe, pickles
from .identify import ZIP_ERRORS, Identified, identify

#: blocks listed by ``info`` and summarised by ``show`` unless ``--all``
LISTED = 20


class UsageError(BlockMapError, ValueError):
    """A command line that asks for something the file cannot give (exit
    status 2)."""


def _out(line: str = "") -> None:
    sys.stdout.write(line + "\n")


# -- info ------------------------------------------------------------------


def _pickled(found: Identified, limit: int | None) -> dict[str, Any]:
    walked = pickles.walk(found.path, found.size)
    content: dict[str, Any] = {
        "protocol": walked.protocol,
        "calls": [f"{m}.{n}" for m, n in walked.calls],
        "blockmap": walked.blockmap,
        "holds": None,
    }
    if walked.out_of_band:
        raise FormatError(
            f"'{found.path}' is a pickle whose data was sent out of band: the file does "
            "not hold its buffers"
        )
    if walked.blockmap:
        kind, inner = describe.of_object(pickles.load(found.path, found.size), limit)
        content["holds"] = {"kind": kind, "what": describe.KINDS_OF_OBJECTS[kind], "content": inner}
    return content


def inspect(path: str, limit: int | None) -> dict[str, Any]:
    """The description of the file at ``path`` (``info --json``)."""
    import blockmap

    found = identify(path)
    kind = found.kind
    content: Any
    if kind == "tensormap":
        content = describe.tensormap(blockmap.load(path, mmap=True), limit)
    elif kind == "block":
        content = describe.block(blockmap.load_block(path, mmap=True))
    elif kind == "npy":
        try:
            content = describe.labels(blockmap.load_labels(path))
            kind = "labels"
        except (FormatError, ValidationError):
            content = describe.npy(found)
    elif kind == "dataset":
        content = describe.dataset(found, limit)
    elif kind == "diskdataset":
        content = describe.diskdataset(found, limit)
    elif kind == "npz":
        content = describe.npz(found)
    elif kind == "zip":
        content = {"names": found.names[:1000], "members": len(found.names)}
    else:  # pickle
        content = None
    described: dict[str, Any] = {
        "schema": describe.SCHEMA,
        "path": path,
        "kind": kind,
        "what": describe.KINDS[kind],
        "file_bytes": found.size,
    }
    if kind == "pickle":
        described["pickle"] = _pickled(found, limit)
    else:
        described["content"] = content
    return described


def info(args: Any) -> int:
    found = inspect(args.file, None if args.all or args.json else LISTED)
    if args.json:
        _out(json.dumps(found, indent=2))
    else:
        for line in describe.text(found):
            _out(line)
    return 0


# -- verify ----------------------------------------------------------------


def _verify(found: Identified) -> str:
    """Check the file whole; what it is when it passes, an error when not."""
    import zipfile

    import blockmap

    kind = found.kind
    if kind in ("tensormap", "block", "npy", "dataset"):
        if kind == "npy":
            try:
                blockmap.load_labels(found.path)
            except (FormatError, ValidationError):
                describe.npy(found)
                try:
                    np.load(found.path, mmap_mode="r", allow_pickle=False)
                except (*describe.NPY_ERRORS, OSError) as error:
                    raise FormatError(f"'{found.path}' is a damaged .npy file: {error}") from None
                return "a NumPy .npy array, its header valid (NPY files hold no checksum)"
        blockmap.verify(found.path)
        if kind == "dataset":
            figures = blockmap._blockmap._inspect_dataset(found.path)
            return (
                f"a blockmap dataset of format version {figures['version']}, "
                f"{figures['entries']} entries, every checksum and structure checked"
            )
        return f"{describe.KINDS['labels' if kind == 'npy' else kind]}, every CRC32 checked"
    if kind == "pickle":
        walked = pickles.walk(found.path, found.size)
        if not walked.blockmap:
            calls = ", ".join(walked.foreign) or "nothing"
            raise FormatError(
                f"'{found.path}' is not a pickle of blockmap's: it would call {calls}"
            )
        if walked.out_of_band:
            raise FormatError(f"'{found.path}' refers to out-of-band buffers it does not hold")
        pickles.load(found.path, found.size)
        return "a pickle of blockmap's, loaded and validated by its reconstructor"
    if kind == "diskdataset":
        from ..metatrain._diskdataset import open_zip

        archive = open_zip(found.path)
        for name in archive.names():
            if name.endswith(".mts"):
                archive.load(name)
            elif not name.endswith("/"):
                archive.raw(name)
        return "a metatrain DiskDataset zip, every member's CRC32 checked and every map loaded"
    if kind in ("npz", "zip"):
        try:
            with zipfile.ZipFile(found.path) as archive:
                bad = archive.testzip()
        except ZIP_ERRORS as error:
            raise FormatError(f"'{found.path}' is a damaged zip archive: {error}") from error
        if bad is not None:
            raise FormatError(f"'{found.path}': the member {bad!r} does not match its CRC32")
        if kind == "npz":
            describe.npz(found)
        return f"{describe.KINDS[kind]}, every member's CRC32 checked"
    raise AssertionError(kind)


def verify(args: Any) -> int:
    path = args.file
    try:
        found = identify(path)
        what = _verify(found)
    except (BlockMapIOError, UsageError):
        raise
    except BlockMapError as error:
        # what the file holds broke a rule: the problems, one a line
        lines = str(error).splitlines() or [type(error).__name__]
        if args.json:
            _out(
                json.dumps(
                    {
                        "schema": describe.SCHEMA,
                        "path": path,
                        "ok": False,
                        "problems": [line.strip() for line in lines],
                    }
                )
            )
        else:
            for line in lines:
                _out(line.strip() if line.startswith("  ") else line)
        return 1
    if args.json:
        _out(
            json.dumps(
                {
                    "schema": describe.SCHEMA,
                    "path": path,
                    "ok": True,
                    "kind": found.kind,
                    "problems": [],
                }
            )
        )
    else:
        _out(f"{path}: ok, {what}")
    return 0


# -- show ------------------------------------------------------------------


def selection(text: str) -> Any:
    """``--keys center_type=1,o3_lambda=0`` as a one-entry Labels."""
    from .._blockmap import Labels

    names, values = [], []
    for part in text.split(","):
        name, equal, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not equal or not name:
            raise UsageError(f"--keys takes name=value pairs separated by commas, not {text!r}")
        try:
            values.append(int(value))
        except ValueError:
            raise UsageError(
                f"--keys: the value of {name!r} is not an integer: {value!r}"
            ) from None
        names.append(name)
    try:
        return Labels(names, np.array([values], dtype=np.int32))
    except (ValidationError, OverflowError) as error:
        raise UsageError(f"--keys {text!r}: {error}") from error


def summary(values: Any) -> str:
    """A block's values in one line: shape, dtype, min/max/mean, the first few."""
    array = np.asarray(values)
    text = f"{array.dtype} {tuple(array.shape)}"
    if array.size == 0:
        return text + ", empty"
    flat = array.reshape(-1)
    if array.dtype.kind in "iufb":
        numbers = flat.astype(np.float64) if array.dtype.kind == "b" else flat
        with np.errstate(all="ignore"):
            text += (
                f", min {numbers.min():.6g}, max {numbers.max():.6g}, "
                f"mean {numbers.mean(dtype=np.float64):.6g}"
            )
    first = np.array2string(flat[:6], precision=5, separator=", ", threshold=6)
    return text + f", first {first}" + (" ..." if flat.size > 6 else "")


def _show_tensor(tensor: Any, limit: int | None) -> None:
    _out(str(tensor))
    names = list(tensor.keys.names)
    count = len(tensor.keys)
    listed = count if limit is None else min(limit, count)
    values = tensor.keys.values
    for i in range(listed):
        block = tensor.block_by_id(i)
        head = ", ".join(f"{n}={int(v)}" for n, v in zip(names, values[i], strict=True))
        _out(f"block {i} ({head}): {summary(block.values)}")
        for parameter, gradient in block.gradients():
            _out(f"  gradient {parameter}: {summary(gradient.values)}")
    if listed < count:
        _out(f"... {count - listed} more blocks (--keys selects blocks, --all shows every one)")


def _show_block(block: Any) -> None:
    _out(str(block))
    _out(f"values: {summary(block.values)}")
    for parameter, gradient in block.gradients():
        _out(f"gradient {parameter}: {summary(gradient.values)}")


def show(args: Any) -> int:
    import blockmap

    found = identify(args.file)
    keys = selection(args.keys) if args.keys else None
    limit = None if args.all or keys is not None else LISTED
    kind = found.kind
    if args.index is not None and kind not in ("dataset", "diskdataset"):
        raise UsageError(f"'{args.file}' holds one object ({found.words}): it takes no INDEX")
    if keys is not None and kind not in ("tensormap", "dataset", "diskdataset", "pickle"):
        raise UsageError(
            f"--keys selects the blocks of a TensorMap, and '{args.file}' is {found.words}"
        )
    if kind == "tensormap":
        _show_tensor(blockmap.load(args.file, mmap=True, keys=keys), limit)
    elif kind == "block":
        _show_block(blockmap.load_block(args.file, mmap=True))
    elif kind == "npy":
        try:
            _out(str(blockmap.load_labels(args.file)))
        except (FormatError, ValidationError):
            raise UsageError(
                f"'{args.file}' is a NumPy .npy array, not blockmap's Labels: "
                "`blockmap info` describes it"
            ) from None
    elif kind == "dataset":
        ds = blockmap.Dataset(args.file)
        index = _index(args.index, len(ds), args.file)
        for name in ds.fields:
            field = ds.field(name)
            if not ds._single:
                _out(f"entry {index}, field {name}:")
            tensor = field.load(index, keys=keys) if keys is not None else field[index]
            _show_tensor(tensor, limit)
    elif kind == "diskdataset":
        _show_disk(found, args.index, keys, limit)
    elif kind == "pickle":
        walked = pickles.walk(found.path, found.size)
        if not walked.blockmap:
            calls = ", ".join(walked.foreign) or "nothing"
            raise FormatError(
                f"'{args.file}' is not a pickle of blockmap's: loading it would call {calls}"
            )
        obj = pickles.load(found.path, found.size)
        if isinstance(obj, blockmap.TensorMap):
            if keys is not None:
                # the pickle is read whole already: the selection from memory
                obj = blockmap.load_buffer(blockmap.save_buffer(obj), keys=keys)
            _show_tensor(obj, limit)
        elif keys is not None:
            raise UsageError(
                f"--keys selects the blocks of a TensorMap, not of {type(obj).__name__}"
            )
        elif isinstance(obj, blockmap.TensorBlock):
            _show_block(obj)
        else:
            _out(str(obj))
    else:
        raise UsageError(
            f"'{args.file}' is {found.words}: `blockmap show` prints blockmap's maps, "
            "blocks and labels (`blockmap info` describes it)"
        )
    return 0


def _index(index: str | None, count: int, path: str) -> int:
    if index is None:
        index = "0"
    try:
        position = int(index)
    except ValueError:
        raise UsageError(f"INDEX must be an integer, not {index!r}") from None
    if not -count <= position < count:
        raise UsageError(f"'{path}' holds {count} entries: there is no entry {position}")
    return position % count


def _show_disk(found: Identified, index: str | None, keys: Any, limit: int | None) -> None:
    from ..metatrain._diskdataset import open_zip

    archive = open_zip(found.path)
    samples = sorted({int(n.split("/")[0]) for n in found.names if n.split("/")[0].isdigit()})
    position = samples[_index(index, len(samples), found.path)]
    for name in archive.names():
        head, _, stem = name.partition("/")
        if head == str(position) and stem.endswith(".mts"):
            _out(f"sample {position}, {stem[:-4]}:")
            tensor = archive.load(name)
            if keys is not None:
                import blockmap

                tensor = blockmap.load_buffer(blockmap.save_buffer(tensor), keys=keys)
            _show_tensor(tensor, limit)


# -- upgrade, compact -------------------------------------------------------


def _figures(path: str) -> dict[str, Any]:
    from .._blockmap import _inspect_dataset

    return dict(_inspect_dataset(path))


def _rewrite(what: str, rewrite: Any, src: str, dst: str, overwrite: bool) -> int:
    found = identify(src)
    if found.kind != "dataset":
        raise UsageError(f"`blockmap {what}` rewrites a dataset, and '{src}' is {found.words}")
    if os.path.lexists(dst) and not overwrite:
        raise UsageError(f"'{dst}' exists: give --overwrite to replace it")
    before = _figures(src)
    rewrite(src, dst, overwrite=overwrite)
    after = _figures(dst)
    _out(
        f"{src} (format version {before['version']}, {before['entries']} entries, "
        f"{describe.size_text(before['file_bytes'])}, dead "
        f"{describe.size_text(before['dead_bytes'])}) -> {dst} (format version "
        f"{after['version']}, {after['entries']} entries, "
        f"{describe.size_text(after['file_bytes'])}, dead "
        f"{describe.size_text(after['dead_bytes'])})"
    )
    return 0


def upgrade(args: Any) -> int:
    from ..dataset import Dataset

    return _rewrite("upgrade", Dataset.upgrade, args.src, args.dst, args.overwrite)


def compaction() -> Any:
    """What ``blockmap compact`` calls: ``Dataset.compact(src, dst)``, which
    writes every entry the last commit lists into a new file of the current
    version and nothing else (no dead bytes)."""
    from ..dataset import Dataset

    return Dataset.compact


def compact(args: Any) -> int:
    if os.path.abspath(args.src) == os.path.abspath(args.dst):
        raise UsageError("compact writes a new file: give DST other than SRC")
    return _rewrite("compact", compaction(), args.src, args.dst, args.overwrite)
