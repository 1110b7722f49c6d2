"""The datasets family of the benchmark (``python -m bench datasets``): many
maps in one file, against the layouts users of metatensor and of
neighbouring libraries have today.

Data: QM9-like structures (:func:`bench.batches.qm9_maps`: per-atom energies
keyed by atom type, with their ``positions`` gradient, 3 or 4 blocks per
map; 130,000 and 20,000 maps by default), and W split by blocks (100 maps
of one block, 8 MB each).

Layouts, each written and read by its own tools:

- ``blockmap``: one dataset file (:class:`blockmap.Dataset`);
- ``lmdb``, ``hdf5``, ``diskdataset``: an LMDB of pickled maps as fairchem
  stores samples, an HDF5 file of concatenated arrays with offsets as MACE
  stores configurations, and metatrain's real ``DiskDataset``
  (:mod:`bench.dataset_peers`); QM9-like data only;
- ``mts-zip``: metatrain's DiskDataset layout emulated with metatensor-core
  alone, a zip with one member ``<i>/energy.mts`` per map holding the
  ``.mts`` archive wrapped in an NPY array of bytes, written with
  ``zipfile`` and ``save_buffer``, read as metatrain reads a target: member
  -> ``BytesIO`` -> ``np.load`` -> ``metatensor.io.load_buffer``; W only
  (on QM9-like data the real DiskDataset replaces it);
- ``folder``: one ``.mts`` file per map, ``metatensor.save`` and
  ``metatensor.load``.

Operations, each in a fresh process (the files are written by the
``create`` process and read by the later ones, from the page cache unless
said): create (write every map; the maps are built and converted to the
layout's own types before the clock starts), open, random access of one map
(p50 and p99 over 10,000 random indices, after the open), cold random
access (the file's pages dropped from the page cache with
``posix_fadvise(POSIX_FADV_DONTNEED)`` after an fsync, then open and 300
random maps, counting the bytes the process read from the disk in
``/proc/self/io``; then, untimed, the whole file is read back into the
page cache for the operations after it), an epoch in random order (every map read and each of
its arrays summed), an epoch through a ``torch.utils.data.DataLoader``
(batch 64, shuffled, the batch's maps joined along samples by the collate
function, 0 and 2 workers), append of 1,000 more maps. The slow peers'
epochs read 10,000 maps and are scaled to all of them. Each operation
reports its time and the growth of its peak resident memory; the epoch of
blockmap's dataset also reports its minor page faults against the file's
pages (a page read twice would fault twice).

Runs: open, random access and cold access take ``--repeat`` processes per
layout, and every operation but append does for blockmap and LMDB (the
ratios' two sides); the layouts are interleaved round by round, each round
starting with the next layout, and the report shows medians.
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import dataset_growth, dataset_peers
from .batches import qm9_maps
from .report import write_section
from .runner import spawn

__all__ = ["add_arguments", "add_commands", "run"]

LAYOUTS = ("blockmap", "lmdb", "hdf5", "diskdataset", "mts-zip", "folder")
#: the layouts measured on each kind of data
DATA_LAYOUTS = {
    "qm9": ("blockmap", "lmdb", "hdf5", "diskdataset", "folder"),
    "w": ("blockmap", "mts-zip", "folder"),
}
TITLES = {
    "blockmap": "blockmap dataset",
    "lmdb": "LMDB of pickled maps (fairchem)",
    "hdf5": "HDF5, arrays concatenated + offsets (MACE)",
    "diskdataset": "metatrain DiskDataset",
    "mts-zip": "DiskDataset layout (metatensor-core)",
    "folder": "folder of .mts files (metatensor-core)",
}
OPERATIONS = ("create", "open", "random", "cold", "epoch", "loader0", "loader2", "append")
#: the operations measured on each kind of data (W's family as it was)
DATA_OPERATIONS = {
    "qm9": OPERATIONS,
    "w": ("create", "open", "random", "epoch", "append"),
}
#: operations run ``--repeat`` times for every layout; the others run once,
#: or ``--repeat`` times for the layouts of :data:`RATIO_LAYOUTS` (the two
#: sides of the targets' ratios)
REPEATED = ("open", "random", "cold")
RATIO_LAYOUTS = ("blockmap", "lmdb")
#: random indices read by "random" (of W's 8 MB maps: fewer), and by "cold"
RANDOM_READS = {"qm9": 10_000, "w": 300}
COLD_READS = 300
#: maps read by the slow peers' epochs (scaled to all of them)
PEER_EPOCH = 10_000
#: layouts whose epochs read every map
FULL_EPOCH = ("blockmap", "lmdb")
BATCH = 64
APPENDED = 1_000
WORKER_TIMEOUT = 3600.0
#: seconds a DataLoader waits for one batch from its workers
LOADER_TIMEOUT = 600.0


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


def _read_bytes() -> int:
    """Bytes this process made the kernel read from storage (``/proc/self/io``)."""
    with open("/proc/self/io") as counters:
        for line in counters:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    raise OSError("no read_bytes in /proc/self/io")


def filesystem_of(path: Path) -> str:
    """The type of the filesystem holding ``path`` (``/proc/mounts``), or ``"?"``."""
    best, kind = "", "?"
    resolved = str(Path(path).resolve())
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                point = fields[1]
                inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, fields[2]
    except OSError:
        pass
    return kind


#: filesystems whose pages are never read from a disk (cold access means nothing there)
MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")


def default_workdir() -> Path:
    """Where the files are written: the temporary directory unless it is in
    memory (tmpfs), then the repository's parent folder (``bench/..``)."""
    temporary = Path(tempfile.gettempdir())
    if filesystem_of(temporary) not in MEMORY_FILESYSTEMS:
        return temporary
    return Path(__file__).resolve().parent.parent


