"""One training run of the training family, in this (fresh) process:
metatrain's ``mtt train`` on an options file, instrumented.

``python -m bench.training_run --options OPTIONS.yaml --out RESULT.json
--source disk|memmap|blockmap [--floor]``, run in its own folder (``mtt``
writes ``outputs/`` and the model there). The record written to RESULT.json:

- ``epochs``: per epoch, its window (from the first ``RMSEAccumulator`` the
  soap-bpnn trainer makes for the epoch to the next epoch's, the last one to
  the end of ``Trainer.train``: training and validation passes, logging and
  checkpoints), and inside it the seconds of
  - ``item``: reading items (``torch.utils.data.Subset.__getitem__`` and
    ``__getitems__``: metatrain serves every split through a ``Subset``);
  - ``collate``: the collate function (``CollateFn.__call__`` of the trainer
    module, wrapped when ``Trainer.train`` starts, so that a version patched
    in before that is the one timed);
  - ``unpack``: the trainer module's ``unpack_batch`` (wrapped there too);
  - ``wait``: the main process in the DataLoader iterator's ``__next__``
    (with 0 workers this holds the item reading and the collate; with
    workers, the time the model waited for them);
  item and collate are timed wherever they run: the DataLoader workers
  (forked for every pass) append their timings to a file per process, which
  this process adds up after the run, each timing counted in the epoch its
  start falls in;
  and ``losses``: every training and validation batch loss (the
  ``LossAggregator`` call) as ``float.hex``, tagged ``train`` or ``val`` by
  the loader of the batch before it (a shuffled one is metatrain's training
  loader; ``torch.is_grad_enabled()`` cannot tell, since the soap-bpnn
  trainer validates with gradients on when forces are a target);
- ``pss``: the peak proportional set size of this process and of each of its
  children (the DataLoader workers), from ``/proc/<pid>/smaps_rollup``, by a
  thread that looks every 20 ms (see :class:`PssSampler`), with the CPU
  time it took;
- per epoch also ``cpu``, this process's CPU seconds in the window (all its
  threads but the sampler), and ``batches``, the waits timed;
- ``setup``: the seconds from ``Trainer.train``'s start to the first
  epoch's (the composition and scaler fits, and what a batch path prepares
  there, such as neighbour lists);
- ``load``: the machine's load averages at the end;
- ``error``: why the run failed, when it did.

With ``--floor`` (0 workers): the first epoch's batches are kept as the
DataLoader handed them out, and the later epochs are fed those same
batches from memory, so their time is the model's (and unpacking's) alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

__all__ = ["main", "run_blockmap", "run_metatrain"]

MAIN_PID = os.getpid()
#: seconds between two samples of the memory of the run's processes
PSS_INTERVAL = 0.02
EVENTS_DIR = Path("events")

_events: list[tuple[str, float, float]] = []
_losses: list[tuple[float, str, str]] = []
_epoch_starts: list[float] = []
_train_start: list[float] = []
_train_end: list[float] = []
#: this process's CPU seconds at each epoch's start and at the end, less
#: the memory sampler's
_cpu_marks: list[float] = []
_sampler: list[Any] = []
_worker_file: tuple[int, Any] | None = None
_depth: dict[str, int] = {}
#: the pass the last batch was handed out for: "train" or "val"
_pass = ["train"]


def _record(kind: str, start: float, seconds: float) -> None:
    """Keep one timing: in memory here, in a file of its own in a worker."""
    global _worker_file
    pid = os.getpid()
    if pid == MAIN_PID:
        _events.append((kind, start, seconds))
        return
    if _worker_file is None or _worker_file[0] != pid:
        EVENTS_DIR.mkdir(exist_ok=True)
        _worker_file = (pid, open(EVENTS_DIR / f"{pid}.txt", "a"))  # noqa: SIM115
    out = _worker_file[1]
    out.write(f"{kind} {start!r} {seconds!r}\n")
    out.flush()


def _cpu() -> float:
    """This process's CPU seconds so far, the memory sampler's excluded."""
    return time.process_time() - sum(sampler.cpu for sampler in _sampler)


def _timed(kind: str, function: Any, outermost: bool = False) -> Any:
    """``function``, recording its time as ``kind`` (only the outermost call
    when ``outermost``: a Subset of a Subset reads one item)."""
    if getattr(function, "_bench_timed", False):
        return function

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if outermost and _depth.get(kind):
            return function(*args, **kwargs)
        _depth[kind] = _depth.get(kind, 0) + 1
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            _depth[kind] -= 1
            _record(kind, start, time.perf_counter() - start)

    wrapper._bench_timed = True  # type: ignore[attr-defined]
    wrapper.__wrapped__ = function  # type: ignore[attr-defined]
    return wrapper


# -- memory ------------------------------------------------------------------------


def _pss(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def _rss(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return None


PAGE = os.sysconf("SC_PAGE_SIZE")
#: a process's PSS is read again when its RSS grew by this fraction (at
#: least :data:`PSS_GROWTH_BYTES`) since the last read, or after
#: :data:`PSS_EVERY` seconds: reading ``smaps_rollup`` walks every resident
#: page, and costs tens of milliseconds of CPU for a process holding torch
PSS_GROWTH = 0.02
PSS_GROWTH_BYTES = 4 << 20
PSS_EVERY = 1.0


#: the processes this one started (the DataLoader workers), alive or not
_children: set[int] = set()


def _watch_children() -> None:
    """Note every process started through ``multiprocessing`` (listing the
    children from ``/proc`` costs milliseconds each time: every pid is read)."""
    import multiprocessing.process

    original = multiprocessing.process.BaseProcess.start

    def start(self: Any) -> None:
        original(self)
        if os.getpid() == MAIN_PID and self.pid is not None:
            _children.add(self.pid)

    multiprocessing.process.BaseProcess.start = start  # type: ignore[method-assign]


class PssSampler(threading.Thread):
    """The peak PSS of this process and of each of its descendants: every
    :data:`PSS_INTERVAL` the RSS of each (``statm``, cheap), and its PSS when
    the RSS grew or a while passed (new processes at once)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peaks: dict[int, int] = {}
        self.total = 0
        self.reads = 0
        self.cpu = 0.0
        self.stopping = threading.Event()
        self.last: dict[int, tuple[int, float, int]] = {}  # pid -> (rss, when, pss)

    def run(self) -> None:
        while not self.stopping.is_set():
            started = time.thread_time()
            total = 0
            now = time.perf_counter()
            for pid in [MAIN_PID, *sorted(_children)]:
                rss = _rss(pid)
                if rss is None:
                    _children.discard(pid)
                    continue
                last = self.last.get(pid)
                grown = last is None or rss > last[0] + max(PSS_GROWTH * last[0], PSS_GROWTH_BYTES)
                if grown or now - last[1] >= PSS_EVERY:  # type: ignore[index]
                    pss = _pss(pid)
                    if pss is None:
                        continue
                    self.reads += 1
                    self.last[pid] = (rss, now, pss)
                    self.peaks[pid] = max(self.peaks.get(pid, 0), pss)
                total += self.last[pid][2]
            self.total = max(self.total, total)
            self.cpu += time.thread_time() - started
            self.stopping.wait(PSS_INTERVAL)

    def result(self) -> dict[str, Any]:
        workers = {pid: pss for pid, pss in self.peaks.items() if pid != MAIN_PID}
        return {
            "main": self.peaks.get(MAIN_PID, 0),
            "worker_max": max(workers.values(), default=0),
            "workers": len(workers),
            "total_max": self.total,
            "reads": self.reads,
            "sampler_cpu": self.cpu,
        }


