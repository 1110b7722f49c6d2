"""Saving into a file object that already holds something: no reader may
find what it held after the new archive (docs/format.md, "Saving").

A zip reader looks for the end records at the end of the file: a save
that left the end of a longer archive behind made every reader, blockmap's
and metatensor-core's, read that old directory (an error at best, the old
map's structure over the new bytes without one when mapped). Every save
entry point cuts the object off at its position before writing (so that a
save killed at any moment leaves an archive without end records, which no
reader takes for the old one), writes forward when the object appends,
and refuses an object it cannot cut, leaving it untouched.
"""

import gzip
import io
import mmap
import os
import signal
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import blockmap
from blockmap import Labels, TensorBlock, TensorMap
from helpers.io_cases import assert_identical, assert_matches_metatensor, make_map

metatensor = pytest.importorskip("metatensor")
metatensor_io = pytest.importorskip("metatensor.io")


@pytest.fixture
def old(rng):
    """Longer than every ``new``: its end records lie past the new ones."""
    return make_map(rng, n_samples=(30, 50, 40), info={"note": "old " * 200})


NEW = {
    "TensorMap": lambda rng: make_map(rng, n_samples=(3, 5)),
    "TensorBlock": lambda rng: make_map(rng, n_samples=(4,)).block(0),
    "Labels": lambda rng: Labels(["a", "b"], np.array([[1, 2], [3, 4]], dtype=np.int32)),
}

SAVES = {
    "blockmap.save": lambda f, data: blockmap.save(f, data),
    "blockmap.io.save": lambda f, data: blockmap.io.save(f, data),
    "method": lambda f, data: data.save(f),
}


def _load_with_metatensor(data: bytes, kind: str):
    if kind == "TensorMap":
        return metatensor_io.load_buffer(data)
    if kind == "TensorBlock":
        return metatensor_io.load_block_buffer(data)
    return metatensor_io.load_labels_buffer(data)


def _load(data: bytes, kind: str):
    if kind == "TensorMap":
        return blockmap.load_buffer(data)
    if kind == "TensorBlock":
        return blockmap.load_block_buffer(data)
    return blockmap.load_labels_buffer(data)


def _opened(kind, path):
    """A file object of ``path`` (which holds the old archive), at its start."""
    if kind == "open r+b":
        return open(path, "r+b")
    if kind == "open r+b unbuffered":
        return open(path, "r+b", buffering=0)
    if kind == "raw descriptor":
        return open(os.open(path, os.O_RDWR), "r+b", buffering=0)
    if kind == "os.fdopen":
        return os.fdopen(os.open(path, os.O_RDWR), "r+b")
    raise ValueError(kind)


FILE_KINDS = ["BytesIO", "open r+b", "open r+b unbuffered", "raw descriptor", "os.fdopen"]


@pytest.mark.parametrize("save", list(SAVES))
@pytest.mark.parametrize("kind", list(NEW))
@pytest.mark.parametrize("file_kind", [*FILE_KINDS, "SpooledTemporaryFile", "after a prefix"])
def test_a_save_leaves_nothing_of_what_the_object_held(tmp_path, rng, old, save, kind, file_kind):
    new = NEW[kind](rng)
    previous = bytes(blockmap.save_buffer(old))
    expected = bytes(blockmap.save_buffer(new))
    assert len(previous) > len(expected) + 4096
    prefix = b""
    if file_kind == "BytesIO":
        file = io.BytesIO(previous)
    elif file_kind == "SpooledTemporaryFile":
        file = tempfile.SpooledTemporaryFile(max_size=1 << 20)
        file.write(previous)
        file.seek(0)
    elif file_kind == "after a prefix":
        # an archive written after other data, over one written there before
        prefix = b"#!header\n" * 7
        path = tmp_path / "data"
        path.write_bytes(prefix + previous)
        file = open(path, "r+b")
        file.seek(len(prefix))
    else:
        path = tmp_path / "data.mts"
        path.write_bytes(previous)
        file = _opened(file_kind, path)
    with file:
        SAVES[save](file, new)
        assert file.tell() == len(prefix) + len(expected)
        file.seek(0)
        written = file.read()
    assert written == prefix + expected
    data = written[len(prefix) :]
    assert_identical(_load(data, kind), new)
    assert_matches_metatensor(new, _load_with_metatensor(data, kind))
    if file_kind in FILE_KINDS[1:]:
        # and every reader of the path: mapped, and metatensor-core's
        if kind == "TensorMap":
            assert_identical(blockmap.load(path, mmap=True), new)
            assert_matches_metatensor(new, metatensor_io.load(path))
        elif kind == "TensorBlock":
            assert_identical(blockmap.load_block(path, mmap=True), new)
            assert_matches_metatensor(new, metatensor_io.load_block(path))
        else:
            assert_identical(blockmap.load_labels(path), new)
            assert_matches_metatensor(new, metatensor_io.load_labels(path))


