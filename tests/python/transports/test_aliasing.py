"""Reads of memory someone else writes meanwhile (docs/design.md, "Memory
aliasing"): blockmap reads such memory only by copying it (never through a
Rust ``&[u8]``), and checks and hashes the copy.

Here the writer is another process, writing a shared-memory segment the map
views, while this process saves, pickles and copies the map; and a thread
writing the numpy array Labels are built from. Every result is a snapshot:
each file's CRCs match its bytes (``verify`` and full loads check them), and
each element read is the old or the new value of that element.
"""

import multiprocessing
import pickle
import sys
import threading

import numpy as np
import pytest

import blockmap
from blockmap import BlockMapError, Labels, TensorBlock, TensorMap

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="memfd shared memory is Linux only")

ROWS, COLUMNS = 512, 1024  # 4 MiB of float64


def _old():
    return np.arange(ROWS * COLUMNS, dtype=np.float64).reshape(ROWS, COLUMNS)


def _writer(tensor, started, stop):
    """Write old and new values in turns into the shared values until told
    to stop (numpy copies, with the GIL released)."""
    values = tensor.block(0).values
    old = _old()
    new = -old - 1.0
    started.set()
    while not stop.is_set():
        values[...] = new
        values[...] = old


def _old_or_new(values):
    old = _old()
    return ((values == old) | (values == -old - 1.0)).all()


def test_reads_of_a_segment_another_process_writes_are_snapshots(tmp_path):
    context = multiprocessing.get_context("fork")
    block = TensorBlock(_old(), Labels.range("sample", ROWS), [], Labels.range("property", COLUMNS))
    tensor = TensorMap(Labels.range("key", 1), [block]).share_memory()
    assert tensor.is_shared()
    started, stop = context.Event(), context.Event()
    child = context.Process(target=_writer, args=(tensor, started, stop))
    child.start()
    try:
        assert started.wait(timeout=60)
        for i in range(3):
            blockmap.save(tmp_path / f"saved-{i}.mts", tensor)
        (tmp_path / "buffer.mts").write_bytes(blockmap.save_buffer(tensor))
        streams = [pickle.dumps(tensor, protocol=p) for p in (4, 5)]
        copies = [tensor.copy() for _ in range(2)]
        joined = blockmap.join([tensor, tensor], axis="samples", add_dimension="tensor")
    finally:
        stop.set()
        child.join(timeout=60)
    assert child.exitcode == 0
    for path in sorted(tmp_path.glob("*.mts")):
        # the CRCs describe the bytes written: the copy was hashed
        blockmap.verify(path)
        assert _old_or_new(blockmap.load(path).block(0).values), path.name
    for stream in streams:
        assert _old_or_new(pickle.loads(stream).block(0).values)
    for copy in copies:
        assert not np.shares_memory(copy.block(0).values, tensor.block(0).values)
        assert _old_or_new(copy.block(0).values)
    values = joined.block(0).values
    assert _old_or_new(values[:ROWS]) and _old_or_new(values[ROWS:])


def test_labels_from_an_array_written_meanwhile_check_their_copy():
    """Labels validate (unique rows) and keep a copy read once: a thread
    switching the rows between unique and repeated gives, for each
    construction, either an error or labels holding unique rows, never
    repeated rows that passed the check."""
    count = 4096
    unique = np.arange(2 * count, dtype=np.int32).reshape(count, 2)
    repeated = np.zeros_like(unique)
    values = unique.copy()
    stop = threading.Event()

    def write():
        while not stop.is_set():
            values[...] = repeated
            values[...] = unique

    thread = threading.Thread(target=write)
    thread.start()
    made = failed = 0
    try:
        for _ in range(300):
            try:
                labels = Labels(["a", "b"], values)
            except BlockMapError:
                failed += 1
                continue
            made += 1
            kept = labels.values
            assert not np.shares_memory(kept, values)
            assert len(np.unique(kept, axis=0)) == count
    finally:
        stop.set()
        thread.join()
    assert made + failed == 300
    # not asserted: how often a construction overlaps a write
    print(f"{made} labels made, {failed} refused")
