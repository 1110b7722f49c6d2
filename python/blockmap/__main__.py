"""Command line of blockmap: ``python -m blockmap <command>``.

Commands:
    demo    build the benchmark workload W with blockmap and metatensor-core,
            and print what each map holds and how long building took.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import _demo


def _parser() -> argparse.ArgumentParser:
    """The ``python -m blockmap`` argument parser, one subparser per command."""
    parser = argparse.ArgumentParser(
        prog="python -m blockmap",
        description="blockmap: labeled block tensors (TensorMap) whose data moves "
        "without being copied.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = commands.add_parser(
        "demo",
        help="build the benchmark workload W and compare with metatensor-core",
        description="Build the benchmark workload W (about 0.8 GB of arrays) with blockmap "
        "and with metatensor-core from the same numpy arrays; print what each map holds, "
        "the median build time and the peak resident memory growth.",
    )
    _demo.add_arguments(demo)
    demo.set_defaults(run=_demo.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and run the chosen command."""
    args = _parser().parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