@pytest.mark.parametrize("how", ["ab", "a+b", "O_APPEND descriptor"])
def test_a_file_that_appends_gets_the_archive_whole_at_its_end(tmp_path, rng, old, how):
    path = tmp_path / "data.mts"
    blockmap.save(path, old)
    previous = path.read_bytes()
    new = make_map(rng, n_samples=(3, 5))
    if how == "O_APPEND descriptor":
        file = open(os.open(path, os.O_RDWR | os.O_APPEND), "r+b")
        file.seek(0)  # writes go to the end all the same
    else:
        file = open(path, how)
    with file:
        blockmap.save(file, new)
    written = path.read_bytes()
    assert written == previous + bytes(blockmap.save_buffer(new))
    assert_identical(blockmap.load_buffer(written[len(previous) :]), new)
    # archives one after the other: a path reads the last
    assert_identical(blockmap.load(path), new)
    assert_identical(blockmap.load(path, mmap=True), new)


def test_a_gzip_file_receives_the_archive_forward(tmp_path, rng):
    # seekable, but only forward and not from its end
    new = make_map(rng)
    with gzip.open(tmp_path / "data.mts.gz", "wb") as file:
        blockmap.save(file, new)
    with gzip.open(tmp_path / "data.mts.gz", "rb") as file:
        data = file.read()
    assert data == bytes(blockmap.save_buffer(new))
    assert_matches_metatensor(new, metatensor_io.load_buffer(data))


class _NoTruncate:
    """A seekable binary file object without ``truncate``."""

    def __init__(self, data):
        self.stream = io.BytesIO(data)

    def seekable(self):
        return True

    def write(self, data):
        return self.stream.write(data)

    def seek(self, offset, whence=0):
        return self.stream.seek(offset, whence)

    def tell(self):
        return self.stream.tell()

    def read(self, size=-1):
        return self.stream.read(size)


class _IgnoresTruncate(_NoTruncate):
    def truncate(self, size=None):
        return self.stream.tell()


def _mmap_of(tmp_path, data):
    path = tmp_path / "mapped"
    path.write_bytes(data)
    with open(path, "r+b") as file:
        return mmap.mmap(file.fileno(), 0)


def test_an_object_that_cannot_be_cut_is_refused_untouched(tmp_path, rng, old):
    previous = bytes(blockmap.save_buffer(old))
    new = make_map(rng, n_samples=(3,))
    exported = io.BytesIO(previous)
    view = exported.getbuffer()  # BytesIO cannot resize while exported
    objects = {
        "no truncate": _NoTruncate(previous),
        "truncate does nothing": _IgnoresTruncate(previous),
        "BytesIO with its buffer exported": exported,
        "mmap": _mmap_of(tmp_path, previous),
    }
    for name, file in objects.items():
        for data in (new, new.block(0), new.keys):
            with pytest.raises(blockmap.BlockMapIOError, match="cannot save into this file object"):
                blockmap.save(file, data)
            file.seek(0)
            assert file.read(len(previous)) == previous, name
            assert file.tell() == len(previous), name
            file.seek(0)
    view.release()
    # the same objects, empty after their position, are written
    for file in (_NoTruncate(b""), _IgnoresTruncate(b"")):
        blockmap.save(file, new)
        assert file.stream.getvalue() == bytes(blockmap.save_buffer(new))


def test_a_text_file_is_refused_untouched(tmp_path, rng):
    path = tmp_path / "notes.txt"
    path.write_text("keep me\n" * 10)
    with open(path, "r+") as file:
        with pytest.raises(blockmap.BlockMapTypeError, match="binary file object"):
            blockmap.save(file, make_map(rng))
    assert path.read_text() == "keep me\n" * 10


def test_data_metatensor_could_not_read_is_refused_before_the_object_is_cut(rng, old):
    previous = bytes(blockmap.save_buffer(old))
    file = io.BytesIO(previous)
    unreadable = make_map(rng, info={"note": "a\0b"})
    with pytest.raises(blockmap.ValidationError):
        blockmap.save(file, unreadable)
    assert file.getvalue() == previous


