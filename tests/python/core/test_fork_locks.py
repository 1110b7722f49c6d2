"""Every lock blockmap holds survives ``fork()``: a child forked while a
thread of its parent holds one never waits for that thread (which does not
exist in the child).

The locks are held for certain at the fork: the main thread runs a long
operation that holds one, a SIGALRM handler (run by that operation while it
checks for signals, the lock held) lets another thread fork and waits for
the fork; the child uses the same object, in a fresh interpreter's
subprocess under a timeout.
"""

import sys
import textwrap

import pytest

from helpers.child import run_python

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="fork of Linux processes")

PRELUDE = """
import os, signal, sys, threading
import numpy as np
import blockmap
from blockmap import Labels, TensorBlock, TensorMap

folder = sys.argv[1]


def zeros_map(rows):
    values = np.zeros((rows, 1))
    block = TensorBlock(values, Labels.range("s", rows), [], Labels.range("p", 1))
    return TensorMap(Labels.range("k", 1), [block])


def fork_while_held(hold, in_child):
    # run `hold()` (a long operation holding the lock) on the main thread;
    # at its first signal check, another thread forks; the child runs
    # `in_child()` and reports through its exit status
    forked = threading.Event()
    pids = []

    def forker():
        forked.wait_for_handler.wait()
        pid = os.fork()
        if pid == 0:
            try:
                ok = in_child()
            except BaseException as error:  # noqa: BLE001
                print("child:", repr(error), file=sys.stderr)
                ok = False
            os._exit(0 if ok else 1)
        pids.append(pid)
        forked.set()

    forked.wait_for_handler = threading.Event()

    def handler(signum, frame):
        if not pids:
            forked.wait_for_handler.set()
            forked.wait()

    signal.signal(signal.SIGALRM, handler)
    thread = threading.Thread(target=forker)
    thread.start()
    signal.setitimer(signal.ITIMER_REAL, 0.001)
    hold()
    if not pids:
        # the operation ended before its first check: fork now (not held)
        forked.wait_for_handler.set()
        thread.join()
        raise SystemExit("the lock was not held at the fork; make the operation longer")
    thread.join()
    _, status = os.waitpid(pids[0], 0)
    return os.waitstatus_to_exitcode(status)
"""


def _run(tmp_path, code):
    result = run_python(PRELUDE + textwrap.dedent(code), tmp_path)
    return result.stdout.split()


SHARING = """
big = zeros_map(1 << 25)  # 256 MiB: sharing it checks for signals


def in_child():
    # the sharing lock of `big` was held by the parent's main thread
    big.share_memory()
    return big.is_shared() and float(big.block(0).values[-1, 0]) == 0.0


print(fork_while_held(big.share_memory, in_child), big.is_shared())
"""


def test_a_child_shares_a_map_its_parent_was_sharing(tmp_path):
    assert _run(tmp_path, SHARING) == ["0", "True"]


WRITER = """
big = zeros_map(1 << 25)
writer = blockmap.DatasetWriter(os.path.join(folder, "data.mtsd"))
writer.write(zeros_map(4))


def in_child():
    # the writer's lock was held by the parent's main thread, writing
    return len(writer) >= 1 and "DatasetWriter" in repr(writer)


print(fork_while_held(lambda: writer.write(big), in_child), len(writer))
writer.close()
"""


def test_a_child_uses_a_dataset_writer_its_parent_was_writing_with(tmp_path):
    assert _run(tmp_path, WRITER) == ["0", "2"]


OPENED = """
from blockmap import dataset

# the lock of the datasets opened from references, held by another thread
held, release = threading.Event(), threading.Event()


def holder():
    with dataset._opened_lock:
        held.set()
        release.wait()


thread = threading.Thread(target=holder)
thread.start()
held.wait()
pid = os.fork()
if pid == 0:
    ok = dataset._opened_lock.acquire(timeout=30)
    os._exit(0 if ok else 1)
release.set()
thread.join()
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


def test_the_python_lock_of_opened_datasets_is_new_in_a_child(tmp_path):
    assert _run(tmp_path, OPENED) == ["0"]
