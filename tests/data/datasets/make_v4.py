"""Writes the stored version-4 datasets of this folder (run once, with the
blockmap of format version 4; kept to show how they were made):

    PYTHONPATH=python:. python tests/data/datasets/make_v4.py

Each file but ``v4-dtypes.bmds`` holds maps of ``bench.batches.qm9_maps``
(QM9-like, with position gradients); ``v4-dtypes.bmds`` holds one map per
dtype, with nested gradients, a component and info. ``expected-v4.pickle``
(protocol 5, a dict of file name -> a dict with the ``fields``, the
``entries``, each a list of maps in field order, and the ``columns``) holds
what each should read back, so that the tests do not depend on the
generator staying the same.
"""

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

import blockmap
from bench.batches import qm9_maps
from blockmap import Labels, TensorBlock, TensorMap

HERE = Path(__file__).parent

DTYPES = [
    np.float16,
    np.float32,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.bool_,
    np.complex64,
    np.complex128,
]


def _labels(names, values):
    return Labels(names, np.array(values, dtype=np.int32).reshape(-1, len(names)))


def _values(rng, dtype, shape):
    if dtype is np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    values = rng.normal(size=shape) * 20
    if np.issubdtype(dtype, np.complexfloating):
        values = values + 1j * rng.normal(size=shape)
    return values.astype(dtype)


def dtype_map(dtype, seed):
    """Two blocks of ``dtype``: values (samples, xyz, properties), a
    ``positions`` gradient with its own ``cell`` gradient, and info."""
    rng = np.random.default_rng(seed)
    xyz = _labels(["xyz"], [[0], [1], [2]])
    properties = _labels(["n"], [[0], [1]])
    blocks = []
    for k, samples in enumerate([[[0, 0], [0, 1], [1, 0]], [[2, 3]]]):
        block = TensorBlock(
            _values(rng, dtype, (len(samples), 3, 2)),
            _labels(["system", "atom"], samples),
            [xyz],
            properties,
        )
        gradient = TensorBlock(
            _values(rng, dtype, (2, 3, 2)),
            _labels(["sample", "atom"], [[0, k], [len(samples) - 1, 2]]),
            [xyz],
            properties,
        )
        cell = TensorBlock(
            _values(rng, dtype, (1, 2, 3, 2)),
            _labels(["sample", "cell"], [[1, 0]]),
            [_labels(["abc"], [[0], [1]]), xyz],
            properties,
        )
        gradient.add_gradient("cell", cell)
        block.add_gradient("positions", gradient)
        blocks.append(block)
    tensor = TensorMap(_labels(["key"], [[0], [1]]), blocks)
    tensor.set_info("dtype", np.dtype(dtype).name)
    return tensor


def main() -> None:
    maps = qm9_maps(8, seed=33)
    expected = {}

    # single maps, committed once, in one session
    with blockmap.DatasetWriter(HERE / "v4-committed.bmds") as writer:
        for m in maps[:3]:
            writer.write(m)
    expected["v4-committed.bmds"] = {
        "fields": ["tensor"],
        "entries": [[m] for m in maps[:3]],
        "columns": {},
    }

    # two entries of two fields and two columns, then two more appended by a
    # second session
    path = HERE / "v4-appended.bmds"
    entries = [(maps[i], maps[7 - i], i + 10, 0.5 * i) for i in range(4)]
    with blockmap.DatasetWriter(path) as writer:
        for system, energy, n, w in entries[:2]:
            writer.write(system=system, energy=energy, columns={"n_atoms": n, "weight": w})
    with blockmap.DatasetWriter(path, append=True) as writer:
        for system, energy, n, w in entries[2:]:
            writer.write(system=system, energy=energy, columns={"n_atoms": n, "weight": w})
    expected["v4-appended.bmds"] = {
        "fields": ["system", "energy"],
        "entries": [[s, e] for s, e, _, _ in entries],
        "columns": {
            "n_atoms": [n for _, _, n, _ in entries],
            "weight": [w for _, _, _, w in entries],
        },
    }

    # one map committed, then a writer killed after two more writes returned
    # (before its commit): opening recovers the three
    path = HERE / "v4-recovered.bmds"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, pickle, blockmap\n"
            "maps = pickle.load(sys.stdin.buffer)\n"
            "w = blockmap.DatasetWriter(sys.argv[1])\n"
            "w.write(maps[0]); w.commit(); w.write(maps[1]); w.write(maps[2])\n"
            "print('written', flush=True)\n"
            "sys.stdin.read()\n",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(pickle.dumps([maps[7], maps[0], maps[1]], protocol=5))
    child.stdin.flush()
    assert child.stdout.readline() == b"written\n"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    expected["v4-recovered.bmds"] = {
        "fields": ["tensor"],
        "entries": [[maps[7]], [maps[0]], [maps[1]]],
        "columns": {},
    }

    # created and closed without a map
    blockmap.DatasetWriter(HERE / "v4-empty.bmds").close()
    expected["v4-empty.bmds"] = {"fields": ["tensor"], "entries": [], "columns": {}}

    # every dtype (the dtype codes of the block descriptions), with nested
    # gradients, a component and info
    dtyped = [dtype_map(dtype, seed) for seed, dtype in enumerate(DTYPES)]
    with blockmap.DatasetWriter(HERE / "v4-dtypes.bmds") as writer:
        for m in dtyped:
            writer.write(m)
    expected["v4-dtypes.bmds"] = {
        "fields": ["tensor"],
        "entries": [[m] for m in dtyped],
        "columns": {},
    }

    for name, content in expected.items():
        ds = blockmap.Dataset(HERE / name)
        assert ds.version == 4, name
        assert len(ds) == len(content["entries"]), name
        assert ds.committed == (name != "v4-recovered.bmds"), name
        assert ds.fields == content["fields"], name
        for i, want in enumerate(content["entries"]):
            for f, field in enumerate(content["fields"]):
                assert blockmap.equal(ds.field(field)[i], want[f]), name
        for column, values in content["columns"].items():
            assert ds.column(column).tolist() == values, name
        blockmap.verify(HERE / name)
    with open(HERE / "expected-v4.pickle", "wb") as f:
        pickle.dump(expected, f, protocol=5)


if __name__ == "__main__":
    main()
