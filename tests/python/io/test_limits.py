"""What blockmap writes, it reads: every limit of the readers is checked by
the constructors and writers with the same number. Each limit is walked from
both sides: at the limit everything round-trips (files, mapped files,
buffers, every pickle protocol, shared memory), even on a thread with a
512 KiB stack; one past it is refused when the object is made, and the
readers refuse crafted input past it without recursing into it."""

import copy
import json
import pickle
import threading
import warnings
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import blockmap
from blockmap import Labels, TensorBlock, TensorMap
from helpers.io_cases import assert_identical, labels_record, npy_bytes, write_archive

MAX_GRADIENT_DEPTH = 16
MAX_GRADIENT_NAME = 1024
MAX_NPY_HEADER = 1 << 20
MAX_LABEL_NAMES = MAX_NPY_HEADER - 256  # counted as sum(len(name) + 13)
MAX_INFO_JSON = 64 << 20
SMALL_STACK = 512 * 1024


def _on_small_stack(function):
    """``function()`` run on a thread with a 512 KiB stack; its result, or
    the exception it raised."""
    outcome = {}

    def run():
        try:
            outcome["result"] = function()
        except BaseException as error:  # noqa: B036 - handed to the caller
            outcome["error"] = error

    previous = threading.stack_size(SMALL_STACK)
    try:
        thread = threading.Thread(target=run)
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _leaf():
    """A block of one sample named ``sample`` (a valid gradient too)."""
    return TensorBlock(
        np.ones((1, 1)), Labels(["sample"], np.array([[0]])), [], Labels.range("p", 1)
    )


def _nested_block(depth, parameter="g"):
    """A block whose gradients nest ``depth`` levels deep."""
    if depth == 0:
        return TensorBlock(
            np.ones((1, 1)), Labels(["sample"], np.array([[0]])), [], Labels.range("p", 1)
        )
    block = _nested_block(depth - 1, parameter)
    parent = TensorBlock(
        np.ones((1, 1)), Labels(["sample"], np.array([[0]])), [], Labels.range("p", 1)
    )
    parent.add_gradient(parameter, block)
    return parent


def _map_of(block):
    # a map's blocks take the gradient's shape: samples named "sample" are fine
    return TensorMap(Labels.range("k", 1), [block])


def _every_round_trip(data, tmp_path):
    """``data`` through every path that reads what blockmap writes."""
    path = tmp_path / "limit.mts"
    if isinstance(data, Labels):
        blockmap.save(path, data)
        yield "file", blockmap.load_labels(path)
        yield "buffer", blockmap.load_labels_buffer(blockmap.save_buffer(data))
    else:
        load = blockmap.load if isinstance(data, TensorMap) else blockmap.load_block
        load_buffer = (
            blockmap.load_buffer if isinstance(data, TensorMap) else blockmap.load_block_buffer
        )
        blockmap.save(path, data)
        yield "file", load(path)
        yield "mapped file", load(path, mmap=True)
        yield "buffer", load_buffer(blockmap.save_buffer(data))
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        yield f"pickle {protocol}", pickle.loads(pickle.dumps(data, protocol=protocol))
    buffers = []
    stream = pickle.dumps(data, protocol=5, buffer_callback=buffers.append)
    yield "pickle 5 out-of-band", pickle.loads(stream, buffers=buffers)
    yield "deepcopy", copy.deepcopy(data)
    if not isinstance(data, Labels):
        shared = copy.copy(data).share_memory()
        yield "shared memory", pickle.loads(ForkingPickler.dumps(shared))


def _assert_round_trips(data, tmp_path):
    for how, loaded in _on_small_stack(lambda: list(_every_round_trip(data, tmp_path))):
        assert_identical(loaded, data), how


# ------------------------------------------------------------ gradient depth


def test_gradients_at_the_depth_limit_round_trip_on_a_small_stack(tmp_path):
    block = _on_small_stack(lambda: _nested_block(MAX_GRADIENT_DEPTH))
    _assert_round_trips(block, tmp_path)
    _assert_round_trips(_map_of(block), tmp_path)


def test_one_level_past_the_depth_limit_is_refused_by_add_gradient():
    deepest = _nested_block(MAX_GRADIENT_DEPTH)
    parent = TensorBlock(
        np.ones((1, 1)), Labels(["sample"], np.array([[0]])), [], Labels.range("p", 1)
    )
    with pytest.raises(blockmap.ValidationError, match="16 allowed"):
        parent.add_gradient("g", deepest)
    assert parent.gradients_list() == []


def _nested_archive(depth):
    """A block archive (bytes) whose gradients nest ``depth`` levels deep,
    written by hand (blockmap would refuse to make it)."""
    one = np.ones((1, 1))
    entries = {
        "values.npy": one,
        "samples.npy": labels_record(Labels(["sample"], np.array([[0]]))),
        "properties.npy": labels_record(Labels.range("p", 1)),
    }
    prefix = ""
    for _ in range(depth):
        prefix += "gradients/g/"
        entries[f"{prefix}values.npy"] = one
        entries[f"{prefix}samples.npy"] = labels_record(Labels(["sample"], np.array([[0]])))
    return write_archive(entries)


def test_crafted_archives_past_the_depth_limit_are_refused_on_a_small_stack():
    at_limit = _on_small_stack(lambda: blockmap.load_block_buffer(_nested_archive(16)))
    assert at_limit == _nested_block(MAX_GRADIENT_DEPTH)
    for depth in (MAX_GRADIENT_DEPTH + 1, 500):
        archive = _nested_archive(depth)
        with pytest.raises(blockmap.FormatError, match="nest more than 16 levels"):
            _on_small_stack(lambda archive=archive: blockmap.load_block_buffer(archive))


