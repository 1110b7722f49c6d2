"""Every entry point that takes ``arrays=``, for the tests of that argument
(also run in a process where torch cannot be imported)."""

import numpy as np

import blockmap


def arrays_calls(tmp_path):
    """``{name: call(arrays)}`` of every entry point with an ``arrays=``
    parameter, over small files and buffers written in ``tmp_path``."""
    block = blockmap.TensorBlock(
        np.arange(6.0).reshape(3, 2),
        blockmap.Labels.range("s", 3),
        [],
        blockmap.Labels.range("p", 2),
    )
    tm = blockmap.TensorMap(blockmap.Labels.range("k", 1), [block])
    path = tmp_path / "map.mts"
    blockmap.save(path, tm)
    blockmap.save(tmp_path / "block.mts", block)
    blockmap.save_dataset(tmp_path / "maps.data", [tm])
    buffer = blockmap.save_buffer(tm)
    block_buffer = blockmap.save_buffer(block)
    return {
        "load": lambda a: blockmap.load(path, arrays=a),
        "load_block": lambda a: blockmap.load_block(tmp_path / "block.mts", arrays=a),
        "load_buffer": lambda a: blockmap.load_buffer(buffer, arrays=a),
        "load_block_buffer": lambda a: blockmap.load_block_buffer(block_buffer, arrays=a),
        "TensorMap.load": lambda a: blockmap.TensorMap.load(path, arrays=a),
        "TensorMap.load_buffer": lambda a: blockmap.TensorMap.load_buffer(buffer, arrays=a),
        "TensorBlock.load": lambda a: blockmap.TensorBlock.load(tmp_path / "block.mts", arrays=a),
        "TensorBlock.load_buffer": lambda a: blockmap.TensorBlock.load_buffer(
            block_buffer, arrays=a
        ),
        "TensorMap.to": lambda a: tm.to(arrays=a),
        "TensorBlock.to": lambda a: block.to(arrays=a),
        "Labels.to": lambda a: tm.keys.to(arrays=a),
        "Dataset.load": lambda a: blockmap.Dataset(tmp_path / "maps.data").load(0, arrays=a),
    }
