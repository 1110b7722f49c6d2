"""metatensor-core's own objects moved by blockmap after
``blockmap.metatensor.register()``: pickle (protocol 5 out of band, lower
protocols through the ``.mts`` archive), multiprocessing Pool and shared
memory, and a real dask LocalCluster. Registration changes the process it
runs in, so every case runs in a fresh interpreter."""

import textwrap

import pytest

from helpers.child import run_python

pytest.importorskip("metatensor")


def run(code, timeout=180):
    """Run ``code`` in a fresh interpreter that can import the test helpers;
    return its stdout lines."""
    return run_python(code, timeout=timeout).stdout.strip().splitlines()


def test_importing_blockmap_changes_nothing_about_metatensor():
    lines = run(
        """
        import copyreg, pickle
        from multiprocessing.reduction import ForkingPickler
        import metatensor
        from helpers.metatensor_jobs import map_of

        tensor = map_of(n_samples=20)
        before_table = dict(copyreg.dispatch_table)
        before_extra = dict(ForkingPickler._extra_reducers)
        before = [pickle.dumps(tensor, protocol=p) for p in (2, 4, 5)]

        import blockmap, blockmap.metatensor, blockmap.operations, blockmap.dask
        from distributed.protocol import dask_serialize

        classes = (metatensor.TensorMap, metatensor.TensorBlock, metatensor.Labels)
        print(all(copyreg.dispatch_table.get(c) is before_table.get(c) for c in classes))
        print(all(cls not in ForkingPickler._extra_reducers or
                  before_extra.get(cls) is ForkingPickler._extra_reducers[cls]
                  for cls in classes))
        print([pickle.dumps(tensor, protocol=p) for p in (2, 4, 5)] == before)
        print(blockmap.metatensor.is_registered())
        try:
            dask_serialize.dispatch(metatensor.TensorMap)
            print("dask serializer")
        except TypeError:
            print("no dask serializer")
        """
    )
    assert lines == ["True", "True", "True", "False", "no dask serializer"]


PICKLE_CHECKS = """
    import pickle
    import numpy as np
    from helpers.metatensor_jobs import map_of

    tensor = map_of()
    # blockmap's wire format (docs/pickle.md): the keys, then per block its
    # values and its gradient's; the samples, the gradient samples, the
    # component and the properties (the same in every block, made one
    # object by the conversion, and the gradients') once
    n_arrays = 1 + 2 * len(tensor.keys) + 4

    buffers = []
    data = pickle.dumps(tensor, protocol=5, buffer_callback=buffers.append)
    print(len(buffers) == n_arrays, b"PK\\x03\\x04" not in data, len(data) < 20_000)
    back = pickle.loads(data, buffers=buffers)
    print(type(back) is metatensor.TensorMap, metatensor.equal(back, tensor), back.info())
    raw = [memoryview(b).cast("B") for b in buffers]
    values = back.block(1).values
    print(any(np.shares_memory(values, np.frombuffer(r, np.uint8)) for r in raw))

    for protocol in (2, 4):
        data = pickle.dumps(tensor, protocol=protocol)
        back = pickle.loads(data)
        print(protocol, b"PK\\x03\\x04" in data, type(back) is metatensor.TensorMap,
              metatensor.equal(back, tensor))

    print(*(type(pickle.loads(pickle.dumps(obj, protocol=5))) is type(obj)
            for obj in (tensor.block(2), tensor.keys, tensor.block(0).gradient("positions"))))

    # an info value that is the empty string, which metatensor-core's info()
    # shows as None: it comes back as from metatensor-core's own pickle (its
    # __reduce_ex__, which copyreg's entry overrides in pickle)
    def stored(tensor):
        return blockmap.load_buffer(metatensor.io.save_buffer(tensor)).info()

    tensor.set_info("empty", "")
    oracle = [own(*args) for own, args in (tensor.__reduce_ex__(p) for p in (4, 5))]
    print(all(o.info() == {"unit": "eV", "empty": None} for o in oracle),
          all(stored(o) == {"unit": "eV", "empty": ""} for o in oracle))
    backs = [pickle.loads(pickle.dumps(tensor, protocol=p)) for p in (2, 4, 5)]
    backs.append(blockmap.metatensor._dask_deserialize(
        *blockmap.metatensor._dask_serialize(tensor)))
    backs.append(blockmap.metatensor.share_memory(tensor))
    print(all(b.info() == o.info() and stored(b) == stored(o) for b in backs for o in oracle))
"""


