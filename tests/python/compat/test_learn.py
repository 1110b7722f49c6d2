"""metatensor-learn, the oracle of ``blockmap.learn``: every public name of
metatensor-learn 0.5's ``data`` and ``nn`` run in the same process by
``metatensor.learn`` on metatensor-core's maps (numpy and torch arrays) or
metatensor-torch's, and by ``blockmap.learn`` on the equivalent blockmap
maps; results compared exactly (values with ``torch.equal`` /
``np.array_equal``, metadata entry by entry), errors by class and message;
nn modules seeded alike, so that parameters, outputs and gradients match.
Also what blockmap.learn does better: samples and batches that pickle, and
so a ``DataLoader`` with workers (fork and spawn) that returns batches."""

import ast
import copy
import functools
import inspect
import io
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from tensor_oracle import assert_same_labels, assert_same_map, expected_type

import blockmap
from blockmap.metatensor import to_metatensor

torch = pytest.importorskip("torch")
metatensor = pytest.importorskip("metatensor")
pytest.importorskip("metatensor_learn")
mtt = pytest.importorskip("metatensor.torch")

import metatensor.learn as ml  # noqa: E402

import blockmap.learn as bl  # noqa: E402
from blockmap.metatensor_torch import to_metatensor_torch  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.:FutureWarning")


def _outcome(call, *args):
    try:
        return call(*args), None
    except Exception as error:  # noqa: BLE001 - compared by the caller
        return None, error


def assert_same_error(ours, theirs):
    """blockmap.learn's error ``ours`` is metatensor-learn's ``theirs``: an
    instance of its class (blockmap's subclass of the same builtin where
    metatensor raises its own) with the same message."""
    assert ours is not None, f"metatensor-learn raised {theirs!r}, blockmap.learn did not"
    if type(theirs).__name__ == "NotEqualError":  # metatensor-operations' class
        assert isinstance(ours, blockmap.NotEqualError), (ours, theirs)
    else:
        assert isinstance(ours, expected_type(theirs)), (ours, theirs)
    if str(ours) != str(theirs):
        # the one addition: maps of different keys name the way out
        assert str(ours) == str(theirs) + DIFFERENT_KEYS_HINT, (str(ours), str(theirs))


#: what blockmap's join adds to metatensor's messages on maps of different keys
DIFFERENT_KEYS_HINT = (
    '; to join maps whose keys differ, pass different_keys="union" (every key, the blocks '
    'a map lacks taken as empty) or different_keys="intersection" (the keys all maps have)'
)


# ------------------------------------------------------------------- data


def _square(index):
    return index * index


def _fails(index):
    raise RuntimeError(f"no sample {index}")


DATASETS = {
    "lists": lambda d: d.Dataset(num=[1, 2, 3], string=["a", "b", "c"]),
    "callables with size": lambda d: d.Dataset(size=3, square=_square),
    "lists and callables": lambda d: d.Dataset(num=[1, 2, 3], square=_square),
    "size and lists": lambda d: d.Dataset(size=2, num=[1, 2]),
    "callables without size": lambda d: d.Dataset(square=_square),
    "lengths differ": lambda d: d.Dataset(a=[1, 2], b=[1, 2, 3]),
    "size differs": lambda d: d.Dataset(size=3, a=[1, 2]),
    "neither list nor callable": lambda d: d.Dataset(a=(1, 2)),
    "types differ": lambda d: d.Dataset(a=[1, "2"]),
    "sample_id": lambda d: d.Dataset(sample_id=[1, 2]),
    "from_dict": lambda d: d.Dataset.from_dict(
        {"valid": [0, 0, 0], "with space": [-1, 2, -3], "with/slash": ["a", "b", "c"]}
    ),
    "from_dict sample_id": lambda d: d.Dataset.from_dict({"sample_id": [1]}),
    "from_dict callables": lambda d: d.Dataset.from_dict({"class": _square}, size=2),
    "indexed": lambda d: d.IndexedDataset(sample_id=["cat", "bird", "dog"], y=[11, 22, 33]),
    "indexed callable": lambda d: d.IndexedDataset(sample_id=[5, 7], square=_square),
    "indexed duplicates": lambda d: d.IndexedDataset(sample_id=[1, 1], y=[1, 2]),
    "indexed size": lambda d: d.IndexedDataset(sample_id=[1], size=1),
    "indexed lengths differ": lambda d: d.IndexedDataset(sample_id=[1, 2], y=[1]),
    "indexed from_dict": lambda d: d.IndexedDataset.from_dict(
        {"with space": [1, 2]}, sample_id=[11, 22]
    ),
    "indexed from_dict size": lambda d: d.IndexedDataset.from_dict({"size": [1]}, sample_id=[1]),
    "indexed from_dict duplicates": lambda d: d.IndexedDataset.from_dict(
        {"y": [1, 2]}, sample_id=["a", "a"]
    ),
}


@pytest.mark.parametrize("case", sorted(DATASETS))
def test_datasets_are_built_and_refused_as_metatensor_learn_does(case):
    ours, our_error = _outcome(DATASETS[case], bl.data)
    theirs, their_error = _outcome(DATASETS[case], ml.data)
    if their_error is not None:
        assert_same_error(our_error, their_error)
        return
    assert our_error is None, our_error
    assert isinstance(ours, torch.utils.data.Dataset)
    assert len(ours) == len(theirs)
    assert [repr(sample) for sample in ours] == [repr(sample) for sample in theirs]
    assert [tuple(sample) for sample in ours] == [tuple(sample) for sample in theirs]


ACCESSES = {
    "past the end": lambda ds: ds["lists"][3],
    "negative": lambda ds: ds["lists"][-1],
    "numpy index": lambda ds: ds["lists"][np.int64(2)],
    "string index": lambda ds: ds["lists"]["1"],
    "callable fails": lambda ds: ds["fails"][1],
    "indexed callable fails": lambda ds: ds["indexed fails"][0],
    "get_sample": lambda ds: ds["indexed"].get_sample("dog"),
    "get_sample unknown": lambda ds: ds["indexed"].get_sample("cow"),
    "indexed past the end": lambda ds: ds["indexed"][3],
}


