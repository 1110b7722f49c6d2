"""The runner of the benchmark: every run of an operation in a fresh process.

:func:`run_bench` measures operations of :data:`bench.registry.OPERATIONS`
(the families must be imported: :mod:`bench.families`). Files that load
operations read are written first, once per benchmark run, by one separate
process (``python -m bench prepare ...``) into a temporary directory deleted
at the end; they are read from the page cache. Then each run is a fresh
process (``python -m bench worker ...``) that

1. builds W's arrays (from :data:`SEED`) and whatever the operation starts
   from (not timed);
2. resets the kernel's peak-RSS mark, then times only the operation with
   :func:`time.perf_counter` and reads the growth of the peak resident memory
   (:func:`bench.measure.measure`);
3. checks what the operation produced (not timed), and prints one JSON line.

The parent collects the runs into a :class:`BenchResult`, whose medians the
report (:mod:`bench.report`) shows.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .measure import Cell, Measurement, Row, format_growth, format_seconds, measure
from .registry import (
    LIBRARIES,
    MODULES,
    OPERATIONS,
    OTHER_NAME,
    OTHERS,
    PREPARED,
    CheckError,
    Context,
    metatensor_version,
)
from .workload import SMALL, make_arrays, nbytes

__all__ = ["SEED", "BenchResult", "Outcome", "add_commands", "run_bench"]

#: Seed of W's values in every process.
SEED = 0
#: Seconds one worker process may take before it counts as failed.
WORKER_TIMEOUT = 900.0
#: The folder holding the ``bench`` package, where worker processes start.
ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------
# Worker processes
# ---------------------------------------------------------------------------


def _sizes(small: bool) -> dict[str, int]:
    return SMALL if small else {}


def _worker(operation: str, library: str, workdir: Path, small: bool) -> dict[str, Any]:
    """One timed run, in this process; returns the JSON record the parent reads."""
    implementation = OPERATIONS[operation].implementations[library]
    for module in MODULES[library]:
        importlib.import_module(module)
    arrays = make_arrays(seed=SEED, **_sizes(small))
    context = Context(arrays, workdir)
    state = implementation.setup(context)
    measured = measure(lambda: implementation.run(state), repeat=1)
    record: dict[str, Any] = {
        "operation": operation,
        "library": library,
        "seconds": measured.times[0],
        "peak_growth": measured.peak_growth,
        "data_bytes": nbytes(arrays),
        "note": "",
        "problem": None,
    }
    try:
        record["note"] = implementation.finish(context, state, measured.result)
    except CheckError as error:
        record["problem"] = str(error)
    return record


def _prepare(names: Sequence[str], workdir: Path, small: bool) -> dict[str, Any]:
    """Write the prepared files ``names`` into ``workdir``; one failure spares the others."""
    arrays = make_arrays(seed=SEED, **_sizes(small))
    failed: dict[str, str] = {}
    for name in names:
        try:
            PREPARED[name](arrays, workdir / name)
        except Exception as error:  # reported to the parent, which shows "failed"
            failed[name] = f"{type(error).__name__}: {error}"
    return {"failed": failed}


def _run_worker(args: argparse.Namespace) -> int:
    record = _worker(args.operation, args.library, args.workdir, args.small)
    print(json.dumps(record), flush=True)
    return 0


def _run_prepare(args: argparse.Namespace) -> int:
    record = _prepare(args.files.split(","), args.workdir, args.small)
    print(json.dumps(record), flush=True)
    return 0


def add_commands(commands: Any) -> None:
    """Add the ``worker`` and ``prepare`` commands, the fresh processes that
    :func:`run_bench` starts, to ``commands`` (an argparse subparsers action).

    Call it once the families are imported: ``--operation`` accepts the
    registered operations."""
    worker = commands.add_parser(
        "worker", help="(started by bench) time one run of one operation in this process"
    )
    worker.add_argument("--operation", required=True, choices=sorted(OPERATIONS))
    worker.add_argument("--library", required=True, choices=LIBRARIES)
    worker.set_defaults(run=_run_worker)
    prepare = commands.add_parser(
        "prepare", help="(started by bench) write the files that load operations read"
    )
    prepare.add_argument("--files", required=True, help="comma-separated prepared file names")
    prepare.set_defaults(run=_run_prepare)
    for command in (worker, prepare):
        command.add_argument("--workdir", required=True, type=Path)
        command.add_argument("--small", action="store_true")


def spawn(
    arguments: Sequence[str], timeout: float = WORKER_TIMEOUT
) -> tuple[dict[str, Any] | None, str]:
    """Run ``python -m bench ARGUMENTS`` in a fresh process (every harness
    measures that way); its JSON record (the last line that starts with
    ``{``), or None and why not (a timeout, the last line of stderr)."""
    command = [sys.executable, "-m", "bench", *arguments]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return None, lines[-1]
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            record: dict[str, Any] = json.loads(line)
            return record, ""
    return None, "no result printed"


# ---------------------------------------------------------------------------
# Running a benchmark
# ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """The runs of one operation by one library.

    Attributes:
        runs: the worker records, one per run.
        error: why the runs stopped, when one failed (the cell shows ``failed``).
    """

    runs: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    @property
    def measurement(self) -> Measurement | None:
        """Times of every run, with the median of their peak memory growths."""
        if not self.runs:
            return None
        growth = statistics.median(run["peak_growth"] for run in self.runs)
        return Measurement([run["seconds"] for run in self.runs], int(growth))

    @property
    def cell(self) -> Cell:
        """The table cell: the measurement, or ``failed``."""
        return "failed" if self.error is not None else self.measurement


@dataclass
class BenchResult:
    """Everything one benchmark run measured.

    Attributes:
        operations: the operation names, in row order.
        repeat: runs of each operation by each library.
        small: whether the small W was used.
        outcomes: ``(operation, library)`` -> runs, for every library that was run.
        missing: library -> why it was not run at all (e.g. not installed).
        data_bytes: W's size as the workers counted it.
        seconds: wall-clock time of the whole benchmark.
    """

    operations: list[str]
    repeat: int
    small: bool
    outcomes: dict[tuple[str, str], Outcome] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    data_bytes: int | None = None
    seconds: float = 0.0

    def cell(self, operation: str, library: str) -> Cell:
        """The cell of ``operation`` by ``library``: ``None`` when not run."""
        outcome = self.outcomes.get((operation, library))
        return None if outcome is None else outcome.cell

    def measurement(self, operation: str, library: str) -> Measurement | None:
        """The measurement of ``operation`` by ``library``, when it ran without failing."""
        cell = self.cell(operation, library)
        return cell if isinstance(cell, Measurement) else None

    def families(self) -> list[str]:
        """The table families of the measured operations, in order of first appearance."""
        return list(dict.fromkeys(OPERATIONS[name].family for name in self.operations))

    def rows(self, family: str) -> list[Row]:
        """The table rows of ``family``."""
        return [
            Row(
                OPERATIONS[name].title,
                self.cell(name, LIBRARIES[0]),
                {other: self.cell(name, other) for other in OTHERS},
            )
            for name in self.operations
            if OPERATIONS[name].family == family
        ]

    def problems(self) -> list[str]:
        """Failed runs and wrong results, one line each."""
        lines = []
        for (operation, library), outcome in self.outcomes.items():
            if outcome.error is not None:
                lines.append(f"{operation} / {library}: failed: {outcome.error}")
            for index, run in enumerate(outcome.runs, start=1):
                if run.get("problem"):
                    lines.append(f"{operation} / {library} run {index}: WRONG: {run['problem']}")
        return lines


#: Dirty page cache, in bytes, above which :func:`_settle` flushes it.
SETTLE_DIRTY_BYTES = 64 * 2**20


def _dirty_bytes() -> int | None:
    """File pages written but not yet on disk (``Dirty`` + ``Writeback`` of
    ``/proc/meminfo``), or None when unknown."""
    try:
        with open("/proc/meminfo") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo)
        return sum(int(fields[name].split()[0]) * 1024 for name in ("Dirty", "Writeback"))
    except (OSError, KeyError, ValueError):
        return None


def _settle() -> None:
    """Flush dirty file pages to disk, so that no run pays for an earlier one's writes.

    Prepared files (gigabytes) and saved files would otherwise still be written
    back while the next runs are timed. Skipped when little is dirty; not timed.
    """
    dirty = _dirty_bytes()
    if hasattr(os, "sync") and (dirty is None or dirty > SETTLE_DIRTY_BYTES):
        os.sync()


def _progress(message: str, file: TextIO | None) -> None:
    if file is not None:
        print(message, file=file, flush=True)


def _warm_up(
    name: str,
    result: BenchResult,
    libraries: Sequence[str],
    workdir: Path,
    small: bool,
    progress: TextIO | None,
) -> None:
    """One untimed run of ``name``, by the first library able to, before the timed ones.

    The first run after a large write (the prepared files, a previous operation)
    is slower whoever makes it, even after ``os.sync``; this run takes that cost,
    and its result is discarded.
    """
    for library in libraries:
        runs = result.outcomes.get((name, library))
        if runs is not None and runs.error is None:
            _settle()
            _, error = spawn(
                ["worker", "--operation", name, "--library", library, "--workdir", str(workdir)]
                + (["--small"] if small else [])
            )
            _progress(
                f"{name} / {library} warm-up (not counted){': failed: ' + error if error else ''}",
                progress,
            )
            return


def run_bench(
    operations: Sequence[str],
    repeat: int = 5,
    small: bool = False,
    progress: TextIO | None = None,
    libraries: Sequence[str] = LIBRARIES,
) -> BenchResult:
    """Measure ``operations`` (names in :data:`OPERATIONS`), ``repeat`` fresh
    processes per library each (of ``libraries``, by default all),
    interleaving the libraries run by run.

    Prepared files are written first by one process into a temporary directory,
    which is deleted before returning. Progress lines go to ``progress``.
    """
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    unknown = [name for name in operations if name not in OPERATIONS]
    if unknown:
        raise ValueError(f"unknown operations {unknown}; known: {list(OPERATIONS)}")

    start = time.perf_counter()
    result = BenchResult(list(operations), repeat, small)
    if metatensor_version() is None:
        result.missing[OTHER_NAME] = "not installed (pip install metatensor-core==0.2.6)"
    libraries = [
        library for library in LIBRARIES if library in libraries and library not in result.missing
    ]
    work = [
        (name, library)
        for name in operations
        for library in libraries
        if library in OPERATIONS[name].implementations
    ]

    workdir = Path(tempfile.mkdtemp(prefix="blockmap-bench-"))
    try:
        needs = list(
            dict.fromkeys(
                need
                for name, library in work
                for need in OPERATIONS[name].implementations[library].needs
            )
        )
        failed_files: dict[str, str] = {}
        if needs:
            _progress(f"preparing {', '.join(needs)} in {workdir}", progress)
            record, error = spawn(
                ["prepare", "--files", ",".join(needs), "--workdir", str(workdir)]
                + (["--small"] if small else [])
            )
            failed_files = {need: error for need in needs} if record is None else record["failed"]
            for need, reason in failed_files.items():
                _progress(f"preparing {need} failed: {reason}", progress)

        for name, library in work:
            outcome = result.outcomes.setdefault((name, library), Outcome())
            for need in OPERATIONS[name].implementations[library].needs:
                if need in failed_files:
                    outcome.error = f"preparing {need}: {failed_files[need]}"

        for name in operations:
            _warm_up(name, result, libraries, workdir, small, progress)
            for index in range(1, repeat + 1):
                # Interleave the libraries, starting each round with the next one,
                # so that drift and position in the sequence hit them all alike.
                shift = (index - 1) % len(libraries)
                for library in libraries[shift:] + libraries[:shift]:
                    runs = result.outcomes.get((name, library))
                    if runs is None or runs.error is not None:
                        continue
                    _settle()
                    record, error = spawn(
                        ["worker", "--operation", name, "--library", library]
                        + ["--workdir", str(workdir)]
                        + (["--small"] if small else [])
                    )
                    if record is None:
                        runs.error = error
                        _progress(f"{name} / {library} run {index}: failed: {error}", progress)
                        continue
                    runs.runs.append(record)
                    result.data_bytes = record["data_bytes"]
                    _progress(
                        f"{name} / {library} run {index}/{repeat}: "
                        f"{format_seconds(record['seconds'])}, "
                        f"{format_growth(record['peak_growth'])}",
                        progress,
                    )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result.seconds = time.perf_counter() - start
    return result
