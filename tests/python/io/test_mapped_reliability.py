"""Mapped files that survive other writers, memory the caller cannot
corrupt, inputs that are not regular files, and reads that stop on Ctrl-C."""

import io
import os
import pickle
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import zipfile
import zlib

import numpy as np
import pytest

import blockmap
from blockmap import Labels, TensorBlock, TensorMap
from helpers import TESTS_DIR
from helpers.io_cases import (
    assert_identical,
    labels_record,
    make_map,
    npy_bytes,
    tensor_entries_dict,
)
from helpers.memory import mappings

# ------------------------------------------------------------ mapping modes


def test_mapped_arrays_are_read_only_views_by_default(tmp_path, rng):
    tensor = make_map(rng)
    path = tmp_path / "data.mts"
    blockmap.save(path, tensor)
    for mmap in (True, "r"):
        mapped = blockmap.load(path, mmap=mmap)
        assert_identical(mapped, tensor)
        values = mapped.block(0).values
        assert not values.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            values[...] = 0
        with pytest.raises(ValueError):
            values.flags.writeable = True


def test_copy_on_write_is_asked_for_and_never_reaches_the_file(tmp_path, rng):
    tensor = make_map(rng)
    path = tmp_path / "data.mts"
    blockmap.save(path, tensor)
    before = path.read_bytes()
    mapped = blockmap.load(path, mmap="c")
    values = mapped.block(0).values
    assert values.flags.writeable
    values[...] = 42.0
    assert (mapped.block(0).values == 42.0).all()
    assert path.read_bytes() == before
    # a copy-on-write map is data of its own: it pickles as data
    assert_identical(pickle.loads(pickle.dumps(mapped)), mapped)


@pytest.mark.parametrize("bad", ["rw", "w", 1, 0, None, b"r"])
def test_other_mmap_values_are_refused(tmp_path, rng, bad):
    path = tmp_path / "data.mts"
    blockmap.save(path, make_map(rng))
    with pytest.raises(blockmap.BlockMapError):
        blockmap.load(path, mmap=bad)


def test_labels_of_a_mapped_file_own_their_memory(tmp_path, rng):
    tensor = make_map(rng)
    path = tmp_path / "data.mts"
    blockmap.save(path, tensor)
    mapped = blockmap.load(path, mmap=True)
    values = mapped.block(0).values
    samples = mapped.block(0).samples.values
    # the values view the mapping, the labels are elsewhere
    mapping = _mapping_of(path)
    assert any(start <= values.ctypes.data < end for start, end in mapping)
    assert not any(start <= samples.ctypes.data < end for start, end in mapping)


def test_labels_read_ahead_outlive_the_map_and_its_file(tmp_path, rng):
    # a mapped load reads every block's labels ahead, into one allocation
    # they share: it stays theirs after the map and the file are gone
    tensor = make_map(rng, n_samples=(300, 5, 40_000))
    path = tmp_path / "data.mts"
    blockmap.save(path, tensor)
    mapped = blockmap.load(path, mmap=True)
    kept = [(block.samples, block.properties, block.components) for block in mapped.blocks()]
    mapping = _mapping_of(path)
    for samples, properties, components in kept:
        for labels in (samples, properties, *components):
            assert not labels.values.flags.writeable
            assert not any(start <= labels.values.ctypes.data < end for start, end in mapping)
    del mapped
    path.write_bytes(b"")
    for block, (samples, properties, components) in zip(tensor.blocks(), kept, strict=True):
        assert samples == block.samples
        assert properties == block.properties
        assert components == block.components


def _npy_with_long_header(array, header_len):
    """``array`` as an NPY file whose header is padded with spaces to
    ``header_len`` bytes (a valid header, longer than numpy writes)."""
    written = npy_bytes(array)
    start = 10 + struct.unpack_from("<H", written, 8)[0]
    text = written[10:start].rstrip(b"\n ")
    text += b" " * (header_len - len(text) - 1) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + written[start:]


