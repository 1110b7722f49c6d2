"""Writers never lose or replace data silently (issue 42): a
``DatasetWriter`` never closed commits what it wrote when finalized, with a
``ResourceWarning``; a ``with`` block that raises still aborts; a SIGKILL
before the first commit leaves the old file or nothing; a forked child
never commits its parent's writer; an existing path is refused unless
``overwrite=True`` or ``append=True``; two writers creating the same path
take turns (its lock file), in real processes."""

import os
import pickle
import signal
import subprocess
import sys
import textwrap

import pytest

import blockmap
from bench.batches import structure_maps
from blockmap import Dataset, DatasetWriter, save_dataset

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork and signals")


@pytest.fixture
def maps():
    return structure_maps(6)


def _run(code: str, *args: str, warnings: str = "error::ResourceWarning", **kwargs):
    return subprocess.run(
        [sys.executable, "-W", warnings, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        **kwargs,
    )


WRITE_TEN = """
import gc, sys
import blockmap
from bench.batches import qm9_maps

maps = qm9_maps(10)
"""

#: how each case leaves its writer unclosed
UNCLOSED = {
    "dropped": "w = blockmap.DatasetWriter(sys.argv[1])\nfor m in maps: w.write(m)\ndel w\n",
    "collected": "w = blockmap.DatasetWriter(sys.argv[1])\n"
    "for m in maps: w.write(m)\n"
    "w.cycle = [w]\n"
    "del w\n"
    "gc.collect()\n",
    "function": "def f():\n"
    "    w = blockmap.DatasetWriter(sys.argv[1])\n"
    "    for m in maps: w.write(m)\n"
    "f()\n",
    "exit": "w = blockmap.DatasetWriter(sys.argv[1])\nfor m in maps: w.write(m)\n",
}


@pytest.fixture
def bench_path():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}


@pytest.mark.parametrize("how", sorted(UNCLOSED))
@pytest.mark.parametrize("warnings", ["error::ResourceWarning", "always::ResourceWarning"])
def test_an_unclosed_writer_commits_with_a_resource_warning(tmp_path, bench_path, how, warnings):
    path = tmp_path / "d.bmds"
    done = _run(
        WRITE_TEN + UNCLOSED[how] + "print('done', flush=True)\n",
        str(path),
        warnings=warnings,
        env=bench_path,
    )
    assert done.returncode == 0, done.stderr
    assert "done" in done.stdout
    # the warning names the writer and says it was not closed (as an
    # error, it is reported as unraisable: the commit happens anyway)
    assert "ResourceWarning" in done.stderr, done.stderr
    assert f"unclosed DatasetWriter('{path}')" in done.stderr
    ds = Dataset(path)
    assert (len(ds), ds.committed) == (10, True)
    blockmap.verify(path)


def test_an_unclosed_writer_warns_in_process(tmp_path, maps):
    path = tmp_path / "d.bmds"
    writer = DatasetWriter(path)
    writer.write(maps[0])
    with pytest.warns(ResourceWarning, match="unclosed DatasetWriter"):
        del writer
    assert (len(Dataset(path)), Dataset(path).committed) == (1, True)


def test_closed_aborted_and_raising_writers_do_not_warn(tmp_path, maps):
    path = tmp_path / "d.bmds"
    # filterwarnings = error: a warning would fail the test
    writer = DatasetWriter(path)
    writer.write(maps[0])
    writer.close()
    del writer
    with pytest.raises(ZeroDivisionError), DatasetWriter(tmp_path / "raised.bmds") as writer:
        writer.write(maps[0])
        raise ZeroDivisionError
    del writer
    # the block raised: the new dataset is given up, nothing is left
    assert not (tmp_path / "raised.bmds").exists()
    writer = DatasetWriter(tmp_path / "aborted.bmds")
    writer.write(maps[0])
    writer.abort()
    del writer
    assert not (tmp_path / "aborted.bmds").exists()


@pytest.mark.parametrize("old", [False, True])
def test_a_kill_before_the_first_commit_leaves_the_old_file_or_nothing(
    tmp_path, bench_path, maps, old
):
    path = tmp_path / "d.bmds"
    if old:
        save_dataset(path, maps[:2])
    before = path.read_bytes() if old else None
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITE_TEN + "w = blockmap.DatasetWriter(sys.argv[1], overwrite=True)\n"
            "for m in maps: w.write(m)\n"
            "print('written', flush=True)\n"
            "sys.stdin.read()\n",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=bench_path,
    )
    with child:
        assert child.stdout is not None
        assert child.stdout.readline() == b"written\n"
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    if old:
        assert path.read_bytes() == before
    else:
        assert not path.exists()
    # nothing else beside it but its creation lock (hidden; the next
    # writer takes it over)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        (["d.bmds"] if old else []) + [".d.bmds.lock"]
    )