def _file_of(layout: str, workdir: Path, data: str) -> Path:
    suffix = {
        "blockmap": ".data",
        "lmdb": ".lmdb",
        "hdf5": ".h5",
        "diskdataset": ".zip",
        "mts-zip": ".mts.zip",
        "folder": "",
    }[layout]
    return workdir / f"{data}-{layout}{suffix}"


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


def _inputs(layout: str, maps: list[Any]) -> list[Any]:
    """What ``layout``'s writer takes (made before the clock starts)."""
    if layout in dataset_peers.PEERS:
        return dataset_peers.inputs(layout, maps)
    if layout in ("mts-zip", "folder"):
        return [tensor.to_metatensor() for tensor in maps]
    return maps


def _create(layout: str, path: Path, items: list[Any], append: bool = False) -> None:
    if layout == "blockmap":
        import blockmap

        with blockmap.DatasetWriter(path, append=append, overwrite=not append) as writer:
            for tensor in items:
                writer.write(tensor)
        return
    if layout in dataset_peers.PEERS:
        dataset_peers.create(layout, path, items, append)
        return
    if layout == "mts-zip":
        start = 0
        if append:
            with zipfile.ZipFile(path) as archive:
                start = sum(1 for name in archive.namelist() if name.endswith("/energy.mts"))
        with zipfile.ZipFile(path, "a" if append else "w") as archive:
            for i, tensor in enumerate(items, start=start):
                with archive.open(f"{i}/energy.mts", "w") as member:
                    np.save(member, np.frombuffer(tensor.save_buffer(), dtype=np.uint8))
        return
    import metatensor

    path.mkdir(exist_ok=True)
    start = len(os.listdir(path)) if append else 0
    for i, tensor in enumerate(items, start=start):
        metatensor.save(path / f"{i}.mts", tensor)


