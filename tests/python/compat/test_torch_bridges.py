"""``blockmap.metatensor_torch.from_metatensor_torch`` and
``to_metatensor_torch``: the same objects in metatensor-torch, with every
values tensor shared (checked by address) and the labels copied."""

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

with warnings.catch_warnings():
    # metatensor-torch scripts its own code on import (torch.jit.script warns)
    warnings.simplefilter("ignore", FutureWarning)
    mtt = pytest.importorskip("metatensor.torch")

import torch  # noqa: E402

import blockmap  # noqa: E402
from blockmap.metatensor_torch import from_metatensor_torch, to_metatensor_torch  # noqa: E402
from helpers.io_cases import make_map, zero_block_map  # noqa: E402
from helpers.memory import address_of  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")


def _numpy(values):
    if isinstance(values, torch.Tensor):
        return values.detach().numpy()
    return np.asarray(values)


def _blocks(data):
    """Every block of a block or map (either library), gradients included,
    depth first in a fixed order."""
    top = data.blocks() if hasattr(data, "keys") else [data]
    blocks = []

    def visit(block):
        blocks.append(block)
        for parameter in sorted(block.gradients_list()):
            visit(block.gradient(parameter))

    for block in top:
        visit(block)
    return blocks


def _assert_labels_equal(ours, theirs):
    assert list(ours.names) == list(theirs.names)
    assert isinstance(theirs.values, torch.Tensor)
    assert theirs.values.dtype == torch.int32
    np.testing.assert_array_equal(_numpy(ours.values), _numpy(theirs.values))


def _assert_same_data(ours, theirs, *, shared=True):
    """Field by field equality of a blockmap object and a metatensor-torch
    one; with ``shared``, every values array at the same address."""
    if isinstance(ours, blockmap.Labels):
        _assert_labels_equal(ours, theirs)
        return
    if isinstance(ours, blockmap.TensorMap):
        _assert_labels_equal(ours.keys, theirs.keys)
        assert ours.info() == theirs.info()
    ours_blocks, their_blocks = _blocks(ours), _blocks(theirs)
    assert len(ours_blocks) == len(their_blocks)
    for a, b in zip(ours_blocks, their_blocks, strict=True):
        assert sorted(a.gradients_list()) == sorted(b.gradients_list())
        values = _numpy(a.values)
        assert values.dtype == _numpy(b.values).dtype
        np.testing.assert_array_equal(values, _numpy(b.values))
        _assert_labels_equal(a.samples, b.samples)
        assert len(a.components) == len(b.components)
        for x, y in zip(a.components, b.components, strict=True):
            _assert_labels_equal(x, y)
        _assert_labels_equal(a.properties, b.properties)
        if shared:
            assert address_of(a.values) == address_of(b.values)


def _their_map(dtype=torch.float64, info=None):
    """A metatensor-torch map made from torch tensors (no blockmap memory
    involved), with nested gradients under any parameter names."""
    generator = torch.Generator().manual_seed(7)
    components = [mtt.Labels(["o3_mu"], torch.arange(-1, 2, dtype=torch.int32).reshape(-1, 1))]
    properties = mtt.Labels.range("n", 4)
    blocks = []
    for n_samples in (3, 5):
        samples = mtt.Labels(
            ["system", "atom"],
            torch.stack(
                [torch.zeros(n_samples, dtype=torch.int32), torch.arange(n_samples)], dim=1
            ).to(torch.int32),
        )
        values = torch.rand((n_samples, 3, 4), generator=generator).to(dtype)
        block = mtt.TensorBlock(values, samples, components, properties)
        gradient_samples = mtt.Labels(
            ["sample", "atom"], torch.tensor([[0, 0], [0, 1], [2, 1]], dtype=torch.int32)
        )
        gradient = mtt.TensorBlock(
            torch.rand((3, 3, 3, 4), generator=generator).to(dtype),
            gradient_samples,
            [mtt.Labels.range("xyz", 3), components[0]],
            properties,
        )
        second = mtt.TensorBlock(
            torch.rand((2, 3, 3, 4), generator=generator).to(dtype),
            mtt.Labels.range("sample", 2),
            [mtt.Labels.range("xyz", 3), components[0]],
            properties,
        )
        gradient.add_gradient("grad-of-grad", second)
        block.add_gradient("positions", gradient)
        block.add_gradient("strain 2", _strain(generator, dtype, components, properties))
        blocks.append(block)
    keys = torch.tensor([[1, 1], [1, 6]], dtype=torch.int32)
    keys = mtt.Labels(["o3_lambda", "center_type"], keys)
    tensor = mtt.TensorMap(keys, blocks)
    for key, value in (info or {}).items():
        tensor.set_info(key, value)
    return tensor


