"""Writes the stored version-1 datasets of this folder (run once, with the
blockmap of format version 1; kept to show how they were made):

    PYTHONPATH=python:. python tests/data/datasets/make_v1.py

Each file holds maps of ``bench.batches.qm9_maps`` (QM9-like, with position
gradients); ``expected.pickle`` (protocol 5, a dict of file name -> list of
maps) holds what each should read back, so that the tests do not depend on
the generator staying the same.
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

    # committed once, in one session
    with blockmap.DatasetWriter(HERE / "v1-committed.bmds") as writer:
        for m in maps[:3]:
            writer.write(m)
    expected["v1-committed.bmds"] = maps[:3]

    # two maps, then two more appended by a second session
    with blockmap.DatasetWriter(HERE / "v1-appended.bmds") as writer:
        for m in maps[3:5]:
            writer.write(m)
    with blockmap.DatasetWriter(HERE / "v1-appended.bmds", append=True) as writer:
        for m in maps[5:7]:
            writer.write(m)
    expected["v1-appended.bmds"] = maps[3:7]

    # one map committed, then a writer killed after two more writes returned
    # (before its commit): opening recovers the three
    path = HERE / "v1-recovered.bmds"
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
    expected["v1-recovered.bmds"] = [maps[7], maps[0], maps[1]]

    # created and closed without a map
    blockmap.DatasetWriter(HERE / "v1-empty.bmds").close()
    expected["v1-empty.bmds"] = []

    for name, content in expected.items():
        ds = blockmap.Dataset(HERE / name)
        assert len(ds) == len(content), name
        assert ds.committed == (name != "v1-recovered.bmds"), name
        for got, want in zip(ds, content, strict=True):
            assert blockmap.equal(got, want), name
    with open(HERE / "expected.pickle", "wb") as f:
        pickle.dump(expected, f, protocol=5)


if __name__ == "__main__":
    main()
