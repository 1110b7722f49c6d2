"""Command line of the demo and the benchmark: ``python -m bench <command>``,
run from the repository root.

Commands:
    demo     build the benchmark workload W with blockmap and metatensor-core,
             and print what each map holds and how long building took; then
             move it through files, pickle and transports next to numpy and
             metatensor-core (bench/demo.py).
    bench    time operations on W (files, pickle, transports) with blockmap,
             numpy and metatensor-core, each in a fresh process; print the
             medians, their ratios and the targets they meet, and write them as
             markdown and a chart when asked.
    scaling  how each operation's time grows with the number of blocks and
             with the bytes of the map (bench/scaling.py, its operations in
             bench/scaling_ops.py): log-log slopes.
    torch    DataLoader throughput (0 and 2 workers, fork and spawn) with
             blockmap, metatensor-torch and plain torch tensors, and join and
             split against metatensor-operations (bench/dataloader.py).
    datasets many maps in one file (create, open, random access warm and
             cold, epochs with and without a DataLoader, append) against an
             LMDB of pickled maps, HDF5, metatrain's DiskDataset and .mts
             files (bench/datasets.py, bench/dataset_peers.py).
    training a tiny real metatrain run (SOAP-BPNN, CPU, float64) from
             metatrain's DiskDataset and MemmapDataset and from a blockmap
             dataset, 0 and 2 workers: epoch time, data handling, PSS per
             process, per-batch losses (bench/training.py,
             bench/training_run.py, bench/training_data.py).
    worker   one timed run in this process, and
    prepare  the files that load operations read: the fresh processes that
             bench starts (bench/runner.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import (
    dataloader,
    datasets,
    demo,
    families,  # noqa: F401  (registers every operation before the parser is made)
    runner,
    scaling,
    scaling_ops,
    training,
)
from .registry import OPERATIONS, OTHER_NAME, metatensor_version
from .report import print_report, runs_phrase, workload_summary, write_chart, write_markdown

# ---------------------------------------------------------------------------
# The bench command
# ---------------------------------------------------------------------------


def _operation_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in OPERATIONS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown operations {unknown}; choose among {','.join(OPERATIONS)}"
        )
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``bench`` options to ``parser``."""
    parser.add_argument(
        "--small",
        action="store_true",
        help="use a tiny workload (4 blocks of 24 samples) for a quick check",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        metavar="N",
        help="fresh processes per operation and library; medians are reported (default: 5)",
    )
    parser.add_argument(
        "--ops",
        type=_operation_list,
        default=list(OPERATIONS),
        metavar="OPS",
        help=f"comma-separated operations (default: {','.join(OPERATIONS)})",
    )
    parser.add_argument(
        "--markdown",
        type=Path,
        metavar="FILE",
        help="also write the report as markdown to FILE (e.g. docs/benchmarks.md)",
    )
    parser.add_argument(
        "--chart",
        type=Path,
        metavar="FILE",
        help="also draw the median times as a bar chart (PNG, log scale) to FILE",
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark with parsed options; return the exit status."""
    import blockmap

    if args.repeat < 1:
        print("--repeat must be at least 1", file=sys.stderr)
        return 2
    print(
        f"blockmap {blockmap.__version__} bench, numpy {np.__version__}, "
        f"{OTHER_NAME} {metatensor_version() or 'not installed'}",
        flush=True,
    )
    result = runner.run_bench(args.ops, args.repeat, args.small, progress=sys.stderr)
    print(
        f"workload W ({workload_summary(result)}), {runs_phrase(result.repeat)} of each, "
        f"{result.seconds:.0f} s in all"
    )
    print()
    print_report(result)
    if args.markdown is not None:
        command = "python -m bench bench" + (" --small" if args.small else "")
        if args.repeat != 5:
            command += f" --repeat {args.repeat}"
        if args.ops != list(OPERATIONS):
            command += f" --ops {','.join(args.ops)}"
        command += f" --markdown {args.markdown}"
        if args.chart is not None:
            command += f" --chart {args.chart}"
        write_markdown(result, args.markdown, command, chart=args.chart)
        print(f"markdown written to {args.markdown}")
    if args.chart is not None:
        write_chart(result, args.chart)
        print(f"chart written to {args.chart}")
    return 1 if result.problems() else 0


# ---------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    """The ``python -m bench`` argument parser, one subparser per command."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="The demo and the benchmark of blockmap: labeled block tensors "
        "(TensorMap) whose data moves without being copied.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo_command = commands.add_parser(
        "demo",
        help="build the benchmark workload W and compare with metatensor-core",
        description="Build the benchmark workload W (about 0.8 GB of arrays) with blockmap "
        "and with metatensor-core from the same numpy arrays; print what each map holds, "
        "the median build time and the peak resident memory growth; then time saving, "
        "loading and mapping W through files, and pickling and unpickling it, next to numpy "
        "and metatensor-core, each run in a fresh process.",
    )
    demo.add_arguments(demo_command)
    demo_command.set_defaults(run=demo.run)
    bench_command = commands.add_parser(
        "bench",
        help="time save, load, mapped load and pickle of W against numpy and metatensor-core",
        description="Time operations on the benchmark workload W with blockmap, numpy and "
        "metatensor-core on the same arrays, each run in a fresh process; print medians of "
        "the time and of the peak resident memory growth, blockmap's ratios to the others, "
        "and whether the targets are met.",
    )
    add_arguments(bench_command)
    bench_command.set_defaults(run=run)
    scaling_command = commands.add_parser(
        "scaling",
        help="how each operation's time grows with blocks and bytes (log-log slopes)",
        description="Time pickle, save, load, mapped load, construction, block lookup, "
        "share_memory + Queue and dask on maps of 1 to 10,000 blocks at a fixed size and on "
        "W-shaped maps of growing size, with blockmap, numpy and metatensor-core, each run "
        "in a fresh process; fit and print the log-log slopes and flag those that grow "
        "faster than their work.",
    )
    scaling.add_arguments(scaling_command)
    scaling_command.set_defaults(run=scaling.run)
    torch_command = commands.add_parser(
        "torch",
        help="DataLoader throughput, join and split, against metatensor-torch and torch",
        description="Batches per second of DataLoaders (0 and 2 workers, fork and spawn) "
        "over QM9-like structures and W in pieces, for blockmap, metatensor-torch and plain "
        "torch tensors, each run in a fresh process; then join and split against "
        "metatensor-operations.",
    )
    dataloader.add_arguments(torch_command)
    torch_command.set_defaults(run=dataloader.run)
    datasets_command = commands.add_parser(
        "datasets",
        help="datasets of many maps in one file against LMDB, HDF5, DiskDataset and .mts files",
        description="Create, open, random access (warm, and cold: the page cache dropped), "
        "random-order epochs (a loop, and a DataLoader with a join collate, 0 and 2 "
        "workers) and append, on 130,000 and 20,000 QM9-like maps and on W split by "
        "blocks, with blockmap's dataset files, an LMDB of pickled maps, HDF5 arrays with "
        "offsets, metatrain's DiskDataset and a folder of .mts files (metatensor-core), "
        "each operation in a fresh process; the ratios blockmap / LMDB against the targets.",
    )
    datasets.add_arguments(datasets_command)
    datasets_command.set_defaults(run=datasets.run)
    training_command = commands.add_parser(
        "training",
        help="metatrain SOAP-BPNN epochs from DiskDataset, MemmapDataset and blockmap",
        description="A tiny real mtt train run (SOAP-BPNN, CPU, float64) on Cu/Ni clusters "
        "with EMT energies and forces, from metatrain's DiskDataset zip, its MemmapDataset "
        "folder and a blockmap dataset, with 0 and 2 DataLoader workers, each run a fresh "
        "process: epoch time, the data-handling share, peak PSS per process, and every "
        "batch loss compared bit for bit; plus the model-only floor.",
    )
    training.add_arguments(training_command)
    training_command.set_defaults(run=training.run)
    runner.add_commands(commands)
    scaling_ops.add_commands(commands)
    dataloader.add_commands(commands)
    datasets.add_commands(commands)
    training.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and run the chosen command."""
    args = _parser().parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
