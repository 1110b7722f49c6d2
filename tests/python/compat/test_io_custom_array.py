"""metatensor-core's ``metatensor.io.load_custom_array`` and its buffer and
block forms, with ``create_numpy_array`` / ``create_torch_array``, against
blockmap's ``blockmap.io`` functions of the same names, on the same files
(metatensor-learn's on-disk datasets call exactly these)."""

from __future__ import annotations

import numpy as np
import pytest

import blockmap
import blockmap.io

torch = pytest.importorskip("torch")
mts = pytest.importorskip("metatensor")
import metatensor.io  # noqa: E402  (after the skip)


def _map(lib):
    rng = np.random.default_rng(3)
    samples = lib.Labels(["s"], np.arange(4, dtype=np.int32).reshape(-1, 1))
    properties = lib.Labels(["p"], np.arange(3, dtype=np.int32).reshape(-1, 1))
    block = lib.TensorBlock(rng.random((4, 3)), samples, [], properties)
    gradient = lib.TensorBlock(
        rng.random((2, 3)),
        lib.Labels(["sample"], np.array([[0], [2]], dtype=np.int32)),
        [],
        properties,
    )
    block.add_gradient("g", gradient)
    return lib.TensorMap(lib.Labels(["k"], np.array([[0]], dtype=np.int32)), [block])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    path = tmp_path_factory.mktemp("custom") / "map.mts"
    block_path = path.with_name("block.mts")
    tensor = _map(mts)
    mts.save(path, tensor)
    mts.save(block_path, tensor.block(0))
    return path, block_path


FORMS = ["load_custom_array", "load_buffer_custom_array"]
FORMS += ["load_block_custom_array", "load_block_buffer_custom_array"]


def _arrays(obj):
    block = obj if hasattr(obj, "gradient") and hasattr(obj, "samples") else obj.block(0)
    return [block.values, block.gradient("g").values]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("arrays", ["numpy", "torch"])
def test_same_arrays_as_metatensor_core(files, form, arrays):
    path, block_path = files
    source = block_path if "block" in form else path
    if "buffer" in form:
        source = source.read_bytes()
    theirs = getattr(metatensor.io, form)(source, getattr(metatensor.io, f"create_{arrays}_array"))
    expected_type = torch.Tensor if arrays == "torch" else np.ndarray
    # blockmap's callbacks, and metatensor-core's own, name the array type
    for create in (f"create_{arrays}_array",):
        for module in (blockmap.io, metatensor.io):
            ours = getattr(blockmap.io, form)(source, create_array=getattr(module, create))
            for mine, their in zip(_arrays(ours), _arrays(theirs), strict=True):
                assert type(mine) is type(their)
                assert isinstance(mine, expected_type)
                np.testing.assert_array_equal(np.asarray(mine), np.asarray(their))
                if arrays == "torch":
                    assert mine.dtype == their.dtype
    # the dtype and device of the object follow, as metatensor-core's
    assert ours.dtype == theirs.dtype
    assert ours.device == theirs.device
    # writable arrays, as metatensor-core's fresh ones (no torch warning
    # about read-only memory: warnings are errors in the tests)
    _arrays(ours)[0][0, 0] = 1.0


def test_as_metatensor_learn_calls_it(files):
    import blockmap as metatensor

    tensor = metatensor.io.load_custom_array(
        files[0], create_array=metatensor.io.create_torch_array
    )
    assert isinstance(tensor.block(0).values, torch.Tensor)
    assert tensor.block(0).values.dtype == torch.float64
    # writable tensors, as metatensor-core's fresh ones: no read-only warning
    tensor.block(0).values[0, 0] = 1.0


def test_other_callbacks_are_refused(files):
    def create_array(shape_ptr, shape_count, dtype, array):
        raise AssertionError("not called")

    for bad in (create_array, None, "torch", print):
        with pytest.raises(blockmap.BlockMapTypeError, match="create_array"):
            blockmap.io.load_custom_array(files[0], bad)
    with pytest.raises(blockmap.BlockMapTypeError, match="load_custom_array"):
        blockmap.io.create_torch_array(None, 0, None, None)
    assert "create_torch_array" in blockmap.io.__all__