def _strain(generator, dtype, components, properties):
    return mtt.TensorBlock(
        torch.rand((1, 3, 4), generator=generator).to(dtype),
        mtt.Labels.range("sample", 1),
        components,
        properties,
    )


# -- blockmap -> metatensor-torch ---------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_to_metatensor_torch_shares_every_array(rng, dtype):
    tensor = make_map(rng, dtype=dtype, info={"unit": "eV", "origin": "test"})
    theirs = to_metatensor_torch(tensor)
    assert theirs._type().name() == "TensorMap"
    _assert_same_data(tensor, theirs)
    assert len(_blocks(theirs)) > 3
    # metatensor-torch's own serializer accepts it and reads it back equal
    again = mtt.load_buffer(mtt.save_buffer(theirs))
    _assert_same_data(tensor, again, shared=False)


def test_to_metatensor_torch_keeps_blockmaps_memory_alive(rng):
    tensor = make_map(rng)
    expected = np.array(_numpy(tensor.block(1).values))
    theirs = to_metatensor_torch(tensor)
    del tensor
    np.testing.assert_array_equal(theirs.block(1).values.numpy(), expected)


def test_a_read_only_array_is_copied_once(rng):
    values = rng.random((3, 2))
    values.flags.writeable = False
    block = blockmap.TensorBlock(
        values, blockmap.Labels.range("s", 3), [], blockmap.Labels.range("p", 2)
    )
    assert not block.values.flags.writeable
    theirs = to_metatensor_torch(block)
    np.testing.assert_array_equal(theirs.values.numpy(), values)
    assert theirs.values.data_ptr() != address_of(block.values)


# -- metatensor-torch -> blockmap ---------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.int64])
def test_from_metatensor_torch_shares_every_tensor(dtype):
    theirs = _their_map(dtype, info={"unit": "eV"})
    ours = from_metatensor_torch(theirs)
    assert isinstance(ours, blockmap.TensorMap)
    _assert_same_data(ours, theirs)
    # torch-backed: the very tensors, and torch labels
    for a, b in zip(_blocks(ours), _blocks(theirs), strict=True):
        assert isinstance(a.values, torch.Tensor)
        assert a.values.data_ptr() == b.values.data_ptr()
        assert isinstance(a.samples.values, torch.Tensor)
    # and back: the very same memory again
    back = to_metatensor_torch(ours)
    for a, b in zip(_blocks(back), _blocks(theirs), strict=True):
        assert a.values.data_ptr() == b.values.data_ptr()
    _assert_same_data(ours, back)


def test_writes_are_seen_both_ways(rng):
    ours = make_map(rng, gradients=False)
    theirs = to_metatensor_torch(ours)
    theirs.block(0).values[0, 0, 0] = 1234.5
    assert _numpy(ours.block(0).values)[0, 0, 0] == 1234.5
    again = from_metatensor_torch(theirs)
    again.block(0).values[0, 0, 1] = -8.0
    assert _numpy(ours.block(0).values)[0, 0, 1] == -8.0
    assert theirs.block(0).values[0, 0, 1] == -8.0
    gradient = _their_map()
    ours = from_metatensor_torch(gradient)
    ours.block(1).gradient("positions").gradient("grad-of-grad").values[1, 2, 0, 3] = 5.0
    seen = gradient.block(1).gradient("positions").gradient("grad-of-grad").values
    assert seen[1, 2, 0, 3] == 5.0


