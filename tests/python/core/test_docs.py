"""Every public class, function, method and property has a docstring that
``help()`` shows; every public callable documents its parameters, what it
returns and what it raises, in numpydoc sections (``Parameters``,
``Returns``, ``Raises``)."""

import ast
import builtins
import importlib
import importlib.util
import inspect
import pathlib
import pydoc

import pytest

import blockmap
import blockmap.exceptions
import blockmap.io

# blockmap.dask needs distributed: without it, its members are one skipped case
HAS_DISTRIBUTED = importlib.util.find_spec("distributed") is not None


def _modules():
    yield blockmap
    yield blockmap.io
    yield importlib.import_module("blockmap.metatensor")
    yield importlib.import_module("blockmap.metatensor_torch")
    if HAS_DISTRIBUTED:
        yield importlib.import_module("blockmap.dask")


def _public_members():
    for module in _modules():
        for name in module.__all__:
            obj = getattr(module, name)
            if name == "__version__" or isinstance(obj, bool):
                continue  # data, documented where it is defined
            yield f"{module.__name__}.{name}", obj
            if inspect.isclass(obj) and not issubclass(obj, BaseException):
                for attribute in vars(obj):
                    if attribute.startswith("_"):
                        continue
                    # through getattr: static methods as callers see them
                    yield f"{module.__name__}.{name}.{attribute}", getattr(obj, attribute)


MEMBERS = dict(_public_members())
NAMES = sorted(MEMBERS)
if not HAS_DISTRIBUTED:
    NAMES.append(pytest.param("blockmap.dask", marks=pytest.mark.skip("distributed not installed")))


@pytest.mark.parametrize("name", NAMES)
def test_has_a_docstring(name):
    member = MEMBERS[name]
    doc = inspect.getdoc(member)
    assert doc and doc.strip(), f"{name} has no docstring"
    inherited = inspect.getdoc(type(member)) if not inspect.isclass(member) else None
    assert doc != inherited or isinstance(member, property | type), f"{name}: only the type's doc"


@pytest.mark.parametrize("cls", [blockmap.Labels, blockmap.TensorBlock, blockmap.TensorMap])
def test_help_shows_the_class_and_its_methods(cls):
    text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    assert inspect.getdoc(cls).splitlines()[0] in text
    for name in ("save", "load_buffer", "__reduce_ex__"):
        assert name in text
    if cls is not blockmap.Labels:
        assert "share_memory" in text


# --- Parameters, Returns, Raises: numpydoc sections on every public callable ---

# the protocol methods of blockmap's Python classes that users call through
# syntax (``dataset[i]``, ``for m in dataset``); the native classes' slots are
# pyo3 slot wrappers, whose docstring is Python's and cannot be set
PROTOCOL = ("__getitem__", "__iter__", "__len__")

# members that raise none of blockmap's exceptions: getters of a flag or of a
# stored value (Python's own TypeError for a call that does not match the
# signature, e.g. ``get_info(1)``, is not listed: docs/design.md)
RAISES_NOTHING = {
    "blockmap.get_auto_share_threshold",
    "blockmap.metatensor.is_registered",
    "blockmap.Labels.single",
    "blockmap.TensorBlock.gradients_list",
    "blockmap.TensorBlock.has_gradient",
    "blockmap.TensorMap.get_info",
    "blockmap.TensorBlock.is_shared",
    "blockmap.TensorMap.is_shared",
    "blockmap.LabelsEntry.print",
    "blockmap.dask.register",
}


def _callables():
    for name, member in MEMBERS.items():
        if inspect.isclass(member) or not callable(member):
            continue
        yield name, member
    for module in _modules():
        for name in module.__all__:
            cls = getattr(module, name)
            if not inspect.isclass(cls) or issubclass(cls, BaseException):
                continue
            for attribute in PROTOCOL:
                if inspect.isfunction(vars(cls).get(attribute)):
                    yield f"{module.__name__}.{name}.{attribute}", getattr(cls, attribute)


CALLABLES = dict(_callables())


