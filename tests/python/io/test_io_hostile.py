"""Hostile input for the ``.mts`` reader: every malformed file raises a clean error.

Each case crafts the bytes of an archive by hand (our own zip and npy writers,
so that any size, offset, CRC or header field can lie), writes them to a file
and loads them in a child process: ``load_buffer`` (on ``bytes`` and on a
64-byte aligned numpy buffer), ``load(path)``, ``load(path, mmap=True)`` and
``verify(path)``. The child runs under a 2 GiB address-space limit, prints which
load it starts before starting it, and reports the class names of what each load
raised. A crash, an abort, a failed allocation or a hang fails the test that
names the case instead of killing the pytest run.

The expected error is a :class:`blockmap.ValidationError` (``FormatError`` is
one): a :class:`blockmap.BlockMapError` and a :class:`ValueError`.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import struct
import subprocess
import sys
import zipfile
import zlib

import numpy as np
import pytest

import blockmap

# ------------------------------------------------------------------ npy writer

NPY_MAGIC = b"\x93NUMPY"


def npy_bytes(
    descr,
    shape,
    body: bytes,
    *,
    fortran_order=False,
    version=(1, 0),
    header: str | bytes | None = None,
    header_len: int | None = None,
    magic: bytes = NPY_MAGIC,
) -> bytes:
    """An npy file: ``magic``, ``version``, the header length, the header dict
    (space-padded so that the data starts on a multiple of 64 bytes, ending
    with a newline), then ``body``. ``header`` replaces the dict text and
    ``header_len`` the length field, so that either can lie."""
    if header is None:
        header = f"{{'descr': {descr!r}, 'fortran_order': {fortran_order!r}, 'shape': {shape!r}, }}"
    if isinstance(header, str):
        # latin-1 in versions 1 and 2, UTF-8 in version 3
        header = header.encode("utf-8" if version[0] >= 3 else "latin-1")
    text = header
    length_size = 2 if version[0] == 1 else 4
    preamble = len(magic) + 2 + length_size
    text += b" " * (-(preamble + len(text) + 1) % 64) + b"\n"
    if header_len is None:
        header_len = len(text)
    length = struct.pack("<H" if length_size == 2 else "<I", header_len)
    return magic + bytes(version) + length + text + body


def array_npy(array: np.ndarray, **kwargs) -> bytes:
    array = np.ascontiguousarray(array)
    return npy_bytes(array.dtype.str, array.shape, array.tobytes(), **kwargs)


def labels_npy(
    names, rows, *, field="<i4", body: bytes | None = None, shape=None, **kwargs
) -> bytes:
    """A Labels entry: a 1-D structured array with one ``field`` per name."""
    rows = np.asarray(rows, dtype=np.int32).reshape(len(rows), len(names))
    if body is None:
        body = rows.astype(np.dtype(field)).tobytes()
    if shape is None:
        shape = (len(rows),)
    return npy_bytes([(name, field) for name in names], shape, body, **kwargs)


# ------------------------------------------------------------------ zip writer

STORED = 0
DEFLATED = 8
# 2000-01-01 00:00, as metatensor writes it
DOS_DATE = ((2000 - 1980) << 9) | (1 << 5) | 1
DOS_TIME = 0


def deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush()


@dataclasses.dataclass
class Entry:
    """One zip entry. The ``declared_*`` fields, ``crc``, ``flags`` and
    ``local_offset`` replace what the headers would truthfully say."""

    name: str
    data: bytes
    method: int = STORED
    payload: bytes | None = None  # the stored bytes; default: data (deflated if DEFLATED)
    crc: int | None = None
    declared_size: int | None = None  # uncompressed size in both headers
    declared_compressed_size: int | None = None
    central_crc: int | None = None  # a CRC in the central directory only
    local_offset: int | None = None  # the central directory's pointer to the local header
    flags: int = 0


@dataclasses.dataclass
class Layout:
    """Where things landed in an archive written by :func:`zip_bytes`."""

    data_offset: dict[str, int]
    data_size: dict[str, int]
    central_directory: int
    end_of_central_directory: int


def zip_bytes(entries: list[Entry], *, shift: int = 0) -> tuple[bytes, Layout]:
    """A zip archive of ``entries`` (in order), every payload starting
    ``shift`` bytes after a 64-byte boundary of the archive (padding in an extra
    field of the local header: 0xa11e, as the ``zip`` crate writes it, when
    ``shift`` is 0; an unknown id otherwise)."""
    out = bytearray()
    central = bytearray()
    data_offset = {}
    data_size = {}
    for entry in entries:
        name = entry.name.encode()
        if entry.payload is not None:
            payload = entry.payload
        elif entry.method == DEFLATED:
            payload = deflate(entry.data)
        else:
            payload = entry.data
        crc = zlib.crc32(entry.data) if entry.crc is None else entry.crc
        size = len(entry.data) if entry.declared_size is None else entry.declared_size
        compressed = (
            len(payload)
            if entry.declared_compressed_size is None
            else entry.declared_compressed_size
        )
        offset = len(out)
        pad = (shift - (offset + 30 + len(name))) % 64
        if pad < 6:
            pad += 64
        extra = struct.pack("<HHH", 0xCAFE if shift else 0xA11E, pad - 4, 64) + bytes(pad - 6)
        out += struct.pack(
            "<IHHHHHIIIHH",
            0x04034B50,
            20,
            entry.flags,
            entry.method,
            DOS_TIME,
            DOS_DATE,
            crc,
            compressed,
            size,
            len(name),
            len(extra),
        )
        out += name + extra
        data_offset[entry.name] = len(out)
        data_size[entry.name] = len(payload)
        out += payload
        central += struct.pack(
            "<IHHHHHHIIIHHHHHII",
            0x02014B50,
            20,
            20,
            entry.flags,
            entry.method,
            DOS_TIME,
            DOS_DATE,
            crc if entry.central_crc is None else entry.central_crc,
            compressed,
            size,
            len(name),
            0,
            0,
            0,
            0,
            0,
            offset if entry.local_offset is None else entry.local_offset,
        )
        central += name
    central_offset = len(out)
    out += central
    end = len(out)
    out += struct.pack(
        "<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), central_offset, 0
    )
    return bytes(out), Layout(data_offset, data_size, central_offset, end)


# ------------------------------------------------------------ a valid archive

KEYS = [[0], [1]]
SAMPLE_NAMES = ["system", "atom"]
SAMPLES = [[0, 0], [0, 1]]
COMPONENT = [[0], [1], [2]]
PROPERTIES = [[0], [1]]
GRADIENT_SAMPLE_NAMES = ["sample", "atom"]
N_GRADIENT_SAMPLES = 24
GRADIENT_SAMPLES = [[i % len(SAMPLES), i] for i in range(N_GRADIENT_SAMPLES)]
XYZ = [[0], [1], [2]]
INFO = {"creator": "hostile tests", "units": "eV"}


def block_values(b: int) -> np.ndarray:
    return np.arange(12, dtype=np.float64).reshape(2, 3, 2) + 100 * b


def gradient_values(b: int) -> np.ndarray:
    shape = (N_GRADIENT_SAMPLES, 3, 3, 2)
    return np.arange(np.prod(shape), dtype=np.float64).reshape(shape) - 1000 * b


def block_entries(prefix: str, b: int, gradients=("positions",)) -> dict[str, bytes]:
    entries = {
        f"{prefix}values.npy": array_npy(block_values(b)),
        f"{prefix}samples.npy": labels_npy(SAMPLE_NAMES, SAMPLES),
        f"{prefix}components/0.npy": labels_npy(["c"], COMPONENT),
        f"{prefix}properties.npy": labels_npy(["n"], PROPERTIES),
    }
    for parameter in gradients:
        g = f"{prefix}gradients/{parameter}/"
        entries[f"{g}values.npy"] = array_npy(gradient_values(b))
        entries[f"{g}samples.npy"] = labels_npy(GRADIENT_SAMPLE_NAMES, GRADIENT_SAMPLES)
        entries[f"{g}components/0.npy"] = labels_npy(["xyz"], XYZ)
        entries[f"{g}components/1.npy"] = labels_npy(["c"], COMPONENT)
    return entries


def tensor_entries() -> dict[str, bytes]:
    """The entries of a valid two-block map with a ``positions`` gradient and
    info, in metatensor's write order."""
    entries = {"keys.npy": labels_npy(["key"], KEYS)}
    for b in range(len(KEYS)):
        entries.update(block_entries(f"blocks/{b}/", b))
    entries["info.json"] = json.dumps(INFO, indent=2).encode()
    return entries


