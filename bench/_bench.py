"""``python -m blockmap bench``: time operations on the workload W against numpy and
metatensor-core, each run in a fresh process.

Every operation is done by three libraries on the same arrays (those of
:func:`blockmap._workload.make_arrays`, from the same seed): blockmap, numpy (the
arrays as a flat list: values, samples, gradient values, gradient samples of each
block) and metatensor-core. Each run is a fresh process
(``python -m blockmap._bench worker ...``) that

1. builds W's arrays and whatever the operation starts from (not timed);
2. resets the kernel's peak-RSS mark, then times only the operation with
   :func:`time.perf_counter` and reads the growth of the peak resident memory
   (:func:`blockmap._demo.measure`);
3. checks what the operation produced (loaded data equal to W, not timed), and
   prints one JSON line.

The parent collects the runs and reports medians. Files that load operations
read are written once per benchmark run, by one separate process, into a
temporary directory deleted at the end; they are read from the page cache.

Operations come in families, one table each: ``files`` (save, load, mapped
load) and ``pickle`` (protocol 5 with out-of-band buffers, dumps and loads
together; protocol 5 in-band and protocol 4, dumps and loads apart). The bytes
that a pickle ``loads`` reads are made in the worker before timing, from the
object built there; the bytes a ``dumps`` makes are loaded back after timing
and checked against W.

Operations live in a registry, :data:`OPERATIONS`: an :class:`Operation` maps each
library that supports it to an :class:`Implementation`; :func:`register` adds one,
and :data:`TARGETS` holds the goals checked on the numbers. A library missing
from an operation shows ``-``, as does metatensor-core when it is not installed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pickle
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from . import _workload
from ._demo import (
    OTHER_NAME,
    SMALL_WORKLOAD,
    Cell,
    Measurement,
    Row,
    _metatensor_version,
    format_bytes,
    format_growth,
    format_seconds,
    measure,
    print_table,
    short_name,
)

__all__ = [
    "LIBRARIES",
    "OPERATIONS",
    "PREPARED",
    "TARGETS",
    "BenchResult",
    "CheckError",
    "Context",
    "Goal",
    "Implementation",
    "Operation",
    "Target",
    "add_arguments",
    "check_targets",
    "main",
    "memory_goal",
    "register",
    "relative_memory_goal",
    "register_prepared",
    "run",
    "run_bench",
    "time_goal",
    "write_markdown",
]

#: The libraries compared, in column order; blockmap first.
LIBRARIES: tuple[str, ...] = ("blockmap", "numpy", OTHER_NAME)
#: The libraries blockmap is compared with.
OTHERS: tuple[str, ...] = LIBRARIES[1:]
#: Seed of W's values in every process.
SEED = 0
#: Seconds one worker process may take before it counts as failed.
WORKER_TIMEOUT = 900.0
#: The folder holding the ``bench`` package, where worker processes start.
ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------


class CheckError(Exception):
    """Raised by an implementation's ``finish`` when the operation's result is wrong."""


@dataclass(frozen=True)
class Context:
    """What a worker process hands to an implementation.

    Attributes:
        arrays: W's arrays, built in this process from :data:`SEED`.
        workdir: the benchmark run's temporary directory, holding the prepared files.
    """

    arrays: _workload.WorkloadArrays
    workdir: Path


def _no_setup(context: Context) -> Any:
    return context


def _no_finish(context: Context, state: Any, result: Any) -> str:
    return ""


@dataclass(frozen=True)
class Implementation:
    """How one library does one operation.

    Attributes:
        call: the timed code, for the docs (e.g. ``np.savez(path, *arrays)``).
        run: the timed operation; it receives what ``setup`` returned, and what it
            returns stays alive until ``finish`` (so a loaded map is still held
            when the peak memory is read).
        setup: builds the operation's input from the context (not timed).
        finish: checks the result and cleans up (not timed); returns a short note
            for the report (``""`` for none) or raises :class:`CheckError`.
        needs: names of :data:`PREPARED` files the operation reads.
    """

    call: str
    run: Callable[[Any], Any]
    setup: Callable[[Context], Any] = _no_setup
    finish: Callable[[Context, Any, Any], str] = _no_finish
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Operation:
    """One benchmarked operation: its row in a table and how each library does it.

    Attributes:
        name: the registry key, as given to ``--ops``.
        title: the row's label.
        family: the table the row belongs to (one table per family).
        implementations: library name -> implementation; a library not listed
            does not support the operation (its cell shows ``-``).
    """

    name: str
    title: str
    family: str
    implementations: Mapping[str, Implementation]


#: Operation name -> operation, in the order rows are printed.
OPERATIONS: dict[str, Operation] = {}
#: Writes a prepared file (or directory) at a path from W's arrays.
Writer = Callable[[_workload.WorkloadArrays, Path], None]
#: Prepared file name (in the work directory) -> its writer.
PREPARED: dict[str, Writer] = {}


def register(operation: Operation) -> Operation:
    """Add ``operation`` to :data:`OPERATIONS`; its names must be known and unique."""
    if operation.name in OPERATIONS:
        raise ValueError(f"operation {operation.name!r} is already registered")
    for library, implementation in operation.implementations.items():
        if library not in LIBRARIES:
            raise ValueError(f"unknown library {library!r} in {operation.name!r}")
        for need in implementation.needs:
            if need not in PREPARED:
                raise ValueError(f"{operation.name!r} needs unknown prepared file {need!r}")
    OPERATIONS[operation.name] = operation
    return operation


def register_prepared(name: str) -> Callable[[Writer], Writer]:
    """Decorator adding a writer of the prepared file ``name`` to :data:`PREPARED`."""

    def decorate(write: Writer) -> Writer:
        PREPARED[name] = write
        return write

    return decorate


# ---------------------------------------------------------------------------
# Shared helpers of the implementations
# ---------------------------------------------------------------------------


def flat_arrays(arrays: _workload.WorkloadArrays) -> list[np.ndarray]:
    """W as numpy's side holds it: per block, values, samples, then for each
    gradient its values and samples."""
    flat: list[np.ndarray] = []
    for block in arrays.blocks:
        flat += [block.values, block.samples.values]
        for gradient in block.gradients:
            flat += [gradient.values, gradient.samples.values]
    return flat


def _flat_map(tensor: Any) -> Iterator[tuple[str, np.ndarray]]:
    """The arrays of a blockmap or metatensor map in :func:`flat_arrays` order, named."""
    for index in range(len(tensor.keys)):
        block = tensor.block(index)
        yield f"block {index} values", np.asarray(block.values)
        yield f"block {index} samples", np.asarray(block.samples.values)
        for parameter, gradient in block.gradients():
            yield f"block {index} gradient {parameter!r} values", np.asarray(gradient.values)
            yield (
                f"block {index} gradient {parameter!r} samples",
                np.asarray(gradient.samples.values),
            )


def _check_arrays(got: Sequence[tuple[str, np.ndarray]], arrays: _workload.WorkloadArrays) -> str:
    """Raise :class:`CheckError` unless ``got`` holds W's arrays, in order, exactly."""
    expected = flat_arrays(arrays)
    if len(got) != len(expected):
        raise CheckError(f"{len(got)} arrays loaded, W has {len(expected)}")
    for (name, array), reference in zip(got, expected, strict=True):
        if array.dtype != reference.dtype or array.shape != reference.shape:
            raise CheckError(
                f"{name}: {array.dtype}{list(array.shape)}, "
                f"expected {reference.dtype}{list(reference.shape)}"
            )
        if not np.array_equal(array, reference):
            raise CheckError(f"{name}: values differ from W")
    return "data equal to W"


