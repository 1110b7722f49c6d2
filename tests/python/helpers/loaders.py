"""Datasets, collate functions and probes for the DataLoader tests.

Everything here is importable by name, so that spawn and forkserver
workers can unpickle it: the datasets (map-style: ``len`` and
``__getitem__``), the collate function (``blockmap.join`` along samples),
and the probes a worker runs to report what it did: the bytes its result
queue carried (:func:`count_sent_bytes`) and its own memory
(:func:`private_memory`).
"""

from __future__ import annotations

import functools
import os
from multiprocessing.reduction import ForkingPickler
from typing import Any

import blockmap

#: The collate function of a batch of maps: one join along samples.
collate = functools.partial(blockmap.join, axis="samples")


def collate_noting_shared(maps: list[Any]) -> Any:
    """:data:`collate`, noting in the batch's info whether the join wrote
    it straight into shared memory (in a DataLoader worker it does, above
    the auto-share threshold: sending it then copies nothing)."""
    batch = collate(maps)
    batch.set_info("shared_when_joined", str(batch.is_shared()))
    return batch


class MapDataset:
    """A list of maps as a map-style dataset."""

    def __init__(self, maps: list[Any]) -> None:
        self.maps = maps

    def __len__(self) -> int:
        return len(self.maps)

    def __getitem__(self, index: int) -> Any:
        return self.maps[index]


class DoublingDataset(MapDataset):
    """Doubles the values of the map it hands out, in place: the parent sees
    it only if the worker viewed the parent's memory."""

    def __getitem__(self, index: int) -> Any:
        tensor = self.maps[index]
        for block in tensor.blocks():
            block.values[...] *= 2
        return index


def private_memory() -> dict[str, int]:
    """This process's memory from ``/proc/self/smaps_rollup``, in bytes:
    ``uss`` (private pages: what this process alone holds) and ``pss``
    (private pages plus its share of the shared ones)."""
    fields = {}
    with open("/proc/self/smaps_rollup") as rollup:
        for line in rollup:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                fields[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return {
        "uss": fields["Private_Clean"] + fields["Private_Dirty"],
        "pss": fields["Pss"],
    }


_baseline: dict[str, int] = {}


def remember_memory(worker_id: int) -> None:
    """``worker_init_fn``: note the worker's memory as it starts."""
    _baseline.update(private_memory())


class MemoryDataset(MapDataset):
    """Reads maps the way a training step does (every block's values and
    gradients summed) and hands back, instead of them, the growth of the
    worker's memory since it started: one report per batch (DataLoader
    calls ``__getitems__`` with the batch's indices)."""

    def _read(self, index: int) -> float:
        total = 0.0
        for block in self.maps[index].blocks():
            total += float(block.values.sum())
            for parameter in block.gradients_list():
                total += float(block.gradient(parameter).values.sum())
        return total

    def _report(self) -> dict[str, int]:
        now = private_memory()
        return {"pid": os.getpid(), **{key: now[key] - _baseline[key] for key in now}}

    def __getitem__(self, index: int) -> dict[str, int]:
        self._read(index)
        return self._report()

    def __getitems__(self, indices: list[int]) -> list[dict[str, int]]:
        for index in indices:
            self._read(index)
        return [self._report()]


def keep_memory_reports(reports: list[dict[str, int]]) -> list[dict[str, int]]:
    """The collate function of :class:`MemoryDataset`: the reports as they are."""
    return reports


def count_sent_bytes(counter: Any, worker_id: int) -> None:
    """``worker_init_fn`` (with ``functools.partial(count_sent_bytes,
    counter)``): from now on, every message this worker pickles for a
    queue or pipe adds its size to ``counter`` (a ``multiprocessing.Value``)."""
    dumps = ForkingPickler.dumps.__func__  # type: ignore[attr-defined]

    def counting_dumps(cls: Any, obj: Any, protocol: Any = None) -> Any:
        message = dumps(cls, obj, protocol)
        with counter.get_lock():
            counter.value += len(message)
        return message

    ForkingPickler.dumps = classmethod(counting_dumps)  # type: ignore[method-assign]


def worker_growth(maps: list[Any], batch_size: int) -> dict[int, dict[str, int]]:
    """Read ``maps`` through a DataLoader of two fork workers; the largest
    growth of each worker's USS and PSS while it read them, by its pid."""
    from torch.utils.data import DataLoader

    loader = DataLoader(
        MemoryDataset(maps),
        batch_size=batch_size,
        num_workers=2,
        collate_fn=keep_memory_reports,
        worker_init_fn=remember_memory,
        multiprocessing_context="fork",
    )
    growth: dict[int, dict[str, int]] = {}
    for reports in loader:
        for report in reports:
            pid = report["pid"]
            previous = growth.get(pid, {"uss": 0, "pss": 0})
            growth[pid] = {key: max(previous[key], report[key]) for key in ("uss", "pss")}
    return growth


class TaggedDataset(blockmap.Dataset):
    """A dataset subclass whose ``__getitem__`` transforms maps (tags them
    with ``self.tag``): in workers it must stay this class."""

    def __getitem__(self, index):
        tensor = super().__getitem__(index).copy()
        tensor.set_info("tag", self.tag)
        return tensor
