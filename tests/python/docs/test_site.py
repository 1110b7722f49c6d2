"""The built documentation site holds what it promises: every public name of
every public module in the API reference, every guide of docs/ as a page,
every example with its output, every benchmark chart, and no broken internal
link.

The public names are found here from the modules themselves, independently
of the generator of the reference (docs/_ext/api_pages.py), so a name the
generator misses, or one added after the site was built, fails."""

import functools
import importlib
import inspect
import pkgutil
import posixpath
import re
import types
from html.parser import HTMLParser
from pathlib import Path

import pytest
from internal_links import broken_links
from sphinx.util.inventory import InventoryFile

import blockmap

pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parents[3]


def public_modules():
    """``blockmap`` and every submodule whose dotted name has no part
    starting with ``_``."""
    found = ["blockmap"]
    for info in pkgutil.walk_packages(blockmap.__path__, "blockmap."):
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            found.append(info.name)
    return found


def public_names(module):
    """What ``module`` offers: its ``__all__`` (or its attributes not
    starting with ``_``) and the names its ``dir()`` lists, less
    submodules and dunder names."""
    names = set(getattr(module, "__all__", None) or [n for n in vars(module) if n[0] != "_"])
    if "__dir__" in vars(module):
        names |= set(dir(module))
    return sorted(
        name
        for name in names
        if not (name.startswith("__") and name.endswith("__"))
        and not isinstance(getattr(module, name), types.ModuleType)
    )


@functools.cache
def inventory(site):
    """``{name: (type, uri)}`` of every Python object of the site."""
    with open(site / "objects.inv", "rb") as stream:
        data = InventoryFile.load(stream, "", posixpath.join)
    return {
        name: (kind, item.uri)
        for kind, items in data.items()
        if kind.startswith("py:")
        for name, item in items.items()
    }


@functools.cache
def resolved(site):
    """``{name: object}`` for each Python name of the site's inventory."""
    return {name: resolve(name) for name in inventory(site)}


