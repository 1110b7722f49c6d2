"""TensorMaps, TensorBlocks and Labels through dask.distributed: the
serializers of ``blockmap.dask`` (registered on import), checked on their
own and against a real ``LocalCluster`` with two worker processes."""

import subprocess
import sys

import numpy as np
import pytest

import blockmap
from blockmap import TensorMap
from helpers import error_cases
from helpers.io_cases import assert_identical, make_map, zero_block_map
from helpers.pickle_cases import doubled

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

from distributed.protocol import deserialize, dumps, loads, serialize  # noqa: E402
from distributed.protocol.serialize import serialize_and_split  # noqa: E402


def describe(tensor):
    """What a worker sees: the serializer registered there, and the map."""
    from distributed.protocol import dask_serialize

    return (
        dask_serialize.dispatch(type(tensor)).__module__,
        tensor.is_shared(),
        bool(tensor.block(0).values.flags.writeable),
        float(tensor.block(0).values.sum()),
    )


def _values(data):
    if isinstance(data, TensorMap):
        return [block.values for block in data.blocks()]
    return [data.values]


# ------------------------------------------------------------ serializers


def test_registered_on_import_in_either_order():
    for first, second in (("blockmap", "distributed"), ("distributed", "blockmap")):
        code = (
            f"import {first}, {second}\n"
            "from distributed.protocol import dask_serialize\n"
            "print(dask_serialize.dispatch(blockmap.TensorMap).__module__)\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert result.stdout.strip() == "blockmap.dask"
    # importing blockmap alone does not import distributed
    code = "import sys, blockmap; print('distributed' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("protocol", [4, 5])
def test_arrays_are_out_of_band_frames_on_every_path(rng, protocol):
    """The scheduler's comms pickle with protocol 4: the blockmap serializer
    is used all the same, and each frame views the map's own memory."""
    tensor = make_map(rng, n_samples=(300, 500), info={"unit": "eV"})
    header, frames = serialize_and_split(tensor, context={"pickle-protocol": protocol})
    assert header["serializer"] == "dask"
    arrays = [array for array in _values(tensor)]
    framed = [np.frombuffer(frame, dtype=np.uint8) for frame in frames[1:]]
    for array in arrays:
        assert any(np.shares_memory(array, frame) for frame in framed)
    assert sum(len(frame) for frame in frames[:1]) < 10_000
    assert_identical(deserialize(header, frames), tensor)


def test_through_the_wire_format(rng):
    for data in (make_map(rng, info={"a": "b"}), make_map(rng).block(1), make_map(rng).keys):
        message = {"data": distributed.protocol.to_serialize(data)}
        frames = dumps(message, context={"pickle-protocol": 4})
        received = loads(frames)["data"]
        assert_identical(received, data)
    assert_identical(
        loads(dumps({"x": distributed.protocol.to_serialize(zero_block_map())}))["x"],
        zero_block_map(),
    )


def test_misaligned_and_read_only_frames(rng):
    tensor = make_map(rng)
    header, frames = serialize(tensor)
    shifted = []
    for frame in frames[1:]:
        storage = bytearray(len(frame) + 3)
        storage[3:] = frame
        shifted.append(memoryview(storage)[3:])
    received = deserialize(header, [frames[0], *shifted])
    assert_identical(received, tensor)
    assert received.block(0).values.flags.writeable
    # read-only frames for writable arrays are copied to stay writable
    read_only = [memoryview(bytes(frame)) for frame in frames[1:]]
    received = deserialize(header, [frames[0], *read_only])
    assert received.block(0).values.flags.writeable
    assert_identical(received, tensor)


def test_aligned_frames_are_viewed(rng):
    tensor = make_map(rng)
    header, frames = serialize(tensor)
    copies = [memoryview(bytearray(frame)) for frame in frames[1:]]
    assert all(np.asarray(copy).ctypes.data % 8 == 0 for copy in copies)
    received = deserialize(header, [frames[0], *copies])
    # wire order: the keys, then the first block's values
    assert np.shares_memory(received.block(0).values, np.asarray(copies[1]))


def test_crafted_headers_raise_blockmap_errors(rng):
    from blockmap.dask import deserialize as ours

    header, frames = serialize(make_map(rng))
    sub = header["sub-header"]
    with pytest.raises(blockmap.FormatError):
        ours({**sub, "writeable": sub["writeable"][1:]}, frames)
    with pytest.raises(blockmap.FormatError):
        ours({"version": 1}, frames)
    with pytest.raises(blockmap.FormatError):
        ours({**sub, "version": 99}, frames)
    with pytest.raises(blockmap.FormatError):
        ours(sub, [b"{not json", *frames[1:]])
    # whatever a crafted message holds, only blockmap's errors come out
    crafted = [
        (None, frames),
        ("header", frames),
        ([("writeable", [])], frames),
        ({**sub, "writeable": 3}, frames),
        ({**sub, "writeable": ["yes"] * (len(frames) - 1)}, frames),
        ({**sub, "writeable": [object()] * (len(frames) - 1)}, frames),
        ({**sub, "version": "1"}, frames),
        ({**sub, "version": None}, frames),
        (sub, None),
        (sub, []),
        (sub, 42),
        (sub, [frames[0], *([None] * (len(frames) - 1))]),
        (sub, [None, *frames[1:]]),
        (sub, [12, *frames[1:]]),
    ]
    for header_, frames_ in crafted:
        with pytest.raises(blockmap.BlockMapError):
            ours(header_, frames_)


# ------------------------------------------------------------ a real cluster


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        worker_dashboard_address=None,
    )
    with cluster, distributed.Client(cluster) as client:
        yield client


