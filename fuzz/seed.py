"""Write the seed corpora of the fuzz targets into fuzz/corpus/<target>/.

Run from the repository root with a Python that imports blockmap,
metatensor-core (0.2) and numpy (the project's .venv):

    .venv/bin/python fuzz/seed.py

Seeds are small maps, blocks and labels written by blockmap and by
metatensor-core, a few hand-made variants (DEFLATE entries, big-endian and
Fortran-ordered arrays, NPY version 2.0), the NPY entries of all of them
(for npy_header), reconstructor calls of every pickle version (for
pickle_load, in the encoding that fuzz_targets/pickle_load.rs documents:
`__reduce_ex__` of protocols 5 and 4, the archive in pieces, and the
stored pickles of tests/data/pickle/), and dataset
files (for dataset_v2): of format versions 4 (and 3) written by blockmap, of
version 2, and versions 3 and 4 (their files of every dtype) copied from
tests/data/datasets/, and the files of the
imitation cases (an entry whose data ends with an earlier commit's
trailer, or with a whole commit record and trailer placed where they name
themselves, its writer killed before its commit).

Only the folders of these targets are replaced (mutate_mapped's seeds are
not written here); name targets to write theirs only:

    .venv/bin/python fuzz/seed.py dataset_v2
"""

import hashlib
import io
import os
import pathlib
import pickle
import shutil
import struct
import sys
import tempfile
import zipfile
import zlib

import numpy as np

import blockmap
import metatensor
from blockmap._blockmap import _set_pickle_piece_size

ROOT = pathlib.Path(__file__).resolve().parent / "corpus"
SEPARATOR = b"\n--buffer--\n"
DTYPES = ["f8", "f4", "f2", "i4", "i8", "u1", "i1", "u2", "b1", "c8", "c16"]


def values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    data = rng.normal(size=shape) * 10
    if np.dtype(dtype).kind == "c":
        return (data + 1j * data).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return data > 0
    return data.astype(dtype)


def block(m, dtype="f8", samples=3, gradient=True, components=1, seed=0):
    shape = (samples,) + (2,) * components + (4,)
    b = m.TensorBlock(
        values=values(shape, dtype, seed),
        samples=m.Labels(["system", "atom"], np.array([[0, i] for i in range(samples)], dtype=np.int32).reshape(-1, 2)),
        components=[m.Labels([f"c{k}"], np.array([[-1], [1]], dtype=np.int32)) for k in range(components)],
        properties=m.Labels(["n"], np.arange(4, dtype=np.int32).reshape(-1, 1)),
    )
    if gradient and samples > 0:
        g = m.TensorBlock(
            values=values((2, 3) + shape[1:], dtype, seed + 1),
            samples=m.Labels(["sample", "atom"], np.array([[0, 0], [samples - 1, 1]], dtype=np.int32)),
            components=[m.Labels(["xyz"], np.arange(3, dtype=np.int32).reshape(-1, 1))]
            + [m.Labels([f"c{k}"], np.array([[-1], [1]], dtype=np.int32)) for k in range(components)],
            properties=m.Labels(["n"], np.arange(4, dtype=np.int32).reshape(-1, 1)),
        )
        b.add_gradient("positions", g)
    return b


def tensor(m, dtype="f8", n_blocks=2, **kwargs):
    keys = m.Labels(["o3_lambda", "center_type"], np.array([[i, 1] for i in range(n_blocks)], dtype=np.int32).reshape(-1, 2))
    return m.TensorMap(keys, [block(m, dtype, seed=i, **kwargs) for i in range(n_blocks)])


def labels(m, n_dims=2, count=5):
    names = [f"d{i}" for i in range(n_dims)]
    return m.Labels(names, np.arange(count * n_dims, dtype=np.int32).reshape(count, n_dims))


def objects(m):
    """(name, kind, object) of the seeds made with module m."""
    yield "tensor-gradients", "tensor", tensor(m)
    yield "tensor-no-components", "tensor", tensor(m, "f4", components=0)
    yield "tensor-two-components", "tensor", tensor(m, "f8", n_blocks=1, components=2, gradient=False)
    yield "tensor-empty-block", "tensor", tensor(m, n_blocks=1, samples=0)
    yield "tensor-no-blocks", "tensor", tensor(m, n_blocks=0)
    yield "block-gradients", "block", block(m)
    yield "block-empty", "block", block(m, samples=0, gradient=False)
    yield "labels", "labels", labels(m)
    yield "labels-empty", "labels", labels(m, count=0)
    yield "labels-one-dim", "labels", labels(m, n_dims=1, count=3)
    yield "labels-many-dims", "labels", labels(m, n_dims=12, count=2)


