"""The API reference, generated from the public modules at each build.

The public modules are ``blockmap`` and every submodule whose dotted name
has no part starting with ``_`` (found by walking the package, so a new
module appears without editing a list). A module's public names are its
``__all__`` (without one: its attributes not starting with ``_``), and for
``blockmap`` also what its ``__dir__`` adds (the names it serves on first
use from other modules). Each object is documented once, on the page of
the first module (``blockmap``, then the others by name) whose ``__all__``
holds it; every other module that offers it links there. Classes get a
page each, with their public methods and properties; functions,
exceptions and data are documented on their module's page.

The pages are reStructuredText files written into ``docs/api/`` (which git
ignores), rewritten only when their text changes and removed when their
object is gone, so an incremental build reads only what changed.
``tests/python/docs/test_site.py`` checks the built reference against the
modules independently of this file.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import types
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "blockmap"
FOLDER = "api"


@dataclass
class Entry:
    """One public name of one module."""

    module: str
    name: str
    obj: object
    canonical: str | None = None  # where it is documented, when elsewhere


@dataclass
class ModulePage:
    name: str
    module: types.ModuleType
    entries: list[Entry] = field(default_factory=list)
    served: list[Entry] = field(default_factory=list)  # ``__dir__``'s extra names


def public_modules() -> list[str]:
    """``blockmap`` first, then its public submodules by name; a module
    that fails to import fails the build."""
    package = importlib.import_module(PACKAGE)

    def refuse(name: str) -> None:
        raise ImportError(f"the API reference cannot import {name}")

    names = set()
    for info in pkgutil.walk_packages(package.__path__, f"{PACKAGE}.", onerror=refuse):
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            names.add(info.name)
    return [PACKAGE, *sorted(names)]


def _is_data(obj: object) -> bool:
    return not (inspect.isclass(obj) or callable(obj) or inspect.ismodule(obj))


def exported(module: types.ModuleType) -> list[str]:
    """The names ``module`` offers: its ``__all__``, or its attributes not
    starting with ``_``."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            name
            for name, value in vars(module).items()
            if not name.startswith("_") and not inspect.ismodule(value)
        ]
    return list(names)


def served(module: types.ModuleType) -> list[str]:
    """The names the module's ``__dir__`` adds to ``__all__`` (served on
    first use), not its submodules or dunder names."""
    if "__dir__" not in vars(module):
        return []
    listed = set(exported(module))
    names = []
    for name in module.__dir__():
        if name in listed or (name.startswith("__") and name.endswith("__")):
            continue
        if inspect.ismodule(getattr(module, name)):
            continue
        names.append(name)
    return names


def collect() -> list[ModulePage]:
    """Every public module with its entries, each entry knowing where its
    object is documented. The same object under the same name is
    documented once; under another name (``MetatensorError`` for
    ``BlockMapError``) it is an alias, documented where it is offered."""
    pages = [ModulePage(name, importlib.import_module(name)) for name in public_modules()]
    home: dict[tuple[int, str], str] = {}  # (id(object), name) -> where it is documented
    keep = []  # the objects whose ids are keys of ``home``
    for page in pages:
        for name in exported(page.module):
            obj = getattr(page.module, name)
            entry = Entry(page.name, name, obj)
            if not (_is_data(obj) or inspect.ismodule(obj)):
                key = (id(obj), name)
                if key in home:
                    entry.canonical = home[key]
                else:
                    home[key] = f"{page.name}.{name}"
                    keep.append(obj)
            page.entries.append(entry)
    for page in pages:
        for name in served(page.module):
            obj = getattr(page.module, name)
            entry = Entry(page.name, name, obj, home.get((id(obj), name)))
            if entry.canonical is None:
                raise RuntimeError(
                    f"{page.name}.{name} is served by {page.name}.__dir__ but no public "
                    "module's __all__ holds it: the API reference has no page for it"
                )
            page.served.append(entry)
    return pages


def _title(text: str, underline: str = "=") -> str:
    return f"{text}\n{underline * len(text)}\n"


ROLE = re.compile(r":[\w:]+:`(?:[^`<]*<)?~?\.?([^`>]*)>?`")