def test_a_forked_child_never_commits_its_parents_writer(tmp_path, maps):
    path = tmp_path / "d.bmds"
    writer = DatasetWriter(path)
    for tensor in maps[:3]:
        writer.write(tensor)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            # dropped, collected, and the child's exit (atexit) run: none
            # commits (nor warns: the warning would be an error here)
            del writer
            import gc

            gc.collect()
            blockmap.dataset._finalize_open_writers()
            os.write(write, b"ok" if not path.exists() else b"committed")
        except BaseException as error:  # noqa: BLE001
            os.write(write, repr(error).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read()
    os.waitpid(pid, 0)
    assert said == b"ok"
    assert not path.exists()
    writer.write(maps[3])
    writer.close()
    assert len(Dataset(path)) == 4


def test_an_existing_path_is_refused_naming_overwrite_and_append(tmp_path, maps):
    path = tmp_path / "d.bmds"
    save_dataset(path, maps[:2])
    before = path.read_bytes()
    mts = tmp_path / "m.mts"
    blockmap.save(mts, maps[3])
    refusals = [
        lambda: DatasetWriter(path),
        lambda: save_dataset(path, maps[:1]),
        lambda: Dataset.from_files([mts], path),
        lambda: Dataset.upgrade(path, path),
        lambda: Dataset.compact(tmp_path / "d.bmds", path),
    ]
    for refuse in refusals:
        with pytest.raises(blockmap.ExistingFileError) as raised:
            refuse()
        assert isinstance(raised.value, FileExistsError)
        assert isinstance(raised.value, blockmap.BlockMapIOError)
        assert "overwrite=True" in str(raised.value) and "append=True" in str(raised.value)
        assert path.read_bytes() == before
    # refused before any lock is taken: no lock file made beside it, and
    # the refusal is the same while another writer is replacing the file
    # (it holds the creation lock): not a wait, nor a "being written"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.bmds", "m.mts"]
    with DatasetWriter(path, overwrite=True) as replacing:
        replacing.write(maps[0])
        with pytest.raises(blockmap.ExistingFileError, match="overwrite=True"):
            DatasetWriter(path, timeout=0)
        with pytest.raises(blockmap.ExistingFileError, match="overwrite=True"):
            save_dataset(path, maps[:1])
    assert len(Dataset(path)) == 1
    # overwrite: replaced (atomically, at the first commit); append: added
    save_dataset(path, maps[:1], overwrite=True)
    assert len(Dataset(path)) == 1
    save_dataset(path, maps[1:3], append=True)
    assert [m == t for m, t in zip(Dataset(path), maps[:3], strict=True)] == [True] * 3
    Dataset.from_files([mts], path, append=True)
    assert Dataset(path)[-1] == maps[3]
    Dataset.from_files([mts], path, overwrite=True)
    assert len(Dataset(path)) == 1
    Dataset.compact(path, tmp_path / "c.bmds")
    Dataset.upgrade(path, tmp_path / "c.bmds", overwrite=True)
    with pytest.raises(blockmap.ValidationError, match="not both"):
        DatasetWriter(path, append=True, overwrite=True)


CREATOR = """
import sys, pickle, blockmap
maps = pickle.load(sys.stdin.buffer)
w = blockmap.DatasetWriter(sys.argv[1])
w.write(maps[0])
print('writing', flush=True)
sys.stdin.readline()
w.write(maps[1])
w.close()
print('closed', flush=True)
"""


def test_two_writers_creating_one_path_take_turns(tmp_path, maps):
    path = tmp_path / "d.bmds"
    first = subprocess.Popen(
        [sys.executable, "-c", CREATOR, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert first.stdin is not None and first.stdout is not None
    first.stdin.write(pickle.dumps(maps[:2], protocol=5))
    first.stdin.flush()
    assert first.stdout.readline() == b"writing\n"
    # the second fails at once (timeout=0): the first holds the path's lock
    with pytest.raises(blockmap.BlockMapIOError, match="another DatasetWriter"):
        DatasetWriter(path)
    with pytest.raises(blockmap.BlockMapIOError, match="another DatasetWriter"):
        DatasetWriter(path, overwrite=True, timeout=0.2)
    # a second process that waits: it finds the first's file once that one
    # is in place, and refuses it (the first's writes stay)
    second = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, blockmap\n"
            "try:\n"
            "    blockmap.DatasetWriter(sys.argv[1], timeout=None)\n"
            "except FileExistsError as e:\n"
            "    print('exists', e, flush=True)\n",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    first.stdin.write(b"go\n")
    first.stdin.flush()
    assert first.stdout.readline() == b"closed\n"
    out, _ = second.communicate(timeout=120)
    first.communicate(timeout=120)
    assert out.startswith("exists") and "overwrite=True" in out
    ds = Dataset(path)
    assert len(ds) == 2 and ds[0] == maps[0] and ds[1] == maps[1]


SESSIONS = """
import sys, blockmap
from bench.batches import structure_maps
maps = structure_maps(400)
for i, tensor in enumerate(maps):
    with blockmap.DatasetWriter(sys.argv[1], append=True, timeout=60) as writer:
        writer.write(tensor)
        print('written', i, flush=True)
    print('committed', i, flush=True)
"""


@pytest.mark.parametrize("after", [1, 7, 40, 111, 250])
def test_a_kill_at_any_point_of_append_sessions_keeps_every_returned_write(
    tmp_path, bench_path, after
):
    """A loop of append sessions of one entry each (version 4: each commit
    writes a SEGMENT record, merging earlier ones, a COMMIT record and a
    trailer), killed with SIGKILL after ``after`` sessions returned, at
    whatever point of a write or commit it is then: the file opens with
    every returned write, verifies, and appends again."""
    path = tmp_path / "grown.bmds"
    save_dataset(path, structure_maps(3))
    with subprocess.Popen(
        [sys.executable, "-c", SESSIONS, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=bench_path,
    ) as child:
        assert child.stdout is not None
        written = -1
        for line in child.stdout:
            what, i = line.split()
            if what == "written":
                written = int(i)
            if int(i) >= after:
                break
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    ds = Dataset(path)
    assert 3 + written + 1 <= len(ds) <= 3 + written + 2
    first, appended = structure_maps(3), structure_maps(400)
    for i in range(len(ds)):
        assert ds[i] == (first[i] if i < 3 else appended[i - 3])
    blockmap.verify(path)
    with DatasetWriter(path, append=True) as writer:
        writer.write(first[0])
    grown = Dataset(path)
    assert (len(grown), grown.committed) == (len(ds) + 1, True)
    assert grown.column("n_samples").shape == (len(ds) + 1,)
