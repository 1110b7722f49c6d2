"""docs/design.md against the tree: its module map names every folder and
source file of ``src/`` and ``python/blockmap/`` (and nothing that does not
exist), every error kind of ``src/error.rs`` and every exception class of
``blockmap.exceptions``; its layer order is the one ``src/lib.rs`` repeats,
and the modules of ``src/`` follow it."""

import re

import pytest

import blockmap.exceptions
from helpers import TESTS_DIR

ROOT = TESTS_DIR.parent.parent
DESIGN = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")

# the trees the module map must name in full, as the map writes their roots
TREES = {"src/": ROOT / "src", "python/blockmap/": ROOT / "python" / "blockmap"}
# generated or packaging files, not modules
NOT_MODULES = {"__pycache__"}
MODULE_SUFFIXES = (".rs", ".py")

# a module map line: names (a folder ends with "/", a file with its suffix),
# comma-separated, then two spaces and the description, or the end of the line
NAME = r"(?:[\w.]+/)+|\w+\.(?:rs|py|pyi|typed)"
ENTRY = re.compile(rf"^(?P<names>(?:{NAME})(?:, (?:{NAME}))*)(?:\s{{2,}}|$)")


def _section(text, title):
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _fenced_blocks(text):
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.M | re.S)


def _map_entries():
    """The paths the module map names, as ``src/io/npy.rs``, ``src/io/``."""
    (block,) = _fenced_blocks(_section(DESIGN, "Module map"))
    stack = []  # (indent, folder path)
    paths = set()
    for line in block.splitlines():
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        match = ENTRY.match(stripped)
        if not match:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else ""
        folders = []
        for name in match["names"].split(", "):
            paths.add(parent + name)
            if name.endswith("/"):
                folders.append(parent + name)
        # a folder's children are indented below it; one folder per line
        if folders:
            assert len(folders) == 1, f"several folders on one line: {line!r}"
            stack.append((indent, folders[0]))
    return paths


def _tree(prefix, folder):
    """Every folder and source file under ``folder``, named as the map does."""
    found = set()
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if NOT_MODULES & set(relative.parts):
            continue
        if path.is_dir():
            found.add(f"{prefix}{relative.as_posix()}/")
        elif path.suffix in MODULE_SUFFIXES:
            found.add(f"{prefix}{relative.as_posix()}")
    return found


def test_module_map_parses_as_a_tree():
    entries = _map_entries()
    # a sample of nesting levels, so that a parser that flattens the tree fails
    for path in ["src/", "src/lib.rs", "src/io/npy.rs", "src/python/mod.rs"]:
        assert path in entries
    assert "python/blockmap/exceptions.py" in entries
    assert "src/npy.rs" not in entries


@pytest.mark.parametrize("prefix", sorted(TREES))
def test_every_module_is_named_in_design_md(prefix):
    named = {path for path in _map_entries() if path.startswith(prefix)}
    on_disk = _tree(prefix, TREES[prefix])
    missing = sorted(on_disk - named)
    assert not missing, f"not named in docs/design.md's module map: {missing}"


@pytest.mark.parametrize("prefix", sorted(TREES))
def test_every_name_in_design_md_exists(prefix):
    root = TREES[prefix]
    stale = sorted(
        path
        for path in _map_entries()
        if path.startswith(prefix) and not (root / path[len(prefix) :]).exists()
    )
    assert not stale, f"named in docs/design.md but not in the tree: {stale}"


def _error_kinds():
    text = (ROOT / "src" / "error.rs").read_text(encoding="utf-8")
    body = text[text.index("pub enum Error {") :]
    body = body[: body.index("\n}\n")]
    kinds = re.findall(r"^    (\w+)\s*(?:\(|\{|,)", body, flags=re.M)
    assert "Invalid" in kinds and "Io" in kinds
    return kinds


@pytest.mark.parametrize("kind", _error_kinds())
def test_every_error_kind_is_in_design_md(kind):
    module_map = _section(DESIGN, "Module map")
    listed = module_map[module_map.index("  error.rs ") : module_map.index("  arc.rs ")]
    assert re.search(rf"\b{kind}\b", listed), f"Error::{kind} not in the module map's error.rs"
    assert f"Error::{kind}`" in _section(DESIGN, "Errors in Python"), (
        f"Error::{kind} has no row in design.md's 'Errors in Python' table"
    )


@pytest.mark.parametrize("name", sorted(blockmap.exceptions.__all__))
def test_every_exception_class_is_in_design_md(name):
    assert f"`blockmap.{name}`" in _section(DESIGN, "Errors in Python"), (
        f"blockmap.{name} is not described in design.md's 'Errors in Python'"
    )


def _normalized(order):
    return " ".join(order.split())


def _design_order():
    (block,) = _fenced_blocks(_section(DESIGN, "Layers"))
    return _normalized(block)


def _lib_order():
    docs = "\n".join(
        line[4:] if line.startswith("//! ") else line[3:]
        for line in (ROOT / "src" / "lib.rs").read_text(encoding="utf-8").splitlines()
        if line.startswith("//!")
    )
    (block,) = _fenced_blocks(docs)
    return _normalized(block)


def _layers(order):
    layers = []
    for layer in order.split(" → "):
        layers.append(re.findall(r"\w+", layer))
    return layers


def test_lib_rs_repeats_the_layer_order_of_design_md():
    assert _lib_order() == _design_order()


def _top_modules():
    modules = set()
    for path in (ROOT / "src").iterdir():
        if path.is_dir():
            modules.add(path.name)
        elif path.suffix == ".rs" and path.stem != "lib":
            modules.add(path.stem)
    return modules


def test_layer_order_names_every_module_of_src_once():
    named = [module for layer in _layers(_design_order()) for module in layer]
    assert sorted(named) == sorted(_top_modules())


def _uses(module):
    """The modules of ``src/`` that ``module`` names (``crate::x``), its inline
    test modules left out (as ../shared/tools/layers reads them)."""
    folder = ROOT / "src"
    files = (
        sorted((folder / module).rglob("*.rs"))
        if (folder / module).is_dir()
        else [folder / f"{module}.rs"]
    )
    used = set()
    for file in files:
        text = file.read_text(encoding="utf-8")
        text = re.sub(r"#\[cfg\(test\)\]\s*mod\s+tests\s*\{.*", "", text, flags=re.S)
        for match in re.finditer(r"\bcrate::(\{[^}]*\}|\w+)", text):
            what = match.group(1)
            used.update(re.findall(r"\w+", what) if what.startswith("{") else [what])
    return used & (_top_modules() - {module})


def test_modules_use_only_lower_layers():
    level = {
        module: index for index, layer in enumerate(_layers(_design_order())) for module in layer
    }
    upward = sorted(
        f"{module} -> {used}"
        for module in _top_modules()
        for used in _uses(module)
        if level[used] >= level[module]
    )
    assert not upward, f"uses against the layer order of design.md: {upward}"
