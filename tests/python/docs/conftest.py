"""The documentation site, built once for the tests of this folder.

``make test`` builds it with ``make docs`` and says where
(``BLOCKMAP_DOCS_SITE``); run alone, these tests build it themselves with
the same command into a temporary folder (about 2 minutes: the examples
run).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SITE = "BLOCKMAP_DOCS_SITE"

# as `make docs`
SPHINX = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q"]


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The folder of the built site."""
    given = os.environ.get(SITE)
    if given:
        folder = Path(given)
        assert (folder / "index.html").is_file(), f"{SITE}={given} holds no built site"
        return folder
    folder = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [*SPHINX, str(ROOT / "docs"), str(folder)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    return folder