def _summary(obj: object) -> str:
    """The first sentence of ``obj``'s docstring, its roles as literal text
    (they were written for the docstring's own module)."""
    doc = inspect.getdoc(obj) or ""
    text = doc.strip().split("\n\n")[0].replace("\n", " ")
    text = ROLE.sub(lambda match: f"``{match.group(1)}``", text)
    sentence = re.match(r"(.+?[.:;])(\s|$)", text)
    return (sentence.group(1) if sentence else text).replace("|", "\\|")


def _kind(obj: object) -> str:
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if callable(obj):
        return "function"
    return "data"


def _reference(entry: Entry) -> str:
    target = entry.canonical or f"{entry.module}.{entry.name}"
    role = {
        "module": "mod",
        "class": "class",
        "exception": "exc",
        "function": "func",
        "data": "data",
    }[_kind(entry.obj)]
    if inspect.ismodule(entry.obj):
        target = entry.obj.__name__
    return f":py:{role}:`{entry.name} <{target}>`"


def module_page(page: ModulePage) -> str:
    lines = [
        _title(f"``{page.name}``"),
        f".. automodule:: {page.name}\n   :no-members:\n",
        f".. currentmodule:: {page.name}\n",
    ]
    own = [entry for entry in page.entries if entry.canonical is None]
    classes = [e for e in own if _kind(e.obj) == "class"]
    if classes:
        lines.append(_title("Classes", "-"))
        lines.append(".. toctree::\n   :hidden:\n")
        lines.extend(f"   {page.name}.{e.name}" for e in classes)
        lines.append("")
        lines.extend(f"- {_reference(e)}: {_summary(e.obj)}" for e in classes)
        lines.append("")
    for kind, heading, directive in (
        ("function", "Functions", "autofunction"),
        ("exception", "Exceptions", "autoexception"),
        ("data", "Data", "autodata"),
    ):
        chosen = [e for e in own if _kind(e.obj) == kind]
        if not chosen:
            continue
        lines.append(_title(heading, "-"))
        for entry in chosen:
            lines.append(f".. {directive}:: {entry.name}")
            if kind == "exception":
                lines.append("   :show-inheritance:")
                defined, _ = members(entry.obj)
                if defined:
                    lines.append(f"   :members: {', '.join(defined)}")
            lines.append("")
    modules = [e for e in page.entries if _kind(e.obj) == "module"]
    elsewhere = [e for e in page.entries if e.canonical is not None]
    if modules or elsewhere or page.served:
        lines.append(_title("Also offered here", "-"))
        lines.append(
            f"Names that ``{page.name}`` offers, documented where they are defined"
            + (" (served on first use)" if page.served else "")
            + ":\n"
        )
        lines.extend(f"- {_reference(e)}" for e in modules + elsewhere + page.served)
        lines.append("")
    return "\n".join(lines)


def _private(cls: type) -> bool:
    """Whether ``cls`` is one of blockmap's private classes (a native base
    such as ``_blockmap._Dataset``, a helper of a loaded package)."""
    return cls.__module__.split(".")[0] == PACKAGE and (
        cls.__name__.startswith("_") or any(p.startswith("_") for p in cls.__module__.split("."))
    )


# the special methods users call through syntax (``dataset[i]``, ``for x
# in dataset``), documented when a Python function defines them
PROTOCOL = ("__getitem__", "__iter__", "__len__", "__contains__", "__call__")


def members(cls: type) -> tuple[list[str], list[tuple[str, str]]]:
    """The public members of ``cls``: its own attributes not starting with
    ``_`` and the :data:`PROTOCOL` methods written in Python; then, as
    ``(name, directive)``, those it inherits from blockmap's private bases
    and from a native class of its own name (what a user sees on the
    class; not what ``object``, torch or typing give)."""
    own: list[str] = []
    inherited: list[tuple[str, str]] = []
    seen: set[str] = set()
    for owner in cls.__mro__:
        # a private base, or the native class a Python class of the same
        # name extends (blockmap.DatasetWriter, finalized in Python)
        native = (
            owner is not cls
            and owner.__name__ == cls.__name__
            and owner.__module__.split(".")[0] == PACKAGE
        )
        if owner is not cls and not (_private(owner) or native):
            continue
        for name, value in vars(owner).items():
            public = not name.startswith("_") or (name in PROTOCOL and inspect.isfunction(value))
            if name in seen or not public:
                continue
            seen.add(name)
            if owner is cls:
                own.append(name)
            else:
                routine = inspect.isroutine(value) or isinstance(value, classmethod | staticmethod)
                inherited.append((name, "automethod" if routine else "autoattribute"))
    return own, inherited