def _access_datasets(data):
    return {
        "lists": data.Dataset(num=[1, 2, 3]),
        "fails": data.Dataset(num=[1, 2], fails=_fails),
        "indexed": data.IndexedDataset(sample_id=["cat", "bird", "dog"], y=[1, 2, 3]),
        "indexed fails": data.IndexedDataset(sample_id=["cat"], fails=_fails),
    }


@pytest.mark.parametrize("case", sorted(ACCESSES))
def test_samples_are_read_and_refused_as_metatensor_learn_does(case):
    ours, our_error = _outcome(ACCESSES[case], _access_datasets(bl.data))
    theirs, their_error = _outcome(ACCESSES[case], _access_datasets(ml.data))
    if their_error is not None:
        assert_same_error(our_error, their_error)
        # the callable's own error is kept as the cause
        assert type(our_error.__cause__) is type(their_error.__cause__)
        assert str(our_error.__cause__) == str(their_error.__cause__)
        return
    assert our_error is None, our_error
    assert repr(ours) == repr(theirs)


def test_samples_behave_as_metatensor_learns():
    fields = {"valid": [0, 1], "with space": [-1, 2], "class": ["a", "b"]}
    ours = bl.data.Dataset.from_dict(fields)[1]
    theirs = ml.data.Dataset.from_dict(fields)[1]
    for sample in (ours, theirs):
        assert type(sample).__name__ == "Sample"
        assert sample._fields == ("valid", "with space", "class")
        assert sample._asdict() == {"valid": 1, "with space": 2, "class": "b"}
        assert sample["with space"] == 2 and sample["class"] == "b" and sample[0] == 1
        assert sample.valid == 1 and sample[1:] == (2, "b")
        assert sample._replace(valid=5) == (5, 2, "b")
        assert type(sample)._make([7, 8, 9])["valid"] == 7
        assert tuple(sample) == (1, 2, "b")
        with pytest.raises(KeyError):
            sample["missing"]
        with pytest.raises(TypeError, match="unexpected field names"):
            sample._replace(missing=1)
    assert repr(ours) == repr(theirs) == "Sample(valid=1, 'with space'=2, 'class'='b')"
    # the class is the same for the same fields: one class, not one per dataset
    assert type(bl.data.Dataset.from_dict(fields)[0]) is type(ours)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_samples_batches_and_datasets_pickle(protocol):
    dataset = bl.data.Dataset.from_dict({"x": [1, 2], "with space": ["a", "b"]})
    sample = dataset[0]
    batch = bl.data.group([dataset[0], dataset[1]])
    for value in (sample, batch):
        back = pickle.loads(pickle.dumps(value, protocol=protocol))
        assert type(back) is type(value) and back == value and back["with space"] == value[1]
    assert pickle.loads(pickle.dumps(type(batch), protocol=protocol)) is type(batch)
    back = pickle.loads(pickle.dumps(dataset, protocol=protocol))
    assert type(back) is bl.Dataset and back[1] == dataset[1]
    assert copy.deepcopy(sample) == sample and type(copy.copy(batch)) is type(batch)


def test_metatensor_learns_samples_and_batches_do_not_pickle():
    """The oracle's side of the fact blockmap.learn fixes: metatensor-learn's
    named tuples are found by no module attribute, so its DataLoader's
    workers cannot send a batch (it then waits forever, hence not run)."""
    dataset = ml.data.Dataset(x=[1, 2])
    for value in (dataset[0], ml.data.group_and_join([dataset[0], dataset[1]])):
        with pytest.raises(pickle.PicklingError):
            pickle.dumps(value)


