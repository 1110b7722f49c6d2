"""Claims of the docs and docstrings that had drifted from the code, each
checked against the behaviour it describes."""

import ast
import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest

import blockmap

ROOT = Path(__file__).resolve().parents[3]
STUB = Path(blockmap.__file__).with_name("_blockmap.pyi")


def _stub_docstring(cls, method):
    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    return ast.get_docstring(item)
    raise AssertionError(f"{cls}.{method} is not in the stub")


def test_labels_to_torch_is_supported_and_documented():
    torch = pytest.importorskip("torch")
    labels = blockmap.Labels(["a", "b"], np.array([[0, 1], [2, 3]]))
    converted = labels.to(arrays="torch")
    assert isinstance(converted.values, torch.Tensor) and converted.values.dtype == torch.int32
    assert converted == labels and converted.to(arrays="numpy").values.tolist() == [[0, 1], [2, 3]]
    for doc in (blockmap.Labels.to.__doc__, _stub_docstring("Labels", "to")):
        assert "torch" in doc and "not supported" not in doc
    text = (ROOT / "docs" / "metatensor.md").read_text()
    assert '`arrays="torch"` (not supported yet)' not in text
    assert '`arrays="torch"` gives Labels whose values are int32 tensors' in text


@pytest.mark.parametrize("cls", [blockmap.TensorMap, blockmap.TensorBlock])
def test_share_memory_docstrings_say_labels_stay(cls):
    # labels never go into the segment (docs/transports.md; checked by
    # address in tests/python/transports/test_transports_mp.py)
    for doc in (cls.share_memory.__doc__, _stub_docstring(cls.__name__, "share_memory")):
        first = inspect.cleandoc(doc).split("\n\n")[0]
        assert "values" in first and "labels" not in first.split("Labels stay")[0].lower()


def test_use_numpy_does_not_choose_the_array_type():
    # "its arrays are numpy arrays either way" was true before arrays="torch"
    torch = pytest.importorskip("torch")
    block = blockmap.TensorBlock(
        np.zeros((2, 1)), blockmap.Labels.range("s", 2), [], blockmap.Labels.range("p", 1)
    )
    tensor = blockmap.TensorMap(blockmap.Labels.range("k", 1), [block])
    data = blockmap.save_buffer(tensor)
    loaded = blockmap.load_buffer(data, True, arrays="torch")
    assert isinstance(loaded.block(0).values, torch.Tensor)
    for doc in (blockmap.load.__doc__, blockmap.save.__doc__):
        assert "numpy arrays either way" not in doc
    assert "numpy arrays either\nway" not in (ROOT / "docs" / "metatensor.md").read_text()


def test_the_torch_dtypes_refused_are_those_docs_torch_md_lists():
    # docs/torch.md said complex types were refused: complex64 and complex128 are held
    torch = pytest.importorskip("torch")
    samples, properties = blockmap.Labels.range("s", 2), blockmap.Labels.range("p", 2)
    for dtype in (torch.bfloat16, torch.complex32):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch: "ComplexHalf support is experimental"
            values = torch.zeros(2, 2, dtype=dtype)
        with pytest.raises(blockmap.BlockMapTypeError, match="unsupported dtype"):
            blockmap.TensorBlock(values, samples, [], properties)
    for dtype in (torch.complex64, torch.complex128, torch.float16, torch.bool, torch.uint16):
        values = torch.ones(2, 2, dtype=dtype)
        block = blockmap.TensorBlock(values, samples, [], properties)
        assert block.values is values
    text = (ROOT / "docs" / "torch.md").read_text()
    assert "`torch.complex32`; `complex64` and `complex128` are held" in text
