"""The datasets family of the benchmark (``python -m bench datasets``): many
maps in one file, against the layouts metatensor's users have today.

Data: QM9-like structures (:func:`bench.batches.qm9_maps`: an energy with
its position gradient, a dipole and per-atom charges, three blocks;
130,000 by default), and W split by blocks (100 maps of one block, 8 MB
each).

Layouts, each written and read by its own tools:

- ``blockmap``: one dataset file (:class:`blockmap.Dataset`);
- ``diskdataset``: metatrain's DiskDataset layout, a zip with one member
  ``<i>/energy.mts`` per structure holding the ``.mts`` archive wrapped in
  an NPY array of bytes, written with ``zipfile`` and metatensor-core's
  ``save_buffer``, read as metatrain reads it: member -> ``BytesIO`` ->
  ``np.load`` -> ``metatensor.io.load_buffer``;
- ``folder``: one ``.mts`` file per map, ``metatensor.save`` and
  ``metatensor.load``.

Operations, each in a fresh process (the files are written by the
``create`` process and read by the later ones, from the page cache): create
(write every map), open, random access of one map (p50 and p99 over 10,000
random indices, after the open), a full epoch in random order (every map
read and each of its arrays summed; for the peers, measured on 10,000 maps
and scaled to all of them), append of 1,000 more maps. Each reports its
time and the growth of its peak resident memory; the epoch of blockmap's
dataset also reports its minor page faults against the file's pages (a
page read twice would fault twice).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .batches import qm9_maps
from .report import write_section
from .runner import spawn

__all__ = ["add_arguments", "add_commands", "run"]

LAYOUTS = ("blockmap", "diskdataset", "folder")
OPERATIONS = ("create", "open", "random", "epoch", "append")
#: random indices read by "random" (of W's 8 MB maps: fewer)
RANDOM_READS = {"qm9": 10_000, "w": 300}
#: maps read by the peers' epoch (scaled to all of them)
PEER_EPOCH = 10_000
APPENDED = 1_000
WORKER_TIMEOUT = 3600.0


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _file_of(layout: str, workdir: Path, data: str) -> Path:
    return (
        workdir / {"blockmap": f"{data}.data", "diskdataset": f"{data}.zip", "folder": data}[layout]
    )


def _maps(data: str, count: int, start: int = 0) -> list[Any]:
    if data == "qm9":
        return qm9_maps(count, start=start)
    import blockmap

    from .workload import build_blockmap, make_arrays

    whole = build_blockmap(make_arrays())
    keys = whole.keys
    return [
        blockmap.TensorMap(blockmap.Labels(keys.names, keys.values[[i]]), [whole.block(i).copy()])
        for i in range(start, start + count)
    ]


# -- the layouts ---------------------------------------------------------------


def _create(layout: str, path: Path, maps: list[Any], append: bool = False) -> None:
    if layout == "blockmap":
        import blockmap

        with blockmap.DatasetWriter(path, append=append) as writer:
            for tensor in maps:
                writer.write(tensor)
        return
    theirs = [tensor.to_metatensor() for tensor in maps]
    if layout == "diskdataset":
        start = 0
        if append:
            with zipfile.ZipFile(path) as archive:
                start = sum(1 for name in archive.namelist() if name.endswith("/energy.mts"))
        with zipfile.ZipFile(path, "a" if append else "w") as archive:
            for i, tensor in enumerate(theirs, start=start):
                with archive.open(f"{i}/energy.mts", "w") as member:
                    np.save(member, np.frombuffer(tensor.save_buffer(), dtype=np.uint8))
        return
    import metatensor

    path.mkdir(exist_ok=True)
    start = len(os.listdir(path)) if append else 0
    for i, tensor in enumerate(theirs, start=start):
        metatensor.save(path / f"{i}.mts", tensor)


class _Opened:
    """A layout opened for reading: ``len`` and ``read(i)``."""

    def __init__(self, layout: str, path: Path) -> None:
        self.layout = layout
        if layout == "blockmap":
            import blockmap

            self.dataset = blockmap.Dataset(path)
            self.count = len(self.dataset)
        elif layout == "diskdataset":
            self.zip = zipfile.ZipFile(path)
            self.count = sum(1 for n in self.zip.namelist() if n.endswith("/energy.mts"))
        else:
            self.path = path
            self.count = len(os.listdir(path))

    def read(self, i: int) -> Any:
        if self.layout == "blockmap":
            return self.dataset[i]
        import metatensor

        if self.layout == "diskdataset":
            with self.zip.open(f"{i}/energy.mts") as member:
                wrapped = np.load(io.BytesIO(member.read()))
            return metatensor.io.load_buffer(wrapped)
        return metatensor.load(self.path / f"{i}.mts")


def _touch(tensor: Any) -> float:
    """What a training step reads of a map: every array, summed."""
    total = 0.0
    for block in tensor.blocks():
        total += float(np.asarray(block.values).sum())
        for parameter in block.gradients_list():
            total += float(np.asarray(block.gradient(parameter).values).sum())
    return total


def measure(operation: str, layout: str, data: str, count: int, workdir: Path) -> dict[str, Any]:
    """One operation, timed in this process."""
    # the libraries are imported before any clock starts
    import blockmap  # noqa: F401

    if layout != "blockmap":
        import metatensor  # noqa: F401
    path = _file_of(layout, workdir, data)
    result: dict[str, Any] = {}
    if operation in ("create", "append"):
        if operation == "create":
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
            maps = _maps(data, count)
        else:
            maps = _maps(data, APPENDED if data == "qm9" else 10, start=0)
        # the maps are built before the clock starts, as they would be in memory
        _reset_peak()
        before = _peak_rss()
        start = time.perf_counter()
        _create(layout, path, maps, append=operation == "append")
        result["seconds"] = time.perf_counter() - start
        result["peak_growth"] = _peak_rss() - before
        result["maps"] = len(maps)
        result["bytes"] = _size(path)
        return result
    if operation == "open":
        _reset_peak()
        before = _peak_rss()
        start = time.perf_counter()
        opened = _Opened(layout, path)
        result["seconds"] = time.perf_counter() - start
        result["peak_growth"] = _peak_rss() - before
        result["maps"] = opened.count
        return result
    opened = _Opened(layout, path)
    rng = np.random.default_rng(1)
    if operation == "random":
        indices = rng.integers(0, opened.count, size=RANDOM_READS[data])
        times = []
        for i in indices:
            start = time.perf_counter()
            opened.read(int(i))
            times.append(time.perf_counter() - start)
        result["p50"] = float(np.percentile(times, 50))
        result["p99"] = float(np.percentile(times, 99))
        result["seconds"] = result["p50"]
        return result
    # epoch: every map in a random order (the peers: a part, scaled)
    order = rng.permutation(opened.count)
    if layout != "blockmap":
        order = order[:PEER_EPOCH]
    _reset_peak()
    rss_before, peak_before = _rss(), _peak_rss()
    faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    for i in order:
        _touch(opened.read(int(i)))
    elapsed = time.perf_counter() - start
    result["seconds"] = elapsed * opened.count / len(order)
    result["measured_maps"] = len(order)
    result["peak_growth"] = _peak_rss() - peak_before
    result["rss_growth"] = _rss() - rss_before
    result["minor_faults"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before
    result["file_pages"] = _size(path) // os.sysconf("SC_PAGE_SIZE")
    result["file_bytes"] = _size(path)
    return result


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(entry.stat().st_size for entry in os.scandir(path))
    return path.stat().st_size if path.exists() else 0


def _worker(args: argparse.Namespace) -> int:
    result = measure(args.operation, args.layout, args.data, args.count, args.workdir)
    print(json.dumps(result), flush=True)
    return 0


# -- running and reporting -------------------------------------------------------


def run_all(
    data: str,
    count: int,
    repeat: int,
    layouts: Sequence[str],
    operations: Sequence[str] = OPERATIONS,
) -> dict[str, Any]:
    """Every operation of every layout; ``repeat`` processes for open and
    random access (the others write or read everything once). The files
    are always created first (the later operations read them)."""
    results: dict[str, Any] = {}
    workdir = Path(tempfile.mkdtemp(prefix="blockmap-datasets-"))
    try:
        for operation in OPERATIONS:
            if operation not in operations and operation != "create":
                continue
            runs = repeat if operation in ("open", "random") else 1
            for layout in layouts:
                cell = results.setdefault(f"{operation}/{layout}", {"runs": []})
                for _ in range(runs):
                    arguments = ["datasets-worker", "--operation", operation, "--layout", layout]
                    arguments += ["--data", data, "--count", str(count)]
                    arguments += ["--workdir", str(workdir)]
                    result, error = spawn(arguments, WORKER_TIMEOUT)
                    if result is None:
                        cell["error"] = error
                        break
                    cell["runs"].append(result)
                print(f"{data} {operation} {layout}: {cell}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def _median(cell: dict[str, Any] | None, key: str) -> float | None:
    if not cell or not cell.get("runs"):
        return None
    return float(statistics.median(run[key] for run in cell["runs"]))


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1e-3:
        return f"{value * 1e6:.3g} us"
    if value < 1:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def _megabytes(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e6:+.1f} MB"


def markdown(results: dict[str, dict[str, Any]], counts: dict[str, int], repeat: int) -> str:
    """The report: one table per dataset, then the targets."""
    lines = [
        "Each cell is one fresh process (open and random access: the median of "
        f"{repeat}); times of the operation alone; memory is the growth of the peak "
        "resident set. Random access reads 10,000 random maps (300 of W's). The peers' "
        "epochs read 10,000 maps in random order and are scaled to all of them. Files are "
        "read from the page cache.",
        "",
    ]
    for data, results_of in results.items():
        lines += [
            f"**{'QM9-like structures' if data == 'qm9' else 'W split by blocks'}** "
            f"({counts[data]:,} maps):",
            "",
            "| operation | blockmap dataset | DiskDataset layout (metatensor-core) "
            "| folder of .mts files (metatensor-core) |",
            "|---|---:|---:|---:|",
        ]
        for operation in OPERATIONS:
            cells = []
            for layout in LAYOUTS:
                cell = results_of.get(f"{operation}/{layout}")
                if cell and cell.get("error"):
                    cells.append(f"failed: {cell['error']}")
                    continue
                if operation == "random":
                    p50, p99 = _median(cell, "p50"), _median(cell, "p99")
                    cells.append(f"p50 {_seconds(p50)}, p99 {_seconds(p99)}")
                    continue
                text = _seconds(_median(cell, "seconds"))
                growth = _median(cell, "peak_growth")
                if growth is not None:
                    text += f", {_megabytes(growth)}"
                cells.append(text)
            label = {
                "append": f"append {APPENDED if data == 'qm9' else 10:,} more",
                "random": "random access of one map",
                "epoch": "epoch in random order",
            }.get(operation, operation)
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        epoch = results_of.get("epoch/blockmap")
        if epoch and epoch.get("runs"):
            run = epoch["runs"][0]
            lines += [
                "",
                f"blockmap's epoch: {run['minor_faults']:,} minor page faults for a file of "
                f"{run['file_pages']:,} pages ({run['file_bytes'] / 1e6:.1f} MB); resident "
                f"memory {_megabytes(run['rss_growth'])} after it, the peak "
                f"{_megabytes(run['peak_growth'])}.",
            ]
        lines.append("")
    lines += ["Targets:", ""] + _targets(results.get("qm9", {}))
    return "\n".join(lines) + "\n"


def _targets(results: dict[str, Any]) -> list[str]:
    def verdict(met: bool) -> str:
        return "**met**" if met else "**NOT met**"

    lines = []
    opened = _median(results.get("open/blockmap"), "seconds")
    if opened is not None:
        lines.append(f"- open in under 50 ms: {_seconds(opened)}, {verdict(opened < 0.05)}")
    p50 = _median(results.get("random/blockmap"), "p50")
    theirs = _median(results.get("random/diskdataset"), "p50")
    if p50 is not None:
        lines.append(
            f"- random access of one small map in 50 us or less: {_seconds(p50)}, "
            f"{verdict(p50 <= 50e-6)}"
        )
    if p50 is not None and theirs is not None:
        lines.append(
            f"- at least 100x faster than the DiskDataset layout: {theirs / p50:.3g}x, "
            f"{verdict(theirs / p50 >= 100)}"
        )
    epoch = results.get("epoch/blockmap")
    if epoch and epoch.get("runs"):
        run = epoch["runs"][0]
        lines.append(
            f"- an epoch that reads no page twice: {run['minor_faults']:,} faults for "
            f"{run['file_pages']:,} pages, "
            f"{verdict(run['minor_faults'] <= run['file_pages'] * 1.05)}"
        )
        bound = run["file_bytes"] + 16 * 200_000 + 16e6
        lines.append(
            f"- RSS growth bounded by the index plus the pages touched: "
            f"{_megabytes(run['rss_growth'])} for a {run['file_bytes'] / 1e6:.1f} MB file, "
            f"{verdict(run['rss_growth'] <= bound)}"
        )
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m bench datasets``."""
    parser.add_argument("--count", type=int, default=130_000, help="QM9-like maps")
    parser.add_argument("--repeat", type=int, default=3, help="processes for open and access")
    parser.add_argument(
        "--data", default="qm9,w", help="the datasets measured: qm9 (QM9-like), w (W by blocks)"
    )
    parser.add_argument(
        "--operations", default=",".join(OPERATIONS), help=f"among {','.join(OPERATIONS)}"
    )
    parser.add_argument("--json", type=Path, help="also write every measurement here, as JSON")
    parser.add_argument(
        "--reuse",
        type=Path,
        help="report the datasets not measured now from this JSON file of an earlier run",
    )
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help=f"among {','.join(LAYOUTS)}")
    parser.add_argument("--markdown", type=Path, help="write the report into this file")


