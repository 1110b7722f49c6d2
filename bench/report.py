"""The report of a benchmark: tables for a terminal, a markdown page, a chart.

:func:`print_report` prints one table per family (medians of the time and of
the peak resident memory growth, blockmap's ratios to the others), the
targets and any problem; :func:`write_markdown` writes the same as
``docs/benchmarks.md``, with the machine, every run and the timed calls;
:func:`write_chart` draws the median times as a bar chart (matplotlib).
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import numpy as np

from .measure import format_bytes, print_table, short_name
from .registry import LIBRARIES, OPERATIONS, OTHER_NAME, OTHERS, check_targets, metatensor_version
from .runner import BenchResult

__all__ = [
    "print_report",
    "runs_phrase",
    "workload_summary",
    "write_chart",
    "write_markdown",
    "markers",
    "write_section",
]


def runs_phrase(count: int) -> str:
    """``1 run``, ``3 runs``."""
    return f"{count} run" if count == 1 else f"{count} runs"


def _table_title(result: BenchResult, family: str) -> str:
    return (
        f"{family}: medians of {runs_phrase(result.repeat)}, each in a fresh process; "
        "cell = median op time (min–max over the processes), median peak RSS growth; "
        "ratio = blockmap's time / theirs"
    )


def print_report(result: BenchResult, file: TextIO | None = None, markdown: bool = False) -> None:
    """Print the tables (one per family), the targets and any problem."""
    out = sys.stdout if file is None else file
    for family in result.families():
        if markdown:
            print(f"## {family}\n", file=out)
        print_table(
            _table_title(result, family),
            result.rows(family),
            others=OTHERS,
            file=out,
            markdown=markdown,
        )
        print(file=out)
    targets = check_targets(result)
    if targets:
        print("## Targets\n" if markdown else "targets:", file=out)
        if result.small:
            print("(--small: W is too small for these verdicts to mean anything)", file=out)
            if markdown:
                print(file=out)
        for target in targets:
            verdict = f"**{target.verdict}**" if markdown else target.verdict
            detail = f": {target.detail}" if target.detail else ""
            print(f"{'- ' if markdown else '  '}{target.text}: {verdict}{detail}", file=out)
        print(file=out)
    for library, reason in result.missing.items():
        print(f"{library}: {reason}; its cells show '-'.", file=out)
    problems = result.problems()
    if problems:
        print("## Problems\n" if markdown else "problems:", file=out)
        for line in problems:
            print(("- " if markdown else "  ") + line, file=out)
        print(file=out)


def _machine_facts() -> list[tuple[str, str]]:
    """What the markdown header says about the machine and the software."""
    import blockmap

    facts = [("date", datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"))]
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            models = [line.split(":", 1)[1].strip() for line in cpuinfo if "model name" in line]
        if models:
            cpu = models[0]
    except OSError:
        pass
    facts.append(("CPU", f"{cpu}; nproc {len(os.sched_getaffinity(0))}"))
    try:
        with open("/proc/meminfo") as meminfo:
            total = next(line for line in meminfo if line.startswith("MemTotal:"))
        facts.append(("memory", format_bytes(int(total.split()[1]) * 1024) + " total"))
    except (OSError, StopIteration):
        pass
    facts.append(("system", f"{platform.system()} {platform.release()}"))
    facts.append(("Python", platform.python_version()))
    facts.append(("blockmap", blockmap.__version__))
    facts.append(("numpy", np.__version__))
    facts.append((OTHER_NAME, metatensor_version() or "not installed"))
    return facts


def _runs_lines(result: BenchResult) -> Iterator[str]:
    """One line per operation and library: every run's time and memory growth."""
    for (operation, library), outcome in result.outcomes.items():
        if not outcome.runs:
            continue
        times = ", ".join(f"{run['seconds']:.3g}" for run in outcome.runs)
        growths = ", ".join(f"{run['peak_growth'] / 1e6:+.1f}" for run in outcome.runs)
        notes = sorted({run["note"] for run in outcome.runs if run["note"]})
        note = f"; {', '.join(notes)}" if notes else ""
        yield f"{operation} / {library}: {times} s; peak {growths} MB{note}"


#: the families whose section of docs/benchmarks.md a command of their own
#: writes (``python -m bench <family>``), with their headings;
#: :func:`write_markdown` keeps these sections
SECTIONS = {
    "torch": "## torch: DataLoader, join and split",
    "datasets": "## datasets: many maps in one file",
    "training": "## training: metatrain SOAP-BPNN epochs",
}


#: sections written by hand, with their headings: regenerating the page
#: keeps them as they are
HAND_WRITTEN = {
    "growth": "## Datasets that grow",
    "p5": "## Protocol 5 round trips, before and after issue 45",
    "design": "## Figures behind design choices",
}


def markers(family: str) -> tuple[str, str]:
    """The lines between which ``family``'s section lies."""
    if family in HAND_WRITTEN:
        return (
            f"<!-- {family}: written by hand, kept when this page is regenerated -->",
            f"<!-- end of {family} -->",
        )
    return (
        f"<!-- {family} family: written by `python -m bench {family}` -->",
        f"<!-- end of the {family} family -->",
    )


def _section(content: str, family: str) -> str | None:
    begin, end = markers(family)
    if begin in content and end in content:
        return content[content.index(begin) : content.index(end) + len(end)]
    return None