def blockmap_objects():
    yield from objects(blockmap)
    for dtype in DTYPES:
        yield f"tensor-{dtype}", "tensor", tensor(blockmap, dtype, n_blocks=1, gradient=dtype == "c16")
    nested = block(blockmap, samples=2)
    inner = blockmap.TensorBlock(
        values=values((1, 3, 2, 4), "f8", 7),
        samples=blockmap.Labels(["sample"], np.array([[1]], dtype=np.int32)),
        components=[blockmap.Labels(["xyz"], np.arange(3, dtype=np.int32).reshape(-1, 1)),
                    blockmap.Labels(["c0"], np.array([[-1], [1]], dtype=np.int32))],
        properties=blockmap.Labels(["n"], np.arange(4, dtype=np.int32).reshape(-1, 1)),
    )
    outer = blockmap.TensorBlock(
        values=values((2, 3, 2, 4), "f8", 8),
        samples=blockmap.Labels(["sample", "atom"], np.array([[0, 0], [1, 1]], dtype=np.int32)),
        components=[blockmap.Labels(["xyz"], np.arange(3, dtype=np.int32).reshape(-1, 1)),
                    blockmap.Labels(["c0"], np.array([[-1], [1]], dtype=np.int32))],
        properties=blockmap.Labels(["n"], np.arange(4, dtype=np.int32).reshape(-1, 1)),
    )
    outer.add_gradient("cell", inner)
    nested = blockmap.TensorBlock(
        values=values((2, 2, 4), "f8", 9),
        samples=blockmap.Labels(["system", "atom"], np.array([[0, 0], [0, 1]], dtype=np.int32)),
        components=[blockmap.Labels(["c0"], np.array([[-1], [1]], dtype=np.int32))],
        properties=blockmap.Labels(["n"], np.arange(4, dtype=np.int32).reshape(-1, 1)),
    )
    nested.add_gradient("positions", outer)
    yield "block-nested-gradients", "block", nested
    with_info = tensor(blockmap, n_blocks=1, gradient=False)
    with_info.set_info("origin", "fuzz seed")
    with_info.set_info("units", "eV")
    yield "tensor-info", "tensor", with_info


def save_blockmap(obj):
    return bytes(blockmap.save_buffer(obj))


def save_metatensor(obj):
    return bytes(metatensor.io.save_buffer(obj))


def npy_entries(archive):
    if archive.startswith(b"\x93NUMPY"):
        return [archive]
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        return [z.read(name) for name in z.namelist() if name.endswith(".npy")]


