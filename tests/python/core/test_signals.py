"""Signals: Ctrl-C during long operations always surfaces, and signal handlers
may call blockmap while a long operation checks for signals.

Each test runs in a fresh interpreter under a timeout, so that a panic, a
deadlock or a lost signal fails the test instead of hanging the suite.
"""

import sys
import textwrap

import pytest

from helpers.child import run_python

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="signals of Linux processes")

PRELUDE = """
import os, random, signal, sys, threading, time
import numpy as np
import blockmap
from blockmap import Labels, TensorBlock, TensorMap

folder = sys.argv[1]
# Python turns SIGINT into KeyboardInterrupt only when it was not ignored at
# start; a suite started in the background of a non-interactive shell
# inherits it ignored: what is tested here is blockmap, so Python's own
# handler is put back
signal.signal(signal.SIGINT, signal.default_int_handler)


def zeros_map(rows):
    # zero pages: nothing resident until written
    values = np.zeros((rows, 1))
    block = TensorBlock(values, Labels.range("s", rows), [], Labels.range("p", 1))
    return TensorMap(Labels.range("k", 1), [block])


def small_map(i=0):
    values = np.full((4, 3), float(i))
    block = TensorBlock(values, Labels.range("s", 4), [], Labels.range("p", 3))
    return TensorMap(Labels.range("k", 1), [block])
"""


def _run(tmp_path, code, timeout=120):
    result = run_python(PRELUDE + textwrap.dedent(code), tmp_path, timeout=timeout)
    assert "panicked" not in result.stderr, result.stderr
    return result.stdout.split()


CTRL_C = """
big = zeros_map(1 << 24)  # 128 MiB
path = os.path.join(folder, "big.mts")
start = time.perf_counter()
blockmap.save(path, big)
duration = time.perf_counter() - start
os.unlink(path)
rng = random.Random(5)
outcomes = []
for run in range(12):
    # SIGINT from another thread at any moment of the save (or just after)
    killer = threading.Timer(rng.uniform(0, duration), os.kill, (os.getpid(), signal.SIGINT))
    saved = False
    try:
        killer.start()
        blockmap.save(path, big)
        saved = True
        killer.join()
        time.sleep(5)  # the signal was sent: Python raises it here at the latest
        outcomes.append("swallowed")
    except KeyboardInterrupt:
        outcomes.append("interrupted")
    killer.join()
    left = os.listdir(folder)
    assert left in ([], ["big.mts"]), left
    if left:
        # the save was done when the signal came: the file is whole
        assert blockmap.load(path, mmap=True) == big
        os.unlink(path)
    else:
        assert not saved
print(*outcomes)
"""


def test_ctrl_c_during_saves_always_surfaces(tmp_path):
    outcomes = _run(tmp_path, CTRL_C)
    assert outcomes == ["interrupted"] * 12


HANDLER = """
big = zeros_map(1 << 25)  # 256 MiB
small = small_map(1)
calls = []


def handler(signum, frame):
    # blockmap from a signal handler while a long operation checks for
    # signals on this thread: save_buffer, share_memory (of another map
    # and of the one being shared), save, load
    data = blockmap.save_buffer(small)
    assert blockmap.load_buffer(data) == small
    assert small_map(2).share_memory().is_shared()
    blockmap.save(os.path.join(folder, "small.mts"), small)
    calls.append(len(data))
    # again in 5 ms (one shot: a handler still running is not re-entered)
    signal.setitimer(signal.ITIMER_REAL, 0.005)


signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.005)
try:
    blockmap.save(os.path.join(folder, "big.mts"), big)
    saving = len(calls)
    shared = big.copy(deep=False)
    signal.signal(signal.SIGALRM, lambda *args: (shared.share_memory(), handler(*args)))
    shared.share_memory()
finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
print(saving, len(calls) - saving)
assert shared.is_shared()
assert blockmap.load(os.path.join(folder, "big.mts"), mmap=True) == big


# a handler that raises after calling in: its exception stops the save
def raising(signum, frame):
    blockmap.save_buffer(small)
    raise KeyboardInterrupt


signal.signal(signal.SIGALRM, raising)
os.unlink(os.path.join(folder, "big.mts"))
signal.setitimer(signal.ITIMER_REAL, 0.01)
try:
    blockmap.save(os.path.join(folder, "big.mts"), big)
    print("finished")
except KeyboardInterrupt:
    print("interrupted")
print(sorted(os.listdir(folder)))
"""


def test_signal_handlers_may_call_blockmap_during_long_operations(tmp_path):
    during_save, during_share, outcome, left = _run(tmp_path, HANDLER)
    assert int(during_save) > 0 and int(during_share) >= 0
    assert outcome == "interrupted"
    assert left == "['small.mts']"
