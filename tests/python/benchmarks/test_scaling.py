"""The scaling report runs (``--quick``: the smallest sizes, one run each) and
its table has every operation and library; its slope fit is right."""

import importlib.util
import math
import subprocess
import sys

import pytest

from bench import scaling, scaling_ops
from helpers import TESTS_DIR

MISSING = [
    name
    for name in ("metatensor", "distributed", "matplotlib")
    if importlib.util.find_spec(name) is None
]

#: The repository root, where ``python -m bench`` runs.
ROOT = TESTS_DIR.parents[1]


def test_slope_of_power_laws():
    assert scaling.slope([(1, 3.0), (10, 30.0), (100, 300.0)]) == pytest.approx(1.0)
    assert scaling.slope([(1, 2.0), (10, 200.0)]) == pytest.approx(2.0)
    assert scaling.slope([(10, 1.0), (1000, 1.0)]) == pytest.approx(0.0)
    assert scaling.slope([(10, 1.0)]) is None
    assert math.isclose(scaling.slope([(8e6, 1e-3), (8e8, 1e-1)]) or 0, 1.0)


def test_generated_maps_have_the_fixed_total_size():
    for blocks in (1, 10, 100):
        arrays = scaling_ops.series_arrays("blocks", blocks)
        assert len(arrays) == blocks
        values = sum(block.values.nbytes for block in arrays.blocks)
        assert values == pytest.approx(scaling_ops.BLOCKS_TOTAL, rel=0.01)
        assert arrays.blocks[-1].values.flat[0] == blocks - 1


@pytest.mark.benchmark
@pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)}")
def test_quick_scaling_report_has_every_operation_and_library(tmp_path):
    markdown, chart = tmp_path / "scaling.md", tmp_path / "scaling.png"
    result = subprocess.run(
        [sys.executable, "-m", "bench", "scaling", "--quick"]
        + ["--markdown", str(markdown), "--chart", str(chart)],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    text = markdown.read_text()
    for operation in scaling_ops.OPS.values():
        assert operation.title in result.stdout
        assert operation.title in text
        for library in operation.calls:
            assert f"| {library} |" in text  # in the table of timed calls
    for header in ("blockmap", "numpy", "metatensor-core", "numpy-values"):
        assert f" {header} |" in text.split("## What is timed")[0]
    assert "log-log slope" in text
    assert "failed" not in result.stdout
    assert chart.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    # the page shows its chart (an image on the documentation site, not a link)
    assert "\n![each operation's time against blocks and bytes](scaling.png)\n" in text