def resolve(name):
    """The object a dotted name stands for (None when it stands for none)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                obj = getattr(obj, part)
        except AttributeError:
            return None
        return obj
    return None


class _Page(HTMLParser):
    """The ids, link targets and images of a page."""

    def __init__(self):
        super().__init__()
        self.ids, self.hrefs, self.images = set(), set(), []

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"])
        if tag == "a" and values.get("href"):
            self.hrefs.add(values["href"])
        if tag == "img":
            self.images.append(values.get("src", ""))


def page(path):
    parsed = _Page()
    parsed.feed(path.read_text())
    return parsed


def _is_data(obj):
    return not (inspect.isclass(obj) or callable(obj))


def missing_from_reference(site):
    """``module.name`` for each public name of each public module that the
    API reference does not document, or documents without the module's
    page leading to it."""
    objects = inventory(site)
    by_identity = {}
    for name, obj in resolved(site).items():
        if obj is not None and not _is_data(obj):
            by_identity.setdefault(id(obj), []).append(name)
    missing = []
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        module_page = page(site / "api" / f"{module_name}.html")
        for name in public_names(module):
            obj = getattr(module, name)
            qualified = f"{module_name}.{name}"
            documented = [qualified] if qualified in objects else []
            if not _is_data(obj):
                documented += by_identity.get(id(obj), [])
            # the module's page documents it, or links to where it is
            reached = [
                other
                for other in documented
                if objects[other][1].startswith(f"api/{module_name}.html#")
                or any(href.endswith(f"#{other}") for href in module_page.hrefs)
            ]
            if not reached:
                missing.append(qualified)
    return missing


def test_every_public_name_is_in_the_reference(site):
    assert missing_from_reference(site) == []


def test_a_public_name_added_after_the_build_is_missing(site, monkeypatch):
    # the check above can fail: a new function of blockmap.io is not there
    def brand_new():
        """A function the site was built without."""

    monkeypatch.setattr(blockmap.io, "brand_new", brand_new, raising=False)
    monkeypatch.setattr(blockmap.io, "__all__", [*blockmap.io.__all__, "brand_new"])
    assert missing_from_reference(site) == ["blockmap.io.brand_new"]


def _class_members(cls):
    """``{name: the class defining it}`` for the public attributes a user
    sees on ``cls`` that blockmap defines (not those of ``object``, torch,
    typing or the builtin exceptions)."""
    names = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next((c for c in cls.__mro__ if name in vars(c)), None)
        if owner is not None and owner.__module__.split(".")[0] == "blockmap":
            names[name] = owner
    return names


def test_every_member_of_every_public_class_is_in_the_reference(site):
    objects = inventory(site)

    def homes(cls):
        # where the class is documented (not where an alias names it)
        return [
            n for n, obj in resolved(site).items() if obj is cls and objects[n][0] != "py:attribute"
        ]

    missing = []
    checked = 0
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for name in public_names(module):
            cls = getattr(module, name)
            if not inspect.isclass(cls):
                continue
            for member, owner in _class_members(cls).items():
                checked += 1
                # on the class's page, or on that of the public class defining it
                where = homes(cls) + homes(owner)
                if not any(f"{home}.{member}" in objects for home in where):
                    missing.append(f"{module_name}.{name}.{member}")
    assert checked > 100 and missing == []


def test_the_reference_shows_the_docstrings(site):
    text = " ".join(
        re.sub(r"<[^>]+>", "", (site / "api" / "blockmap.TensorMap.html").read_text()).split()
    )
    for member in (blockmap.TensorMap, blockmap.TensorMap.block, blockmap.TensorMap.save):
        first = inspect.getdoc(member).splitlines()[0]
        plain = re.sub(r":\w+:`~?([^`]+)`", r"\1", first).replace("`", "")
        words = plain.split()[:5]
        assert " ".join(words) in text, first
    # numpydoc's sections are rendered as such
    assert "Parameters" in text and "Raises" in text


def test_every_guide_is_a_page_and_readme_is_the_first(site):
    for guide in sorted((ROOT / "docs").glob("*.md")):
        assert (site / f"{guide.stem}.html").is_file(), guide.name
    index = re.sub(r"<[^>]+>", "", (site / "index.html").read_text())
    readme = (ROOT / "README.md").read_text().split("\n\n")[1]
    words = re.sub(r"\[([^]]+)\]\([^)]+\)", r"\1", readme).replace("`", "").split()
    assert " ".join(words[:8]) in " ".join(index.split())
    changelog = (site / "changelog.html").read_text()
    assert "0.1.0" in changelog


def test_the_benchmark_page_shows_every_chart(site):
    images = {src.rsplit("/", 1)[-1] for src in page(site / "benchmarks.html").images}
    charts = {path.name for path in (ROOT / "docs").glob("*.png")}
    assert charts and charts <= images
    for chart in charts:
        assert (site / "_images" / chart).is_file()


def test_every_example_has_a_page_with_its_output(site):
    scripts = sorted((ROOT / "examples").glob("*.py"))
    assert len(scripts) >= 6
    gallery = page(site / "gallery" / "index.html")
    for script in scripts:
        html = site / "gallery" / f"{script.stem}.html"
        assert f"{script.stem}.html" in gallery.hrefs, script.name
        text = " ".join(re.sub(r"<[^>]+>", " ", html.read_text()).split())
        assert f"What python {script.name} prints" in text
        assert any(href.endswith(script.name) for href in page(html).hrefs)  # the download


def test_the_built_site_has_no_broken_internal_link(site):
    assert broken_links(site) == []


def test_the_link_check_finds_missing_files_and_anchors(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "page.html").write_text(
        '<html><body><h1 id="top">x</h1>'
        '<a href="#top">ok</a><a href="../index.html#intro">ok</a>'
        '<a href="https://example.org/x">other site</a><a href="mailto:x@y">mail</a>'
        '<a href="#nowhere">bad anchor</a><a href="missing.html">bad file</a>'
        '<img src="../_images/chart.png"><a href="../../outside.html">outside</a>'
        '<a href="../index.html#gone">bad anchor elsewhere</a></body></html>'
    )
    (tmp_path / "index.html").write_text('<p id="intro">x</p>')
    problems = broken_links(tmp_path)
    assert [problem.split(": ", 1)[1] for problem in problems] == [
        "#nowhere: no anchor #nowhere in a/page.html",
        "missing.html: no such file",
        "../_images/chart.png: no such file",
        "../../outside.html: outside the site",
        "../index.html#gone: no anchor #gone in index.html",
    ]
