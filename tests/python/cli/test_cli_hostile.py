"""The ``blockmap`` command on hostile and foreign files: the readers'
hostile cases (crafted zips, NPY headers found by fuzzing, crafted
pickles of the reconstructor's tests), the stored datasets and pickles
cut and with bits flipped, and random bytes. Every command ends with exit
status 0, 1 or 2 and at most one line on standard error: never a
traceback, a crash, a hang or an "internal error".

The everyday test runs the whole corpus through ``blockmap._cli.main`` in
one child process (a process per case would take minutes); the slow one
runs every case through the installed console script, a process each."""

import io
import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import blockmap
from helpers import crafted_zips, io_cases, pickle_cases

DATA = Path(__file__).resolve().parents[2] / "data"
COMMANDS = (["info"], ["info", "--json"], ["verify"], ["show"])


class _Captured(Exception):
    pass


class _Call:
    """Pickles as a call of the reconstructor with ``args``."""

    def __init__(self, args):
        self.args = args

    def __reduce__(self):
        return (blockmap._blockmap._reconstruct, self.args)


def _crafted_pickles(monkeypatch):
    """The reconstructor's crafted inputs of pickle_cases.CRAFTED, as the
    pickle files that would make those calls."""

    def capture(*args):
        raise _Captured(args)

    class _Pickle:
        dumps = staticmethod(pickle.dumps)
        HIGHEST_PROTOCOL = pickle.HIGHEST_PROTOCOL
        PickleBuffer = pickle.PickleBuffer

        @staticmethod
        def loads(data, **_):
            raise _Captured(data)

    monkeypatch.setattr(pickle_cases, "_reconstruct", capture)
    monkeypatch.setattr(pickle_cases, "pickle", _Pickle)
    files = {}
    for name, (case, *_) in pickle_cases.CRAFTED.items():
        try:
            case()
        except _Captured as captured:
            (what,) = captured.args
            if isinstance(what, tuple):
                files[f"pickle-{name}"] = pickle.dumps(_Call(what), protocol=5)
            else:
                files[f"pickle-{name}"] = bytes(what)
        except Exception:  # a case that fails before it calls: not a file
            continue
    monkeypatch.undo()
    return files


def _mutations(name, data, rng, cuts=12, flips=12):
    files = {}
    for at in sorted(set(rng.integers(1, len(data), cuts).tolist())):
        files[f"{name}-cut-{at}"] = data[:at]
    for at in sorted(set(rng.integers(0, len(data), flips).tolist())):
        flipped = bytearray(data)
        flipped[at] ^= 1 << int(rng.integers(0, 8))
        files[f"{name}-flip-{at}"] = bytes(flipped)
    return files


def corpus(monkeypatch):
    rng = np.random.default_rng(44)
    files = {}
    tensor = io_cases.make_map(rng, gradients=True)
    files["valid-map"] = bytes(blockmap.save_buffer(tensor))
    files.update(_mutations("map", files["valid-map"], rng, cuts=16, flips=24))
    files.update(_mutations("block", bytes(blockmap.save_buffer(tensor.block_by_id(0))), rng))
    files.update(_mutations("labels", bytes(blockmap.save_buffer(tensor.keys)), rng))
    for how in ("one header", "own headers"):
        files[f"aliased-map-{how}"] = crafted_zips.aliased_map(how, blocks=20, rows=500)
        files[f"aliased-diskdataset-{how}"] = crafted_zips.aliased_diskdataset(how, samples=10)
    files["wrapped-archive"] = crafted_zips.wrapped_archive(500)
    for path in sorted((DATA / "fuzz").glob("*/*")):
        if path.name != "README.md":
            files[f"fuzz-{path.parent.name}-{path.name}"] = path.read_bytes()
    for path in sorted((DATA / "datasets").glob("*-committed.bmds")):
        files.update(_mutations(path.stem, path.read_bytes(), rng))
    for path in sorted((DATA / "pickle").glob("v3-*.pickle")):
        files.update(_mutations(path.stem, path.read_bytes(), rng, cuts=6, flips=6))
    files.update(_crafted_pickles(monkeypatch))
    # zips Python's zipfile lists but does not read: an encrypted member
    # (general purpose flag bit 0) and an unknown compression method
    plain = io.BytesIO()
    np.savez(plain, a=np.arange(10))
    for name, edit in (("encrypted", (6, b"\x01")), ("method-99", (8, b"\x63"))):
        data = bytearray(plain.getvalue())
        offset, value = edit
        for signature, base in ((b"PK\x03\x04", 0), (b"PK\x01\x02", 2)):
            at = data.index(signature) + offset + base
            data[at : at + 1] = value
        files[f"foreign-npz-{name}.npz"] = bytes(data)
    for size in (1, 3, 64, 4096):
        files[f"random-{size}"] = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        for prefix in (b"PK\x03\x04", b"\x89BMDS\r\n\x1a", b"\x93NUMPY", b"\x80\x05", b"\x80\x04"):
            body = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
            files[f"random-{size}-after-{prefix[:3].hex()}"] = prefix + body
    return files