def _nested_pickle(depth):
    """The protocol 5 header and buffers of a block whose gradients nest
    ``depth`` levels deep, written by hand (blockmap would refuse to make it)."""
    labels = {"names": ["sample"], "count": 1, "dtype": "<i4"}
    block = {"dtype": "<f8", "shape": [1, 1], "samples": labels, "components": []}
    root = dict(block, properties={"names": ["p"], "count": 1, "dtype": "<i4"})
    level = root
    for _ in range(depth):
        gradient = dict(block)
        level["gradients"] = {"g": gradient}
        level = gradient
    header = json.dumps({"kind": "block", "block": root}).encode()
    one, zero = np.ones(1).tobytes(), np.zeros(1, dtype=np.int32).tobytes()
    buffers = [one, zero, zero] + [one, zero] * depth
    return header, buffers


def test_crafted_pickle_headers_past_the_limits_are_refused_on_a_small_stack():
    reconstruct = blockmap._blockmap._reconstruct
    header, buffers = _nested_pickle(MAX_GRADIENT_DEPTH)
    loaded = _on_small_stack(lambda: reconstruct(1, header, *buffers))
    assert loaded == _nested_block(MAX_GRADIENT_DEPTH)
    header, buffers = _nested_pickle(MAX_GRADIENT_DEPTH + 1)
    with pytest.raises(blockmap.FormatError, match="nest more than 16 levels"):
        _on_small_stack(lambda: reconstruct(1, header, *buffers))
    # deeper than any header blockmap writes: refused before it is parsed
    for deep in (_nested_pickle(100)[0], b"[" * 100_000, b'{"a":' * 50_000 + b"1"):
        with pytest.raises(blockmap.FormatError, match="nests deeper"):
            _on_small_stack(lambda deep=deep: reconstruct(1, deep, *buffers))


def test_gradient_parameter_names_at_the_length_limit():
    block = TensorBlock(np.ones((1, 1)), Labels(["s"], np.array([[0]])), [], Labels.range("p", 1))
    gradient = TensorBlock(
        np.ones((1, 1)), Labels(["sample"], np.array([[0]])), [], Labels.range("p", 1)
    )
    block.add_gradient("g" * MAX_GRADIENT_NAME, gradient)
    assert_identical(blockmap.load_block_buffer(blockmap.save_buffer(block)), block)
    with pytest.raises(blockmap.ValidationError, match="1024 allowed"):
        block.add_gradient("h" * (MAX_GRADIENT_NAME + 1), gradient)


# ------------------------------------------------------------ label names


def _names(total, count):
    """``count`` valid, distinct names whose sizes (len + 13) sum to ``total``."""
    base, extra = divmod(total - 13 * count, count)
    names = []
    for i in range(count):
        length = base + (1 if i < extra else 0)
        prefix = f"n{i}_"
        names.append(prefix + "x" * (length - len(prefix)))
    assert sum(len(name) + 13 for name in names) == total
    return names


def test_label_names_at_the_npy_header_limit_round_trip(tmp_path):
    names = _names(MAX_LABEL_NAMES, 16_000)
    labels = Labels(names, np.arange(len(names), dtype=np.int32).reshape(1, -1))
    # the header blockmap writes fits what its reader (and numpy) accept
    written = bytes(blockmap.save_buffer(labels))
    header_len = int.from_bytes(written[8:12], "little")
    assert header_len <= MAX_NPY_HEADER
    _assert_round_trips(labels, tmp_path)
    keys = Labels(names[:1], np.array([[0]]))
    properties = Labels(names, np.zeros((1, len(names)), dtype=np.int32))
    block = TensorBlock(np.ones((1, 1)), Labels(["s"], np.array([[0]])), [], properties)
    _assert_round_trips(TensorMap(keys, [block]), tmp_path)


def test_label_names_one_byte_past_the_limit_are_refused():
    names = _names(MAX_LABEL_NAMES + 1, 16_000)
    with pytest.raises(blockmap.ValidationError, match="more than the 1048320 allowed"):
        Labels(names, np.zeros((1, len(names)), dtype=np.int32))
    with pytest.raises(blockmap.ValidationError, match="allowed"):
        Labels.empty(names)


def test_crafted_npy_headers_past_the_limit_are_refused():
    names = _names(MAX_LABEL_NAMES + 4096, 16_000)
    record = np.zeros(1, dtype=[(name, "<i4") for name in names])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # numpy: "format 2.0"
        data = npy_bytes(record)
    assert int.from_bytes(data[8:12], "little") > MAX_NPY_HEADER
    with pytest.raises(blockmap.FormatError, match="longer than"):
        blockmap.load_labels_buffer(data)


# ------------------------------------------------------------ info


def _info_value(json_len):
    # {"\n  "k": "<value>"\n} is 13 bytes besides the value
    return "v" * (json_len - 13)


def test_info_at_the_limit_round_trips(tmp_path):
    tensor = _map_of(_nested_block(0))
    tensor.set_info("k", _info_value(MAX_INFO_JSON))
    for how, loaded in _every_round_trip(tensor, tmp_path):
        assert loaded.info() == tensor.info(), how


def test_info_one_byte_past_the_limit_is_refused_and_left_as_it_was():
    tensor = _map_of(_nested_block(0))
    tensor.set_info("a", "b")
    with pytest.raises(blockmap.ValidationError, match="more than the 67108864 allowed"):
        tensor.set_info("k", _info_value(MAX_INFO_JSON + 1))
    assert tensor.info() == {"a": "b"}
    # escapes count as they are written: a quote takes two bytes
    with pytest.raises(blockmap.ValidationError):
        tensor.set_info("k", '"' * (MAX_INFO_JSON // 2))
