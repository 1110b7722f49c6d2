"""``python -m bench demo``: build the workload W and compare with metatensor-core.

The demo makes W's arrays with numpy (see :mod:`bench.workload`), wraps them
in a :class:`blockmap.TensorMap`, then in a ``metatensor.TensorMap`` from the same
arrays, and prints what each map holds, how long building took (median of
repeated builds, measured with :func:`bench.measure.measure`) and the growth of
the peak resident memory while building.

Each section is a function that prints its own table through
:func:`bench.measure.print_table`; further sections add their rows the same
way. The files section saves, loads and maps W, the pickle section pickles and
unpickles it (protocol 5 out-of-band and in-band, protocol 4), and the
transports section sends it to other processes, through the machinery of
``python -m bench bench`` (:func:`bench.runner.run_bench`): each run in a
fresh process, next to numpy and metatensor-core.
"""

from __future__ import annotations

import argparse
import gc
import sys
from typing import Any

import numpy as np

from . import families  # noqa: F401  (registers the operations the sections run)
from .measure import (
    Measurement,
    Row,
    format_bytes,
    format_growth,
    format_seconds,
    measure,
    print_table,
)
from .registry import OTHER_NAME, metatensor_version
from .report import print_report
from .runner import run_bench
from .workload import SMALL, WorkloadArrays, build_blockmap, build_metatensor, make_arrays, nbytes

__all__ = ["add_arguments", "run"]

#: Operations of the files section, and its runs of each (fewer than ``bench``'s).
FILE_OPERATIONS: tuple[str, ...] = ("save", "load", "mmap")
FILE_REPEAT = 3
#: Operations of the pickle section, and its runs of each.
PICKLE_OPERATIONS: tuple[str, ...] = ("p5oob", "p5dumps", "p5loads", "p4dumps", "p4loads")
PICKLE_REPEAT = 3
#: Operations of the transports section, and its runs of each.
TRANSPORT_OPERATIONS: tuple[str, ...] = ("dask", "queueshm", "ray")
TRANSPORT_REPEAT = 3


def _short_repr(obj: object, max_lines: int = 8) -> str:
    """``repr(obj)``, cut after ``max_lines`` lines and indented for the report."""
    lines = repr(obj).splitlines()
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"... ({len(lines) - max_lines} more lines)"]
    return "\n".join("    " + line for line in lines)


def _map_nbytes(tensor: Any) -> int:
    """Bytes of values and samples of every block and gradient of a map.

    Walks the map through the API that blockmap and metatensor-core share, so the
    same count is made on both sides (and matches :func:`bench.workload.nbytes`).
    """
    total = 0
    for index in range(len(tensor.keys)):
        block = tensor.block(index)
        total += block.values.nbytes + block.samples.values.nbytes
        for _, gradient in block.gradients():
            total += gradient.values.nbytes + gradient.samples.values.nbytes
    return total


def _describe(name: str, tensor: Any, arrays: WorkloadArrays, built: Measurement) -> None:
    """Print what a built map holds and how long building it took."""
    print(f"{name}: TensorMap built from the same arrays")
    print(_short_repr(tensor))
    first = tensor.block(0)
    gradients = [(parameter, gradient.values.shape) for parameter, gradient in first.gradients()]
    print(f"  blocks:         {len(tensor.keys)} (keys {list(tensor.keys.names)})")
    held = f"  bytes held:     {format_bytes(_map_nbytes(tensor))} (values and samples)"
    if hasattr(tensor, "nbytes"):
        held += f"; TensorMap.nbytes = {format_bytes(tensor.nbytes)}"
    print(held)
    print(f"  block 0 shape:  {first.values.shape} {first.values.dtype}")
    for parameter, shape in gradients:
        print(f"  gradient {parameter!r}: {shape}")
    shared = np.shares_memory(first.values, arrays.blocks[0].values)
    print(f"  block 0 values share memory with the input array: {'yes' if shared else 'no'}")
    runs = ", ".join(format_seconds(t) for t in built.times)
    print(
        f"  built in {format_seconds(built.median)} (median of {len(built.times)}: {runs}), "
        f"peak RSS {format_growth(built.peak_growth)}"
    )
    print()


# ---------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------