class _Crafted:
    """Pickles as ``function(*args)``: what a crafted pickle can make the
    unpickler call."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def test_field_names_that_are_the_classes_own_attributes_leave_it_working():
    """A field named ``__len__``, ``__reduce__``, ``__new__``, ``_make`` or
    ``_fields`` is read by name and position and gets no attribute, which
    would replace the class's own (``len``, pickling, construction broke);
    other names, ``count`` and ``index`` included, are attributes as in
    metatensor-learn."""
    names = ["__len__", "__reduce__", "__new__", "_make", "_fields", "__class__", "count", "x"]
    dataset = bl.data.Dataset.from_dict({name: [i, i + 10] for i, name in enumerate(names)})
    sample = dataset[1]
    assert len(sample) == len(names) and sample._fields == tuple(names)
    assert [sample[name] for name in names] == list(range(10, 18)) == list(sample)
    assert sample.count == 16 and sample.x == 17
    assert type(sample).__name__ == "Sample" and sample.__class__ is type(sample)
    assert type(sample)._make(range(len(names))) == tuple(range(len(names)))
    back = pickle.loads(pickle.dumps(sample))
    assert type(back) is type(sample) and back == sample
    batch = bl.data.group_and_join([dataset[0], dataset[1]])
    assert batch["__len__"] == (0, 10) and pickle.loads(pickle.dumps(batch)) == batch


def test_thousands_of_fields_pickle():
    dataset = bl.data.Dataset.from_dict({f"f{i}": [i] for i in range(3000)})
    back = pickle.loads(pickle.dumps(dataset[0]))
    assert back == tuple(range(3000)) and back.f2999 == 2999


def test_crafted_named_tuple_pickles_are_refused_clearly():
    """The class a pickle names is made of strings only (no ``str()`` of
    other objects, no iteration of an unbounded iterable), and the
    reconstructor takes only a blockmap named tuple class and a tuple."""
    from blockmap import _namedtuple
    from blockmap.exceptions import BlockMapTypeError, ValidationError

    cls = type(bl.data.Dataset.from_dict({"a": [1]})[0])
    cases = [
        (_namedtuple._class, 3, ("a",)),
        (_namedtuple._class, "Sample", ("a", 2)),
        (_namedtuple._class, "Sample", ["a"]),
        (_namedtuple._class, "Sample", range(10**15)),
        (_namedtuple._rebuild, int, (1,)),
        (_namedtuple._rebuild, cls, [1]),
    ]
    for function, *args in cases:
        with pytest.raises(BlockMapTypeError, match="this pickle is not a blockmap named"):
            pickle.loads(pickle.dumps(_Crafted(function, *args)))
    too_many = tuple(f"f{i}" for i in range(_namedtuple.MAX_PICKLED_FIELDS + 1))
    for args in (("Sample", ("a", "a")), ("class", ("a",)), ("Sample", too_many)):
        with pytest.raises(ValidationError, match="named tuple class (is refused|has 10001)"):
            pickle.loads(pickle.dumps(_Crafted(_namedtuple._class, *args)))
    with pytest.raises(TypeError, match="Expected 1 arguments"):
        pickle.loads(pickle.dumps(_Crafted(_namedtuple._rebuild, cls, (1, 2))))


def test_named_tuple_classes_are_not_kept_once_unused():
    """Unpickling many different classes does not keep them all."""
    import gc

    from blockmap import _namedtuple

    key = ("Sample", ("a fresh field",))
    made = _namedtuple.namedtuple(*key)
    assert _namedtuple.namedtuple(*key) is made and key in _namedtuple._CLASSES
    del made
    gc.collect()
    assert key not in _namedtuple._CLASSES


# ------------------------------------------------------------ group / join


def _blocks(lib, rng, count, n_atoms, arrays, with_gradients=True):
    """``count`` structure maps of ``lib``'s classes: energies per atom type
    (keys), with positions gradients; the same values for the same seed."""
    as_array = torch.from_numpy if arrays == "torch" else np.asarray
    maps = []
    for structure in range(count):
        blocks = []
        keys = []
        for center in (1, 6) if structure % 2 == 0 else (1,):
            n = n_atoms + structure
            block = lib.TensorBlock(
                values=as_array(rng.random((n, 1, 2))),
                samples=lib.Labels(
                    ["system", "atom"], np.array([[structure, i] for i in range(n)])
                ),
                components=[lib.Labels(["o3_mu"], np.array([[0]]))],
                properties=lib.Labels(["n"], np.array([[0], [1]])),
            )
            if with_gradients:
                block.add_gradient(
                    "positions",
                    lib.TensorBlock(
                        values=as_array(rng.random((n, 3, 1, 2))),
                        samples=lib.Labels(
                            ["sample", "system", "atom"],
                            np.array([[i, structure, i] for i in range(n)]),
                        ),
                        components=[
                            lib.Labels(["xyz"], np.array([[0], [1], [2]])),
                            lib.Labels(["o3_mu"], np.array([[0]])),
                        ],
                        properties=lib.Labels(["n"], np.array([[0], [1]])),
                    ),
                )
            blocks.append(block)
            keys.append([0, 1, center])
        maps.append(
            lib.TensorMap(lib.Labels(["o3_lambda", "o3_sigma", "center"], np.array(keys)), blocks)
        )
    return maps


def _samples(data, lib, arrays, count=4, seed=7):
    rng = np.random.default_rng(seed)
    maps = _blocks(lib, rng, count, 3, arrays)
    return [
        data.IndexedDataset(
            sample_id=[f"s{i}" for i in range(count)],
            descriptor=maps,
            energy=[torch.full((1, 2), float(i)) for i in range(count)],
            system=[f"system {i}" for i in range(count)],
        )[i]
        for i in range(count)
    ]


@pytest.mark.parametrize("arrays", ["numpy", "torch"])
@pytest.mark.parametrize(
    "kwargs",
    [
        {"join_kwargs": {"different_keys": "union"}},
        {"join_kwargs": {"different_keys": "union", "remove_tensor_name": True}},
        {"fields_to_join": ["energy", "nothing"]},
        {"join_kwargs": {}},
    ],
    ids=["union", "remove_tensor_name", "some fields", "keys differ"],
)
def test_group_and_join_on_blockmap_maps_is_metatensor_learns_on_core_maps(arrays, kwargs):
    batch = _samples(bl.data, blockmap, arrays)
    ours, our_error = _outcome(lambda: bl.data.group_and_join(batch, **kwargs))
    theirs, their_error = _outcome(
        lambda: ml.data.group_and_join(_samples(ml.data, metatensor, arrays), **kwargs)
    )
    if their_error is not None:
        assert_same_error(our_error, their_error)
        return
    assert our_error is None, our_error
    assert type(ours).__name__ == "Batch" and ours._fields == theirs._fields
    assert ours.sample_id == theirs.sample_id == ("s0", "s1", "s2", "s3")
    assert ours.system == theirs.system and isinstance(ours.system, tuple)
    assert torch.equal(ours.energy, theirs.energy) and ours.energy.shape == (4, 2)
    if isinstance(theirs.descriptor, tuple):  # not asked to join
        assert [type(m) for m in ours.descriptor] == [blockmap.TensorMap] * 4
        return
    assert isinstance(ours.descriptor, blockmap.TensorMap)
    expected_type = torch.Tensor if arrays == "torch" else np.ndarray
    assert isinstance(ours.descriptor.block(0).values, expected_type)
    assert_same_map(ours.descriptor.to(arrays="numpy"), theirs.descriptor.to(arrays="numpy"))
    # blockmap.join's own result, with its arguments
    assert blockmap.equal(
        ours.descriptor,
        blockmap.join([s.descriptor for s in batch], axis="samples", **kwargs["join_kwargs"]),
    )


def test_group_and_join_still_joins_metatensors_own_maps():
    """metatensor-core's maps (numpy and torch arrays) and metatensor-torch's
    are joined by their own library's join, as metatensor-learn joins them."""
    rng = np.random.default_rng(3)
    ours = _blocks(blockmap, rng, 4, 2, "torch")
    core = [to_metatensor(m.to(arrays="numpy")) for m in ours]
    core_torch = [to_metatensor(m) for m in ours]
    script = [to_metatensor_torch(m) for m in ours]
    kwargs = {"join_kwargs": {"different_keys": "union"}}
    for maps, equal in (
        (core, metatensor.equal),
        (core_torch, metatensor.equal),
        (script, mtt.equal),
    ):
        samples = [bl.data.Dataset(x=maps)[i] for i in range(4)]
        theirs = ml.data.group_and_join([ml.data.Dataset(x=maps)[i] for i in range(4)], **kwargs)
        joined = bl.data.group_and_join(samples, **kwargs).x
        assert type(joined) is type(theirs.x) and equal(joined, theirs.x)


