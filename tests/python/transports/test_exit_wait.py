"""The exit wait of a process that sent descriptors (blockmap._reduction)
waits for blockmap's descriptors only: torch's shared tensors, which go
through the same multiprocessing resource sharer, do not hold a process
at its exit (a DataLoader worker whose prefetched batches are dropped
would wait the full EXIT_WAIT_SECONDS otherwise)."""

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import torch
    from multiprocessing.reduction import ForkingPickler
    from multiprocessing import resource_sharer

    import blockmap
    from blockmap import _reduction

    # a torch tensor's storage, sent with DupFd through the resource sharer
    message = ForkingPickler.dumps(torch.zeros(1000))
    torch_pending = len(resource_sharer._resource_sharer._cache)
    print(torch_pending, _reduction._descriptors_pending())

    labels = blockmap.Labels(["_"], np.zeros((1, 1), dtype=np.int32))
    properties = blockmap.Labels.range("p", 100000)
    block = blockmap.TensorBlock(np.zeros((1, 100000)), labels, [], properties)
    tensor = blockmap.TensorMap(labels, [block]).share_memory()
    message = ForkingPickler.dumps(tensor)
    print(len(resource_sharer._resource_sharer._cache), _reduction._descriptors_pending())
    received = ForkingPickler.loads(message)
    print(len(resource_sharer._resource_sharer._cache), _reduction._descriptors_pending())
    """
)


def test_only_blockmaps_descriptors_are_waited_for():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.split() for line in done.stdout.splitlines()]
    # torch's descriptor is held by the sharer, and not blockmap's to wait for
    assert int(lines[0][0]) >= 1 and lines[0][1] == "False"
    # blockmap's is: pending until the receiver fetches it
    assert int(lines[1][0]) > int(lines[0][0]) and lines[1][1] == "True"
    assert int(lines[2][0]) == int(lines[0][0]) and lines[2][1] == "False"
