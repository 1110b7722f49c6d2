"""The data model's rules against metatensor-core 0.2.6, with files both
ways: metatensor writes, blockmap loads and saves, metatensor loads; and
blockmap writes, metatensor loads and saves, blockmap loads. Where blockmap
accepts something metatensor-core cannot read back, saving it is refused;
where metatensor-core itself writes what it cannot read, a test pins it."""

import io
import pickle
import zipfile

import metatensor
import numpy as np
import pytest
from tensor_oracle import (
    BlockSpec,
    Spec,
    assert_same_block,
    assert_same_map,
    block,
    build,
    column,
    labels,
    same_outcome,
)

import blockmap
from helpers.dtypes import ALL_DTYPES, dtype_id


def _gradient(rng, n_samples, properties, extra=(), parent_components=()):
    shape = (1, *(len(c.values) for c in (*extra, *parent_components)), len(properties.values))
    return BlockSpec(
        rng.random(shape),
        labels(["sample"], [[n_samples - 1]]),
        list(extra),
        properties,
    )


def _map_with_gradients(parameters, nested=None, seed=0):
    """Two blocks with gradients ``parameters`` (and, with ``nested``, a
    gradient of the first gradient named ``nested``)."""
    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(2):
        properties = column("p", [0, 1])
        spec = block(rng, column("s", [0, 1, 2]), properties)
        for parameter in parameters:
            spec.gradients[parameter] = _gradient(rng, 3, properties, [column("xyz", [0, 1])])
        if nested is not None:
            first = spec.gradients[parameters[0]]
            first.gradients[nested] = _gradient(
                rng, 1, properties, [column("abc", [0])], first.components
            )
        blocks.append(spec)
    return Spec(column("k", [0, 1]), blocks, {"origin": "data model"})


def _files_both_ways(spec, tmp_path):
    """The map of ``spec`` written by each library is read by the other,
    written again and read back by the first; every step gives the same map."""
    ours, theirs = build(spec)
    assert_same_map(ours, theirs)

    # metatensor writes -> blockmap loads -> blockmap saves -> metatensor loads
    path = tmp_path / "theirs.mts"
    metatensor.save(path, theirs)
    loaded = blockmap.load(path)
    assert loaded == ours
    assert blockmap.load(path, mmap=True) == ours
    again = tmp_path / "again.mts"
    blockmap.save(again, loaded)
    assert_same_map(loaded, metatensor.load(again))
    assert_same_map(loaded, metatensor.io.load_buffer(blockmap.save_buffer(loaded)))

    # blockmap writes -> metatensor loads -> metatensor saves -> blockmap loads
    path = tmp_path / "ours.mts"
    blockmap.save(path, ours)
    their_load = metatensor.load(path)
    assert_same_map(ours, their_load)
    metatensor.save(again, their_load)
    assert blockmap.load(again) == ours
    return ours, theirs


# ------------------------------------------------------- gradient names

ODD_NAMES = [
    "grad-of-grad",
    "",
    "with space",
    "é",
    "名前",
    "values.npy",
    "..",
    "gradients",
    "samples",
    "1st",
    "a.b",
]


@pytest.mark.parametrize("name", ODD_NAMES, ids=repr)
def test_gradient_names_are_any_string(tmp_path, name):
    spec = _map_with_gradients(["positions", name])
    ours, _ = _files_both_ways(spec, tmp_path)
    assert name in ours.block(0).gradients_list()
    assert ours.block(1).gradient(name).shape == (1, 2, 2)


@pytest.mark.parametrize("name", ["grad-of-grad", "", "x y"], ids=repr)
def test_odd_names_of_gradients_of_gradients(tmp_path, name):
    ours, _ = _files_both_ways(_map_with_gradients(["positions"], nested=name), tmp_path)
    assert ours.block(0).gradient("positions").gradients_list() == [name]


def test_block_files_with_odd_gradient_names(tmp_path):
    spec = _map_with_gradients(["grad-of-grad", ""]).blocks[0]
    ours, theirs = spec.build(blockmap), spec.build(metatensor)
    path = tmp_path / "block.mts"
    metatensor.save(path, theirs)
    loaded = blockmap.load_block(path)
    assert_same_block(loaded, metatensor.load_block(path))
    blockmap.save(path, loaded)
    assert_same_block(ours, metatensor.load_block(path))


@pytest.mark.parametrize("name", ["a/b", "/", "a/gradients/b"], ids=repr)
def test_a_slash_in_a_gradient_name(tmp_path, name):
    """metatensor-core 0.2.6 takes '/' in a gradient name and writes a file
    it cannot read (the entry names read as another gradient). blockmap
    takes the name too, refuses to save it, and cannot read metatensor's
    file either."""
    ours, theirs = build(_map_with_gradients(["positions", name]))
    assert name in ours.block(0).gradients_list()
    path = tmp_path / "slash.mts"
    metatensor.save(path, theirs)
    with pytest.raises(metatensor.MetatensorError):
        metatensor.load(path)
    with pytest.raises(blockmap.ValidationError):
        blockmap.load(path)
    with pytest.raises(blockmap.ValidationError, match="cannot save.*'/'"):
        blockmap.save(tmp_path / "ours.mts", ours)
    assert not (tmp_path / "ours.mts").exists()
    with pytest.raises(blockmap.ValidationError, match="cannot save"):
        blockmap.save_buffer(ours.block(0))
    # pickle protocol 5 keeps the name; before 5 a pickle is an archive,
    # which cannot hold it
    assert pickle.loads(pickle.dumps(ours, protocol=5)) == ours
    with pytest.raises(blockmap.ValidationError, match="protocol 5"):
        pickle.dumps(ours, protocol=4)