def rezip(archive, method=zipfile.ZIP_DEFLATED, transform=None):
    """The archive rewritten by Python's zipfile (DEFLATE by default),
    each NPY entry passed through transform(name, bytes)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(archive)) as src, zipfile.ZipFile(out, "w", method) as dst:
        for name in src.namelist():
            data = src.read(name)
            if transform is not None and name.endswith(".npy"):
                data = transform(name, data)
            dst.writestr(name, data)
    return out.getvalue()


def npy_bytes(array):
    out = io.BytesIO()
    np.save(out, array, allow_pickle=False)
    return out.getvalue()


def restyled(name, data, order="<", fortran=False):
    """An NPY entry re-encoded by numpy: another byte order or Fortran order."""
    array = np.load(io.BytesIO(data), allow_pickle=False)
    if array.dtype.names:
        array = array.astype([(n, order + "i4") for n in array.dtype.names])
    elif array.dtype.itemsize > 1 and array.dtype.kind != "b":
        array = array.astype(array.dtype.newbyteorder(order))
    if fortran:
        array = np.asfortranarray(array)
    return npy_bytes(array)


def pickle_seed(obj, protocol=5):
    """The reconstructor call of ``obj.__reduce_ex__(protocol)`` in the
    encoding of fuzz_targets/pickle_load.rs."""
    _, args = obj.__reduce_ex__(protocol)
    return encoded_call(args)


def encoded_call(args):
    """A reconstructor's arguments ``(version, *rest)`` as one seed: the
    version byte, then each argument (a kind as its UTF-8 text, else its
    bytes), separated by SEPARATOR."""
    version, *rest = args
    assert version in (0, 1, 2, 3), version
    parts = [r.encode() if isinstance(r, str) else bytes(memoryview(r)) for r in rest]
    for part in parts:
        assert SEPARATOR not in part
    return bytes([version]) + SEPARATOR.join(parts)


STORED_PICKLES = ROOT.parent.parent / "tests" / "data" / "pickle"


class _Arguments(pickle.Unpickler):
    """Unpickles a reconstructor call as its arguments, without calling it."""

    def find_class(self, module, name):
        if (module, name) == ("blockmap._blockmap", "_reconstruct"):
            return lambda *args: args
        return super().find_class(module, name)


def stored_pickle_seeds():
    """The stored pickles of every version (tests/data/pickle/, written by
    the blockmap that defined each), as seeds: ``(name, seed)``."""
    for path in sorted(STORED_PICKLES.glob("*.pickle")):
        args = _Arguments(io.BytesIO(path.read_bytes())).load()
        yield f"stored-{path.stem}", encoded_call(args)


STORED_DATASETS = ROOT.parent.parent / "tests" / "data" / "datasets"


def _dataset_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def _map_of_bytes(data):
    """A map of one block whose values are ``data`` (a multiple of 64
    bytes): its entry's arrays end with them, and a file cut after the
    entry ends with them."""
    values = np.frombuffer(data, dtype=np.float64).reshape(-1, 4).copy()
    block = blockmap.TensorBlock(
        values=values,
        samples=blockmap.Labels.range("s", len(values)),
        components=[],
        properties=blockmap.Labels.range("p", 4),
    )
    return blockmap.TensorMap(blockmap.Labels.range("k", 1), [block])


def _trailer(commit_at, count):
    head = b"BMDSEND2" + struct.pack("<QQ", commit_at, count)
    return head + struct.pack("<II", zlib.crc32(head), 0)


def _uncommitted(path, entry):
    """The bytes of the dataset at ``path`` with ``entry`` appended and its
    writer stopped before its commit (as a SIGKILL would)."""
    writer = blockmap.DatasetWriter(path, append=True)
    writer.write(entry)
    data = _dataset_bytes(path)
    writer.close()
    return data


def dataset_seeds(folder):
    """(name, bytes) of dataset files: small, of every kind the reader
    meets."""
    maps = [tensor(blockmap, dtype) for dtype in ("f8", "f4", "i4")]
    path = os.path.join(folder, "d")

    def two_sessions(first, second, version=None):
        with blockmap.DatasetWriter(path, overwrite=True, _version=version) as writer:
            for i in range(first):
                writer.write(maps[i % 3])
        head = _dataset_bytes(path)
        with blockmap.DatasetWriter(path, append=True) as writer:
            for i in range(second):
                writer.write(maps[(first + i) % 3])
        return head

    with blockmap.DatasetWriter(path, overwrite=True) as writer:
        for m in maps:
            writer.write(m)
    yield "v4-single", _dataset_bytes(path)
    with blockmap.DatasetWriter(path, overwrite=True) as writer:
        for i in range(2):
            writer.write(system=maps[i], energy=maps[2], columns={"n": i, "w": 0.5 * i})
    with blockmap.DatasetWriter(path, append=True) as writer:
        writer.write(system=maps[2], energy=maps[0], columns={"n": 7, "w": 1.5})
    yield "v4-fields", _dataset_bytes(path)
    with blockmap.DatasetWriter(path, overwrite=True) as writer:
        writer.write(maps[0])
        writer.commit()
        writer.write(maps[1])
        writer.write(maps[2])
        yield "v4-recovered", _dataset_bytes(path)
    blockmap.DatasetWriter(path, overwrite=True).close()
    yield "v4-empty", _dataset_bytes(path)
    # an entry whose data ends with the first commit's trailer
    head = two_sessions(2, 1)
    yield "v4-trailer-imitation", _uncommitted(path, _map_of_bytes(bytes(96) + head[-32:]))
    # ... or with a whole commit record and its trailer, where they name
    # themselves: the first commit's (5 rows: 192 bytes with its trailer)
    # (version 3, whose commit of 5 rows fills 3 blocks of 64 bytes)
    head = two_sessions(5, 2, version=3)
    commit_at, _ = struct.unpack_from("<QQ", head, len(head) - 24)
    record = head[commit_at : len(head) - 32]
    size = 1024
    shutil.copy(path, path + ".probe")
    probe = _uncommitted(path + ".probe", _map_of_bytes(bytes(size)))
    offset, length = blockmap.Dataset(path + ".probe")._slot(-1)
    (desc_len,) = struct.unpack_from("<Q", probe, offset + 16)
    data_at = -(-(offset + 24 + desc_len) // 64) * 64
    forged_at = data_at + size - len(record) - 32
    assert forged_at % 64 == 0, forged_at
    crafted = bytes(size - len(record) - 32) + record + _trailer(forged_at, 5)
    yield "v3-commit-imitation", _uncommitted(path, _map_of_bytes(crafted))
    # version 4: sessions of 4, 2 and 1 entries (3 pieces), then 1 more
    # (its commit merges them all)
    with blockmap.DatasetWriter(path, overwrite=True) as writer:
        for i in range(4):
            writer.write(maps[i % 3])
    for count in (2, 1):
        with blockmap.DatasetWriter(path, append=True) as writer:
            for i in range(count):
                writer.write(maps[i % 3])
    yield "v4-pieces", _dataset_bytes(path)
    with blockmap.DatasetWriter(path, append=True) as writer:
        writer.write(maps[0])
    yield "v4-merged", _dataset_bytes(path)
    for name in (
        "v2-committed",
        "v2-appended",
        "v2-recovered",
        "v2-empty",
        "v3-dtypes",
        "v4-appended",
        "v4-dtypes",
    ):
        yield name, _dataset_bytes(STORED_DATASETS / f"{name}.bmds")


TARGETS = ["npy_header", "load_archive", "pickle_load", "dataset_v2"]


def main(targets):
    unknown = set(targets) - set(TARGETS)
    if unknown:
        raise SystemExit(f"no seeds for {sorted(unknown)}: the targets are {TARGETS}")
    corpora = {name: {} for name in targets}

    def add(target, name, data):
        if target not in corpora:
            return
        digest = hashlib.sha1(data).hexdigest()[:10]
        if digest not in {hashlib.sha1(d).hexdigest()[:10] for d in corpora[target].values()}:
            corpora[target][name] = data

    if set(targets) & {"npy_header", "load_archive", "pickle_load"}:
        archive_seeds(add)
    if "dataset_v2" in targets:
        with tempfile.TemporaryDirectory() as folder:
            for name, data in dataset_seeds(folder):
                add("dataset_v2", name, data)

    total = 0
    for target, seeds in corpora.items():
        folder = ROOT / target
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for name, data in sorted(seeds.items()):
            (folder / name).write_bytes(data)
            total += len(data)
        print(f"{target}: {len(seeds)} seeds, {sum(map(len, seeds.values()))} bytes, "
              f"largest {max(map(len, seeds.values()))}")
    print(f"total {total} bytes")


def archive_seeds(add):
    """The seeds of npy_header, load_archive and pickle_load, given to
    ``add(target, name, data)``."""
    archives = {}
    for name, kind, obj in blockmap_objects():
        archives[f"blockmap-{name}"] = save_blockmap(obj)
        # version 3 (protocol 5), 0 (protocol 4, one piece) and, written in
        # pieces of 256 bytes, 2 (labels are always one piece: version 0)
        add("pickle_load", f"blockmap-{name}", pickle_seed(obj))
        add("pickle_load", f"blockmap-{name}-protocol4", pickle_seed(obj, 4))
        previous = _set_pickle_piece_size(256)
        try:
            add("pickle_load", f"blockmap-{name}-protocol4-pieces", pickle_seed(obj, 4))
        finally:
            _set_pickle_piece_size(previous)
    # versions 0 to 3 as the blockmap that defined each wrote them
    for name, seed in stored_pickle_seeds():
        add("pickle_load", name, seed)
    # a version the reader refuses
    _, args = blockmap.Labels.range("n", 3).__reduce_ex__(5)
    add("pickle_load", "unknown-version-4", bytes([4]) + encoded_call(args)[1:])
    for name, kind, obj in objects(metatensor):
        archives[f"metatensor-{name}"] = save_metatensor(obj)
    # DEFLATE entries, big-endian and Fortran-ordered arrays
    source = archives["blockmap-tensor-gradients"]
    archives["zipfile-deflate-tensor"] = rezip(source)
    archives["zipfile-big-endian-tensor"] = rezip(source, zipfile.ZIP_STORED, lambda n, d: restyled(n, d, ">"))
    archives["zipfile-fortran-tensor"] = rezip(source, zipfile.ZIP_STORED, lambda n, d: restyled(n, d, fortran=True))
    archives["zipfile-deflate-block"] = rezip(archives["blockmap-block-gradients"])
    archives["numpy-labels-big-endian"] = restyled("", archives["blockmap-labels"], ">")

    headers = set()
    for name, data in archives.items():
        add("load_archive", name, data)
        for i, entry in enumerate(npy_entries(data)):
            # one seed per distinct header
            header_end = entry.index(b"\n") + 1
            if entry[:header_end] not in headers:
                headers.add(entry[:header_end])
                add("npy_header", f"{name}-{i}", entry)
    # NPY version 2.0 and 3.0 headers, written by numpy
    for version in [(2, 0), (3, 0)]:
        out = io.BytesIO()
        np.lib.format.write_array(out, np.arange(6.0).reshape(2, 3), version=version)
        add("npy_header", f"numpy-version-{version[0]}", out.getvalue())


if __name__ == "__main__":
    main(sys.argv[1:] or TARGETS)
