"""metatrain (``mtt train`` / ``mtt eval``) on blockmap datasets.

- ``python -m blockmap.metatrain convert SOURCE DEST.bmdata`` (or
  :func:`convert`): a metatrain ``DiskDataset`` zip, or the datasets an
  options file names, into a blockmap dataset;
- ``python -m blockmap.metatrain train options.yaml [mtt train arguments]``
  and ``... eval model.pt options.yaml [...]`` (or :func:`main`): metatrain's
  own commands, unchanged except that a dataset whose ``read_from`` ends in
  ``.bmdata`` is served by blockmap, and its batches made by blockmap's
  batch path (docs/training.md);
- :class:`Writer` (``blockmap.metatrain.Writer(path, targets)``): add
  training structures (``ase.Atoms`` or metatomic systems) to a dataset,
  entry for entry as ``convert`` writes them (active learning).

:func:`install` puts the patches in place without running a command (for
code that calls metatrain's functions itself); importing this package
imports neither metatrain nor torch.
"""

from __future__ import annotations

import sys
from typing import Any

from ._convert import convert
from ._writer import Writer

__all__ = ["Writer", "convert", "install", "main", "uninstall"]

_USAGE = """usage: python -m blockmap.metatrain COMMAND ...

commands:
  convert SOURCE DEST.bmdata [--progress] [--overwrite]
        a metatrain DiskDataset zip, or the datasets of an options file
        (training_set, and validation_set / test_set when they name files),
        into a blockmap dataset
  train OPTIONS.yaml [mtt train arguments]
  eval MODEL.pt OPTIONS.yaml [mtt eval arguments]
        metatrain's own `mtt train` / `mtt eval`, with datasets whose
        read_from ends in .bmdata served by blockmap
"""


def install() -> None:
    """Patch metatrain (docs/training.md): ``.bmdata`` datasets served by
    blockmap, their batches made by blockmap. Idempotent.

    Raises
    ------
    ModuleNotFoundError
        If metatrain is not installed.
    ImportError
        If the metatrain installed is not one the patches were tested with
        (2026.4.x, ``blockmap.metatrain._version.SUPPORTED``): nothing is
        patched.
    """
    from ._version import require_tested

    require_tested()
    from ._patch import install as _install

    _install()


def uninstall() -> None:
    """Put metatrain's own functions back."""
    from ._patch import uninstall as _uninstall

    _uninstall()


def _convert_command(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m blockmap.metatrain convert",
        description="Convert a metatrain dataset into a blockmap dataset (.bmdata).",
    )
    parser.add_argument("source", help="a DiskDataset zip, or an options file (.yaml)")
    parser.add_argument("dest", help="the new dataset, ending in .bmdata")
    parser.add_argument("--progress", action="store_true", help="show progress bars")
    parser.add_argument("--overwrite", action="store_true", help="replace DEST if it exists")
    args = parser.parse_args(argv)
    from ..exceptions import BlockMapError

    try:
        written = convert(args.source, args.dest, progress=args.progress, overwrite=args.overwrite)
    except BlockMapError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {_summary(path)}")
        for note in _stores_beside(path):
            print(note)
    return 0


def _stores_beside(path: str) -> list[str]:
    """What ``train`` will do with each neighbour-list store beside the
    dataset ``path`` (left by an earlier dataset of that name): reuse it
    if it was computed for this dataset, or compute it again, and why."""
    import glob

    from .. import Dataset
    from ..exceptions import BlockMapError

    notes = []
    identity = str(Dataset(path).id)
    for store in sorted(glob.glob(glob.escape(path) + ".neighbors-*.bmdata")):
        try:
            stored = Dataset(store)
            recorded = stored[0].info().get("dataset_id") if len(stored) else None
        except (BlockMapError, AttributeError):
            recorded = None
        if recorded == identity:
            notes.append(f"the neighbour-list store {store} is this dataset's: train reuses it")
        else:
            notes.append(
                f"the neighbour-list store {store} was computed for another dataset of "
                "this name: train computes the lists again and replaces it"
            )
    return notes


def _summary(path: str) -> str:
    """``path``, its entries, fields and size, as ``convert`` reports a
    dataset it wrote."""
    import os

    from .. import Dataset

    data = Dataset(path)
    fields = list(data.fields) if not data._single else []
    size = os.path.getsize(path)
    shown = f"{size / 1e6:.1f} MB" if size >= 1e5 else f"{size / 1e3:.1f} kB"
    return (
        f"{path}: {len(data)} entries, {len(fields)} fields ({', '.join(fields)}), "
        f"{shown} ({size:,} bytes)"
    )


