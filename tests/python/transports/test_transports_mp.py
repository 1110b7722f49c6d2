"""TensorMaps through multiprocessing: Pool, Queue, Pipe and
ProcessPoolExecutor with every start method, plain (the protocol 4 fallback,
a copy) and after ``share_memory()`` (metadata and a file descriptor: the
receiver maps the same memory)."""

import concurrent.futures
import gc
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import blockmap
from blockmap import Labels, TensorBlock, TensorMap
from helpers import TESTS_DIR, error_cases
from helpers.io_cases import assert_identical, make_map, zero_block_map
from helpers.memory import address_of, mappings
from helpers.pickle_cases import identity

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="memfd shared memory is Linux only")

METHODS = ["fork", "spawn", "forkserver"]
SEGMENT = "memfd:blockmap"


def _arrays(data):
    """Every numpy array a map or block exposes: values and labels, recursively."""
    if isinstance(data, TensorMap):
        yield data.keys.values
        for block in data.blocks():
            yield from _arrays(block)
        return
    yield data.values
    yield data.samples.values
    for component in data.components:
        yield component.values
    yield data.properties.values
    for parameter in data.gradients_list():
        yield from _arrays(data.gradient(parameter))


def _segment_ranges():
    """Address ranges of this process's mappings of blockmap segments."""
    return [(m.start, m.end) for m in mappings() if SEGMENT in m.path]


def _value_arrays(data):
    """The values (of blocks and gradients, recursively) of a map or block."""
    blocks = data.blocks() if isinstance(data, TensorMap) else [data]
    for block in blocks:
        yield block.values
        for parameter in block.gradients_list():
            yield from _value_arrays(block.gradient(parameter))


def _label_arrays(data):
    """The label values of a map or block (keys, samples, components,
    properties, recursively): everything but the values."""
    if isinstance(data, TensorMap):
        yield data.keys.values
        for block in data.blocks():
            yield from _label_arrays(block)
        return
    yield data.samples.values
    for component in data.components:
        yield component.values
    yield data.properties.values
    for parameter in data.gradients_list():
        yield from _label_arrays(data.gradient(parameter))


def _in_segment(array):
    if array.size == 0:
        return True
    address = address_of(array)
    return any(m.holds(address, array.nbytes) for m in mappings() if SEGMENT in m.path)


def _double_first(tensor):
    """In a worker: check the map is shared and writable, double its first
    block's values in place, and describe what was seen."""
    values = tensor.block(0).values
    values *= 2
    return tensor.is_shared(), bool(values.flags.writeable), float(values.sum())


# ------------------------------------------------------------ plain, copied


def _echo_queue(requests, answers):
    answers.put(requests.get())


def _echo_pipe(connection):
    connection.send(connection.recv())
    connection.close()


@pytest.mark.parametrize("method", METHODS)
def test_plain_maps_through_pool_queue_and_pipe(rng, method):
    context = multiprocessing.get_context(method)
    tensor = make_map(rng, info={"unit": "eV"})

    with context.Pool(1) as pool:
        assert_identical(pool.apply(identity, (tensor,)), tensor)

    requests, answers = context.Queue(), context.Queue()
    child = context.Process(target=_echo_queue, args=(requests, answers))
    child.start()
    requests.put(tensor)
    returned = answers.get(timeout=60)
    child.join(timeout=60)
    assert_identical(returned, tensor)

    ours, theirs = context.Pipe()
    child = context.Process(target=_echo_pipe, args=(theirs,))
    child.start()
    ours.send(tensor)
    returned_by_pipe = ours.recv()
    child.join(timeout=60)
    assert_identical(returned_by_pipe, tensor)

    # not shared: what came back is a copy
    for mine, copied in zip(_arrays(tensor), _arrays(returned), strict=True):
        assert not np.shares_memory(mine, copied)


@pytest.mark.parametrize("method", METHODS)
def test_process_pool_executor(rng, method):
    tensor = make_map(rng)
    context = multiprocessing.get_context(method)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as executor:
        assert_identical(executor.submit(identity, tensor).result(), tensor)
        shared = make_map(rng).share_memory()
        expected = shared.block(0).values * 2
        seen = executor.submit(_double_first, shared).result()
    assert seen[:2] == (True, True)
    np.testing.assert_array_equal(shared.block(0).values, expected)


