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
        print(f"wrote {path}")
    return 0


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
    install()
    from metatrain.__main__ import main as mtt_main

    saved = sys.argv
    sys.argv = ["mtt", command, *rest]
    try:
        mtt_main()
    except SystemExit as done:
        return _status(done)
    finally:
        sys.argv = saved
    return 0


def _status(done: SystemExit) -> int:
    code: Any = done.code
    if code is None:
        return 0
    return code if isinstance(code, int) else 1
