"""Every public class, function, method and property has a docstring that
``help()`` shows."""

import inspect
import pydoc

import pytest

import blockmap
import blockmap.dask
import blockmap.io


def _public_members():
    for module in (blockmap, blockmap.io, blockmap.dask):
        for name in module.__all__:
            obj = getattr(module, name)
            if name == "__version__":
                continue
            yield f"{module.__name__}.{name}", obj
            if inspect.isclass(obj) and not issubclass(obj, BaseException):
                for attribute in vars(obj):
                    if attribute.startswith("_"):
                        continue
                    # through getattr: static methods as callers see them
                    yield f"{module.__name__}.{name}.{attribute}", getattr(obj, attribute)


MEMBERS = dict(_public_members())


@pytest.mark.parametrize("name", sorted(MEMBERS))
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
