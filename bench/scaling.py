"""The scaling report: how each operation's cost grows with its work.

Two series of maps, built from the same numpy arrays for every library:

- ``blocks``: 1, 10, 100, 1,000 and 10,000 blocks at a fixed total size
  (80 MB of values); each block is values ``(n, 3, 20)`` float64 with samples
  ``["system", "atom"]`` (``n`` rows), components ``[["o3_mu"]]`` and
  properties ``["n"]``, no gradient;
- ``bytes``: maps shaped like W (100 blocks with a ``positions`` gradient) of
  8 MB, 80 MB, 800 MB and, with ``--huge``, 8 GB (samples scaled).

Every figure is the median over fresh processes (``python -m bench
scaling-worker ...``), libraries interleaved run by run, as the main bench
does (:mod:`bench.runner`). Values are filled with ``np.full`` (one value per
block) rather than random numbers: no operation here looks at them, and the
worker processes start faster. metatensor-core is run within a time budget per
operation (:data:`MT_BUDGET`): once its runs of an operation have taken that
long in all, its larger sizes are skipped (the report says which).

The slope of each curve is fitted on a log-log scale (least squares over the
sizes measured); a slope above :data:`BLOCK_SLOPE_LIMIT` in the number of
blocks, or above :data:`BYTE_SLOPE_LIMIT` in bytes, is flagged: that curve
grows faster than its work.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .measure import format_bytes, format_seconds
from .registry import metatensor_version
from .runner import spawn
from .scaling_ops import (
    BLOCKMAP,
    LIBRARIES,
    MT,
    NUMPY,
    NUMPY_VALUES,
    OPS,
    numpy_map_files,
    open_files_limit,
)

__all__ = ["add_arguments", "run", "slope"]

#: Blocks of the ``blocks`` series (``--quick``: the first three).
BLOCK_COUNTS = (1, 10, 100, 1_000, 10_000)
#: Scale of W's samples in the ``bytes`` series: 8 MB, 80 MB, 800 MB (8 GB with --huge).
BYTE_SCALES = (0.01, 0.1, 1.0)
HUGE_SCALE = 10.0
#: Seconds of metatensor-core runs per operation and series before its larger sizes are skipped.
MT_BUDGET = 40.0
#: Seconds one worker may take.
WORKER_TIMEOUT = 600.0
#: Slopes above these are flagged (blocks at fixed size; bytes at fixed blocks).
BLOCK_SLOPE_LIMIT = 1.15
BYTE_SLOPE_LIMIT = 1.1
#: Operations run on the 8 GB map (--huge): those whose peak memory fits beside
#: 8 GB of input on a 24 GB machine shared with others (no in-band pickle, no
#: full load, no second copy), by blockmap and numpy only.
HUGE_OPERATIONS = ("oob", "save", "mmap", "construct", "lookup")
#: The line of ``docs/scaling.md`` after which the hand-written analysis
#: starts: regenerating the page keeps it.
NOTES_MARKER = "<!-- analysis: written by hand, kept when this page is regenerated -->"

# ---------------------------------------------------------------------------
# Running the series
# ---------------------------------------------------------------------------


@dataclass
class Cell:
    """The runs of one operation by one library at one size."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    @property
    def times(self) -> list[float]:
        return [run["seconds"] for run in self.runs]

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.runs else None


@dataclass
class Series:
    """One series: its name, the sizes, and a cell per (operation, library, size)."""

    name: str
    sizes: list[float]
    data_bytes: dict[float, int] = field(default_factory=dict)
    cells: dict[tuple[str, str, float], Cell] = field(default_factory=dict)
    skipped: dict[tuple[str, str], str] = field(default_factory=dict)

    def x(self, size: float) -> float:
        """The work axis: blocks, or bytes of array data."""
        return size if self.name == "blocks" else float(self.data_bytes.get(size, 0))