def test_autograd_is_kept():
    values = torch.rand((2, 3), dtype=torch.float64, requires_grad=True)
    theirs = mtt.TensorBlock(values, mtt.Labels.range("s", 2), [], mtt.Labels.range("p", 3))
    ours = from_metatensor_torch(theirs)
    assert ours.values.requires_grad
    (ours.values * 3.0).sum().backward()
    np.testing.assert_array_equal(values.grad.numpy(), np.full((2, 3), 3.0))


def test_blockmap_keeps_the_tensor_objects():
    values = torch.rand((2, 3), dtype=torch.float64)
    theirs = mtt.TensorBlock(values, mtt.Labels.range("s", 2), [], mtt.Labels.range("p", 3))
    ours = from_metatensor_torch(theirs)
    assert ours.values is values
    assert to_metatensor_torch(ours).values is values


def test_a_non_contiguous_tensor_is_copied_once():
    values = torch.arange(12.0, dtype=torch.float64).reshape(4, 3)[::2]
    assert not values.is_contiguous()
    theirs = mtt.TensorBlock(values, mtt.Labels.range("s", 2), [], mtt.Labels.range("p", 3))
    ours = from_metatensor_torch(theirs)
    assert ours.values.is_contiguous()
    assert ours.values.data_ptr() != values.data_ptr()
    assert torch.equal(ours.values, values)


def test_labels_are_copied_once(rng):
    tensor = make_map(rng)
    theirs = to_metatensor_torch(tensor.keys)
    assert theirs._type().name() == "Labels"
    expected = mtt.Labels(list(tensor.keys.names), torch.tensor(_numpy(tensor.keys.values)))
    assert theirs == expected
    assert theirs.values.data_ptr() != address_of(tensor.keys.values)
    back = from_metatensor_torch(theirs)
    assert isinstance(back, blockmap.Labels)
    assert back == tensor.keys
    assert isinstance(back.values, torch.Tensor)
    assert back.values.dtype == torch.int32
    assert back.values.data_ptr() != theirs.values.data_ptr()


def test_small_shared_labels_are_converted_once(rng):
    tensor = make_map(rng, n_samples=(3, 5, 4))
    theirs = to_metatensor_torch(tensor)
    # one metatensor-torch Labels for the properties all blocks share: the
    # same tensor behind each block's properties
    addresses = {theirs.block(i).properties.values.data_ptr() for i in range(len(theirs))}
    assert len(addresses) == 1
    components = {theirs.block(i).components[0].values.data_ptr() for i in range(len(theirs))}
    assert len(components) == 1


def test_blocks_and_gradients_alone(rng):
    tensor = make_map(rng)
    block = tensor.block(2)
    theirs = to_metatensor_torch(block)
    assert theirs._type().name() == "TensorBlock"
    _assert_same_data(block, theirs)
    gradient = block.gradient("positions")
    assert to_metatensor_torch(gradient).values.data_ptr() == address_of(gradient.values)
    back = from_metatensor_torch(theirs)
    assert isinstance(back, blockmap.TensorBlock)
    assert back.gradients_list() == block.gradients_list()
    for a, b in zip(_blocks(back), _blocks(block), strict=True):
        assert address_of(a.values) == address_of(b.values)


def test_nested_gradients_and_any_parameter_name():
    theirs = _their_map()
    ours = from_metatensor_torch(theirs)
    block = ours.block(0)
    assert sorted(block.gradients_list()) == ["positions", "strain 2"]
    assert block.gradient("positions").gradients_list() == ["grad-of-grad"]
    back = to_metatensor_torch(ours)
    assert back.block(0).gradient("positions").gradients_list() == ["grad-of-grad"]
    assert sorted(back.block(0).gradients_list()) == ["positions", "strain 2"]


def test_empty_blocks_and_zero_blocks(rng):
    tensor = zero_block_map()
    back = from_metatensor_torch(to_metatensor_torch(tensor))
    assert back.keys == tensor.keys
    assert len(back) == 0
    empty = make_map(rng, n_samples=(0, 4, 0))
    back = from_metatensor_torch(to_metatensor_torch(empty))
    assert [tuple(b.values.shape) for b in back.blocks()] == [
        tuple(b.values.shape) for b in empty.blocks()
    ]


