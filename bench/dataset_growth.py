"""Datasets that grow (``python -m bench datasets``, operation ``grow``):
append sessions of one map each to a large dataset of QM9-like maps, as an
active-learning loop adds structures, in format version 4 (commits that
write what changed) and in version 3 (each commit writes the whole index
again), in the same run.

For each version: the file's growth over the sessions against the bound
``sessions x the entry's size + 1 MB``, the time of a session, the open
after them (median of fresh opens, page cache warm), ``ds[i]``'s p50 and
the bytes read from disk with the page cache dropped (open + 300 random
maps) before and after them, and ``Dataset.compact``: its time and the
dead bytes it removes. Version 3's sessions are fewer (each writes the
whole index, 4 MB at 130,000 maps): their growth is reported per
session and scaled.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .batches import qm9_maps

#: the random maps read for ``ds[i]``'s p50
READS = 10_000
#: fresh opens measured after the sessions
OPENS = 50


def _p50(path: Path) -> float:
    import blockmap

    ds = blockmap.Dataset(path)
    rng = np.random.default_rng(1)
    times = []
    for i in rng.integers(0, len(ds), size=READS):
        start = time.perf_counter()
        ds[int(i)]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _open(path: Path) -> float:
    import blockmap

    times = []
    for _ in range(OPENS):
        start = time.perf_counter()
        blockmap.Dataset(path)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(
    count: int,
    sessions: int,
    version: int,
    workdir: Path,
    cold_bytes: Callable[[Path], int],
) -> dict[str, Any]:
    """One version's figures (see the module's docstring); ``cold_bytes``
    is what an open and 300 random maps read from disk with the page cache
    dropped (``datasets``'s cold row)."""
    import blockmap

    path = workdir / f"grow-v{version}.bmds"
    compacted = workdir / f"grow-v{version}-compact.bmds"
    for stale in (path, compacted):
        stale.unlink(missing_ok=True)
    maps = qm9_maps(count)
    with blockmap.DatasetWriter(path, _version=version) as writer:
        for tensor in maps:
            writer.write(tensor)
    extra = qm9_maps(sessions, start=count)
    before = path.stat().st_size
    result: dict[str, Any] = {
        "version": version,
        "count": count,
        "sessions": sessions,
        "size": before,
        "p50_before": _p50(path),
        "cold_before": cold_bytes(path),
    }
    times = []
    for tensor in extra:
        start = time.perf_counter()
        with blockmap.DatasetWriter(path, append=True) as writer:
            writer.write(tensor)
        times.append(time.perf_counter() - start)
    ds = blockmap.Dataset(path)
    entries = sum(ds._slot(i)[1] for i in range(count, count + sessions))
    del ds
    grown = path.stat().st_size - before
    start = time.perf_counter()
    blockmap.Dataset.compact(path, compacted)
    compact_seconds = time.perf_counter() - start
    result.update(
        {
            "growth": grown,
            "entries_bytes": entries,
            "session_seconds": statistics.median(times),
            "open_after": _open(path),
            "p50_after": _p50(path),
            "cold_after": cold_bytes(path),
            "final_size": path.stat().st_size,
            "compact_seconds": compact_seconds,
            "compact_size": compacted.stat().st_size,
        }
    )
    assert len(blockmap.Dataset(compacted)) == count + sessions
    path.unlink()
    compacted.unlink()
    return result


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB"


def markdown(results: list[dict[str, Any]]) -> str:
    """The rows: one column per format version."""
    if not results:
        return ""
    count = results[0]["count"]
    lines = [
        f"**Datasets that grow** ({count:,} QM9-like maps, then append sessions of one map "
        "each, every session a `DatasetWriter(path, append=True)` closed after its write):",
        "",
        "| | " + " | ".join(f"version {r['version']}" for r in results) + " |",
        "|---|" + "---:|" * len(results),
    ]

    def row(label: str, cell: Any) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(r) for r in results) + " |")

    row("sessions measured", lambda r: f"{r['sessions']:,}")
    row("file before them", lambda r: _mb(r["size"]))
    row(
        "file growth (bound: sessions x entry + 1 MB)",
        lambda r: (
            f"{_mb(r['growth'])} (bound {_mb(r['entries_bytes'] + 1e6)}, "
            f"{'**met**' if r['growth'] <= r['entries_bytes'] + 1e6 else '**NOT met**'})"
        ),
    )
    row(
        "growth per session, index alone",
        lambda r: f"{(r['growth'] - r['entries_bytes']) / r['sessions']:,.0f} bytes",
    )
    row(
        "growth of 1,000 sessions (scaled), index alone",
        lambda r: _mb((r["growth"] - r["entries_bytes"]) / r["sessions"] * 1000),
    )
    row(
        "one session (open, write, commit), median",
        lambda r: f"{r['session_seconds'] * 1e3:.1f} ms",
    )
    row(
        "open after them, median (target 5 ms)",
        lambda r: f"{r['open_after'] * 1e3:.2f} ms",
    )
    row(
        "`ds[i]` p50 before / after",
        lambda r: f"{r['p50_before'] * 1e6:.1f} / {r['p50_after'] * 1e6:.1f} us",
    )
    row(
        "cold: bytes read by open + 300 maps, before / after",
        lambda r: f"{_mb(r['cold_before'])} / {_mb(r['cold_after'])}",
    )
    row(
        "`Dataset.compact`: time, size (dead bytes removed)",
        lambda r: (
            f"{r['compact_seconds']:.2f} s, {_mb(r['compact_size'])} "
            f"({_mb(r['final_size'] - r['compact_size'])})"
        ),
    )
    return "\n".join(lines) + "\n"
