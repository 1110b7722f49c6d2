"""The torch family of the benchmark: DataLoader throughput, and join and
split against metatensor-operations (``python -m bench torch``).

**DataLoader throughput**, in batches per second, of a map-style dataset
whose items are joined along samples by the collate function, with
``num_workers`` 0 and 2 (fork and spawn, persistent workers), for three
libraries holding the same arrays:

- ``blockmap``: torch-backed blockmap maps, ``collate_fn=partial(blockmap.join,
  axis="samples")``; batches cross from the workers in shared memory when
  they hold more than the auto-share threshold; for spawn the dataset's
  maps are shared once (``share_memory()``), so workers start with
  descriptors;
- ``metatensor-torch``: metatensor-torch maps and ``metatensor.torch.join``,
  crossing with their default pickling (a map pickles as a uint8 tensor of
  its ``.mts`` archive); under spawn, the dataset imports metatensor.torch
  before its maps are unpickled, and torch's ``file_system`` sharing
  strategy is used, as its default one fails to start the workers;
- ``torch``: each item the list of tensors holding the same data (values
  and samples of the energy and of its gradient), collated with
  ``torch.cat`` per position; torch's reducer moves the results into
  shared memory.

On three datasets: QM9-like structures (18 atoms on average, an energy with
its position gradient) in batches of 8 and of 64, and W in 16 pieces of
whole systems, in batches of 8 pieces (half of W, 397 MB a batch).

Each measurement is a fresh process: it builds the data, starts the loader
and runs one untimed epoch (which starts the workers), then times whole
epochs until at least ``MIN_SECONDS`` have passed and reports batches per
second; the report gives medians (and min-max) over fresh processes, the
libraries interleaved run by run.

**join and split** on the same batches and on W, blockmap's Rust ones
against metatensor-operations' (``blockmap.operations.join``, the same code
metatensor-core's users run), in one process: median of repeated calls.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .batches import structure_maps, to_library, w_pieces
from .report import write_section
from .runner import spawn
from .workload import build_blockmap, make_arrays

__all__ = ["add_arguments", "add_commands", "run"]

LIBRARIES = ("blockmap", "metatensor-torch", "torch")
#: data name -> (what it is, batch size)
DATA: dict[str, tuple[str, int]] = {
    "qm9-8": ("QM9-like structures, batches of 8", 8),
    "qm9-64": ("QM9-like structures, batches of 64", 64),
    "w": ("W in 16 pieces, batches of 8 pieces (397 MB)", 8),
}
#: loader name -> (num_workers, start method, title)
LOADERS: dict[str, tuple[int, str | None, str]] = {
    "main": (0, None, "0 workers"),
    "fork": (2, "fork", "2 workers, fork"),
    "spawn": (2, "spawn", "2 workers, spawn"),
}
#: structures in the QM9-like dataset
STRUCTURES = 4096
#: timed epochs last at least this long (whole epochs)
MIN_SECONDS = 2.0
WORKER_TIMEOUT = 900.0


# ---------------------------------------------------------------------------
# One measurement, in a fresh process
# ---------------------------------------------------------------------------


class ListDataset:
    """Items of a list, as a map-style dataset."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Any:
        return self.items[index]


