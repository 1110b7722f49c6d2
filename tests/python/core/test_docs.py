"""Every public class, function, method and property has a docstring that
``help()`` shows."""

import importlib
import importlib.util
import inspect
import pydoc

import pytest

import blockmap
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
