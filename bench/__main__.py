"""Command line of the demo and the benchmark: ``python -m bench <command>``.

Commands:
    demo    build the benchmark workload W with blockmap and metatensor-core,
            and print what each map holds and how long building took; then
            save, load and map it through files, and pickle it (protocol 5
            out-of-band and in-band, protocol 4), next to numpy.
    bench   time operations on W (save, load, mapped load, pickle dumps and
            loads) with blockmap, numpy and metatensor-core, each in a fresh
            process; print the medians, their ratios and the targets they meet.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import _bench, _demo


def _parser() -> argparse.ArgumentParser:
    """The ``python -m bench`` argument parser, one subparser per command."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="blockmap: labeled block tensors (TensorMap) whose data moves "
        "without being copied.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = commands.add_parser(
        "demo",
        help="build the benchmark workload W and compare with metatensor-core",
        description="Build the benchmark workload W (about 0.8 GB of arrays) with blockmap "
        "and with metatensor-core from the same numpy arrays; print what each map holds, "
        "the median build time and the peak resident memory growth; then time saving, "
        "loading and mapping W through files, and pickling and unpickling it, next to numpy "
        "and metatensor-core, each run in a fresh process.",
    )
    _demo.add_arguments(demo)
    demo.set_defaults(run=_demo.run)
    bench = commands.add_parser(
        "bench",
        help="time save, load, mapped load and pickle of W against numpy and metatensor-core",
        description="Time operations on the benchmark workload W with blockmap, numpy and "
        "metatensor-core on the same arrays, each run in a fresh process; print medians of "
        "the time and of the peak resident memory growth, blockmap's ratios to the others, "
        "and whether the targets are met.",
    )
    _bench.add_arguments(bench)
    bench.set_defaults(run=_bench.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and run the chosen command."""
    args = _parser().parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
