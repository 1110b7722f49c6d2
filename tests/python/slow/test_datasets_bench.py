"""``python -m bench datasets`` end to end on a small dataset: every
layout and operation measured, the targets, and its section of the
report."""

import json
import subprocess
import sys

import pytest

from bench import report
from helpers import TESTS_DIR

pytestmark = pytest.mark.slow
pytest.importorskip("metatensor")

ROOT = TESTS_DIR.parent.parent


def test_small_datasets_bench_measures_every_layout(tmp_path):
    markdown = tmp_path / "benchmarks.md"
    markdown.write_text("# Benchmarks\n")
    results = tmp_path / "results.json"
    command = [sys.executable, "-m", "bench", "datasets", "--count", "300", "--repeat", "1"]
    command += ["--data", "qm9", "--markdown", str(markdown), "--json", str(results)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    measured = json.loads(results.read_text())["results"]["qm9"]
    for operation in ("create", "open", "random", "epoch", "append"):
        for layout in ("blockmap", "diskdataset", "folder"):
            cell = measured[f"{operation}/{layout}"]
            assert cell["runs"] and "error" not in cell, (operation, layout, cell)
    assert measured["open/blockmap"]["runs"][0]["maps"] == 300
    assert measured["append/blockmap"]["runs"][0]["maps"] == 1000
    text = markdown.read_text()
    begin, end = report.markers("datasets")
    assert text.count(begin) == 1 and text.count(end) == 1
    assert "open in under 50 ms" in text and "reads no page twice" in text