def _check_map(context: Context, tensor: Any) -> str:
    keys = np.asarray(tensor.keys.values)
    if not np.array_equal(keys, context.arrays.keys.values):
        raise CheckError("keys differ from W")
    return _check_arrays(list(_flat_map(tensor)), context.arrays)


def _check_list(context: Context, loaded: Sequence[np.ndarray]) -> str:
    return _check_arrays([(f"array {i}", a) for i, a in enumerate(loaded)], context.arrays)


def _fresh_path(context: Context, library: str, suffix: str) -> Path:
    """A path in the work directory that no other process uses."""
    return context.workdir / f"save-{library}-{os.getpid()}{suffix}"


def _finish_save(context: Context, state: tuple[Any, Path], result: Any) -> str:
    """Report the written file's size, then delete it."""
    path = state[1]
    if not path.exists():
        raise CheckError(f"{path.name} was not written")
    size = path.stat().st_size
    path.unlink()
    return f"file {format_bytes(size)}"


# ---------------------------------------------------------------------------
# Prepared files (written once per benchmark run, not timed)
# ---------------------------------------------------------------------------

BLOCKMAP_FILE = "blockmap.mts"
NUMPY_FILE = "numpy.npz"
NUMPY_DIR = "numpy-npy"
METATENSOR_FILE = "metatensor.mts"


