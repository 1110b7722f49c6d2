"""Loading selected blocks: ``load(path, keys=selection)`` and its
siblings read the archive's directory, the keys and the selected blocks,
and nothing else (the bytes read are counted)."""

import io
import os

import numpy as np
import pytest

import blockmap
from blockmap import Labels
from helpers.io_cases import assert_identical, make_map


def _expected(tensor, selection):
    positions = tensor.keys.select(selection)
    keys = Labels(tensor.keys.names, tensor.keys.values[positions])
    return blockmap.TensorMap(keys, [tensor.block(int(i)).copy() for i in positions])


@pytest.fixture
def saved(tmp_path, rng):
    tensor = make_map(rng, n_samples=(3, 5, 4))
    path = tmp_path / "data.mts"
    blockmap.save(path, tensor)
    return tensor, path


SELECTIONS = {
    "one key, every dimension": lambda keys: Labels(keys.names, keys.values[[2]]),
    "two keys in reverse order": lambda keys: Labels(keys.names, keys.values[[2, 0]]),
    "one dimension": lambda keys: Labels([keys.names[0]], keys.values[:1, :1]),
    "nothing matches": lambda keys: Labels(keys.names, np.full((1, len(keys.names)), 999)),
    "no dimensions": lambda keys: Labels([], np.zeros((1, 0), dtype=np.int32)),
}


@pytest.mark.parametrize("case", SELECTIONS)
def test_every_way_of_loading_selects_the_same_blocks(saved, case):
    tensor, path = saved
    selection = SELECTIONS[case](tensor.keys)
    expected = _expected(tensor, selection)
    data = path.read_bytes()
    loaded = {
        "path": blockmap.load(path, keys=selection),
        "mapped": blockmap.load(path, mmap=True, keys=selection),
        "copy-on-write": blockmap.load(path, mmap="c", keys=selection),
        "buffer": blockmap.load_buffer(data, keys=selection),
        "file object": blockmap.load(io.BytesIO(data), keys=selection),
        "TensorMap.load": blockmap.TensorMap.load(str(path), keys=selection),
        "TensorMap.load_buffer": blockmap.TensorMap.load_buffer(data, keys=selection),
        "torch arrays": blockmap.load(path, keys=selection).to(arrays="numpy"),
    }
    for how, result in loaded.items():
        assert len(result) == len(expected), how
        assert_identical(result, expected)
    # the keys come in the order Labels.select gives
    assert loaded["path"].keys == expected.keys


def test_selected_blocks_of_a_buffer_view_it(saved):
    tensor, path = saved
    data = bytearray(path.read_bytes())
    selection = Labels(tensor.keys.names, tensor.keys.values[[1]])
    loaded = blockmap.load_buffer(data, keys=selection)
    assert np.shares_memory(loaded.block(0).values, np.frombuffer(data, dtype=np.uint8))


def test_bad_selections_are_refused(saved, tmp_path):
    tensor, path = saved
    with pytest.raises(blockmap.ValidationError, match="not part of these Labels"):
        blockmap.load(path, keys=Labels(["nope"], np.array([[1]])))
    with pytest.raises(TypeError):
        blockmap.load(path, keys=np.array([[1]]))
    block_path = tmp_path / "block.mts"
    blockmap.save(block_path, tensor.block(0))
    with pytest.raises(blockmap.BlockMapError):
        blockmap.load(block_path, keys=Labels(tensor.keys.names, tensor.keys.values[:1]))


def _read_bytes():
    with open("/proc/self/io") as stats:
        for line in stats:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


class CountingFile(io.RawIOBase):
    """A file object counting the bytes read through it."""

    def __init__(self, path):
        self.file = open(path, "rb")  # noqa: SIM115 (closed by close)
        self.read_bytes = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, offset, whence=0):
        return self.file.seek(offset, whence)

    def tell(self):
        return self.file.tell()

    def read(self, size=-1):
        data = self.file.read(size)
        self.read_bytes += len(data)
        return data

    def close(self):
        self.file.close()
        super().close()


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs /proc/self/io")
def test_the_bytes_read_are_those_of_the_selected_blocks(tmp_path):
    # 200 blocks of 800 kB each (160 MB); one of them is selected
    keys = Labels(["k"], np.arange(200).reshape(-1, 1))
    values = np.random.default_rng(0).random((1000, 100))
    blocks = [
        blockmap.TensorBlock(values, Labels.range("s", 1000), [], Labels.range("p", 100))
        for _ in range(200)
    ]
    path = tmp_path / "big.mts"
    blockmap.save(path, blockmap.TensorMap(keys, blocks))
    size = path.stat().st_size
    selection = Labels(["k"], np.array([[117]]))
    block_bytes = values.nbytes
    for mmap in (False, True):
        before = _read_bytes()
        loaded = blockmap.load(path, mmap=mmap, keys=selection)
        read = _read_bytes() - before
        assert loaded.keys == selection
        np.testing.assert_array_equal(loaded.block(0).values, values)
        # the directory (200 x 4 entries), the keys and one block (read in
        # 64 KiB pieces), not the file; mapped, the block is not even read
        limit = (0 if mmap else block_bytes) + 600_000
        assert read < limit, (mmap, read, limit, size)
    counting = CountingFile(path)
    loaded = blockmap.load(counting, keys=selection)
    counting.close()
    np.testing.assert_array_equal(loaded.block(0).values, values)
    assert counting.read_bytes < block_bytes + 600_000 < size / 100