#: what ``train --help`` / ``eval --help`` print, without importing metatrain
_COMMAND_HELP = {
    "train": """usage: python -m blockmap.metatrain train OPTIONS.yaml [mtt train arguments]

metatrain's own `mtt train` (the same arguments: -o OUTPUT, -e EXTENSIONS,
-c CHECKPOINT, -r/--restart, -r key=value overrides...), with what blockmap adds:

  - a dataset whose read_from ends in .bmdata (written by
    `python -m blockmap.metatrain convert SOURCE DEST.bmdata`) is read by
    blockmap: items are views of the mapped file, batches made by blockmap;
    other read_from values go to metatrain's readers unchanged;
  - the neighbour lists a model asks for are computed once per structure and
    stored next to the dataset (DEST.bmdata.neighbors-<cutoff>-<full|half>-
    <strict|loose>.bmdata), then reused by later epochs and runs;
  - distributed training: `torchrun --nproc_per_node N -m blockmap.metatrain
    train OPTIONS.yaml` or N SLURM tasks (`srun`), on CPU (gloo) or CUDA (NCCL);
    only rank 0 writes checkpoints, logs and the model;
  - errors raised by blockmap say so (report those to blockmap, not to metatrain).

`mtt train --help` lists metatrain's arguments; docs/training.md tells the rest.
""",
    "eval": """usage: python -m blockmap.metatrain eval MODEL.pt OPTIONS.yaml [mtt eval arguments]

metatrain's own `mtt eval` (the same arguments: -e EXTENSIONS, -o OUTPUT,
-b BATCH_SIZE...), with what blockmap adds:

  - systems (and targets) whose read_from ends in .bmdata are read by blockmap
    (written by `python -m blockmap.metatrain convert SOURCE DEST.bmdata`);
    other read_from values go to metatrain's readers unchanged;
  - errors raised by blockmap say so (report those to blockmap, not to metatrain).

`mtt eval --help` lists metatrain's arguments; docs/training.md tells the rest.
""",
}


def main(argv: list[str]) -> int:
    """``python -m blockmap.metatrain`` with the arguments ``argv``
    (without the program name); returns the exit status.

    Parameters
    ----------
    argv : list of str
        ``["convert", SOURCE, DEST]``, ``["train", OPTIONS, ...]`` or
        ``["eval", MODEL, OPTIONS, ...]``.

    Returns
    -------
    int
        0 on success.
    """
    argv = [str(a) for a in argv]
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "convert":
        try:
            return _convert_command(rest)
        except SystemExit as done:
            return _status(done)
    if command not in ("train", "eval", "export"):
        print(f"unknown command {command!r}\n\n{_USAGE}", file=sys.stderr)
        return 2
    if command in _COMMAND_HELP and any(arg in ("-h", "--help") for arg in rest):
        # metatrain's own help takes seconds to import and prints
        # third-party warnings: blockmap's, at once
        print(_COMMAND_HELP[command])
        return 0
    install()
    from metatrain.__main__ import main as mtt_main

    from ._patch import _walk

    _walk()  # metatrain.__main__ holds is_main_process, imported just now

    import logging

    saved = sys.argv
    sys.argv = ["mtt", command, *rest]
    named = _BlockmapErrors()
    logging.getLogger().addFilter(named)
    try:
        mtt_main()
    except SystemExit as done:
        return _status(done)
    finally:
        sys.argv = saved
        logging.getLogger().removeFilter(named)
    return 0


def _blockmap_error(error: BaseException | None) -> BaseException | None:
    """The error of blockmap's that ``error`` is or wraps (metatrain wraps
    the trainer's errors in its ``ArchitectureError``), if any."""
    from ..exceptions import BlockMapError

    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, BlockMapError):
            return error
        wrapped = [a for a in getattr(error, "args", ()) if isinstance(a, BaseException)]
        error = error.__cause__ or (wrapped[0] if wrapped else None) or error.__context__
    return None


class _BlockmapErrors:
    """A filter of the root logger that rewrites metatrain's error banner
    ("please help us improve it by opening an issue at
    github.com/metatensor/metatrain") when the error being handled is
    blockmap's: the message says it is blockmap's, and where the
    traceback is."""

    def filter(self, record: Any) -> bool:
        import re

        message = record.msg if isinstance(record.msg, str) else ""
        if "metatrain/issues" not in message:
            return True
        error = _blockmap_error(sys.exc_info()[1])
        if error is None:
            return True
        where = re.search(r"log from ('.*?')\. Thank you", message)
        record.msg = (
            f"blockmap error ({type(error).__module__.split('.')[0]}."
            f"{type(error).__name__}), raised by blockmap.metatrain while metatrain ran "
            f"(not an error of metatrain's): {error}"
            + (f"\n(the full traceback is in {where.group(1)})" if where else "")
        )
        record.args = ()
        return True


def _status(done: SystemExit) -> int:
    code: Any = done.code
    if code is None:
        return 0
    return code if isinstance(code, int) else 1