@register_prepared(BLOCKMAP_FILE)
def _prepare_blockmap(arrays: _workload.WorkloadArrays, path: Path) -> None:
    import blockmap

    blockmap.save(path, _workload.build_blockmap(arrays))


@register_prepared(NUMPY_FILE)
def _prepare_numpy(arrays: _workload.WorkloadArrays, path: Path) -> None:
    np.savez(path, *flat_arrays(arrays))


@register_prepared(NUMPY_DIR)
def _prepare_numpy_dir(arrays: _workload.WorkloadArrays, path: Path) -> None:
    path.mkdir()
    for index, array in enumerate(flat_arrays(arrays)):
        np.save(path / f"{index:05d}.npy", array)


@register_prepared(METATENSOR_FILE)
def _prepare_metatensor(arrays: _workload.WorkloadArrays, path: Path) -> None:
    import metatensor

    metatensor.save(str(path), _workload.build_metatensor(arrays))


# ---------------------------------------------------------------------------
# Operations: save to a file
# ---------------------------------------------------------------------------


def _blockmap_save(state: tuple[Any, Path]) -> None:
    import blockmap

    blockmap.save(state[1], state[0])


def _numpy_save(state: tuple[list[np.ndarray], Path]) -> None:
    np.savez(state[1], *state[0])


def _metatensor_save(state: tuple[Any, Path]) -> None:
    import metatensor

    metatensor.save(str(state[1]), state[0])


register(
    Operation(
        name="save",
        title="save to a file",
        family="files",
        implementations={
            "blockmap": Implementation(
                call="blockmap.save(path, tensor)",
                setup=lambda c: (
                    _workload.build_blockmap(c.arrays),
                    _fresh_path(c, "blockmap", ".mts"),
                ),
                run=_blockmap_save,
                finish=_finish_save,
            ),
            "numpy": Implementation(
                call="np.savez(path, *arrays)",
                setup=lambda c: (flat_arrays(c.arrays), _fresh_path(c, "numpy", ".npz")),
                run=_numpy_save,
                finish=_finish_save,
            ),
            OTHER_NAME: Implementation(
                call="metatensor.save(path, tensor)",
                setup=lambda c: (
                    _workload.build_metatensor(c.arrays),
                    _fresh_path(c, "metatensor", ".mts"),
                ),
                run=_metatensor_save,
                finish=_finish_save,
            ),
        },
    )
)


# ---------------------------------------------------------------------------
# Operations: load from a file, all data read
# ---------------------------------------------------------------------------


def _blockmap_load(path: Path) -> Any:
    import blockmap

    return blockmap.load(path)


def _numpy_load(path: Path) -> list[np.ndarray]:
    with np.load(path) as npz:
        return [npz[name] for name in npz.files]


def _metatensor_load(path: Path) -> Any:
    import metatensor

    return metatensor.load(str(path))


register(
    Operation(
        name="load",
        title="load from a file, all data read",
        family="files",
        implementations={
            "blockmap": Implementation(
                call="blockmap.load(path)",
                setup=lambda c: c.workdir / BLOCKMAP_FILE,
                run=_blockmap_load,
                finish=lambda c, state, tensor: _check_map(c, tensor),
                needs=(BLOCKMAP_FILE,),
            ),
            "numpy": Implementation(
                call="npz = np.load(path); [npz[k] for k in npz.files]",
                setup=lambda c: c.workdir / NUMPY_FILE,
                run=_numpy_load,
                finish=lambda c, state, loaded: _check_list(c, loaded),
                needs=(NUMPY_FILE,),
            ),
            OTHER_NAME: Implementation(
                call="metatensor.load(path)",
                setup=lambda c: c.workdir / METATENSOR_FILE,
                run=_metatensor_load,
                finish=lambda c, state, tensor: _check_map(c, tensor),
                needs=(METATENSOR_FILE,),
            ),
        },
    )
)