def test_headers_longer_than_what_is_read_ahead_are_read_when_met(tmp_path, rng):
    # A mapped load reads each array's local and NPY headers ahead (about
    # 500 bytes), and decodes them from there; entries whose local extra
    # field or NPY header runs past that are read from the file instead,
    # with the same result as a load that reads everything.
    tensor = make_map(rng)
    entries = tensor_entries_dict(tensor)
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_STORED) as archive:
        for i, (name, value) in enumerate(entries.items()):
            info = zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0))
            if i % 3 == 0:
                # an unknown extra field of 900 bytes (kept by zip readers)
                info.extra = struct.pack("<HH", 0xCAFE, 896) + bytes(896)
            data = _npy_with_long_header(value, 2000 if i % 2 == 0 else 100)
            archive.writestr(info, data)
    path = tmp_path / "long-headers.mts"
    path.write_bytes(stream.getvalue())

    mapped = blockmap.load(path, mmap=True)
    assert_identical(mapped, blockmap.load(path))
    assert_identical(mapped, tensor)


def _mapping_of(path):
    return [(m.start, m.end) for m in mappings() if m.path == str(path)]


# ------------------------------------------------------------ larger than memory


def _memory_and_swap():
    with open("/proc/meminfo") as meminfo:
        fields = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in meminfo}
    return fields["MemTotal"] + fields["SwapTotal"]


def _rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS"))


def _write_sparse_archive(path, entries):
    """A ZIP64 archive of STORED npy ``entries`` ``(name, header + data bytes,
    extra hole bytes)`` whose data starts 64-byte aligned; the holes stay
    sparse (nothing is written for them). The CRCs of the entries without a
    hole (labels, which mapped loads read whole and check) are real; those
    of the others are left 0: mapped loads do not check arrays'."""
    central = []
    with open(path, "wb") as out:
        for name, data, hole in entries:
            name = name.encode()
            size = len(data) + hole
            crc = 0 if hole else zlib.crc32(data)
            offset = out.tell()
            zip64 = struct.pack("<HHQQ", 0x0001, 16, size, size)
            unpadded = offset + 30 + len(name) + len(zip64) + 4
            padding = (-unpadded) % 64
            extra = zip64 + struct.pack("<HH", 0xB10C, padding) + b"\0" * padding
            out.write(
                struct.pack(
                    "<IHHHHHIIIHH",
                    0x04034B50,
                    45,
                    0,
                    0,
                    0,
                    0x2821,
                    crc,
                    0xFFFFFFFF,
                    0xFFFFFFFF,
                    len(name),
                    len(extra),
                )  # fmt: skip
            )
            out.write(name + extra)
            assert out.tell() % 64 == 0
            out.write(data)
            out.seek(hole, os.SEEK_CUR)
            central.append((name, size, offset, crc))
        out.truncate(out.tell())
        start = out.tell()
        for name, size, offset, crc in central:
            extra = struct.pack("<HHQQQ", 0x0001, 24, size, size, offset)
            out.write(
                struct.pack(
                    "<IHHHHHHIIIHHHHHII",
                    0x02014B50,
                    45,
                    45,
                    0,
                    0,
                    0,
                    0x2821,
                    crc,
                    0xFFFFFFFF,
                    0xFFFFFFFF,
                    len(name),
                    len(extra),
                    0,
                    0,
                    0,
                    0,
                    0xFFFFFFFF,
                )  # fmt: skip
            )
            out.write(name + extra)
        end = out.tell()
        count = len(central)
        out.write(
            struct.pack(
                "<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, end - start, start
            )
        )
        out.write(struct.pack("<IIQI", 0x07064B50, 0, end, 1))
        out.write(
            struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
        )


