"""Fuzz of the pickle reconstructor ``blockmap._blockmap._reconstruct``.

Hypothesis mutates real pickles (docs/pickle.md): version 3 headers (fields
replaced by other JSON values or by near-miss shapes, dtypes, counts, names
and kinds; fields removed or added; blocks duplicated, swapped or nested as
gradients; the JSON text cut or sprinkled with garbage bytes), its buffers
(missing, extra, swapped, shorter, longer, overwritten) delivered as every
kind of object a transport hands over (bytes, bytearray, memoryviews at odd
addresses and read-only, pickle buffers, aligned, misaligned, strided and
typed numpy arrays, non-buffers), and version 0 archives (bytes flipped,
cut, inserted, spliced from another archive, ZIP and NPY header fields
overwritten). Each call must return a Labels, TensorBlock or TensorMap that
then saves and loads back equal, or raise a ``blockmap.BlockMapError``:
never crash, never panic, never another exception.

The examples run in a child process (one for version 3, one for version 0,
at the same time), so a crash fails the test instead of killing pytest.
Before each call the child writes the input to a file, so the test failure
shows the input a crash happened on. Deterministic (derandomized);
``BLOCKMAP_FUZZ_EXAMPLES=<n>`` runs ``n`` random examples per child instead.
"""

import collections
import copy
import json
import os
import pickle
import signal
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest

from helpers import TESTS_DIR

pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent

# ~15 s each on an idle 2-core machine, both children running at once
DEFAULT_EXAMPLES = {"v1": 900, "v0": 1200}
CHILD_TIMEOUT = 300

# ----------------------------------------------------------------- inputs


def _pool():
    """Real objects to mutate: maps of every element type, the map, block and
    labels cases of the I/O tests."""
    from helpers.dtypes import ALL_DTYPES
    from helpers.io_cases import BLOCK_CASES, LABELS_CASES, MAP_CASES, make_map
    from helpers.pickle_cases import crafted_map

    rng = np.random.default_rng(0xF022)
    objects = [crafted_map()]
    for dtype in ALL_DTYPES:
        objects.append(make_map(rng, dtype, n_samples=(2, 1), component_sizes=(2,)))
    for case in ("no_components", "two_components", "empty_blocks", "zero_blocks", "info"):
        objects.append(MAP_CASES[case](rng, np.float32))
    for case in BLOCK_CASES.values():
        objects.append(case(rng, np.float64))
    objects.append(objects[0].block(0).gradient("positions"))
    objects += [case() for case in LABELS_CASES.values()]
    return objects


def _v1_parts(objects):
    """``(header as a dict, [bytes per buffer])`` of each object."""
    parts = []
    for data in objects:
        _, (version, header, *buffers) = data.__reduce_ex__(5)
        assert version == 3
        parts.append((json.loads(header), [bytes(b.raw()) for b in buffers]))
    return parts


def _v0_parts(objects):
    """``(kind, archive bytes)`` of each object, and of archives that are
    well formed but break the data model (so that the fuzz reaches
    ValidationError by more than chance: 1 input in 1,200 did before)."""
    parts = []
    for data in objects:
        _, (version, kind, archive) = data.__reduce_ex__(4)
        assert version == 0
        parts.append((kind, bytes(archive)))
    return parts + _invalid_archives()


def _invalid_archives():
    from helpers.io_cases import make_map, tensor_entries_dict, write_archive

    tensor = make_map(
        np.random.default_rng(7), n_samples=(2, 1), component_sizes=(2,), gradients=False
    )
    twice = tensor_entries_dict(tensor)
    samples = twice["blocks/0/samples.npy"].copy()
    samples[1] = samples[0]  # a sample entry twice
    twice["blocks/0/samples.npy"] = samples
    mixed = tensor_entries_dict(tensor)
    mixed["blocks/1/values.npy"] = mixed["blocks/1/values.npy"].astype(np.float32)
    return [("tensor", write_archive(twice)), ("tensor", write_archive(mixed))]