# ---------------------------------------------------------------------------
# Operations: mapped load
# ---------------------------------------------------------------------------


def _blockmap_mmap(path: Path) -> Any:
    import blockmap

    return blockmap.load(path, mmap=True)


def _numpy_mmap(paths: list[Path]) -> list[np.ndarray]:
    return [np.load(path, mmap_mode="r") for path in paths]


register(
    Operation(
        name="mmap",
        title="mapped load",
        family="files",
        implementations={
            "blockmap": Implementation(
                call="blockmap.load(path, mmap=True)",
                setup=lambda c: c.workdir / BLOCKMAP_FILE,
                run=_blockmap_mmap,
                finish=lambda c, state, tensor: _check_map(c, tensor),
                needs=(BLOCKMAP_FILE,),
            ),
            "numpy": Implementation(
                call='[np.load(f, mmap_mode="r") for f in files] (one .npy per array)',
                setup=lambda c: sorted((c.workdir / NUMPY_DIR).iterdir()),
                run=_numpy_mmap,
                finish=lambda c, state, loaded: _check_list(c, loaded),
                needs=(NUMPY_DIR,),
            ),
            # metatensor-core cannot map a file.
        },
    )
)


# ---------------------------------------------------------------------------
# Operations: pickle
# ---------------------------------------------------------------------------

#: Library -> (the object's name in the timed calls, its builder from W's arrays).
#: numpy pickles the flat list of :func:`flat_arrays`.
PICKLED: dict[str, tuple[str, Callable[[_workload.WorkloadArrays], Any]]] = {
    "blockmap": ("tensor", _workload.build_blockmap),
    "numpy": ("arrays", flat_arrays),
    OTHER_NAME: ("tensor", _workload.build_metatensor),
}


def _check_unpickled(context: Context, library: str, loaded: Any) -> str:
    """Raise :class:`CheckError` unless an unpickled object holds W."""
    if library == "numpy":
        if not isinstance(loaded, list):
            raise CheckError(f"unpickled a {type(loaded).__name__}, expected a list")
        return _check_list(context, loaded)
    return _check_map(context, loaded)


def _first_values(library: str, loaded: Any) -> np.ndarray:
    """The first block's values of an unpickled object (numpy: the first array)."""
    return np.asarray(loaded[0] if library == "numpy" else loaded.block(0).values)


def _pickle_oob(obj: Any) -> tuple[bytes, list[pickle.PickleBuffer], Any]:
    """Protocol 5 with out-of-band buffers, dumps then loads, as dask and ray do."""
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return data, buffers, pickle.loads(data, buffers=buffers)


def _finish_oob(library: str) -> Callable[[Context, Any, Any], str]:
    def finish(context: Context, state: Any, result: Any) -> str:
        data, buffers, loaded = result
        checked = _check_unpickled(context, library, loaded)
        shared = np.shares_memory(_first_values(library, loaded), context.arrays.blocks[0].values)
        return (
            f"stream {format_bytes(len(data))} + {len(buffers)} "
            f"buffer{'' if len(buffers) == 1 else 's'}, "
            f"{'views' if shared else 'copies'} the source; {checked}"
        )

    return finish


def _dumps_setup(library: str, protocol: int) -> Callable[[Context], Any]:
    def setup(context: Context) -> tuple[Any, int]:
        return PICKLED[library][1](context.arrays), protocol

    return setup


def _dumps(state: tuple[Any, int]) -> bytes:
    return pickle.dumps(state[0], protocol=state[1])


def _finish_dumps(library: str) -> Callable[[Context, Any, Any], str]:
    def finish(context: Context, state: Any, data: bytes) -> str:
        return f"pickle {format_bytes(len(data))}; " + _check_unpickled(
            context, library, pickle.loads(data)
        )

    return finish


def _loads_setup(library: str, protocol: int) -> Callable[[Context], Any]:
    def setup(context: Context) -> bytes:
        # Only the bytes are kept: the object they come from is released.
        return pickle.dumps(PICKLED[library][1](context.arrays), protocol=protocol)

    return setup


def _loads(data: bytes) -> Any:
    return pickle.loads(data)


def _finish_loads(library: str) -> Callable[[Context, Any, Any], str]:
    def finish(context: Context, state: Any, loaded: Any) -> str:
        return _check_unpickled(context, library, loaded)

    return finish