def class_page(entry: Entry) -> str:
    own, inherited = members(entry.obj)
    lines = [
        _title(f"``{entry.module}.{entry.name}``"),
        f".. currentmodule:: {entry.module}\n",
        f".. autoclass:: {entry.name}",
    ]
    if own:
        lines.append(f"   :members: {', '.join(own)}")
    lines.append("")
    # inside the class's description: documented as its members
    lines.extend(f"   .. {directive}:: {name}\n" for name, directive in inherited)
    return "\n".join(lines)


def index_page(pages: list[ModulePage]) -> str:
    lines = [
        _title("API reference"),
        "Every public module of blockmap, with every name it offers. The classes "
        "and functions of ``blockmap`` itself are the ones most code needs; "
        "``blockmap.io``, ``blockmap.learn``, ``blockmap.metatrain`` and the "
        "bridges to metatensor's libraries follow.\n",
        ".. toctree::\n   :maxdepth: 1\n",
    ]
    lines.extend(f"   {page.name}" for page in pages)
    lines.append("")
    return "\n".join(lines)


def pages() -> dict[str, str]:
    """``{file name: text}`` of every page of the reference."""
    modules = collect()
    out = {"index.rst": index_page(modules)}
    for page in modules:
        out[f"{page.name}.rst"] = module_page(page)
        for entry in page.entries:
            if entry.canonical is None and _kind(entry.obj) == "class":
                out[f"{page.name}.{entry.name}.rst"] = class_page(entry)
    return out


def write(folder: Path) -> None:
    """Write the pages into ``folder``: changed pages only, stale ones removed."""
    folder.mkdir(parents=True, exist_ok=True)
    wanted = pages()
    for path in folder.iterdir():
        if path.name not in wanted:
            path.unlink()
    for name, text in wanted.items():
        path = folder / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


def _generate(app) -> None:
    write(Path(app.srcdir) / FOLDER)


# the packages whose modules blockmap loads a second time, over its own
# classes: in their docstrings, ``metatensor.X`` is blockmap's ``X``
LOADED_COPIES = ("blockmap.operations", "blockmap.learn")


def _candidates(target: str, module: str | None, cls: str | None) -> list[str]:
    """The names ``target`` may stand for, seen from ``module`` (and the
    class ``cls`` in it): the class's member, the module's own
    ``module.target``, then its parents' up to ``blockmap``."""
    if module and module.startswith(LOADED_COPIES) and target.startswith("metatensor."):
        rest = target.removeprefix("metatensor.")
        if not rest.startswith("torch."):  # metatensor-torch's classes stay theirs
            target = rest
    scopes = []
    parts = (module or PACKAGE).split(".")
    while parts:
        scopes.append(".".join(parts))
        parts.pop()
    if scopes[-1] != PACKAGE:
        scopes.append(PACKAGE)
    if cls:
        scopes.insert(0, f"{scopes[0]}.{cls}")
    return [f"{scope}.{target}" for scope in scopes]


def _resolve(app, env, node, contnode):
    """A Python reference Sphinx did not find, looked up in blockmap's
    namespaces: an unqualified ``TensorMap`` in a docstring of
    ``blockmap.operations`` (metatensor-operations' text, loaded over
    blockmap's classes) is :class:`blockmap.TensorMap`."""
    if node.get("refdomain") != "py":
        return None
    from sphinx.util.nodes import make_refnode

    domain = env.domains["py"]
    target = node["reftarget"].lstrip("~.")
    names = _candidates(target, node.get("py:module"), node.get("py:class"))
    # last, as Sphinx's own search of ``.name``: the one object of blockmap
    # whose dotted name ends so (a docstring is shown under another module
    # than the one it was written in: ``blockmap.learn.DataLoader``'s
    # ``group_and_join`` is ``blockmap.learn.data``'s)
    if "." not in target:
        ending = [
            name
            for name in domain.objects
            if name.startswith(f"{PACKAGE}.") and name.endswith(f".{target}")
        ]
        if len(ending) == 1:
            names.append(ending[0])
    for name in names:
        found = domain.objects.get(name)
        if found is not None:
            return make_refnode(
                app.builder, node["refdoc"], found.docname, found.node_id, contnode, name
            )
    return None


def setup(app):
    app.connect("builder-inited", _generate)
    app.connect("missing-reference", _resolve)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
