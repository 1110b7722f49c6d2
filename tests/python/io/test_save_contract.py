"""Saving keeps what the user had (the contract of docs/format.md,
"Saving"): symlinks are followed, mode and owner kept, the temporary file is
short, random and unnamed while written, a killed save leaves nothing
behind, the data is synced, a failed save leaves the target as it was, and
blockmap never prints."""

import io
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
import zipfile

import numpy as np
import pytest

import blockmap
from blockmap import BlockMapIOError
from helpers import TESTS_DIR
from helpers.io_cases import assert_identical, make_map


@pytest.fixture
def tensor(rng):
    return make_map(rng)


def _other(rng):
    return make_map(rng, n_samples=(5, 7))


# ------------------------------------------------------------ symlinks


def test_a_relative_symlink_is_followed(tmp_path, tensor, rng):
    real = tmp_path / "real.mts"
    blockmap.save(real, _other(rng))
    link = tmp_path / "link.mts"
    link.symlink_to("real.mts")
    blockmap.save(link, tensor)
    assert link.is_symlink(), "the link stays a link"
    assert os.readlink(link) == "real.mts"
    assert_identical(blockmap.load(real), tensor)
    assert sorted(os.listdir(tmp_path)) == ["link.mts", "real.mts"]


def test_a_chain_of_absolute_symlinks_into_another_directory(tmp_path, tensor):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    real = elsewhere / "real.mts"
    real.write_bytes(b"old")
    middle = tmp_path / "middle.mts"
    middle.symlink_to(real)
    first = tmp_path / "first.mts"
    first.symlink_to(middle)
    blockmap.save(first, tensor)
    assert first.is_symlink() and middle.is_symlink()
    assert_identical(blockmap.load(real), tensor)
    # the temporary file was made beside the real file: nothing else anywhere
    assert sorted(os.listdir(elsewhere)) == ["real.mts"]
    assert sorted(os.listdir(tmp_path)) == ["elsewhere", "first.mts", "middle.mts"]


def test_a_dangling_symlink_creates_its_target(tmp_path, tensor):
    link = tmp_path / "link.mts"
    link.symlink_to("new.mts")
    blockmap.save(link, tensor)
    assert link.is_symlink()
    assert_identical(blockmap.load(tmp_path / "new.mts"), tensor)


def test_a_symlink_loop_is_an_io_error(tmp_path, tensor):
    (tmp_path / "a.mts").symlink_to("b.mts")
    (tmp_path / "b.mts").symlink_to("a.mts")
    with pytest.raises(BlockMapIOError) as error:
        blockmap.save(tmp_path / "a.mts", tensor)
    assert error.value.errno == 40  # ELOOP


# ------------------------------------------------------------ mode and owner


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o444, 0o755])
def test_the_mode_of_the_file_replaced_is_kept(tmp_path, tensor, rng, mode):
    target = tmp_path / "data.mts"
    blockmap.save(target, _other(rng))
    os.chmod(target, mode)
    blockmap.save(target, tensor)
    assert stat.S_IMODE(os.stat(target).st_mode) == mode
    assert_identical(blockmap.load(target), tensor)


def test_a_new_file_gets_the_umask(tmp_path, tensor):
    previous = os.umask(0o027)
    try:
        blockmap.save(tmp_path / "new.mts", tensor)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(tmp_path / "new.mts").st_mode) == 0o640


def test_the_owner_is_kept_where_the_process_may_set_it(tmp_path, tensor, rng):
    target = tmp_path / "data.mts"
    blockmap.save(target, _other(rng))
    if os.geteuid() == 0:
        os.chown(target, 1234, 5678)
        expected = (1234, 5678)
    else:
        expected = (os.getuid(), os.getgid())
    blockmap.save(target, tensor)
    info = os.stat(target)
    assert (info.st_uid, info.st_gid) == expected


# ------------------------------------------------------------ temporary names


def test_a_250_byte_file_name_saves(tmp_path, tensor):
    target = tmp_path / ("x" * 246 + ".mts")
    assert len(target.name) == 250
    blockmap.save(target, tensor)
    assert_identical(blockmap.load(target), tensor)
    assert os.listdir(tmp_path) == [target.name]


