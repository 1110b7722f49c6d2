"""``python -m blockmap demo``: build the workload W and compare with metatensor-core.

The demo makes W's arrays with numpy (see :mod:`blockmap._workload`), wraps them
in a :class:`blockmap.TensorMap`, then in a ``metatensor.TensorMap`` from the same
arrays, and prints what each map holds, how long building took (median of
repeated builds, measured with :func:`time.perf_counter`) and the growth of the
peak resident memory while building.

Each section is a function that prints its own table through
:func:`print_table`; further sections add their rows the same way. The files
section saves, loads and maps W, and the pickle section pickles and unpickles
it (protocol 5 out-of-band and in-band, protocol 4), through the machinery of
``python -m blockmap bench`` (:mod:`blockmap._bench`): each run in a fresh
process, next to numpy and metatensor-core.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _workload

__all__ = [
    "Cell",
    "Measurement",
    "Row",
    "add_arguments",
    "format_bytes",
    "format_growth",
    "format_ratio",
    "format_seconds",
    "main",
    "measure",
    "print_table",
    "run",
    "short_name",
]

#: Sizes of the small W used by ``--small``.
SMALL_WORKLOAD: dict[str, int] = {
    "n_keys": 4,
    "n_samples": 24,
    "n_grad_samples": 6,
    "n_properties": 8,
}

OTHER_NAME = "metatensor-core"

#: Operations of the files section, and its runs of each (fewer than ``bench``'s).
FILE_OPERATIONS: tuple[str, ...] = ("save", "load", "mmap")
FILE_REPEAT = 3
#: Operations of the pickle section, and its runs of each.
PICKLE_OPERATIONS: tuple[str, ...] = ("p5oob", "p5dumps", "p5loads", "p4dumps", "p4loads")
PICKLE_REPEAT = 3
#: Operations of the transports section, and its runs of each.
TRANSPORT_OPERATIONS: tuple[str, ...] = ("dask", "queueshm", "ray")
TRANSPORT_REPEAT = 3


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark to the current RSS (Linux >= 4.0).

    Without the reset, ``ru_maxrss`` is a high-water mark over the whole process,
    and a step that stays below an earlier peak would show no growth at all.
    Returns whether the reset worked.
    """
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        return False
    return True


def _peak_rss_bytes() -> int:
    """The process's peak resident set size, in bytes.

    On Linux this is ``VmHWM`` of ``/proc/self/status``: the high-water mark that
    :func:`_reset_peak_rss` resets. ``ru_maxrss`` is not used there because a
    process inherits its parent's peak as a floor when it execs (the kernel keeps
    the old address space's mark), so a fresh process started by a big one would
    show no growth below the parent's size. Elsewhere, ``ru_maxrss``.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS reports bytes.
    return peak if sys.platform == "darwin" else peak * 1024


@dataclass
class Measurement:
    """Wall-clock times of repeated runs of one operation, and its memory cost.

    Attributes:
        times: seconds of each run, in order.
        peak_growth: growth of the peak resident memory over all runs, in bytes.
        result: what the last run returned.
    """

    times: list[float]
    peak_growth: int
    result: Any = None

    @property
    def median(self) -> float:
        """The median time of the runs, in seconds."""
        return statistics.median(self.times)


def measure(operation: Callable[[], Any], repeat: int = 5) -> Measurement:
    """Run ``operation`` ``repeat`` times; time each run and watch the peak memory.

    The garbage collector is collected before and disabled during each run; the
    previous run's result is released before the next run starts, so the peak
    memory growth is that of one run (plus whatever the runs keep alive).
    """
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    times: list[float] = []
    result: Any = None
    gc.collect()
    _reset_peak_rss()
    peak_before = _peak_rss_bytes()
    for _ in range(repeat):
        result = None
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            result = operation()
            times.append(time.perf_counter() - start)
        finally:
            gc.enable()
    peak_growth = _peak_rss_bytes() - peak_before
    return Measurement(times, peak_growth, result)


# ---------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------


def format_seconds(seconds: float) -> str:
    """A duration with a unit that keeps three significant digits."""
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def format_bytes(count: int) -> str:
    """A byte count in decimal units (1 MB = 10**6 bytes), as workload.md uses."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(count) >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


#: What a table cell holds: a measurement, ``None`` when that side was not
#: measured (not installed, not supported: shown as ``-``), or a short text
#: shown as is (e.g. ``"failed"``).
Cell = Measurement | str | None