def section_build(arrays: WorkloadArrays, repeat: int) -> list[Row]:
    """Build the map with blockmap and with metatensor-core; print what each holds."""
    blockmap_built = measure(lambda: build_blockmap(arrays), repeat)
    _describe("blockmap", blockmap_built.result, arrays, blockmap_built)

    version = metatensor_version()
    other_built: Measurement | None = None
    if version is None:
        print(f"{OTHER_NAME} is not installed (`pip install metatensor-core==0.2.6`):")
        print("its column is left empty.\n")
    else:
        other_built = measure(lambda: build_metatensor(arrays), repeat)
        _describe(f"{OTHER_NAME} {version}", other_built.result, arrays, other_built)

    return [
        Row(f"build TensorMap ({len(arrays)} blocks)", blockmap_built, {OTHER_NAME: other_built})
    ]


def section_files(small: bool, repeat: int) -> None:
    """Save, load and map W through files with blockmap, numpy and metatensor-core.

    Runs the ``bench`` machinery (:func:`bench.runner.run_bench`): every run is
    a fresh process that builds W's arrays, times one operation and checks its
    result; progress goes to stderr, the table and the targets to stdout.
    """
    print(
        "W through files, next to numpy (`python -m bench bench` measures more): "
        "each run is a fresh process that builds W's arrays first, not timed"
    )
    result = run_bench(FILE_OPERATIONS, repeat, small, progress=sys.stderr)
    print_report(result)


def section_pickle(small: bool, repeat: int) -> None:
    """Pickle and unpickle W with blockmap, numpy and metatensor-core.

    Protocol 5 with out-of-band buffers (dumps and loads timed together, as dask
    and ray move data), protocol 5 in-band and protocol 4 (dumps and loads timed
    apart), through the ``bench`` machinery as :func:`section_files` does.
    """
    print(
        "W through pickle, next to numpy and metatensor-core: each run is a fresh "
        "process that builds W's arrays and the object (and, for loads, its pickle) "
        "first, not timed"
    )
    result = run_bench(PICKLE_OPERATIONS, repeat, small, progress=sys.stderr)
    print_report(result)


def section_transports(small: bool, repeat: int) -> None:
    """Send W to a dask worker and back, through a multiprocessing Queue after
    ``share_memory()``, and through ray's object store, next to numpy's arrays,
    through the ``bench`` machinery as :func:`section_files` does."""
    print(
        "W between processes, next to numpy: each run is a fresh process that starts "
        "the engine (dask cluster, Queue child, ray) and warms it up first, not timed "
        "(metatensor-core, at a minute per dask run, is left to `python -m bench bench`)"
    )
    result = run_bench(
        TRANSPORT_OPERATIONS, repeat, small, progress=sys.stderr, libraries=("blockmap", "numpy")
    )
    print_report(result)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``demo`` options to ``parser``."""
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
        help="runs of each timed operation; the median is reported (default: 5)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the demo with parsed options; return the exit status."""
    import blockmap

    if args.repeat < 1:
        print("--repeat must be at least 1", file=sys.stderr)
        return 2

    sizes = SMALL if args.small else {}
    print(f"blockmap {blockmap.__version__} demo, numpy {np.__version__}")
    print()

    made = measure(lambda: make_arrays(**sizes), repeat=1)
    arrays: WorkloadArrays = made.result
    block = arrays.blocks[0]
    print(f"workload W{' (--small)' if args.small else ''}: {len(arrays)} blocks")
    print(f"  keys {arrays.keys.names}; each block:")
    print(f"  values {block.values.shape} {block.values.dtype}, samples {block.samples.names}")
    for gradient in block.gradients:
        print(
            f"  gradient {gradient.parameter!r}: values {gradient.values.shape}, "
            f"samples {gradient.samples.names}"
        )
    print(
        f"  made with numpy in {format_seconds(made.median)}: "
        f"{format_bytes(nbytes(arrays))} of arrays, "
        f"peak RSS {format_growth(made.peak_growth)}"
    )
    print()

    rows = section_build(arrays, args.repeat)
    print_table(
        f"medians of {args.repeat} runs, peak RSS growth; ratio = blockmap's time / theirs",
        rows,
        others=(OTHER_NAME,),
    )
    print()

    # The files section's workers build their own W: release this one first.
    del made, arrays, block, rows
    gc.collect()
    section_files(args.small, min(args.repeat, FILE_REPEAT))
    section_pickle(args.small, min(args.repeat, PICKLE_REPEAT))
    section_transports(args.small, min(args.repeat, TRANSPORT_REPEAT))
    return 0