def _register_pickle(name: str, title: str, kind: str, protocol: int) -> None:
    """Register a pickle operation of ``kind`` ``oob``, ``dumps`` or ``loads``."""
    implementations: dict[str, Implementation] = {}
    for library, (obj, build) in PICKLED.items():
        if kind == "oob":
            implementations[library] = Implementation(
                call=f"bufs = []; data = pickle.dumps({obj}, protocol=5, "
                "buffer_callback=bufs.append); pickle.loads(data, buffers=bufs)",
                setup=lambda c, build=build: build(c.arrays),
                run=_pickle_oob,
                finish=_finish_oob(library),
            )
        elif kind == "dumps":
            implementations[library] = Implementation(
                call=f"pickle.dumps({obj}, protocol={protocol})",
                setup=_dumps_setup(library, protocol),
                run=_dumps,
                finish=_finish_dumps(library),
            )
        else:
            implementations[library] = Implementation(
                call=f"pickle.loads(data) (data = pickle.dumps({obj}, protocol={protocol}), "
                "made before, not timed)",
                setup=_loads_setup(library, protocol),
                run=_loads,
                finish=_finish_loads(library),
            )
    register(Operation(name, title, "pickle", implementations))


_register_pickle("p5oob", "pickle p5 out-of-band dumps + loads", "oob", 5)
_register_pickle("p5dumps", "pickle p5 in-band dumps", "dumps", 5)
_register_pickle("p5loads", "pickle p5 in-band loads", "loads", 5)
_register_pickle("p4dumps", "pickle p4 dumps", "dumps", 4)
_register_pickle("p4loads", "pickle p4 loads", "loads", 4)


# ---------------------------------------------------------------------------
# Worker processes
# ---------------------------------------------------------------------------


def _sizes(small: bool) -> dict[str, int]:
    return SMALL_WORKLOAD if small else {}