def _libraries(operation: str) -> list[str]:
    return [lib for lib in LIBRARIES if lib in OPS[operation].calls]


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_series(
    name: str,
    sizes: Sequence[float],
    operations: Sequence[str],
    repeat: int,
    has_mt: bool,
    huge: float | None = None,
) -> Series:
    """Measure ``operations`` at every size of the series ``name``."""
    series = Series(name, list(sizes))
    spent: dict[str, float] = {}
    for size in sizes:
        workdir = Path(tempfile.mkdtemp(prefix="blockmap-scaling-"))
        try:
            ops = [op for op in operations if size != huge or op in HUGE_OPERATIONS]
            libraries = {
                op: [
                    lib
                    for lib in _libraries(op)
                    if (has_mt or lib != MT) and (size != huge or lib in (BLOCKMAP, NUMPY))
                ]
                for op in ops
            }
            for op in ops:
                if op == "mmap" and NUMPY in libraries[op]:
                    needed, limit = numpy_map_files(name, size), open_files_limit()
                    if needed > limit:
                        libraries[op].remove(NUMPY)
                        series.skipped[(op, NUMPY)] = (
                            f"at {_size_label(name, size)}: its {needed:,} "
                            f"`np.load(mmap_mode='r')` maps keep a file descriptor each, over "
                            f"this machine's hard limit of {limit:,} open files"
                        )
                if MT in libraries[op] and spent.get(op, 0.0) > MT_BUDGET:
                    libraries[op].remove(MT)
                    series.skipped[(op, MT)] = (
                        f"from {_size_label(name, size)} on: over its {MT_BUDGET:.0f} s budget"
                    )
            files = list(
                dict.fromkeys(
                    (f"numpy-{'npy' if op == 'mmap' else 'npz'}" if lib == NUMPY else lib)
                    for op in ops
                    if OPS[op].needs_file
                    for lib in libraries[op]
                )
            )
            common = ["--series", name, "--size", str(size), "--workdir", str(workdir)]
            if files:
                record, error = spawn(
                    ["scaling-prepare", "--libraries", ",".join(files), *common], WORKER_TIMEOUT
                )
                if record is None:
                    _progress(f"{name} {size}: preparing files failed: {error}")
            for op in ops:
                libs = libraries[op]
                # the 8 GB map: two runs at most (each builds 8 GB first)
                for index in range(min(repeat, 2) if size == huge else repeat):
                    shift = index % len(libs)
                    for lib in libs[shift:] + libs[:shift]:
                        cell = series.cells.setdefault((op, lib, size), Cell())
                        if cell.error is not None:
                            continue
                        if lib == MT and spent.get(op, 0.0) > MT_BUDGET and cell.runs:
                            continue
                        os.sync()
                        record, error = spawn(
                            ["scaling-worker", "--operation", op, "--library", lib, *common]
                        )
                        if record is None:
                            cell.error = error
                            _progress(f"{name} {size} {op} / {lib}: failed: {error}")
                            continue
                        cell.runs.append(record)
                        series.data_bytes[size] = record["data_bytes"]
                        if lib == MT:
                            spent[op] = spent.get(op, 0.0) + record["seconds"]
                        _progress(
                            f"{name} {_size_label(name, size)} {op} / {lib} run {index + 1}: "
                            f"{format_seconds(record['seconds'])}"
                            + (f" WRONG: {record['problem']}" if record["problem"] else "")
                        )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return series


# ---------------------------------------------------------------------------
# Slopes and the report
# ---------------------------------------------------------------------------