class _ImportFirst:
    """Unpickles as the import of metatensor.torch (nothing else)."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        import importlib

        return importlib.import_module, ("metatensor.torch",)


def _dataset(_: Any, items: list[Any]) -> ListDataset:
    return ListDataset(items)


class MetatensorTorchDataset(ListDataset):
    """A dataset of metatensor-torch maps that a spawned process can
    unpickle: metatensor.torch is imported before the maps are (otherwise
    "Tried to deserialize class __torch__.torch.classes.metatensor.TensorMap
    which is not known to the runtime")."""

    def __reduce__(self) -> tuple[Any, tuple[Any, list[Any]]]:
        return _dataset, (_ImportFirst(), self.items)


def cat_tensors(items: list[list[Any]]) -> list[Any]:
    """The collate function of plain tensors: ``torch.cat`` per position."""
    import torch

    return [torch.cat(column) for column in zip(*items, strict=True)]


def join_metatensor_torch(maps: list[Any]) -> Any:
    """The collate function of metatensor-torch maps."""
    import metatensor.torch

    return metatensor.torch.join(maps, axis="samples")


def _collate(library: str) -> Callable[[list[Any]], Any]:
    if library == "blockmap":
        import blockmap

        return functools.partial(blockmap.join, axis="samples")
    if library == "metatensor-torch":
        return join_metatensor_torch
    return cat_tensors


def source_maps(data: str, small: bool = False) -> list[Any]:
    """The dataset ``data`` as numpy-backed blockmap maps."""
    if data.startswith("qm9"):
        return structure_maps(256 if small else STRUCTURES)
    sizes = {"n_keys": 4, "n_samples": 480, "n_grad_samples": 60} if small else {}
    return w_pieces(build_blockmap(make_arrays(**sizes)), 16)


def _touch(batch: Any) -> int:
    """What the training loop reads of a batch here: one array's length."""
    if isinstance(batch, list):
        return len(batch[0])
    return len(batch.block(0).values)


def measure(
    data: str, library: str, loader: str, small: bool = False, seconds: float = MIN_SECONDS
) -> dict[str, Any]:
    """Batches per second of the DataLoader ``loader`` over ``data`` with ``library``."""
    import warnings

    warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script's deprecation
    import torch
    from torch.utils.data import DataLoader

    torch.set_num_threads(1)
    items = to_library(source_maps(data, small), library)
    workers, method, _ = LOADERS[loader]
    if library == "metatensor-torch" and method == "spawn":
        # metatensor-torch pickles a map as a temporary uint8 tensor, which
        # torch's default strategy shares by file descriptor: the descriptors
        # of the dataset's temporaries are closed and reused before the
        # workers start ("bad value(s) in fds_to_keep"); torch's other
        # strategy names files instead
        torch.multiprocessing.set_sharing_strategy("file_system")
    if library == "blockmap" and method == "spawn":
        # the documented way to hand a dataset to spawn workers: shared once
        for tensor in items:
            tensor.share_memory()
    options: dict[str, Any] = {}
    if workers:
        options = {"multiprocessing_context": method, "persistent_workers": True}
    dataset = MetatensorTorchDataset(items) if library == "metatensor-torch" else ListDataset(items)
    batches = DataLoader(
        dataset,
        batch_size=DATA[data][1],
        num_workers=workers,
        collate_fn=_collate(library),
        **options,
    )
    for batch in batches:  # starts the workers
        _touch(batch)
    count = 0
    start = time.perf_counter()
    while True:
        for batch in batches:
            _touch(batch)
            count += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
    return {"batches": count, "seconds": elapsed, "per_second": count / elapsed}


def _worker(args: argparse.Namespace) -> int:
    result = measure(args.data, args.library, args.loader, args.small, args.seconds)
    print(json.dumps(result), flush=True)
    return 0


# ---------------------------------------------------------------------------
# join and split, in this process
# ---------------------------------------------------------------------------


def _median_seconds(call: Callable[[], Any], budget: float = 1.0) -> float:
    call()
    times = []
    deadline = time.perf_counter() + budget
    while len(times) < 3 or (time.perf_counter() < deadline and len(times) < 200):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def join_split_rows(small: bool = False) -> list[tuple[str, float, float]]:
    """(case, blockmap's seconds, metatensor-operations' seconds) for join
    and split on the batches and on W."""
    import numpy as np

    import blockmap
    import blockmap.operations as ops

    rows = []
    maps = structure_maps(64)
    for size in (8, 64):
        batch = maps[:size]
        rows.append(
            (
                f"join {size} QM9-like maps along samples",
                _median_seconds(lambda b=batch: blockmap.join(b, axis="samples")),
                _median_seconds(lambda b=batch: ops.join(b, axis="samples")),
            )
        )
    joined = blockmap.join(maps[:64], axis="samples")
    halves = [
        blockmap.Labels(["system"], np.arange(start, start + 32, dtype=np.int32).reshape(-1, 1))
        for start in (0, 32)
    ]
    rows.append(
        (
            "split a batch of 64 in two along samples",
            _median_seconds(lambda: blockmap.split(joined, "samples", halves)),
            _median_seconds(lambda: ops.split(joined, "samples", halves)),
        )
    )
    pieces = source_maps("w", small)
    rows.append(
        (
            "join W's 16 pieces along samples (W)",
            _median_seconds(lambda: blockmap.join(pieces, axis="samples"), budget=3.0),
            _median_seconds(lambda: ops.join(pieces, axis="samples"), budget=3.0),
        )
    )
    whole = blockmap.join(pieces, axis="samples")
    systems = np.unique(whole.block(0).samples.column("system"))
    parts = [
        blockmap.Labels(["system"], group.reshape(-1, 1).astype(np.int32))
        for group in np.array_split(systems, 2)
    ]
    rows.append(
        (
            "split W in two along samples",
            _median_seconds(lambda: blockmap.split(whole, "samples", parts), budget=3.0),
            _median_seconds(lambda: ops.split(whole, "samples", parts), budget=3.0),
        )
    )
    # the floor of joining W: each of its bytes copied once, by numpy
    arrays = [np.asarray(b.values) for t in pieces for b in t.blocks()]
    arrays += [np.asarray(b.gradient("positions").values) for t in pieces for b in t.blocks()]
    rows.append(
        (
            "copy W's arrays once (numpy, np.concatenate per block; the floor)",
            _median_seconds(lambda: _copy_once(pieces), budget=3.0),
            float("nan"),
        )
    )
    return rows


def _copy_once(pieces: list[Any]) -> list[Any]:
    import numpy as np

    out = []
    for key in range(len(pieces[0])):
        blocks = [piece.block(key) for piece in pieces]
        out.append(np.concatenate([b.values for b in blocks]))
        out.append(np.concatenate([b.gradient("positions").values for b in blocks]))
    return out


# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------


@dataclass
class Cell:
    """The runs of one (data, loader, library)."""

    rates: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.rates) if self.rates else None

    def text(self) -> str:
        if self.median is None:
            return f"failed: {self.error}" if self.error else "-"
        low, high = min(self.rates), max(self.rates)
        return f"{_rate(self.median)} ({_rate(low)}-{_rate(high)})"


