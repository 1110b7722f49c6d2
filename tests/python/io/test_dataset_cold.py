"""Cold reads of a dataset (format version 3): with the file's pages dropped from
the page cache, random ``ds[i]`` reads about the entries' own pages (the
mapping is advised MADV_RANDOM), iteration reads ahead. Measured with
``/proc/self/io``'s ``read_bytes``, after checking that the filesystem of
``tmp_path`` counts them (a control read of 1 MiB)."""

import os
import random
import sys

import pytest

import blockmap
from bench.batches import qm9_maps

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/io, fadvise")

COUNT = 3000
READS = 40


def _read_bytes():
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    raise AssertionError("no read_bytes in /proc/self/io")


def _drop(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def cold_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("cold") / "cold.bmds"
    blockmap.save_dataset(path, qm9_maps(COUNT, seed=5))
    # the control: does this filesystem count the bytes a read brings in?
    control = path.parent / "control"
    control.write_bytes(os.urandom(1 << 20))
    _drop(control)
    before = _read_bytes()
    control.read_bytes()
    if _read_bytes() - before < (1 << 19):
        pytest.skip("this filesystem does not count read_bytes (tmpfs?)")
    return path


def test_random_reads_touch_about_their_own_pages(cold_path):
    size = cold_path.stat().st_size
    _drop(cold_path)
    ds = blockmap.Dataset(cold_path)
    # opening reads the trailer and the commit record (O(count))
    before = _read_bytes()
    random.seed(1)
    for i in random.sample(range(COUNT), READS):
        ds[i].block(0).values.sum()
    read = _read_bytes() - before
    per_map = size / COUNT
    # each entry (~2 kB) in one or two pages, plus the labels records
    # (shared keys, components, properties) it refers to the first time
    assert read <= READS * 4 * 4096 + 64 * 4096, (read, per_map)
    # far from the whole file, which the default read-ahead pulls in
    assert read < size / 4


def test_iteration_reads_ahead(cold_path):
    _drop(cold_path)
    ds = blockmap.Dataset(cold_path)
    before = _read_bytes()
    count = sum(1 for _ in ds)
    assert count == COUNT
    # everything read once, not page by page twice
    assert _read_bytes() - before <= cold_path.stat().st_size + (1 << 20)


def test_a_large_entry_is_read_ahead_not_page_by_page(cold_path):
    import resource

    import numpy as np

    # cold_path's fixture checked that this filesystem reads from disk
    path = cold_path.parent / "large.bmds"
    n = 2_000_000  # 16 MB of values, 8 MB of samples: ~6,000 pages
    block = blockmap.TensorBlock(
        values=np.ones((n, 1)),
        samples=blockmap.Labels.range("s", n),
        components=[],
        properties=blockmap.Labels.range("p", 1),
    )
    tensor = blockmap.TensorMap(blockmap.Labels.range("k", 1), [block])
    blockmap.save_dataset(path, [tensor, tensor])

    def major_faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_majflt

    for read in (lambda ds: ds[1], lambda ds: next(iter(ds))):
        _drop(path)
        ds = blockmap.Dataset(path)
        before = major_faults()
        assert read(ds).block(0).values.sum() == n
        # one fault and one 4 KiB read per page under MADV_RANDOM (6,000
        # here) unless the entry is asked for at once
        assert major_faults() - before < 300
    path.unlink()