def run(args: argparse.Namespace) -> int:
    """``python -m bench datasets``."""
    layouts = [layout for layout in args.layouts.split(",") if layout]
    wanted = [data for data in args.data.split(",") if data]
    counts = {data: {"qm9": args.count, "w": 100}[data] for data in wanted}
    operations = [op for op in args.operations.split(",") if op]
    results = {
        data: run_all(data, count, args.repeat, layouts, operations)
        for data, count in counts.items()
    }
    if args.reuse:
        # what was not measured now comes from the earlier run
        earlier = json.loads(args.reuse.read_text())
        for data, cells in earlier["results"].items():
            now = results.setdefault(data, {})
            counts.setdefault(data, earlier["counts"][data])
            for key, cell in cells.items():
                operation = key.split("/")[0]
                if key not in now or (operation not in operations and data in wanted):
                    now[key] = cell
        results = {data: results[data] for data in ("qm9", "w") if data in results}
    if args.json:
        args.json.write_text(json.dumps({"results": results, "counts": counts}, indent=1))
    text = markdown(results, counts, args.repeat)
    print(text)
    if args.markdown:
        write_section(args.markdown, text, "datasets")
    failed = [key for of in results.values() for key, cell in of.items() if cell.get("error")]
    return 1 if failed else 0


def add_commands(commands: Any) -> None:
    """Add ``datasets-worker``, the fresh process of one operation."""
    worker = commands.add_parser("datasets-worker", help="(started by datasets) one operation")
    worker.add_argument("--operation", required=True, choices=OPERATIONS)
    worker.add_argument("--layout", required=True, choices=LAYOUTS)
    worker.add_argument("--data", required=True, choices=("qm9", "w"))
    worker.add_argument("--count", required=True, type=int)
    worker.add_argument("--workdir", required=True, type=Path)
    worker.set_defaults(run=_worker)