def archive(entries: dict[str, bytes], *, shift: int = 0, method: int = STORED) -> bytes:
    """The zip of ``entries``; ``shift=3`` misaligns every payload."""
    listed = [Entry(name, data, method=method) for name, data in entries.items()]
    return zip_bytes(listed, shift=shift)[0]


def rewritten(data: bytes, **options) -> bytes:
    """The archive ``data`` (whose zip structure is valid) written again with
    :func:`archive`'s ``options``."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive_file:
        entries = {name: archive_file.read(name) for name in archive_file.namelist()}
    return archive(entries, **options)


# the valid map's archive, and variants that every load must accept too
VARIANTS = {
    "aligned": {},
    "unaligned": {"shift": 3},
    "deflated": {"method": DEFLATED},
}


def with_entry(name: str, data: bytes) -> bytes:
    entries = tensor_entries()
    assert name in entries
    entries[name] = data
    return archive(entries)


def without(*names: str) -> bytes:
    entries = tensor_entries()
    for name in names:
        del entries[name]
    return archive(entries)


VALUES = "blocks/0/values.npy"
SAMPLES_ENTRY = "blocks/0/samples.npy"
GRADIENT = "blocks/0/gradients/positions/"


def values_npy(**kwargs) -> bytes:
    """blocks/0/values.npy with the given npy writer options."""
    return array_npy(block_values(0), **kwargs)


def values_header(header: str) -> bytes:
    """blocks/0/values.npy with the dict text ``header`` and the right data."""
    return with_entry(VALUES, npy_bytes(None, None, block_values(0).tobytes(), header=header))


def values_shape(shape, body: bytes | None = None) -> bytes:
    """blocks/0/values.npy declaring ``shape`` over ``body`` (default: the
    block's 96 bytes of data)."""
    body = block_values(0).tobytes() if body is None else body
    return with_entry(VALUES, npy_bytes("<f8", shape, body))


# --------------------------------------------------------------- the children

# Runs in a fresh interpreter: argv = [spec.json, address-space limit in bytes].
RUNNER = r"""
import faulthandler
import json
import resource
import sys

faulthandler.enable()
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

import numpy as np

import blockmap


def touch_labels(labels):
    labels.values.tobytes()
    list(labels.names)


def touch_block(block):
    # reading every byte of every array: a view past the end of a mapping crashes here
    block.values.tobytes()
    touch_labels(block.samples)
    for component in block.components:
        touch_labels(component)
    touch_labels(block.properties)
    for _, gradient in block.gradients():
        touch_block(gradient)


def touch_tensor(tensor):
    touch_labels(tensor.keys)
    for _, block in tensor.items():
        touch_block(block)
    dict(tensor.info())


def aligned(data):
    raw = np.empty(len(data) + 64, dtype=np.uint8)
    start = -raw.ctypes.data % 64
    view = raw[start : start + len(data)]
    view[:] = np.frombuffer(data, dtype=np.uint8)
    return view


def run(op, path):
    with open(path, "rb") as file:
        data = file.read()
    if op == "load_buffer":
        touch_tensor(blockmap.load_buffer(data))
    elif op == "load_buffer_aligned":
        touch_tensor(blockmap.load_buffer(aligned(data)))
    elif op == "load":
        touch_tensor(blockmap.load(path))
    elif op == "load_mmap":
        touch_tensor(blockmap.load(path, mmap=True))
    elif op == "verify":
        blockmap.verify(path)
    elif op == "load_block_buffer":
        touch_block(blockmap.load_block_buffer(data))
    elif op == "load_block":
        touch_block(blockmap.load_block(path))
    elif op == "load_block_mmap":
        touch_block(blockmap.load_block(path, mmap=True))
    elif op == "load_labels_buffer":
        touch_labels(blockmap.load_labels_buffer(data))
    elif op == "load_labels":
        touch_labels(blockmap.load_labels(path))
    else:
        raise AssertionError(f"unknown op {op}")


with open(sys.argv[1]) as file:
    spec = json.load(file)
for item in spec:
    for op in item["ops"]:
        print("START", item["label"], op, flush=True)
        result = {"label": item["label"], "op": op, "ok": True}
        try:
            run(op, item["path"])
        except BaseException as error:
            result["ok"] = False
            result["mro"] = [cls.__name__ for cls in type(error).__mro__]
            result["message"] = str(error)[:500]
        print("RESULT", json.dumps(result), flush=True)
"""

ADDRESS_SPACE_LIMIT = 2 << 30
CHILD_TIMEOUT = 60

TENSOR_OPS = ("load_buffer", "load_buffer_aligned", "load", "load_mmap", "verify")
BLOCK_OPS = ("load_block_buffer", "load_block", "load_block_mmap")
LABELS_OPS = ("load_labels_buffer", "load_labels")


def _child_env():
    env = dict(os.environ)
    # a small, predictable footprint under the address-space limit
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return env


def _text(output) -> str:
    if output is None:
        return ""
    return output.decode(errors="replace") if isinstance(output, bytes) else output


def _last_started(stdout: str) -> str:
    started = [line[6:] for line in stdout.splitlines() if line.startswith("START ")]
    return started[-1] if started else "(before the first load)"


def run_loads(tmp_path, files: dict[str, bytes], ops) -> dict[tuple[str, str], dict]:
    """Write each of ``files`` and run every op of ``ops`` on it in one child
    process. Fails the test (naming the file and op) on a crash or a hang."""
    items = []
    for i, (label, data) in enumerate(files.items()):
        path = tmp_path / f"case{i}.mts"
        path.write_bytes(data)
        items.append({"label": label, "path": str(path), "ops": list(ops)})
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(items))
    command = [sys.executable, "-c", RUNNER, str(spec), str(ADDRESS_SPACE_LIMIT)]
    try:
        child = subprocess.run(
            command, capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=_child_env()
        )
    except subprocess.TimeoutExpired as expired:
        hung_in = _last_started(_text(expired.stdout))
    else:
        hung_in = None
    if hung_in is not None:
        pytest.fail(f"hang: no answer after {CHILD_TIMEOUT} s in {hung_in}")
    if child.returncode != 0:
        how = f"return code {child.returncode}"
        if child.returncode < 0:
            how = f"signal {signal.Signals(-child.returncode).name}"
        pytest.fail(
            f"the loading process died ({how}) in {_last_started(child.stdout)}\n"
            f"stderr:\n{child.stderr[-4000:]}"
        )
    results = {}
    for line in child.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[7:])
            results[(result["label"], result["op"])] = result
    expected = {(item["label"], op) for item in items for op in ops}
    assert set(results) == expected, child.stdout + child.stderr
    return results