@pytest.mark.parametrize("host", ["pool-fork", "pool-spawn", "executor-fork", "executor-spawn"])
def test_errors_raised_in_workers_reach_the_caller_whole(host):
    """Every blockmap error (each class built in Python, and the native
    module's) raised in a Pool or ProcessPoolExecutor worker is raised again
    in the caller: the same class, message, arguments, errno and filename."""
    kind, method = host.split("-")
    context = multiprocessing.get_context(method)
    if kind == "pool":
        pool = context.Pool(1)
        submit = lambda case: pool.apply_async(error_cases.raise_case, (case,)).get  # noqa: E731
    else:
        pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=context)
        submit = lambda case: pool.submit(error_cases.raise_case, case).result  # noqa: E731
    with pool:
        results = {case: submit(case) for case in error_cases.CASES}
        for case, result in results.items():
            with pytest.raises(blockmap.BlockMapError) as error:
                result()
            error_cases.assert_same_error(error.value, error_cases.caught(case))


# ------------------------------------------------------------ shared memory


def test_share_memory_moves_every_array_into_one_segment(rng):
    tensor = make_map(rng, info={"unit": "eV"})
    original = [array.copy() for array in _arrays(tensor)]
    assert not tensor.is_shared()
    assert tensor.share_memory() is tensor
    assert tensor.is_shared()
    for array, before in zip(_arrays(tensor), original, strict=True):
        np.testing.assert_array_equal(array, before)
    for array in _value_arrays(tensor):
        assert _in_segment(array), "values outside the shared segment"
        assert array.ctypes.data % 64 == 0
    # labels stay in memory the map owns: another process could write to a
    # segment, and labels own what they validated
    for array in _label_arrays(tensor):
        assert not _in_segment(array) or array.size == 0
    assert tensor.info() == {"unit": "eV"}
    assert tensor.block(0).values.flags.writeable
    assert not tensor.keys.values.flags.writeable
    # a second call changes nothing
    address = tensor.block(0).values.ctypes.data
    tensor.share_memory()
    assert tensor.block(0).values.ctypes.data == address


def test_share_memory_of_blocks_and_edge_cases(rng):
    tensor = make_map(rng)
    block = tensor.block(1)
    block.share_memory()
    assert block.is_shared()
    assert not tensor.is_shared(), "sharing a block taken from a map leaves the map alone"
    assert all(_in_segment(array) for array in _value_arrays(block))

    empty = TensorMap(
        Labels(["k"], np.array([[0]], dtype=np.int32)),
        [TensorBlock(np.zeros((0, 2)), Labels.empty(["s"]), [], Labels.range("p", 2))],
    )
    assert empty.share_memory().is_shared()
    assert zero_block_map().share_memory().is_shared()


def test_read_only_data_stays_read_only(rng, tmp_path):
    tensor = make_map(rng)
    loaded = blockmap.load_buffer(bytes(tensor.save_buffer()))
    assert not loaded.block(0).values.flags.writeable
    loaded.share_memory()
    assert not loaded.block(0).values.flags.writeable
    blockmap.save(tmp_path / "data.mts", tensor)
    mapped = blockmap.load(tmp_path / "data.mts", mmap=True).share_memory()
    assert mapped.is_shared()
    assert_identical(mapped, tensor)


@pytest.fixture
def no_auto_share():
    """Maps pickled through multiprocessing as they are (no automatic
    sharing of large ones), for the tests of the plain path."""
    before = blockmap.get_auto_share_threshold()
    blockmap.set_auto_share_threshold(None)
    yield
    blockmap.set_auto_share_threshold(before)


def test_shared_maps_pickle_to_metadata_only(rng, no_auto_share):
    tensor = make_map(rng, n_samples=(2000, 3000))
    plain = ForkingPickler.dumps(tensor)
    assert len(plain) > tensor.nbytes
    tensor.share_memory()
    shared = ForkingPickler.dumps(tensor)
    # metadata and the label values (which travel with the message), not
    # the values
    label_bytes = sum(array.nbytes for array in _label_arrays(tensor))
    assert len(shared) < 8_000 + label_bytes, len(shared)
    assert len(shared) < sum(array.nbytes for array in _value_arrays(tensor)) / 10
    # receiving it (here, in the same process) maps the same memory again;
    # until then the sender's resource sharer holds a duplicate descriptor
    received = pickle.loads(shared)
    assert_identical(received, tensor)
    assert received.is_shared()
    received.block(0).values[0, 0, 0] = 123.0
    assert tensor.block(0).values[0, 0, 0] == 123.0
    # plain pickle is unchanged: copies, as before
    assert_identical(pickle.loads(pickle.dumps(tensor, protocol=4)), tensor)