class _Opened:
    """A layout opened for reading: ``count`` and ``read(i)``."""

    def __init__(self, layout: str, path: Path) -> None:
        self.layout = layout
        self.peer: Any = None
        if layout == "blockmap":
            import blockmap

            self.dataset = blockmap.Dataset(path)
            self.count = len(self.dataset)
        elif layout in dataset_peers.PEERS:
            self.peer = dataset_peers.open_peer(layout, path)
            self.count = self.peer.count
        elif layout == "mts-zip":
            self.zip = zipfile.ZipFile(path)
            self.count = sum(1 for n in self.zip.namelist() if n.endswith("/energy.mts"))
        else:
            self.path = path
            self.count = len(os.listdir(path))

    def read(self, i: int) -> Any:
        if self.layout == "blockmap":
            return self.dataset[i]
        if self.peer is not None:
            return self.peer.read(i)
        import metatensor

        if self.layout == "mts-zip":
            with self.zip.open(f"{i}/energy.mts") as member:
                wrapped = np.load(io.BytesIO(member.read()))
            return metatensor.io.load_buffer(wrapped)
        return metatensor.load(self.path / f"{i}.mts")

    def close(self) -> None:
        """Let go of the file (an LMDB environment opens once per process)."""
        if self.peer is not None and hasattr(self.peer, "close"):
            self.peer.close()


def read_back(opened: _Opened, i: int) -> Any:
    """Map ``i`` of an opened layout, as blockmap's (for checks)."""
    import blockmap

    item = opened.read(i)
    if opened.layout in dataset_peers.PEERS:
        return dataset_peers.as_blockmap(opened.layout, item)
    if opened.layout in ("mts-zip", "folder"):
        return blockmap.from_metatensor(item)
    return item


def _touch(tensor: Any) -> float:
    """What a training step reads of a map: every array, summed."""
    if not hasattr(tensor, "blocks"):
        tensor = tensor.energy  # metatrain's sample: the system and its targets
    total = 0.0
    for block in tensor.blocks():
        total += float(np.asarray(block.values).sum())
        for parameter in block.gradients_list():
            total += float(np.asarray(block.gradient(parameter).values).sum())
    return total


def _imports(layout: str) -> None:
    """Import what ``layout`` is read with (before any clock starts)."""
    import blockmap  # noqa: F401

    if layout in dataset_peers.PEERS:
        dataset_peers.imports(layout)
    elif layout != "blockmap":
        import metatensor  # noqa: F401


# -- the DataLoader epoch ----------------------------------------------------------


def _collate(layout: str) -> Callable[[list[Any]], Any]:
    """The join of a batch's maps along samples, with each library's join
    (maps of QM9-like structures have different keys: their union)."""
    import functools

    if layout in ("blockmap", "lmdb", "hdf5"):
        import blockmap

        return functools.partial(blockmap.join, axis="samples", different_keys="union")
    if layout == "diskdataset":
        from metatrain.utils.data.dataset import CollateFn

        # metatrain's own: join each field, then pack the batch into one
        # buffer (its maps do not pickle across workers); unpacked by _unpack
        return CollateFn(target_keys=["energy"], join_kwargs={"different_keys": "union"})
    import metatensor

    return functools.partial(metatensor.join, axis="samples", different_keys="union")


def _unpack(layout: str, batch: Any) -> Any:
    """A batch as the training step gets it (metatrain's ``unpack_batch``)."""
    if layout == "diskdataset":
        from metatrain.utils.data.dataset import unpack_batch

        return unpack_batch(batch)
    return batch


class _LoaderDataset:
    """A map-style torch dataset over a layout, opened in the process that
    reads it first (DataLoader workers open their own, as fairchem's LMDB
    dataset does: an LMDB environment must not cross a fork)."""

    def __init__(self, layout: str, path: Path, count: int) -> None:
        self.layout, self.path, self.count = layout, path, count
        self.opened: _Opened | None = None
        self.pid = -1

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> Any:
        if self.opened is None or self.pid != os.getpid():
            self.opened, self.pid = _Opened(self.layout, self.path), os.getpid()
        return self.opened.read(i)


