"""A dataset writer killed (SIGKILL) at any moment of an append, or of a
create after its first commit (the dataset is then in place), leaves a file
that opens with every map whose ``write()`` had returned before the kill,
nothing half-written; appending to it then goes on (the killed writer's
lock went with it). A create killed before its first commit leaves the
path as it was (the old file byte for byte, or no file) and nothing else
in the directory. The writer runs in a child process that reports each
returned write; the parent kills it at many points, by time and by the
file's size."""

import signal
import subprocess
import sys
import textwrap
import time

import pytest

import blockmap
from bench.batches import structure_maps
from bench.workload import build_blockmap, make_arrays
from helpers import TESTS_DIR
from helpers.child import run_python
from helpers.io_cases import assert_identical
from helpers.memory import PEAK

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="SIGKILL of a child")

ROOT = TESTS_DIR.parent.parent
COUNT = 3000

WRITER = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [sys.argv[1]]
    import blockmap
    from bench.batches import structure_maps
    from bench.workload import build_blockmap, make_arrays
    path, mode, count = sys.argv[2], sys.argv[3], int(sys.argv[4])
    maps = structure_maps(count)
    big = build_blockmap(make_arrays(n_keys=2, n_samples=1200, n_grad_samples=150))
    # another writer's lock is waited for: the one of a killed writer goes
    writer = blockmap.DatasetWriter(
        path, append=mode == "append", overwrite=mode != "append", timeout=60
    )
    print("opened", flush=True)
    for i, tensor in enumerate(maps):
        # every 500th map (8 MB) is streamed from its arrays, not built in memory
        writer.write(big if i % 500 == 499 else tensor)
        if mode == "new" and i == 0:
            writer.commit()  # in place from here on
        print(i, flush=True)
    writer.close()
    print("closed", flush=True)
    """
)


def _expected(count=COUNT):
    maps = structure_maps(count)
    big = build_blockmap(make_arrays(n_keys=2, n_samples=1200, n_grad_samples=150))
    return [big if i % 500 == 499 else tensor for i, tensor in enumerate(maps)]


def _kill(path, mode, after_seconds=None, after_bytes=None):
    """Run the writer, kill it, and return how many writes had returned."""
    append = mode == "append"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER,
            str(ROOT),
            str(path),
            mode,
            str(COUNT),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    base = path.stat().st_size if append and path.exists() else 0
    start = None
    try:
        while child.poll() is None:
            # time counts from the first byte the writer adds
            if start is None and path.exists() and path.stat().st_size > base:
                start = time.monotonic()
            if after_seconds is not None and start is not None:
                if time.monotonic() - start >= after_seconds:
                    break
            if (
                after_bytes is not None
                and path.exists()
                and path.stat().st_size >= base + after_bytes
            ):
                break
            time.sleep(0.0005)
    finally:
        child.send_signal(signal.SIGKILL)
        output = child.communicate(timeout=60)[0].split()
    returned = [int(word) + 1 for word in output if word.isdigit()]
    return returned[-1] if returned else 0, "closed" in output, "opened" in output


def _check(path, at_least, expected, offset=0):
    dataset = blockmap.Dataset(path)
    # every returned write is there; at most the one in flight besides
    assert at_least + offset <= len(dataset) <= at_least + offset + 1, (len(dataset), at_least)
    for i in range(len(dataset)):
        assert_identical(dataset[i], expected[(i - offset) % COUNT] if i >= offset else expected[i])
    return len(dataset)


def _names(folder):
    """The files of ``folder``, but the creation locks killed writers left."""
    return sorted(
        p.name
        for p in folder.iterdir()
        if not (p.name.startswith(".") and p.name.endswith(".lock"))
    )


@pytest.mark.parametrize(
    "point",
    [("time", t) for t in (0.0, 0.001, 0.003, 0.006, 0.01, 0.02, 0.035, 0.05, 0.07, 0.09)]
    + [("bytes", b) for b in (1, 2_000, 200_000, 2_000_000, 9_000_000, 14_000_000, 30_000_000)],
)
def test_a_killed_create_keeps_every_returned_write_after_its_commit(tmp_path, point):
    path = tmp_path / "killed"
    expected = _expected()
    kind, value = point
    returned, closed, opened = _kill(
        path,
        "new",
        after_seconds=value if kind == "time" else None,
        after_bytes=value if kind == "bytes" else None,
    )
    # a creation lock a killed writer left (hidden; the next writer takes
    # it over: docs/format.md) aside, nothing beside it
    assert _names(tmp_path) == (["killed"] if path.exists() else [])
    if not path.exists():
        assert returned == 0  # killed before its first commit: nothing in place
        return
    if closed:
        returned = COUNT
    count = _check(path, returned, expected)
    # appending to what is left goes on after the maps that are there
    with blockmap.DatasetWriter(path, append=True) as writer:
        writer.write(expected[0])
    grown = blockmap.Dataset(path)
    assert len(grown) == count + 1 and grown.committed
    assert_identical(grown[count], expected[0])


@pytest.mark.parametrize("after_bytes", [1, 30_000, 1_500_000, 6_000_000, 20_000_000])
def test_a_killed_append_keeps_the_old_maps_and_every_returned_write(tmp_path, after_bytes):
    path = tmp_path / "appended"
    expected = _expected()
    blockmap.save_dataset(path, expected[:100])
    before = path.read_bytes()
    returned, closed, _ = _kill(path, "append", after_bytes=after_bytes)
    if closed:
        returned = COUNT
    dataset = blockmap.Dataset(path)
    assert 100 + returned <= len(dataset) <= 100 + returned + 1
    for i in range(len(dataset)):
        assert_identical(dataset[i], expected[i] if i < 100 else expected[i - 100])
    # nothing of the file before the append was rewritten
    assert path.read_bytes()[: len(before)] == before


@pytest.mark.parametrize("after_seconds", [0.3, 1.0, 2.5])
def test_a_killed_create_before_its_commit_leaves_the_old_file(tmp_path, after_seconds):
    path = tmp_path / "replaced"
    expected = _expected()
    blockmap.save_dataset(path, expected[:50])
    before = path.read_bytes()
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(ROOT), str(path), "replace", str(COUNT)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        child.wait(timeout=after_seconds)
    except subprocess.TimeoutExpired:
        pass
    finally:
        child.send_signal(signal.SIGKILL)
        output = child.communicate(timeout=60)[0].split()
    if "closed" in output:
        assert len(blockmap.Dataset(path)) == COUNT
    else:
        # the path is as it was, and nothing else is in the directory
        assert path.read_bytes() == before
        assert _names(tmp_path) == ["replaced"]
    # the killed writer's lock is gone with it
    with blockmap.DatasetWriter(path, append=True) as writer:
        writer.write(expected[0])


FAILING_WRITE = textwrap.dedent(
    """
    import resource, signal, sys
    sys.path[:0] = [sys.argv[1]]
    import os
    import numpy as np
    import blockmap
    from blockmap import Labels, TensorBlock, TensorMap

    def tensor(n):
        block = TensorBlock(
            values=np.ones((n, 2)), samples=Labels.range("s", n), components=[],
            properties=Labels.range("p", 2),
        )
        return TensorMap(Labels.range("k", 1), [block])

    path, in_memory = sys.argv[2], sys.argv[3] == "1"
    with blockmap.DatasetWriter(path) as writer:
        writer.write(tensor(3))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    size = os.path.getsize(path)
    # room for 1 MiB more: the large write fails part way (EFBIG)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + (1 << 20), resource.RLIM_INFINITY))
    writer = blockmap.DatasetWriter(path, append=True)
    try:
        # 3 MiB, built in memory and written at once; 16 MiB, streamed
        writer.write(tensor(200_000 if in_memory else 1_000_000))
    except blockmap.BlockMapIOError:
        print("refused", flush=True)
    writer.write(tensor(4))
    writer.close()
    """
)


@pytest.mark.parametrize("in_memory", [True, False])
def test_a_write_that_failed_part_way_leaves_no_tail(tmp_path, in_memory):
    path = tmp_path / "d"
    done = run_python(FAILING_WRITE, ROOT, path, int(in_memory))
    assert done.stdout.split() == ["refused"]
    ds = blockmap.Dataset(path)
    # the file ends with the commit's trailer: opened from it, not recovered
    assert ds.committed
    assert [m.block(0).values.shape[0] for m in ds] == [3, 4]
    assert path.read_bytes()[-32:-24] == b"BMDSEND2"


UNCOMMITTED = textwrap.dedent(
    """
    import os, sys
    sys.path[:0] = [sys.argv[1]]
    import numpy as np
    import blockmap
    from blockmap import Labels, TensorBlock, TensorMap

    n = 4_000_000  # 64 MB of float64
    block = TensorBlock(
        values=np.ones((n, 2)), samples=Labels.range("s", n), components=[],
        properties=Labels.range("p", 2),
    )
    writer = blockmap.DatasetWriter(sys.argv[2], append=True)
    writer.write(TensorMap(Labels.range("k", 1), [block]))
    os._exit(0)  # no commit
    """
)

OPEN_MEASURED = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [sys.argv[1]]
    import blockmap

    reset_peak()
    before = peak_bytes()
    ds = blockmap.Dataset(sys.argv[2])
    print(len(ds), ds.committed, peak_bytes() - before)
    """
)