def test_a_nul_in_a_gradient_name():
    """metatensor-core passes names as C strings: 'a\\0b' becomes 'a'.
    blockmap keeps the name, and refuses to save it."""
    ours, theirs = build(_map_with_gradients(["a\x00b"]))
    assert theirs.block(0).gradients_list() == ["a"]
    assert ours.block(0).gradients_list() == ["a\x00b"]
    with pytest.raises(blockmap.ValidationError, match="NUL"):
        blockmap.save_buffer(ours)
    assert pickle.loads(pickle.dumps(ours, protocol=5)) == ours


# ----------------------------------------------------- one dtype per map


def test_one_dtype_per_map():
    rng = np.random.default_rng(0)
    for first, second in ((np.float64, np.float32), (np.int32, np.int64), (np.float64, np.bool_)):
        spec = Spec(
            column("k", [0, 1]),
            [
                block(rng, column("s", [0]), column("p", [0]), dtype=first),
                block(rng, column("s", [0]), column("p", [0]), dtype=second),
            ],
        )
        our_error, _ = same_outcome(lambda lib, spec=spec: spec.build(lib), blockmap, metatensor)
        assert isinstance(our_error, blockmap.ValidationError)
        assert "same dtype" in str(our_error)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_every_dtype_both_ways(tmp_path, dtype):
    rng = np.random.default_rng(1)
    properties = column("p", [0, 1, 2])
    blocks = []
    for _ in range(3):
        spec = block(rng, column("s", [0, 1]), properties, [column("c", [0, 1])], dtype=dtype)
        spec.gradients["positions"] = BlockSpec(
            np.ones((1, 2, 3), dtype=dtype), labels(["sample"], [[1]]), [], properties
        )
        blocks.append(spec)
    ours, _ = _files_both_ways(Spec(column("k", [0, 1, 2]), blocks), tmp_path)
    assert ours.dtype == np.dtype(dtype)


# ---------------------------------------- what metatensor-core cannot read


def _save_paths(data, tmp_path):
    """Every way of saving ``data`` to a file or a buffer."""
    return {
        "path": lambda: blockmap.save(tmp_path / "refused.mts", data),
        "file object": lambda: blockmap.save(io.BytesIO(), data),
        "buffer": lambda: blockmap.save_buffer(data),
        "method": lambda: data.save(tmp_path / "refused.mts"),
        "method buffer": lambda: data.save_buffer(),
    }


def _assert_saves_refused(data, tmp_path, match):
    for how, save in _save_paths(data, tmp_path).items():
        with pytest.raises(blockmap.ValidationError, match=match):
            save()
        assert not (tmp_path / "refused.mts").exists(), how
    # pickles and copies keep everything
    for protocol in (2, 4, 5):
        copied = pickle.loads(pickle.dumps(data, protocol=protocol))
        assert copied == data
    assert data.copy() == data


def test_components_without_entries(tmp_path):
    """metatensor-core refuses a component without entries; blockmap keeps
    it in memory (pickles and copies too) but refuses to save it."""
    empty = np.zeros((2, 0, 3))
    with pytest.raises(metatensor.MetatensorError, match="at least one entry"):
        metatensor.TensorBlock(
            empty,
            metatensor.Labels.range("s", 2),
            [metatensor.Labels.range("c", 0)],
            metatensor.Labels.range("p", 3),
        )
    ours = blockmap.TensorBlock(
        empty,
        blockmap.Labels.range("s", 2),
        [blockmap.Labels.range("c", 0)],
        blockmap.Labels.range("p", 3),
    )
    _assert_saves_refused(ours, tmp_path, "component \\['c'\\] of block has no entries")
    tensor = blockmap.TensorMap(blockmap.Labels.range("k", 1), [ours])
    _assert_saves_refused(tensor, tmp_path, "block 0 \\(key \\{k=0\\}\\)")

    # an extra gradient component without entries
    parent = blockmap.TensorBlock(
        np.zeros((2, 3)), blockmap.Labels.range("s", 2), [], blockmap.Labels.range("p", 3)
    )
    parent.add_gradient(
        "g",
        blockmap.TensorBlock(
            np.zeros((1, 0, 3)),
            blockmap.Labels.range("sample", 1),
            [blockmap.Labels.range("xyz", 0)],
            blockmap.Labels.range("p", 3),
        ),
    )
    _assert_saves_refused(parent, tmp_path, "gradient 'g' of block")


