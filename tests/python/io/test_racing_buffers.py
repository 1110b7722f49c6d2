"""Decoding memory someone else rewrites meanwhile (docs/design.md, "Caller
memory").

Every byte blockmap validates and then uses (names, npy headers, the pickle
header, lengths, offsets, label values) is copied into its own memory once
and validated and used from the copy; only array payloads stay views. Here a
thread (or, for a mapped file, another process) rewrites the input while
blockmap decodes it in a loop: random bytes, names flipped between valid and
invalid UTF-8, header lengths and counts changed. Each decode must give a
blockmap error or a valid object, never abort the process: the loops run in
a child process, so that an abort fails the test instead of killing pytest.
"""

import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    r"""
    import mmap, os, signal, subprocess, sys

    import numpy as np

    import blockmap
    from blockmap import BlockMapError, Labels, TensorBlock, TensorMap
    from blockmap._blockmap import _reconstruct, _set_pickle_piece_size

    LOADS = 1500
    ROUNDS = 3000


    def make_map():
        blocks = []
        for i in range(3):
            block = TensorBlock(
                values=np.arange(12.0).reshape(3, 2, 2) + i,
                samples=Labels(["system", "atom"], np.array([[0, 0], [0, 1], [1, 0]])),
                components=[Labels(["cmp"], np.array([[0], [1]]))],
                properties=Labels(["prop"], np.array([[0], [1]])),
            )
            block.add_gradient(
                "positions",
                TensorBlock(
                    values=np.ones((2, 2, 2)),
                    samples=Labels(["sample", "gx"], np.array([[0, 0], [2, 1]])),
                    components=[Labels(["cmp"], np.array([[0], [1]]))],
                    properties=Labels(["prop"], np.array([[0], [1]])),
                ),
            )
            blocks.append(block)
        keys = Labels(["key"], np.array([[0], [1], [2]]))
        tensor = TensorMap(keys, blocks)
        tensor.set_info("model", "soap")
        return tensor


    def at(data, needles, shift):
        # the offsets `shift` bytes into each occurrence of the needles
        found, text = [], bytes(data)
        for needle in needles:
            start = 0
            while (where := text.find(needle, start)) >= 0:
                found.append(where + shift)
                start = where + 1
        return [offset for offset in found if offset < len(data)]


    def check(result):
        # a valid object: everything in it can be read
        if isinstance(result, Labels):
            return list(result.names), result.values.sum()
        if isinstance(result, TensorBlock):
            result = [result]
        else:
            _ = list(result.keys.names), result.keys.values.sum()
            result = result.blocks()
        for block in result:
            _ = block.values.sum(), list(block.samples.names), block.samples.values.sum()
            for component in block.components:
                _ = component.values.sum()
            _ = block.properties.values.sum()
            for _, gradient in block.gradients():
                _ = gradient.values.sum(), gradient.samples.values.sum()


    def shared(data):
        # `data` copied into memory a forked writer rewrites (an anonymous
        # shared mapping): the writer runs beside the decode, with no GIL
        # between them
        memory = mmap.mmap(-1, max(1, len(data)))
        memory[: len(data)] = data
        return memoryview(memory)[: len(data)]


    def race(flips, randoms, load):
        # `flips`: (memory, offsets, other): bytes that toggle between their
        # value and `other`; `randoms`: memory whose bytes become random
        toggles = []
        for data, offsets, other in flips:
            for offset in offsets:
                toggles.append((data, offset, data[offset], other))
        assert toggles
        noise = np.random.default_rng(7).integers(0, 256, size=4096, dtype=np.uint8).tobytes()
        rounds = memoryview(mmap.mmap(-1, 8)).cast("q")
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            # one byte (or piece) wrong at a time, put back right after:
            # the input is valid most of the time, and changes under the
            # decode
            n = 0
            while True:
                for data, offset, original, other in toggles:
                    data[offset] = other
                    data[offset] = original
                for data in randoms:
                    if len(data) >= 8:
                        offset = (n * 4) % (len(data) - 7)
                        original = bytes(data[offset : offset + 8])
                        data[offset : offset + 8] = noise[n % 4000 : n % 4000 + 8]
                        data[offset : offset + 8] = original
                n += 1
                rounds[0] = n
                if os.getppid() != parent:
                    # the decoding process is gone (aborted)
                    os._exit(0)
        outcomes = {"ok": 0, "error": 0}
        try:
            # LOADS decodes, and more until the writer has rewritten the
            # input ROUNDS times (a busy machine may run it late)
            loads = 0
            while loads < LOADS or (rounds[0] < ROUNDS and loads < 100 * LOADS):
                loads += 1
                try:
                    check(load())
                    outcomes["ok"] += 1
                except BlockMapError:
                    outcomes["error"] += 1
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        assert rounds[0] > 0
        return outcomes


    def pickle5():
        func, args = make_map().__reduce_ex__(5)
        version, header = args[0], shared(args[1])
        data = [shared(b.raw()) for b in args[2:]]
        flips = [
            # names: valid, then invalid UTF-8 (a lone continuation byte)
            (header, at(header, [b'"system"', b'"cmp"', b'"prop"', b'"gx"', b'"soap"'], 1), 0xFF),
            # counts, shapes and dtypes
            (header, at(header, [b'"count":3', b'"count":2'], 8), ord("9")),
            (header, at(header, [b"[3,2,2]", b"[2,2,2]"], 1), ord("7")),
            (header, at(header, [b'"<i4"', b'"<f8"'], 1), ord(">")),
        ]
        # the label values become random (duplicated entries) now and then
        randoms = [b for b in data if len(b) in (24, 16)][:2]
        return race(flips, randoms, lambda: _reconstruct(version, header, *data))


    def npy_flips(archive):
        return [
            # names in npy headers and zip entry names
            (archive, at(archive, [b"('system'", b"('cmp'", b"('gx'", b"('atom'"], 2), 0xFF),
            (archive, at(archive, [b"'shape': (3,", b"'shape': (20,"], 10), ord("9")),
            # the npy header length (little-endian u16 after the magic and version)
            (archive, at(archive, [b"\x93NUMPY\x01\x00"], 8), 0x7F),
            (archive, at(archive, [b"\x93NUMPY\x01\x00"], 9), 0x01),
            # zip local header name lengths
            (archive, at(archive, [b"PK\x03\x04"], 26), 0xFE),
        ]


    def merged(*all_outcomes):
        out = {"ok": 0, "error": 0}
        for outcomes in all_outcomes:
            for key, value in outcomes.items():
                out[key] += value
        return out


    def protocol4():
        archive = shared(blockmap.save_buffer(make_map()))
        flips = npy_flips(archive)
        # load_buffer, and the same bytes as a version 0 pickle
        first = race(flips, [], lambda: blockmap.load_buffer(archive))
        second = race(flips, [], lambda: _reconstruct(0, "tensor", archive))
        # a version 2 pickle: the archive in pieces
        previous = _set_pickle_piece_size(300)
        try:
            func, args = make_map().__reduce_ex__(4)
        finally:
            _set_pickle_piece_size(previous)
        assert args[0] == 2, args[0]
        pieces = [shared(p) for p in args[2:]]
        piece_flips = [flip for piece in pieces for flip in npy_flips(piece)]
        third = race(piece_flips, [], lambda: _reconstruct(2, "tensor", *pieces))
        return merged(first, second, third)


    def labels_npy():
        values = np.arange(40, dtype=np.int32).reshape(20, 2)
        npy = shared(blockmap.save_buffer(Labels(["system", "atom"], values)))
        flips = npy_flips(npy)
        values = memoryview(npy)[-80:]
        return race(flips, [values], lambda: blockmap.load_labels_buffer(npy))


    def mapped(path):
        blockmap.save(path, make_map())
        with open(path, "rb") as f:
            archive = bytearray(f.read())
        changes = []
        for _, offsets, other in npy_flips(archive):
            changes += [f"{offset}:{archive[offset]}:{other}" for offset in offsets]
        script = (
            "import os, sys\n"
            "fd = os.open(sys.argv[1], os.O_WRONLY)\n"
            "changes = [tuple(map(int, c.split(':'))) for c in sys.argv[2].split(',')]\n"
            "n = 0\n"
            "while True:\n"
            "    for at, original, other in changes:\n"
            "        os.pwrite(fd, bytes([other if n % 2 == 0 else original]), at)\n"
            "    n += 1\n"
        )
        writer = subprocess.Popen([sys.executable, "-c", script, path, ",".join(changes)])
        outcomes = {"ok": 0, "error": 0}
        try:
            for _ in range(LOADS):
                try:
                    check(blockmap.load(path, mmap=True))
                    outcomes["ok"] += 1
                except BlockMapError:
                    outcomes["error"] += 1
        finally:
            writer.kill()
            writer.wait()
        return outcomes


    case = sys.argv[1]
    if case == "pickle5":
        outcomes = pickle5()
    elif case == "protocol4":
        outcomes = protocol4()
    elif case == "labels":
        outcomes = labels_npy()
    else:
        outcomes = mapped(sys.argv[2])
    print("outcomes", outcomes)
    """
)


@pytest.mark.parametrize("case", ["pickle5", "protocol4", "labels", "mapped"])
def test_decoding_memory_rewritten_meanwhile_never_aborts(case, tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", CHILD, case, str(tmp_path / "racing.mts")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    assert "outcomes" in result.stdout, result.stdout
