"""Every public entry point, given arguments of the wrong kind, raises one of
blockmap's documented exceptions, or the ``TypeError`` with which Python
itself refuses a call that does not match the signature (a missing or extra
argument, an argument of a type the parameter cannot take) before any of
blockmap's code runs. Never an error from inside blockmap's own code
(``AttributeError``, ``AssertionError``, a bare ``IndexError``, an
``OverflowError`` of a conversion, a ``PanicException``, ...).

The entry points are enumerated, not listed: a new public name is covered
when it is added.
"""

import inspect
import re
import traceback
import warnings

import numpy as np
import pytest

import blockmap
import blockmap.dask
import blockmap.exceptions
from blockmap._blockmap import _set_pickle_piece_size

HOSTILE = {
    "None": None,
    "str": "x",
    "empty str": "",
    "float": 1.5,
    "nan": float("nan"),
    "huge int": 2**70,
    "huge negative int": -(2**70),
    "negative int": -1,
    "bool": True,
    "object": object(),
    "bytes": b"\x00",
    "list of objects": [object()],
    "nested list": [[1, 2], [3]],
    "dict": {"a": object()},
    "float array": np.array([1.5]),
    "object array": np.array([object(), None], dtype=object),
    "0-d array": np.array(3),
    "type": int,
}

# the words of the TypeError that CPython and pyo3 raise when a call does
# not match the signature, before the function's body runs
SIGNATURE_ERROR = re.compile(
    r"^(argument '\w+': "
    r"|\S+\(\) (takes|missing|got) "
    r"|expected \d+ arguments?, got \d+"
    r"|\S+ expected (at most |at least )?\d+ arguments?, got \d+"
    r"|'\w+' is an invalid keyword argument"
    r"|\w+\(\) takes no (keyword )?arguments"
    r"|cannot create '[\w.]+' instances"
    # a method of a class called on an object of another type
    r"|descriptor '\w+' (for '[\w.]+' objects doesn't apply to|requires) "
    r"|unbound method [\w.]+\(\) needs an argument$"
    # pyo3's conversion of an argument to the type the signature declares
    r"|'.*'( object)? is not an instance of '\w+'$"
    r"|'\w+' object cannot be interpreted as an integer$"
    r"|'\w+' object cannot be converted to '\w+'$)"
)

# dunder protocols reached through operators and builtins
PROTOCOLS = {"__getitem__", "__contains__", "__eq__", "__ne__", "__call__"}


def _labels():
    return blockmap.Labels(["a", "b"], np.array([[0, 1], [1, 2]], dtype=np.int32))


def _block():
    values = np.arange(4.0).reshape(2, 1, 2)
    block = blockmap.TensorBlock(
        values,
        _labels(),
        [blockmap.Labels.range("c", 1)],
        blockmap.Labels.range("p", 2),
    )
    gradient = blockmap.TensorBlock(
        np.ones((1, 1, 2)),
        blockmap.Labels(["sample"], np.array([[0]], dtype=np.int32)),
        [blockmap.Labels.range("c", 1)],
        blockmap.Labels.range("p", 2),
    )
    block.add_gradient("positions", gradient)
    return block


@pytest.fixture(autouse=True)
def _process_settings_restored():
    # entry points such as set_auto_share_threshold change this process's
    # settings: the calls below must not change them for the other tests
    threshold = blockmap.get_auto_share_threshold()
    piece = _set_pickle_piece_size(1 << 20)
    _set_pickle_piece_size(piece)
    yield
    blockmap.set_auto_share_threshold(threshold)
    _set_pickle_piece_size(piece)


def _map():
    keys = blockmap.Labels(["k"], np.array([[0], [1]], dtype=np.int32))
    return blockmap.TensorMap(keys, [_block(), _block()])


def _entry_points():
    """(name, callable, number of parameters) of every public entry point."""
    labels, block, tensor = _labels(), _block(), _map()
    owners = {
        "blockmap": blockmap,
        "blockmap.dask": blockmap.dask,
        "Labels": labels,
        "LabelsEntry": labels[0],
        "TensorBlock": block,
        "TensorMap": tensor,
        "Labels class": blockmap.Labels,
        "TensorBlock class": blockmap.TensorBlock,
        "TensorMap class": blockmap.TensorMap,
    }
    exceptions = set(blockmap.exceptions.__all__)
    for owner_name, owner in owners.items():
        if inspect.ismodule(owner):
            names = getattr(owner, "__all__", None) or [n for n in dir(owner) if n[0] != "_"]
        else:
            names = [n for n in dir(owner) if n[0] != "_" or n in PROTOCOLS]
        for name in sorted(names):
            if name in exceptions:
                continue
            attribute = getattr(owner, name)
            if not callable(attribute) or inspect.ismodule(attribute):
                continue
            if inspect.isclass(owner) and not isinstance(
                inspect.getattr_static(owner, name), (staticmethod, classmethod)
            ):
                # unbound instance methods: covered through the instances, but
                # the class form with a wrong `self` must be refused too
                yield f"{owner_name}.{name}", attribute, 2
                continue
            try:
                count = len(inspect.signature(attribute).parameters)
            except (TypeError, ValueError):
                count = 3
            yield f"{owner_name}.{name}", attribute, max(count, 1)


ENTRY_POINTS = list(_entry_points())