@pytest.mark.parametrize("order", ["metatensor first", "blockmap first"])
def test_pickle_goes_through_blockmaps_wire_format(order):
    if order == "metatensor first":
        prelude = "import metatensor\nimport blockmap.metatensor\nblockmap.metatensor.register()\n"
    else:
        prelude = "import blockmap.metatensor\nblockmap.metatensor.register()\nimport metatensor\n"
    lines = run(prelude + textwrap.dedent(PICKLE_CHECKS))
    assert lines == [
        "True True True",
        "True True {'unit': 'eV'}",
        "True",
        "2 True True True",
        "4 True True True",
        "True True True",
        "True True",
        "True",
    ]


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_through_a_multiprocessing_pool(method):
    lines = run(
        f"""
        import multiprocessing
        import metatensor, blockmap.metatensor
        from helpers.metatensor_jobs import describe, doubled_metatensor, map_of

        blockmap.metatensor.register()
        if __name__ == "__main__":
            tensor = map_of()
            total = float(sum(block.values.sum() for block in tensor.blocks()))
            context = multiprocessing.get_context("{method}")
            with context.Pool(2) as pool:
                (kind, registered, got), = pool.map(describe, [tensor])
                twice, = pool.map(doubled_metatensor, [tensor])
            print(kind, registered, abs(got - total) < 1e-6 * total)
            print(type(twice) is metatensor.TensorMap,
                  float((twice.block(1).values - 2 * tensor.block(1).values).max()))
        """
    )
    assert lines == ["metatensor.TensorMap True True", "True 0.0"]


def test_share_memory_crosses_as_a_descriptor():
    lines = run(
        """
        import multiprocessing
        from multiprocessing.reduction import ForkingPickler
        import numpy as np
        import metatensor, blockmap, blockmap.metatensor
        from helpers.metatensor_jobs import map_of, write_first_value

        if __name__ == "__main__":
            tensor = map_of()
            try:
                blockmap.share_memory(tensor)
            except blockmap.BlockMapTypeError as error:
                print("refused before register:", "register()" in str(error))
            blockmap.metatensor.register()
            shared = blockmap.share_memory(tensor)
            print(type(shared) is metatensor.TensorMap, metatensor.equal(shared, tensor),
                  not np.shares_memory(shared.block(0).values, tensor.block(0).values))
            nbytes = sum(b.values.nbytes for b in tensor.blocks())
            message = bytes(ForkingPickler.dumps(shared))
            print(nbytes > 5_000_000, len(message) < nbytes // 20)
            context = multiprocessing.get_context("spawn")
            queue, done = context.Queue(), context.Queue()
            child = context.Process(target=write_first_value, args=(queue, done))
            child.start()
            queue.put(shared)
            print(done.get(timeout=120))
            child.join(60)
            print(child.exitcode, shared.block(0).values[0, 0, 0])
        """
    )
    assert lines == [
        "refused before register: True",
        "True True True",
        "True True",
        "metatensor.TensorMap",
        "0 4321.0",
    ]


def test_through_a_dask_local_cluster():
    pytest.importorskip("distributed")
    lines = run(
        """
        import metatensor, blockmap.metatensor
        import distributed
        from distributed.protocol import serialize
        from helpers.metatensor_jobs import describe, doubled_metatensor, map_of

        blockmap.metatensor.register()
        if __name__ == "__main__":
            tensor = map_of()
            header, frames = serialize(tensor)
            # the keys, per block its values and the gradient's; the samples,
            # gradient samples, component and properties (the same in every
            # block) sent once (docs/pickle.md)
            n_arrays = 1 + 2 * len(tensor.keys) + 4
            print(header["serializer"], len(frames) == 1 + n_arrays)
            total = float(sum(block.values.sum() for block in tensor.blocks()))
            cluster = distributed.LocalCluster(
                n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                dashboard_address=None, worker_dashboard_address=None,
            )
            with cluster, distributed.Client(cluster) as client:
                for direct in (True, False):
                    future = client.scatter(tensor, direct=direct)
                    kind, registered, got = client.submit(describe, future).result()
                    print(kind, registered, abs(got - total) < 1e-6 * total)
                    twice = client.gather(client.submit(doubled_metatensor, future), direct=direct)
                    print(type(twice) is metatensor.TensorMap,
                          float((twice.block(2).values - 2 * tensor.block(2).values).max()))
        """,
        timeout=300,
    )
    assert lines == [
        "dask True",
        "metatensor.TensorMap True True",
        "True 0.0",
        "metatensor.TensorMap True True",
        "True 0.0",
    ]