def _describe(result) -> str:
    if result["ok"]:
        return "no error"
    return f"{result['mro'][0]}: {result['message']}"


def _unclean(result) -> str | None:
    """Why ``result`` is not a clean blockmap ValueError, or None when it is."""
    if result["ok"]:
        return "loaded without an error"
    mro = result["mro"]
    if not ("ValidationError" in mro and "BlockMapError" in mro and "ValueError" in mro):
        return f"expected a blockmap FormatError or ValidationError, got {_describe(result)}"
    if not result["message"].strip():
        return f"{mro[0]} with an empty message"
    return None


def assert_clean_error(result):
    why = _unclean(result)
    assert why is None, f"{result['label']} / {result['op']}: {why}"


def assert_ok(result):
    assert result["ok"], f"{result['label']} / {result['op']}: {_describe(result)}"


def assert_all_fail(tmp_path, files: dict[str, bytes], ops=TENSOR_OPS):
    """Every op on every file raises a clean error; lists every one that does not."""
    results = run_loads(tmp_path, files, ops)
    problems = [
        f"{label} / {op}: {why}"
        for (label, op), result in results.items()
        if (why := _unclean(result)) is not None
    ]
    if problems:
        pytest.fail("\n".join(problems))


# ------------------------------------------------------- the valid archive


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_valid_archive_is_a_zip_python_reads(variant):
    entries = tensor_entries()
    options = VARIANTS[variant]
    method, shift = options.get("method", STORED), options.get("shift", 0)
    listed = [Entry(name, content, method=method) for name, content in entries.items()]
    data, layout = zip_bytes(listed, shift=shift)
    assert data == archive(entries, **options)
    with zipfile.ZipFile(io.BytesIO(data)) as archive_file:
        assert archive_file.testzip() is None
        assert archive_file.namelist() == list(entries)
        for name, content in entries.items():
            assert archive_file.read(name) == content
    for name, offset in layout.data_offset.items():
        assert offset % 64 == shift, name


def test_valid_npy_entries_are_aligned():
    entries = tensor_entries()
    for name, content in entries.items():
        if name.endswith(".npy"):
            # the npy header is padded so that the array data is aligned too
            header_len = struct.unpack("<H", content[8:10])[0]
            assert (10 + header_len) % 64 == 0, name
            assert content[10 + header_len - 1 : 10 + header_len] == b"\n", name


def test_valid_archive_entries_are_npy_that_numpy_reads():
    entries = tensor_entries()
    keys = np.load(io.BytesIO(entries["keys.npy"]))
    assert keys.dtype == np.dtype([("key", "<i4")])
    np.testing.assert_array_equal(keys["key"], [0, 1])
    samples = np.load(io.BytesIO(entries["blocks/1/samples.npy"]))
    assert samples.dtype.names == ("system", "atom")
    np.testing.assert_array_equal(samples["atom"], [0, 1])
    values = np.load(io.BytesIO(entries["blocks/1/values.npy"]))
    np.testing.assert_array_equal(values, block_values(1))
    gradient = np.load(io.BytesIO(entries["blocks/0/gradients/positions/values.npy"]))
    np.testing.assert_array_equal(gradient, gradient_values(0))