def _loader_epoch(layout: str, path: Path, count: int, workers: int) -> dict[str, Any]:
    import torch
    from torch.utils.data import DataLoader, Subset

    dataset: Any = _LoaderDataset(layout, path, count)
    measured = count
    if layout not in FULL_EPOCH and count > PEER_EPOCH:
        rng = np.random.default_rng(3)
        dataset = Subset(dataset, rng.permutation(count)[:PEER_EPOCH].tolist())
        measured = PEER_EPOCH
    loader = DataLoader(
        dataset,
        batch_size=BATCH,
        shuffle=True,
        num_workers=workers,
        collate_fn=_collate(layout),
        generator=torch.Generator().manual_seed(0),
        # a batch lost by a worker fails the run instead of hanging it
        timeout=LOADER_TIMEOUT if workers else 0,
    )
    _reset_peak()
    before = _peak_rss()
    batches = 0
    start = time.perf_counter()
    for batch in loader:
        _unpack(layout, batch)
        batches += 1
    elapsed = time.perf_counter() - start
    return {
        "seconds": elapsed * count / measured,
        "measured_maps": measured,
        "batches": batches,
        "peak_growth": _peak_rss() - before,
    }


# -- cold access -------------------------------------------------------------------


def _files(path: Path) -> list[Path]:
    return [Path(entry.path) for entry in os.scandir(path)] if path.is_dir() else [path]