def test_the_methods_and_the_lazy_name(rng):
    tensor = make_map(rng, info={"unit": "eV"})
    theirs = tensor.to_metatensor_torch()
    _assert_same_data(tensor, theirs)
    _assert_same_data(tensor.block(0), tensor.block(0).to_metatensor_torch())
    assert blockmap.from_metatensor_torch is from_metatensor_torch
    assert "from_metatensor_torch" in dir(blockmap)
    _assert_labels_equal(tensor.keys, tensor.keys.to_metatensor_torch())


# -- TorchScript ----------------------------------------------------------------


def _doubled_plus_total(tensor: mtt.TensorMap) -> torch.Tensor:
    total = torch.zeros(1, dtype=torch.float64)
    for block in tensor.blocks():
        total = total + block.values.sum()
    return tensor.block(0).values * 2 + total


def test_torchscript_takes_the_converted_map(rng):
    tensor = make_map(rng)
    theirs = to_metatensor_torch(tensor)
    total = sum(_numpy(block.values).sum() for block in tensor.blocks())
    expected = _numpy(tensor.block(0).values) * 2 + total
    scripted = torch.jit.script(_doubled_plus_total)
    assert isinstance(scripted, torch.jit.ScriptFunction)
    result = scripted(theirs)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-12)
    # the scripted code sees blockmap's memory: a write changes its answer
    _numpy(tensor.block(0).values)[0, 0, 0] += 1.0
    np.testing.assert_allclose(scripted(theirs).numpy()[0, 0, 0], expected[0, 0, 0] + 3.0)


# -- errors and imports ---------------------------------------------------------


def test_wrong_types_are_refused(rng):
    with pytest.raises(blockmap.BlockMapTypeError, match="metatensor-torch"):
        from_metatensor_torch(np.zeros(3))
    with pytest.raises(blockmap.BlockMapTypeError, match="metatensor-torch"):
        from_metatensor_torch(blockmap.Labels.range("a", 2))
    with pytest.raises(blockmap.BlockMapTypeError, match="metatensor-torch"):
        from_metatensor_torch(torch.zeros(3))
    with pytest.raises(blockmap.BlockMapTypeError, match="blockmap"):
        to_metatensor_torch(mtt.Labels.range("a", 2))
    with pytest.raises(TypeError, match="blockmap"):
        to_metatensor_torch(torch.zeros(3))
    with pytest.raises(blockmap.BlockMapTypeError, match="dimension"):
        to_metatensor_torch(blockmap.Labels([], np.zeros((1, 0), dtype=np.int32)))


def test_importing_the_module_does_not_import_torch():
    code = textwrap.dedent(
        """
        import sys
        import blockmap
        import blockmap.metatensor_torch
        print(sorted(name for name in ("torch", "metatensor", "metatensor.torch")
                     if name in sys.modules))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_converting_keeps_metatensor_cores_operators_working():
    """metatensor-torch's import re-registers its TorchScript copy of
    metatensor-operations as ``metatensor.operations``, which breaks
    metatensor-core's ``+`` on its own maps; blockmap importing
    metatensor-torch for the user undoes that."""
    code = textwrap.dedent(
        """
        import warnings
        warnings.simplefilter("ignore", FutureWarning)
        import numpy as np
        import metatensor, metatensor.operations
        import blockmap
        from blockmap.metatensor_torch import to_metatensor_torch

        labels = metatensor.Labels.range("a", 2)
        block = lambda: metatensor.TensorBlock(  # noqa: E731
            np.ones((2, 1)), labels, [], metatensor.Labels.range("p", 1)
        )
        theirs = metatensor.TensorMap(labels, [block(), block()])
        to_metatensor_torch(blockmap.Labels.range("a", 2))  # imports metatensor.torch
        assert "metatensor_torch" in __import__("sys").modules
        print(float((theirs + theirs).block(0).values.sum()))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "4.0"
