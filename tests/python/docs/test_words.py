"""What the README, the package metadata, CITATION.cff and CONTRIBUTING.md
say about installing, citing and versioning is checked against the files
and the code it describes."""

import re
import tomllib
from pathlib import Path

import yaml

import blockmap

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CARGO_VERSION = re.search(
    r'^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.MULTILINE
).group(1)


def _install_section():
    text = (ROOT / "README.md").read_text()
    return text[text.index("## Install\n") : text.index("\n## ", text.index("## Install\n") + 1)]


def _requirement_name(requirement):
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]


def test_the_readme_lists_every_extra_with_what_it_installs():
    rows = re.findall(r"^\| `([\w-]+)` \| ([^|]+) \|", _install_section(), re.MULTILINE)
    listed = {extra: {name.strip() for name in names.split(",")} for extra, names in rows}
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert listed == {
        extra: {_requirement_name(requirement) for requirement in requirements}
        for extra, requirements in extras.items()
    }


def test_the_readme_says_how_to_get_blockmap_today():
    section = " ".join(_install_section().split())
    assert "not on the Python package index yet" in section
    assert "`make wheels`" in section
    version = PYPROJECT["project"].get("version", CARGO_VERSION)
    assert f"dist/blockmap-{version}-cp312-cp312-manylinux2014_x86_64" in section
    assert f"dist/blockmap-{version}.tar.gz" in section
    rust = re.search(r'^rust-version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M)
    assert f"Rust {rust.group(1)} or later" in section
    # no command that needs blockmap on the package index
    words = (ROOT / "README.md").read_text() + "".join(
        path.read_text() for path in (ROOT / "docs").glob("*.md")
    )
    assert "pip install blockmap[" not in " ".join(words.split())


def test_the_metadata_points_at_no_other_projects_site():
    urls = PYPROJECT["project"].get("urls", {})
    assert not any("metatensor.org" in url for url in urls.values()), urls


def test_citation_cff_names_this_version_and_license():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    assert citation["title"] == "blockmap" and citation["type"] == "software"
    assert citation["version"] == CARGO_VERSION == blockmap.__version__
    assert citation["license"] == PYPROJECT["project"]["license"]["text"]
    assert citation["authors"] and all("name" in author for author in citation["authors"])
    assert citation["message"] and citation["abstract"]


def _constant(path, name="VERSION"):
    match = re.search(rf"pub const {name}: u32 = (\d+);", (ROOT / path).read_text())
    assert match, f"{name} in {path}"
    return int(match.group(1))


def test_contributing_states_the_versions_the_code_has():
    text = " ".join((ROOT / "CONTRIBUTING.md").read_text().split())
    assert f"**The package: {CARGO_VERSION}** (`version` in `Cargo.toml`" in text
    pickle = _constant("src/pickle/mod.rs")
    assert f"(`VERSION` in `src/pickle/mod.rs`, {pickle} now)" in text
    dataset = _constant("src/dataset/v2/layout.rs")
    assert f"version {dataset} (`VERSION` in `src/dataset/v2/layout.rs`, {dataset} now)" in text
    assert _constant("src/dataset/v1/mod.rs") == 1
    assert "version 1 (`VERSION` in `src/dataset/v1/mod.rs`)" in text
    # the changelog's version being prepared is the package's
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {CARGO_VERSION} (unreleased)" in changelog