def test_group_and_join_refuses_maps_of_several_libraries_in_one_field():
    """A field whose maps are not all of one library is refused with
    blockmap's error whichever comes first (metatensor-core's and
    metatensor-torch's joins raised their own TypeError / RuntimeError)."""
    from blockmap.exceptions import BlockMapTypeError

    ours = _blocks(blockmap, np.random.default_rng(4), 2, 1, "torch")
    kinds = {
        "blockmap": ours,
        "metatensor-core": [to_metatensor(m) for m in ours],
        "metatensor-torch": [to_metatensor_torch(m) for m in ours],
    }
    order = list(kinds)
    for first, maps in kinds.items():
        for second, others in kinds.items():
            if first == second:
                continue
            samples = [bl.data.Dataset(x=[maps[0]])[0], bl.data.Dataset(x=[others[1]])[0]]
            a, b = sorted([first, second], key=order.index)
            with pytest.raises(BlockMapTypeError, match=f"holds {a} maps and {b} maps: the maps"):
                bl.data.group_and_join(samples)
            # group does not join: it keeps them
            assert bl.data.group(samples).x[1] is others[1]


def _field_of(values):
    return [bl.data.Dataset(x=[value])[0] for value in values]


MIXED_FIELDS = {
    # the review's cases: an unjoined tuple when the map came second, the
    # join's or torch.vstack's own errors when it came first
    "None and a map": ([None], "blockmap maps and NoneType values"),
    "an int and a map": ([3], "blockmap maps and int values"),
    "a tensor and a map": ([torch.ones(2, 2)], "blockmap maps and torch tensors"),
    "a tensor and an int": ("tensor and int", "torch tensors and int values"),
    "a tensor and None": ("tensor and None", "torch tensors and NoneType values"),
    "maps of numpy and torch arrays": (
        "numpy map",
        "blockmap maps of numpy arrays and of torch arrays",
    ),
    "a metatensor-core map and a str": ("core map and str", "metatensor-core maps and str values"),
}


@pytest.mark.parametrize("case", sorted(MIXED_FIELDS))
def test_group_and_join_refuses_mixed_fields_whatever_the_order(case):
    """A field that mixes kinds is refused with blockmap's error, the same
    error for every order of the samples: the batch's type no longer
    depends on the shuffle."""
    import itertools

    from blockmap.exceptions import BlockMapTypeError

    maps = _blocks(blockmap, np.random.default_rng(6), 3, 1, "torch", with_gradients=False)
    extra, message = MIXED_FIELDS[case]
    if extra == "tensor and int":
        values = [torch.ones(1, 2), 3, torch.zeros(1, 2)]
    elif extra == "tensor and None":
        values = [torch.ones(1, 2), None]
    elif extra == "numpy map":
        values = [maps[0].to(arrays="numpy"), maps[1], maps[2]]
    elif extra == "core map and str":
        values = [to_metatensor(maps[0].to(arrays="numpy")), "a"]
    else:
        values = [maps[0], *extra, maps[1]]
    errors = set()
    for order in itertools.permutations(values):
        with pytest.raises(BlockMapTypeError, match=f"the field 'x' holds {message}:") as error:
            bl.data.group_and_join(_field_of(order))
        errors.add(str(error.value))
        # not joined: group keeps them, in order
        assert all(a is b for a, b in zip(bl.data.group(_field_of(order)).x, order, strict=True))
    assert len(errors) == 1
    # a field that is not joined keeps them
    assert bl.data.group_and_join(_field_of(values), fields_to_join=[]).x == tuple(values)


def test_group_refuses_samples_of_other_fields():
    """Samples grouped by position must have the same fields: samples of
    two datasets were grouped under the first one's names."""
    from blockmap.exceptions import ValidationError

    a = bl.data.Dataset(x=[1], y=[2])[0]
    b = bl.data.Dataset(y=[3], x=[4])[0]
    c = bl.data.Dataset(x=[5], y=[6])[0]
    for group in (bl.data.group, bl.data.group_and_join):
        for batch in ([a, b], [b, a]):
            with pytest.raises(ValidationError, match="must have the same fields"):
                group(batch)
        assert group([a, c]) == ((1, 5), (2, 6))


def test_group_and_join_keeps_other_objects_and_group_keeps_everything():
    values = {"tensor": [torch.ones(2, 3), torch.zeros(2, 3)], "other": [{"a": 1}, {"b": 2}]}
    for data in (bl.data, ml.data):
        samples = list(data.Dataset(**values))
        joined = data.group_and_join(samples)
        assert torch.equal(joined.tensor, torch.vstack(values["tensor"]))
        assert joined.other == ({"a": 1}, {"b": 2})
        grouped = data.group(samples)
        assert type(grouped).__name__ == "Batch"
        assert grouped.other == ({"a": 1}, {"b": 2}) and len(grouped.tensor) == 2
        assert all(a is b for a, b in zip(grouped.tensor, values["tensor"], strict=True))


def test_dataloader_without_workers_gives_metatensor_learns_batches():
    ours = bl.DataLoader(
        bl.Dataset(x=_blocks(blockmap, np.random.default_rng(1), 6, 2, "numpy")),
        batch_size=4,
        collate_fn=lambda batch: bl.data.group_and_join(
            batch, join_kwargs={"different_keys": "union"}
        ),
    )
    theirs = ml.DataLoader(
        ml.Dataset(x=_blocks(metatensor, np.random.default_rng(1), 6, 2, "numpy")),
        batch_size=4,
        collate_fn=lambda batch: ml.data.group_and_join(
            batch, join_kwargs={"different_keys": "union"}
        ),
    )
    assert isinstance(ours, torch.utils.data.DataLoader)
    pairs = list(zip(ours, theirs, strict=True))
    assert len(pairs) == 2
    for a, b in pairs:
        assert_same_map(a.x, b.x)
    # the default collate function is blockmap's group_and_join, bound at
    # definition, as metatensor-learn's is its own
    loader = bl.DataLoader(bl.Dataset(x=_blocks(blockmap, np.random.default_rng(1), 2, 2, "numpy")))
    assert loader.collate_fn is bl.data.group_and_join


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_with_workers_returns_batches(method):
    """Two workers (metatensor-learn's loader waits forever here: its
    batches do not pickle); the batches equal the joins made in this
    process. The loader's timeout turns a lost batch into an error."""
    maps = _blocks(blockmap, np.random.default_rng(5), 8, 3, "torch", with_gradients=False)
    dataset = bl.IndexedDataset(
        sample_id=list(range(8)), x=maps, y=[torch.full((1,), i) for i in range(8)]
    )
    # a picklable collate function (spawn): blockmap.learn's, with arguments
    collate = functools.partial(bl.data.group_and_join, join_kwargs={"different_keys": "union"})
    loader = bl.DataLoader(
        dataset,
        batch_size=2,
        num_workers=2,
        multiprocessing_context=method,
        timeout=120,
        collate_fn=collate,
    )
    batches = list(loader)
    assert len(batches) == 4
    for i, batch in enumerate(batches):
        assert type(batch) is type(collate([dataset[0]]))
        assert batch._fields == ("sample_id", "x", "y")
        assert batch.sample_id == (2 * i, 2 * i + 1)
        assert torch.equal(batch.y, torch.tensor([[2 * i], [2 * i + 1]]))
        # joined in the worker, as in this process
        assert isinstance(batch.x, blockmap.TensorMap)
        assert isinstance(batch.x.block(0).values, torch.Tensor)
        assert blockmap.equal(batch.x, collate([dataset[2 * i], dataset[2 * i + 1]]).x)


