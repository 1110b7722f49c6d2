"""User code over blockmap's public API type-checks with ``mypy --strict``:
the stubs of the native module (torch-backed values included), the
``blockmap.<op>`` functions that ``__getattr__`` serves and the Python
modules. ``user_script.py`` is such a script (it also runs); a file of
wrong calls shows that the check can fail, on the same names."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")
pytest.importorskip("torch")

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def mypy(tmp_path_factory):
    cache = tmp_path_factory.mktemp("mypy-cache")

    def run(*arguments):
        command = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache)]
        return subprocess.run([*command, *map(str, arguments)], capture_output=True, text=True)

    return run


def test_the_user_script_type_checks(mypy):
    result = mypy(HERE / "user_script.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found in 1 source file" in result.stdout


def test_the_user_script_runs(tmp_path):
    # what it type-checks is true at run time (torch-backed values are tensors)
    subprocess.run([sys.executable, str(HERE / "user_script.py"), str(tmp_path)], check=True)


WRONG = """\
import blockmap

tensor = blockmap.load("map.mts")
flag: str = blockmap.equal(tensor, tensor)
blockmap.sum_over_samples(tensor, 3)
blockmap.allclose(tensor, tensor, rtol="1")
blockmap.from_metatensor_torch(tensor).keys
tensor.block(0).values.numpy()
blockmap.Labels.range("n", 3).values.numpy()
blockmap.functools
blockmap.not_a_function(tensor)
"""

EXPECTED = [
    # each line of WRONG after the first three, and what mypy says of it
    (4, 'Incompatible types in assignment (expression has type "bool", variable has type "str")'),
    (5, 'Argument 2 to "sum_over_samples" has incompatible type "int"; expected "list[str] | str"'),
    (6, 'Argument "rtol" to "allclose" has incompatible type "str"; expected "float"'),
    (7, 'Item "Labels" of "Labels | TensorBlock | TensorMap" has no attribute "keys"'),
    (8, 'of "ndarray[tuple[Any, ...], dtype[Any]] | Tensor" has no attribute "numpy"'),
    (9, 'of "ndarray[tuple[Any, ...], dtype[signedinteger[_32Bit]]] | Tensor" has no attribute'),
    (10, 'Module "blockmap" does not explicitly export attribute "functools"'),
    # a name nothing declares: __getattr__'s `object`
    (11, '"object" not callable'),
]


def test_wrong_calls_are_errors(mypy, tmp_path):
    path = tmp_path / "wrong.py"
    path.write_text(WRONG)
    result = mypy(path)
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    for line, message in EXPECTED:
        found = [error for error in errors if error.startswith(f"{path}:{line}: ")]
        assert any(message in error for error in found), (line, message, result.stdout)
    assert len(errors) == len(EXPECTED) + 1  # line 7: "TensorBlock" has no "keys" either


WITHOUT_TORCH = """\
import numpy as np
import blockmap

block = blockmap.TensorBlock(
    np.zeros((1, 1)), blockmap.Labels.range("s", 1), [], blockmap.Labels.range("p", 1)
)
tensor = blockmap.TensorMap(blockmap.Labels.range("k", 1), [block])
reveal_type(tensor.block(0).values)
reveal_type(tensor.keys.column("k"))
equal: bool = blockmap.equal(tensor, tensor)
summed: blockmap.TensorMap = blockmap.sum_over_samples(tensor, "s")
"""


def test_without_torch_values_are_arrays_or_any(mypy, tmp_path):
    # torch not followed, as for a user without torch: blockmap's stubs give
    # no error, and torch.Tensor is Any (a user who has torch sees Tensor,
    # as test_wrong_calls_are_errors shows)
    path = tmp_path / "no_torch.py"
    path.write_text(WITHOUT_TORCH)
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n[mypy-torch.*]\nfollow_imports = skip\n")
    result = mypy("--config-file", config, path)
    assert result.returncode == 0, result.stdout + result.stderr
    notes = [line for line in result.stdout.splitlines() if "Revealed type" in line]
    assert len(notes) == 2, result.stdout
    assert notes[0].endswith('"numpy.ndarray[tuple[Any, ...], numpy.dtype[Any]] | Any"'), notes
    assert notes[1].endswith('_32Bit]]] | Any"'), notes


ENTRIES = """\
import torch
import blockmap
import blockmap.learn

ds = blockmap.Dataset("data.bmdata")
system: blockmap.TensorMap = ds[0].system
energy: blockmap.TensorMap = ds[0]["energy"]
single: blockmap.TensorMap = ds[1]
maps: list[blockmap.TensorMap] = ds[1:]
learned = blockmap.learn.Dataset(descriptor=[single], energy=[torch.zeros(1)])
descriptor: blockmap.TensorMap = learned[0].descriptor
target: torch.Tensor = learned[0]["energy"]
indexed = blockmap.learn.IndexedDataset(sample_id=[3], descriptor=[single])
by_id = indexed.get_sample(3).descriptor
loader = blockmap.learn.DataLoader(learned, batch_size=2)
for batch in loader:
    joined: blockmap.TensorMap = batch.descriptor
reveal_type(learned)
reveal_type(blockmap.learn.data.Dataset.from_dict)
learned.not_a_method()
size: str = len(learned)
"""


def test_dataset_entries_and_learn_datasets_are_typed(mypy, tmp_path):
    # the documented `ds[0].system` / `ds[0]["energy"]` of a dataset of
    # fields (docs/format.md) and blockmap.learn's datasets, typed (not Any:
    # the last two lines are errors)
    path = tmp_path / "entries.py"
    path.write_text(ENTRIES)
    result = mypy(path)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert [int(error.split(":")[1]) for error in errors] == [20, 21], result.stdout
    assert '"Dataset" has no attribute "not_a_method"' in errors[0]
    notes = [line for line in result.stdout.splitlines() if "Revealed type" in line]
    assert notes[0].endswith('"blockmap.learn.data.Dataset"'), notes
    assert "(data: dict[str, Any], size: int | None =) -> blockmap.learn.data.Dataset" in notes[1]
