"""One writer at a time per dataset, across processes: real processes
append to one file at once (each waiting for the others' lock), and every
``write()`` that returned is in the file afterwards; a writer killed with
SIGKILL while holding the lock lets it go; a second writer that does not
wait fails with ``BlockMapIOError`` naming the path; readers never wait;
a forked child of a writer can neither write through it nor keep its
lock."""

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap

import pytest

import blockmap
from bench.batches import structure_maps
from helpers import TESTS_DIR

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="flock and SIGKILL")

ROOT = TESTS_DIR.parent.parent


def _tagged(writer_id, i):
    tensor = structure_maps(1 + i % 3)[-1]
    tensor.set_info("writer", str(writer_id))
    tensor.set_info("i", str(i))
    return tensor


def _append(path, writer_id, sessions, per_session, returned):
    """Open the dataset ``sessions`` times, waiting for the lock, and append
    ``per_session`` maps each time; report each returned write."""
    i = 0
    for _ in range(sessions):
        with blockmap.DatasetWriter(path, append=True, timeout=None) as writer:
            for _ in range(per_session):
                writer.write(_tagged(writer_id, i))
                returned.put((writer_id, i))
                i += 1


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_concurrent_appenders_keep_every_returned_write(tmp_path, method):
    path = tmp_path / "shared.data"
    context = multiprocessing.get_context(method)
    returned = context.Queue()
    writers, sessions, per_session = 4, 5, 4
    processes = [
        context.Process(target=_append, args=(path, w, sessions, per_session, returned))
        for w in range(writers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=300)
        assert process.exitcode == 0
    reported = {returned.get(timeout=10) for _ in range(writers * sessions * per_session)}
    dataset = blockmap.Dataset(path)
    assert dataset.committed
    found = [(int(t.info()["writer"]), int(t.info()["i"])) for t in dataset]
    assert len(found) == len(set(found))
    assert set(found) == reported
    # each writer's maps are in its order
    for w in range(writers):
        mine = [i for writer_id, i in found if writer_id == w]
        assert mine == sorted(mine)


def test_a_second_writer_fails_or_waits_and_readers_never_wait(tmp_path):
    path = tmp_path / "locked.data"
    blockmap.save_dataset(path, structure_maps(3))
    with blockmap.DatasetWriter(path, append=True) as holder:
        holder.write(_tagged(0, 0))
        with pytest.raises(blockmap.BlockMapIOError, match="another DatasetWriter") as info:
            blockmap.DatasetWriter(path, append=True, timeout=0.05)
        assert os.fspath(path) in str(info.value)
        with pytest.raises(blockmap.BlockMapIOError, match="another DatasetWriter"):
            blockmap.save_dataset(path, structure_maps(2), overwrite=True, timeout=0.05)
        # neither appending nor replacing: refused for the file being
        # there, whoever holds it (waiting would end in the same refusal)
        with pytest.raises(blockmap.ExistingFileError, match="overwrite=True") as info:
            blockmap.DatasetWriter(path, timeout=10)
        assert os.fspath(path) in str(info.value)
        with pytest.raises(blockmap.ExistingFileError):
            blockmap.save_dataset(path, structure_maps(2))
        # readers open it, and see what was committed or written so far
        assert len(blockmap.Dataset(path)) == 4
    with blockmap.DatasetWriter(path, append=True, timeout=0) as writer:
        writer.write(_tagged(0, 1))
    assert len(blockmap.Dataset(path)) == 5
    for bad, error in [(-1, blockmap.ValidationError), (float("nan"), blockmap.ValidationError)]:
        with pytest.raises(error):
            blockmap.DatasetWriter(path, append=True, timeout=bad)
    for bad in ("1", True, [1]):
        with pytest.raises(blockmap.BlockMapTypeError):
            blockmap.DatasetWriter(path, append=True, timeout=bad)


HOLDER = textwrap.dedent(
    """
    import sys, time
    sys.path[:0] = [sys.argv[1]]
    import blockmap
    from bench.batches import structure_maps
    writer = blockmap.DatasetWriter(sys.argv[2], append=True)
    for i, tensor in enumerate(structure_maps(5)):
        writer.write(tensor)
    print("holding", flush=True)
    time.sleep(600)
    """
)


def test_a_writer_killed_holding_the_lock_lets_it_go(tmp_path):
    path = tmp_path / "killed.data"
    blockmap.save_dataset(path, structure_maps(2))
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(ROOT), str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "holding"
        with pytest.raises(blockmap.BlockMapIOError, match="another DatasetWriter"):
            blockmap.DatasetWriter(path, append=True)
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
    # a writer that was waiting gets the lock once the holder is gone
    with blockmap.DatasetWriter(path, append=True, timeout=60) as writer:
        assert len(writer) == 7  # every write the killed writer returned
        writer.write(structure_maps(1)[0])
    assert len(blockmap.Dataset(path)) == 8


def _write_in_child(writer, result):
    try:
        writer.write(structure_maps(1)[0])
        result.put("wrote")
    except blockmap.BlockMapError as error:
        result.put(str(error))


def test_a_forked_child_neither_writes_nor_keeps_the_lock(tmp_path):
    path = tmp_path / "forked.data"
    context = multiprocessing.get_context("fork")
    writer = blockmap.DatasetWriter(path, append=True)
    writer.write(structure_maps(1)[0])
    result = context.Queue()
    child = context.Process(target=_write_in_child, args=(writer, result))
    child.start()
    assert "another process" in result.get(timeout=60)
    child.join(timeout=60)
    # the parent still holds the lock, and writes
    with pytest.raises(blockmap.BlockMapIOError):
        blockmap.DatasetWriter(path, append=True)
    writer.write(structure_maps(2)[1])
    # a forked child alive past the parent's close does not keep the lock
    sleeper = context.Process(target=_sleep)
    sleeper.start()
    try:
        writer.close()
        with blockmap.DatasetWriter(path, append=True) as again:
            assert len(again) == 2
    finally:
        sleeper.kill()
        sleeper.join()


def _sleep():
    import time

    time.sleep(600)


def test_a_create_waits_for_an_appender_and_then_replaces(tmp_path):
    path = tmp_path / "replaced.data"
    blockmap.save_dataset(path, structure_maps(2))
    appender = blockmap.DatasetWriter(path, append=True)
    appender.write(structure_maps(3)[2])
    with pytest.raises(blockmap.BlockMapIOError):
        blockmap.DatasetWriter(path, overwrite=True)
    appender.close()
    assert len(blockmap.Dataset(path)) == 3
    creator = blockmap.DatasetWriter(path, overwrite=True)
    creator.write(structure_maps(1)[0])
    # the file being replaced stays locked until the new one is in place
    with pytest.raises(blockmap.BlockMapIOError):
        blockmap.DatasetWriter(path, append=True)
    creator.close()
    assert len(blockmap.Dataset(path)) == 1


@pytest.mark.parametrize("append", [False, True])
def test_a_writer_refuses_a_fifo_at_its_path_without_waiting(tmp_path, append):
    """A FIFO (with no process at its other end) or a directory at the path:
    the writer names what is there, at once. Opening a FIFO waits for a
    writer unless it is opened without waiting, so the check runs in a child
    with a timeout: a hang fails the test instead of stopping the run."""
    fifo = tmp_path / "fifo.bmdata"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.bmdata"
    folder.mkdir()
    code = textwrap.dedent(
        f"""
        import sys
        import blockmap
        from bench.batches import structure_maps

        for path in sys.argv[1:]:
            try:
                with blockmap.DatasetWriter(path, append={append}) as writer:
                    writer.write(structure_maps(1)[0])
            except blockmap.BlockMapIOError as error:
                print(type(error).__name__, error)
            else:
                print("written")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code, os.fspath(fifo), os.fspath(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    fifo_line, folder_line = out.stdout.splitlines()
    assert fifo_line.startswith("BlockMapIOError"), fifo_line
    assert "a FIFO (named pipe)" in fifo_line and os.fspath(fifo) in fifo_line
    assert folder_line.startswith("BlockMapIOError"), folder_line
    assert os.fspath(folder) in folder_line
    assert fifo.is_fifo() and folder.is_dir()
