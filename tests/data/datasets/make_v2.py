"""Writes the stored version-2 datasets of this folder (run once, with the
blockmap of format version 2; kept to show how they were made):

    PYTHONPATH=python:. python tests/data/datasets/make_v2.py

Each file holds maps of ``bench.batches.qm9_maps`` (QM9-like, with position
gradients); ``expected-v2.pickle`` (protocol 5, a dict of file name -> a
dict with the ``fields``, the ``entries``, each a list of maps in field
order, and the ``columns``) holds what each should read back, so that the
tests do not depend on the generator staying the same.
"""

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import blockmap
from bench.batches import qm9_maps

HERE = Path(__file__).parent


def main() -> None:
    maps = qm9_maps(8, seed=32)
    expected = {}

    # single maps, committed once, in one session
    with blockmap.DatasetWriter(HERE / "v2-committed.bmds") as writer:
        for m in maps[:3]:
            writer.write(m)
    expected["v2-committed.bmds"] = {
        "fields": ["tensor"],
        "entries": [[m] for m in maps[:3]],
        "columns": {},
    }

    # two entries of two fields and two columns, then two more appended by a
    # second session
    path = HERE / "v2-appended.bmds"
    entries = [(maps[i], maps[7 - i], i + 10, 0.5 * i) for i in range(4)]
    with blockmap.DatasetWriter(path) as writer:
        for system, energy, n, w in entries[:2]:
            writer.write(system=system, energy=energy, columns={"n_atoms": n, "weight": w})
    with blockmap.DatasetWriter(path, append=True) as writer:
        for system, energy, n, w in entries[2:]:
            writer.write(system=system, energy=energy, columns={"n_atoms": n, "weight": w})
    expected["v2-appended.bmds"] = {
        "fields": ["system", "energy"],
        "entries": [[s, e] for s, e, _, _ in entries],
        "columns": {
            "n_atoms": [n for _, _, n, _ in entries],
            "weight": [w for _, _, _, w in entries],
        },
    }

    # one map committed, then a writer killed after two more writes returned
    # (before its commit): opening recovers the three
    path = HERE / "v2-recovered.bmds"
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
    expected["v2-recovered.bmds"] = {
        "fields": ["tensor"],
        "entries": [[maps[7]], [maps[0]], [maps[1]]],
        "columns": {},
    }

    # created and closed without a map
    blockmap.DatasetWriter(HERE / "v2-empty.bmds").close()
    expected["v2-empty.bmds"] = {"fields": ["tensor"], "entries": [], "columns": {}}

    for name, content in expected.items():
        ds = blockmap.Dataset(HERE / name)
        assert ds.version == 2, name
        assert len(ds) == len(content["entries"]), name
        assert ds.committed == (name != "v2-recovered.bmds"), name
        assert ds.fields == content["fields"], name
        for i, want in enumerate(content["entries"]):
            for f, field in enumerate(content["fields"]):
                assert blockmap.equal(ds.field(field)[i], want[f]), name
        for column, values in content["columns"].items():
            assert ds.column(column).tolist() == values, name
    with open(HERE / "expected-v2.pickle", "wb") as f:
        pickle.dump(expected, f, protocol=5)


if __name__ == "__main__":
    main()
