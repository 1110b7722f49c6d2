"""Write the seed corpora of the fuzz targets into fuzz/corpus/<target>/.

Run from the repository root with a Python that imports blockmap,
metatensor-core (0.2) and numpy (the project's .venv):

    .venv/bin/python fuzz/seed.py

Seeds are small maps, blocks and labels written by blockmap and by
metatensor-core, a few hand-made variants (DEFLATE entries, big-endian and
Fortran-ordered arrays, NPY version 2.0), the NPY entries of all of them
(for npy_header), and pickle headers with their buffers (for pickle_load,
in the encoding that fuzz_targets/pickle_load.rs documents).
"""

import hashlib
import io
import pathlib
import shutil
import zipfile

import numpy as np

import blockmap
import metatensor

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


def pickle_seed(obj):
    _, args = obj.__reduce_ex__(5)
    version, header, *buffers = args
    assert version == 1
    parts = [bytes(header)] + [bytes(memoryview(b)) for b in buffers]
    for part in parts[1:]:
        assert SEPARATOR not in part
    return SEPARATOR.join(parts)


def main():
    if ROOT.exists():
        shutil.rmtree(ROOT)
    corpora = {name: {} for name in ["npy_header", "load_archive", "pickle_load"]}

    def add(target, name, data):
        digest = hashlib.sha1(data).hexdigest()[:10]
        if digest not in {hashlib.sha1(d).hexdigest()[:10] for d in corpora[target].values()}:
            corpora[target][name] = data

    archives = {}
    for name, kind, obj in blockmap_objects():
        archives[f"blockmap-{name}"] = save_blockmap(obj)
        add("pickle_load", f"blockmap-{name}", pickle_seed(obj))
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

    total = 0
    for target, seeds in corpora.items():
        folder = ROOT / target
        folder.mkdir(parents=True)
        for name, data in sorted(seeds.items()):
            (folder / name).write_bytes(data)
            total += len(data)
        print(f"{target}: {len(seeds)} seeds, {sum(map(len, seeds.values()))} bytes, "
              f"largest {max(map(len, seeds.values()))}")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
