"""The registry of the benchmark: what is measured, by whom, and the goals.

Every operation is done by three libraries on the same arrays (those of
:func:`bench.workload.make_arrays`, from the same seed): blockmap, numpy (the
arrays as a flat list, :func:`bench.workload.flat_arrays`) and metatensor-core.
An :class:`Operation` maps each library that supports it to an
:class:`Implementation`: its setup (not timed), the timed call, and a check of
the result (not timed). :func:`register` adds an operation to
:data:`OPERATIONS`; :func:`register_prepared` adds a writer of a file that
load operations read (:data:`PREPARED`). A library missing from an operation
shows ``-``, as does metatensor-core when it is not installed.

:data:`TARGETS` holds the goals checked on the numbers (:class:`Goal`, made
by :func:`time_goal`, :func:`memory_goal` and :func:`relative_memory_goal`);
:func:`check_targets` checks them on a benchmark's results.

The families of operations fill the registry when imported: files
(:mod:`bench.files`), pickle (:mod:`bench.pickling`) and transports
(:mod:`bench.transports`); :mod:`bench.families` imports them all.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .measure import Measurement, format_bytes, format_growth, format_seconds, short_name
from .workload import WorkloadArrays

__all__ = [
    "LIBRARIES",
    "MODULES",
    "OPERATIONS",
    "OTHERS",
    "OTHER_NAME",
    "PREPARED",
    "SAFETENSORS",
    "TARGETS",
    "CheckError",
    "Context",
    "Goal",
    "Implementation",
    "Operation",
    "Results",
    "Target",
    "check_targets",
    "memory_goal",
    "metatensor_version",
    "register",
    "register_prepared",
    "relative_memory_goal",
    "time_goal",
]

OTHER_NAME = "metatensor-core"
#: The peer of the files family: safetensors' numpy API on the same arrays.
SAFETENSORS = "safetensors"
#: The libraries compared, in column order; blockmap first.
LIBRARIES: tuple[str, ...] = ("blockmap", "numpy", OTHER_NAME, SAFETENSORS)
#: The libraries blockmap is compared with.
OTHERS: tuple[str, ...] = LIBRARIES[1:]
#: The modules of each library, imported by a worker before its clock starts
#: (an operation's own imports are then free: importing blockmap takes 8 to
#: 35 ms, more than the mapped load it would be counted in).
MODULES: dict[str, tuple[str, ...]] = {
    "blockmap": ("blockmap",),
    "numpy": ("numpy",),
    OTHER_NAME: ("metatensor",),
    SAFETENSORS: ("safetensors", "safetensors.numpy"),
}


def metatensor_version() -> str | None:
    """The installed metatensor-core version, or None when it cannot be imported."""
    try:
        import metatensor  # noqa: F401
    except ImportError:
        return None
    try:
        return importlib.metadata.version("metatensor-core")
    except importlib.metadata.PackageNotFoundError:
        return "unknown version"


# ---------------------------------------------------------------------------
# Operations and their implementations
# ---------------------------------------------------------------------------


class CheckError(Exception):
    """Raised by an implementation's ``finish`` when the operation's result is wrong."""


@dataclass(frozen=True)
class Context:
    """What a worker process hands to an implementation.

    Attributes:
        arrays: W's arrays, built in this process from :data:`bench.runner.SEED`.
        workdir: the benchmark run's temporary directory, holding the prepared files.
    """

    arrays: WorkloadArrays
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
Writer = Callable[[WorkloadArrays, Path], None]
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
# Targets
# ---------------------------------------------------------------------------


class Results(Protocol):
    """What a goal reads of a benchmark's results (:class:`bench.runner.BenchResult`)."""

    @property
    def operations(self) -> Sequence[str]:
        """The operations measured."""
        ...

    @property
    def data_bytes(self) -> int | None:
        """W's size, as the workers counted it."""
        ...

    def measurement(self, operation: str, library: str) -> Measurement | None:
        """The measurement of ``operation`` by ``library``, when it ran without failing."""
        ...


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
    evaluate: Callable[[Results], tuple[bool, str] | None]

    def check(self, result: Results) -> Target:
        """The goal's :class:`Target` on ``result``."""
        verdict = self.evaluate(result)
        if verdict is None:
            return Target(self.text, None)
        return Target(self.text, *verdict)


def time_goal(text: str, operation: str, reference: tuple[str, str], limit: float) -> Goal:
    """Goal: blockmap's median time of ``operation`` at most ``limit`` times that of
    ``reference``, an ``(operation, library)`` pair."""

    def evaluate(result: Results) -> tuple[bool, str] | None:
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

    def evaluate(result: Results) -> tuple[bool, str] | None:
        ours = result.measurement(operation, LIBRARIES[0])
        if ours is None or not result.data_bytes:
            return None
        share = ours.peak_growth / result.data_bytes
        detail = (
            f"{format_growth(ours.peak_growth)} of {format_bytes(result.data_bytes)} "
            f"= {share:.2%} (limit {fraction:.2%})"
        )
        return share < fraction, detail

    return Goal(text, (operation,), evaluate)


def relative_memory_goal(
    text: str, operation: str, reference: tuple[str, str], slack: float
) -> Goal:
    """Goal: blockmap's peak memory growth in ``operation`` at most that of
    ``reference``, an ``(operation, library)`` pair, plus ``slack`` of it."""

    def evaluate(result: Results) -> tuple[bool, str] | None:
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


#: Goals checked on the numbers; each family adds its own (issue 3,
#: "Benchmark", and its memory bound on save, for files; issue 4 for pickle;
#: the transports issue for transports).
TARGETS: list[Goal] = []


def check_targets(result: Results) -> list[Target]:
    """The targets of :data:`TARGETS` whose operations were all asked for."""
    return [
        goal.check(result)
        for goal in TARGETS
        if all(name in result.operations for name in goal.operations)
    ]
