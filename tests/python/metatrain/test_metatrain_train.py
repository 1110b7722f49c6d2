"""The tiny metatrain run (SOAP-BPNN on 40 EMT clusters, 1 epoch) from
metatrain's DiskDataset zip and from its blockmap conversion (and, with 0
workers, from the conversion of the xyz options), each in a
fresh process through tests/python/helpers/metatrain_harness.py: every
training and validation loss is bit-identical (``float.hex``) at equal
``num_workers``, the blockmap runs' batches all come from blockmap's batch
path, with either import order (blockmap first with 0 workers, metatrain first
with 2), and ``python -m blockmap.metatrain eval``
evaluates the trained model on the blockmap dataset."""

import json
import os
import subprocess
import sys

import pytest

from helpers import TESTS_DIR, metatrain_data

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:`torch.jit.:FutureWarning"),
    pytest.mark.filterwarnings("ignore:register_new_resolver:UserWarning"),
]
pytest.importorskip("metatrain")

HARNESS = TESTS_DIR / "helpers" / "metatrain_harness.py"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def train(directory, mode, read_from, workers, name):
    options = directory / f"{name}.yaml"
    metatrain_data.write_options(options, read_from, epochs=1, workers=workers)
    out = directory / f"{name}.json"
    done = subprocess.run(
        [sys.executable, str(HARNESS), mode, str(options), str(out)],
        cwd=directory,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def losses(run):
    return [epoch["losses"] for epoch in run["epochs"]]


def test_one_epoch_from_blockmap_has_the_diskdataset_losses(tiny):
    disk = train(tiny, "plain", tiny / "data.zip", 0, "disk_w0")
    ours = train(tiny, "blockmap-first", tiny / "zip.bmdata", 0, "bm_w0")
    from_xyz = train(tiny, "blockmap-first", tiny / "xyz.bmdata", 0, "xyz_w0")
    # 32 training structures in batches of 8 (drop_last), 4 validation
    assert [len(epoch) for epoch in losses(disk)] == [5]
    assert losses(ours) == losses(disk)
    # the conversion of the xyz options (metatrain's ASE reader) as well
    assert losses(from_xyz) == losses(disk)
    # every batch the training and the final evaluation unpacked was blockmap's
    assert ours["blockmap_batches"] >= 5

    # the trained model evaluated on the blockmap dataset
    options = tiny / "eval.yaml"
    options.write_text(
        f"systems:\n  read_from: {tiny / 'zip.bmdata'}\n  length_unit: angstrom\n"
        "targets:\n  energy:\n    key: energy\n    unit: eV\n    forces:\n      key: forces\n"
    )
    command = [sys.executable, "-m", "blockmap.metatrain", "eval", str(tiny / "bm_w0.pt")]
    command += [str(options), "-e", str(tiny / "extensions"), "-o", "preds.xyz", "-b", "8"]
    done = subprocess.run(command, cwd=tiny, env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "energy RMSE" in done.stdout + done.stderr
    import ase.io

    assert len(ase.io.read(tiny / "preds.xyz", ":")) == 40


def test_two_workers_have_the_diskdataset_losses(tiny):
    disk = train(tiny, "plain", tiny / "data.zip", 2, "disk_w2")
    ours = train(tiny, "metatrain-first", tiny / "zip.bmdata", 2, "bm_w2")
    assert len(losses(disk)[0]) == 5
    assert losses(ours) == losses(disk)
    assert ours["blockmap_batches"] >= 5
