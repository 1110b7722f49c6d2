"""The training family of the benchmark (``python -m bench training``): a
tiny real metatrain run, SOAP-BPNN on Cu/Ni clusters with EMT energies and
forces (CPU, float64, one thread), from metatrain's ``DiskDataset`` zip, from
its ``MemmapDataset`` folder and from a blockmap dataset, with 0 and 2
DataLoader workers; 200 structures in batches of 8, and 2,000 in batches
of 64.

Every run is a fresh process (:mod:`bench.training_run`, in a folder of its
own): ``mtt train`` (the blockmap one through ``blockmap.metatrain.main``),
instrumented to record each epoch's time, the data handling inside it (item
reading, collate, unpacking, and the main process's wait for batches), every
training and validation batch loss as ``float.hex``, and the peak PSS of the
main process and of each DataLoader worker. The data are written once per
size, in a fresh process too (:mod:`bench.training_data`). One more run, the
floor, feeds the later epochs the first epoch's batches from memory: the
model's own time per epoch on this machine.

Losses are compared at equal ``num_workers`` only (metatrain draws its
shuffle at different moments with and without workers), and the
MemmapDataset's are shown but not held to bit-identity (it stores float32).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .report import write_section
from .runner import ROOT, spawn
from .training_data import BLOCKMAP_UNAVAILABLE, BMDATA, MEMMAP, ZIP

__all__ = ["add_arguments", "add_commands", "markdown", "run", "run_all", "targets"]

SOURCES = ("disk", "memmap", "blockmap")
TITLES = {
    "disk": "metatrain DiskDataset (zip)",
    "memmap": "metatrain MemmapDataset (float32)",
    "blockmap": "blockmap dataset",
}
#: the sizes measured by default: (structures, batch size)
SIZES = ((200, 8), (2000, 64))
WORKERS = (0, 2)
#: seconds a data or training process may take before it counts as failed
RUN_TIMEOUT = 3600.0
DATA_TIMEOUT = 3600.0
#: the targets of the issue
EPOCH_RATIO = 0.6
DATA_SHARE = 0.15


def size_name(structures: int, batch: int) -> str:
    return f"{structures}-b{batch}"


def options_text(source: str, batch: int, epochs: int, workers: int) -> str:
    """``mtt train``'s options for ``source`` (the data one folder up)."""
    read_from = {"disk": ZIP, "memmap": MEMMAP, "blockmap": BMDATA}[source]
    forces = "energy_forces" if source == "memmap" else "forces"
    extra = "      stress: false\n      virial: false\n" if source == "memmap" else ""
    return f"""seed: 42
device: cpu
base_precision: 64
print_stats: false
final_eval: false
architecture:
  name: soap_bpnn
  training:
    batch_size: {batch}
    num_epochs: {epochs}
    log_interval: 1
    num_workers: {workers}
training_set:
  systems:
    read_from: ../../{read_from}
    length_unit: angstrom
  targets:
    energy:
      key: energy
      unit: eV
      forces:
        key: {forces}
{extra}validation_set: 0.1
test_set: 0.1
"""


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    )
    return env