def test_dataloader_over_a_blockmap_dataset_keeps_its_field_names(tmp_path):
    """A blockmap dataset of fields (one named as metatrain names targets)
    through blockmap.learn's DataLoader with fork workers: batches keep the
    field names, the maps joined in the workers."""
    maps = _blocks(blockmap, np.random.default_rng(2), 6, 2, "numpy", with_gradients=False)
    path = tmp_path / "fields.bmds"
    with blockmap.DatasetWriter(path) as writer:
        for tensor in maps[::2]:
            writer.write(**{"energy": tensor, "mtt::dipole": tensor})
    dataset = blockmap.Dataset(path)
    assert dataset[0]["mtt::dipole"] is not None
    loader = bl.DataLoader(
        dataset, batch_size=3, num_workers=2, multiprocessing_context="fork", timeout=120
    )
    (batch,) = list(loader)
    assert batch._fields == ("energy", "mtt::dipole")
    expected = blockmap.join(maps[::2], axis="samples")
    assert blockmap.equal(batch["mtt::dipole"], expected)
    assert blockmap.equal(batch.energy, expected)


def test_large_batches_come_back_from_the_workers_in_shared_memory():
    """A batch of at least the auto-share threshold (256 KiB) is joined by
    blockmap.join straight into shared memory in the worker, and the Batch
    around it carries the segment, not the bytes (docs/torch.md)."""

    def big(i):
        samples = blockmap.Labels(["system", "atom"], np.array([[i, a] for a in range(1000)]))
        values = torch.rand(1000, 40, dtype=torch.float64)  # 320 kB
        block = blockmap.TensorBlock(values, samples, [], blockmap.Labels.range("p", 40))
        return blockmap.TensorMap(blockmap.Labels.range("_", 1), [block])

    maps = [big(i) for i in range(4)]
    loader = bl.DataLoader(
        bl.Dataset(x=maps), batch_size=2, num_workers=2, multiprocessing_context="fork", timeout=120
    )
    batches = list(loader)
    assert len(batches) == 2
    for i, batch in enumerate(batches):
        assert batch.x.is_shared()
        assert blockmap.equal(batch.x, blockmap.join(maps[2 * i : 2 * i + 2], axis="samples"))


# --------------------------------------------------------------------- nn


def _nn_map(lib, seed=11, gradients=False, requires_grad=False):
    """An equivariant map with lambda 0, 1 (sigma 1) and 0 (sigma -1)
    blocks, torch float64 values (leaves requiring grad if asked)."""
    rng = np.random.default_rng(seed)
    blocks = []
    keys = [[0, 1], [1, 1], [0, -1]]
    for o3_lambda, _ in keys:
        n, width = 5, 2 * o3_lambda + 1
        values = torch.from_numpy(rng.random((n, width, 3)))
        values.requires_grad_(requires_grad)
        block = lib.TensorBlock(
            values=values,
            samples=lib.Labels(["system", "atom"], np.array([[0, i] for i in range(n)])),
            components=[lib.Labels(["o3_mu"], np.arange(-o3_lambda, o3_lambda + 1).reshape(-1, 1))],
            properties=lib.Labels(["n"], np.arange(3).reshape(-1, 1)),
        )
        if gradients:
            block.add_gradient(
                "positions",
                lib.TensorBlock(
                    values=torch.from_numpy(rng.random((2, 3, width, 3))),
                    samples=lib.Labels(
                        ["sample", "system", "atom"], np.array([[0, 0, 0], [3, 0, 1]])
                    ),
                    components=[
                        lib.Labels(["xyz"], np.arange(3).reshape(-1, 1)),
                        block.components[0],
                    ],
                    properties=block.properties,
                ),
            )
        blocks.append(block)
    return lib.TensorMap(lib.Labels(["o3_lambda", "o3_sigma"], np.array(keys)), blocks)


def _labels(lib, names, values):
    return lib.Labels(names, np.array(values))


