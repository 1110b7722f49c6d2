"""Automatic sharing under a real descriptor limit (``RLIMIT_NOFILE``).

Each test runs in a fresh interpreter whose soft limit is lowered (256 or
less, so that a few hundred small maps reach it), under a timeout, so that
a regression fails instead of hanging: ``Pool.imap`` and DataLoader workers
deliver more maps above the auto-share threshold than the receiver has
descriptors, all with their data; a received segment keeps its descriptor
only within a budget (a quarter of the limit) and closes it with its map; a
sender short of descriptors sends the data instead; a receiver that cannot
receive a descriptor raises ``BlockMapIOError``.
"""

import os
import sys
import textwrap

import pytest

from helpers import TESTS_DIR
from helpers.child import environment, run_python

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="memfd shared memory is Linux only")

PRELUDE = """
import gc, os, resource, sys
import multiprocessing as mp
import numpy as np
import blockmap
from blockmap import Labels, TensorBlock, TensorMap
from helpers.io_cases import open_segments

LIMIT = int(sys.argv[1])
resource.setrlimit(
    resource.RLIMIT_NOFILE, (LIMIT, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
)


def make(i):
    # 4 KiB of values, above the threshold the tests set (1 KiB)
    values = np.full((8, 64), float(i))
    block = TensorBlock(values, Labels.range("s", 8), [], Labels.range("p", 64))
    return TensorMap(Labels.range("k", 1), [block])


def small_threshold(*_):
    blockmap.set_auto_share_threshold(1024)


def check(maps):
    assert [float(t.block(0).values[7, 63]) for t in maps] == [float(i) for i in range(len(maps))]
"""


def _run(tmp_path, code, limit, *args):
    # a script file, so that spawned workers can import its functions
    result = run_python(
        PRELUDE + textwrap.dedent(code),
        limit,
        *args,
        script=tmp_path / "limited.py",
        timeout=180,
        env=environment(PYTHONPATH=os.pathsep.join([str(TESTS_DIR), *sys.path])),
    )
    return result.stdout.split()


POOL = """
if __name__ == "__main__":
    small_threshold()
    count = 3 * LIMIT
    with mp.get_context(sys.argv[2]).Pool(2, initializer=small_threshold) as pool:
        maps = list(pool.imap(make, range(count), chunksize=4))
    check(maps)
    shared = sum(t.is_shared() for t in maps)
    # zero-copy while the budget lasts, then the descriptor is closed
    # once mapped (the values still view the worker's segment)
    assert 0 < shared <= LIMIT // 4, shared
    assert open_segments() == shared
    del maps
    gc.collect()
    assert open_segments() == 0
    print(count, shared)
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pool_imap_of_more_maps_than_descriptors(tmp_path, method):
    count, shared = map(int, _run(tmp_path, POOL, 256, method))
    assert count == 768
    assert shared == 64


DATALOADER = """
import torch
from torch.utils.data import DataLoader
from helpers.loaders import MapDataset

if __name__ == "__main__":
    small_threshold()
    count = LIMIT + 64
    loader = DataLoader(
        MapDataset([make(i) for i in range(count)]),
        batch_size=1,
        collate_fn=lambda items: items[0],
        num_workers=2,
        multiprocessing_context="fork",
        worker_init_fn=small_threshold,
    )
    maps = list(loader)
    check(maps)
    shared = sum(t.is_shared() for t in maps)
    assert 0 < shared <= LIMIT // 4, shared
    print(count, shared)
"""


def test_dataloader_workers_deliver_more_maps_than_descriptors(tmp_path):
    pytest.importorskip("torch")
    count, shared = map(int, _run(tmp_path, DATALOADER, 128))
    assert (count, shared) == (192, 32)


SENDER = """
from multiprocessing.reduction import ForkingPickler
import pickle

small_threshold()
shared = make(3).share_memory()
as_handle = pickle.loads(ForkingPickler.dumps(shared))
assert as_handle.is_shared()
# use up the descriptors, all but a few
fillers = []
while len(os.listdir("/proc/self/fd")) < LIMIT - 8:
    fillers.append(os.open(os.devnull, os.O_RDONLY))
as_data = pickle.loads(ForkingPickler.dumps(shared))
auto = pickle.loads(ForkingPickler.dumps(make(4)))
for fd in fillers:
    os.close(fd)
assert not as_data.is_shared() and not auto.is_shared()
check([make(0), make(1), make(2), as_data, auto])
print("data")
"""


def test_a_sender_short_of_descriptors_sends_the_data(tmp_path):
    assert _run(tmp_path, SENDER, 128) == ["data"]


RECEIVER = """
from multiprocessing.reduction import ForkingPickler
import errno, pickle

shared = make(3).share_memory()
message = ForkingPickler.dumps(shared)
fillers = []
try:
    while True:
        fillers.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
try:
    pickle.loads(message)
except blockmap.BlockMapIOError as error:
    assert error.errno == errno.EMFILE, error
    assert "descriptors" in str(error)
    print("refused")
for fd in fillers:
    os.close(fd)
# the descriptor still waits in the sender: with descriptors free again,
# the same message is received
assert pickle.loads(message).is_shared()
"""


def test_a_receiver_without_descriptors_raises_a_blockmap_error(tmp_path):
    assert _run(tmp_path, RECEIVER, 64) == ["refused"]
