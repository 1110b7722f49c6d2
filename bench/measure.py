"""Measuring one operation, and printing what was measured.

:func:`measure` times repeated runs of an operation with
:func:`time.perf_counter` and reads the growth of the peak resident memory
over them (the kernel's peak-RSS mark is reset first); the ``format_*``
functions write durations, sizes, memory growths and ratios; :func:`print_table`
prints rows of blockmap's measurement next to other libraries', with the
ratios, for a terminal or as markdown.
"""

from __future__ import annotations

import gc
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Cell",
    "Measurement",
    "Row",
    "format_bytes",
    "format_growth",
    "format_ratio",
    "format_seconds",
    "measure",
    "print_table",
    "short_name",
]


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
    spread = ""
    if len(cell.times) > 1:
        spread = f" ({format_seconds(min(cell.times))}–{format_seconds(max(cell.times))})"
    return f"{format_seconds(cell.median)}{spread}, {format_growth(cell.peak_growth)}"


def print_table(
    title: str,
    rows: Iterable[Row],
    others: Sequence[str],
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