def _rate(per_second: float) -> str:
    return f"{per_second:,.0f}/s" if per_second >= 100 else f"{per_second:.3g}/s"


def run_loaders(
    data: Sequence[str],
    loaders: Sequence[str],
    repeat: int,
    small: bool,
    seconds: float = MIN_SECONDS,
) -> dict[tuple[str, str, str], Cell]:
    """Every (data, loader, library), ``repeat`` fresh processes each, the
    libraries interleaved run by run."""
    cells: dict[tuple[str, str, str], Cell] = {}
    for name in data:
        for loader in loaders:
            for round_ in range(repeat):
                order = LIBRARIES[round_ % 3 :] + LIBRARIES[: round_ % 3]
                for library in order:
                    cell = cells.setdefault((name, loader, library), Cell())
                    arguments = ["torch-worker", "--data", name, "--library", library]
                    arguments += ["--loader", loader, "--seconds", str(seconds)]
                    arguments += ["--small"] if small else []
                    result, error = spawn(arguments, WORKER_TIMEOUT)
                    if result is None:
                        cell.error = error
                    else:
                        cell.rates.append(result["per_second"])
                    print(f"{name} / {loader} / {library}: {cell.text()}", file=sys.stderr)
    return cells


def _ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or theirs <= 0:
        return "-"
    return f"{ours / theirs:.3g}x"


