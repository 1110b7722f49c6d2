"""``python -m bench torch`` end to end on tiny data: every library and
loader measured, the join rows, the targets, and its section of the
report written between its markers (and kept by the next write)."""

import subprocess
import sys

import pytest

from bench import report
from helpers import TESTS_DIR

pytestmark = pytest.mark.benchmark
pytest.importorskip("torch")
pytest.importorskip("metatensor.torch")

ROOT = TESTS_DIR.parent.parent


def _run(markdown):
    command = [sys.executable, "-m", "bench", "torch", "--small", "--repeat", "1"]
    command += ["--data", "qm9-8,w", "--loaders", "main,fork", "--seconds", "0.2"]
    command += ["--markdown", str(markdown)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_small_torch_bench_measures_every_library_and_writes_its_section(tmp_path):
    markdown = tmp_path / "benchmarks.md"
    markdown.write_text("# Benchmarks\n\nwritten before\n")
    printed = _run(markdown)
    text = markdown.read_text()
    assert "written before" in text
    begin, end = report.markers("torch")
    assert text.count(begin) == 1 and text.count(end) == 1
    rows = [
        line for line in text.splitlines() if line.startswith("| QM9") or line.startswith("| W")
    ]
    assert len(rows) == 4, rows
    for row in rows:
        cells = row.split("|")[3:6]
        assert all("/s" in cell and "failed" not in cell for cell in cells), row
    assert "at least 5x metatensor-torch" in text and "at least 1x torch" in text
    for operation in ("join 8 QM9-like maps", "split W in two", "copy W's arrays once"):
        assert operation in text
    assert "DataLoader throughput" in printed
    # a second run replaces the section instead of adding one
    _run(markdown)
    assert markdown.read_text().count(begin) == 1