MODULES = {
    "Linear": lambda nn, lib, keys: nn.Linear(keys, 3, 2, dtype=torch.float64),
    "Linear lists": lambda nn, lib, keys: nn.Linear(
        keys,
        [3, 3, 3],
        [1, 2, 3],
        out_properties=[_labels(lib, ["p"], [[i] for i in range(k)]) for k in (1, 2, 3)],
        bias=False,
        dtype=torch.float64,
    ),
    "EquivariantLinear": lambda nn, lib, keys: nn.EquivariantLinear(
        keys, 3, 4, dtype=torch.float64
    ),
    "EquivariantLinear invariant_keys": lambda nn, lib, keys: nn.EquivariantLinear(
        keys,
        3,
        2,
        invariant_keys=_labels(lib, ["o3_lambda", "o3_sigma"], [[0, -1]]),
        dtype=torch.float64,
    ),
    "EquivariantTransformation": lambda nn, lib, keys: nn.EquivariantTransformation(
        [torch.nn.Tanh(), torch.nn.Sigmoid(), torch.nn.Tanh()], keys, 3, 3
    ),
    "LayerNorm": lambda nn, lib, keys: nn.LayerNorm(keys, [3, 3, 3], dtype=torch.float64),
    "LayerNorm no mean": lambda nn, lib, keys: nn.LayerNorm(
        keys, [3, 3, 3], mean=False, elementwise_affine=False, dtype=torch.float64
    ),
    "InvariantLayerNorm": lambda nn, lib, keys: nn.InvariantLayerNorm(
        keys, [3], dtype=torch.float64
    ),
    "ReLU": lambda nn, lib, keys: nn.ReLU(keys),
    "InvariantReLU": lambda nn, lib, keys: nn.InvariantReLU(keys),
    "SiLU": lambda nn, lib, keys: nn.SiLU(keys),
    "InvariantSiLU": lambda nn, lib, keys: nn.InvariantSiLU(keys),
    "Tanh": lambda nn, lib, keys: nn.Tanh(
        keys, out_properties=[_labels(lib, ["t"], [[0], [1], [2]])] * 3
    ),
    "InvariantTanh": lambda nn, lib, keys: nn.InvariantTanh(keys),
    "Sequential": lambda nn, lib, keys: nn.Sequential(
        keys,
        nn.EquivariantLinear(keys, 3, 4, dtype=torch.float64),
        nn.InvariantSiLU(keys),
        nn.Linear(keys, 4, 1, dtype=torch.float64),
    ),
    "ModuleMap": lambda nn, lib, keys: nn.ModuleMap(
        keys, [torch.nn.Linear(3, k, dtype=torch.float64) for k in (1, 2, 3)]
    ),
    "ModuleMap.from_module": lambda nn, lib, keys: nn.ModuleMap.from_module(
        keys,
        torch.nn.Sequential(torch.nn.Linear(3, 2, dtype=torch.float64), torch.nn.Tanh()),
        out_properties=[_labels(lib, ["q"], [[0], [7]])] * 3,
    ),
    "in_keys differ": lambda nn, lib, keys: nn.ModuleMap(keys, [torch.nn.Identity()] * 2),
    "invariant_keys bias": lambda nn, lib, keys: nn.EquivariantLinear(
        keys, 3, 2, bias=[True], dtype=torch.float64
    ),
    "LayerNorm in_features": lambda nn, lib, keys: nn.LayerNorm(keys, [3]),
    "InvariantLayerNorm in_features": lambda nn, lib, keys: nn.InvariantLayerNorm(keys, [3, 3]),
    "Sequential in_keys": lambda nn, lib, keys: nn.Sequential([1, 2]),
}


def _modules(case):
    """The module ``case`` of each library, built after the same seed; the
    map it takes; or the errors of the constructors."""
    built = []
    for nn, lib in ((bl.nn, blockmap), (ml.nn, metatensor)):
        torch.manual_seed(1234)
        tensor = _nn_map(lib, requires_grad=True)
        module, error = _outcome(MODULES[case], nn, lib, tensor.keys)
        built.append((module, error, tensor))
    return built


def assert_same_output(ours, theirs):
    assert isinstance(ours, blockmap.TensorMap)
    assert_same_labels(ours.keys, theirs.keys, "keys")
    for i in range(len(theirs)):
        a, b = ours.block_by_id(i), theirs.block_by_id(i)
        assert_same_labels(a.samples, b.samples, "samples")
        for x, y in zip(a.components, b.components, strict=True):
            assert_same_labels(x, y, "components")
        assert_same_labels(a.properties, b.properties, "properties")
        assert isinstance(a.values, torch.Tensor)
        assert torch.equal(a.values, b.values), f"block {i}"
        assert a.gradients_list() == b.gradients_list()
        for parameter in b.gradients_list():
            assert torch.equal(a.gradient(parameter).values, b.gradient(parameter).values)


@pytest.mark.parametrize("case", sorted(MODULES))
def test_nn_modules_are_metatensor_learns_on_blockmap_maps(case):
    (ours, our_error, our_map), (theirs, their_error, their_map) = _modules(case)
    if their_error is not None:
        assert_same_error(our_error, their_error)
        return
    assert our_error is None, our_error
    assert isinstance(ours, bl.nn.Module) and isinstance(ours, torch.nn.Module)
    our_parameters = dict(ours.named_parameters())
    their_parameters = dict(theirs.named_parameters())
    assert our_parameters.keys() == their_parameters.keys()
    for name, parameter in their_parameters.items():
        assert torch.equal(our_parameters[name], parameter), name

    output, our_error = _outcome(ours, our_map)
    expected, their_error = _outcome(theirs, their_map)
    if their_error is not None:
        # (LayerNorm without mean nor affine writes into its input in place)
        assert_same_error(our_error, their_error)
        return
    assert our_error is None, our_error
    assert_same_output(output, expected)

    # gradients flow back through blockmap's maps, to the parameters and to
    # the input values, as through metatensor-core's
    sum(((b.values**2).sum() for b in output.blocks()), torch.zeros(())).backward()
    sum(((b.values**2).sum() for b in expected.blocks()), torch.zeros(())).backward()
    for name, parameter in their_parameters.items():
        assert parameter.grad is not None
        assert torch.equal(our_parameters[name].grad, parameter.grad), name
    for a, b in zip(our_map.blocks(), their_map.blocks(), strict=True):
        assert a.values.grad is not None and torch.equal(a.values.grad, b.values.grad)


@pytest.mark.parametrize("case", ["Linear", "ModuleMap", "ReLU", "LayerNorm", "InvariantTanh"])
def test_nn_modules_on_maps_with_gradients(case):
    """ModuleMap and Linear transform gradient blocks too; the activations
    and layer norms refuse them with metatensor-learn's error."""
    results = []
    for nn, lib in ((bl.nn, blockmap), (ml.nn, metatensor)):
        torch.manual_seed(99)
        tensor = _nn_map(lib, gradients=True)
        results.append(_outcome(MODULES[case](nn, lib, tensor.keys), tensor))
    (ours, our_error), (theirs, their_error) = results
    if their_error is not None:
        assert_same_error(our_error, their_error)
        assert "Gradients not supported" in str(our_error)
        return
    assert our_error is None, our_error
    assert ours.block(0).gradients_list() == ["positions"]
    assert_same_output(ours, theirs)