DTYPE_STRINGS = [
    "<f8", ">f8", "=f8", "|f8", "f8", "<f4", ">f4", "<f2", "<c8", "<c16", ">c16",
    "<i1", "|i1", "|u1", "<i2", "<i4", ">i4", "<i8", "<u2", "<u4", "<u8", "|b1",
    "<b1", "<f16", "<c32", "<U3", "|O", "<M8", "|V8", "|S4", "", "<", "<f",
    "<x9", "<f8 ", "f", "\u00e9", "<i4\x00",
]  # fmt: skip
KINDS = ["tensor", "block", "labels", "Tensor", "", "gradient", "labels\x00", 3, None]
ODD_NAMES = ["", "1a", "a b", "a-b", "\u00e9", "_", "sample", "a" * 300, "x\x00", 0, None]
NUMBERS = [0, 1, 2, 3, -1, 7, 2**31 - 1, 2**31, 2**32, 2**53, 2**63 - 1, 2**63, 2**64, 2**100]

json_scalars = st.one_of(
    st.sampled_from(NUMBERS),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.none(),
    st.booleans(),
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)


def _nodes(value, path=()):
    """Every ``(path, value)`` in a JSON document, the root included."""
    found = [(path, value)]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _nodes(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _nodes(child, (*path, index))
    return found


def _get(document, path):
    for key in path:
        document = document[key]
    return document


@st.composite
def _replacement(draw, key, value):
    """A value for the field ``key`` that was ``value``: a near miss for the
    fields the reconstructor knows, any JSON value otherwise."""
    if draw(st.integers(0, 4)) == 0:
        return draw(json_values)
    if key == "shape" and isinstance(value, list):
        shape = list(value)
        how = draw(st.sampled_from(["tweak", "append", "drop", "empty", "swap"]))
        if how == "tweak" and shape:
            index = draw(st.integers(0, len(shape) - 1))
            shape[index] = draw(
                st.sampled_from(
                    [shape[index] + 1, shape[index] - 1, 0, 2 * shape[index], -1, 2**62, 2**64]
                )
            )
        elif how == "append":
            shape.insert(draw(st.integers(0, len(shape))), draw(st.sampled_from([0, 1, 2])))
        elif how == "drop" and shape:
            del shape[draw(st.integers(0, len(shape) - 1))]
        elif how == "empty":
            shape = []
        elif how == "swap" and len(shape) > 1:
            shape[0], shape[-1] = shape[-1], shape[0]
        return shape
    if key == "count":
        base = value if isinstance(value, int) else 0
        return draw(st.sampled_from([base + 1, base - 1, 0, 2 * base, *NUMBERS]))
    if key == "dtype":
        return draw(st.sampled_from(DTYPE_STRINGS))
    if key == "kind":
        return draw(st.sampled_from(KINDS))
    if key == "names" and isinstance(value, list):
        names = list(value)
        how = draw(st.sampled_from(["drop", "add", "repeat", "odd", "reverse"]))
        if how == "drop" and names:
            del names[draw(st.integers(0, len(names) - 1))]
        elif how == "add":
            names.append(draw(st.sampled_from(["extra", "sample", "x"])))
        elif how == "repeat" and names:
            names.append(names[0])
        elif how == "odd":
            names.insert(draw(st.integers(0, len(names))), draw(st.sampled_from(ODD_NAMES)))
        else:
            names.reverse()
        return names
    return draw(json_values)


def _block_like(document):
    """Paths of the dicts that describe a block (they have a shape)."""
    return [
        path for path, value in _nodes(document) if isinstance(value, dict) and "shape" in value
    ]


@st.composite
def _mutated_header(draw, header):
    header = copy.deepcopy(header)
    for _ in range(draw(st.integers(1, 3))):
        nodes = _nodes(header)
        how = draw(st.sampled_from(["replace", "replace", "delete", "add", "duplicate", "nest"]))
        if how == "nest" and _block_like(header):
            # a copy of a block (or a gradient) as a gradient of another one
            blocks = _block_like(header)
            source = copy.deepcopy(_get(header, draw(st.sampled_from(blocks))))
            if draw(st.booleans()):
                source.pop("properties", None)
            target = _get(header, draw(st.sampled_from(blocks)))
            if not isinstance(target.get("gradients"), dict):
                target["gradients"] = {}
            target["gradients"][draw(st.sampled_from(["g", "positions", "a b", ""]))] = source
            continue
        path, value = draw(st.sampled_from(nodes))
        if how == "replace":
            if not path:
                return draw(json_values)
            parent = _get(header, path[:-1])
            parent[path[-1]] = draw(_replacement(path[-1], value))
        elif how == "delete" and path:
            del _get(header, path[:-1])[path[-1]]
        elif how == "add" and isinstance(value, dict):
            key = draw(st.sampled_from(["extra", "gradients", "properties", "info", "kind"]))
            value[key] = draw(json_values)
        elif how == "duplicate" and isinstance(value, list) and value:
            index = draw(st.integers(0, len(value) - 1))
            value.insert(draw(st.integers(0, len(value))), copy.deepcopy(value[index]))
    return header


@st.composite
def _mutated_bytes(draw, data, max_edits=3):
    """``data`` with a few bytes flipped, set, inserted or removed, or cut."""
    data = bytearray(data)
    for _ in range(draw(st.integers(1, max_edits))):
        how = draw(st.sampled_from(["flip", "set", "insert", "delete", "cut"]))
        position = draw(st.integers(0, max(len(data) - 1, 0)))
        if how == "flip" and data:
            data[position] ^= 1 << draw(st.integers(0, 7))
        elif how == "set" and data:
            data[position] = draw(st.sampled_from([0, 0xFF, 0x22, 0x5C, 0x7B, 0x80]))
        elif how == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif how == "delete":
            del data[position : position + draw(st.integers(1, 16))]
        else:
            del data[position:]
    return bytes(data)


@st.composite
def _header_bytes(draw, header):
    how = draw(st.sampled_from(["json", "json", "json", "raw", "binary", "not bytes", "duplicate"]))
    if how == "json":
        return json.dumps(draw(_mutated_header(header))).encode()
    text = json.dumps(header).encode()
    if how == "raw":
        return draw(_mutated_bytes(text))
    if how == "binary":
        return draw(st.binary(max_size=64))
    if how == "duplicate":
        # a key twice: serde refuses duplicate fields
        return text[:-1] + b', "kind": "labels"}'
    return draw(st.sampled_from(["{}", 0, None, 1.5, [text], bytearray(text), memoryview(text)]))


def _seeded_bytes(seed, size):
    return np.random.default_rng(seed).bytes(size)


@st.composite
def _mutated_buffers(draw, buffers):
    buffers = list(buffers)
    for _ in range(draw(st.integers(0, 3))):
        how = draw(
            st.sampled_from(["drop", "duplicate", "swap", "insert", "resize", "random", "int32"])
        )
        if not buffers and how != "insert":
            continue
        index = draw(st.integers(0, max(len(buffers) - 1, 0)))
        if how == "drop":
            del buffers[index]
        elif how == "duplicate":
            buffers.insert(index, buffers[index])
        elif how == "swap":
            other = draw(st.integers(0, len(buffers) - 1))
            buffers[index], buffers[other] = buffers[other], buffers[index]
        elif how == "insert":
            buffers.insert(index, draw(st.binary(max_size=32)))
        elif how == "resize":
            size = len(buffers[index])
            new_size = draw(
                st.sampled_from([0, 1, size - 1, size + 1, size - 8, size + 8, 2 * size])
            )
            buffers[index] = (buffers[index] + bytes(max(new_size - size, 0)))[: max(new_size, 0)]
        elif how == "random":
            seed = draw(st.integers(0, 2**32 - 1))
            buffers[index] = _seeded_bytes(seed, len(buffers[index]))
        elif len(buffers[index]) >= 4:
            # one int32 (a label value, or part of a value) set to a near miss
            data = bytearray(buffers[index])
            offset = 4 * draw(st.integers(0, len(data) // 4 - 1))
            value = draw(st.sampled_from([0, -1, 1, 2**31 - 1, -(2**31), 99]))
            data[offset : offset + 4] = np.int32(value).tobytes()
            buffers[index] = bytes(data)
    return buffers


def _aligned_copy(data, offset):
    store = np.zeros(len(data) + 128, dtype=np.uint8)
    start = (-store.ctypes.data) % 64 + offset
    view = store[start : start + len(data)]
    view[:] = np.frombuffer(data, dtype=np.uint8)
    return view


TYPED = ["<f8", "<i4", "<c16", "<f2", "|b1", ">f8", "<u8"]
WRAPPERS = [
    "bytes", "bytearray", "memoryview", "readonly memoryview", "odd address",
    "pickle buffer", "numpy", "readonly numpy", "numpy offset", "strided", "typed",
    "cast",
]  # fmt: skip


@st.composite
def _wrapped(draw, data, wrapper=None):
    """``data`` delivered as the kind of object ``wrapper`` names."""
    wrapper = draw(st.sampled_from(WRAPPERS)) if wrapper is None else wrapper
    if wrapper == "bytes":
        return bytes(data)
    if wrapper == "bytearray":
        return bytearray(data)
    if wrapper == "memoryview":
        return memoryview(bytearray(data))
    if wrapper == "readonly memoryview":
        return memoryview(bytes(data))
    if wrapper == "odd address":
        offset = draw(st.integers(1, 7))
        return memoryview(bytearray(offset) + bytearray(data))[offset:]
    if wrapper == "pickle buffer":
        return pickle.PickleBuffer(bytearray(data))
    if wrapper in ("numpy", "readonly numpy"):
        array = _aligned_copy(data, 0)
        array.flags.writeable = wrapper == "numpy"
        return array
    if wrapper == "numpy offset":
        return _aligned_copy(data, draw(st.sampled_from([1, 2, 4, 8, 12, 32])))
    if wrapper == "strided":
        store = np.zeros(2 * len(data) + 1, dtype=np.uint8)
        view = store[1::2][: len(data)]
        view[:] = np.frombuffer(data, dtype=np.uint8)
        return view
    if wrapper in ("typed", "cast"):
        dtype = np.dtype(draw(st.sampled_from(TYPED)))
        if len(data) % dtype.itemsize:
            return bytes(data)
        array = _aligned_copy(data, 0).view(dtype)
        if wrapper == "cast":
            return memoryview(array).cast("B").cast("I") if len(data) % 4 == 0 else array
        if array.size and array.size % 2 == 0 and draw(st.booleans()):
            array = array.reshape(2, -1)
            if draw(st.booleans()):
                array = array.T  # not C-contiguous
        return array
    raise AssertionError(wrapper)


NOT_BUFFERS = st.sampled_from([None, 0, "text", [1, 2], 1.5, object()])


@st.composite
def _version(draw, real):
    if draw(st.integers(0, 15)):
        return real
    return draw(st.sampled_from([0, 1, 2, 3, 4, -1, 2**70, "3", 3.0, True, None, b"\x03"]))


@st.composite
def v1_inputs(draw, parts):
    """``(version, header, *buffers)``: a version 3 pickle, mutated (also
    read as version 1, which refuses its references to earlier labels)."""
    header, buffers = draw(st.sampled_from(parts))
    what = draw(st.sampled_from(["header", "buffers", "both", "wrappers"]))
    header_bytes = json.dumps(header).encode()
    if what in ("header", "both"):
        header_bytes = draw(_header_bytes(header))
    if what in ("buffers", "both"):
        buffers = draw(_mutated_buffers(buffers))
    same = draw(st.sampled_from([None, "bytes", "bytearray", "odd address", "typed"]))
    wrapped = [draw(_wrapped(buffer, same)) for buffer in buffers]
    if wrapped and not draw(st.integers(0, 9)):
        wrapped[draw(st.integers(0, len(wrapped) - 1))] = draw(NOT_BUFFERS)
    return (draw(_version(3)), header_bytes, *wrapped)


# offsets of the fields of ZIP records that say where and how big things are
ZIP_FIELDS = {
    b"PK\x03\x04": [(8, 2), (14, 4), (18, 4), (22, 4), (26, 2), (28, 2)],
    b"PK\x01\x02": [(10, 2), (16, 4), (20, 4), (24, 4), (28, 2), (30, 2), (32, 2), (42, 4)],
    b"PK\x05\x06": [(8, 2), (10, 2), (12, 4), (16, 4), (20, 2)],
    b"PK\x06\x06": [(24, 8), (32, 8), (40, 8), (48, 8)],
    b"PK\x06\x07": [(8, 8)],
    b"\x93NUMPY": [(6, 1), (7, 1), (8, 2), (8, 4)],
}


def _occurrences(data, signature):
    found, start = [], data.find(signature)
    while start >= 0:
        found.append(start)
        start = data.find(signature, start + 1)
    return found


@st.composite
def _mutated_archive(draw, archive, other_archives):
    data = bytearray(archive)
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["field", "field", "npy header", "bytes", "splice", "random"]))
        if how == "field":
            signature = draw(st.sampled_from(list(ZIP_FIELDS)))
            starts = _occurrences(data, signature)
            if not starts:
                continue
            start = draw(st.sampled_from(starts))
            offset, size = draw(st.sampled_from(ZIP_FIELDS[signature]))
            old = int.from_bytes(data[start + offset : start + offset + size], "little")
            value = draw(
                st.sampled_from([0, 1, old + 1, old - 1, old + 64, 2 ** (8 * size) - 1, 2**31])
            )
            value %= 2 ** (8 * size)
            data[start + offset : start + offset + size] = value.to_bytes(size, "little")
        elif how == "npy header":
            starts = _occurrences(data, b"\x93NUMPY")
            if not starts:
                continue
            start = draw(st.sampled_from(starts))
            end = data.find(b"}", start)
            text = bytes(data[start:end])
            old = draw(
                st.sampled_from([b"'descr': '", b"'shape': (", b"False", b"'fortran_order'"])
            )
            new = draw(
                st.sampled_from(
                    [b"'descr': '>", b"'descr': '|O", b"'shape': (-1, ", b"'shape': (99999999999, ",
                     b"'shape': (0, ", b"True", b"'fortran_order': 0, 'x'", b"'shape': ((1,), "]
                )
            )  # fmt: skip
            data[start:end] = text.replace(old, new, 1)
        elif how == "bytes":
            data = bytearray(draw(_mutated_bytes(bytes(data), max_edits=2)))
        elif how == "splice" and data:
            other = draw(st.sampled_from(other_archives))
            start = draw(st.integers(0, len(data) - 1))
            length = draw(st.integers(1, 256))
            source = draw(st.integers(0, max(len(other) - length, 0)))
            data[start : start + length] = other[source : source + length]
        elif how == "random" and data:
            start = draw(st.integers(0, len(data) - 1))
            length = draw(st.integers(1, 64))
            data[start : start + length] = _seeded_bytes(draw(st.integers(0, 2**32)), length)
    return bytes(data)


@st.composite
def v0_inputs(draw, parts):
    """``(version, kind, archive, ...)``: a version 0 pickle, mutated."""
    kind, archive = draw(st.sampled_from(parts))
    if draw(st.integers(0, 9)):
        archive = draw(_mutated_archive(archive, [a for _, a in parts]))
    if not draw(st.integers(0, 9)):
        kind = draw(st.sampled_from(KINDS))
    archive = draw(_wrapped(archive)) if draw(st.integers(0, 19)) else draw(NOT_BUFFERS)
    args = [draw(_version(0)), kind, archive]
    if not draw(st.integers(0, 19)):
        args = args[: draw(st.integers(1, 2))] if draw(st.booleans()) else [*args, b""]
    return tuple(args)


# ------------------------------------------------------------------ child


def _describe(value):
    """A JSON description of one argument, enough to build it again."""
    if isinstance(value, np.ndarray):
        return {
            "type": "numpy",
            "dtype": value.dtype.str,
            "shape": list(value.shape),
            "strides": list(value.strides),
            "address % 64": value.ctypes.data % 64,
            "writeable": bool(value.flags.writeable),
            "hex": value.tobytes().hex(),
        }
    try:
        view = memoryview(value)
    except TypeError:
        return {"type": type(value).__name__, "repr": repr(value)[:200]}
    return {
        "type": type(value).__name__,
        "format": view.format,
        "readonly": view.readonly,
        "address % 64": np.asarray(view).ctypes.data % 64 if view.nbytes else None,
        "hex": view.tobytes().hex(),
    }


class WrongOutcome(Exception):
    """The reconstructor did something other than load or raise a BlockMapError."""


def _exercise(result):
    """Everything in a loaded object can be read, saved and loaded again."""
    import blockmap
    from helpers.io_cases import all_blocks, assert_identical

    if isinstance(result, blockmap.Labels):
        _ = result.values.tobytes()
    else:
        for _, block in all_blocks(result):
            _ = block.values.tobytes()
            _ = [c.values.tobytes() for c in block.components]
    again = pickle.loads(pickle.dumps(result, protocol=4))
    assert_identical(again, result)


def child_main(mode, n_examples, record_path, self_test=None):
    """Run ``n_examples`` fuzz inputs of ``mode`` ("v1" or "v0"); print one
    JSON line: the outcomes counted, and the failure if there was one."""
    import blockmap
    from blockmap import Labels, TensorBlock, TensorMap
    from blockmap._blockmap import _reconstruct

    objects = _pool()
    if mode == "v1":
        strategy = v1_inputs(_v1_parts(objects))
    else:
        strategy = v0_inputs(_v0_parts(objects))
    outcomes = collections.Counter()
    messages = set()
    record = os.open(record_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    reconstruct = _reconstruct
    if self_test == "crash":
        reconstruct = lambda *args: os.abort()  # noqa: E731
    elif self_test == "wrong exception":
        reconstruct = lambda *args: {}[0]  # noqa: E731

    random_examples = os.environ.get("BLOCKMAP_FUZZ_EXAMPLES")

    @settings(
        max_examples=int(random_examples or n_examples),
        derandomize=not random_examples,
        # the self-tests fail every time: no need to look for a smaller input
        phases=[Phase.generate] if self_test else list(Phase),
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(args=strategy)
    def run(args):
        described = json.dumps([_describe(a) for a in args]).encode()
        os.ftruncate(record, 0)
        os.pwrite(record, described, 0)
        try:
            result = reconstruct(*args)
        except blockmap.BlockMapError as error:
            outcomes[type(error).__name__] += 1
            messages.add(str(error)[:40])
            return
        except BaseException as error:  # noqa: B036 - PanicException is a BaseException
            name = f"{type(error).__module__}.{type(error).__qualname__}"
            raise WrongOutcome(f"raised {name}: {error}") from error
        if not isinstance(result, Labels | TensorBlock | TensorMap):
            raise WrongOutcome(f"returned a {type(result).__name__}")
        try:
            _exercise(result)
        except BaseException as error:  # noqa: B036
            name = f"{type(error).__module__}.{type(error).__qualname__}"
            raise WrongOutcome(f"loaded a {type(result).__name__}, then {name}: {error}") from error
        outcomes[f"loaded {type(result).__name__}"] += 1

    failure = None
    try:
        run()
    except Exception:
        # hypothesis ran the smallest failing example last: the record holds it
        failure = {
            "error": traceback.format_exc()[-6000:],
            "input": json.loads(Path(record_path).read_text()),
        }
    print(
        json.dumps(
            {"outcomes": dict(outcomes), "distinct messages": len(messages), "failure": failure}
        ),
        flush=True,
    )


# ------------------------------------------------------------------ tests


def _start(mode, n_examples, record_path, self_test=None):
    code = (
        f"import sys; sys.path[:0] = [{str(HERE)!r}, {str(TESTS_DIR)!r}]; "
        "import test_reconstruct_fuzz as f; "
        f"f.child_main({mode!r}, {n_examples}, {str(record_path)!r}, {self_test!r})"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(child, record_path):
    """The child's report; a crash or a timeout fails, with the input it was on."""
    try:
        stdout, stderr = child.communicate(timeout=CHILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        child.kill()
        stdout, stderr = child.communicate()
        how = f"timed out after {CHILD_TIMEOUT} s"
    else:
        how = None
        if child.returncode < 0:
            how = f"died of signal {signal.Signals(-child.returncode).name}"
        elif child.returncode > 0:
            how = f"exited with code {child.returncode}"
    if how is not None:
        last_input = Path(record_path).read_text() if Path(record_path).exists() else "(none)"
        pytest.fail(
            f"the fuzz process {how}; the input it was on:\n{last_input[:20000]}\n"
            f"stderr:\n{stderr[-6000:]}"
        )
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def fuzz_reports(tmp_path_factory):
    """Both children started at once (two cores), then waited for."""
    directory = tmp_path_factory.mktemp("fuzz")
    children = {}
    for mode, n_examples in DEFAULT_EXAMPLES.items():
        record_path = directory / f"{mode}-input.json"
        children[mode] = (_start(mode, n_examples, record_path), record_path)
    reports = {}
    for mode, (child, record_path) in children.items():
        try:
            reports[mode] = _finish(child, record_path)
        except BaseException as error:  # noqa: B036 - the other test still runs
            reports[mode] = error
    return reports


def _check_report(report):
    if isinstance(report, BaseException):
        raise report
    failure = report["failure"]
    assert failure is None, f"{failure['error']}\ninput: {json.dumps(failure['input'])[:20000]}"
    outcomes = report["outcomes"]
    # the fuzz reaches both sides: inputs that load and inputs refused for
    # many different reasons, by both kinds of error
    assert sum(n for kind, n in outcomes.items() if kind.startswith("loaded")) > 0, outcomes
    assert outcomes.get("FormatError", 0) > 0, outcomes
    assert outcomes.get("ValidationError", 0) > 0, outcomes
    assert report["distinct messages"] >= 20, report


def test_reconstruct_fuzz_version_1(fuzz_reports):
    _check_report(fuzz_reports["v1"])


def test_reconstruct_fuzz_version_0(fuzz_reports):
    _check_report(fuzz_reports["v0"])


def test_fuzz_reports_a_crash_with_its_input(tmp_path):
    record_path = tmp_path / "input.json"
    child = _start("v1", 5, record_path, self_test="crash")
    with pytest.raises(pytest.fail.Exception, match="SIGABRT") as failed:
        _finish(child, record_path)
    assert '"hex"' in str(failed.value)


def test_fuzz_reports_a_wrong_exception(tmp_path):
    record_path = tmp_path / "input.json"
    report = _finish(_start("v0", 5, record_path, self_test="wrong exception"), record_path)
    assert "raised builtins.KeyError" in report["failure"]["error"]
    described = report["failure"]["input"]  # one description per argument
    assert len(described) >= 2
    assert all("type" in argument for argument in described)
