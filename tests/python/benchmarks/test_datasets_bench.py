"""``python -m bench datasets`` end to end on a small dataset (blockmap and
LMDB, the two sides of the targets: every operation, the targets, its
section of the report and its chart), and every layout of the family on a
few maps in this process: what each reads back equals what was written, and
a DataLoader epoch goes through its collate function."""

import json
import subprocess
import sys

import pytest

from bench import datasets, report
from bench.batches import qm9_maps
from helpers import TESTS_DIR

pytestmark = [
    pytest.mark.benchmark,
    # metatrain (the DiskDataset peer) scripts functions with torch.jit on import
    pytest.mark.filterwarnings("ignore:`torch.jit.:FutureWarning"),
]
pytest.importorskip("metatensor")

ROOT = TESTS_DIR.parent.parent


def test_small_datasets_bench_measures_blockmap_against_lmdb(tmp_path):
    markdown = tmp_path / "benchmarks.md"
    markdown.write_text("# Benchmarks\n")
    results = tmp_path / "results.json"
    command = [sys.executable, "-m", "bench", "datasets", "--count", "200", "--repeat", "1"]
    command += ["--data", "qm9", "--layouts", "blockmap,lmdb", "--workdir", str(tmp_path)]
    command += ["--markdown", str(markdown), "--json", str(results)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    measured = json.loads(results.read_text())["results"]["qm9-200"]
    for operation in datasets.OPERATIONS:
        for layout in ("blockmap", "lmdb"):
            cell = measured[f"{operation}/{layout}"]
            assert cell["runs"] and "error" not in cell, (operation, layout, cell)
    assert measured["open/blockmap"]["runs"][0]["maps"] == 200
    assert measured["open/lmdb"]["runs"][0]["maps"] == 200
    assert measured["append/lmdb"]["runs"][0]["maps"] == 1000
    assert measured["loader2/blockmap"]["runs"][0]["batches"] == 4
    for layout in ("blockmap", "lmdb"):
        cold = measured[f"cold/{layout}"]["runs"][0]
        assert cold["bytes"] == cold["open_bytes"] + cold["read_bytes"]
        if datasets.filesystem_of(tmp_path) not in datasets.MEMORY_FILESYSTEMS:
            # the pages were dropped: the maps came from the disk
            assert cold["read_bytes"] > 0, cold
    text = markdown.read_text()
    begin, end = report.markers("datasets")
    assert text.count(begin) == 1 and text.count(end) == 1
    for label, *_ in datasets.TARGETS:
        assert f"- {label} <= " in text
    assert "x LMDB's: not measured" not in text
    assert (tmp_path / "datasets.png").stat().st_size > 0
    assert "](datasets.png)" in text


@pytest.mark.parametrize("layout", datasets.LAYOUTS)
def test_every_layout_reads_back_what_it_wrote(tmp_path, layout):
    maps = qm9_maps(70)
    path = tmp_path / "data"
    datasets._create(layout, path, datasets._inputs(layout, maps))
    opened = datasets._Opened(layout, path)
    assert opened.count == 70
    for i in (0, 33, 69):
        assert datasets.read_back(opened, i) == maps[i]
    opened.close()
    # an epoch through a DataLoader and the layout's collate: 64 + 6 maps
    epoch = datasets._loader_epoch(layout, path, 70, workers=0)
    assert epoch["batches"] == 2 and epoch["measured_maps"] == 70


def test_metatrain_workers_get_their_batches(tmp_path):
    # metatrain's maps do not pickle: its collate packs them for the workers
    path = tmp_path / "data.zip"
    datasets._create("diskdataset", path, datasets._inputs("diskdataset", qm9_maps(70)))
    assert datasets._loader_epoch("diskdataset", path, 70, workers=2)["batches"] == 2


def test_the_hdf5_layout_refuses_blocks_it_cannot_concatenate(tmp_path):
    import blockmap

    maps = qm9_maps(2)
    block = maps[1].block(0)
    other = blockmap.TensorBlock(
        block.values,
        block.samples,
        [],
        blockmap.Labels(["other"], block.properties.values),
    )
    keys = maps[1].keys
    changed = blockmap.TensorMap(blockmap.Labels(keys.names, keys.values[:1]), [other])
    with pytest.raises(ValueError, match="same properties"):
        datasets._create("hdf5", tmp_path / "data.h5", [maps[0], changed])