def test_nn_module_state_dicts_cross_between_the_libraries():
    """A state dict saved by metatensor-learn's module loads into
    blockmap.learn's, and the reverse: the metatensor data of extra state is
    .mts buffers both read."""
    outputs = {}
    for source, target in (
        ((ml.nn, metatensor), (bl.nn, blockmap)),
        ((bl.nn, blockmap), (ml.nn, metatensor)),
    ):
        torch.manual_seed(5)
        nn, lib = source
        module = MODULES["Linear lists"](nn, lib, _nn_map(lib).keys)
        buffer = io.BytesIO()
        torch.save(module.state_dict(), buffer)
        buffer.seek(0)
        torch.manual_seed(6)  # other parameters, which the state dict replaces
        nn, lib = target
        loaded = MODULES["Linear lists"](nn, lib, _nn_map(lib).keys)
        loaded.load_state_dict(torch.load(buffer, weights_only=False))
        outputs[lib.__name__] = (loaded(_nn_map(lib)), module(_nn_map(source[1])))
    ours, theirs = outputs["blockmap"][0], outputs["blockmap"][1]
    assert_same_output(ours, theirs)
    ours, theirs = outputs["metatensor"][1], outputs["metatensor"][0]
    assert_same_output(ours, theirs)


#: metatensor-learn 0.6 tracks the metatensor data registered as buffers
#: (nn.Module.register_buffer, nn.Buffer), 0.5 the data held as attributes
LEARN_06 = hasattr(ml.nn, "Buffer")


def _holder_class(nn):
    class Holder(nn.Module):
        def __init__(self, lib, dtype=torch.float64):
            super().__init__()
            tensor = _nn_map(lib).to(dtype=dtype)
            held = {
                "keys": tensor.keys,
                "block": tensor.block(1),
                "tensor": tensor,
                "nested": {"maps": [tensor, tensor], "pair": (tensor.keys, 3)},
            }
            for name, value in held.items():
                if LEARN_06:
                    self.register_buffer(name, value)
                else:
                    setattr(self, name, value)
            self.linear = torch.nn.Linear(3, 3, dtype=dtype)

        def forward(self, x):
            return self.linear(x)

    return Holder


def test_nn_module_extra_state_round_trips_and_moves_with_the_module():
    """Labels, blocks and maps held by a Module (also inside dicts, lists,
    tuples): saved in its state dict, loaded back as writable torch-backed
    data of the saved dtype (blockmap's load_buffer of the stored bytes
    would view them read-only: blockmap.learn copies them once, as
    metatensor-core's load_buffer does), and converted by ``module.to``."""
    holders = {}
    for nn, lib in ((bl.nn, blockmap), (ml.nn, metatensor)):
        holder_class = _holder_class(nn)
        source = holder_class(lib).to(torch.float32)
        buffer = io.BytesIO()
        torch.save(source.state_dict(), buffer)
        buffer.seek(0)
        target = holder_class(lib, dtype=torch.float32)
        target.load_state_dict(torch.load(buffer, weights_only=False))
        holders[lib.__name__] = (source, target)
    for our_holder, their_holder in zip(holders["blockmap"], holders["metatensor"], strict=True):
        assert_same_labels(our_holder.keys, their_holder.keys, "keys")
        for ours, theirs in (
            (our_holder.tensor, their_holder.tensor),
            (our_holder.nested["maps"][1], their_holder.nested["maps"][1]),
        ):
            assert ours.dtype == theirs.dtype == torch.float32
            assert_same_map(ours.to(arrays="numpy"), theirs.to(arrays="numpy"))
        assert our_holder.block.values.dtype == torch.float32
        # metatensor-learn keeps only the metatensor data of a tuple: the 3
        # is None once loaded, on both sides
        assert our_holder.nested["pair"][1] == their_holder.nested["pair"][1]
    loaded = holders["blockmap"][1]
    for block in [*loaded.tensor.blocks(), loaded.block, *loaded.nested["maps"][0].blocks()]:
        assert isinstance(block.values, torch.Tensor)
        assert "writable" in repr(block) and "read-only" not in repr(block)
    # writing into them is allowed
    loaded.block.values[0, 0, 0] = 42.0
    assert float(loaded.block.values[0, 0, 0]) == 42.0


@pytest.mark.parametrize("device", ["meta"])
def test_nn_module_to_moves_metadata_or_refuses_as_metatensor_core(device):
    """``module.to(dtype)`` converts the metadata it holds; a device blockmap
    cannot hold (blockmap holds CPU memory) is refused with the error
    metatensor-core gives for its numpy-backed Labels."""
    our_map, their_map = _nn_map(blockmap), _nn_map(metatensor)
    ours = bl.nn.Linear(our_map.keys, 3, 2, dtype=torch.float64).to(torch.float32)
    theirs = ml.nn.Linear(their_map.keys, 3, 2, dtype=torch.float64).to(torch.float32)
    # a torch-backed map's labels are torch-backed too (docs/torch.md): a
    # torch.device("cpu") where metatensor-core's numpy keys say "cpu"
    assert torch.device(ours.module_map.in_keys.device) == torch.device(their_map.keys.device)
    output = ours(our_map.to(dtype=torch.float32))
    assert output.block(0).values.dtype == torch.float32
    assert theirs(their_map.to(dtype=torch.float32)).block(0).values.dtype == torch.float32
    module = bl.nn.Linear(blockmap.Labels(["a"], np.array([[0]])), 3, 2)
    _, our_error = _outcome(module.to, device)
    _, their_error = _outcome(
        ml.nn.Linear(metatensor.Labels(["a"], np.array([[0]])), 3, 2).to, device
    )
    assert_same_error(our_error, their_error)
    assert isinstance(our_error, blockmap.ValidationError)


def test_nn_refuses_metatensors_objects_naming_their_conversion():
    core_keys = metatensor.Labels(["a"], np.array([[0]]))
    with pytest.raises(blockmap.BlockMapTypeError, match="from_metatensor"):
        bl.nn.Sequential(core_keys, bl.nn.Tanh(blockmap.Labels(["a"], np.array([[0]]))))
    module = bl.nn.ModuleMap.from_module(
        blockmap.Labels(["a"], np.array([[0]])), torch.nn.Identity()
    )
    if LEARN_06:
        # metatensor-learn 0.6 tracks the data registered as buffers
        with pytest.raises(blockmap.BlockMapTypeError, match="from_metatensor"):
            module.register_buffer("keys_of_metatensor", core_keys)
        return
    module.keys_of_metatensor = core_keys
    with pytest.raises(blockmap.BlockMapTypeError, match="from_metatensor"):
        module.state_dict()