def test_recovery_hashes_an_entry_in_constant_memory(tmp_path):
    path = tmp_path / "d"
    for script in (UNCOMMITTED, PEAK + OPEN_MEASURED):
        done = run_python(script, ROOT, path)
    count, committed, grown = done.stdout.split()
    assert (count, committed) == ("1", "False")
    # the 64 MB entry was hashed a piece at a time, not read whole
    assert int(grown) < 16 << 20, grown


IMITATION = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [sys.argv[1]]
    import numpy as np
    import blockmap
    from blockmap import Labels, TensorBlock, TensorMap

    path, data = sys.argv[2], bytes.fromhex(sys.argv[3])
    values = np.frombuffer(data, dtype=np.float64).reshape(-1, 4).copy()
    block = TensorBlock(
        values=values, samples=Labels.range("s", len(values)), components=[],
        properties=Labels.range("p", 4),
    )
    writer = blockmap.DatasetWriter(path, append=True)
    # 128 bytes of arrays: they end the file (64-byte aligned, no padding)
    writer.write(TensorMap(Labels.range("k", 1), [block]))
    print("written", flush=True)
    sys.stdin.read()
    """
)


def test_an_entry_ending_with_an_earlier_trailer_loses_no_commit(tmp_path):
    """A writer killed after writing an entry whose data ends with an
    earlier commit's trailer leaves a file that ends with that trailer: it
    opens with every committed entry and the killed writer's returned
    write, and the next append keeps them all (the trailer is taken for the
    last commit only where it closes the COMMIT record it names)."""
    path = tmp_path / "d"
    expected = structure_maps(12)
    blockmap.save_dataset(path, expected[:5])
    first_trailer = path.read_bytes()[-32:]
    with blockmap.DatasetWriter(path, append=True) as writer:
        for tensor in expected[5:9]:
            writer.write(tensor)
    data = bytes(96) + first_trailer
    child = subprocess.Popen(
        [sys.executable, "-c", IMITATION, str(ROOT), str(path), data.hex()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline() == "written\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
    assert path.read_bytes()[-32:] == first_trailer
    dataset = blockmap.Dataset(path)
    assert len(dataset) == 10 and not dataset.committed
    for i in range(9):
        assert_identical(dataset[i], expected[i])
    assert dataset[9].block(0).values.tobytes() == data
    blockmap.verify(path)
    with blockmap.DatasetWriter(path, append=True) as writer:
        writer.write(expected[9])
    grown = blockmap.Dataset(path)
    assert len(grown) == 11 and grown.committed
    for i in range(9):
        assert_identical(grown[i], expected[i])
    assert grown[9].block(0).values.tobytes() == data
    assert_identical(grown[10], expected[9])


LEFTOVER = textwrap.dedent(
    """
    import resource, signal, sys, zlib
    sys.path[:0] = [sys.argv[1]]
    import os
    import numpy as np
    import blockmap
    from blockmap import Labels, TensorBlock, TensorMap

    def tensor(data):
        # rows of 512 bytes: few samples, a short description
        values = np.frombuffer(data, dtype=np.float64).reshape(-1, 64).copy()
        block = TensorBlock(
            values=values, samples=Labels.range("s", len(values)), components=[],
            properties=Labels.range("p", 64),
        )
        return TensorMap(Labels.range("k", 1), [block])

    path = sys.argv[2]
    with blockmap.DatasetWriter(path) as writer:
        writer.write(tensor(bytes(512)))
    # a complete record of an entry in each 64 bytes: header, then 48 bytes
    payload = bytes([7]) * 48
    unit = b"BMr\\x03" + zlib.crc32(payload).to_bytes(4, "little") + (48).to_bytes(8, "little")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    size = os.path.getsize(path)
    # room for 1 MiB more: the 8 MiB write (streamed) fails part way (EFBIG)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + (1 << 20), resource.RLIM_INFINITY))
    writer = blockmap.DatasetWriter(path, append=True)
    try:
        writer.write(tensor((unit + payload) * (8 << 14)))
    except blockmap.BlockMapIOError:
        print("refused", flush=True)
    # 200 kB: past where the failed entry's arrays started
    writer.write(tensor(bytes([1]) * (200 << 10)))
    print("written", flush=True)
    sys.stdin.read()
    """
)


def test_a_failed_write_leaves_no_bytes_a_later_open_could_read(tmp_path):
    """A write that failed part way (a file size limit) and a later write,
    then a SIGKILL before the commit: the bytes the failed write left (its
    arrays, here full of complete records of fake entries) were cut off
    before the later write, so the walk that opens the file meets none of
    them."""
    path = tmp_path / "d"
    child = subprocess.Popen(
        [sys.executable, "-c", LEFTOVER, str(ROOT), str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline() == "refused\n"
        assert child.stdout.readline() == "written\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
    dataset = blockmap.Dataset(path)
    assert len(dataset) == 2 and not dataset.committed
    assert dataset[1].block(0).values.tobytes() == bytes([1]) * (200 << 10)
    offset, length = dataset._slot(1)
    assert path.stat().st_size == offset + length
    blockmap.verify(path)