def test_valid_archive_loads_in_metatensor(tmp_path):
    metatensor = pytest.importorskip("metatensor")

    path = tmp_path / "valid.mts"
    path.write_bytes(archive(tensor_entries()))
    tensor = metatensor.load(str(path))
    assert len(tensor) == 2
    np.testing.assert_array_equal(tensor.block(1).values, block_values(1))
    gradient = tensor.block(0).gradient("positions")
    np.testing.assert_array_equal(gradient.values, gradient_values(0))


def _check_valid_tensor(tensor):
    assert tensor.keys.names == ["key"]
    np.testing.assert_array_equal(tensor.keys.values, KEYS)
    assert len(tensor) == 2
    for b in range(2):
        block = tensor.block_by_id(b)
        np.testing.assert_array_equal(block.values, block_values(b))
        assert block.samples.names == SAMPLE_NAMES
        np.testing.assert_array_equal(block.samples.values, SAMPLES)
        assert [c.names for c in block.components] == [["c"]]
        np.testing.assert_array_equal(block.components[0].values, COMPONENT)
        assert block.properties.names == ["n"]
        np.testing.assert_array_equal(block.properties.values, PROPERTIES)
        assert block.gradients_list() == ["positions"]
        gradient = block.gradient("positions")
        np.testing.assert_array_equal(gradient.values, gradient_values(b))
        assert gradient.samples.names == GRADIENT_SAMPLE_NAMES
        np.testing.assert_array_equal(gradient.samples.values, GRADIENT_SAMPLES)
        assert [c.names for c in gradient.components] == [["xyz"], ["c"]]
    assert tensor.info() == INFO


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_valid_archive_loads(tmp_path, variant):
    data = archive(tensor_entries(), **VARIANTS[variant])
    path = tmp_path / "valid.mts"
    path.write_bytes(data)
    _check_valid_tensor(blockmap.load_buffer(data))
    _check_valid_tensor(blockmap.load(str(path)))
    _check_valid_tensor(blockmap.load(str(path), mmap=True))
    blockmap.verify(str(path))


def test_valid_files_load_in_the_child_under_the_memory_limit(tmp_path):
    """The control for every hostile case: the unmodified files load in the
    same child process, under the same address-space limit."""
    results = run_loads(
        tmp_path,
        {variant: archive(tensor_entries(), **options) for variant, options in VARIANTS.items()},
        TENSOR_OPS,
    )
    results.update(run_loads(tmp_path, {"block": archive(block_entries("", 0))}, BLOCK_OPS))
    results.update(run_loads(tmp_path, {"labels": labels_npy(SAMPLE_NAMES, SAMPLES)}, LABELS_OPS))
    assert len(results) == len(VARIANTS) * len(TENSOR_OPS) + len(BLOCK_OPS) + len(LABELS_OPS)
    for result in results.values():
        assert_ok(result)


# ------------------------------------------------------------ zip container


def test_truncated(tmp_path):
    data, layout = zip_bytes([Entry(name, content) for name, content in tensor_entries().items()])
    values = layout.data_offset[VALUES]
    cuts = {
        "inside the first local header": 12,
        "inside the keys payload": layout.data_offset["keys.npy"] + 20,
        "inside the values npy header": values + 30,
        "inside the values data": values + 128 + 40,
        "at the central directory": layout.central_directory,
        "inside the central directory": layout.central_directory + 100,
        "inside the end of central directory": layout.end_of_central_directory + 10,
        "one byte short": len(data) - 1,
    }
    assert sorted(cuts.values()) == list(cuts.values())
    assert_all_fail(tmp_path, {f"cut {where}": data[:cut] for where, cut in cuts.items()})


def test_truncated_payload_with_directory_rewritten(tmp_path):
    """The last entry is cut inside its data and a correct-looking central
    directory follows: the entry's declared size runs past the end of the file."""
    entries = tensor_entries()
    last = "blocks/1/gradients/positions/values.npy"
    order = [name for name in entries if name != last] + [last]
    data, layout = zip_bytes([Entry(name, entries[name]) for name in order])
    cut = layout.data_offset[last] + 128 + 200
    directory = data[layout.central_directory : layout.end_of_central_directory]
    end = bytearray(data[layout.end_of_central_directory :])
    struct.pack_into("<I", end, 16, cut)  # the directory's new offset
    truncated = data[:cut] + directory + bytes(end)
    assert layout.data_offset[last] + layout.data_size[last] > len(truncated)
    assert_all_fail(tmp_path, {"cut": truncated})


def _entries(**changes) -> list[Entry]:
    """The valid map's entries as :class:`Entry`, with ``changes`` (a dict of
    Entry fields) applied to blocks/0/values.npy."""
    result = []
    for name, content in tensor_entries().items():
        entry = Entry(name, content)
        if name == VALUES:
            entry = dataclasses.replace(entry, **changes)
        result.append(entry)
    return result


def test_wrong_crc(tmp_path):
    """CRCs are checked by every load but the mapped one, which may load the
    corrupted value (but must not crash)."""
    data, layout = zip_bytes(_entries())
    flipped = bytearray(data)
    flipped[layout.data_offset[VALUES] + 128 + 8] ^= 0x40  # a byte of the data
    wrong_central_crc = zip_bytes(_entries(central_crc=0x12345678))[0]
    results = run_loads(
        tmp_path,
        {"payload byte flipped": bytes(flipped), "central CRC wrong": wrong_central_crc},
        TENSOR_OPS,
    )
    for (_, op), result in results.items():
        if op == "load_mmap":
            assert result["ok"] or "ValidationError" in result["mro"], _describe(result)
        else:
            assert_clean_error(result)