def test_blockmap_learn_leaves_metatensor_alone():
    """``import blockmap.learn`` imports no part of metatensor, and leaves
    ``metatensor.learn`` metatensor-learn's, in either order."""
    code = textwrap.dedent(
        """
        import sys, warnings
        warnings.simplefilter("ignore", FutureWarning)
        import blockmap.learn
        assert not any(name.split(".")[0] == "metatensor" for name in sys.modules), sorted(
            name for name in sys.modules if name.startswith("metatensor")
        )
        import metatensor.learn
        import metatensor_learn
        assert sys.modules["metatensor.learn"] is metatensor_learn
        assert blockmap.learn.nn.Linear is not metatensor_learn.nn.Linear
        assert blockmap.learn.nn._module.Labels is blockmap.Labels
        assert metatensor_learn.nn._module.Labels is metatensor.Labels
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_without_metatensor_learn_the_import_names_what_to_install():
    code = textwrap.dedent(
        """
        import sys

        class Refuse:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "metatensor_learn":
                    raise ImportError("not installed here")

        sys.meta_path.insert(0, Refuse())
        try:
            import blockmap.learn
        except ImportError as error:
            assert error.name == "metatensor_learn", error.name
            assert "`pip install metatensor-learn`" in str(error), error
        else:
            raise SystemExit("blockmap.learn imported without metatensor-learn")
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_the_nn_stub_declares_every_module_with_its_parameters():
    """``blockmap/learn/nn.pyi`` (the types of ``blockmap.learn.nn``, whose
    code is metatensor-learn's) names every public module, each
    ``__init__`` with the installed metatensor-learn's parameters: names,
    kinds and defaults."""
    stub = ast.parse(Path(bl.__file__).with_name("nn.pyi").read_text(encoding="utf-8"))
    classes = {node.name: node for node in stub.body if isinstance(node, ast.ClassDef)}
    public = {name for name in dir(bl.nn) if isinstance(getattr(bl.nn, name), type)}
    assert public <= set(classes), public - set(classes)
    for name in public:
        (init,) = [
            node
            for node in classes[name].body
            if isinstance(node, ast.FunctionDef) and node.name == "__init__"
        ]
        arguments = init.args
        declared = [(a.arg, "positional") for a in arguments.args[1:]]
        if arguments.vararg:
            declared.append((arguments.vararg.arg, "var"))
        declared += [(a.arg, "keyword") for a in arguments.kwonlyargs]
        defaults = [ast.literal_eval(d) for d in arguments.defaults] + [
            ast.literal_eval(d) for d in arguments.kw_defaults if d is not None
        ]
        signature = inspect.signature(getattr(bl.nn, name).__init__)
        kinds = {
            inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
            inspect.Parameter.VAR_POSITIONAL: "var",
            inspect.Parameter.KEYWORD_ONLY: "keyword",
        }
        parameters = list(signature.parameters.values())[1:]
        assert declared == [(p.name, kinds[p.kind]) for p in parameters], name
        assert defaults == [p.default for p in parameters if p.default is not p.empty], name


# ------------------------------------------- errors at the right moment (issue 43)


def _map_of(key, arrays="numpy"):
    block = blockmap.TensorBlock(
        np.arange(6.0).reshape(2, 3),
        blockmap.Labels(["s"], np.array([[0], [1]])),
        [],
        blockmap.Labels(["p"], np.array([[0], [1], [2]])),
    )
    return blockmap.TensorMap(blockmap.Labels(["k"], np.array([[key]])), [block]).to(arrays=arrays)


@pytest.mark.parametrize(
    "build",
    [
        lambda keys, props: bl.nn.Linear(keys, 3, 1),
        lambda keys, props: bl.nn.ModuleMap(keys, [torch.nn.Identity()]),
        lambda keys, props: bl.nn.Tanh(keys),
        lambda keys, props: bl.nn.LayerNorm(keys, 3),
        lambda keys, props: bl.nn.Linear(
            blockmap.Labels(["k"], np.array([[0]])), 3, 1, out_properties=[props]
        ),
    ],
    ids=["Linear", "ModuleMap", "Tanh", "LayerNorm", "Linear out_properties"],
)
def test_nn_modules_refuse_foreign_labels_at_construction(build):
    # metatensor's Labels were accepted, and refused only at state_dict() or .to()
    keys = metatensor.Labels(["k"], np.array([[0]]))
    props = metatensor.Labels(["p"], np.array([[0]]))
    with pytest.raises(blockmap.BlockMapTypeError, match="not metatensor.Labels"):
        build(keys, props)
    with pytest.raises(blockmap.BlockMapTypeError, match="blockmap.Labels as in_keys, not list"):
        bl.nn.Linear([0], 3, 1)


def test_nn_modules_given_numpy_maps_say_to_convert_them(tmp_path):
    path = tmp_path / "maps.bmdata"
    with blockmap.DatasetWriter(path) as writer:
        writer.write(_map_of(0))
    entry = blockmap.Dataset(path)[0]  # read-only numpy views of the file
    model = bl.nn.Linear(entry.keys, 3, 1, dtype=torch.float64)
    with pytest.raises(blockmap.BlockMapTypeError, match=r'\.to\(arrays="torch"\)'):
        model(entry)
    # the way out the message gives: writable views, then tensors over them
    entry = blockmap.Dataset(path, mmap="c")[0]
    out = model(entry.to(arrays="torch"))
    assert out.block(0).values.shape == (2, 1)
    with pytest.raises(blockmap.BlockMapTypeError, match="take a blockmap.TensorMap, not dict"):
        model({})


def test_joins_of_maps_of_different_keys_name_different_keys_union():
    maps = [_map_of(0), _map_of(1)]
    hint = 'pass different_keys="union"'
    with pytest.raises(blockmap.NotEqualError, match=hint):
        blockmap.join(maps, axis="samples")
    dataset = bl.Dataset(x=maps)
    with pytest.raises(blockmap.NotEqualError, match=hint):
        bl.data.group_and_join([dataset[0], dataset[1]])
    with pytest.raises(blockmap.NotEqualError, match=hint):
        list(bl.DataLoader(dataset, batch_size=2))
    # and the way out works
    loader = bl.DataLoader(
        dataset,
        batch_size=2,
        collate_fn=functools.partial(
            bl.data.group_and_join, join_kwargs={"different_keys": "union"}
        ),
    )
    (batch,) = list(loader)
    assert len(batch.x) == 2
