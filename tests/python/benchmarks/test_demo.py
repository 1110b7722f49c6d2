"""The demo and the workload it builds: they run, and W has the documented shape."""

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

import blockmap
from bench import workload
from helpers import TESTS_DIR

# the demo and the benchmark compare with metatensor-core, move W through
# dask, ray and joblib, and draw a chart, all in child processes: looked up,
# not imported here
MISSING = [
    name
    for name in ("metatensor", "distributed", "ray", "joblib", "matplotlib")
    if importlib.util.find_spec(name) is None
]

pytestmark = [
    pytest.mark.benchmark,
    pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)}"),
]

#: The repository root, where ``python -m bench`` runs.
ROOT = TESTS_DIR.parents[1]


def test_small_demo_runs_and_prints_its_table():
    result = subprocess.run(
        [sys.executable, "-m", "bench", "demo", "--small", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert "build TensorMap (4 blocks)" in result.stdout
    assert "metatensor-core" in result.stdout
    assert "share memory with the input array: yes" in result.stdout
    for row in ("dask: scatter to a worker + gather", "Queue after share_memory()", "ray: put"):
        assert row in result.stdout
    assert "failed" not in result.stdout


def test_cli_without_command_fails_with_usage():
    result = subprocess.run(
        [sys.executable, "-m", "bench"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode != 0
    assert "usage" in result.stderr


def test_workload_shape_and_zero_copy():
    arrays = workload.make_arrays(n_keys=3, n_samples=24, n_grad_samples=6, n_properties=5)
    tensor = workload.build_blockmap(arrays)
    assert len(tensor) == 3
    assert tensor.keys.names == ["o3_lambda", "center_type"]
    assert tensor.sample_names == ["system", "atom"]
    assert tensor.component_names == ["o3_mu"]
    assert tensor.property_names == ["n"]
    block = tensor.block(0)
    assert block.shape == (24, 3, 5)
    gradient = block.gradient("positions")
    assert gradient.shape == (6, 3, 3, 5)
    assert gradient.samples.names == ["sample", "system", "atom"]
    assert np.shares_memory(block.values, arrays.blocks[0].values)
    assert np.shares_memory(gradient.values, arrays.blocks[0].gradients[0].values)
    expected = sum(
        b.values.nbytes
        + b.samples.values.nbytes
        + sum(g.values.nbytes + g.samples.values.nbytes for g in b.gradients)
        for b in arrays.blocks
    )
    assert workload.nbytes(arrays) == expected


def test_full_workload_is_794_mb_without_allocating_it():
    # the sizes of the full W, computed from the defaults, as in workload.md
    n_keys, n_samples, n_grad, n_prop = 100, 2400, 300, 100
    values = n_keys * (n_samples * 3 * n_prop + n_grad * 3 * 3 * n_prop) * 8
    samples = n_keys * (n_samples * 2 + n_grad * 3) * 4
    assert round((values + samples) / 1e6) == 794
    assert isinstance(blockmap.__version__, str)


def test_small_bench_runs_every_operation_and_draws_the_chart(tmp_path):
    markdown = tmp_path / "bench.md"
    chart = tmp_path / "bench.png"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "bench",
            "--small",
            "--repeat",
            "1",
            "--markdown",
            str(markdown),
            "--chart",
            str(chart),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    for operation in (
        "save to a file",
        "load from a file, all data read",
        "mapped load",
        "pickle p4 dumps",
        "dask: scatter to a worker + gather",
        "multiprocessing Queue after share_memory()",
        "ray: put + get",
        "joblib Parallel(n_jobs=2)",
    ):
        assert operation in result.stdout
        assert operation in markdown.read_text()
    assert "failed" not in result.stdout
    assert chart.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert chart.stat().st_size > 10_000
    # the page shows the charts (images on the documentation site, not links)
    text = markdown.read_text()
    assert "\n![median times on W, log scale](bench.png)\n" in text
    assert "\n![each operation's time against blocks and bytes](scaling.png)\n" in text