def _train(
    folder: Path, name: str, source: str, batch: int, epochs: int, workers: int, floor: bool
) -> dict[str, Any]:
    """One ``mtt train`` in a fresh process, in ``folder/runs/name``."""
    where = folder / "runs" / name
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    (where / "options.yaml").write_text(options_text(source, batch, epochs, workers))
    command = [sys.executable, "-m", "bench.training_run", "--options", "options.yaml"]
    command += ["--out", "result.json", "--source", source] + (["--floor"] if floor else [])
    try:
        done = subprocess.run(
            command,
            cwd=where,
            env=_environment(),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {RUN_TIMEOUT:.0f} s"}
    result = where / "result.json"
    if not result.exists():
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return {"error": lines[-1]}
    record: dict[str, Any] = json.loads(result.read_text())
    record["workers"] = workers
    return record


def run_all(
    structures: int,
    batch: int,
    epochs: int,
    sources: list[str],
    workers: list[int],
    folder: Path,
    floor: bool = True,
    repeat: int = 1,
    progress: Any = sys.stderr,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The data of one size, then every run: ``(data record, cells)``; the
    cells keyed ``<source>/w<workers>``, and ``floor``, each ``{"runs":
    [...]}`` or ``{"error": why}``. ``repeat`` rounds, the sources in each
    round starting with the next one."""
    name = size_name(structures, batch)
    data_folder = folder / name
    arguments = ["training-data", "--count", str(structures), "--folder", str(data_folder)]
    data, error = spawn(arguments, DATA_TIMEOUT)
    if data is None:
        failed = {"error": f"data not written: {error}"}
        cells = {f"{s}/w{w}": dict(failed) for w in workers for s in sources}
        return {"structures": structures, "error": error}, cells
    print(f"{name} data: {data}", file=progress, flush=True)
    cells: dict[str, Any] = {}
    plan = [(source, count, False) for count in workers for source in sources]
    if floor and epochs >= 2:
        plan.append(("disk", 0, True))
    for index in range(repeat):
        shift = index % len(plan)
        for source, count, is_floor in plan[shift:] + plan[:shift]:
            key = "floor" if is_floor else f"{source}/w{count}"
            cell = cells.setdefault(key, {"runs": []})
            if cell.get("error"):
                continue
            if source == "blockmap" and data.get("blockmap_error"):
                cells[key] = {"error": data["blockmap_error"]}
                continue
            record = _train(
                data_folder, key.replace("/", "-"), source, batch, epochs, count, is_floor
            )
            if record.get("error"):
                cells[key] = {"error": record["error"]}
            else:
                cell["runs"].append(record)
            print(f"{name} {key}: {_brief(record)}", file=progress, flush=True)
    return data, cells


def _brief(record: dict[str, Any]) -> str:
    if record.get("error"):
        return f"failed: {record['error']}"
    epochs = ", ".join(f"{epoch['seconds']:.2f}" for epoch in record["epochs"])
    return f"epochs {epochs} s, {record['seconds']:.0f} s in all"


# -- figures of a cell ----------------------------------------------------------------


def _runs(cell: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The runs of a cell that recorded epochs."""
    if not cell or cell.get("error"):
        return []
    return [run for run in cell.get("runs", []) if run.get("epochs")]


def _later(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Epochs 2..N of a run (the first holds one-time costs), or the only one."""
    epochs: list[dict[str, Any]] = run["epochs"]
    return epochs[1:] if len(epochs) > 1 else epochs


def _median_of_runs(cell: dict[str, Any] | None, figure: Any) -> float | None:
    """The median of ``figure(run)`` over the cell's runs that have it."""
    values = [value for value in map(figure, _runs(cell)) if value is not None]
    return float(statistics.median(values)) if values else None


def part(cell: dict[str, Any] | None, kind: str) -> float | None:
    """The seconds of ``kind`` in an epoch: the median over the runs of
    their medians over epochs 2..N."""
    return _median_of_runs(cell, lambda run: statistics.median(e[kind] for e in _later(run)))


def epoch_seconds(cell: dict[str, Any] | None) -> float | None:
    """The epoch time (median over the runs of the median of epochs 2..N)."""
    return part(cell, "seconds")


def waits_seen(cell: dict[str, Any] | None) -> bool:
    """Whether the main process's wait was timed for every batch (a batch
    path that went around torch's DataLoader iterator would not be)."""
    return all(
        epoch.get("batches", len(epoch["losses"])) >= len(epoch["losses"])
        for run in _runs(cell)
        for epoch in run["epochs"]
    )


#: why a data share is missing although the runs are there
WAITS_UNSEEN = "the wait for batches was not timed for every batch"


def data_share(cell: dict[str, Any] | None) -> float | None:
    """Data handling (main process: waiting for batches, unpacking them) over
    the epoch, epochs 2..N together (median over the runs); None when the
    wait was not timed for every batch."""
    if not waits_seen(cell):
        return None

    def share(run: dict[str, Any]) -> float:
        later = _later(run)
        return sum(e["data"] for e in later) / sum(e["seconds"] for e in later)

    return _median_of_runs(cell, share)


def pss(cell: dict[str, Any] | None, which: str) -> float | None:
    """The peak PSS of the main process (``main``) or of the largest worker
    (``worker_max``), median over the runs."""
    return _median_of_runs(cell, lambda run: run["pss"][which])


def floor_seconds(cell: dict[str, Any] | None) -> float | None:
    """The model's time per epoch: the floor run's epochs fed from memory,
    less their unpacking."""
    return _median_of_runs(
        cell, lambda run: statistics.median(e["seconds"] - e["data"] for e in _later(run))
    )


def losses(cell: dict[str, Any] | None) -> list[list[str]]:
    """Every batch loss of the cell's first run, in order."""
    runs = _runs(cell)
    if not runs:
        return []
    return [loss for epoch in runs[0]["epochs"] for loss in epoch["losses"]]


def reproducible(cell: dict[str, Any] | None) -> bool:
    """Whether every run of the cell gave the same losses, bit for bit."""
    runs = _runs(cell)
    first = [loss for epoch in runs[0]["epochs"] for loss in epoch["losses"]] if runs else []
    return all(
        [loss for epoch in run["epochs"] for loss in epoch["losses"]] == first for run in runs
    )


def same_losses(ours: dict[str, Any] | None, theirs: dict[str, Any] | None) -> tuple[int, int]:
    """(batches whose loss is bit for bit the same, batches in the longer run)."""
    a, b = losses(ours), losses(theirs)
    return sum(1 for x, y in zip(a, b, strict=False) if x == y), max(len(a), len(b))


# -- the report ----------------------------------------------------------------------


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1e3:.0f} ms" if value < 1 else f"{value:.2f} s"


def _megabytes(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e6:.0f} MB"


def _ratio(ours: float | None, theirs: float | None) -> str:
    return "" if ours is None or not theirs else f" ({ours / theirs:.2f}x)"


def _cell(cells: dict[str, Any], source: str, workers: int, row: str) -> str:
    cell = cells.get(f"{source}/w{workers}")
    if cell is None:
        return "-"
    if cell.get("error"):
        return f"failed: {cell['error']}" if row == "epoch" else "-"
    disk = cells.get(f"disk/w{workers}")
    if row == "epoch":
        ours = epoch_seconds(cell)
        return _seconds(ours) + ("" if source == "disk" else _ratio(ours, epoch_seconds(disk)))
    if row == "setup":
        ours = _setup(cell)
        return _seconds(ours) + ("" if source == "disk" else _ratio(ours, _setup(disk)))
    if row == "cpu":
        ours = part(cell, "cpu")
        return _seconds(ours) + ("" if source == "disk" else _ratio(ours, part(disk, "cpu")))
    if row == "data":
        share = data_share(cell)
        if share is None:
            return f"not measured: {WAITS_UNSEEN}"
        text = f"{_seconds(part(cell, 'data'))}, {share:.0%}" if share is not None else "-"
        inside = "in the workers: " if workers else ""
        return (
            f"{text} ({inside}item {_seconds(part(cell, 'item'))}, "
            f"collate {_seconds(part(cell, 'collate'))}; unpack {_seconds(part(cell, 'unpack'))})"
        )
    if row == "pss":
        text = f"main {_megabytes(pss(cell, 'main'))}"
        if workers:
            text += f", per worker {_megabytes(pss(cell, 'worker_max'))}"
        return text
    # losses
    runs = len(_runs(cell))
    again = (
        ""
        if runs < 2
        else (
            f"; same in its {runs} runs"
            if reproducible(cell)
            else f"; NOT the same in its {runs} runs"
        )
    )
    if source == "disk":
        return f"(reference, {len(losses(cell))} batches{again})"
    same, total = same_losses(cell, disk)
    verdict = "yes" if total and same == total else "no"
    note = " (float32 storage: not a target)" if source == "memmap" else ""
    return f"{verdict} ({same} of {total}){note}{again}"


ROWS = (
    ("epoch", "epoch (median of epochs 2..N; ratio to DiskDataset)"),
    ("cpu", "CPU time of the main process per epoch (ratio)"),
    ("data", "data handling per epoch, share of the epoch"),
    ("pss", "peak PSS"),
    ("setup", "in Trainer.train before the first epoch"),
    ("losses", "losses bit-identical to DiskDataset's"),
)


def _setup(cell: dict[str, Any] | None) -> float | None:
    return _median_of_runs(cell, lambda run: run.get("setup"))


def _verdict(met: bool) -> str:
    return "**met**" if met else "**missed**"


def targets(cells: dict[str, Any], workers: list[int]) -> list[str]:
    """The issue's targets, met or missed, for one size."""
    lines = []
    ours0, disk0 = cells.get("blockmap/w0"), cells.get("disk/w0")
    ours_cells = [cells.get(f"blockmap/w{count}") for count in workers]
    missing = next((c["error"] for c in ours_cells if c and c.get("error")), None)
    for count in workers:
        ours, disk = cells.get(f"blockmap/w{count}"), cells.get(f"disk/w{count}")
        a, b = epoch_seconds(ours), epoch_seconds(disk)
        label = f"epoch <= {EPOCH_RATIO}x DiskDataset's, {count} workers"
        if a is None or b is None:
            lines.append(f"- {label}: not measured ({_why(ours, disk)})")
        else:
            cpu = _ratio(part(ours, "cpu"), part(disk, "cpu")).strip(" ()")
            note = f" (main-process CPU time: {cpu})" if cpu else ""
            lines.append(f"- {label}: {a / b:.2f}x, {_verdict(a / b <= EPOCH_RATIO)}{note}")
    for count in workers:
        ours = cells.get(f"blockmap/w{count}")
        share = data_share(ours)
        label = f"data handling <= {DATA_SHARE:.0%} of the epoch, {count} workers"
        if share is None:
            why = WAITS_UNSEEN if _runs(ours) else _why(ours, None)
            lines.append(f"- {label}: not measured ({why})")
        else:
            lines.append(f"- {label}: {share:.0%}, {_verdict(share <= DATA_SHARE)}")
    for count in (w for w in workers if w):
        ours, disk = cells.get(f"blockmap/w{count}"), cells.get(f"disk/w{count}")
        label = f"peak PSS per worker <= DiskDataset's, {count} workers"
        a, b = pss(ours, "worker_max"), pss(disk, "worker_max")
        if a is not None and b is not None:
            lines.append(f"- {label}: {_megabytes(a)} against {_megabytes(b)}, {_verdict(a <= b)}")
        else:
            lines.append(f"- {label}: not measured ({_why(ours, disk)})")
    for count in workers:
        ours, disk = cells.get(f"blockmap/w{count}"), cells.get(f"disk/w{count}")
        label = f"losses bit-identical to DiskDataset's, {count} workers"
        if losses(ours) and losses(disk):
            same, total = same_losses(ours, disk)
            lines.append(f"- {label}: {same} of {total} batches, {_verdict(same == total)}")
        else:
            lines.append(f"- {label}: not measured ({_why(ours, disk)})")
    floor = floor_seconds(cells.get("floor"))
    floor_cpu = part(cells.get("floor"), "cpu")
    disk_epoch = epoch_seconds(disk0)
    if floor is not None and disk_epoch:
        lines.append(
            f"- floor: the model alone (epochs fed from memory, unpacking excluded) takes "
            f"{_seconds(floor)} per epoch, {floor / disk_epoch:.2f}x DiskDataset's "
            f"0-worker epoch; the {EPOCH_RATIO}x target asks for "
            f"{_seconds(EPOCH_RATIO * disk_epoch)}"
        )
        disk_data = part(disk0, "data")
        if disk_data is not None:
            lines.append(
                f"  (DiskDataset's epoch less its data handling: "
                f"{_seconds(disk_epoch - disk_data)})"
            )
        disk_cpu = part(disk0, "cpu")
        if floor_cpu is not None and disk_cpu:
            lines.append(
                f"  In CPU time: {_seconds(floor_cpu)} per epoch (unpacking included), "
                f"{floor_cpu / disk_cpu:.2f}x DiskDataset's {_seconds(disk_cpu)}"
            )
    if missing and ours0 is not None:
        lines.append(f"- blockmap: {missing}")
    return lines


def _why(ours: dict[str, Any] | None, theirs: dict[str, Any] | None) -> str:
    for cell in (ours, theirs):
        if cell is None:
            return "not run"
        if cell.get("error"):
            return str(cell["error"])
    return "no epochs recorded"


def markdown(results: dict[str, Any], data: dict[str, Any], epochs: int, repeat: int = 1) -> str:
    """The report: per size, a table of the sources side by side for each
    number of workers, then the targets."""
    # what the cells hold (some may come from an earlier run, --reuse)
    every = [run for cells in results.values() for cell in cells.values() for run in _runs(cell)]
    if every:
        epochs = max(len(run["epochs"]) for run in every)
        repeat = max(len(_runs(cell)) for cells in results.values() for cell in cells.values())
    runs = "one fresh process" if repeat == 1 else f"the median of {repeat} fresh processes"
    lines = [
        "A tiny real `mtt train` run: SOAP-BPNN (metatrain's defaults), CPU, float64, "
        f"{epochs} epochs, seed 42, one thread (`OMP_NUM_THREADS=1`, "
        "`torch.set_num_threads(1)`), validation and test sets 10% each; Cu/Ni clusters "
        f"of 8 to 29 atoms with ASE's EMT energies and forces. Each cell is {runs} (the "
        "cells interleaved round by round). An epoch runs from its start to the next "
        "epoch's (training and validation passes, logging, checkpoint); the figures are "
        "medians of epochs 2..N (the first holds one-time costs). Data handling is what "
        "the main process spends waiting for batches in the DataLoader iterator plus "
        "unpacking them: with 0 workers the wait holds the item reading and the collate; "
        "with 2 workers those run in the workers, and their sums, timed inside each "
        "worker, are shown beside it. CPU time: the main process's, less sensitive than "
        "the wall clock to the other work of a shared machine. PSS: the peak proportional"
        " set size (`/proc/<pid>/smaps_rollup`) of the main process and of the largest "
        "worker, read whenever a process's resident set grew by 2% (looked at every 20 "
        "ms) and at least every second. Losses: every training and validation batch loss,"
        " compared bit for bit with the DiskDataset run's at the same number of workers "
        "(metatrain shuffles differently with workers). The floor: a DiskDataset run "
        "whose later epochs are fed the first epoch's batches from memory, their "
        "unpacking excluded: the model's own time per epoch.",
        "",
    ]
    for name, cells in results.items():
        record = data.get(name, {})
        structures, batch = name.split("-b")
        facts = [f"{int(structures):,} structures"]
        if record.get("atoms"):
            facts.append(f"{record['atoms']:,} atoms")
        facts.append(f"batch {batch}")
        files = [
            f"{label} {record[f'{label}_bytes'] / 1e6:.1f} MB"
            for label in ("zip", "memmap", "bmdata")
            if record.get(f"{label}_bytes")
        ]
        if files:
            facts.append("files: " + ", ".join(files))
        lines += [f"**{', '.join(facts)}**", ""]
        workers = sorted({int(key.split("/w")[1]) for key in cells if "/w" in key})
        sources = [s for s in SOURCES if any(k.startswith(f"{s}/") for k in cells)]
        lines += [
            "| | " + " | ".join(TITLES[s] for s in sources) + " |",
            "|---|" + "---|" * len(sources),
        ]
        for count in workers:
            for row, label in ROWS:
                values = [_cell(cells, s, count, row) for s in sources]
                lines.append(f"| {label}, {count} workers | " + " | ".join(values) + " |")
        loads = [run["load"][0] for cell in cells.values() for run in _runs(cell) if "load" in run]
        if loads:
            lines += [
                "",
                f"Load average (1 minute) at the end of the runs: {min(loads):.1f} to "
                f"{max(loads):.1f}, on {os.cpu_count()} CPUs.",
            ]
        lines += ["", "Targets (blockmap against DiskDataset):", ""]
        lines += targets(cells, workers)
        lines.append("")
    return "\n".join(lines) + "\n"


# -- the command ---------------------------------------------------------------------


def _sizes(text: str) -> list[tuple[int, int]]:
    sizes = []
    for item in filter(None, text.split(",")):
        structures, _, batch = item.partition(":")
        sizes.append((int(structures), int(batch or 8)))
    return sizes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m bench training``."""
    default = ",".join(f"{s}:{b}" for s, b in SIZES)
    parser.add_argument(
        "--sizes",
        default=default,
        help=f"STRUCTURES:BATCH, comma-separated (default {default}); empty: measure "
        "nothing, report --reuse's file",
    )
    parser.add_argument("--epochs", type=int, default=3, help="epochs per run (default 3)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="fresh processes per cell; medians (default 1)"
    )
    parser.add_argument("--sources", default=",".join(SOURCES), help=f"among {','.join(SOURCES)}")
    parser.add_argument("--workers", default="0,2", help="DataLoader workers (default 0,2)")
    parser.add_argument("--no-floor", action="store_true", help="skip the model-only run")
    parser.add_argument("--json", type=Path, help="also write every measurement here, as JSON")
    parser.add_argument(
        "--reuse", type=Path, help="report the cells not measured now from this JSON file"
    )
    parser.add_argument(
        "--workdir", type=Path, help="where the data and runs go (default: a temporary folder)"
    )
    parser.add_argument("--markdown", type=Path, help="write the report into this file")


def run(args: argparse.Namespace) -> int:
    """``python -m bench training``."""
    if args.epochs < 1 or args.repeat < 1:
        print("--epochs and --repeat must be at least 1", file=sys.stderr)
        return 2
    sources = [s for s in args.sources.split(",") if s]
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        print(f"unknown sources {unknown}; choose among {','.join(SOURCES)}", file=sys.stderr)
        return 2
    workers = [int(w) for w in args.workers.split(",") if w]
    folder = Path(tempfile.mkdtemp(prefix="blockmap-training-", dir=args.workdir))
    results: dict[str, Any] = {}
    data: dict[str, Any] = {}
    try:
        for structures, batch in _sizes(args.sizes):
            name = size_name(structures, batch)
            data[name], results[name] = run_all(
                structures,
                batch,
                args.epochs,
                sources,
                workers,
                folder,
                floor=not args.no_floor,
                repeat=args.repeat,
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.reuse:
        earlier = json.loads(args.reuse.read_text())
        for name, cells in earlier["results"].items():
            now = results.setdefault(name, {})
            data.setdefault(name, earlier["data"].get(name, {}))
            for key, cell in cells.items():
                now.setdefault(key, cell)
    if args.json:
        args.json.write_text(
            json.dumps(
                {"results": results, "data": data, "epochs": args.epochs, "repeat": args.repeat},
                indent=1,
            )
        )
    text = markdown(results, data, args.epochs, args.repeat)
    print(text)
    if args.markdown:
        write_section(args.markdown, text, "training")
    failed = [
        key
        for cells in results.values()
        for key, cell in cells.items()
        if cell.get("error") and cell["error"] != BLOCKMAP_UNAVAILABLE
    ]
    return 1 if failed else 0


def _data_worker(args: argparse.Namespace) -> int:
    from . import training_data

    return training_data.main(args.count, args.folder)


def add_commands(commands: Any) -> None:
    """Add ``training-data``, the fresh process that writes a size's data."""
    worker = commands.add_parser("training-data", help="(started by training) write the data")
    worker.add_argument("--count", required=True, type=int)
    worker.add_argument("--folder", required=True, type=Path)
    worker.set_defaults(run=_data_worker)
