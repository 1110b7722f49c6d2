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

import importlib
import importlib.util
import inspect
import re
import traceback
import warnings

import numpy as np
import pytest

import blockmap
import blockmap.exceptions
import blockmap.metatensor
import blockmap.metatensor_torch
from blockmap._blockmap import _set_pickle_piece_size

# blockmap.dask needs distributed: without it (an installed wheel tested
# alone), its entry points are left out
DASK = (
    importlib.import_module("blockmap.dask")
    if importlib.util.find_spec("distributed") is not None
    else None
)

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
        **({"blockmap.dask": DASK} if DASK is not None else {}),
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
        *(["blockmap.dask.deserialize"] if DASK is not None else []),
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
            made = call()
            if isinstance(made, blockmap.DatasetWriter):
                # a writer the arguments opened: given up (one never closed
                # commits, with a ResourceWarning)
                made.abort()
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
        **(
            {"header": DASK.serialize(tensor)[0], "frames": DASK.serialize(tensor)[1]}
            if DASK is not None
            else {}
        ),
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
    # itself (an AttributeError for the read-only `values` property,
    # KeyboardInterrupt for Ctrl-C and the ImportError of an import in a
    # sub-interpreter are the language's own)
    import pathlib

    root = pathlib.Path(__file__).parents[3] / "src" / "python"
    allowed = {"PyAttributeError", "PyKeyboardInterrupt", "PyImportError"}
    found = []
    for path in sorted(root.glob("*.rs")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in re.finditer(r"\b(Py\w+Error|PyKeyboardInterrupt)::new_err", line):
                if match.group(1) not in allowed:
                    found.append(f"{path.name}:{number}: {line.strip()}")
    assert found == []


# ------------------------------------------------ metatensor's own objects


def _foreign_objects():
    """metatensor-core's and metatensor-torch's Labels, LabelsEntry,
    TensorBlock and TensorMap, by kind, with the conversion a message must
    name."""
    import metatensor

    def core(labels, block, tensor):
        keys = metatensor.Labels(tensor.keys.names, tensor.keys.values)

        def labels_of(labels):
            return metatensor.Labels(labels.names, labels.values)

        def block_of(block):
            return metatensor.TensorBlock(
                block.values,
                labels_of(block.samples),
                [labels_of(c) for c in block.components],
                labels_of(block.properties),
            )

        return {
            "Labels": labels_of(labels),
            "LabelsEntry": labels_of(labels)[0],
            "TensorBlock": block_of(block),
            "TensorMap": metatensor.TensorMap(keys, [block_of(b) for b in tensor]),
        }

    labels, block, tensor = _labels(), _block(), _map()
    objects = {("metatensor", "blockmap.from_metatensor("): core(labels, block, tensor)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch_objects = {
            kind: blockmap.metatensor_torch.to_metatensor_torch(obj)
            if kind != "LabelsEntry"
            else None
            for kind, obj in {
                "Labels": labels,
                "TensorBlock": block,
                "TensorMap": tensor,
                "LabelsEntry": None,
            }.items()
        }
    torch_objects["LabelsEntry"] = torch_objects["Labels"][0]
    objects[("metatensor.torch", "blockmap.from_metatensor_torch(")] = torch_objects
    return objects


def _importable(*names):
    try:
        with warnings.catch_warnings():
            # metatensor-torch's import warns about torch.jit.script
            warnings.simplefilter("ignore")
            for name in names:
                importlib.import_module(name)
    except ImportError:
        return False
    return True


#: metatensor's objects are made, and blockmap's operations and dask
#: serializers reached, where those libraries are installed (not where an
#: installed wheel is tested alone)
HAS_FOREIGN = _importable("metatensor", "metatensor.torch", "metatensor_operations", "distributed")
FOREIGN = _foreign_objects() if HAS_FOREIGN else {}
needs_foreign = pytest.mark.skipif(
    not HAS_FOREIGN,
    reason="metatensor-core, metatensor-torch, metatensor-operations or distributed missing",
)

# the parameters that take blockmap's objects, and the kind each takes
# (a list: a list of that kind)
BLOCKMAP_PARAMETERS = {
    "data": "TensorMap",
    "obj": "TensorMap",
    "other": "Labels",
    "selection": "Labels",
    "keys_to_move": "Labels",
    "keys": "Labels",
    "blocks": ["TensorBlock"],
    "samples": "Labels",
    "components": ["Labels"],
    "properties": "Labels",
    "gradient": "TensorBlock",
    "entry": "LabelsEntry",
    "maps": ["TensorMap"],
    "tensors": ["TensorMap"],
    "tensor": "TensorMap",
    "block": "TensorBlock",
    "selections": ["Labels"],
}


def _foreign_calls(function, plausible, objects):
    """(description, call) with one metatensor object where ``function``
    takes one of blockmap's, every other argument of the right kind."""
    try:
        signature = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return
    parameters = [
        p
        for p in signature.values()
        if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    for i, parameter in enumerate(parameters):
        kind = BLOCKMAP_PARAMETERS.get(parameter.name)
        if kind is None:
            continue
        foreign = [objects[kind[0]]] if isinstance(kind, list) else objects[kind]
        if parameter.kind == parameter.KEYWORD_ONLY:
            positional = [plausible[p.name] for p in parameters if p.default is p.empty]
            yield (
                parameter.name,
                lambda a=positional, k={parameter.name: foreign}: function(*a, **k),
            )
        elif parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            before = [plausible[p.name] for p in parameters[:i]]
            after = [plausible[p.name] for p in parameters[i + 1 :] if p.default is p.empty]
            yield parameter.name, lambda a=[*before, foreign, *after]: function(*a)


# where a metatensor object is a valid argument: a LabelsEntry is a
# sequence of integers, as an entry may be given
ACCEPTS_FOREIGN = {("Labels.position", "entry")}


def _refused_naming_the_conversion(what, call, library, conversion):
    """Whether ``call`` raised BlockMapTypeError naming the object's library
    class and its conversion (False: it accepted the object)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call()
    except blockmap.BlockMapTypeError as error:
        message = str(error)
        assert conversion in message or "list(entry)" in message, f"{what}: {message}"
        assert f"{library}." in message, f"{what}: {message}"
        return True
    except BaseException as error:
        raise AssertionError(f"{what}: {type(error).__name__}: {error}") from error
    return False


@needs_foreign
@pytest.mark.parametrize(
    ("name", "function", "count"), ENTRY_POINTS, ids=[name for name, _, _ in ENTRY_POINTS]
)
def test_metatensor_objects_are_refused_naming_the_conversion(
    name, function, count, tmp_path, monkeypatch
):
    if " class." in name and count == 2:
        # an unbound method given a metatensor object as `self`: Python's
        # own descriptor check refuses it before blockmap's code runs
        return
    monkeypatch.chdir(tmp_path)
    plausible = _plausible(tmp_path)
    if name == "blockmap.save_dataset":
        # a new dataset: an existing path is refused before the maps are read
        plausible = {**plausible, "path": str(tmp_path / "new.data")}
    for (library, conversion), objects in FOREIGN.items():
        for parameter, call in _foreign_calls(function, plausible, objects):
            what = f"{name}({parameter}={library} object)"
            refused = _refused_naming_the_conversion(what, call, library, conversion)
            assert refused != ((name, parameter) in ACCEPTS_FOREIGN), what


@needs_foreign
def test_metatensor_objects_given_to_the_python_entry_points(tmp_path):
    tensor, block = _map(), _block()
    checked = 0
    for (library, conversion), objects in FOREIGN.items():
        calls = {
            "DatasetWriter.write": lambda o=objects, n=library: blockmap.DatasetWriter(
                tmp_path / f"{n}.data"
            ).write(o["TensorMap"]),
            "share_memory": lambda o=objects: blockmap.share_memory(o["TensorMap"]),
            "dask.serialize": lambda o=objects: DASK.serialize(o["TensorBlock"]),
            "equal(ours, theirs)": lambda o=objects: blockmap.equal(tensor, o["TensorMap"]),
            "equal(theirs, ours)": lambda o=objects: blockmap.equal(o["TensorMap"], tensor),
            "allclose_block": lambda o=objects: blockmap.allclose_block(block, o["TensorBlock"]),
            "add": lambda o=objects: blockmap.add(tensor, o["TensorMap"]),
            "drop_blocks": lambda o=objects: blockmap.drop_blocks(tensor, o["Labels"]),
            "operations.join": lambda o=objects: blockmap.operations.join(
                [tensor, o["TensorMap"]], "samples"
            ),
            "TensorMap(keys, [block])": lambda o=objects: blockmap.TensorMap(
                blockmap.Labels.range("k", 1), [o["TensorBlock"]]
            ),
        }
        for what, call in calls.items():
            assert _refused_naming_the_conversion(what, call, library, conversion), what
            checked += 1
    assert checked == 20


@needs_foreign
def test_the_conversions_named_are_at_the_top_level():
    # lazily: `import blockmap` imports neither metatensor nor torch
    assert "from_metatensor" in dir(blockmap)
    assert blockmap.from_metatensor is blockmap.metatensor.from_metatensor
    assert blockmap.from_metatensor_torch is blockmap.metatensor_torch.from_metatensor_torch
    labels = FOREIGN[("metatensor", "blockmap.from_metatensor(")]["Labels"]
    assert blockmap.from_metatensor(labels) == _labels()