def _child_of_queue(requests, answers, done):
    tensor = requests.get(timeout=60)
    answers.put(_double_first(tensor))
    answers.put(tensor.block(1).values.ctypes.data)
    # send it back: the parent maps the same memory once more
    answers.put(tensor)
    done.wait(60)


@pytest.mark.parametrize("method", METHODS)
def test_shared_map_through_a_queue_is_not_copied(rng, method):
    context = multiprocessing.get_context(method)
    tensor = make_map(rng).share_memory()
    expected = tensor.block(0).values * 2
    requests, answers, done = context.Queue(), context.Queue(), context.Event()
    child = context.Process(target=_child_of_queue, args=(requests, answers, done))
    child.start()
    try:
        requests.put(tensor)
        is_shared, writable, total = answers.get(timeout=60)
        assert (is_shared, writable) == (True, True)
        assert total == pytest.approx(expected.sum())
        # the child's write shows in the parent
        np.testing.assert_array_equal(tensor.block(0).values, expected)
        answers.get(timeout=60)
        returned = answers.get(timeout=60)
    finally:
        done.set()
        child.join(timeout=60)
    assert returned.is_shared()
    assert_identical(returned, tensor)
    # a second mapping of the same memory: writes go both ways
    returned.block(2).values[...] = -1
    assert (tensor.block(2).values == -1).all()


def _child_of_pipe(connection):
    tensor = connection.recv()
    connection.send(_double_first(tensor))
    connection.close()


@pytest.mark.parametrize("method", METHODS)
def test_shared_map_through_pool_and_pipe(rng, method):
    context = multiprocessing.get_context(method)
    tensor = make_map(rng).share_memory()
    expected = tensor.block(0).values * 2
    with context.Pool(1) as pool:
        assert pool.apply(_double_first, (tensor,))[:2] == (True, True)
    np.testing.assert_array_equal(tensor.block(0).values, expected)

    ours, theirs = context.Pipe()
    child = context.Process(target=_child_of_pipe, args=(theirs,))
    child.start()
    ours.send(tensor)
    assert ours.recv()[:2] == (True, True)
    child.join(timeout=60)
    np.testing.assert_array_equal(tensor.block(0).values, expected * 2)


def test_shared_block_and_labels_through_a_queue(rng):
    context = multiprocessing.get_context("spawn")
    tensor = make_map(rng).share_memory()
    block = tensor.block(0)
    with context.Pool(1) as pool:
        assert_identical(pool.apply(identity, (block,)), block)
        assert pool.apply(identity, (tensor.keys,)) == tensor.keys


LEAK_CHECK = r"""
import gc, multiprocessing, os, signal, sys
import numpy as np
sys.path[:0] = sys.argv[1:3]
from test_transports_mp import _segment_ranges, _hold_until_killed
from helpers.io_cases import open_segments
from helpers.io_cases import make_map

def main():
    context = multiprocessing.get_context(sys.argv[3])
    tensor = make_map(np.random.default_rng(0)).share_memory()
    requests, answers = context.Queue(), context.Queue()
    child = context.Process(target=_hold_until_killed, args=(requests, answers))
    child.start()
    requests.put(tensor)
    assert answers.get(timeout=60) == "mapped"
    with open(f"/proc/{child.pid}/maps") as maps:
        assert "memfd:blockmap" in maps.read(), "the child maps the segment"
    os.kill(child.pid, signal.SIGKILL)
    child.join(timeout=60)
    assert child.exitcode == -signal.SIGKILL
    assert open_segments() == 1 and list(_segment_ranges())
    del tensor
    gc.collect()
    assert open_segments() == 0, "a segment descriptor is still open"
    assert not list(_segment_ranges()), "a segment is still mapped"
    print("clean")

if __name__ == "__main__":
    main()
"""