def write_section(path: Path, text: str, family: str = "torch") -> None:
    """Put ``text`` between ``family``'s :func:`markers` in ``path``
    (appended, with its heading, when the markers are not there yet)."""
    begin, end = markers(family)
    content = path.read_text() if path.exists() else ""
    section = f"{begin}\n{text}{end}"
    old = _section(content, family)
    if old is not None:
        content = content.replace(old, section)
    else:
        heading = {**SECTIONS, **HAND_WRITTEN}[family]
        content = content.rstrip("\n") + f"\n\n{heading}\n\n{section}\n"
    path.write_text(content)


def write_markdown(
    result: BenchResult, path: Path, command: str, chart: Path | None = None
) -> None:
    """Write the report as a markdown page (``docs/benchmarks.md``) to
    ``path``, keeping the sections of :data:`SECTIONS` and
    :data:`HAND_WRITTEN` it holds; the page shows ``chart`` (the PNG of
    :func:`write_chart`), when given."""
    content = path.read_text() if path.exists() else ""
    kept = {family: _section(content, family) for family in (*SECTIONS, *HAND_WRITTEN)}
    _write_markdown(result, path, command, chart=chart)
    for family, section in kept.items():
        if section is not None:
            begin, end = markers(family)
            write_section(path, section[len(begin) + 1 : -len(end)], family)


def _write_markdown(
    result: BenchResult, path: Path, command: str, chart: Path | None = None
) -> None:
    with open(path, "w") as out:
        print("# Benchmarks\n", file=out)
        print(
            f"Generated by `{command}`, run from the repository root (the harness is "
            f"`bench/`, outside the package). The workload W ({workload_summary(result)}) is "
            "the one of the shared `workload.md`: 100 blocks of values `(2400, 3, 100)` "
            "float64 with a `positions` gradient `(300, 3, 3, 100)`.\n",
            file=out,
        )
        for name, value in _machine_facts():
            print(f"- {name}: {value}", file=out)
        print(file=out)
        print(
            "Each cell is the median over fresh processes of the operation's time alone "
            "(`time.perf_counter`) and of its peak resident memory growth (the kernel's "
            "peak-RSS mark is reset just before the operation). Each process builds W's "
            "arrays from the same seed and the operation's input before timing (for pickle "
            "loads: the object and its pickle, made in that process), and checks the "
            "loaded data against W after (for pickle dumps: the pickle, loaded back). "
            "Files to load are written once per run and "
            "read from the page cache; dirty pages are flushed (`os.sync`) before every "
            "run, so no run pays for an earlier one's writes, and one untimed warm-up "
            "run of each operation comes first (the first run after a large write is "
            "slower, whichever library makes it). Absolute times drift on "
            "this small, shared machine; the ratios, measured side by side with the "
            "libraries interleaved run by run (each round starting with the next "
            "library), hold better.\n",
            file=out,
        )
        if chart is not None:
            where = os.path.relpath(chart, path.parent)
            print(f"![median times on W, log scale]({where})\n", file=out)
        print_report(result, out, markdown=True)
        # written here, so that regenerating this page keeps the link
        print("## Scaling\n", file=out)
        print(
            "How each operation's time grows with the number of blocks and with the "
            "bytes of the map, with log-log slopes, is in [scaling.md](scaling.md) "
            "(`make scaling`, `python -m bench scaling`):\n",
            file=out,
        )
        print("![each operation's time against blocks and bytes](scaling.png)\n", file=out)
        print("## What is timed\n", file=out)
        print("| operation | library | timed call |\n|---|---|---|", file=out)
        for name in result.operations:
            operation = OPERATIONS[name]
            for library in LIBRARIES:
                implementation = operation.implementations.get(library)
                call = "not supported" if implementation is None else f"`{implementation.call}`"
                print(f"| {operation.title} | {library} | {call} |", file=out)
        print(file=out)
        print("## Every run\n", file=out)
        for line in _runs_lines(result):
            print(f"- {line}", file=out)


#: Bar colours of the chart, per library.
CHART_COLORS: dict[str, str] = {"blockmap": "#1b9e77", "numpy": "#7570b3", OTHER_NAME: "#d95f02"}


def write_chart(result: BenchResult, path: Path) -> None:
    """Write a bar chart of the median times (log scale) to ``path`` (PNG).

    One group of bars per operation, one bar per library; operations a
    library does not support, or whose runs failed, have no bar.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result.operations)
    width = 0.8 / len(LIBRARIES)
    figure, axes = plt.subplots(figsize=(max(8.0, 0.9 * len(names) + 2.0), 5.0))
    for index, library in enumerate(LIBRARIES):
        positions, medians = [], []
        for row, name in enumerate(names):
            measurement = result.measurement(name, library)
            if measurement is not None and measurement.median > 0.0:
                positions.append(row + (index - (len(LIBRARIES) - 1) / 2) * width)
                medians.append(measurement.median)
        axes.bar(
            positions,
            medians,
            width,
            label=short_name(library),
            color=CHART_COLORS.get(library),
        )
    axes.set_yscale("log")
    axes.set_ylabel("median time (s), log scale")
    axes.set_xticks(range(len(names)))
    axes.set_xticklabels(names, rotation=30, ha="right")
    axes.set_title(
        f"workload W ({workload_summary(result)}): medians of {runs_phrase(result.repeat)}, "
        "fresh process each; lower is better"
    )
    axes.grid(axis="y", which="major", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def workload_summary(result: BenchResult) -> str:
    """W's size as measured, and whether it was the small W."""
    size = "size unknown" if result.data_bytes is None else format_bytes(result.data_bytes)
    return f"--small, {size}" if result.small else size
