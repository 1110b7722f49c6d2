"""``python -m bench training`` end to end on a tiny size (24 structures,
batch 8, 2 epochs): every cell of the report is there, the peers trained,
their losses and timings were recorded (inside the DataLoader workers too),
the floor run fed its later epochs from memory, and the report's section
and targets were written."""

import json
import subprocess
import sys

import pytest

from bench import report, training
from bench.training_data import BLOCKMAP_UNAVAILABLE, blockmap_metatrain
from helpers import TESTS_DIR

pytestmark = [
    pytest.mark.benchmark,
    pytest.mark.filterwarnings("ignore:`torch.jit.:FutureWarning"),
]
pytest.importorskip("metatrain")

ROOT = TESTS_DIR.parent.parent
EPOCHS = 2


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    folder = tmp_path_factory.mktemp("training")
    markdown = folder / "benchmarks.md"
    markdown.write_text("# Benchmarks\n")
    results = folder / "results.json"
    command = [sys.executable, "-m", "bench", "training", "--sizes", "24:8"]
    command += ["--epochs", str(EPOCHS), "--workdir", str(folder)]
    command += ["--markdown", str(markdown), "--json", str(results)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(results.read_text()), markdown.read_text()


def _losses(run):
    return [loss for epoch in run["epochs"] for loss in epoch["losses"]]


def test_every_cell_is_measured(measured):
    record, _ = measured
    cells = record["results"]["24-b8"]
    expected = {f"{s}/w{w}" for s in training.SOURCES for w in (0, 2)} | {"floor"}
    assert set(cells) == expected
    peers = [key for key in expected if not key.startswith("blockmap/")]
    if blockmap_metatrain() is None:
        assert cells["blockmap/w0"] == {"error": BLOCKMAP_UNAVAILABLE}
        assert cells["blockmap/w2"] == {"error": BLOCKMAP_UNAVAILABLE}
    else:
        peers += ["blockmap/w0", "blockmap/w2"]
    data = record["data"]["24-b8"]
    assert data["structures"] == 24 and data["zip_bytes"] > 0 and data["memmap_bytes"] > 0
    for key in peers:
        assert "error" not in cells[key], (key, cells[key])
        (run,) = cells[key]["runs"]
        assert len(run["epochs"]) == EPOCHS, key
        assert run["pss"]["main"] > 0
        # the composition and scaler fits come before the first epoch
        assert run["setup"] > 0
        for epoch in run["epochs"]:
            assert epoch["seconds"] > 0 and epoch["cpu"] > 0
            assert epoch["data"] == pytest.approx(epoch["wait"] + epoch["unpack"])
            assert epoch["batches"] == len(epoch["losses"])
            assert epoch["unpack"] > 0 and epoch["wait"] > 0
            if key != "floor":
                # with 2 workers, the items are read and collated in them
                assert epoch["item"] > 0 and epoch["collate"] > 0, (key, epoch)
        if key.endswith("/w2"):
            assert run["pss"]["workers"] >= 2 and run["pss"]["worker_max"] > 0
        else:
            assert run["pss"]["workers"] == 0


def test_every_batch_loss_is_recorded(measured):
    record, _ = measured
    cells = record["results"]["24-b8"]
    # 24 structures: 2 to validation, 2 to test, 20 to training (2 full
    # batches of 8, the rest dropped) and 1 validation batch per epoch
    for key in ("disk/w0", "disk/w2", "memmap/w0", "memmap/w2", "floor"):
        run = cells[key]["runs"][0]
        for epoch in run["epochs"]:
            tags = [tag for tag, _ in epoch["losses"]]
            assert tags == ["train", "train", "val"], (key, tags)
            for _, value in epoch["losses"]:
                assert float.fromhex(value) > 0
    disk = _losses(cells["disk/w0"]["runs"][0])
    # the floor run is DiskDataset's 0-worker run until it replays batches
    assert _losses(cells["floor"]["runs"][0])[:3] == disk[:3]
    # MemmapDataset stores float32: close to DiskDataset's, not the same bits
    memmap = _losses(cells["memmap/w0"]["runs"][0])
    first = float.fromhex(disk[0][1])
    assert float.fromhex(memmap[0][1]) == pytest.approx(first, rel=1e-4)


def test_the_floor_feeds_its_later_epochs_from_memory(measured):
    record, _ = measured
    (run,) = record["results"]["24-b8"]["floor"]["runs"]
    first, *later = run["epochs"]
    assert first["item"] > 0 and first["collate"] > 0
    for epoch in later:
        assert epoch["item"] == 0 and epoch["collate"] == 0
    assert training.floor_seconds(record["results"]["24-b8"]["floor"]) > 0


def test_the_report_has_its_section_and_targets(measured):
    _, text = measured
    begin, end = report.markers("training")
    assert text.count(begin) == 1 and text.count(end) == 1
    assert report.SECTIONS["training"] in text
    for label in (
        "epoch <= 0.6x DiskDataset's, 0 workers",
        "epoch <= 0.6x DiskDataset's, 2 workers",
        "data handling <= 15% of the epoch, 0 workers",
        "peak PSS per worker <= DiskDataset's, 2 workers",
        "losses bit-identical to DiskDataset's, 0 workers",
        "- floor: the model alone",
    ):
        assert label in text, label
    if blockmap_metatrain() is None:
        assert f"not measured ({BLOCKMAP_UNAVAILABLE})" in text


def _cell(seconds, data, worker_pss, losses, cpu=5.0):
    epoch = {"seconds": seconds, "cpu": cpu, "data": data, "losses": losses}
    epoch.update(item=0.0, collate=0.0, unpack=0.0, wait=data)
    pss = {"main": 1e9, "worker_max": worker_pss, "workers": 2}
    return {"runs": [{"epochs": [epoch, epoch], "pss": pss}]}


def test_targets_say_met_and_missed():
    same = [["train", (1.5).hex()], ["val", (2.5).hex()]]
    other = [["train", (1.5).hex()], ["val", (2.25).hex()]]
    cells = {
        "disk/w0": _cell(10.0, 3.0, 0, same),
        "blockmap/w0": _cell(5.0, 0.5, 0, same, cpu=4.0),
        "disk/w2": _cell(10.0, 1.0, 2e8, same),
        "blockmap/w2": _cell(7.0, 2.0, 3e8, other),
    }
    lines = "\n".join(training.targets(cells, [0, 2]))
    assert "0.6x DiskDataset's, 0 workers: 0.50x, **met** (main-process CPU time: 0.80x)" in lines
    assert "0.6x DiskDataset's, 2 workers: 0.70x, **missed**" in lines
    assert "15% of the epoch, 0 workers: 10%, **met**" in lines
    assert "15% of the epoch, 2 workers: 29%, **missed**" in lines
    assert "2 workers: 300 MB against 200 MB, **missed**" in lines
    assert "DiskDataset's, 0 workers: 4 of 4 batches, **met**" in lines
    assert "DiskDataset's, 2 workers: 2 of 4 batches, **missed**" in lines
    # a batch path around torch's DataLoader iterator: its wait is not seen
    for epoch in cells["blockmap/w0"]["runs"][0]["epochs"]:
        epoch["batches"] = 1
    lines = "\n".join(training.targets(cells, [0, 2]))
    assert f"15% of the epoch, 0 workers: not measured ({training.WAITS_UNSEEN})" in lines