# -- instrumentation ---------------------------------------------------------------


def _install(floor: bool) -> None:
    """Wrap what is timed (before metatrain runs)."""
    import metatrain.soap_bpnn.trainer as trainer_module
    from metatrain.utils.loss import LossAggregator
    from torch.utils.data import Subset
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    Subset.__getitem__ = _timed("item", Subset.__getitem__, outermost=True)  # type: ignore[method-assign]
    Subset.__getitems__ = _timed("item", Subset.__getitems__, outermost=True)  # type: ignore[method-assign]

    original_next = _BaseDataLoaderIter.__next__
    replay = _Replay(original_next) if floor else None

    def next_batch(self: Any) -> Any:
        if os.getpid() != MAIN_PID:
            return original_next(self)
        _pass[0] = "train" if _shuffled(self) else "val"
        start = time.perf_counter()
        try:
            if replay is not None:
                return replay.next(self)
            return original_next(self)
        finally:
            _record("wait", start, time.perf_counter() - start)

    _BaseDataLoaderIter.__next__ = next_batch  # type: ignore[method-assign]

    original_loss = LossAggregator.__call__

    def loss(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original_loss(self, *args, **kwargs)
        # not torch.is_grad_enabled(): with forces among the targets the
        # soap-bpnn trainer validates with gradients on
        tag = _pass[0]
        _losses.append((time.perf_counter(), tag, float(out.item()).hex()))
        return out

    LossAggregator.__call__ = loss  # type: ignore[method-assign]

    original_train = trainer_module.Trainer.train

    def train(self: Any, *args: Any, **kwargs: Any) -> Any:
        _train_start.append(time.perf_counter())
        _wrap_batch_path(trainer_module)
        try:
            return original_train(self, *args, **kwargs)
        finally:
            _train_end.append(time.perf_counter())
            _cpu_marks.append(_cpu())

    trainer_module.Trainer.train = train  # type: ignore[method-assign]


def _shuffled(iterator: Any) -> bool:
    """Whether a DataLoader iterator draws in a random order: metatrain's
    training loaders do, its validation loaders do not."""
    from torch.utils.data import RandomSampler

    sampler = iterator._index_sampler
    inner = getattr(sampler, "sampler", None)
    if inner is not None:
        return isinstance(inner, RandomSampler)
    return bool(getattr(sampler, "shuffle", False))


def _wrap_batch_path(trainer_module: Any) -> None:
    """At ``Trainer.train``'s entry: time the collate function, the unpacking
    and the epochs' starts of the trainer module as they are then."""
    collate = trainer_module.CollateFn
    if isinstance(collate, type):
        collate.__call__ = _timed("collate", collate.__call__)
    else:
        trainer_module.CollateFn = _timed("collate", collate)
    trainer_module.unpack_batch = _timed("unpack", trainer_module.unpack_batch)
    accumulator = trainer_module.RMSEAccumulator
    if getattr(accumulator, "_bench_timed", False):
        return
    made = [0]

    def rmse_accumulator(*args: Any, **kwargs: Any) -> Any:
        # two at each epoch's start (training and validation)
        if made[0] % 2 == 0:
            _epoch_starts.append(time.perf_counter())
            _cpu_marks.append(_cpu())
        made[0] += 1
        return accumulator(*args, **kwargs)

    rmse_accumulator._bench_timed = True  # type: ignore[attr-defined]
    trainer_module.RMSEAccumulator = rmse_accumulator


class _Replay:
    """The floor: the first epoch's batches of each loader, fed again to the
    later epochs from memory (0 workers)."""

    def __init__(self, original_next: Any) -> None:
        self.original_next = original_next
        self.kept: dict[tuple[int, int], list[Any]] = {}
        self.complete: set[tuple[int, int]] = set()

    def next(self, iterator: Any) -> Any:
        key = (id(iterator._dataset), id(iterator._collate_fn))
        epoch = len(_epoch_starts) - 1
        mode = getattr(iterator, "_bench_mode", None)
        if mode is None:
            if epoch >= 1 and key in self.complete:
                mode = "replay"
            elif epoch == 0:
                mode = "keep"
                self.kept[key] = []
            else:
                mode = "pass"
            iterator._bench_mode, iterator._bench_position = mode, 0
        if mode == "replay":
            batches = self.kept[key]
            if iterator._bench_position >= len(batches):
                raise StopIteration
            iterator._bench_position += 1
            return batches[iterator._bench_position - 1]
        try:
            batch = self.original_next(iterator)
        except StopIteration:
            if mode == "keep":
                self.complete.add(key)
            raise
        if mode == "keep":
            self.kept[key].append(batch)
            # metatrain's CombinedDataLoader stops at the loader's length
            # without asking for the StopIteration
            if len(self.kept[key]) >= len(iterator):
                self.complete.add(key)
        return batch


# -- the runs ----------------------------------------------------------------------


def run_metatrain(options: Path) -> None:
    """metatrain's own ``mtt train OPTIONS -o model.pt``."""
    from metatrain.__main__ import main as mtt_main

    sys.argv = ["mtt", "train", str(options), "-o", "model.pt"]
    mtt_main()


def run_blockmap(options: Path) -> None:
    """``mtt train`` through blockmap (``.bmdata`` datasets served by
    ``blockmap.metatrain``)."""
    from .training_data import BLOCKMAP_UNAVAILABLE, blockmap_metatrain

    module = blockmap_metatrain()
    if module is None:
        raise RuntimeError(BLOCKMAP_UNAVAILABLE)
    status = module.main(["train", str(options), "-o", "model.pt"])
    if status:
        raise RuntimeError(f"blockmap.metatrain.main returned {status}")


def _worker_events() -> list[tuple[str, float, float]]:
    events = []
    if EVENTS_DIR.is_dir():
        for path in EVENTS_DIR.iterdir():
            for line in path.read_text().splitlines():
                kind, start, seconds = line.split()
                events.append((kind, float(start), float(seconds)))
    return events


def epochs() -> list[dict[str, Any]]:
    """The per-epoch record (see the module's docstring)."""
    bounds = _epoch_starts + _train_end[:1]
    events = _events + _worker_events()
    out = []
    for index, (low, high) in enumerate(zip(bounds, bounds[1:], strict=False)):
        inside = [event for event in events if low <= event[1] < high]
        record: dict[str, Any] = {"seconds": high - low}
        record["cpu"] = _cpu_marks[index + 1] - _cpu_marks[index]
        for kind in ("item", "collate", "unpack", "wait"):
            record[kind] = sum(event[2] for event in inside if event[0] == kind)
        record["batches"] = sum(1 for event in inside if event[0] == "wait")
        record["data"] = record["wait"] + record["unpack"]
        record["losses"] = [[tag, value] for at, tag, value in _losses if low <= at < high]
        out.append(record)
    return out


def _error_of(folder: Path) -> str:
    """The last line of metatrain's error log, if it wrote one."""
    logs = sorted(folder.glob("outputs/*/*/error.log")) + sorted(folder.glob("error.log"))
    for log in reversed(logs):
        lines = log.read_text().strip().splitlines()
        if lines:
            return lines[-1]
    return "mtt train exited with an error"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.training_run")
    parser.add_argument("--options", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--source", choices=("disk", "memmap", "blockmap"), required=True)
    parser.add_argument("--floor", action="store_true")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    _install(args.floor)
    _watch_children()
    sampler = PssSampler()
    _sampler.append(sampler)
    sampler.start()
    error = None
    start = time.perf_counter()
    try:
        if args.source == "blockmap":
            run_blockmap(args.options)
        else:
            run_metatrain(args.options)
    except SystemExit as exit_:
        if exit_.code:
            error = _error_of(Path.cwd())
    except Exception as exception:  # noqa: BLE001  (the record says why)
        error = f"{type(exception).__name__}: {exception}"
        traceback.print_exc()
    sampler.stopping.set()
    sampler.join()
    record: dict[str, Any] = {
        "source": args.source,
        "load": os.getloadavg(),
        "floor": args.floor,
        "seconds": time.perf_counter() - start,
        "epochs": epochs(),
        # Trainer.train's work before the first epoch (composition and
        # scaler fits, and whatever a batch path prepares there)
        "setup": _epoch_starts[0] - _train_start[0] if _epoch_starts and _train_start else None,
        "pss": sampler.result(),
    }
    if error is not None:
        record["error"] = error
    args.out.write_text(json.dumps(record))
    return 1 if error else 0


if __name__ == "__main__":
    sys.exit(main())