def test_the_enumeration_finds_the_api():
    names = {name for name, _, _ in ENTRY_POINTS}
    for expected in [
        "blockmap.load",
        "blockmap.save_buffer",
        "blockmap.dask.deserialize",
        "Labels.union_and_mapping",
        "Labels class.range",
        "LabelsEntry.print",
        "TensorBlock.add_gradient",
        "TensorMap.keys_to_properties",
        "TensorMap.__getitem__",
        "TensorMap class.load_buffer",
    ]:
        assert expected in names
    assert len(ENTRY_POINTS) > 150


def _blockmap_frames(error):
    """The frames of blockmap's own Python code the error went through."""
    package = blockmap.__file__.rsplit("/", 1)[0]
    return [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if frame.filename.startswith(package)
    ]


def _check(name, call):
    try:
        with warnings.catch_warnings():
            # saving to the plausible path "x" appends .mts, with metatensor's warning
            warnings.filterwarnings("ignore", "adding '.mts' extension", UserWarning)
            call()
    except blockmap.BlockMapError:
        return
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # judged here
        detail = f"{name}: {type(error).__module__}.{type(error).__name__}: {error}"
        if type(error) is TypeError and SIGNATURE_ERROR.match(str(error)):
            # Python's own refusal of the call: raised before blockmap's
            # code, so no frame of blockmap's Python code is on the way
            assert _blockmap_frames(error) == [], detail
            return
        raise AssertionError(detail) from error


def _plausible(tmp_path):
    """A value of the right kind for each parameter name of the API, so that
    a hostile value in one place meets the checks behind the first one."""
    tensor = _map()
    path = tmp_path / "valid.mts"
    blockmap.save(path, tensor)
    labels = _labels()
    dataset = tmp_path / "valid.data"
    blockmap.save_dataset(dataset, [tensor])
    return {
        "file": str(path),
        "path": str(dataset),
        "paths": [str(path)],
        "maps": [tensor],
        "count": 1,
        "append": True,
        "timeout": 0.0,
        "progress": False,
        "target": None,
        "shared": None,
        "buffer": blockmap.save_buffer(tensor),
        "data": tensor,
        "obj": tensor,
        "other": labels,
        "selection": blockmap.Labels(["k"], np.array([[0]], dtype=np.int32)),
        "keys_to_move": blockmap.Labels(["k"], np.array([[0]], dtype=np.int32)),
        "keys": tensor.keys,
        "blocks": list(tensor),  # also join_blocks' blocks
        "samples": labels,
        "components": [],
        "properties": blockmap.Labels.range("p", 2),
        "gradient": _block().gradient("positions"),
        "name": "c",
        "old": "a",
        "new": "z",
        "dimension": "a",
        "dimensions": "c",
        "dimensions_indexes": [1, 0],
        "parameter": "positions",
        "index": 0,
        "indices": [0, 1],
        "key": 0,
        "entry": labels[0],
        "value": labels,
        "names": ["a", "b"],
        "values": np.array([[0, 1]], dtype=np.int32),
        "fill_value": 0.0,
        "sort_samples": False,
        "deep": True,
        "end": 3,
        "max_entries": 2,
        "max_keys": 2,
        "indent": 0,
        "mmap": False,
        "dtype": np.float32,
        "device": "cpu",
        "arrays": "numpy",
        "non_blocking": False,
        "assume_unique": False,
        "tensors": [tensor, _map()],
        "tensor": tensor,
        "block": _block(),
        "selections": [[0], blockmap.Labels.range("a", 1)],
        "axis": "samples",
        "different_keys": "union",
        "add_dimension": "joined",
        "header": blockmap.dask.serialize(tensor)[0],
        "frames": blockmap.dask.serialize(tensor)[1],
    }


def _positional(function):
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    return [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"
    ]


@pytest.mark.parametrize(
    ("name", "function", "count"), ENTRY_POINTS, ids=[name for name, _, _ in ENTRY_POINTS]
)
def test_wrong_arguments_raise_blockmap_errors(name, function, count, tmp_path, monkeypatch):
    # paths given as strings land in a scratch directory
    monkeypatch.chdir(tmp_path)
    plausible = _plausible(tmp_path)
    parameters = _positional(function) if " class." not in name or count != 2 else []
    for i in range(len(parameters)):
        # one hostile value, every other argument of the right kind
        for value in HOSTILE.values():
            before = [plausible[p.name] for p in parameters[:i]]
            after = [plausible[p.name] for p in parameters[i + 1 :] if p.default is p.empty]
            _check(name, lambda args=[*before, value, *after]: function(*args))
    for value in HOSTILE.values():
        for position in range(count):
            # the hostile value in one place, valid-looking ones elsewhere
            # would need per-function knowledge: the value everywhere up to
            # that position reaches each parameter's first check
            args = [value] * (position + 1)
            _check(name, lambda args=args: function(*args))
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        parameters = {}
    for parameter in parameters.values():
        if parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            for value in HOSTILE.values():
                _check(name, lambda p=parameter.name, v=value: function(**{p: v}))


def test_the_binding_raises_only_blockmap_classes():
    # the root of the rule: no native code path creates a builtin exception
    # itself (an AttributeError for the read-only `values` property and
    # KeyboardInterrupt for Ctrl-C are the language's own)
    import pathlib

    root = pathlib.Path(__file__).parents[3] / "src" / "python"
    allowed = {"PyAttributeError", "PyKeyboardInterrupt"}
    found = []
    for path in sorted(root.glob("*.rs")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in re.finditer(r"\b(Py\w+Error|PyKeyboardInterrupt)::new_err", line):
                if match.group(1) not in allowed:
                    found.append(f"{path.name}:{number}: {line.strip()}")
    assert found == []
