"""The ```python blocks of README.md and docs/*.md run, so they cannot drift
from the code.

Each markdown file runs in a fresh interpreter (``register()`` and the like
change the process), in a temporary directory, its blocks in order in one
namespace, after the few names a fragment uses without defining them
(``SETUP``: ``maps``, ``queue``, ...) and before the checks of ``AFTER``. A
block preceded by ``<!-- not run: reason -->`` is not run (it needs a
cluster); ``NOT_RUN`` counts them, so that none is added unnoticed."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

BLOCK = re.compile(
    r"(?:<!-- not run: (?P<reason>[^>]+?) -->\n)?^```python\n(?P<code>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)

SMALL_MAPS = """
import numpy as np
import blockmap

def small_map(seed, n_samples=8):
    values = np.random.default_rng(seed).normal(size=(n_samples, 3, 4))
    block = blockmap.TensorBlock(
        values,
        blockmap.Labels(["system", "atom"], np.array([[seed, a] for a in range(n_samples)])),
        [blockmap.Labels("o3_mu", np.array([[-1], [0], [1]]))],
        blockmap.Labels.range("n", 4),
    )
    return blockmap.TensorMap(
        blockmap.Labels(["o3_lambda", "center_type"], np.array([[1, 8]])), [block]
    )
"""

SETUP = {
    "README.md": SMALL_MAPS
    + """
import multiprocessing
maps = [small_map(seed) for seed in range(4)]
i = 2
selection = blockmap.Labels(["o3_lambda"], np.array([[1]]))
queue = multiprocessing.get_context("spawn").Queue()
""",
    "torch.md": SMALL_MAPS
    + """
samples = blockmap.Labels.range("sample", 100)
properties = blockmap.Labels.range("n", 3)
keys = blockmap.Labels.range("key", 1)
dataset = [small_map(seed) for seed in range(8)]
""",
    "transports.md": SMALL_MAPS
    + """
import multiprocessing
tensor = small_map(0)
queue = multiprocessing.get_context("spawn").Queue()
""",
}

# what the blocks made, checked after them (and the queues drained)
AFTER = {
    "README.md": """
received = queue.get(timeout=60)
assert received.is_shared() and received == tensor
assert len(part) == 1 and part.keys.column("o3_lambda").tolist() == [1]
assert len(loader.dataset) == 4
assert same == tensor
""",
    "torch.md": """
assert t.grad is not None and bool((t.grad == 2 * t).all())
assert isinstance(batch, blockmap.TensorMap) and len(batch.block(0).samples) == 64
""",
    "transports.md": """
received = queue.get(timeout=60)
assert received.is_shared() and received == tensor
""",
    "learn.md": """
assert type(batch).__name__ == "Batch" and isinstance(batch.descriptor, blockmap.TensorMap)
assert batch.energy.shape == (8, 1) and len(batch.descriptor.block(0).samples) > 8
assert model.module_map.module_list[0].weight.grad is not None
""",
}

NOT_RUN = {"README.md": 1}


def blocks(text):
    """``(line, code, reason)`` for each ```python block (``reason``: why it
    is not run, or None)."""
    for match in BLOCK.finditer(text):
        line = text.count("\n", 0, match.start("code")) + 1
        yield line, match.group("code"), match.group("reason")


def script(path, text, setup="", after=""):
    """The program that runs the blocks of ``path`` (``text``) in order."""
    parts = [("setup", setup)]
    for line, code, reason in blocks(text):
        if reason is None:
            # the block's own line numbers in tracebacks
            parts.append((f"{path.name}:{line}", "\n" * (line - 1) + code))
    parts.append(("after", after))
    return textwrap.dedent(
        f"""
        namespace = {{"__name__": "__main__"}}
        for name, code in {parts!r}:
            exec(compile(code, name, "exec"), namespace)
        """
    )


def run(path, text, tmp_path, setup="", after=""):
    return subprocess.run(
        [sys.executable, "-c", script(path, text, setup, after)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )


WITH_BLOCKS = [path for path in FILES if "```python" in path.read_text()]


@pytest.mark.parametrize("path", WITH_BLOCKS, ids=lambda path: path.name)
def test_the_examples_run(path, tmp_path):
    text = path.read_text()
    found = list(blocks(text))
    assert len(found) == text.count("```python")  # each block is seen
    not_run = [reason for _, _, reason in found if reason is not None]
    assert len(not_run) == NOT_RUN.get(path.name, 0), not_run
    result = run(path, text, tmp_path, SETUP.get(path.name, ""), AFTER.get(path.name, ""))
    assert result.returncode == 0, result.stderr[-4000:]


def test_every_file_with_examples_is_run():
    assert {path.name for path in WITH_BLOCKS} >= {
        "README.md",
        "metatensor.md",
        "torch.md",
        "transports.md",
    }
    assert set(SETUP) | set(AFTER) | set(NOT_RUN) <= {path.name for path in WITH_BLOCKS}


def test_a_wrong_example_fails(tmp_path):
    text = (
        "Text.\n\n```python\nx = 1\n```\n\n<!-- not run: a cluster -->\n```python\n"
        "raise SystemExit(3)\n```\n\n```python\nassert x == 2, 'drifted'\n```\n"
    )
    result = run(tmp_path / "doc.md", text, tmp_path)
    assert result.returncode == 1
    # the failing line, as the markdown file numbers it
    assert 'File "doc.md:13", line 13' in result.stderr and "drifted" in result.stderr