def short_name(library: str) -> str:
    """A library's name in a ratio column's header: ``metatensor-core`` -> ``metatensor``."""
    return library.removesuffix("-core")


@dataclass
class Row:
    """One line of a comparison table: an operation measured by blockmap and others.

    ``others`` maps each other library's name (a column of the table) to its cell;
    a missing name counts as not measured. Ratios are left out unless both sides
    are measurements.
    """

    operation: str
    blockmap: Cell
    others: dict[str, Cell] = field(default_factory=dict)

    def ratio(self, other: str) -> float | None:
        """blockmap's median time over ``other``'s, when both were measured."""
        theirs = self.others.get(other)
        if not isinstance(self.blockmap, Measurement) or not isinstance(theirs, Measurement):
            return None
        if theirs.median <= 0.0:
            return None
        return self.blockmap.median / theirs.median


def format_growth(count: int) -> str:
    """A memory growth in MB (10**6 bytes), always signed, e.g. ``+0.0 MB``."""
    return f"{count / 1e6:+.1f} MB"


def format_ratio(ratio: float | None) -> str:
    """A ratio with three significant digits down to 0.001, ``-`` when absent."""
    if ratio is None:
        return "-"
    if ratio >= 0.1:
        return f"{ratio:.2f}"
    if ratio >= 1e-3:
        return f"{ratio:.3f}"
    return f"{ratio:.1e}"


def _cell(cell: Cell) -> str:
    if cell is None:
        return "-"
    if isinstance(cell, str):
        return cell
    return f"{format_seconds(cell.median)}, {format_growth(cell.peak_growth)}"


def print_table(
    title: str,
    rows: Iterable[Row],
    others: Sequence[str] = (OTHER_NAME,),
    file: Any = None,
    markdown: bool = False,
) -> None:
    """Print a table: operation | blockmap | each of ``others`` | blockmap/each of ``others``.

    Each measured cell is a median time followed by the peak resident memory
    growth; each ratio is blockmap's median over the other library's (below 1:
    blockmap is faster). With ``markdown``, the title is a paragraph and the
    table a GitHub-flavoured markdown table; otherwise columns are aligned for
    a terminal.
    """
    header = (
        "operation",
        "blockmap",
        *others,
        *(f"blockmap/{short_name(other)}" for other in others),
    )
    lines = [
        (
            row.operation,
            _cell(row.blockmap),
            *(_cell(row.others.get(other)) for other in others),
            *(format_ratio(row.ratio(other)) for other in others),
        )
        for row in rows
    ]
    out = sys.stdout if file is None else file
    if markdown:
        print(title, file=out)
        print(file=out)
        print("| " + " | ".join(header) + " |", file=out)
        print("|---|" + "---:|" * (len(header) - 1), file=out)
        for line in lines:
            print("| " + " | ".join(line) + " |", file=out)
        return

    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]

    def render(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return " | ".join([first, *rest])

    print(title, file=out)
    print(render(header), file=out)
    print("-+-".join("-" * width for width in widths), file=out)
    for line in lines:
        print(render(line), file=out)


def _short_repr(obj: object, max_lines: int = 8) -> str:
    """``repr(obj)``, cut after ``max_lines`` lines and indented for the report."""
    lines = repr(obj).splitlines()
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"... ({len(lines) - max_lines} more lines)"]
    return "\n".join("    " + line for line in lines)


def _map_nbytes(tensor: Any) -> int:
    """Bytes of values and samples of every block and gradient of a map.

    Walks the map through the API that blockmap and metatensor-core share, so the
    same count is made on both sides (and matches :func:`_workload.nbytes`).
    """
    total = 0
    for index in range(len(tensor.keys)):
        block = tensor.block(index)
        total += block.values.nbytes + block.samples.values.nbytes
        for _, gradient in block.gradients():
            total += gradient.values.nbytes + gradient.samples.values.nbytes
    return total


def _describe(name: str, tensor: Any, arrays: _workload.WorkloadArrays, built: Measurement) -> None:
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


def _metatensor_version() -> str | None:
    """The installed metatensor-core version, or None when it cannot be imported."""
    try:
        import metatensor  # noqa: F401
    except ImportError:
        return None
    try:
        return importlib.metadata.version("metatensor-core")
    except importlib.metadata.PackageNotFoundError:
        return "unknown version"