#: the maps of the killed saves: one layout (a checkpoint saved again over
#: itself), old values 1, new values 2; 16 MB, written in 64 pieces and more
SHAPE = (262_144, 8)


def _checkpoint(value):
    values = np.full(SHAPE, value)
    block = TensorBlock(values, Labels.range("s", SHAPE[0]), [], Labels.range("p", SHAPE[1]))
    return TensorMap(Labels.range("k", 1), [block])


class _Counting(io.BytesIO):
    def __init__(self):
        super().__init__()
        self.writes = 0

    def write(self, data):
        self.writes += 1
        return super().write(data)


KILLED_SAVE = """
import io, os, signal, sys
import numpy as np
import blockmap
path, kill_at = sys.argv[1], int(sys.argv[2])

class Dying(io.RawIOBase):
    # the file, killed (SIGKILL) in the middle of its kill_at-th write:
    # half of that write's bytes reach it
    def __init__(self):
        self.file = open(path, "r+b", buffering=0)
        self.writes = 0
    def writable(self):
        return True
    def seekable(self):
        return True
    def seek(self, offset, whence=0):
        return self.file.seek(offset, whence)
    def tell(self):
        return self.file.tell()
    def truncate(self, size=None):
        return self.file.truncate(size)
    def write(self, data):
        self.writes += 1
        if self.writes == kill_at:
            self.file.write(bytes(data)[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
        return self.file.write(data)

values = np.full((262_144, 8), 2.0)
block = blockmap.TensorBlock(values, blockmap.Labels.range("s", len(values)), [],
                             blockmap.Labels.range("p", 8))
blockmap.save(Dying(), blockmap.TensorMap(blockmap.Labels.range("k", 1), [block]))
"""


@pytest.mark.parametrize("at", [0.0, 0.02, 0.05, 0.25, 0.5, 0.75, 0.98, 1.0])
def test_a_save_into_a_file_object_killed_at_any_moment_is_never_read_as_the_old_one(tmp_path, at):
    """A save killed while it rewrote a file object holding an archive of
    the same layout (a checkpoint saved again over itself): before, the old
    end records stayed, and a mapped load gave the old map's structure over
    part new, part old values, without an error. Now every reader refuses
    what a killed save leaves, or reads the whole new map."""
    counting = _Counting()
    blockmap.save(counting, _checkpoint(2.0))
    kill_at = max(1, round(at * counting.writes))
    path = tmp_path / "data.mts"
    blockmap.save(path, _checkpoint(1.0))
    child = subprocess.run(
        [sys.executable, "-c", KILLED_SAVE, str(path), str(kill_at)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    loads = [
        lambda: blockmap.load(path, mmap=True),
        lambda: blockmap.load(path),
        lambda: blockmap.load_buffer(path.read_bytes()),
        lambda: metatensor_io.load(path),
    ]
    for load in loads:
        with pytest.raises((blockmap.FormatError, metatensor.MetatensorError)):
            load()


@pytest.mark.parametrize("mode", ["r", "c"])
def test_a_map_is_not_saved_in_place_into_the_file_it_maps(tmp_path, rng, mode):
    """Cutting the file off first would lose the arrays the save reads
    (before, an unchanged map rewrote the same bytes in place, and a
    copy-on-write one read the file while it was rewritten)."""
    path = tmp_path / "data.mts"
    tensor = make_map(rng)
    blockmap.save(path, tensor)
    before = path.read_bytes()
    mapped = blockmap.load(path, mmap=mode)
    expected = tensor
    if mode == "c":
        mapped.block(0).values[:] += 1
        expected = mapped.copy()
    with open(path, "r+b") as file:
        with pytest.raises(blockmap.BlockMapIOError, match="view a mapping of this file"):
            blockmap.save(file, mapped)
        with pytest.raises(blockmap.BlockMapIOError, match="view a mapping of this file"):
            blockmap.save(file, mapped.block(0))
    assert path.read_bytes() == before
    assert_identical(mapped, expected)
    # at the file's end nothing it maps is written
    with open(path, "r+b") as file:
        file.seek(0, 2)
        blockmap.save(file, mapped)
    assert path.read_bytes()[: len(before)] == before
    assert_identical(blockmap.load_buffer(path.read_bytes()[len(before) :]), expected)
    # its path is replaced atomically: the mapping keeps the old file
    blockmap.save(path, mapped)
    assert_identical(blockmap.load(path), expected)
    assert_identical(mapped, expected)
    # another map, not mapping the file, is saved in place
    with open(path, "r+b") as file:
        blockmap.save(file, tensor)
    assert_identical(blockmap.load(path), tensor)