@pytest.mark.parametrize("direct", [True, False])
def test_scatter_submit_gather(client, rng, direct):
    tensor = make_map(rng, info={"unit": "eV"})
    future = client.scatter(tensor, direct=direct)
    module, is_shared, writable, total = client.submit(describe, future).result()
    assert module == "blockmap.dask", "the worker used another serializer"
    assert (is_shared, writable) == (False, True)
    assert total == pytest.approx(tensor.block(0).values.sum())

    twice = client.submit(doubled, future)
    result = client.gather(twice, direct=direct)
    np.testing.assert_array_equal(result.block(0).values, tensor.block(0).values * 2)
    assert result.block(0).values.flags.writeable
    assert_identical(client.gather(future, direct=direct), tensor)


def test_blocks_and_labels_travel_too(client, rng):
    tensor = make_map(rng)
    for data in (tensor.block(2), tensor.keys, tensor.block(0).gradient("positions")):
        future = client.scatter(data)
        assert_identical(client.submit(lambda x: x, future).result(), data)


def test_worker_to_worker_transfer(client, rng):
    first, second = sorted(client.scheduler_info()["workers"])
    tensor = make_map(rng)
    future = client.scatter(tensor, workers=[first])
    twice = client.submit(doubled, future, workers=[second], allow_other_workers=False)
    result = twice.result()
    np.testing.assert_array_equal(result.block(1).values, tensor.block(1).values * 2)
    assert client.who_has(twice)[twice.key] == (second,)
    # the input moved from the first worker to the second
    assert set(client.who_has(future)[future.key]) == {first, second}


def test_persist_a_delayed_graph(client, rng):
    parts = [dask.delayed(make_map)(np.random.default_rng(seed)) for seed in range(3)]
    twice = [dask.delayed(doubled)(part) for part in parts]
    persisted = client.persist(twice)
    results = dask.compute(*persisted)
    for seed, result in enumerate(results):
        expected = make_map(np.random.default_rng(seed))
        np.testing.assert_array_equal(result.block(0).values, expected.block(0).values * 2)
        assert result.keys == expected.keys


def test_errors_raised_on_a_worker_reach_the_client_whole(client):
    """Every blockmap error (each class built in Python, and the native
    module's) raised by a task on a worker process is raised again by
    ``result()``: the same class, message, arguments, errno and filename."""
    futures = {
        case: client.submit(error_cases.raise_case, case, pure=False) for case in error_cases.CASES
    }
    distributed.wait(list(futures.values()))
    for case, future in futures.items():
        with pytest.raises(blockmap.BlockMapError) as error:
            future.result()
        error_cases.assert_same_error(error.value, error_cases.caught(case))