def test_labels_with_a_wrong_crc_are_refused_by_every_load(tmp_path):
    """Labels are read whole by every load, the mapped one too, so their CRC
    is checked by all: a bit flipped in the samples ([0, 1] read as
    [0, 3], still unique) was loaded without an error when mapped."""
    data, layout = zip_bytes(_entries())
    flipped = bytearray(data)
    end = layout.data_offset[SAMPLES_ENTRY] + layout.data_size[SAMPLES_ENTRY]
    flipped[end - 4] ^= 0x02
    assert_all_fail(tmp_path, {"a bit of the samples": bytes(flipped)})


CONTAINER_CASES = {
    "empty file": lambda: b"",
    "garbage bytes": lambda: np.random.default_rng(7).integers(0, 256, 4096, np.uint8).tobytes(),
    "garbage after a zip signature": lambda: b"PK\x03\x04" + bytes(range(256)) * 8,
    "zip with no entries": lambda: struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0, 0, 0, 0, 0),
    "zip of unrelated entries": lambda: archive({"hello.txt": b"hello", "x.npy": values_npy()}),
    "a bare npy file": lambda: values_npy(),
    "stored entry larger than the file": lambda: zip_bytes(
        _entries(declared_size=0xF0000000, declared_compressed_size=0xF0000000)
    )[0],
    "local header offset past the end": lambda: zip_bytes(_entries(local_offset=0x7FFF0000))[0],
    "local header offset into the directory": lambda: _offset_into_directory(),
    "unknown compression method": lambda: zip_bytes(_entries(method=77))[0],
    "bzip2 entry with garbage": lambda: zip_bytes(_entries(method=12, payload=b"BZh9" + b"x" * 64))[
        0
    ],
    "encrypted entry": lambda: zip_bytes(_entries(flags=1))[0],
    "DEFLATE entry with a corrupt stream": lambda: zip_bytes(
        _entries(method=DEFLATED, payload=b"\xff" * 100)
    )[0],
    "DEFLATE entry inflating past its declared size": lambda: _inflate_past(crc_of="declared"),
    "DEFLATE entry inflating past its declared size, CRC of everything": lambda: _inflate_past(
        crc_of="all"
    ),
    "DEFLATE entry inflating short of its declared size": lambda: zip_bytes(
        _entries(method=DEFLATED, declared_size=len(values_npy()) + 64)
    )[0],
    "DEFLATE entry inflating short, CRC of the inflated data": lambda: _inflate_short(
        crc_of="inflated"
    ),
    "DEFLATE entry inflating short, CRC of the data zero-filled": lambda: _inflate_short(
        crc_of="zero-filled"
    ),
}


def _offset_into_directory() -> bytes:
    _, layout = zip_bytes(_entries())
    return zip_bytes(_entries(local_offset=layout.central_directory + 4))[0]


def _inflate_past(crc_of: str) -> bytes:
    """blocks/0/values.npy deflated from the valid npy followed by 4 KiB more,
    with headers that declare the valid npy's size (and, with ``crc_of ==
    "declared"``, its CRC)."""
    valid = values_npy()
    longer = valid + bytes(range(256)) * 16
    crc = zlib.crc32(valid if crc_of == "declared" else longer)
    entries = _entries(method=DEFLATED, payload=deflate(longer), crc=crc, declared_size=len(valid))
    return zip_bytes(entries)[0]


def _inflate_short(crc_of: str) -> bytes:
    """blocks/0/values.npy deflated without its last 64 bytes, with headers
    that declare the valid npy's size: a reader that zero-fills what the stream
    did not produce would see a valid npy (and, with ``crc_of ==
    "zero-filled"``, a matching CRC)."""
    valid = values_npy()
    short = valid[:-64]
    crc = zlib.crc32(short if crc_of == "inflated" else short + bytes(64))
    entries = _entries(method=DEFLATED, payload=deflate(short), crc=crc, declared_size=len(valid))
    return zip_bytes(entries)[0]


@pytest.mark.parametrize("case", list(CONTAINER_CASES))
def test_container(tmp_path, case):
    assert_all_fail(tmp_path, {case: CONTAINER_CASES[case]()})


def test_zip_bomb_is_not_allocated(tmp_path):
    """DEFLATE entries declaring 3 GiB (over the child's 2 GiB address-space
    limit) that inflate to much less: a clean error, not an allocation of the
    declared size (which would abort the child)."""
    huge = 3 << 30
    valid = values_npy()
    declared = zip_bytes(_entries(method=DEFLATED, declared_size=huge))[0]
    # the npy header inside also declares 3 GiB of data: (2, 3, 2**26) float64
    header = npy_bytes("<f8", (2, 3, 1 << 26), b"")
    content = header + bytes(8 << 20)
    shaped = zip_bytes(
        _entries(
            method=DEFLATED,
            payload=deflate(content),
            crc=zlib.crc32(content),
            declared_size=len(header) + huge,
        )
    )[0]
    assert len(declared) < 100_000 and len(shaped) < 100_000
    assert len(valid) < 1000
    assert_all_fail(
        tmp_path,
        {"declared size 3 GiB": declared, "declared size and npy shape 3 GiB": shaped},
    )


# ----------------------------------------------------------- lying npy headers

VALID_HEADER = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3, 2), }"

