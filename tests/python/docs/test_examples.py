"""Every script of examples/ runs as a user runs it (``python SCRIPT`` in an
empty folder, a fresh interpreter) and passes its own checks: each asserts
what it shows (memory shared by address, results equal to a reference)."""

from pathlib import Path

import pytest
from example_pages import own_warnings, parse, run, scripts

pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parents[3]


def test_the_examples_are_found():
    assert {path.name for path in scripts()} >= {
        "dask_cluster.py",
        "dataloader.py",
        "files.py",
        "learn_training.py",
        "metatrain_training.py",
        "pool.py",
    }


@pytest.mark.parametrize("script", scripts(), ids=lambda path: path.name)
def test_the_example_runs_and_checks_what_it_shows(script, tmp_path):
    example = parse(script)
    assert example.title and example.prose  # its page
    source = script.read_text()
    assert "assert " in source  # it checks what it claims
    result = run(script, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-6000:]
    assert result.stdout.strip()
    assert own_warnings(result.stderr, script) == []


def test_a_failing_example_is_reported(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text(
        '"""Broken\n\nIt fails."""\n\nimport warnings\n\n'
        'warnings.warn("careful")\nassert 1 + 1 == 3, "arithmetic"\n'
    )
    result = run(script, cwd=tmp_path)
    assert result.returncode == 1 and "AssertionError: arithmetic" in result.stderr
    (warning,) = own_warnings(result.stderr, script)
    assert warning.endswith("UserWarning: careful")
    assert parse(script).code_line == 5