def section_build(arrays: _workload.WorkloadArrays, repeat: int) -> list[Row]:
    """Build the map with blockmap and with metatensor-core; print what each holds."""
    blockmap_built = measure(lambda: _workload.build_blockmap(arrays), repeat)
    _describe("blockmap", blockmap_built.result, arrays, blockmap_built)

    version = _metatensor_version()
    other_built: Measurement | None = None
    if version is None:
        print(f"{OTHER_NAME} is not installed (`pip install metatensor-core==0.2.6`):")
        print("its column is left empty.\n")
    else:
        other_built = measure(lambda: _workload.build_metatensor(arrays), repeat)
        _describe(f"{OTHER_NAME} {version}", other_built.result, arrays, other_built)

    return [
        Row(f"build TensorMap ({len(arrays)} blocks)", blockmap_built, {OTHER_NAME: other_built})
    ]


def section_files(small: bool, repeat: int) -> None:
    """Save, load and map W through files with blockmap, numpy and metatensor-core.

    Runs the ``bench`` machinery (:func:`blockmap._bench.run_bench`): every run is
    a fresh process that builds W's arrays, times one operation and checks its
    result; progress goes to stderr, the table and the targets to stdout.
    """
    from . import _bench  # _bench imports this module

    print(
        "W through files, next to numpy (`python -m blockmap bench` measures more): "
        "each run is a fresh process that builds W's arrays first, not timed"
    )
    result = _bench.run_bench(FILE_OPERATIONS, repeat, small, progress=sys.stderr)
    _bench.print_report(result)


def section_pickle(small: bool, repeat: int) -> None:
    """Pickle and unpickle W with blockmap, numpy and metatensor-core.

    Protocol 5 with out-of-band buffers (dumps and loads timed together, as dask
    and ray move data), protocol 5 in-band and protocol 4 (dumps and loads timed
    apart), through the ``bench`` machinery as :func:`section_files` does.
    """
    from . import _bench  # _bench imports this module

    print(
        "W through pickle, next to numpy and metatensor-core: each run is a fresh "
        "process that builds W's arrays and the object (and, for loads, its pickle) "
        "first, not timed"
    )
    result = _bench.run_bench(PICKLE_OPERATIONS, repeat, small, progress=sys.stderr)
    _bench.print_report(result)


def section_transports(small: bool, repeat: int) -> None:
    """Send W to a dask worker and back, through a multiprocessing Queue after
    ``share_memory()``, and through ray's object store, next to numpy's arrays,
    through the ``bench`` machinery as :func:`section_files` does."""
    from . import _bench  # _bench imports this module

    print(
        "W between processes, next to numpy: each run is a fresh process that starts "
        "the engine (dask cluster, Queue child, ray) and warms it up first, not timed "
        "(metatensor-core, at a minute per dask run, is left to `python -m blockmap bench`)"
    )
    result = _bench.run_bench(
        TRANSPORT_OPERATIONS, repeat, small, progress=sys.stderr, libraries=("blockmap", "numpy")
    )
    _bench.print_report(result)


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

    sizes = SMALL_WORKLOAD if args.small else {}
    print(f"blockmap {blockmap.__version__} demo, numpy {np.__version__}")
    print()

    made = measure(lambda: _workload.make_arrays(**sizes), repeat=1)
    arrays: _workload.WorkloadArrays = made.result
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
        f"{format_bytes(_workload.nbytes(arrays))} of arrays, "
        f"peak RSS {format_growth(made.peak_growth)}"
    )
    print()

    rows = section_build(arrays, args.repeat)
    print_table(
        f"medians of {args.repeat} runs, peak RSS growth; ratio = blockmap's time / theirs",
        rows,
    )
    print()

    # The files section's workers build their own W: release this one first.
    del made, arrays, block, rows
    gc.collect()
    section_files(args.small, min(args.repeat, FILE_REPEAT))
    section_pickle(args.small, min(args.repeat, PICKLE_REPEAT))
    section_transports(args.small, min(args.repeat, TRANSPORT_REPEAT))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m blockmap demo``: parse ``argv`` and run the demo."""
    parser = argparse.ArgumentParser(
        prog="python -m blockmap demo",
        description="Build the benchmark workload W with blockmap and metatensor-core; "
        "then move it through files, pickle and transports (dask, multiprocessing, ray) next "
        "to numpy, each run in a fresh process.",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))