NPY_CASES = {
    # the header length
    "huge header length v1": lambda: with_entry(VALUES, values_npy(header_len=0xFFFF)),
    "huge header length v2": lambda: with_entry(
        VALUES, values_npy(version=(2, 0), header_len=0xFFFFFFFF)
    ),
    "huge header length v3": lambda: with_entry(
        VALUES, values_npy(version=(3, 0), header_len=0xFFFFFFFF)
    ),
    "header length past the entry": lambda: with_entry(
        VALUES, values_npy(header_len=len(values_npy()))
    ),
    "zero header length": lambda: with_entry(VALUES, values_npy(header_len=0)),
    "npy cut inside the preamble": lambda: with_entry(VALUES, values_npy()[:9]),
    "npy cut inside the header": lambda: with_entry(VALUES, values_npy()[:60]),
    "empty npy entry": lambda: with_entry(VALUES, b""),
    # shapes
    "element count overflows": lambda: values_shape((1 << 40, 1 << 40)),
    "element count wraps to zero": lambda: values_shape((1 << 32, 1 << 32), body=b""),
    "element count wraps to zero, 3-d": lambda: values_shape((2, 1 << 62, 2), body=b""),
    "byte count wraps to zero": lambda: values_shape((2, 1 << 61, 2), body=b""),
    "huge first dimension": lambda: values_shape((1 << 40, 3, 2)),
    "huge last dimension": lambda: values_shape((2, 3, 1 << 45)),
    "negative dimension": lambda: values_shape((2, -3, 2)),
    "all dimensions negative": lambda: values_shape((-2, -3, -2)),
    "float dimension": lambda: values_shape((2, 3.0, 2)),
    "string dimension": lambda: values_shape((2, "3", 2)),
    "None dimension": lambda: values_shape((2, None, 2)),
    "shape not a tuple": lambda: values_header(
        "{'descr': '<f8', 'fortran_order': False, 'shape': 12, }"
    ),
    "dimension past i64": lambda: values_header(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 99999999999999999999999, 2), }"
    ),
    # the data
    "data shorter than the shape": lambda: with_entry(VALUES, values_npy()[:-8]),
    "data shorter by one byte": lambda: with_entry(VALUES, values_npy()[:-1]),
    "no data": lambda: with_entry(VALUES, values_npy()[:128]),
    "data longer than the shape": lambda: with_entry(VALUES, values_npy() + bytes(8)),
    "data longer by one byte": lambda: with_entry(VALUES, values_npy() + b"\0"),
    # element types
    "unknown dtype f16": lambda: values_shape_descr("<f16", 16),
    "unicode dtype": lambda: values_shape_descr("<U4", 16),
    "object dtype": lambda: values_shape_descr("|O", 8),
    "bytes dtype": lambda: values_shape_descr("|S8", 8),
    "datetime dtype": lambda: values_shape_descr("<M8[s]", 8),
    "structured values": lambda: values_shape_descr([("a", "<f8")], 8),
    "empty descr": lambda: values_shape_descr("", 8),
    "descr not a string": lambda: values_header(
        "{'descr': 8, 'fortran_order': False, 'shape': (2, 3, 2), }"
    ),
    # the preamble
    "bad magic": lambda: with_entry(VALUES, values_npy(magic=b"\x93NUMPZ")),
    "no magic": lambda: with_entry(VALUES, values_npy(magic=b"PK\x03\x04\x00\x00")),
    "unknown npy version 9.0": lambda: with_entry(VALUES, values_npy(version=(9, 0))),
    "unknown npy version 1.7": lambda: with_entry(VALUES, values_npy(version=(1, 7))),
    # the header dict
    "header not a dict": lambda: values_header("['descr', '<f8']"),
    "header dict not closed": lambda: values_header(VALID_HEADER[:-1]),
    "header dict missing a colon": lambda: values_header(VALID_HEADER.replace(":", "", 1)),
    "header with an extra parenthesis": lambda: values_header(
        VALID_HEADER.replace("2), }", "2)), }")
    ),
    "header not latin-1 text": lambda: with_entry(
        VALUES, npy_bytes(None, None, block_values(0).tobytes(), header=b"{\xff\xfe\x00}")
    ),
    "header with code": lambda: values_header(
        "{'descr': '<f8', 'fortran_order': __import__('os').abort(), 'shape': (2, 3, 2), }"
    ),
    "empty header": lambda: values_header(""),
    "fortran_order is 0": lambda: values_header(VALID_HEADER.replace("False", "0")),
    "fortran_order is a string": lambda: values_header(VALID_HEADER.replace("False", "'False'")),
    "fortran_order is None": lambda: values_header(VALID_HEADER.replace("False", "None")),
    "missing descr": lambda: values_header("{'fortran_order': False, 'shape': (2, 3, 2), }"),
    "missing fortran_order": lambda: values_header("{'descr': '<f8', 'shape': (2, 3, 2), }"),
    "missing shape": lambda: values_header("{'descr': '<f8', 'fortran_order': False, }"),
    "extra key": lambda: values_header(VALID_HEADER.replace("}", "'extra': 1, }")),
    # lies in a labels entry
    "samples: huge header length": lambda: with_entry(
        SAMPLES_ENTRY,
        npy_bytes(
            [(n, "<i4") for n in SAMPLE_NAMES],
            (2,),
            np.asarray(SAMPLES, np.int32).tobytes(),
            version=(2, 0),
            header_len=0xFFFFFFFF,
        ),
    ),
    "samples: data shorter than the count": lambda: with_entry(
        SAMPLES_ENTRY, labels_npy(SAMPLE_NAMES, SAMPLES)[:-4]
    ),
    "samples: data longer than the count": lambda: with_entry(
        SAMPLES_ENTRY, labels_npy(SAMPLE_NAMES, SAMPLES) + bytes(8)
    ),
    "samples: count overflows": lambda: with_entry(
        SAMPLES_ENTRY, labels_npy(SAMPLE_NAMES, SAMPLES, shape=(1 << 62,))
    ),
    "keys: negative count": lambda: with_entry("keys.npy", labels_npy(["key"], KEYS, shape=(-2,))),
}


def values_shape_descr(descr, itemsize: int) -> bytes:
    """blocks/0/values.npy of shape (2, 3, 2) with element type ``descr`` and
    ``itemsize`` bytes per element of data."""
    return with_entry(VALUES, npy_bytes(descr, (2, 3, 2), bytes(12 * itemsize)))


@pytest.mark.parametrize("case", list(NPY_CASES))
def test_npy_header(tmp_path, case):
    assert_all_fail(tmp_path, {case: NPY_CASES[case]()})