def _stub_returns():
    """``{qualified name: return annotation}`` of the native module's stub."""
    tree = ast.parse(pathlib.Path(blockmap.__file__).with_name("_blockmap.pyi").read_text())
    returns = {}

    def visit(body, prefix):
        for node in body:
            if isinstance(node, ast.FunctionDef) and node.returns is not None:
                returns[prefix + node.name] = ast.unparse(node.returns)
            elif isinstance(node, ast.ClassDef):
                visit(node.body, prefix + node.name + ".")

    visit(tree.body, "")
    return returns


STUB_RETURNS = _stub_returns()


def _sections(doc):
    """The numpydoc sections of ``doc``: ``{title: [lines]}``, a title being
    a line underlined by as many dashes."""
    lines = doc.splitlines()
    sections = {}
    current = None
    skip = False
    for line, underline in zip(lines, [*lines[1:], ""], strict=True):
        if skip:
            skip = False
            continue
        title = line.strip()
        if title and underline.strip() == "-" * len(title):
            current = sections.setdefault(title, [])
            skip = True
        elif current is not None:
            current.append(line)
    return sections


def _entries(lines):
    """The names an entry line of a section gives (``a, b : type``)."""
    names = set()
    for line in lines:
        if line and not line[0].isspace():
            for name in line.split(" : ")[0].split(","):
                names.add(name.strip().strip("`"))
    return names


def _parameters(member):
    try:
        signature = inspect.signature(member)
    except (TypeError, ValueError):
        pytest.fail("no signature: neither inspect.signature nor __text_signature__")
    names = []
    for parameter in signature.parameters.values():
        if parameter.name in ("self", "cls"):
            continue
        prefix = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
        names.append(prefix.get(parameter.kind, "") + parameter.name)
    return signature, names


def _returns_none(name, member, signature):
    annotation = signature.return_annotation
    if annotation is not inspect.Signature.empty:
        return annotation in (None, "None")
    qualname = getattr(member, "__qualname__", name.rsplit(".", 1)[-1])
    stub = STUB_RETURNS.get(qualname)
    assert stub is not None, f"{name}: no return annotation, here or in _blockmap.pyi"
    return stub == "None"


EXCEPTIONS = {
    name
    for name in dir(blockmap.exceptions)
    if inspect.isclass(getattr(blockmap.exceptions, name))
    and issubclass(getattr(blockmap.exceptions, name), BaseException)
}


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_parameters_returns_raises(name):
    member = CALLABLES[name]
    doc = inspect.getdoc(member) or ""
    sections = _sections(doc)
    signature, parameters = _parameters(member)

    if parameters:
        assert "Parameters" in sections, f"{name}: no Parameters section"
        documented = _entries(sections["Parameters"])
        missing = [p for p in parameters if p not in documented]
        assert not missing, f"{name}: parameters not documented: {missing}"
        extra = documented - set(parameters)
        assert not extra, f"{name}: documents parameters it does not take: {sorted(extra)}"

    if not _returns_none(name, member, signature):
        assert sections.get("Returns") or sections.get("Yields"), f"{name}: no Returns section"

    if name in RAISES_NOTHING:
        assert "Raises" not in sections, f"{name} is listed as raising nothing"
    else:
        assert sections.get("Raises"), f"{name}: no Raises section"
        raised = _entries(sections["Raises"])
        for exception in raised:
            short = exception.removeprefix("blockmap.")
            builtin = getattr(builtins, short, None)
            assert short in EXCEPTIONS or (
                isinstance(builtin, type) and issubclass(builtin, BaseException)
            ), f"{name}: Raises names {exception}, not an exception class"


def test_raises_nothing_lists_members():
    # blockmap.dask is enumerated where distributed is installed
    listed = RAISES_NOTHING if HAS_DISTRIBUTED else RAISES_NOTHING - {"blockmap.dask.register"}
    assert listed <= set(CALLABLES)


@pytest.mark.skipif(
    not blockmap.HAS_METATENSOR_OPERATIONS, reason="metatensor-operations not installed"
)
def test_operations_have_docstrings():
    # metatensor-operations 0.5's divide writes its docstring after its
    # first statement: blockmap.operations takes it from there
    missing = [
        name
        for name in sorted(blockmap._OPERATIONS)
        if callable(getattr(blockmap, name)) and not inspect.getdoc(getattr(blockmap, name))
    ]
    assert not missing, f"operations without a docstring: {missing}"
    assert "division of ``A`` and ``B``" in inspect.getdoc(blockmap.divide)