def test_leftover_temporary_files_do_not_block_saving(tmp_path, tensor):
    # what killed saves of other processes (on file systems without unnamed
    # temporary files) could leave: nothing blocks a save
    for i in range(200):
        (tmp_path / f".bm-{i:016x}.tmp").write_bytes(b"stale")
        (tmp_path / f".data.mts.{os.getpid()}-{i}.tmp").write_bytes(b"stale")
    blockmap.save(tmp_path / "data.mts", tensor)
    assert_identical(blockmap.load(tmp_path / "data.mts"), tensor)


KILLED_SAVE = """
import sys, numpy as np, blockmap
path = sys.argv[1]
values = np.random.default_rng(1).normal(size=(4_000_000, 8))  # 256 MB
block = blockmap.TensorBlock(values, blockmap.Labels.range("s", len(values)), [],
                             blockmap.Labels.range("p", 8))
tensor = blockmap.TensorMap(blockmap.Labels.range("k", 1), [block])
print("ready", flush=True)
while True:
    blockmap.save(path, tensor)
"""


@pytest.mark.parametrize("delay", [0.05, 0.3, 0.9])
def test_a_killed_save_leaves_nothing_behind(tmp_path, tensor, delay):
    target = tmp_path / "data.mts"
    blockmap.save(target, tensor)
    before = target.read_bytes()
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_SAVE, str(target)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline().strip() == "ready"
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    child.stdout.close()
    assert os.listdir(tmp_path) == ["data.mts"], "no temporary file left"
    # old or new content, never a part
    if target.read_bytes() != before:
        blockmap.verify(target)
        assert blockmap.load(target).block(0).values.shape == (4_000_000, 8)


# ------------------------------------------------------------ syncing


def _written_to_storage():
    with open("/proc/self/io") as stats:
        return next(int(line.split()[1]) for line in stats if line.startswith("write_bytes"))


def test_the_data_reaches_storage_before_save_returns(tmp_path, rng):
    tensor = make_map(rng, n_samples=(40_000, 40_000), n_properties=80)
    assert tensor.nbytes > 20_000_000
    before = _written_to_storage()
    blockmap.save(tmp_path / "data.mts", tensor)
    written = _written_to_storage() - before
    # the page cache would hold it for seconds; fdatasync sent it down
    assert written >= os.path.getsize(tmp_path / "data.mts"), written


SYNCS_OF_A_SAVE = """
import sys, numpy as np, blockmap
from helpers.io_cases import make_map
tensor = make_map(np.random.default_rng(2), n_samples=SIZES, n_properties=40)
print("start", flush=True)
blockmap.save(sys.argv[1], tensor, durable=sys.argv[2] == "durable")
print("end", flush=True)
"""