# lies about sizes, also in entries that must be copied (misaligned or deflated)
COPIED_NPY_CASES = [
    "huge header length v1",
    "huge header length v2",
    "header length past the entry",
    "element count overflows",
    "element count wraps to zero",
    "byte count wraps to zero",
    "huge first dimension",
    "negative dimension",
    "data shorter than the shape",
    "data longer than the shape",
    "samples: data shorter than the count",
    "samples: count overflows",
]


@pytest.mark.parametrize("variant", ["unaligned", "deflated"])
def test_npy_header_in_copied_entries(tmp_path, variant):
    files = {
        f"{case} ({variant})": rewritten(NPY_CASES[case](), **VARIANTS[variant])
        for case in COPIED_NPY_CASES
    }
    assert_all_fail(tmp_path, files)


def test_npy_header_cases_are_rejected_by_numpy():
    """The npy-level cases are broken npy files for numpy too, so the reader
    is right to refuse them; except the element types, which numpy knows and
    blockmap does not support, and the trailing data, which numpy ignores."""
    accepted = []
    for case, build in NPY_CASES.items():
        if "dtype" in case or case == "structured values":
            continue
        name = VALUES
        if case.startswith("samples"):
            name = SAMPLES_ENTRY
        elif case.startswith("keys"):
            name = "keys.npy"
        with zipfile.ZipFile(io.BytesIO(build())) as archive_file:
            content = archive_file.read(name)
        try:
            array = np.load(io.BytesIO(content), allow_pickle=False)
        except Exception:
            continue
        accepted.append(case)
        assert 128 + array.nbytes < len(content), case
    assert sorted(accepted) == [
        "data longer by one byte",
        "data longer than the shape",
        "samples: data longer than the count",
    ]


# -------------------------------------------------------------- labels entries


def samples_with(names, rows=SAMPLES, field="<i4", body=None, shape=None) -> bytes:
    return with_entry(SAMPLES_ENTRY, labels_npy(names, rows, field=field, body=body, shape=shape))


LABELS_CASES = {
    "samples not unique": lambda: samples_with(SAMPLE_NAMES, [[0, 1], [0, 1]]),
    "keys not unique": lambda: with_entry("keys.npy", labels_npy(["key"], [[3], [3]])),
    "component not unique": lambda: with_entry(
        "blocks/0/components/0.npy", labels_npy(["c"], [[0], [1], [0]])
    ),
    "name starting with a digit": lambda: samples_with(["system", "1atom"]),
    "name with a space": lambda: samples_with(["system", "at om"]),
    "name with a dash": lambda: samples_with(["system", "a-b"]),
    "empty name": lambda: samples_with(["system", ""]),
    "non-ASCII name": lambda: samples_with(["system", "\u00e9"]),
    "non-ASCII name in a UTF-8 header": lambda: with_entry(
        SAMPLES_ENTRY, labels_npy(["system", "\u00e9t\u00e9"], SAMPLES, version=(3, 0))
    ),
    "duplicate names": lambda: samples_with(["atom", "atom"]),
    "int64 field": lambda: samples_with(SAMPLE_NAMES, field="<i8"),
    "int16 field": lambda: samples_with(SAMPLE_NAMES, field="<i2"),
    "uint32 field": lambda: samples_with(SAMPLE_NAMES, field="<u4"),
    "float32 field": lambda: samples_with(SAMPLE_NAMES, field="<f4"),
    "mixed fields": lambda: with_entry(
        SAMPLES_ENTRY,
        npy_bytes([("system", "<i4"), ("atom", "<i8")], (2,), bytes(24)),
    ),
    "nested structured field": lambda: with_entry(
        SAMPLES_ENTRY,
        npy_bytes([("system", "<i4"), ("atom", [("x", "<i4")])], (2,), bytes(16)),
    ),
    "sub-array field": lambda: with_entry(
        SAMPLES_ENTRY, npy_bytes([("system", "<i4"), ("atom", "<i4", (2,))], (2,), bytes(24))
    ),
    "labels not structured": lambda: with_entry(SAMPLES_ENTRY, array_npy(np.zeros((2, 2)))),
    "two-dimensional labels": lambda: samples_with(
        SAMPLE_NAMES, body=np.asarray(SAMPLES, np.int32).tobytes(), shape=(2, 1)
    ),
}


@pytest.mark.parametrize("case", list(LABELS_CASES))
def test_labels_entry(tmp_path, case):
    assert_all_fail(tmp_path, {case: LABELS_CASES[case]()})


# ---------------------------------------------------------- missing entries

MISSING_CASES = {
    "no keys.npy": ("keys.npy",),
    "no values": (VALUES,),
    "no samples": (SAMPLES_ENTRY,),
    "no component": ("blocks/0/components/0.npy",),
    "no properties": ("blocks/0/properties.npy",),
    "no second block": tuple(name for name in tensor_entries() if name.startswith("blocks/1/")),
    "no gradient values": (f"{GRADIENT}values.npy",),
    "no gradient samples": (f"{GRADIENT}samples.npy",),
    "no gradient component": (f"{GRADIENT}components/1.npy",),
}


@pytest.mark.parametrize("case", list(MISSING_CASES))
def test_missing_entry(tmp_path, case):
    assert_all_fail(tmp_path, {case: without(*MISSING_CASES[case])})


# ----------------------------------------------------- the data model's rules


def _gradient_entries(prefix: str, parameter: str, b: int) -> dict[str, bytes]:
    return {
        name: content
        for name, content in block_entries(prefix, b, gradients=(parameter,)).items()
        if "/gradients/" in name
    }


def _second_gradient_on_block_1() -> bytes:
    entries = tensor_entries()
    entries.update(_gradient_entries("blocks/1/", "cell", 1))
    return archive(entries)


def _gradient_named(parameter: str) -> bytes:
    entries = {
        name: content for name, content in tensor_entries().items() if "/gradients/" not in name
    }
    for b in range(len(KEYS)):
        entries.update(_gradient_entries(f"blocks/{b}/", parameter, b))
    return archive(entries)


def _gradient_samples(rows) -> bytes:
    return with_entry(f"{GRADIENT}samples.npy", labels_npy(GRADIENT_SAMPLE_NAMES, rows))