def drop_cache(path: Path) -> None:
    """Write back, then drop from the page cache, every page of the file (or
    of the folder's files) at ``path``; pages some process maps stay."""
    os.sync()
    for file in _files(path):
        fd = os.open(file, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _cold(layout: str, path: Path) -> dict[str, Any]:
    drop_cache(path)
    before = _read_bytes()
    start = time.perf_counter()
    opened = _Opened(layout, path)
    opened_at = time.perf_counter()
    after_open = _read_bytes()
    rng = np.random.default_rng(2)
    for i in rng.integers(0, opened.count, size=COLD_READS):
        _touch(opened.read(int(i)))
    end = time.perf_counter()
    cold_bytes = _read_bytes() - before
    # the later operations read from the page cache: every page back in it
    for file in _files(path):
        with open(file, "rb") as whole:
            while whole.read(1 << 24):
                pass
    return {
        "seconds": end - start,
        "open_seconds": opened_at - start,
        "open_bytes": after_open - before,
        "read_bytes": cold_bytes - (after_open - before),
        "bytes": cold_bytes,
        "reads": COLD_READS,
        "peak_growth": 0,
    }


# -- one operation -------------------------------------------------------------------


def measure(operation: str, layout: str, data: str, count: int, workdir: Path) -> dict[str, Any]:
    """One operation, timed in this process."""
    # the libraries are imported before any clock starts
    _imports(layout)
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
            # QM9-like maps numbered after the others; W has only 100 blocks
            start = count if data == "qm9" else 0
            maps = _maps(data, APPENDED if data == "qm9" else 10, start=start)
        # the maps are built before the clock starts, as they would be in memory
        items = _inputs(layout, maps)
        del maps
        _reset_peak()
        before = _peak_rss()
        start = time.perf_counter()
        _create(layout, path, items, append=operation == "append")
        result["seconds"] = time.perf_counter() - start
        result["peak_growth"] = _peak_rss() - before
        result["maps"] = len(items)
        result["bytes"] = _size(path)
        result["disk_bytes"] = _disk_size(path)
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
    if operation == "cold":
        return _cold(layout, path)
    if operation in ("loader0", "loader2"):
        return _loader_epoch(layout, path, count, int(operation[-1]))
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
    # epoch: every map in a random order (the slow peers: a part, scaled)
    order = rng.permutation(opened.count)
    if layout not in FULL_EPOCH:
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


def _disk_size(path: Path) -> int:
    """Bytes the file takes on the disk (its blocks)."""
    if path.is_dir():
        return sum(entry.stat().st_blocks * 512 for entry in os.scandir(path))
    return path.stat().st_blocks * 512 if path.exists() else 0


def _worker(args: argparse.Namespace) -> int:
    result = measure(args.operation, args.layout, args.data, args.count, args.workdir)
    print(json.dumps(result), flush=True)
    return 0


# -- running and reporting -------------------------------------------------------


#: what a layout's own tools do not do: (operation, layout) -> why
UNSUPPORTED = {("append", "hdf5"): "not supported (written once, as MACE does)"}


def _runs(operation: str, layout: str, repeat: int) -> int:
    if (operation, layout) in UNSUPPORTED:
        return 0
    if operation in REPEATED or (layout in RATIO_LAYOUTS and operation != "append"):
        return repeat
    return 1


def run_all(
    data: str,
    count: int,
    repeat: int,
    layouts: Sequence[str],
    operations: Sequence[str] = OPERATIONS,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Every operation of every layout, in fresh processes: ``repeat`` rounds
    where :func:`_runs` says so, the layouts interleaved, each round starting
    with the next one. The files are always created first (the later operations
    read them) in a temporary folder of ``workdir``, deleted at the end."""
    results: dict[str, Any] = {}
    folder = Path(tempfile.mkdtemp(prefix="blockmap-datasets-", dir=workdir or default_workdir()))
    try:
        for operation in OPERATIONS:
            if operation not in operations and operation != "create":
                continue
            rounds = max(_runs(operation, layout, repeat) for layout in layouts)
            for index in range(rounds):
                shift = index % len(layouts)
                for layout in list(layouts[shift:]) + list(layouts[:shift]):
                    if (operation, layout) in UNSUPPORTED:
                        continue
                    cell = results.setdefault(f"{operation}/{layout}", {"runs": []})
                    if cell.get("error") or len(cell["runs"]) >= _runs(operation, layout, repeat):
                        continue
                    if operation != "create" and results.get(f"create/{layout}", {}).get("error"):
                        cell["error"] = "not created"
                        continue
                    arguments = ["datasets-worker", "--operation", operation, "--layout", layout]
                    arguments += ["--data", data, "--count", str(count)]
                    arguments += ["--workdir", str(folder)]
                    result, error = spawn(arguments, WORKER_TIMEOUT)
                    if result is None:
                        cell["error"] = error
                    else:
                        cell["runs"].append(result)
                    print(
                        f"{data} {count} {operation} {layout}: {result or error}",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return results


def _median(cell: dict[str, Any] | None, key: str) -> float | None:
    if not cell or not cell.get("runs") or cell.get("error"):
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


def _size_text(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e6:.1f} MB"


#: the targets: (label, operation, key of the runs, highest ratio blockmap / LMDB)
TARGETS = (
    ("random access p50", "random", "p50", 0.5),
    ("epoch, DataLoader, 0 workers", "loader0", "seconds", 0.75),
    ("epoch, DataLoader, 2 workers", "loader2", "seconds", 0.75),
    ("file size", "create", "bytes", 1.0),
    ("cold bytes read (open + 300 maps)", "cold", "bytes", 2.0),
    ("create", "create", "seconds", 1.0),
)


def ratios(results: dict[str, Any]) -> list[tuple[str, float | None, float | None, float]]:
    """Per target: (label, blockmap's figure, LMDB's, the highest ratio)."""
    return [
        (
            label,
            _median(results.get(f"{operation}/blockmap"), key),
            _median(results.get(f"{operation}/lmdb"), key),
            bound,
        )
        for label, operation, key, bound in TARGETS
    ]


def _figure(operation: str, key: str, value: float | None) -> str:
    return _size_text(value) if key == "bytes" else _seconds(value)


def _cell_text(operation: str, cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "-"
    if cell.get("error"):
        return f"failed: {cell['error']}"
    if operation == "random":
        return f"p50 {_seconds(_median(cell, 'p50'))}, p99 {_seconds(_median(cell, 'p99'))}"
    if operation == "cold":
        return (
            f"{_size_text(_median(cell, 'bytes'))} "
            f"(open {_size_text(_median(cell, 'open_bytes'))}), "
            f"{_seconds(_median(cell, 'seconds'))}"
        )
    text = _seconds(_median(cell, "seconds"))
    growth = _median(cell, "peak_growth")
    if growth is not None:
        text += f", {_megabytes(growth)}"
    return text


def _label(operation: str, data: str) -> str:
    return {
        "append": f"append {APPENDED if data == 'qm9' else 10:,} more",
        "random": "random access of one map",
        "cold": f"page cache dropped: bytes read by open + {COLD_READS} random maps, time",
        "epoch": "epoch in random order (loop)",
        "loader0": f"epoch, DataLoader (batch {BATCH}, join), 0 workers",
        "loader2": f"epoch, DataLoader (batch {BATCH}, join), 2 workers",
    }.get(operation, operation)


def markdown(
    results: dict[str, dict[str, Any]],
    counts: dict[str, int],
    repeat: int,
    filesystem: str = "?",
    chart: str | None = None,
) -> str:
    """The report: one table per dataset, then the targets."""
    lines = [
        f"Each cell is the median of fresh processes ({repeat} for open, random and cold "
        "access, and for every operation but append of blockmap and LMDB; one for the "
        "others), the layouts interleaved round by round; times of the operation "
        "alone; memory is the growth of the peak resident set. Random access reads "
        "10,000 random maps (300 of W's). The epochs of the layouts other than blockmap "
        f"and LMDB read {PEER_EPOCH:,} maps and are scaled to all of them. Files are "
        "read from the page cache, except the cold row: the file's pages are dropped "
        "(`os.sync`, `fsync`, `posix_fadvise(POSIX_FADV_DONTNEED)`), then a fresh "
        f"process opens it and reads {COLD_READS} random maps, and `read_bytes` of "
        f"`/proc/self/io` counts what came from the disk (work directory on {filesystem}). "
        "Create starts from maps in memory in the layout's own types (blockmap maps; "
        "metatensor-core maps for the .mts layouts; metatomic systems and "
        "metatensor-torch maps for DiskDataset).",
        "",
    ]
    for name, results_of in results.items():
        data = name.split("-")[0]
        layouts = [layout for layout in DATA_LAYOUTS[data] if f"create/{layout}" in results_of]
        title = "QM9-like structures" if data == "qm9" else "W split by blocks"
        lines += [
            f"**{title}** ({counts[name]:,} maps):",
            "",
            "| operation | " + " | ".join(TITLES[layout] for layout in layouts) + " |",
            "|---|" + "---:|" * len(layouts),
        ]
        for operation in DATA_OPERATIONS[data]:
            cells = [
                UNSUPPORTED.get((operation, x))
                or _cell_text(operation, results_of.get(f"{operation}/{x}"))
                for x in layouts
            ]
            if all(cell == "-" for cell in cells):
                continue
            lines.append(f"| {_label(operation, data)} | " + " | ".join(cells) + " |")
            if operation == "create":
                sizes = [
                    _size_text(_median(results_of.get(f"create/{x}"), "bytes")) for x in layouts
                ]
                lines.append("| file size | " + " | ".join(sizes) + " |")
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
        if data == "qm9":
            lines += ["", "Targets (ratio blockmap / LMDB, in this run):", ""]
            lines += _targets(results_of)
        lines.append("")
    if chart:
        lines += [f"![datasets: each layout's figures over LMDB's]({chart})", ""]
    return "\n".join(lines) + "\n"


def _verdict(met: bool) -> str:
    return "**met**" if met else "**NOT met**"


def _targets(results: dict[str, Any]) -> list[str]:
    lines = []
    for label, ours, lmdb, bound in ratios(results):
        if ours is None or lmdb is None or lmdb <= 0:
            lines.append(f"- {label} <= {bound}x LMDB's: not measured")
            continue
        ratio = ours / lmdb
        key = "bytes" if "bytes" in label or "size" in label else "seconds"
        lines.append(
            f"- {label} <= {bound}x LMDB's: {_figure('', key, ours)} against "
            f"{_figure('', key, lmdb)}, {ratio:.3g}x, {_verdict(ratio <= bound)}"
        )
    opened = _median(results.get("open/blockmap"), "seconds")
    if opened is not None:
        lines.append(f"- open in under 50 ms: {_seconds(opened)}, {_verdict(opened < 0.05)}")
    p50 = _median(results.get("random/blockmap"), "p50")
    theirs = _median(results.get("random/diskdataset"), "p50")
    if p50 is not None:
        lines.append(
            f"- random access of one small map in 50 us or less: {_seconds(p50)}, "
            f"{_verdict(p50 <= 50e-6)}"
        )
    if p50 is not None and theirs is not None:
        lines.append(
            f"- at least 100x faster than metatrain's DiskDataset: {theirs / p50:.3g}x, "
            f"{_verdict(theirs / p50 >= 100)}"
        )
    epoch = results.get("epoch/blockmap")
    if epoch and epoch.get("runs"):
        run = epoch["runs"][0]
        lines.append(
            f"- an epoch that reads no page twice: {run['minor_faults']:,} faults for "
            f"{run['file_pages']:,} pages, "
            f"{_verdict(run['minor_faults'] <= run['file_pages'] * 1.05)}"
        )
        bound = run["file_bytes"] + 16 * 200_000 + 16e6
        lines.append(
            f"- RSS growth bounded by the index plus the pages touched: "
            f"{_megabytes(run['rss_growth'])} for a {run['file_bytes'] / 1e6:.1f} MB file, "
            f"{_verdict(run['rss_growth'] <= bound)}"
        )
    return lines


#: the chart's metrics: (label, operation, key)
CHART_METRICS = (
    ("random p50", "random", "p50"),
    ("epoch, 0 workers", "loader0", "seconds"),
    ("epoch, 2 workers", "loader2", "seconds"),
    ("file size", "create", "bytes"),
    ("cold bytes", "cold", "bytes"),
    ("create", "create", "seconds"),
)
CHART_COLORS = {
    "blockmap": "#1b9e77",
    "lmdb": "#7570b3",
    "hdf5": "#e7298a",
    "diskdataset": "#d95f02",
    "folder": "#666666",
}


def write_chart(results: dict[str, dict[str, Any]], counts: dict[str, int], path: Path) -> None:
    """One panel per QM9-like dataset: each layout's figure over LMDB's
    (log scale), per metric, with blockmap's targets marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [name for name in results if name.startswith("qm9")]
    if not names:
        return
    figure, panels = plt.subplots(len(names), 1, figsize=(10.0, 4.2 * len(names)), squeeze=False)
    for axes, name in zip(panels[:, 0], names, strict=True):
        of = results[name]
        layouts = [layout for layout in DATA_LAYOUTS["qm9"] if f"create/{layout}" in of]
        width = 0.8 / len(layouts)
        for index, layout in enumerate(layouts):
            positions, heights = [], []
            for row, (_, operation, key) in enumerate(CHART_METRICS):
                ours = _median(of.get(f"{operation}/{layout}"), key)
                lmdb = _median(of.get(f"{operation}/lmdb"), key)
                if ours and lmdb:
                    positions.append(row + (index - (len(layouts) - 1) / 2) * width)
                    heights.append(ours / lmdb)
            axes.bar(positions, heights, width, label=TITLES[layout], color=CHART_COLORS[layout])
        bounds = {operation + key: bound for _, operation, key, bound in TARGETS}
        for row, (_, operation, key) in enumerate(CHART_METRICS):
            bound = bounds[operation + key]
            axes.plot([row - 0.45, row + 0.45], [bound, bound], color="black", linewidth=1)
        axes.set_yscale("log")
        axes.set_ylabel("figure / LMDB's (log); lower is better")
        axes.set_xticks(range(len(CHART_METRICS)))
        axes.set_xticklabels([label for label, _, _ in CHART_METRICS])
        axes.set_title(f"{counts[name]:,} QM9-like maps; black lines: blockmap's targets")
        axes.grid(axis="y", which="major", alpha=0.3)
        axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m bench datasets``."""
    parser.add_argument(
        "--count", default="130000,20000", help="QM9-like maps (comma-separated: one dataset each)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="processes per repeated operation")
    parser.add_argument(
        "--data", default="qm9,w", help="the datasets measured: qm9 (QM9-like), w (W by blocks)"
    )
    parser.add_argument(
        "--operations",
        default=",".join((*OPERATIONS, "grow")),
        help=f"among {','.join(OPERATIONS)},grow (grow: append sessions, bench/dataset_growth.py)",
    )
    parser.add_argument(
        "--grow-sessions",
        type=int,
        default=1000,
        help="append sessions of one map of 'grow' (version 3's: at most 100)",
    )
    parser.add_argument("--json", type=Path, help="also write every measurement here, as JSON")
    parser.add_argument(
        "--reuse",
        type=Path,
        help="report the datasets not measured now from this JSON file of an earlier run",
    )
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help=f"among {','.join(LAYOUTS)}")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="where the files are written (default: the temporary folder, unless it is a tmpfs)",
    )
    parser.add_argument("--markdown", type=Path, help="write the report into this file")
    parser.add_argument(
        "--chart",
        type=Path,
        help="write the chart here (default with --markdown: datasets.png beside it)",
    )


def run(args: argparse.Namespace) -> int:
    """``python -m bench datasets``."""
    layouts = [layout for layout in args.layouts.split(",") if layout]
    wanted = [data for data in args.data.split(",") if data]
    counts: dict[str, int] = {}
    for data in wanted:
        if data == "qm9":
            for count in args.count.split(","):
                counts[f"qm9-{int(count)}"] = int(count)
        else:
            counts[data] = 100
    operations = [op for op in args.operations.split(",") if op]
    grow = "grow" in operations
    operations = [op for op in operations if op != "grow"]
    workdir = args.workdir or default_workdir()
    filesystem = filesystem_of(workdir)
    print(f"work directory {workdir} ({filesystem})", file=sys.stderr, flush=True)
    results = {}
    for name, count in counts.items():
        data = name.split("-")[0]
        chosen = [layout for layout in DATA_LAYOUTS[data] if layout in layouts]
        chosen_ops = [op for op in operations if op in DATA_OPERATIONS[data]]
        results[name] = run_all(data, count, args.repeat, chosen, chosen_ops, workdir)
    if args.reuse:
        # what was not measured now comes from the earlier run
        earlier = json.loads(args.reuse.read_text())
        for name, cells in earlier["results"].items():
            now = results.setdefault(name, {})
            counts.setdefault(name, earlier["counts"][name])
            for key, cell in cells.items():
                operation = key.split("/")[0]
                if key not in now or (operation not in operations and name in counts):
                    now[key] = cell
    if args.json:
        args.json.write_text(json.dumps({"results": results, "counts": counts}, indent=1))
    chart = args.chart
    if chart is None and args.markdown is not None:
        chart = args.markdown.parent / "datasets.png"
    link = None
    if chart is not None:
        write_chart(results, counts, chart)
        if args.markdown is not None:
            link = os.path.relpath(chart, args.markdown.parent)
    text = markdown(results, counts, args.repeat, filesystem, link)
    qm9_counts = [count for name, count in counts.items() if name.startswith("qm9")]
    if grow and qm9_counts and "blockmap" in layouts:
        grown = [
            dataset_growth.measure(
                max(qm9_counts),
                sessions,
                version,
                workdir,
                lambda path: int(_cold("blockmap", path)["bytes"]),
            )
            for version, sessions in ((4, args.grow_sessions), (3, min(100, args.grow_sessions)))
        ]
        if args.json:
            args.json.with_suffix(".grow.json").write_text(json.dumps(grown, indent=1))
        text += "\n" + dataset_growth.markdown(grown)
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