def markdown(
    cells: dict[tuple[str, str, str], Cell],
    joins: list[tuple[str, float, float]],
    repeat: int,
) -> str:
    """The report: throughput tables, targets, and the join and split rows."""
    lines = [
        "Without workers, a W-sized batch is joined in the main process: blockmap's join "
        "and `torch.cat` each copy the batch once into warm memory (blockmap keeps the memory "
        "of freed batches for reuse, as glibc does for torch), at the memory bandwidth of the "
        "machine. With workers, blockmap's batch is written once, straight into shared memory, "
        "where torch's collate writes it into private memory and its reducer copies it again.",
        "",
        "DataLoader throughput: batches per second, median over "
        f"{repeat} fresh processes (min-max); ratio = blockmap's rate / theirs "
        "(above 1: blockmap is faster).",
        "",
        "| data | loader | blockmap | metatensor-torch | torch (plain tensors) "
        "| blockmap/metatensor-torch | blockmap/torch |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for data, (title, _) in DATA.items():
        for loader in LOADERS:
            row = [cells.get((data, loader, lib)) for lib in LIBRARIES]
            if not any(row):
                continue
            texts = [cell.text() if cell else "-" for cell in row]
            medians = [cell.median if cell else None for cell in row]
            lines.append(
                f"| {title} | {LOADERS[loader][2]} | {' | '.join(texts)} | "
                f"{_ratio(medians[0], medians[1])} | {_ratio(medians[0], medians[2])} |"
            )
    lines += ["", "Targets:", ""]
    for data, loader, wanted, other in _TARGETS:
        ours = cells.get((data, loader, "blockmap"))
        theirs = cells.get((data, loader, other))
        if ours is None or theirs is None or ours.median is None or theirs.median is None:
            continue
        ratio = ours.median / theirs.median
        verdict = "met" if ratio >= wanted else "NOT met"
        lines.append(
            f"- {DATA[data][0]}, {LOADERS[loader][2]}: at least {wanted:g}x {other}: "
            f"{ratio:.3g}x, **{verdict}**"
        )
    if joins:
        lines += [
            "",
            "join and split, in one process, median of repeated calls; ratio = "
            "blockmap's time / metatensor-operations' (below 1: blockmap is faster):",
            "",
            "| operation | blockmap | metatensor-operations | ratio |",
            "|---|---:|---:|---:|",
        ]
        for case, ours_s, theirs_s in joins:
            theirs_text = "-" if theirs_s != theirs_s else _seconds(theirs_s)
            ratio = "-" if theirs_s != theirs_s else f"{ours_s / theirs_s:.3g}"
            lines.append(f"| {case} | {_seconds(ours_s)} | {theirs_text} | {ratio} |")
        lines += ["", "Targets:", ""] + _join_targets(joins)
    return "\n".join(lines) + "\n"


def _join_targets(joins: list[tuple[str, float, float]]) -> list[str]:
    """The join targets: at least 10x faster than metatensor-operations on
    batches of small maps, within 1.5x of copying the same bytes once on W."""
    seconds = {case: (ours, theirs) for case, ours, theirs in joins}
    lines = []
    for case, (ours, theirs) in seconds.items():
        if case.startswith("join") and "QM9" in case:
            ratio = theirs / ours
            verdict = "met" if ratio >= 10 else "NOT met"
            lines.append(
                f"- {case}: at least 10x metatensor-operations: {ratio:.3g}x, **{verdict}**"
            )
    w_join = next((ours for case, (ours, _) in seconds.items() if case.startswith("join W")), None)
    floor = next((ours for case, (ours, _) in seconds.items() if case.startswith("copy W")), None)
    if w_join is not None and floor is not None:
        ratio = w_join / floor
        verdict = "met" if ratio <= 1.5 else "NOT met"
        lines.append(
            f"- join of W: within 1.5x of copying its bytes once: {ratio:.3g}x, **{verdict}**"
        )
    return lines


#: (data, loader, at least this many times the rate of, library)
_TARGETS = [
    (data, loader, 5.0, "metatensor-torch") for data in ("qm9-8", "qm9-64") for loader in LOADERS
] + [("w", loader, 1.0, "torch") for loader in LOADERS]


def _seconds(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m bench torch``."""
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per cell")
    parser.add_argument("--small", action="store_true", help="tiny datasets, for a quick check")
    parser.add_argument("--data", default=",".join(DATA), help=f"datasets among {','.join(DATA)}")
    parser.add_argument(
        "--loaders", default=",".join(LOADERS), help=f"loaders among {','.join(LOADERS)}"
    )
    parser.add_argument("--no-join", action="store_true", help="leave out join and split")
    parser.add_argument(
        "--seconds",
        type=float,
        default=MIN_SECONDS,
        help="time whole epochs until at least this long (per measurement)",
    )
    parser.add_argument(
        "--markdown", type=Path, help="write the report into this file (docs/benchmarks.md)"
    )


def run(args: argparse.Namespace) -> int:
    """``python -m bench torch``."""
    data = [name for name in args.data.split(",") if name]
    loaders = [name.strip() for name in args.loaders.split(",") if name.strip()]
    for name in data:
        if name not in DATA:
            raise SystemExit(f"unknown data {name!r}")
    for name in loaders:
        if name not in LOADERS:
            raise SystemExit(f"unknown loader {name!r}")
    cells = run_loaders(data, loaders, args.repeat, args.small, args.seconds)
    joins = [] if args.no_join else join_split_rows(args.small)
    text = markdown(cells, joins, args.repeat)
    print(text)
    if args.markdown:
        write_section(args.markdown, text)
    failed = [key for key, cell in cells.items() if cell.median is None]
    return 1 if failed else 0


def add_commands(commands: Any) -> None:
    """Add ``torch-worker``, the fresh process of one measurement."""
    worker = commands.add_parser("torch-worker", help="(started by torch) one measurement")
    worker.add_argument("--data", required=True, choices=sorted(DATA))
    worker.add_argument("--library", required=True, choices=LIBRARIES)
    worker.add_argument("--loader", required=True, choices=sorted(LOADERS))
    worker.add_argument("--small", action="store_true")
    worker.add_argument("--seconds", type=float, default=MIN_SECONDS)
    worker.set_defaults(run=_worker)
