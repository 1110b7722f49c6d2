"""The ``blockmap`` command, run as a user runs it: the console script
installed in the environment's ``bin`` and ``python -m blockmap``, each a
fresh process (docs/cli.md)."""

import json
import os
import re
import struct
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

import blockmap
from helpers import io_cases

DATASETS = Path(__file__).resolve().parents[2] / "data" / "datasets"
PICKLES = Path(__file__).resolve().parents[2] / "data" / "pickle"
SCRIPT = Path(sys.executable).parent / "blockmap"
HEAVY = ("torch", "metatensor", "metatrain", "metatomic")


def run(*args, script=False, env=None, timeout=120):
    command = [str(SCRIPT)] if script else [sys.executable, "-m", "blockmap"]
    return subprocess.run(
        [*command, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def info_json(path):
    done = run("info", path, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def small_map():
    return io_cases.make_map(np.random.default_rng(7), gradients=True)


# -- the command itself ------------------------------------------------------


def test_console_script_is_python_m_blockmap(tmp_path):
    assert SCRIPT.exists(), "`make build` installs the console script"
    path = tmp_path / "map.mts"
    blockmap.save(path, small_map())
    by_script = run("info", path, "--json", script=True)
    by_module = run("info", path, "--json")
    assert by_script.returncode == by_module.returncode == 0, by_script.stderr
    assert by_script.stdout == by_module.stdout
    assert json.loads(by_script.stdout)["kind"] == "tensormap"


def test_no_arguments_is_a_usage_error():
    done = run()
    assert done.returncode == 2
    assert "usage: blockmap" in done.stderr


@pytest.mark.parametrize("command", [None, "info", "verify", "show", "upgrade", "compact"])
def test_help_imports_no_heavy_package(command):
    args = ["--help"] if command is None else [command, "--help"]
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "blockmap", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "usage: blockmap" in done.stdout
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines()}
    heavy = sorted(m for m in imported if m.split(".")[0] in HEAVY)
    assert not heavy, heavy
    # the commands' modules wait for the arguments
    assert "blockmap._cli.commands" not in imported


def _imported(args):
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "blockmap", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    modules = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    return done, modules


def test_commands_import_no_heavy_package(tmp_path):
    path = tmp_path / "map.mts"
    blockmap.save(path, small_map())
    data = tmp_path / "data.bmds"
    blockmap.save_dataset(data, [small_map(), small_map()])
    for args in (["info", path], ["show", path], ["verify", data], ["info", data]):
        done, modules = _imported(args)
        assert done.returncode == 0, done.stderr
        assert not [m for m in modules if m.split(".")[0] in HEAVY], args


# -- info --------------------------------------------------------------------


def test_info_of_a_map_says_what_it_holds(tmp_path):
    tensor = small_map()
    path = tmp_path / "map.mts"
    blockmap.save(path, tensor)
    found = info_json(path)
    assert found["schema"] == 1
    assert found["kind"] == "tensormap"
    assert found["file_bytes"] == path.stat().st_size
    content = found["content"]
    assert content["keys"] == {"names": tensor.keys.names, "count": len(tensor.keys)}
    assert content["sample_names"] == tensor.sample_names
    assert content["property_names"] == tensor.property_names
    assert content["component_names"] == tensor.component_names
    assert content["info"] == tensor.info()
    assert content["nbytes"] == tensor.nbytes
    assert content["blocks_listed"] == len(tensor.keys)
    for i, described in enumerate(content["blocks"]):
        block = tensor.block_by_id(i)
        key = dict(zip(tensor.keys.names, map(int, tensor.keys.values[i]), strict=True))
        assert described["key"] == key
        assert described["shape"] == list(block.values.shape)
        assert described["dtype"] == str(block.values.dtype)
        assert described["samples"]["count"] == len(block.samples)
        assert described["properties"]["names"] == block.properties.names
        assert sorted(described["gradients"]) == sorted(block.gradients_list())
        for parameter, gradient in block.gradients():
            assert described["gradients"][parameter]["shape"] == list(gradient.values.shape)
    text = run("info", path)
    assert text.returncode == 0
    assert f"keys: {len(tensor.keys)} ×" in text.stdout
    assert "TensorMap (.mts)" in text.stdout.splitlines()[0]


def test_info_of_a_block_and_labels(tmp_path):
    tensor = small_map()
    block = tensor.block_by_id(1)
    blockmap.save(tmp_path / "block.mts", block)
    blockmap.save(tmp_path / "keys.mts", tensor.keys)
    found = info_json(tmp_path / "block.mts")
    assert found["kind"] == "block"
    assert found["content"]["shape"] == list(block.values.shape)
    found = info_json(tmp_path / "keys.mts")
    assert found["kind"] == "labels"
    assert found["content"] == {"names": tensor.keys.names, "count": len(tensor.keys)}


def _walk_v23(path):
    """Commits and live bytes of a dataset of version 2, 3 or 4, read off
    the bytes as docs/format.md describes them (an oracle independent of
    the core's code)."""
    data = Path(path).read_bytes()
    (version,) = struct.unpack_from("<I", data, 8)
    align = lambda n: (n + 63) // 64 * 64  # noqa: E731
    records, commits, at = [], [], 64
    while at + 16 <= len(data) and data[at : at + 3] == b"BMr":
        kind = data[at + 3]
        (length,) = struct.unpack_from("<Q", data, at + 8)
        end = at + 16 + length
        if end > len(data) or (kind == 3 and length == 0):
            break
        nxt = end
        if kind == 4:
            trailer = data[end : end + 32]
            if trailer[:8] == b"BMDSEND2" and struct.unpack_from("<Q", trailer, 8)[0] == at:
                commits.append(at)
                nxt = end + 32
        records.append((at, kind, end))
        at = align(nxt)
    last = commits[-1]
    segments = set()
    if version >= 4:
        # COMMIT: entry count, SCHEMA offset, piece count, then the pieces
        # (SEGMENT offset, count, two CRCs); a SEGMENT's rows come last
        (_, _, pieces) = struct.unpack_from("<QQQ", data, last + 16)
        listed, columns_at = set(), None
        for i in range(pieces):
            (segment, count) = struct.unpack_from("<QQ", data, last + 16 + 24 + 24 * i)
            segments.add(segment)
            (_, columns) = struct.unpack_from("<QI", data, segment + 16)
            rows = segment + 16 + 16 + 8 * columns * count
            listed |= {struct.unpack_from("<Q", data, rows + 24 * j)[0] for j in range(count)}
    else:
        (count, _, columns_at) = struct.unpack_from("<QQQ", data, last + 16)
        listed = {struct.unpack_from("<Q", data, last + 16 + 24 + 24 * i)[0] for i in range(count)}
    live = 64
    for at, kind, end in records:
        if (
            kind in (1, 2)
            or (kind == 3 and at in listed)
            or (kind == 5 and at == columns_at)
            or (kind == 6 and at in segments)
        ):
            live += min(align(end), len(data)) - at
        elif kind == 4 and at == last:
            live += end + 32 - at
    return len(commits), live


def _walk_v1(path):
    """The same for version 1, from the zip the last commit closes."""
    data = Path(path).read_bytes()
    live = 0
    with zipfile.ZipFile(path) as archive:
        index = archive.getinfo("blockmap-index.npy").header_offset
        for member in archive.infolist():
            if member.filename == "blockmap-index.npy":
                continue
            at = member.header_offset
            name_len, extra_len = struct.unpack_from("<HH", data, at + 26)
            live += 30 + name_len + extra_len + member.compress_size
    commits = len(re.findall(rb"PK\x03\x04.{22}\x12\x00..blockmap-index\.npy", data, re.DOTALL))
    return commits, live + len(data) - index


@pytest.mark.parametrize(
    "name", sorted(p.name for p in DATASETS.glob("*.bmds") if "recovered" not in p.name)
)
def test_info_of_the_stored_datasets(name):
    path = DATASETS / name
    found = info_json(path)
    assert found["kind"] == "dataset"
    content = found["content"]
    ds = blockmap.Dataset(path)
    assert content["format_version"] == ds.version
    assert content["id"] == ds.id
    assert content["entries"] == len(ds)
    assert content["fields"] == ds.fields
    assert content["committed"] is True
    assert sorted(content["columns"]) == sorted(ds.columns)
    for column, described in content["columns"].items():
        values = ds.column(column)
        expected = (values.min().item(), values.max().item()) if len(values) else (None, None)
        assert (described["min"], described["max"]) == expected
        assert described["dtype"] == str(values.dtype)
    commits, live = (_walk_v1 if ds.version == 1 else _walk_v23)(path)
    assert content["commits"] == commits
    assert content["live_bytes"] == live
    assert content["dead_bytes"] == path.stat().st_size - live
    if len(ds):
        for field in ds.fields:
            first = content["first_entry"][field]
            assert first["keys"]["count"] == len(ds.field(field)[0].keys)


def test_dead_bytes_grow_with_appends_and_compact_drops_them(tmp_path):
    path = tmp_path / "grown.bmds"
    maps = [small_map() for _ in range(3)]
    with blockmap.DatasetWriter(path) as writer:
        writer.write(maps[0])
    first = info_json(path)["content"]
    for tensor in maps[1:]:
        with blockmap.DatasetWriter(path, append=True) as writer:
            writer.write(tensor)
    grown = info_json(path)["content"]
    assert grown["entries"] == 3
    assert grown["commits"] == first["commits"] + 2
    assert grown["dead_bytes"] > first["dead_bytes"]
    assert (grown["commits"], grown["live_bytes"]) == _walk_v23(path)

    compacted = tmp_path / "compacted.bmds"
    done = run("compact", path, compacted)
    assert done.returncode == 0, done.stderr
    assert str(compacted) in done.stdout
    after = info_json(compacted)["content"]
    assert after["entries"] == 3
    assert (after["commits"], after["live_bytes"]) == _walk_v23(compacted)
    # a new file's only dead bytes: the empty commit it starts with
    assert after["dead_bytes"] < grown["dead_bytes"]
    for a, b in zip(blockmap.Dataset(compacted), maps, strict=True):
        assert a == b


def test_upgrade_writes_the_current_version(tmp_path):
    dst = tmp_path / "upgraded.bmds"
    done = run("upgrade", DATASETS / "v1-appended.bmds", dst)
    assert done.returncode == 0, done.stderr
    assert "format version 1" in done.stdout and "format version 4" in done.stdout
    assert blockmap.Dataset(dst).version == 4
    assert list(blockmap.Dataset(dst)) == list(blockmap.Dataset(DATASETS / "v1-appended.bmds"))
    # an existing DST is refused untouched, and replaced with --overwrite
    before = dst.read_bytes()
    done = run("upgrade", DATASETS / "v2-appended.bmds", dst)
    assert done.returncode == 2 and "--overwrite" in done.stderr
    assert dst.read_bytes() == before
    done = run("upgrade", "--overwrite", DATASETS / "v2-appended.bmds", dst)
    assert done.returncode == 0, done.stderr
    assert list(blockmap.Dataset(dst)) == list(blockmap.Dataset(DATASETS / "v2-appended.bmds"))
    done = run("upgrade", tmp_path / "nothing.bmds", dst)
    assert done.returncode == 2
    blockmap.save(tmp_path / "map.mts", small_map())
    done = run("compact", tmp_path / "map.mts", tmp_path / "out.bmds")
    assert done.returncode == 2
    assert "rewrites a dataset" in done.stderr
    assert not (tmp_path / "out.bmds").exists()


def test_info_of_pickles(tmp_path):
    for path in sorted(PICKLES.glob("*.pickle")):
        found = info_json(path)
        assert found["kind"] == "pickle"
        assert found["pickle"]["blockmap"] is True
        assert found["pickle"]["calls"][0] == "blockmap._blockmap._reconstruct"
        kinds = {"tensor": "tensormap", "block": "block", "labels": "labels"}
        assert found["pickle"]["holds"]["kind"] == kinds[path.name.split("-")[1]]


class _Calls:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_a_foreign_pickle_is_never_loaded(tmp_path):
    marker = tmp_path / "was-called"
    path = tmp_path / "evil.pickle"
    import pickle

    path.write_bytes(pickle.dumps(_Calls(str(marker))))
    for args in (["info", path], ["info", path, "--json"], ["show", path], ["verify", path]):
        done = run(*args)
        assert not marker.exists(), args
        text = done.stdout + done.stderr
        assert "posix.mkdir" in text, (args, text)
    assert run("info", path).returncode == 0
    assert run("show", path).returncode == 1
    assert run("verify", path).returncode == 1
    # blockmap's reconstructor beside a foreign call: described, not loaded
    mixed = tmp_path / "mixed.pickle"
    mixed.write_bytes(pickle.dumps([small_map(), _Calls(str(marker))], protocol=5))
    found = info_json(mixed)["pickle"]
    assert found["blockmap"] is False and found["holds"] is None
    assert "blockmap._blockmap._reconstruct" in found["calls"]
    assert "posix.mkdir" in found["calls"]
    assert run("verify", mixed).returncode == 1
    assert not marker.exists()


def test_info_of_numpy_files(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((4, 3), dtype=np.float32))
    np.savez(tmp_path / "b.npz", x=np.arange(5), y=np.ones((2, 2)))
    found = info_json(tmp_path / "a.npy")
    assert found["kind"] == "npy"
    assert found["content"] == {"shape": [4, 3], "dtype": "float32", "fortran_order": False}
    found = info_json(tmp_path / "b.npz")
    assert found["kind"] == "npz"
    assert found["content"]["arrays"]["x"]["shape"] == [5]
    assert run("verify", tmp_path / "b.npz").returncode == 0


def test_info_of_a_diskdataset_zip(tmp_path):
    tensor = small_map()
    path = tmp_path / "disk.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for i in range(3):
            wrapped = np.frombuffer(bytes(blockmap.save_buffer(tensor)), dtype=np.uint8)
            with archive.open(f"{i}/energy.mts", "w") as member:
                np.save(member, wrapped)
    found = info_json(path)
    assert found["kind"] == "diskdataset"
    assert found["content"]["samples"] == 3
    assert found["content"]["fields"] == ["energy"]
    assert found["content"]["first_sample"]["energy"]["keys"]["count"] == len(tensor.keys)
    assert run("verify", path).returncode == 0
    done = run("show", path, "2")
    assert done.returncode == 0, done.stderr
    assert "sample 2, energy" in done.stdout


# -- verify -------------------------------------------------------------------


def test_verify_intact_and_damaged_files(tmp_path):
    tensor = small_map()
    path = tmp_path / "map.mts"
    blockmap.save(path, tensor)
    done = run("verify", path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{path}: ok")
    # a byte of the first block's values flipped: a mapped load does not
    # see it, verify does
    data = bytearray(path.read_bytes())
    values = tensor.block_by_id(0).values
    at = bytes(data).index(values.tobytes()[:16])
    data[at] ^= 0x40
    path.write_bytes(bytes(data))
    done = run("verify", path)
    assert done.returncode == 1
    assert done.stdout.strip() and "Traceback" not in done.stdout + done.stderr
    verdict = json.loads(run("verify", path, "--json").stdout)
    assert verdict["ok"] is False and verdict["problems"]


def test_verify_lists_each_problem_of_a_dataset(tmp_path):
    path = tmp_path / "data.bmds"
    maps = [small_map() for _ in range(4)]
    blockmap.save_dataset(path, maps)
    assert run("verify", path).returncode == 0
    data = bytearray(path.read_bytes())
    ds = blockmap.Dataset(path)
    damaged = []
    for i in (1, 3):
        block = ds[i].block_by_id(0)
        at = bytes(data).index(block.values.tobytes())
        data[at] ^= 1
        damaged.append(i)
    del ds
    path.write_bytes(bytes(data))
    done = run("verify", path)
    assert done.returncode == 1
    lines = done.stdout.strip().splitlines()
    assert "2 problems" in lines[0]
    assert len(lines) == 3
    assert all("entry" in line for line in lines[1:])


# -- show ---------------------------------------------------------------------


def test_show_prints_the_map_and_summarises_selected_blocks(tmp_path):
    tensor = small_map()
    path = tmp_path / "map.mts"
    blockmap.save(path, tensor)
    key = tensor.keys.entry(1)
    selection = ",".join(f"{n}={int(v)}" for n, v in zip(key.names, key.values, strict=True))
    done = run("show", path, "--keys", selection)
    assert done.returncode == 0, done.stderr
    selected = blockmap.load(path, keys=blockmap.Labels(key.names, key.values.reshape(1, -1)))
    assert done.stdout.startswith(str(selected))
    values = tensor.block_by_id(1).values
    line = next(x for x in done.stdout.splitlines() if x.startswith("block 0"))
    assert f"min {values.min():.6g}, max {values.max():.6g}" in line
    assert f"mean {values.mean():.6g}" in line
    assert str(values.shape) in line


def test_show_an_entry_of_a_dataset(tmp_path):
    path = tmp_path / "data.bmds"
    maps = [small_map() for _ in range(3)]
    with blockmap.DatasetWriter(path) as writer:
        for i, tensor in enumerate(maps):
            writer.write(system=tensor, energy=maps[(i + 1) % 3], columns={"n": i})
    done = run("show", path, "-1")
    assert done.returncode == 0, done.stderr
    assert "entry 2, field system:" in done.stdout
    assert str(maps[2]) in done.stdout and str(maps[0]) in done.stdout
    for bad in (["show", path, "3"], ["show", path, "x"], ["show", path, "0", "--keys", "a"]):
        done = run(*bad)
        assert done.returncode == 2, bad
        assert len(done.stderr.strip().splitlines()) == 1


# -- errors --------------------------------------------------------------------


def test_files_that_are_not_regular_files(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, words in ((fifo, "FIFO"), (tmp_path, "directory"), (tmp_path / "no", "exist")):
        for command in ("info", "verify", "show"):
            done = run(command, path, timeout=60)
            assert done.returncode == 2, (command, path)
            assert words in done.stderr
            assert len(done.stderr.splitlines()) == 1


def test_random_bytes_are_refused_in_one_line(tmp_path):
    rng = np.random.default_rng(44)
    for size in (0, 1, 7, 100, 5000):
        path = tmp_path / f"random-{size}"
        path.write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        for command in ("info", "verify", "show"):
            done = run(command, path)
            assert done.returncode == 1, (size, command)
            out = done.stderr if command != "verify" else done.stdout + done.stderr
            assert len(out.strip().splitlines()) == 1
            assert "Traceback" not in out and "internal error" not in out


# -- cost: indexes and headers, not arrays -------------------------------------

COST = textwrap.dedent(
    """
    import contextlib, io, json, os, sys
    import blockmap, blockmap.dataset
    import blockmap._cli.commands, blockmap._cli.describe  # imported before counting

    from blockmap._cli import main

    # the maps and datasets the command opens are kept alive, so that the
    # pages of the file their mapping holds can be counted after it
    kept = []
    load, load_block = blockmap.load, blockmap.load_block
    blockmap.load = lambda *a, **k: kept.append(load(*a, **k)) or kept[-1]
    blockmap.load_block = lambda *a, **k: kept.append(load_block(*a, **k)) or kept[-1]

    class Kept(blockmap.dataset.Dataset):
        def __new__(cls, *args, **kwargs):
            kept.append(super().__new__(cls, *args, **kwargs))
            return kept[-1]

    blockmap.dataset.Dataset = Kept

    def read():
        with open("/proc/self/io") as f:
            return int(dict(line.split(": ") for line in f.read().splitlines())["rchar"])

    def resident(path):
        # the resident bytes of this process's mappings of the file: the
        # pages the command touched through a mapping
        total, mine = 0, False
        with open("/proc/self/smaps") as f:
            for line in f:
                fields = line.split()
                if "-" in fields[0] and len(fields) >= 5:
                    mine = fields[-1] == path
                elif mine and fields[0] == "Rss:":
                    total += int(fields[1]) * 1024
        return total

    before = read()
    with contextlib.redirect_stdout(io.StringIO()):
        status = main(sys.argv[1:])
    print(json.dumps({
        "status": status,
        "read": read() - before,
        "mapped": sum(1 for _ in kept),
        "touched": resident(os.path.realpath(sys.argv[2])),
    }))
    """
)


def cost(*args):
    done = subprocess.run(
        [sys.executable, "-c", COST, *map(str, args)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["status"] == 0
    return found


def _big_map(n_blocks=8, rows=10_000, columns=100):
    keys = blockmap.Labels(["k"], np.arange(n_blocks, dtype=np.int32).reshape(-1, 1))
    blocks = [
        blockmap.TensorBlock(
            np.full((rows, columns), float(k)),
            blockmap.Labels(["s"], np.arange(rows, dtype=np.int32).reshape(-1, 1)),
            [],
            blockmap.Labels(["p"], np.arange(columns, dtype=np.int32).reshape(-1, 1)),
        )
        for k in range(n_blocks)
    ]
    return blockmap.TensorMap(keys, blocks)


def test_info_and_show_read_headers_not_arrays(tmp_path):
    # 64 MB of values in 8 blocks: info reads the archive's structure and
    # labels (about 0.4 MB), never a page of the values
    path = tmp_path / "big.mts"
    blockmap.save(path, _big_map())
    size = path.stat().st_size
    assert size > 64e6
    for args in (["info", path], ["info", path, "--json"]):
        found = cost(*args)
        assert found["mapped"] == 1, found
        assert found["read"] < 2e6, (args, found)
        assert found["touched"] < 1e6, (args, found)
    # show with --keys touches the selected block's values only (8 MB)
    found = cost("show", path, "--keys", "k=3")
    assert found["read"] < 2e6
    assert 8e6 <= found["touched"] < 8e6 + 1e6, found
    # what touching every value looks like, for comparison
    assert cost("show", path, "--all")["touched"] >= 64e6


def test_info_of_a_dataset_reads_its_index_not_its_entries(tmp_path):
    # 2,000 entries of 32 kB: info walks the records' headers (16 bytes
    # each), reads the commit rows and the COLUMNS record
    path = tmp_path / "big.bmds"
    rng = np.random.default_rng(0)
    with blockmap.DatasetWriter(path) as writer:
        for _ in range(2000):
            writer.write(
                _big_map(n_blocks=1, rows=40, columns=100), columns={"x": int(rng.integers(9))}
            )
    assert path.stat().st_size > 64e6
    found = cost("info", path)
    assert found["mapped"] == 1, found
    assert found["read"] < 2e6, found
    # the first entry's description and labels (arrays never read)
    assert found["touched"] < 1e6, found


BOUNDED = textwrap.dedent(
    """
    import contextlib, io, resource, sys
    import blockmap._cli.commands, blockmap._cli.describe
    from blockmap._cli import main

    def vm_data():
        with open("/proc/self/status") as f:
            line = next(line for line in f if line.startswith("VmData:"))
        return int(line.split()[1]) * 1024

    # private memory (heap and anonymous mappings: RLIMIT_DATA) may grow
    # by 32 MB, half the file's arrays; a read-only mapping of the file
    # does not count
    limit = vm_data() + (32 << 20)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(sys.argv[1:])
    print(status, out.getvalue())
    """
)


def test_verify_of_a_large_map_takes_the_memory_of_its_labels(tmp_path):
    # blockmap.verify reads the file through a mapping: its CRCs are
    # checked without the 64 MB of arrays copied into memory (they were)
    path = tmp_path / "big.mts"
    blockmap.save(path, _big_map())
    done = subprocess.run(
        [sys.executable, "-c", BOUNDED, "verify", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("0 "), done.stdout + done.stderr
    # the same file damaged is still found out under the same limit
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    done = subprocess.run(
        [sys.executable, "-c", BOUNDED, "verify", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout.startswith("1 "), done.stdout + done.stderr
    assert "CRC" in done.stdout