def _calls_of_a_save(tmp_path, durable, sizes, traced="fsync,fdatasync,sync_file_range"):
    """The system calls of ``traced`` one save makes (traced by strace), by name."""
    code = f"import sys; sys.path.insert(0, {str(TESTS_DIR)!r})\n" + textwrap.dedent(
        SYNCS_OF_A_SAVE
    ).replace("SIZES", repr(sizes))
    log = tmp_path / "trace.log"
    result = subprocess.run(
        [
            "strace", "-f", "-qq", "-o", str(log),
            "-e", f"trace={traced},write",
            sys.executable, "-c", code, str(tmp_path / "data.mts"),
            "durable" if durable else "fast",
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = log.read_text().splitlines()
    # the calls between the script's two prints
    first = next(i for i, line in enumerate(lines) if 'write(1, "start' in line)
    last = next(i for i, line in enumerate(lines) if 'write(1, "end' in line)
    calls = [line.split("(")[0].split()[-1] for line in lines[first + 1 : last]]
    return [call for call in calls if call != "write"]


def _syncs_of_a_save(tmp_path, durable, sizes):
    """The sync system calls one save makes."""
    return _calls_of_a_save(tmp_path, durable, sizes)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_a_large_save_is_written_in_whole_chunks(tmp_path):
    """The writer thread writes the file in chunks of 1 MiB: the CRC and
    sizes the zip writer puts in each entry's local header once the entry is
    written go into the chunk being filled, or are sent with it, instead of
    breaking the file into small writes (each costs a system call on the
    thread that bounds the save's time)."""
    calls = _calls_of_a_save(tmp_path, False, (400, 500), traced="pwrite64")
    path = tmp_path / "data.mts"
    with zipfile.ZipFile(path) as archive:
        arrays = sum(name.endswith("values.npy") for name in archive.namelist())
        entries = len(archive.namelist())
    chunks = -(-path.stat().st_size // (1 << 20))
    assert entries > 3 * arrays, "labels entries lie between the arrays"
    # a chunk per MiB, a header rewrite per array whose header was already
    # sent, and the last chunk
    assert 0 < calls.count("pwrite64") <= chunks + arrays + 2, (calls.count("pwrite64"), chunks)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
@pytest.mark.parametrize("sizes", [(5, 7), (400, 500)], ids=["small", "pipelined"])
def test_a_durable_save_syncs_and_a_fast_one_does_not(tmp_path, sizes):
    durable = _syncs_of_a_save(tmp_path, True, sizes)
    assert durable.count("fdatasync") == 1, durable
    assert "fsync" in durable, "the directory is synced after the rename"
    assert durable.index("fdatasync") < durable.index("fsync")
    if sizes[0] > 100:
        # a large save hands its data to writeback as it goes
        assert "sync_file_range" in durable, durable
    assert _syncs_of_a_save(tmp_path, False, sizes) == []


@pytest.mark.parametrize("sizes", [(5, 7), (400, 500)], ids=["small", "pipelined"])
def test_a_save_that_is_not_durable_keeps_the_rest_of_the_contract(tmp_path, rng, sizes):
    tensor = make_map(rng, n_samples=sizes, n_properties=40)
    real = tmp_path / "real.mts"
    blockmap.save(real, _other(rng), durable=False)
    os.chmod(real, 0o640)
    link = tmp_path / "link.mts"
    link.symlink_to("real.mts")
    blockmap.save(link, tensor, durable=False)
    assert link.is_symlink()
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["link.mts", "real.mts"]
    blockmap.verify(real)
    assert_identical(blockmap.load(real), tensor)
    # the methods take it too
    tensor.save(tmp_path / "method.mts", durable=False)
    tensor.block(0).save(tmp_path / "block.mts", durable=False)
    tensor.keys.save(tmp_path / "keys.mts", durable=False)
    assert_identical(blockmap.load(tmp_path / "method.mts"), tensor)
    assert blockmap.load_labels(tmp_path / "keys.mts") == tensor.keys


def test_durable_takes_a_bool_by_keyword_only(tmp_path, tensor):
    with pytest.raises(TypeError):
        blockmap.save(tmp_path / "x.mts", tensor, durable="no")
    with pytest.raises(TypeError):
        blockmap.save(tmp_path / "x.mts", tensor, False, False)
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------ failures


class _FailingFile(io.RawIOBase):
    """A seekable binary file whose ``n``-th write (or its flush) fails."""

    def __init__(self, fail_at):
        self.stream = io.BytesIO()
        self.fail_at = fail_at
        self.writes = 0

    def writable(self):
        return True

    def seekable(self):
        return True

    def write(self, data):
        self.writes += 1
        if self.writes == self.fail_at:
            raise OSError(28, "No space left on device")
        return self.stream.write(data)

    def seek(self, offset, whence=0):
        return self.stream.seek(offset, whence)

    def tell(self):
        return self.stream.tell()


def test_every_failing_write_of_a_file_object_raises_and_prints_nothing(tensor, capfd):
    total = _FailingFile(fail_at=-1)
    blockmap.save(total, tensor)
    assert total.writes > 10
    for n in range(1, total.writes + 1):
        with pytest.raises(OSError, match="No space left"):
            blockmap.save(_FailingFile(fail_at=n), tensor)
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


class _FullFile(_FailingFile):
    """A file object whose writes take nothing from the ``n``-th on (a full
    device under a raw file): ``write`` returns 0."""

    def __init__(self, full_at, seekable):
        super().__init__(fail_at=-1)
        self.full_at = full_at
        self.can_seek = seekable

    def seekable(self):
        return self.can_seek

    def write(self, data):
        self.writes += 1
        if self.writes >= self.full_at:
            return 0
        # a raw file may take part of what it is given
        return self.stream.write(bytes(data)[: max(1, len(data) - 1)])


@pytest.mark.parametrize("seekable", [True, False], ids=["seekable", "stream"])
def test_a_file_object_that_writes_nothing_raises_and_prints_nothing(tensor, capfd, seekable):
    total = _FullFile(full_at=2**62, seekable=seekable)
    blockmap.save(total, tensor)
    assert total.stream.getvalue() == bytes(blockmap.save_buffer(tensor))
    # the first writes, one in 7 of the others, and the last ones (the
    # central directory, written when the zip writer finishes)
    last = total.writes
    ns = {*range(1, min(20, last)), *range(20, last, 7), *range(max(1, last - 40), last + 1)}
    for n in sorted(ns):
        with pytest.raises(blockmap.BlockMapIOError, match="failed to write whole buffer"):
            blockmap.save(_FullFile(full_at=n, seekable=seekable), tensor)
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


def test_a_file_object_without_seekable_is_written_as_a_stream(tensor):
    class Stream:
        def __init__(self):
            self.data = bytearray()

        def write(self, data):
            self.data += data
            return len(data)

    stream = Stream()
    blockmap.save(stream, tensor)
    assert bytes(stream.data) == bytes(blockmap.save_buffer(tensor))


FAILING_PATH_SAVES = """
import os, resource, signal, sys
import blockmap
from helpers.io_cases import make_map
import numpy as np
directory, sizes, step, durable = sys.argv[1], eval(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
durable = durable == "durable"
tensor = make_map(np.random.default_rng(3), n_samples=sizes, n_properties=40)
path = os.path.join(directory, "data.mts")
blockmap.save(path, tensor)
size = os.path.getsize(path)
with open(path, "rb") as f:
    before = f.read()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
outcomes = set()
# the headers at the start, then every `step` bytes; a step of 0: the
# bytes around each multiple of 256 KiB (where each write of the writer
# thread's 1 MiB chunks and of a buffered writer's 256 KiB pieces starts:
# a write that fails at its first byte, or after one) and the end
if step:
    limits = list(range(0, 4096, 97)) + list(range(4096, size + step, step))
else:
    limits = list(range(0, 4096, 97)) + sorted(
        {b + d for b in range(1 << 18, size, 1 << 18) for d in (-1, 0, 1)}
        | {size - 1, size, size + 1}
    )
for limit in limits:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    try:
        blockmap.save(path, make_map(np.random.default_rng(limit), n_samples=sizes,
                                     n_properties=40), durable=durable)
        outcomes.add("saved")
    except blockmap.BlockMapIOError:
        outcomes.add("BlockMapIOError")
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert sorted(os.listdir(directory)) == ["data.mts"], os.listdir(directory)
    with open(path, "rb") as f:
        now = f.read()
    if now != before:
        blockmap.verify(path)
        before = now
print(sorted(outcomes))
"""


@pytest.mark.parametrize(
    ("sizes", "step", "durable"),
    [((300, 500), 0, "durable"), ((400, 500), 1_048_573, "durable"),
     ((400, 500), 1_572_869, "fast")],
    ids=["small", "pipelined", "pipelined-not-durable"],
)  # fmt: skip
def test_every_failing_write_of_a_path_leaves_old_content_nothing_else_and_no_output(
    tmp_path, sizes, step, durable
):
    code = f"import sys; sys.path.insert(0, {str(TESTS_DIR)!r})\n" + textwrap.dedent(
        FAILING_PATH_SAVES
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), repr(sizes), str(step), durable],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", "a library never prints"
    assert "BlockMapIOError" in result.stdout


def test_saving_over_a_mapped_file_stays_safe(tmp_path, tensor, rng):
    target = tmp_path / "data.mts"
    blockmap.save(target, tensor)
    mapped = blockmap.load(target, mmap=True)
    replacement = _other(rng)
    blockmap.save(target, replacement)
    # the map keeps the old file's data, intact
    assert_identical(mapped, tensor)
    assert_identical(blockmap.load(target), replacement)
    assert np.isfinite(mapped.block(0).values).all()