def _worker(operation: str, library: str, workdir: Path, small: bool) -> dict[str, Any]:
    """One timed run, in this process; returns the JSON record the parent reads."""
    implementation = OPERATIONS[operation].implementations[library]
    arrays = _workload.make_arrays(seed=SEED, **_sizes(small))
    context = Context(arrays, workdir)
    state = implementation.setup(context)
    measured = measure(lambda: implementation.run(state), repeat=1)
    record: dict[str, Any] = {
        "operation": operation,
        "library": library,
        "seconds": measured.times[0],
        "peak_growth": measured.peak_growth,
        "data_bytes": _workload.nbytes(arrays),
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
    arrays = _workload.make_arrays(seed=SEED, **_sizes(small))
    failed: dict[str, str] = {}
    for name in names:
        try:
            PREPARED[name](arrays, workdir / name)
        except Exception as error:  # reported to the parent, which shows "failed"
            failed[name] = f"{type(error).__name__}: {error}"
    return {"failed": failed}


def _worker_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m blockmap._bench``: ``worker`` or ``prepare``."""
    parser = argparse.ArgumentParser(prog="python -m blockmap._bench")
    commands = parser.add_subparsers(dest="command", required=True)
    worker = commands.add_parser("worker", help="time one run of one operation")
    worker.add_argument("--operation", required=True, choices=sorted(OPERATIONS))
    worker.add_argument("--library", required=True, choices=LIBRARIES)
    prepare = commands.add_parser("prepare", help="write prepared files")
    prepare.add_argument("--files", required=True, help="comma-separated prepared file names")
    for command in (worker, prepare):
        command.add_argument("--workdir", required=True, type=Path)
        command.add_argument("--small", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "worker":
        record = _worker(args.operation, args.library, args.workdir, args.small)
    else:
        record = _prepare(args.files.split(","), args.workdir, args.small)
    print(json.dumps(record), flush=True)
    return 0


def _spawn(arguments: Sequence[str]) -> tuple[dict[str, Any] | None, str]:
    """Run ``python -m blockmap._bench ARGUMENTS``; its JSON record, or None and why not."""
    command = [sys.executable, "-m", "bench._bench", *arguments]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=WORKER_TIMEOUT, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {WORKER_TIMEOUT:.0f} s"
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
            _, error = _spawn(
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
    if _metatensor_version() is None:
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
            record, error = _spawn(
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
                    record, error = _spawn(
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


# ---------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A goal checked on a benchmark's numbers.

    Attributes:
        text: the goal, as the issue states it.
        met: whether the numbers meet it; ``None`` when they are missing.
        detail: the numbers behind the verdict.
    """

    text: str
    met: bool | None
    detail: str = ""

    @property
    def verdict(self) -> str:
        """``met``, ``NOT met`` or ``not measured``."""
        return {True: "met", False: "NOT met", None: "not measured"}[self.met]


@dataclass(frozen=True)
class Goal:
    """A target to check on every benchmark run that measured its operations.

    Attributes:
        text: the goal, as the issue states it.
        operations: the operations it needs; it is skipped unless all were asked for.
        evaluate: the verdict and its numbers, or None when a measurement is missing.
    """

    text: str
    operations: tuple[str, ...]
    evaluate: Callable[[BenchResult], tuple[bool, str] | None]

    def check(self, result: BenchResult) -> Target:
        """The goal's :class:`Target` on ``result``."""
        verdict = self.evaluate(result)
        if verdict is None:
            return Target(self.text, None)
        return Target(self.text, *verdict)


def time_goal(text: str, operation: str, reference: tuple[str, str], limit: float) -> Goal:
    """Goal: blockmap's median time of ``operation`` at most ``limit`` times that of
    ``reference``, an ``(operation, library)`` pair."""

    def evaluate(result: BenchResult) -> tuple[bool, str] | None:
        ours = result.measurement(operation, LIBRARIES[0])
        theirs = result.measurement(*reference)
        if ours is None or theirs is None or theirs.median <= 0.0:
            return None
        ratio = ours.median / theirs.median
        detail = (
            f"{format_seconds(ours.median)} / {format_seconds(theirs.median)} "
            f"= {ratio:.3g}x (limit {limit:.3g}x)"
        )
        return ratio <= limit, detail

    return Goal(text, tuple(dict.fromkeys((operation, reference[0]))), evaluate)


def memory_goal(text: str, operation: str, fraction: float) -> Goal:
    """Goal: blockmap's peak memory growth in ``operation`` under ``fraction`` of W."""

    def evaluate(result: BenchResult) -> tuple[bool, str] | None:
        ours = result.measurement(operation, LIBRARIES[0])
        if ours is None or not result.data_bytes:
            return None
        share = ours.peak_growth / result.data_bytes
        detail = (
            f"{format_growth(ours.peak_growth)} of {format_bytes(result.data_bytes)} "
            f"= {share:.2%} (limit {fraction:.0%})"
        )
        return share < fraction, detail

    return Goal(text, (operation,), evaluate)


def relative_memory_goal(
    text: str, operation: str, reference: tuple[str, str], slack: float
) -> Goal:
    """Goal: blockmap's peak memory growth in ``operation`` at most that of
    ``reference``, an ``(operation, library)`` pair, plus ``slack`` of it."""

    def evaluate(result: BenchResult) -> tuple[bool, str] | None:
        ours = result.measurement(operation, LIBRARIES[0])
        theirs = result.measurement(*reference)
        if ours is None or theirs is None:
            return None
        limit = max(theirs.peak_growth, 0) * (1.0 + slack)
        detail = (
            f"{format_growth(ours.peak_growth)} vs {format_growth(theirs.peak_growth)} "
            f"(limit {format_growth(int(limit))} = {short_name(reference[1])} + {slack:.0%})"
        )
        return ours.peak_growth <= limit, detail

    return Goal(text, tuple(dict.fromkeys((operation, reference[0]))), evaluate)


#: The in-band pickle operations (issue 4): name -> the title's short form.
IN_BAND_PICKLES: dict[str, str] = {
    "p5dumps": "p5 in-band dumps",
    "p5loads": "p5 in-band loads",
    "p4dumps": "p4 dumps",
    "p4loads": "p4 loads",
}

#: Goals checked on the numbers: issue 3 ("Benchmark", and its memory bound on
#: save) for files, issue 4 ("Benchmark") for pickle.
TARGETS: list[Goal] = [
    time_goal("save: at most 1.0x numpy's time", "save", ("save", "numpy"), 1.0),
    time_goal("save: at least 3x faster than metatensor-core", "save", ("save", OTHER_NAME), 1 / 3),
    time_goal("load: at most 1.0x numpy's time", "load", ("load", "numpy"), 1.0),
    time_goal("load: at least 3x faster than metatensor-core", "load", ("load", OTHER_NAME), 1 / 3),
    time_goal(
        "mapped load: under 1% of the full load's time", "mmap", ("load", LIBRARIES[0]), 0.01
    ),
    memory_goal("save: peak memory growth under 2% of the data", "save", 0.02),
    time_goal(
        "p5 out-of-band dumps + loads: within 2x of numpy's time",
        "p5oob",
        ("p5oob", "numpy"),
        2.0,
    ),
    time_goal(
        "p5 out-of-band dumps + loads: at least 1000x faster than metatensor-core",
        "p5oob",
        ("p5oob", OTHER_NAME),
        1 / 1000,
    ),
    memory_goal(
        "p5 out-of-band dumps + loads: peak memory growth under 1% of the data (metadata only)",
        "p5oob",
        0.01,
    ),
    *(
        goal
        for name, short in IN_BAND_PICKLES.items()
        for goal in (
            time_goal(f"{short}: at most 1.0x numpy's time", name, (name, "numpy"), 1.0),
            relative_memory_goal(
                f"{short}: peak memory growth <= numpy + 5%", name, (name, "numpy"), 0.05
            ),
        )
    ),
]


def check_targets(result: BenchResult) -> list[Target]:
    """The targets of :data:`TARGETS` whose operations were all asked for."""
    return [
        goal.check(result)
        for goal in TARGETS
        if all(name in result.operations for name in goal.operations)
    ]


# ---------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------


def _runs(count: int) -> str:
    return f"{count} run" if count == 1 else f"{count} runs"


def _table_title(result: BenchResult, family: str) -> str:
    return (
        f"{family}: medians of {_runs(result.repeat)}, each in a fresh process; "
        "cell = op time, peak RSS growth; ratio = blockmap's time / theirs"
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
    facts.append((OTHER_NAME, _metatensor_version() or "not installed"))
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


def write_markdown(result: BenchResult, path: Path, command: str) -> None:
    """Write the report as a markdown page (``docs/benchmarks.md``) to ``path``."""
    with open(path, "w") as out:
        print("# Benchmarks\n", file=out)
        print(
            f"Generated by `{command}`. The workload W ({_workload_summary(result)}) is "
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
        print_report(result, out, markdown=True)
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
        f"workload W ({_workload_summary(result)}): medians of {_runs(result.repeat)}, "
        "fresh process each; lower is better"
    )
    axes.grid(axis="y", which="major", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _workload_summary(result: BenchResult) -> str:
    size = "size unknown" if result.data_bytes is None else format_bytes(result.data_bytes)
    return f"--small, {size}" if result.small else size


# ---------------------------------------------------------------------------
# Command line
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
        f"{OTHER_NAME} {_metatensor_version() or 'not installed'}",
        flush=True,
    )
    result = run_bench(args.ops, args.repeat, args.small, progress=sys.stderr)
    print(
        f"workload W ({_workload_summary(result)}), {_runs(result.repeat)} of each, "
        f"{result.seconds:.0f} s in all"
    )
    print()
    print_report(result)
    if args.markdown is not None:
        command = "python -m blockmap bench" + (" --small" if args.small else "")
        if args.repeat != 5:
            command += f" --repeat {args.repeat}"
        if args.ops != list(OPERATIONS):
            command += f" --ops {','.join(args.ops)}"
        command += f" --markdown {args.markdown}"
        if args.chart is not None:
            command += f" --chart {args.chart}"
        write_markdown(result, args.markdown, command)
        print(f"markdown written to {args.markdown}")
    if args.chart is not None:
        write_chart(result, args.chart)
        print(f"chart written to {args.chart}")
    return 1 if result.problems() else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m blockmap bench``: parse ``argv`` and run the benchmark."""
    parser = argparse.ArgumentParser(
        prog="python -m blockmap bench",
        description="Time operations on the workload W with blockmap, numpy and "
        "metatensor-core, each run in a fresh process.",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


# The transports family (dask, multiprocessing, ray, joblib) registers its
# operations and goals into this module's registry.
from . import _bench_transports  # noqa: E402, F401

if __name__ == "__main__":
    # Run the worker of the imported module, whose registry the transports
    # module filled (this file, run as __main__, is a separate module object).
    from bench._bench import _worker_main as _imported_worker_main

    sys.exit(_imported_worker_main())