RUNNER = textwrap.dedent(
    """
    import contextlib, io, json, resource, sys
    # a memory bomb ends as MemoryError, not as the machine swapping
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    from blockmap._cli import main
    results = []
    for args in json.load(sys.stdin):
        out, err = io.StringIO(), io.StringIO()
        sys.stderr.write("running " + " ".join(args) + "\\n")
        sys.stderr.flush()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(args)
            except SystemExit as exit:
                status = exit.code
        results.append([args, status, out.getvalue(), err.getvalue()])
    sys.stdout.write(json.dumps(results))
    """
)


def _check(args, status, out, err):
    shown = f"{' '.join(args)}: status {status}\nstdout: {out[-500:]}\nstderr: {err[-500:]}"
    assert status in (0, 1, 2), shown
    text = out + err
    assert "Traceback" not in text, shown
    assert "internal error" not in text, shown
    assert len(err.strip().splitlines()) <= 1, shown
    if status != 0:
        if args[0] == "verify" and status == 1:
            assert out.strip(), shown
        else:
            assert err.startswith("blockmap: error: "), shown


def _write(tmp_path, files):
    paths = {}
    for name, data in files.items():
        path = tmp_path / name.replace(" ", "-")
        path.write_bytes(data)
        paths[name] = path
    return paths


def test_hostile_files_end_in_one_line(tmp_path, monkeypatch):
    files = corpus(monkeypatch)
    assert sum(name.startswith("pickle-") for name in files) >= 30
    paths = _write(tmp_path, files)
    calls = [
        [*command[:1], str(path), *command[1:]] for path in paths.values() for command in COMMANDS
    ]
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(calls),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    assert len(results) == len(calls)
    for args, status, out, err in results:
        _check(args, status, out, err)
    by_file = {}
    for args, status, _, _ in results:
        by_file.setdefault(Path(args[1]).name, []).append(status)
    # what must fail verify does: random bytes, every crafted pickle, a cut
    # archive (a cut dataset may be one whose entries are recovered)
    failing = ("random-", "pickle-", "map-cut-", "block-cut-", "labels-cut-")
    for name, statuses in by_file.items():
        if name.startswith(failing):
            assert statuses[2] != 0, (name, statuses)
    assert by_file["valid-map"] == [0, 0, 0, 0]


@pytest.mark.slow
def test_hostile_files_through_the_console_script(tmp_path, monkeypatch):
    paths = _write(tmp_path, corpus(monkeypatch))
    script = Path(sys.executable).parent / "blockmap"
    for path in paths.values():
        for command in COMMANDS:
            args = [command[0], str(path), *command[1:]]
            done = subprocess.run([str(script), *args], capture_output=True, text=True, timeout=120)
            _check(args, done.returncode, done.stdout, done.stderr)