def slope(points: Sequence[tuple[float, float]]) -> float | None:
    """The least-squares slope of ``log(y)`` against ``log(x)``; None under 2 points."""
    points = [(x, y) for x, y in points if x > 0 and y > 0]
    if len(points) < 2:
        return None
    xs = [math.log(x) for x, _ in points]
    ys = [math.log(y) for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else None


def slopes_of(points: Sequence[tuple[float, float]]) -> tuple[float | None, float | None]:
    """The slope fitted over every point, and that of the last two points alone.

    Over all sizes, a fixed cost (the bytes, at a fixed total size) hides a
    per-block cost that dominates only at the largest counts: the last step
    shows the regime where the cost is per block (or per byte)."""
    return slope(points), slope(points[-2:]) if len(points) >= 3 else None


def _size_label(name: str, size: float, data_bytes: int | None = None) -> str:
    if name == "blocks":
        return f"{int(size):,} blocks"
    return format_bytes(data_bytes) if data_bytes else f"W x {size:g}"


def curve(series: Series, op: str, lib: str) -> list[tuple[float, float]]:
    points = []
    for size in series.sizes:
        cell = series.cells.get((op, lib, size))
        if cell is not None and cell.median is not None and cell.error is None:
            points.append((series.x(size), cell.median))
    return points


def _limit(series: Series) -> float:
    return BLOCK_SLOPE_LIMIT if series.name == "blocks" else BYTE_SLOPE_LIMIT


def _cell_text(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    if cell.error is not None:
        return "failed"
    if not cell.runs:
        return "-"
    times = cell.times
    growth = statistics.median(run["peak_growth"] for run in cell.runs) / 1e6
    spread = (
        f" ({format_seconds(min(times))}–{format_seconds(max(times))})" if len(times) > 1 else ""
    )
    wrong = " WRONG" if any(run["problem"] for run in cell.runs) else ""
    median = format_seconds(statistics.median(times))
    return f"{median}{spread}, N={len(times)}, {growth:+.1f} MB{wrong}"


def report_lines(series: Series, operations: Sequence[str], markdown: bool) -> list[str]:
    """A table per operation (sizes by libraries) and the fitted slopes."""
    out: list[str] = []
    for op in operations:
        libs = [lib for lib in _libraries(op) if any(k[:2] == (op, lib) for k in series.cells)]
        if not libs:
            continue
        header = ["size", *libs]
        if BLOCKMAP in libs:
            header += [f"blockmap/{lib.removesuffix('-core')}" for lib in libs if lib != BLOCKMAP]
        rows = []
        for size in series.sizes:
            cells = [series.cells.get((op, lib, size)) for lib in libs]
            if all(cell is None for cell in cells):
                continue
            row = [_size_label(series.name, size, series.data_bytes.get(size))]
            row += [_cell_text(cell) for cell in cells]
            if BLOCKMAP in libs:
                mine = series.cells.get((op, BLOCKMAP, size))
                for lib, cell in zip(libs, cells, strict=True):
                    if lib == BLOCKMAP:
                        continue
                    ok = mine and mine.median and cell and cell.median
                    row.append(f"{mine.median / cell.median:.3g}" if ok else "-")  # type: ignore[union-attr]
            rows.append(row)
        slopes = []
        for lib in libs:
            fitted, last = slopes_of(curve(series, op, lib))
            if fitted is not None:
                over = max(fitted, last or 0.0) > _limit(series)
                flag = " **(grows faster than its work)**" if over else ""
                last_text = f" (last step {last:.2f})" if last is not None else ""
                flag = flag if markdown else flag.replace("**", "")
                slopes.append(f"{lib} {fitted:.2f}{last_text}{flag}")
        title = f"{OPS[op].title} — log-log slope against {_axis(series)}, all sizes: " + (
            ", ".join(slopes) or "-"
        )
        if markdown:
            out += [f"### {title}", "", "| " + " | ".join(header) + " |"]
            out.append("|---|" + "---:|" * (len(header) - 1))
            out += ["| " + " | ".join(row) + " |" for row in rows]
        else:
            out.append(title)
            widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
            for row in [header, *rows]:
                out.append(" | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
        for (skipped_op, lib), why in series.skipped.items():
            if skipped_op == op:
                out.append(f"{lib}: skipped {why}" + ("\n" if markdown else ""))
        out.append("")
    return out


def _axis(series: Series) -> str:
    return "blocks (fixed 80 MB)" if series.name == "blocks" else "bytes (100 blocks)"


def flagged(series: Series, operations: Sequence[str]) -> list[str]:
    """One line per curve whose slope is above the series' limit."""
    lines = []
    for op in operations:
        for lib in _libraries(op):
            fitted, last = slopes_of(curve(series, op, lib))
            if fitted is not None and max(fitted, last or 0.0) > _limit(series):
                lines.append(
                    f"{series.name}: {OPS[op].title} / {lib}: slope {fitted:.2f}, "
                    f"last step {last if last is None else round(last, 2)}"
                )
    return lines


CHART_COLORS = {BLOCKMAP: "#1b9e77", NUMPY: "#7570b3", MT: "#d95f02", NUMPY_VALUES: "#a6a6d8"}


def write_chart(all_series: Sequence[Series], operations: Sequence[str], path: Path) -> None:
    """Log-log panels: time against blocks, time against bytes; one panel per operation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(
        len(all_series),
        len(operations),
        figsize=(2.6 * len(operations), 2.8 * len(all_series)),
        squeeze=False,
    )
    for row, series in enumerate(all_series):
        for column, op in enumerate(operations):
            ax = axes[row][column]
            for lib in _libraries(op):
                points = curve(series, op, lib)
                if points:
                    xs, ys = zip(*points, strict=True)
                    ax.plot(xs, ys, "o-", label=lib, color=CHART_COLORS[lib], markersize=3)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.grid(alpha=0.3, which="both")
            ax.tick_params(labelsize=6)
            if row == 0:
                ax.set_title(op, fontsize=8)
            ax.set_xlabel(_axis(series), fontsize=7)
            if column == 0:
                ax.set_ylabel("median time (s)", fontsize=7)
    handles = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    figure.legend(list(handles.values()), list(handles), loc="upper right", fontsize=7)
    figure.tight_layout(rect=(0, 0, 0.94, 1))
    figure.savefig(path, dpi=90)
    plt.close(figure)


def write_markdown(
    all_series: Sequence[Series],
    operations: Sequence[str],
    path: Path,
    command: str,
    seconds: float,
) -> None:
    """Write the scaling report (``docs/scaling.md``); whatever follows the
    :data:`NOTES_MARKER` line of an existing page (the written analysis) is kept."""
    import blockmap

    notes = ""
    if path.exists():
        text = path.read_text()
        if NOTES_MARKER in text:
            notes = text[text.index(NOTES_MARKER) :]
    with open(path, "w") as out:
        print("# Scaling\n", file=out)
        print(
            f"Generated by `{command}` from the repository root on "
            f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z} "
            f"({platform.machine()}, nproc {len(os.sched_getaffinity(0))}; blockmap "
            f"{blockmap.__version__}, numpy {np.__version__}, {MT} "
            f"{metatensor_version() or 'not installed'}; {seconds:.0f} s in all). "
            "How each operation's time grows with its work: at a fixed total size "
            "(80 MB of values) over 1 to 10,000 blocks, each block values `(n, 3, 20)` "
            "float64 with its samples labels; and over maps shaped like W (100 blocks with "
            "a gradient) of growing size. Every library gets the same arrays (numpy: the "
            "flat list of values and label arrays; `numpy-values`: the value arrays alone). "
            "Each cell is the median over N fresh processes, with min–max and the median "
            "peak resident memory growth; libraries are interleaved run by run, so the "
            "ratios compare runs made side by side. The slope is a least-squares fit of "
            "log(time) against log(blocks) or log(bytes) over every size (1 is linear, 0 "
            "is constant), with the slope of the last step (the two largest sizes), where "
            "a per-block cost dominates the fixed cost of the bytes; "
            f"either above {BLOCK_SLOPE_LIMIT} (blocks) or {BYTE_SLOPE_LIMIT} (bytes), the curve "
            "is flagged as growing faster than its work. metatensor-core runs within "
            f"{MT_BUDGET:.0f} s per operation and series: once over, its larger sizes "
            "are skipped, and its repeats at a size once the budget is spent.\n",
            file=out,
        )
        print("![each operation's time against blocks and bytes](scaling.png)\n", file=out)
        for series in all_series:
            print(f"## Time against {_axis(series)}\n", file=out)
            for line in report_lines(series, operations, markdown=True):
                print(line, file=out)
        lines = [line for series in all_series for line in flagged(series, operations)]
        print("## Flagged curves\n", file=out)
        for line in lines or ["none"]:
            print(f"- {line}", file=out)
        print(file=out)
        print("## What is timed\n", file=out)
        print("| operation | library | timed call |\n|---|---|---|", file=out)
        for op in operations:
            for lib, call in OPS[op].calls.items():
                print(f"| {OPS[op].title} | {lib} | `{call}` |", file=out)
        print(file=out)
        print(notes or f"{NOTES_MARKER}\n", end="", file=out)


# ---------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="smallest sizes, one run each")
    parser.add_argument(
        "--repeat", type=int, default=3, metavar="N", help="fresh processes per cell"
    )
    parser.add_argument(
        "--ops",
        default=",".join(OPS),
        metavar="OPS",
        help=f"comma-separated operations (default: {','.join(OPS)})",
    )
    parser.add_argument(
        "--series", default="blocks,bytes", help="comma-separated series (blocks, bytes)"
    )
    parser.add_argument(
        "--huge",
        action="store_true",
        help=f"add the 8 GB W-shaped map, for {', '.join(HUGE_OPERATIONS)} only",
    )
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="write docs/scaling.md")
    parser.add_argument("--chart", type=Path, metavar="FILE", help="write the log-log chart")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every run as JSON")


def run(args: argparse.Namespace) -> int:
    operations = [op.strip() for op in args.ops.split(",") if op.strip()]
    unknown = [op for op in operations if op not in OPS]
    if unknown or args.repeat < 1:
        print(f"unknown operations {unknown} or --repeat < 1", file=sys.stderr)
        return 2
    repeat = 1 if args.quick else args.repeat
    has_mt = metatensor_version() is not None
    start = time.perf_counter()
    all_series = []
    for name in args.series.split(","):
        if name == "blocks":
            sizes: list[float] = list(BLOCK_COUNTS[:3] if args.quick else BLOCK_COUNTS)
        else:
            sizes = list(BYTE_SCALES[:2] if args.quick else BYTE_SCALES)
            if args.huge and not args.quick:
                sizes.append(HUGE_SCALE)
        huge = HUGE_SCALE if args.huge else None
        all_series.append(run_series(name, sizes, operations, repeat, has_mt, huge))
    seconds = time.perf_counter() - start
    for series in all_series:
        print(f"== time against {_axis(series)} ==")
        for line in report_lines(series, operations, markdown=False):
            print(line)
    lines = [line for series in all_series for line in flagged(series, operations)]
    print("flagged (grows faster than its work):")
    for line in lines or ["none"]:
        print(f"  {line}")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "series": series.name,
                        "sizes": series.sizes,
                        "data_bytes": {str(k): v for k, v in series.data_bytes.items()},
                        "cells": [
                            {"operation": op, "library": lib, "size": size, "runs": cell.runs}
                            | ({"error": cell.error} if cell.error else {})
                            for (op, lib, size), cell in series.cells.items()
                        ],
                        "skipped": [
                            {"operation": op, "library": lib, "why": why}
                            for (op, lib), why in series.skipped.items()
                        ],
                    }
                    for series in all_series
                ],
                indent=1,
            )
        )
        print(f"every run written to {args.json}")
    if args.markdown is not None:
        command = "python -m bench scaling" + (" --quick" if args.quick else "")
        if args.huge:
            command += " --huge"
        if not args.quick and args.repeat != 3:
            command += f" --repeat {args.repeat}"
        command += f" --markdown {args.markdown}" + (f" --chart {args.chart}" if args.chart else "")
        write_markdown(all_series, operations, args.markdown, command, seconds)
        print(f"markdown written to {args.markdown}")
    if args.chart is not None:
        write_chart(all_series, operations, args.chart)
        print(f"chart written to {args.chart}")
    wrong = any(
        cell.error or any(run["problem"] for run in cell.runs)
        for series in all_series
        for cell in series.cells.values()
    )
    return 1 if wrong else 0
