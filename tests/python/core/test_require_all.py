"""The check of tests/python/conftest.py: with ``BLOCKMAP_REQUIRE_ALL`` set, a
skipped test or a module that skipped itself fails the session; without it,
skips are only reported. Each case runs a tiny pytest session in a child
process, with the conftest as its plugin."""

import os
import subprocess
import sys
import textwrap

import pytest

from helpers import TESTS_DIR

TINY_TESTS = {
    "test_passes.py": "def test_passes():\n    pass\n",
    "test_skips.py": textwrap.dedent(
        """
        import pytest

        def test_skips():
            pytest.skip("a reason to skip")
        """
    ),
    "test_engine.py": textwrap.dedent(
        """
        import pytest

        pytest.importorskip("an_engine_nobody_installed")

        def test_needs_the_engine():
            pass
        """
    ),
}


def _session(tmp_path, names, require_all):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    for name in names:
        (tmp_path / name).write_text(TINY_TESTS[name])
    env = {**os.environ, "PYTHONPATH": str(TESTS_DIR)}
    env.pop("BLOCKMAP_REQUIRE_ALL", None)
    if require_all:
        env["BLOCKMAP_REQUIRE_ALL"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", *names],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_skip_fails_the_session_when_everything_is_required(tmp_path):
    result = _session(tmp_path, list(TINY_TESTS), require_all=True)
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout + result.stderr
    assert "BLOCKMAP_REQUIRE_ALL is set: nothing may be skipped" in result.stdout
    assert "test_skips.py::test_skips: a reason to skip" in result.stdout
    assert "test_engine.py" in result.stdout
    assert "an_engine_nobody_installed" in result.stdout
    assert "1 passed, 2 skipped" in result.stdout


def test_a_skip_is_only_reported_otherwise(tmp_path):
    result = _session(tmp_path, list(TINY_TESTS), require_all=False)
    assert result.returncode == pytest.ExitCode.OK, result.stdout + result.stderr
    assert "nothing may be skipped" not in result.stdout
    assert "1 passed, 2 skipped" in result.stdout


def test_a_session_without_skips_passes_when_everything_is_required(tmp_path):
    result = _session(tmp_path, ["test_passes.py"], require_all=True)
    assert result.returncode == pytest.ExitCode.OK, result.stdout + result.stderr
    assert "1 passed" in result.stdout