def test_nul_in_info(tmp_path):
    """metatensor-core keeps info in C strings: set_info truncates at a NUL,
    and a file whose info.json holds one fails to load with an internal
    error. blockmap keeps the NUL in memory, refuses to save it, and loads
    such a file."""
    ours, theirs = build(_map_with_gradients(["positions"]))
    theirs.set_info("key", "a\x00b")
    assert theirs.get_info("key") == "a"
    ours.set_info("key", "a\x00b")
    assert ours.get_info("key") == "a\x00b"
    _assert_saves_refused(ours, tmp_path, "NUL")
    ours.set_info("key", "a")
    ours.set_info("k\x00y", "v")
    _assert_saves_refused(ours, tmp_path, "NUL")

    # a file with a NUL in info.json (written by hand)
    clean, _ = build(_map_with_gradients(["positions"]))
    path = tmp_path / "nul.mts"
    with zipfile.ZipFile(io.BytesIO(bytes(blockmap.save_buffer(clean)))) as source:
        with zipfile.ZipFile(path, "w") as target:
            for name in source.namelist():
                if name != "info.json":
                    target.writestr(name, source.read(name))
            target.writestr("info.json", '{"key": "a\\u0000b"}')
    with pytest.raises(metatensor.MetatensorError, match="internal"):
        metatensor.load(path)
    assert blockmap.load(path).get_info("key") == "a\x00b"


def test_labels_without_dimensions(tmp_path):
    """metatensor-core 0.2.6 writes labels without dimensions (keys or
    Labels alone) and fails to read its own file: a bug of its reader.
    blockmap reads metatensor's file, and writes and reads them too."""
    keys = metatensor.Labels([], np.zeros((0, 0), dtype=np.int32))
    theirs = metatensor.TensorMap(keys, [])
    path = tmp_path / "theirs.mts"
    metatensor.save(path, theirs)
    with pytest.raises(metatensor.MetatensorError, match="invalid header"):
        metatensor.load(path)
    loaded = blockmap.load(path)
    assert loaded.keys.names == [] and len(loaded) == 0
    ours = tmp_path / "ours.mts"
    blockmap.save(ours, loaded)
    assert blockmap.load(ours) == loaded

    labels_path = tmp_path / "labels.mts"
    metatensor.save(labels_path, keys)
    with pytest.raises(metatensor.MetatensorError):
        metatensor.load_labels(labels_path)
    assert blockmap.load_labels(labels_path) == blockmap.Labels([], np.zeros((0, 0), np.int32))


def test_two_components_of_one_name():
    def make(lib):
        return lib.TensorBlock(
            np.zeros((1, 2, 2, 1)),
            lib.Labels.range("s", 1),
            [lib.Labels.range("c", 2), lib.Labels.range("c", 2)],
            lib.Labels.range("p", 1),
        )

    our_error, _ = same_outcome(make, blockmap, metatensor)
    assert "appears twice" in str(our_error)


def test_components_to_properties_metatensor_scrambles():
    """metatensor-core 0.2.6 moves a component with numpy's ``swapaxes``
    (with the axis just before the properties), not ``moveaxis``: when two
    or more components follow the moved one, its values no longer match its
    labels. blockmap moves the axis; both agree when at most one component
    follows."""
    rng = np.random.default_rng(0)
    spec = Spec(
        column("k", [0]),
        [
            block(
                rng,
                column("s", [0, 1]),
                column("p", [0, 1]),
                [column(n, range(i + 2)) for i, n in enumerate("abc")],
            )
        ],
    )
    ours, theirs = build(spec)
    source = ours.block(0).values  # axes s, a (2), b (3), c (4), p (2)
    expected = np.moveaxis(source, 1, 3).reshape(2, 3, 4, 4)
    ours_moved = ours.components_to_properties("a").block(0)
    theirs_moved = theirs.components_to_properties("a").block(0)
    assert_same_labels_only(ours_moved, theirs_moved)
    np.testing.assert_array_equal(ours_moved.values, expected)
    assert not np.array_equal(theirs_moved.values, expected)
    np.testing.assert_array_equal(
        theirs_moved.values, np.swapaxes(source, 1, 3).reshape(2, 3, 4, 4)
    )
    # the value at properties (a=1, p=0), b=2, c=3 of sample 1 is source[1, 1, 2, 3, 0]
    property_index = ours_moved.properties.position([1, 0])
    assert ours_moved.values[1, 2, 3, property_index] == source[1, 1, 2, 3, 0]

    for dimensions in ("b", "c", ["c", "b"], ["b", "a"]):
        same_outcome(lambda t, d=dimensions: t.components_to_properties(d), ours, theirs)


def assert_same_labels_only(ours, theirs):
    assert ours.samples == blockmap.Labels(theirs.samples.names, np.asarray(theirs.samples.values))
    assert [c.names for c in ours.components] == [c.names for c in theirs.components]
    np.testing.assert_array_equal(ours.properties.values, theirs.properties.values)
    assert ours.values.shape == theirs.values.shape
