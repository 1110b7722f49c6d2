"""The ``blockmap`` command (``python -m blockmap``): look inside the files
blockmap reads (docs/cli.md).

``main`` parses the command line and runs one command of
``commands.py``; every error ends as one line on standard error and an
exit status: 1 for a file that is damaged or not one blockmap reads (and
for ``verify``'s problems, one line each), 2 for a command line that is
wrong or a file that cannot be opened. The commands' modules, numpy's
included, are imported only once the arguments are parsed, so ``--help``
is fast; torch, metatensor and metatrain are never imported.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

__all__ = ["main"]

_DESCRIPTION = """\
Look inside the files blockmap reads: .mts maps, blocks and labels,
datasets (format versions 1, 2 and 3), metatrain DiskDataset zips,
pickles of blockmap's objects (read without running foreign code),
.npy and .npz files. Reads indexes and headers, not arrays.

exit status: 0 done; 1 a file that is damaged or not one blockmap reads
(verify: a problem found); 2 a wrong command line, or a file that cannot
be opened."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="blockmap",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = commands.add_parser(
        "info",
        help="what a file is and what it holds",
        description="Say what FILE is and what it holds: keys, blocks (dtype, shape, "
        "labels, gradients), info and bytes; for a dataset its version, identity, "
        "entries, fields, columns (min, max), commits and dead bytes. Reads the file's "
        "indexes and headers, never its arrays.",
    )
    info.add_argument("file", metavar="FILE")
    info.add_argument(
        "--json",
        action="store_true",
        help="print the description as JSON (schema in docs/cli.md; every block listed)",
    )
    info.add_argument("--all", action="store_true", help="list every block (default: 20)")

    verify = commands.add_parser(
        "verify",
        help="check every checksum and structure (exit status 1 on a problem)",
        description="Check FILE whole: every CRC32 and every structural rule blockmap's "
        "readers know (.mts maps, blocks and labels, datasets of every version, "
        "DiskDataset zips, blockmap pickles). Exit status 0 when it is intact, 1 with "
        "one line per problem.",
    )
    verify.add_argument("file", metavar="FILE")
    verify.add_argument("--json", action="store_true", help="print the result as JSON")

    show = commands.add_parser(
        "show",
        help="print one map or dataset entry and summarise its blocks' values",
        description="Print a map (one entry of a dataset or sample of a DiskDataset: "
        "INDEX, default 0, negative from the end) as print(tensor) does, then each "
        "block's values summarised (shape, dtype, min, max, mean, the first values): the "
        "first 20 blocks, those --keys selects, or --all.",
    )
    show.add_argument("file", metavar="FILE")
    show.add_argument("index", metavar="INDEX", nargs="?", help="the entry of a dataset")
    show.add_argument(
        "--keys",
        metavar="SELECTION",
        help="the blocks to show: name=value pairs, e.g. center_type=1,o3_lambda=0",
    )
    show.add_argument("--all", action="store_true", help="summarise every block")

    for name, words in (
        ("upgrade", "write the dataset SRC (format version 1 to 4) as the current version"),
        ("compact", "write the dataset SRC without its dead bytes"),
    ):
        command = commands.add_parser(
            name,
            help=words,
            description=words[0].upper()
            + words[1:]
            + " at DST, a new file (an existing DST is refused unless "
            "--overwrite: then it is replaced once the new file is complete, "
            "and keeps what it held on failure).",
        )
        command.add_argument("src", metavar="SRC")
        command.add_argument("dst", metavar="DST")
        command.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    return parser


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``blockmap`` command with ``argv`` (default: ``sys.argv[1:]``)
    and return its exit status."""
    args = _parser().parse_args(argv)
    try:
        from ..exceptions import BlockMapError, BlockMapIOError
        from . import commands

        run = getattr(commands, args.command)
        try:
            return int(run(args))
        except commands.UsageError as error:
            return _fail(error, 2)
        except BlockMapIOError as error:
            return _fail(error, 2)
        except BlockMapError as error:
            return _fail(error, 1)
        except BrokenPipeError:
            # the reader of the output went away (`| head`)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 0
        except OSError as error:
            return _fail(error, 2)
        except (MemoryError, RecursionError) as error:
            return _fail(f"the file is too large or too deeply nested to read ({error!r})", 1)
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # a bug: one line, and how to see more
        if os.environ.get("BLOCKMAP_TRACEBACK"):
            raise
        return _fail(
            f"internal error ({type(error).__name__}: {_one_line(error)}); "
            "BLOCKMAP_TRACEBACK=1 shows the traceback",
            1,
        )


def _fail(error: BaseException | str, status: int) -> int:
    text = error if isinstance(error, str) else _one_line(error)
    sys.stderr.write(f"blockmap: error: {text}\n")
    return status
