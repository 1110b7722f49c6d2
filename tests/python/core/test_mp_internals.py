"""blockmap._mp_internals, the one module that reads CPython's private
multiprocessing internals: the check of the running Python at import, the
probes on this Python's multiprocessing (the core tier runs on each Python
a wheel is built for: 3.11, 3.12 and 3.13), and the fallback on a Python
it was not tested on (every map sent by value; a shared one warns once).
Each probe runs in a fresh interpreter: queues and descriptors left over by
other tests would answer for them."""

import subprocess
import sys
import textwrap
from multiprocessing import queues, resource_sharer
from pathlib import Path

import pytest

from blockmap import _mp_internals


def _run(script):
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_the_running_python_is_checked_at_import():
    tested = sys.version_info[:2] in _mp_internals.TESTED
    assert _mp_internals.SUPPORTED is tested
    assert (_mp_internals.REASON is None) is tested
    assert _mp_internals.check(sys.version_info[:2]) == _mp_internals.REASON
    assert _mp_internals.TESTED == ((3, 11), (3, 12), (3, 13))


@pytest.mark.parametrize("version", [(3, 10), (3, 14), (4, 0)])
def test_another_python_is_named_with_the_tested_ones(version):
    reason = _mp_internals.check(version)
    assert reason is not None
    assert f"Python {version[0]}.{version[1]}" in reason
    assert "CPython 3.11, 3.12, 3.13" in reason


def test_a_missing_internal_is_named(monkeypatch):
    monkeypatch.delattr(queues.Queue, "_finalize_close")
    reason = _mp_internals.check((3, 12))
    assert reason is not None and "Queue._finalize_close" in reason
    monkeypatch.undo()
    monkeypatch.delattr(resource_sharer._resource_sharer, "_cache")
    reason = _mp_internals.check((3, 12))
    assert reason is not None and "_resource_sharer._cache" in reason
    monkeypatch.undo()
    assert _mp_internals.check((3, 12)) is None


PROBES = """
    import multiprocessing, os, time
    from multiprocessing.reduction import DupFd
    from blockmap import _mp_internals as mp


    class Probe:
        # pickled while a process is started, unpickled while it is set up
        def __reduce__(self):
            return (Probe.rebuilt, (mp.spawning(),))

        @staticmethod
        def rebuilt(spawning):
            return (spawning, mp.inheriting())


    def report(value, results):
        results.put(value)


    def main():
        assert mp.SUPPORTED, mp.REASON
        print("outside", mp.spawning(), mp.inheriting(), mp.exiting())

        # a queue whose feeder thread is blocked on a full pipe still holds
        # the second message; once both are read, it holds nothing
        queue = multiprocessing.get_context("fork").Queue()
        queue.put(b"x" * (1 << 20))
        queue.put(b"y" * (1 << 20))
        sending = mp.queues_still_sending()
        queue.get(timeout=60), queue.get(timeout=60)
        deadline = time.monotonic() + 60
        while mp.queues_still_sending() and time.monotonic() < deadline:
            time.sleep(0.01)
        print("queue", sending, mp.queues_still_sending())
        queue.close()
        queue.join_thread()

        # a descriptor the resource sharer holds until it is fetched
        fd = os.open(os.devnull, os.O_RDONLY)
        handle = DupFd(fd)
        key = mp.sharer_key(handle)
        keys = {key, "not a key"}
        held = mp.sharer_holds(keys)
        os.close(handle.detach())
        print("sharer", key is not None, held, mp.sharer_holds(keys), keys)
        os.close(fd)

        context = multiprocessing.get_context("spawn")
        results = context.Queue()
        child = context.Process(target=report, args=(Probe(), results))
        child.start()
        print("spawned", *results.get(timeout=120))
        child.join(120)

        # the hooks of a forked child, and the exit finalizers
        forked = []
        mp.after_fork(Probe, lambda owner: forked.append(owner is Probe))
        context = multiprocessing.get_context("fork")
        results = context.Queue()
        child = context.Process(target=lambda: report(forked, results))
        child.start()
        print("forked", results.get(timeout=120), forked)
        child.join(120)
        mp.at_exit(lambda: print("at exit", mp.exiting()), priority=100)


    if __name__ == "__main__":
        main()
"""


@pytest.mark.skipif(not _mp_internals.SUPPORTED, reason=str(_mp_internals.REASON))
def test_the_probes_read_this_pythons_multiprocessing(tmp_path):
    # a file, not -c: the spawned child imports the main module
    script = tmp_path / "probes.py"
    script.write_text(textwrap.dedent(PROBES))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "outside False False False",
        "queue True False",
        "sharer True True False set()",
        "spawned True True",
        "forked [True] []",
        "at exit True",
    ]


FALLBACK = """
    import collections, pickle, sys, warnings
    import multiprocessing
    import multiprocessing.util as util
    from multiprocessing.reduction import ForkingPickler
    import numpy as np

    # the check runs when blockmap is imported: import it as Python 3.14
    real = sys.version_info
    sys.version_info = collections.namedtuple(
        "version_info", "major minor micro releaselevel serial"
    )(3, 14, 0, "final", 0)
    try:
        import blockmap
        from blockmap import _mp_internals, _reduction
    finally:
        sys.version_info = real
    print(_mp_internals.SUPPORTED, "Python 3.14" in _mp_internals.REASON)

    def make():
        labels = blockmap.Labels(["s"], np.arange(10, dtype=np.int32).reshape(-1, 1))
        properties = blockmap.Labels.range("p", 10_000)
        block = blockmap.TensorBlock(np.ones((10, 10_000)), labels, [], properties)
        return blockmap.TensorMap(blockmap.Labels.single(), [block])

    # above the automatic-share threshold: the data goes in the message
    tensor = make()
    message = ForkingPickler.dumps(tensor)
    print("auto", len(message) > tensor.block(0).values.nbytes, pickle.loads(message).is_shared())

    # shared by the user: by value too, with one warning
    shared = make().share_memory()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = ForkingPickler.dumps(shared)
        ForkingPickler.dumps(shared)
    received = pickle.loads(first)
    warning = caught[0]
    print("shared", len(caught), warning.category.__name__, "Python 3.14" in str(warning.message))
    print("received", received.is_shared(), received == shared)
    registered = [
        f for f in util._finalizer_registry.values()
        if f._callback is _reduction._wait_for_pending_descriptors
    ]
    print("exit wait", len(registered))

    def send(queue):
        queue.put(make().share_memory())

    # a child puts a shared map on a queue and returns: it arrives as data
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=send, args=(queue,))
    child.start()
    got = queue.get(timeout=120)
    child.join(120)
    print("child", child.exitcode, got.is_shared(), got == make())
"""


def test_on_another_python_every_map_goes_by_value():
    lines = _run(FALLBACK)
    assert lines == [
        "False True",
        "auto True False",
        "shared 1 RuntimeWarning True",
        "received False True",
        "exit wait 0",
        "child 0 False True",
    ]


def test_this_module_is_the_only_one_reading_the_internals():
    # the internals _mp_internals' docstring lists appear in no other
    # module of the package
    package = Path(_mp_internals.__file__).parent
    private = [
        "_finalizer_registry",
        "_finalize_close",
        "_resource_sharer",
        "_exiting",
        "_inheriting",
        "get_spawning_popen",
        "register_after_fork",
        "util.Finalize",
    ]
    for path in package.rglob("*.py"):
        if path.name == "_mp_internals.py":
            continue
        text = path.read_text(encoding="utf-8")
        found = [name for name in private if name in text]
        assert not found, f"{path.relative_to(package)} reads {found}"