MODEL_CASES = {
    "gradient sample past the parent": lambda: _gradient_samples(
        [*GRADIENT_SAMPLES[:-1], [len(SAMPLES), 99]]
    ),
    "gradient sample far past the parent": lambda: _gradient_samples(
        [*GRADIENT_SAMPLES[:-1], [2**31 - 1, 99]]
    ),
    "negative gradient sample": lambda: _gradient_samples([*GRADIENT_SAMPLES[:-1], [-1, 99]]),
    "gradient samples not starting with 'sample'": lambda: with_entry(
        f"{GRADIENT}samples.npy", labels_npy(["system", "atom"], GRADIENT_SAMPLES)
    ),
    "values with more samples than labels": lambda: with_entry(
        VALUES, array_npy(np.zeros((3, 3, 2)))
    ),
    "values with fewer properties than labels": lambda: with_entry(
        VALUES, array_npy(np.zeros((2, 3, 1)))
    ),
    "values with a component of the wrong size": lambda: with_entry(
        VALUES, array_npy(np.zeros((2, 4, 2)))
    ),
    "values with one dimension": lambda: with_entry(VALUES, array_npy(np.zeros(12))),
    "values with zero dimensions": lambda: with_entry(VALUES, array_npy(np.zeros(()))),
    "gradient values of the wrong shape": lambda: with_entry(
        f"{GRADIENT}values.npy", array_npy(np.zeros((N_GRADIENT_SAMPLES, 3, 3, 3)))
    ),
    "gradient values of another dtype": lambda: with_entry(
        f"{GRADIENT}values.npy", array_npy(gradient_values(0).astype(np.float32))
    ),
    "gradient component differing from the parent's": lambda: with_entry(
        f"{GRADIENT}components/1.npy", labels_npy(["c"], [[0], [1], [5]])
    ),
    "block without the other block's gradient": lambda: without(
        *(name for name in tensor_entries() if name.startswith("blocks/1/gradients/"))
    ),
    "block with a gradient the other block lacks": _second_gradient_on_block_1,
    # any string names a gradient (as in metatensor-core), but a '/' splits
    # the entry names: this reads as a gradient "po" without values
    "gradient parameter with a slash": lambda: _gradient_named("po/sitions"),
    "blocks with different sample names": lambda: with_entry(
        "blocks/1/samples.npy", labels_npy(["system", "center"], SAMPLES)
    ),
    "more keys than blocks": lambda: with_entry("keys.npy", labels_npy(["key"], [[0], [1], [2]])),
    "keys not labels": lambda: with_entry("keys.npy", array_npy(np.zeros((2, 1)))),
}


@pytest.mark.parametrize("case", list(MODEL_CASES))
def test_data_model(tmp_path, case):
    assert_all_fail(tmp_path, {case: MODEL_CASES[case]()})


# ---------------------------------------------------------------- info.json

INFO_CASES = {
    "a list": b"[1, 2]",
    "a string": b'"creator"',
    "a number value": b'{"creator": 1}',
    "a null value": b'{"creator": null}',
    "an object value": b'{"creator": {"name": "x"}}',
    "a list value": b'{"creator": ["x"]}',
    "not JSON": b"creator: x",
    "truncated JSON": b'{"creator": "x"',
    "empty": b"",
    "invalid UTF-8": b'{"creator": "\xff\xfe"}',
}


@pytest.mark.parametrize("case", list(INFO_CASES))
def test_info_json(tmp_path, case):
    assert_all_fail(tmp_path, {f"info.json is {case}": with_entry("info.json", INFO_CASES[case])})


# ---------------------------------------------- TensorBlock and Labels files


def test_hostile_block_files(tmp_path):
    def block_file(**changes):
        entries = block_entries("", 0)
        for name, content in changes.items():
            name = name.replace("__", "/") + ".npy"
            if content is None:
                del entries[name]
            else:
                entries[name] = content
        return archive(entries)

    data = archive(block_entries("", 0))
    files = {
        "truncated": data[: len(data) // 2],
        "no samples": block_file(samples=None),
        "values data short": block_file(values=array_npy(block_values(0))[:-8]),
        "values header length huge": block_file(
            values=array_npy(block_values(0), version=(2, 0), header_len=0xFFFFFFFF)
        ),
        "gradient sample past the parent": block_file(
            gradients__positions__samples=labels_npy(
                GRADIENT_SAMPLE_NAMES, [*GRADIENT_SAMPLES[:-1], [7, 99]]
            )
        ),
        "a TensorMap file": archive(tensor_entries()),
        "empty": b"",
    }
    assert_all_fail(tmp_path, files, BLOCK_OPS)


def test_hostile_labels_files(tmp_path):
    body = np.asarray(SAMPLES, np.int32).tobytes()
    descr = [(name, "<i4") for name in SAMPLE_NAMES]
    valid = labels_npy(SAMPLE_NAMES, SAMPLES)
    files = {
        "huge header length v1": npy_bytes(descr, (2,), body, header_len=0xFFFF),
        "huge header length v2": npy_bytes(
            descr, (2,), body, version=(2, 0), header_len=0xFFFFFFFF
        ),
        "data short": valid[:-4],
        "data long": valid + bytes(8),
        "count overflows": npy_bytes(descr, (1 << 62,), body),
        "negative count": npy_bytes(descr, (-2,), body),
        "not unique": labels_npy(SAMPLE_NAMES, [[1, 1], [1, 1]]),
        "name not an identifier": labels_npy(["system", "a b"], SAMPLES),
        "int64 field": labels_npy(SAMPLE_NAMES, SAMPLES, field="<i8"),
        "object dtype": npy_bytes("|O", (2,), bytes(16)),
        "bad magic": valid.replace(b"NUMPY", b"NUMPZ", 1),
        "a TensorMap file": archive(tensor_entries()),
        "garbage": bytes(range(256)),
        "empty": b"",
    }
    assert_all_fail(tmp_path, files, LABELS_OPS)