def _hold_until_killed(requests, answers):
    tensor = requests.get(timeout=60)
    assert tensor.is_shared()
    answers.put("mapped")
    signal.pause()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_no_segment_outlives_its_maps_even_when_a_worker_is_killed(tmp_path, method):
    script = tmp_path / "leak_check.py"
    script.write_text(LEAK_CHECK)
    here = os.path.dirname(os.path.abspath(__file__))
    result = subprocess.run(
        [sys.executable, str(script), here, str(TESTS_DIR), method],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("clean")


# ------------------------------------------------------------ hostile input


def _is_open(fd):
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_attach_refuses_bad_descriptors_and_locations(rng, tmp_path):
    """``_attach_shared`` owns each descriptor it is given exactly once, from
    when its whole argument list has been checked, and closes each (once) on
    every error path; every refusal is a blockmap error."""
    attach = blockmap._blockmap._attach_shared
    tensor = make_map(rng).share_memory()
    header, fds, places, labels = blockmap._blockmap._shared_parts(tensor)
    assert len(fds) == 1
    values = next(i for i, place in enumerate(places) if place and place[0] >= 0)

    def attempt(error, *, header=header, extra=(), places=places, labels=labels, match=None):
        fd = os.dup(fds[0])
        with pytest.raises(error, match=match):
            attach(header, [fd, *extra], places, labels)
        assert not _is_open(fd), "the descriptor given is closed"
        return fd

    def with_place(place):
        return [*places[:values], place, *places[values + 1 :]]

    segment, offset, length, writable = places[values]
    attempt(blockmap.ValidationError, extra=[-1], match="invalid file descriptor -1")
    attempt(blockmap.ValidationError, extra=[2**40], match="invalid file descriptor")
    attempt(blockmap.ValidationError, extra=["3"], match="must be an int")
    attempt(blockmap.FormatError, places=with_place((segment, 2**62, length, True)))
    attempt(blockmap.FormatError, places=with_place((segment, 2**64, length, True)))
    attempt(blockmap.FormatError, places=with_place((segment, -8, length, True)))
    attempt(blockmap.FormatError, places=with_place((segment, offset)))
    attempt(blockmap.FormatError, places=with_place((5, offset, length, writable)))
    attempt(blockmap.FormatError, places=with_place((-2, offset, length, writable)))
    attempt(blockmap.FormatError, places=places[1:])
    attempt(blockmap.FormatError, places=with_place((segment, offset, length + 8, True)))
    attempt(blockmap.FormatError, places=42)
    attempt(blockmap.FormatError, header=b"{")
    attempt(blockmap.BlockMapTypeError, header="a str header")
    attempt(blockmap.BlockMapTypeError, labels=None)
    attempt(blockmap.BlockMapError, labels=labels[:8])
    attempt(blockmap.BlockMapError, labels=bytes(len(labels)))

    # a descriptor given twice is owned, and closed, once: a file that
    # reuses its number afterwards is left alone
    fd = os.dup(fds[0])
    with pytest.raises(blockmap.ValidationError, match="given twice"):
        attach(header, [fd, fd], places, labels)
    assert not _is_open(fd)
    reused = os.open(tmp_path / "bystander", os.O_CREAT | os.O_RDWR)
    gc.collect()
    assert _is_open(reused), "blockmap closed an unrelated file"
    os.close(reused)

    # a closed descriptor is refused; the others are closed all the same
    closed = next(fd for fd in range(900, 1000) if not _is_open(fd))
    attempt(blockmap.ValidationError, extra=[closed], match="not open")

    # fds that are not a list: nothing was given, nothing is closed
    with pytest.raises(blockmap.BlockMapTypeError):
        attach(header, 7, places, labels)

    # a regular file is not a segment: refused, and the descriptor closed
    path = tmp_path / "not-a-segment"
    path.write_bytes(b"\0" * 4096)
    fd = os.open(path, os.O_RDWR)
    with pytest.raises(blockmap.ValidationError, match="not a blockmap shared-memory segment"):
        attach(header, [fd], places, labels)
    assert not _is_open(fd)

    # the genuine parts still work
    assert_identical(attach(header, [os.dup(fds[0])], places, labels), tensor)
    assert blockmap._blockmap._shared_parts(make_map(rng)) is None
    gc.collect()


# ------------------------------------------------- shared automatically


def _big_map(rng):
    tensor = make_map(rng, n_samples=(2000, 3000))
    assert tensor.nbytes > 256 * 1024  # the default threshold
    return tensor


def test_large_maps_travel_through_shared_memory_by_themselves(rng):
    tensor = _big_map(rng)
    message = ForkingPickler.dumps(tensor)
    # the bytes a queue or pipe carries: metadata and labels, not the values
    label_bytes = sum(array.nbytes for array in _label_arrays(tensor))
    value_bytes = sum(array.nbytes for array in _value_arrays(tensor))
    assert len(message) < 8_000 + label_bytes, len(message)
    assert len(message) < value_bytes / 10
    # the sender's map is left as it was: not shared, its arrays its own
    assert not tensor.is_shared()
    assert not any(_in_segment(array) for array in _value_arrays(tensor) if array.size)
    received = pickle.loads(message)
    assert received.is_shared()
    assert_identical(received, tensor)
    assert all(_in_segment(array) for array in _value_arrays(received))
    # a copy made once for sending: the sender does not see the receiver's writes
    received.block(0).values[...] = -7.0
    assert not (tensor.block(0).values == -7.0).any()
    # blocks too; labels always travel in the message
    block = tensor.block(1)
    block_message = ForkingPickler.dumps(block)
    assert len(block_message) < 8_000 + sum(a.nbytes for a in _label_arrays(block))
    assert pickle.loads(block_message).is_shared()
    assert pickle.loads(ForkingPickler.dumps(tensor.keys)) is not tensor.keys


def test_small_maps_are_pickled_as_they_are(rng):
    tensor = make_map(rng)
    assert tensor.nbytes < blockmap.get_auto_share_threshold()
    message = ForkingPickler.dumps(tensor)
    received = pickle.loads(message)
    assert not received.is_shared()
    assert_identical(received, tensor)
    assert len(message) > tensor.nbytes


def test_the_threshold_can_be_set(rng, no_auto_share):
    small = make_map(rng)
    big = _big_map(rng)
    assert blockmap.get_auto_share_threshold() is None
    assert not pickle.loads(ForkingPickler.dumps(big)).is_shared()
    blockmap.set_auto_share_threshold(0)
    assert pickle.loads(ForkingPickler.dumps(small)).is_shared()
    blockmap.set_auto_share_threshold(small.nbytes + 1)
    assert not pickle.loads(ForkingPickler.dumps(small)).is_shared()
    for bad, error in [(-1, blockmap.ValidationError), (1.5, blockmap.BlockMapTypeError)]:
        with pytest.raises(error):
            blockmap.set_auto_share_threshold(bad)
    with pytest.raises(blockmap.BlockMapTypeError):
        blockmap.set_auto_share_threshold(True)
    assert blockmap.get_auto_share_threshold() == small.nbytes + 1


def _describe(tensor):
    """In a worker: whether the map came shared, and its values' sum."""
    return tensor.is_shared(), float(sum(block.values.sum() for block in tensor))


def _put_big_map(answers, seed):
    tensor = make_map(np.random.default_rng(seed), n_samples=(2000, 3000))
    answers.put((float(sum(block.values.sum() for block in tensor)), tensor))


@pytest.mark.parametrize("method", METHODS)
def test_large_maps_cross_queues_pools_and_pipes_shared(rng, method):
    context = multiprocessing.get_context(method)
    tensor = _big_map(rng)
    expected = float(sum(block.values.sum() for block in tensor))
    with context.Pool(1) as pool:
        # to the worker and back: shared both ways
        assert pool.apply(_describe, (tensor,)) == (True, pytest.approx(expected))
        returned = pool.apply(identity, (tensor,))
    assert returned.is_shared()
    assert_identical(returned, tensor)
    # a map made in the child reaches the parent in shared memory
    answers = context.Queue()
    child = context.Process(target=_put_big_map, args=(answers, 3))
    child.start()
    total, made = answers.get(timeout=60)
    child.join(timeout=60)
    assert made.is_shared()
    assert float(sum(block.values.sum() for block in made)) == pytest.approx(total)
    ours, theirs = context.Pipe()
    child = context.Process(target=_echo_pipe, args=(theirs,))
    child.start()
    ours.send(tensor)
    echoed = ours.recv()
    child.join(timeout=60)
    assert echoed.is_shared()
    assert_identical(echoed, tensor)


EXIT_WAIT_CHECK = """
import atexit, pickle, sys
import multiprocessing.util as util
from multiprocessing.reduction import ForkingPickler
import numpy as np
sys.path[:0] = [sys.argv[1]]
from helpers.io_cases import make_map

def waits():
    from blockmap import _reduction
    return sum(
        f._callback is _reduction._wait_for_pending_descriptors
        for f in util._finalizer_registry.values()
    )

before = (len(util._finalizer_registry), atexit._ncallbacks())
import blockmap
print("import", len(util._finalizer_registry) - before[0], atexit._ncallbacks() - before[1])
tensor = make_map(np.random.default_rng(0), n_samples=(2000, 3000))
ForkingPickler.dumps(make_map(np.random.default_rng(0)))
print("small", waits())
first, second = ForkingPickler.dumps(tensor), ForkingPickler.dumps(tensor)
print("sent", waits(), pickle.loads(first).is_shared(), pickle.loads(second).is_shared())
# a send while the exit finalizers run: the wait may have run already, so
# the data goes in the message
from blockmap import _reduction
_reduction._wait_for_pending_descriptors()
util._exiting = True
late = ForkingPickler.dumps(tensor)
print("late", len(late) > tensor.nbytes, pickle.loads(late).is_shared())
# outside a DataLoader worker join does not share, and asks torch nothing
flat = make_map(np.random.default_rng(0), n_samples=(2000, 3000), nested=False)
joined = blockmap.join([flat, flat], axis="samples", add_dimension="t")
print("join", joined.is_shared(), "torch" in sys.modules)
"""


def test_the_exit_wait_is_registered_by_the_first_send(tmp_path):
    # importing blockmap registers no exit finalizer and no atexit
    # callback; the first send of descriptors registers the wait, once
    # (in a fresh interpreter: this one has sent, and imported torch)
    script = tmp_path / "exit_wait.py"
    script.write_text(EXIT_WAIT_CHECK)
    result = subprocess.run(
        [sys.executable, str(script), str(TESTS_DIR)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:5] == [
        "import 0 0",
        "small 0",
        "sent 1 True True",
        "late True False",
        "join False False",
    ]


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_process_arguments_are_pickled_as_they_are(rng, method):
    # a process being started gets its arguments' descriptors at start:
    # a temporary copy would be gone by then, so large maps given as
    # arguments are pickled (share them first to send descriptors)
    context = multiprocessing.get_context(method)
    tensor = _big_map(rng)
    answers = context.Queue()
    child = context.Process(target=_report_shared, args=(tensor, answers))
    child.start()
    assert answers.get(timeout=60) is False
    child.join(timeout=60)
    shared = tensor.copy().share_memory()
    child = context.Process(target=_report_shared, args=(shared, answers))
    child.start()
    assert answers.get(timeout=60) is True
    child.join(timeout=60)


def _report_shared(tensor, answers):
    answers.put(tensor.is_shared())


# ------------------------------------------------- join into shared memory


def _pieces(count=4):
    from bench.batches import w_pieces
    from bench.workload import build_blockmap, make_arrays

    arrays = make_arrays(n_keys=3, n_samples=count * 48, n_grad_samples=count * 6)
    return w_pieces(build_blockmap(arrays), count)


def test_join_can_write_straight_into_one_shared_segment():
    pieces = _pieces()
    expected = blockmap.join(pieces, axis="samples")
    assert not expected.is_shared()
    joined = blockmap.join(pieces, axis="samples", shared=True)
    assert joined.is_shared()
    assert_identical(joined, expected)
    # one segment holds every array: sending it sends one descriptor
    header, fds, places, labels = blockmap._blockmap._shared_parts(joined)
    assert len(fds) == 1
    assert all(_in_segment(array) for array in _value_arrays(joined))
    # along properties (the gradients' samples are a union, which the
    # inputs' sizes do not bound) the result is shared afterwards
    twice = [pieces[0], pieces[0].copy()]
    for shared in (True, False):
        result = blockmap.join(twice, axis="properties", add_dimension="half", shared=shared)
        assert result.is_shared() is shared
        assert result == blockmap.join(twice, axis="properties", add_dimension="half")
    assert not blockmap.join(pieces, axis="samples", shared=False).is_shared()
    # outside a DataLoader worker the default is not to share
    assert not blockmap.join(pieces, axis="samples").is_shared()


def test_joins_in_a_loop_over_freed_memory_give_whole_results():
    # a join may write into memory an earlier result freed (warm pages, as
    # glibc gives torch.cat); which addresses come back is the allocator's
    # choice, so what is checked is that none a live map holds is handed
    # out, and that nothing of a freed result shows through
    pieces = _pieces()
    kept = blockmap.join(pieces, axis="samples")
    reference = blockmap.join(pieces, axis="samples")
    assert all(array.nbytes >= 64 * 1024 for array in _value_arrays(kept))
    for _ in range(3):
        result = blockmap.join(pieces, axis="samples")
        assert result == reference
        for ours, live in zip(_value_arrays(result), _value_arrays(kept), strict=True):
            assert not np.shares_memory(ours, live)
        for array in _value_arrays(result):
            array[...] = -1.0
        del result
        gc.collect()
    assert kept == reference