def test_a_file_larger_than_memory_and_swap_maps(tmp_path):
    """A valid 32+ GiB .mts (sparse: it takes no disk) maps read-only with
    resident memory that does not grow with it; its values read as zeros."""
    target = _memory_and_swap() + (8 << 30)
    side = 1 << 16
    rows = -(-target // (side * side * 8))  # samples
    shape = (rows, side, side, 1)
    values_header = npy_bytes(np.zeros((0, side, side, 1)))
    values_header = values_header.replace(
        f"({0}, {side}, {side}, 1)".encode(), f"({rows}, {side}, {side}, 1)".encode()
    )
    # keep the header length: pad with spaces where the shape grew
    header_len = int.from_bytes(values_header[8:10], "little")
    text = values_header[10:].rstrip(b"\n").rstrip(b" ")
    values_header = values_header[:10] + text + b" " * (header_len - len(text) - 1) + b"\n"
    assert len(values_header) % 64 == 0
    component = labels_record(Labels.range("c", side))
    entries = [
        ("keys.npy", npy_bytes(labels_record(Labels.range("k", 1))), 0),
        ("blocks/0/values.npy", values_header, rows * side * side * 8),
        ("blocks/0/samples.npy", npy_bytes(labels_record(Labels.range("s", rows))), 0),
        ("blocks/0/components/0.npy", npy_bytes(component), 0),
        ("blocks/0/components/1.npy", npy_bytes(labels_record(Labels.range("d", side))), 0),
        ("blocks/0/properties.npy", npy_bytes(labels_record(Labels.range("p", 1))), 0),
    ]
    path = tmp_path / "huge.mts"
    _write_sparse_archive(path, entries)
    assert os.path.getsize(path) > _memory_and_swap()

    before = _rss()
    mapped = blockmap.load(path, mmap=True)
    values = mapped.block(0).values
    assert values.shape == shape
    assert values.nbytes > _memory_and_swap()
    assert values[-1, -1, -1, 0] == 0.0 and values[0, 0, 0, 0] == 0.0
    assert _rss() - before < 32 << 20, "resident memory grew with the file"
    del values, mapped

    # copy-on-write asks the kernel to reserve the whole file: refused here
    # (heuristic overcommit) with a clear error, never a crash
    with open("/proc/sys/vm/overcommit_memory") as policy:
        heuristic = policy.read().strip() == "0"
    if heuristic:
        with pytest.raises(blockmap.BlockMapIOError) as error:
            blockmap.load(path, mmap="c")
        assert error.value.errno == 12  # ENOMEM
    else:
        assert blockmap.load(path, mmap="c").block(0).values.flags.writeable


# ------------------------------------------------------------ other writers

REWRITTEN = """
import os, pickle, shutil, sys
import numpy as np
import blockmap
from helpers.io_cases import make_map

how, directory = sys.argv[1], sys.argv[2]
tensor = make_map(np.random.default_rng(4), n_samples=(3000, 4000), n_properties=20)
path = os.path.join(directory, "data.mts")
blockmap.save(path, tensor)
mapped = blockmap.load(path, mmap=True)
keys, samples = mapped.keys, mapped.block(1).samples
keys_values, sample_values = keys.values.copy(), samples.values.copy()
assert mapped.block(1).values.sum() == tensor.block(1).values.sum()

small = make_map(np.random.default_rng(5))
if how == "truncate":
    open(path, "wb").close()
elif how == "rewrite":
    with open(path, "wb") as out:
        out.write(b"\\1" * 1000)
elif how == "shutil.copy":
    other = os.path.join(directory, "other.mts")
    blockmap.save(other, small)
    shutil.copy(other, path)
elif how == "metatensor.save":
    import metatensor
    from helpers.io_cases import to_metatensor
    metatensor.save(path, to_metatensor(small))

# the process lives: the lost part reads as zeros
values = mapped.block(1).values
assert float(values.sum()) == 0.0 or how != "truncate"
# validated labels never change
assert mapped.keys == keys and (mapped.keys.values == keys_values).all()
assert (mapped.block(1).samples.values == sample_values).all()
assert len(mapped.blocks(o3_lambda=1)) == 1
# blockmap refuses to move data that was lost
refused = []
for attempt in (
    lambda: blockmap.save(os.path.join(directory, "copy.mts"), mapped),
    lambda: pickle.dumps(mapped, protocol=4),
    lambda: pickle.dumps(mapped, protocol=5, buffer_callback=lambda b: None),
    lambda: mapped.copy(),
    lambda: mapped.share_memory(),
):
    try:
        attempt()
        refused.append(False)
    except blockmap.BlockMapIOError as error:
        refused.append("truncated" in str(error))
print(all(refused))
"""


@pytest.mark.parametrize("how", ["truncate", "rewrite", "shutil.copy", "metatensor.save"])
def test_a_mapped_file_rewritten_by_another_writer(tmp_path, how):
    pytest.importorskip("metatensor") if how == "metatensor.save" else None
    code = f"import sys; sys.path.insert(0, {str(TESTS_DIR)!r})\n" + textwrap.dedent(REWRITTEN)
    result = subprocess.run(
        [sys.executable, "-c", code, how, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"the process died ({result.returncode}): {result.stderr}"
    assert result.stdout.strip() == "True", "blockmap moved lost data"


# ------------------------------------------------------------ the caller's memory


def test_writing_into_a_loaded_buffer_cannot_reach_the_labels(rng):
    keys = Labels(["k"], np.array([[0], [1], [2]]))
    blocks = [
        TensorBlock(np.full((2, 1), float(i)), Labels.range("s", 2), [], Labels.range("p", 1))
        for i in range(3)
    ]
    data = bytearray(TensorMap(keys, blocks).save_buffer())
    tensor = blockmap.load_buffer(data)
    before = hash(tensor.keys)
    # overwrite every int32 of the buffer that equals a key with 1
    view = np.frombuffer(data, dtype=np.uint8)
    view[:] = 1
    assert tensor.keys == keys
    assert hash(tensor.keys) == before
    assert len(tensor.blocks(k=1)) == 1
    # the values do view the buffer, as documented
    assert (tensor.block(0).values == np.frombuffer(b"\1" * 8)[0]).all()


CONCURRENT_WRITER = """
import pickle, random, sys, threading
sys.setswitchinterval(1e-5)  # the scribblers run between the loads' steps
import numpy as np
import blockmap
from helpers.io_cases import make_map

tensor = make_map(np.random.default_rng(6), n_samples=(50, 60))
archive = bytearray(tensor.save_buffer())
_, (version, header, *buffers) = tensor.__reduce_ex__(5)
header = bytearray(header)
buffers = [bytearray(b.raw()) for b in buffers]
stop = threading.Event()

def scribble():
    rng = random.Random(1)
    targets = [archive, header, *buffers]
    while not stop.is_set():
        target = rng.choice(targets)
        if target:
            i = rng.randrange(len(target))
            target[i] = rng.randrange(256)

threads = [threading.Thread(target=scribble) for _ in range(2)]
for thread in threads:
    thread.start()
outcomes = set()
# a thousand rounds, with threads switching every 10 us instead of 5 ms (the
# same class, raced by another process without a GIL, is
# tests/python/io/test_racing_buffers.py)
for _ in range(1000):
    for call in (
        lambda: blockmap.load_buffer(archive),
        lambda: blockmap._blockmap._reconstruct(version, header, *buffers),
        lambda: blockmap.load_labels_buffer(bytes(archive[:200])),
    ):
        try:
            loaded = call()
            loaded == loaded
            outcomes.add("loaded")
        except blockmap.BlockMapError:
            outcomes.add("refused")
stop.set()
for thread in threads:
    thread.join()
print(sorted(outcomes))
"""


def test_another_thread_writing_the_callers_memory_during_loads_never_aborts():
    code = f"import sys; sys.path.insert(0, {str(TESTS_DIR)!r})\n" + textwrap.dedent(
        CONCURRENT_WRITER
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"died with {result.returncode}: {result.stderr[-2000:]}"
    assert "refused" in result.stdout


# ------------------------------------------------------------ not regular files


FIFO_LOADS = """
import os, sys
import blockmap
fifo = sys.argv[1]
names = []
for call in (
    lambda: blockmap.load(fifo),
    lambda: blockmap.load(fifo, mmap=True),
    lambda: blockmap.load_block(fifo),
    lambda: blockmap.load_labels(fifo),
    lambda: blockmap.verify(fifo),
    lambda: blockmap.load("/dev/zero"),
    lambda: blockmap.load_labels("/dev/zero"),
    lambda: blockmap.verify("/dev/null"),
):
    try:
        call()
        names.append("loaded")
    except blockmap.BlockMapIOError as error:
        names.append("not a regular file" in str(error))
print(all(name is True for name in names), names)
"""


def test_fifos_and_devices_are_refused_without_hanging(tmp_path):
    fifo = tmp_path / "pipe.mts"
    os.mkfifo(fifo)
    result = subprocess.run(
        [sys.executable, "-c", FIFO_LOADS, str(fifo)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("True"), result.stdout


def test_a_directory_is_an_io_error(tmp_path):
    with pytest.raises(blockmap.BlockMapIOError) as error:
        blockmap.load(tmp_path)
    assert error.value.errno == 21  # EISDIR


def _bytes_read():
    with open("/proc/self/io") as stats:
        return next(int(line.split()[1]) for line in stats if line.startswith("rchar"))


def test_load_labels_reads_only_what_its_answer_needs(tmp_path):
    not_npy = tmp_path / "big.bin"
    with open(not_npy, "wb") as out:
        out.truncate(1 << 30)  # 1 GiB of zeros, sparse
    before = _bytes_read()
    with pytest.raises(blockmap.FormatError, match="magic"):
        blockmap.load_labels(not_npy)
    assert _bytes_read() - before < 1 << 20

    # a header announcing more data than the file holds: refused before
    # anything is allocated or read for the data
    lying = tmp_path / "lying.npy"
    record = npy_bytes(labels_record(Labels.range("a", 4)))
    header = record[: record.index(b"\n") + 1].replace(b"(4,)", b"(99999999,)")
    header = header[:-1].rstrip(b" ")
    header = header + b" " * ((-len(header) - 1) % 64) + b"\n"
    header = header[:8] + (len(header) - 10).to_bytes(2, "little") + header[10:]
    lying.write_bytes(header + b"\0" * 16)
    before = _bytes_read()
    with pytest.raises(blockmap.FormatError, match="needs"):
        blockmap.load_labels(lying)
    assert _bytes_read() - before < 1 << 20
    # trailing data is refused too
    trailing = tmp_path / "trailing.npy"
    trailing.write_bytes(record + b"\0")
    with pytest.raises(blockmap.FormatError):
        blockmap.load_labels(trailing)
    assert blockmap.load_labels_buffer(record) == Labels.range("a", 4)


# ------------------------------------------------------------ Ctrl-C

INTERRUPTED = """
import os, signal, sys, time
import numpy as np
import blockmap

path = sys.argv[1]
values = np.zeros((1 << 28,))  # 2 GiB of zero pages: nothing resident
block = blockmap.TensorBlock(values.reshape(-1, 1), blockmap.Labels.range("s", 1 << 28), [],
                             blockmap.Labels.range("p", 1))
tensor = blockmap.TensorMap(blockmap.Labels.range("k", 1), [block])
start = time.perf_counter()
blockmap.save(path, tensor)
full_save = time.perf_counter() - start
del tensor, block, values

results = {}
for name, call in (
    ("load", lambda: blockmap.load(path)),
    ("verify", lambda: blockmap.verify(path)),
):
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    start = time.perf_counter()
    try:
        call()
        results[name] = ("finished", time.perf_counter() - start)
    except KeyboardInterrupt:
        results[name] = ("interrupted", time.perf_counter() - start)
print(full_save, results)
assert all(outcome == "interrupted" for outcome, _ in results.values()), results
"""


@pytest.mark.slow
def test_ctrl_c_stops_a_long_load(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPTED, str(tmp_path / "big.mts")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_signals_raise_during_a_save_and_leave_nothing(tmp_path):
    values = np.zeros((1 << 27, 1))  # 1 GiB of zero pages
    tensor = TensorMap(
        Labels.range("k", 1),
        [TensorBlock(values, Labels.range("s", len(values)), [], Labels.range("p", 1))],
    )
    path = tmp_path / "big.mts"
    previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.02)
        with pytest.raises(KeyboardInterrupt):
            blockmap.save(path, tensor)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert os.listdir(tmp_path) == []


def test_threads_are_not_interrupted_by_signals_for_the_main_thread(tmp_path, rng):
    tensor = make_map(rng)
    path = tmp_path / "data.mts"
    blockmap.save(path, tensor)
    results = []
    thread = threading.Thread(target=lambda: results.append(blockmap.load(path)))
    thread.start()
    thread.join()
    assert_identical(results[0], tensor)
