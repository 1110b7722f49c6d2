"""Datasets: many maps in one mapped file (``blockmap.Dataset``,
``DatasetWriter``, ``save_dataset``), appended without rewriting, pickled
as references, converted from folders of ``.mts`` files and from
metatrain's DiskDataset layout."""

import functools
import io
import os
import pickle
import struct
import zipfile
import zlib

import numpy as np
import pytest

import blockmap
from bench.batches import structure_maps
from blockmap import Dataset, DatasetWriter, Labels
from helpers.io_cases import assert_identical, assert_matches_metatensor, make_map
from helpers.memory import address_of, mappings


@pytest.fixture
def maps():
    return structure_maps(40)


@pytest.fixture
def saved(tmp_path, maps):
    path = tmp_path / "train.data"
    blockmap.save_dataset(path, maps)
    return path


def test_maps_read_back_as_views_of_the_mapping(saved, maps):
    dataset = Dataset(saved)
    assert len(dataset) == len(maps)
    assert os.fspath(dataset.path) == os.fspath(saved)  # used as given
    assert not os.path.exists(os.fspath(saved) + ".mts")
    for i, tensor in enumerate(maps):
        assert_identical(dataset[i], tensor)
    assert_identical(dataset[-1], maps[-1])
    assert [len(t.block(0).gradient("positions").samples) for t in dataset[3:9:2]] == [
        len(maps[i].block(0).gradient("positions").samples) for i in (3, 5, 7)
    ]
    assert sum(1 for _ in dataset) == len(maps)
    values = dataset[4].block(0).gradient("positions").values
    assert not values.flags.writeable
    address = address_of(values)
    assert address % 64 == 0
    real = os.path.realpath(saved)
    assert any(m.holds(address) for m in mappings() if m.path == real)
    for index, error in [(40, IndexError), (-41, IndexError), ("0", TypeError), (1.0, TypeError)]:
        with pytest.raises(error):
            dataset[index]
    assert "40 maps" in repr(dataset)


def test_indices_are_checked_once_by_the_core(saved, maps):
    """One bounds check (negative indices from the end, as Python's) for
    ``dataset[i]``, ``load(i)``, the binding's ``_get`` and ``_slot``, and a
    reference's view of its first maps; the message names the index given."""
    dataset = Dataset(saved)
    assert_identical(dataset.load(-2), maps[-2])
    assert_identical(dataset.load(-40, keys=maps[0].keys), maps[0])
    assert dataset._slot(-1) == dataset._slot(39)
    # the reference of a map read by a negative index names its position
    assert_identical(pickle.loads(pickle.dumps(dataset[-1], protocol=5)), maps[-1])
    view = blockmap._blockmap._Dataset(saved, count=3)
    assert_identical(view._get(-1), maps[2])
    cases = [(dataset, 40), (dataset, -41), (dataset, 2**70), (dataset, -(2**70))]
    cases += [(view, 3), (view, -4)]
    for opened, index in cases:
        calls = [opened._get, opened._slot]
        if isinstance(opened, Dataset):
            calls += [opened.__getitem__, functools.partial(opened.load, keys=maps[0].keys)]
        for call in calls:
            with pytest.raises(blockmap.BlockMapIndexError) as error:
                call(index)
            if abs(index) < 2**63:
                assert str(error.value) == (
                    f"map {index} is out of range for a dataset of {len(opened)}"
                )
    for index in ["0", 1.0, True, None, [0]]:
        for call in [dataset.__getitem__, dataset.load]:
            with pytest.raises(blockmap.BlockMapTypeError):
                call(index)


def test_indices_of_any_library_and_never_bools(saved, maps):
    """An index is an integer whichever library it comes from (numpy's and
    torch's scalars and 0-d arrays); a bool of any library is refused
    (``torch.tensor(True)`` was entry 1), and anything else is a
    BlockMapTypeError naming it, never a builtin TypeError."""
    torch = pytest.importorskip("torch")
    dataset = Dataset(saved)
    field = dataset.field("tensor")
    calls = [dataset.__getitem__, dataset.load, field.__getitem__, field.load]
    for index in [np.int64(3), np.uint8(3), np.array(3), np.array(-37), torch.tensor(3)]:
        for call in calls:
            assert_identical(call(index), maps[3])
    for index, named in [
        (np.True_, "bool"),
        (np.array(True), "dtype bool"),
        (torch.tensor(True), "torch.bool"),
        (torch.tensor(False), "torch.bool"),
        (np.array(1.0), "dtype float64"),
        (np.array([1]), "shape (1,)"),
        (torch.tensor(1.0), "torch.float32"),
        (torch.tensor([1]), "shape (1,)"),
        (torch.tensor(1 + 1j), "complex"),
    ]:
        for call in calls:
            with pytest.raises(blockmap.BlockMapTypeError, match="indices") as raised:
                call(index)
            assert named in str(raised.value)


def test_selected_blocks_of_one_map(tmp_path, rng):
    tensor = make_map(rng)
    path = tmp_path / "one"
    blockmap.save_dataset(path, [tensor, tensor])
    selection = Labels(tensor.keys.names, tensor.keys.values[[2, 0]])
    loaded = Dataset(path).load(1, keys=selection)
    assert loaded.keys == selection
    for i, key in enumerate(selection):
        assert_identical(loaded.block(i), tensor.block(key))


def test_the_file_is_format_version_4_and_its_maps_save_for_metatensor(saved, maps, tmp_path):
    # the layout of docs/format.md: header, records on 64-byte boundaries,
    # a trailer naming the last commit record, whose pieces name SEGMENT
    # records, whose rows hold each entry's description CRC32
    data = saved.read_bytes()
    assert data[:8] == b"\x89BMDS\r\n\x1a"
    assert int.from_bytes(data[8:12], "little") == 4
    assert data[12:44].decode() == Dataset(saved).id
    assert data[44:64] == bytes(20)
    assert data[-32:-24] == b"BMDSEND2"
    commit_at = int.from_bytes(data[-24:-16], "little")
    assert commit_at % 64 == 0 and data[commit_at : commit_at + 4] == b"BMr\x04"
    assert int.from_bytes(data[-16:-8], "little") == len(maps)
    # the commit: count, schema offset, one piece (one session)
    count, schema_at, n_pieces = struct.unpack_from("<QQQ", data, commit_at + 16)
    assert (count, n_pieces) == (len(maps), 1) and data[schema_at : schema_at + 4] == b"BMr\x01"
    segment_at, piece_count, rows_crc, columns_crc = struct.unpack_from(
        "<QQII", data, commit_at + 16 + 24
    )
    assert piece_count == len(maps) and data[segment_at : segment_at + 4] == b"BMr\x06"
    # its counts, one column (n_samples: 8 bytes an entry), then the rows,
    # which end the payload
    assert struct.unpack_from("<QII", data, segment_at + 16) == (len(maps), 1, 0)
    rows_at = segment_at + 16 + 16 + 8 * len(maps)
    assert columns_crc == zlib.crc32(data[segment_at + 16 : rows_at])
    assert rows_crc == zlib.crc32(data[rows_at : rows_at + 24 * len(maps)])
    # then the COMMIT record, after the padding to a 64-byte boundary
    assert 0 <= commit_at - (rows_at + 24 * len(maps)) < 64
    # a row: offset, payload length, payload CRC32, description CRC32 (the
    # description's u64 length and its bytes)
    row = rows_at
    offset, length, crc, desc_crc = struct.unpack_from("<QQII", data, row)
    assert offset == Dataset(saved)._slot(0)[0]
    assert crc == zlib.crc32(data[offset + 16 : offset + 16 + length])
    (desc_len,) = struct.unpack_from("<Q", data, offset + 16)
    assert desc_crc == zlib.crc32(data[offset + 16 : offset + 24 + desc_len])
    assert not zipfile.is_zipfile(saved)
    mts = pytest.importorskip("metatensor")
    ds = Dataset(saved)
    for i in (0, 17, 39):
        blockmap.save(tmp_path / f"{i}.mts", ds[i])
        assert_matches_metatensor(maps[i], mts.load(os.fspath(tmp_path / f"{i}.mts")))


def test_appending_rewrites_nothing_and_old_readers_keep_their_view(saved, maps):
    before = saved.read_bytes()
    reader = Dataset(saved)
    with DatasetWriter(saved, append=True) as writer:
        assert len(writer) == len(maps)
        for tensor in maps[:5]:
            writer.write(tensor)
        assert len(writer) == len(maps) + 5
    after = saved.read_bytes()
    assert after[: len(before)] == before
    grown = Dataset(saved)
    assert len(grown) == len(maps) + 5 and grown.id == reader.id
    assert_identical(grown[len(maps) + 2], maps[2])
    assert len(reader) == len(maps)
    assert_identical(reader[len(maps) - 1], maps[-1])


def test_a_new_writer_replaces_the_file_atomically(saved, maps):
    old = Dataset(saved)
    with DatasetWriter(saved, overwrite=True) as writer:
        writer.write(maps[3])
    new = Dataset(saved)
    assert len(new) == 1 and new.id != old.id
    assert_identical(new[0], maps[3])
    # the old mapping still reads the old file
    assert_identical(old[3], maps[3])
    with pytest.raises(blockmap.BlockMapError, match="closed"):
        writer.write(maps[0])


def test_a_new_dataset_is_in_place_at_its_first_commit(tmp_path, maps):
    path = tmp_path / "open"
    writer = DatasetWriter(path)
    for tensor in maps[:7]:
        writer.write(tensor)
    # built beside its path, unnamed; only its creation lock is there (a
    # hidden file, which exists before the dataset does: docs/format.md)
    assert [p.name for p in tmp_path.iterdir()] == [".open.lock"]
    writer.commit()
    # in place: the lock is let go and removed
    assert [p.name for p in tmp_path.iterdir()] == ["open"]
    for tensor in maps[7:10]:
        writer.write(tensor)
    # in place from the commit on: what was written since is there too
    dataset = Dataset(path)
    assert len(dataset) == 10 and not dataset.committed
    assert "recovered" in repr(dataset)
    for i in range(10):
        assert_identical(dataset[i], maps[i])
    writer.close()
    assert Dataset(path).committed


def test_a_failed_write_leaves_what_was_there(saved, maps, tmp_path):
    before = saved.read_bytes()

    def failing():
        yield from maps[:5]
        raise RuntimeError("the source of the maps failed")

    with pytest.raises(RuntimeError):
        blockmap.save_dataset(saved, failing(), overwrite=True)
    with pytest.raises(blockmap.BlockMapTypeError):
        blockmap.save_dataset(saved, [maps[0], "not a map"], overwrite=True)
    with pytest.raises(KeyError):
        with DatasetWriter(saved, overwrite=True) as writer:
            writer.write(maps[0])
            raise KeyError("the block failed")
    # a corrupt input met by a conversion
    folder = tmp_path / "inputs"
    folder.mkdir()
    for i in range(3):
        blockmap.save(folder / f"{i}.mts", maps[i])
    (folder / "3.mts").write_bytes(b"PK\x03\x04 not an archive")
    with pytest.raises(blockmap.FormatError):
        Dataset.from_files(sorted(folder.glob("*.mts")), saved, overwrite=True)
    zip_path = tmp_path / "disk.zip"
    with zipfile.ZipFile(zip_path, "w") as archive:
        archive.writestr("0/energy.mts", b"not an npy array")
    with pytest.raises(blockmap.FormatError):
        Dataset.from_diskdataset(zip_path, saved, overwrite=True)
    # the old dataset is untouched, and nothing else was left beside it
    assert saved.read_bytes() == before
    assert sorted(p.name for p in saved.parent.iterdir()) == sorted(
        ["train.data", "inputs", "disk.zip"]
    )
    # abort() gives up a new dataset, and is close() for one in place
    writer = DatasetWriter(saved, overwrite=True)
    writer.write(maps[0])
    writer.abort()
    assert saved.read_bytes() == before
    with DatasetWriter(saved, append=True) as writer:
        writer.write(maps[0])
        writer.abort()
    assert len(Dataset(saved)) == len(maps) + 1


def test_a_dataset_pickles_as_a_reference_and_its_maps_as_data(saved, maps, tmp_path):
    from multiprocessing.reduction import ForkingPickler

    dataset = Dataset(saved)
    data = pickle.dumps(dataset)
    assert len(data) < 400
    again = pickle.loads(data)
    assert len(again) == len(dataset) and again.id == dataset.id
    tensor = dataset[11]
    assert tensor._pickles_as_reference
    # through multiprocessing's reducer: a reference
    message = ForkingPickler.dumps(tensor)
    assert len(message) < 400
    assert_identical(pickle.loads(message), maps[11])
    many = ForkingPickler.dumps(dataset[0:20])
    assert len(many) < 400 * 20
    # pickle itself, copy and files: the data, which outlives the file
    stored = tmp_path / "map.pickle"
    with open(stored, "wb") as file:
        pickle.dump(tensor, file, protocol=5)
    in_band = pickle.dumps(tensor, protocol=4)
    assert len(in_band) > 1000
    copied = __import__("copy").deepcopy(tensor)
    os.remove(saved)
    with open(stored, "rb") as file:
        assert_identical(pickle.load(file), maps[11])
    assert_identical(pickle.loads(in_band), maps[11])
    assert_identical(copied, maps[11])
    # changed in memory: data through the reducer too
    tensor.set_info("changed", "yes")
    assert not tensor._pickles_as_reference
    assert ForkingPickler.loads(ForkingPickler.dumps(tensor)).info() == {"changed": "yes"}
    # selected blocks, and torch arrays, are other maps than dataset[i]
    assert not dataset.load(1, keys=Labels(["_"], np.array([[0]])))._pickles_as_reference


class Transformed(Dataset):
    """A dataset whose maps are transformed as they are read."""

    def __getitem__(self, index):
        tensor = super().__getitem__(index)
        tensor = tensor.copy()
        tensor.set_info("transformed", self.tag)
        return tensor


def test_a_subclass_keeps_its_class_and_attributes(saved, maps):
    from multiprocessing.reduction import ForkingPickler

    dataset = Transformed(saved)
    dataset.tag = "yes"
    again = pickle.loads(pickle.dumps(dataset))
    assert type(again) is Transformed and again.tag == "yes"
    assert again[3].info() == {"transformed": "yes"}
    # a map read by the base class travels as what it is, not re-transformed
    raw = Dataset.__getitem__(dataset, 3)
    assert_identical(ForkingPickler.loads(ForkingPickler.dumps(raw)), maps[3])


def _sibling_of_the_same_identity(saved, maps, tmp_path):
    """A copy of ``saved`` (same identity) to which another map was
    appended, while ``saved`` got ``maps[1]``: the index rows of the two
    files are the same, their last maps are not."""
    sibling = tmp_path / "sibling.data"
    sibling.write_bytes(saved.read_bytes())
    with DatasetWriter(saved, append=True) as writer:
        writer.write(maps[1])
    with DatasetWriter(sibling, append=True) as writer:
        other = maps[1].copy()
        values = other.block(0).values
        values[...] = values + 1.0
        writer.write(other)
    assert Dataset(sibling).id == Dataset(saved).id
    return sibling


def test_a_reference_gives_the_pickled_maps_or_raises(saved, maps, tmp_path, monkeypatch):
    from multiprocessing.reduction import ForkingPickler

    import blockmap.dataset as module

    sibling = _sibling_of_the_same_identity(saved, maps, tmp_path)
    dataset = Dataset(saved)
    last = len(dataset) - 1
    reference = pickle.dumps(dataset)
    of_map = ForkingPickler.dumps(dataset[last])
    # the path swapped for the sibling before the reference is opened
    kept = tmp_path / "kept.data"
    os.link(saved, kept)
    os.replace(sibling, saved)
    for data in (reference, of_map):
        with pytest.raises(blockmap.BlockMapIOError, match="not the one that was pickled"):
            pickle.loads(data)
    os.replace(kept, saved)
    module._opened.clear()
    module._recent.clear()
    # the path swapped between the opening and the check: the check is of
    # the open file, which is the one read
    sibling = _sibling_of_the_same_identity(saved, maps[:1] + maps[:1], tmp_path)
    dataset = Dataset(saved)
    last = len(dataset) - 1
    expected = dataset[last]
    of_map = ForkingPickler.dumps(expected)
    original = module._Dataset._checksum

    def swapped(self):
        if sibling.exists():
            os.replace(sibling, saved)
        return original(self)

    monkeypatch.setattr(module._Dataset, "_checksum", swapped)
    # the check is of the file that was opened and is read: the map pickled
    received = pickle.loads(of_map)
    assert not sibling.exists()  # the swap happened
    assert_identical(received, expected)


def test_copy_on_write_maps_are_writable_and_pickle_as_data(saved, maps):
    dataset = Dataset(saved, mmap="c")
    tensor = dataset[2]
    values = tensor.block(0).gradient("positions").values
    assert values.flags.writeable
    values[...] = 7.0
    assert not tensor._pickles_as_reference
    loaded = pickle.loads(pickle.dumps(tensor, protocol=4))
    assert (loaded.block(0).gradient("positions").values == 7.0).all()
    # the file never changed
    assert_identical(Dataset(saved)[2], maps[2])
    with pytest.raises(blockmap.ValidationError):
        Dataset(saved, mmap=False)
    with pytest.raises(blockmap.ValidationError):
        Dataset(saved, mmap="w")


def test_a_file_changed_behind_a_reference_is_detected(saved, maps, tmp_path):
    from multiprocessing.reduction import ForkingPickler

    dataset = Dataset(saved)
    reference = pickle.dumps(dataset)
    of_map = ForkingPickler.dumps(dataset[5])
    # appended: the reference still sees what it saw
    with DatasetWriter(saved, append=True) as writer:
        writer.write(maps[0])
    assert len(pickle.loads(reference)) == len(maps)
    # replaced by another dataset
    blockmap.save_dataset(saved, maps[::-1], overwrite=True)
    for data in (reference, of_map):
        with pytest.raises(blockmap.BlockMapIOError, match="replaced"):
            pickle.loads(data)
    # gone
    os.remove(saved)
    with pytest.raises(blockmap.BlockMapIOError, match="cannot open"):
        pickle.loads(reference)


def test_what_is_not_a_dataset_is_refused(tmp_path, saved):
    with pytest.raises(blockmap.MissingFileError):
        Dataset(tmp_path / "missing")
    with pytest.raises(blockmap.BlockMapIOError):
        Dataset(tmp_path)
    plain = tmp_path / "plain.mts"
    blockmap.save(plain, make_map(np.random.default_rng(1)))
    with pytest.raises(blockmap.FormatError, match="not a blockmap dataset"):
        Dataset(plain)
    with pytest.raises(blockmap.BlockMapTypeError), DatasetWriter(tmp_path / "x") as writer:
        writer.write("not a map")
    # every prefix of a dataset file opens (with the maps it holds whole)
    data = saved.read_bytes()
    cut = tmp_path / "cut"
    for length in range(200, len(data), max(1, len(data) // 300)):
        cut.write_bytes(data[:length])
        dataset = Dataset(cut)
        for i in range(len(dataset)):
            dataset[i]


def test_from_files_equals_what_metatensor_reads(tmp_path, rng):
    mts = pytest.importorskip("metatensor")
    folder = tmp_path / "files"
    folder.mkdir()
    paths = []
    for i in range(6):
        theirs = make_map(rng, gradients=False).to_metatensor()
        path = folder / f"{i}.mts"
        mts.save(path, theirs)
        paths.append(path)
    dataset = Dataset.from_files(paths, tmp_path / "from-files", progress=True)
    assert len(dataset) == 6
    for i, path in enumerate(paths):
        assert_matches_metatensor(dataset[i], mts.load(path))


def _diskdataset(path, maps_of_samples, systems=None, extra=()):
    """A zip laid out as metatrain's DiskDatasetWriter writes it: for each
    sample ``<i>/system.mta`` (the bytes of ``systems[i]``, when given) and
    ``<i>/<target>.mts`` (``np.save`` of the metatensor map's
    ``save_buffer()``), then ``metadata/atom_counts.npy``; ``extra`` names
    other members."""
    with zipfile.ZipFile(path, "w") as archive:
        for i, targets in enumerate(maps_of_samples):
            if systems is not None:
                archive.writestr(f"{i}/system.mta", systems[i])
            for name, tensor in targets.items():
                with archive.open(f"{i}/{name}.mts", "w") as f:
                    # metatensor-torch's buffer is a uint8 tensor: .numpy() is uint8
                    np.save(f, np.frombuffer(tensor.save_buffer(), dtype=np.uint8))
        for name in extra:
            archive.writestr(name, b"something else")
        with archive.open("metadata/atom_counts.npy", "w") as f:
            np.save(f, np.arange(len(maps_of_samples)))


def test_from_diskdataset_converts_every_field_as_metatensor_reads(tmp_path, maps):
    mts = pytest.importorskip("metatensor")
    theirs = [tensor.to_metatensor() for tensor in maps[:12]]
    zip_path = tmp_path / "disk.zip"
    _diskdataset(zip_path, [{"energy": t, "forces": theirs[-1 - i]} for i, t in enumerate(theirs)])
    dataset = Dataset.from_diskdataset(zip_path, tmp_path / "converted")
    assert len(dataset) == 12 and dataset.fields == ["energy", "forces"]
    with zipfile.ZipFile(zip_path) as archive:
        for i in range(12):
            for name in ("energy", "forces"):
                wrapped = np.load(archive.open(f"{i}/{name}.mts"))
                assert_matches_metatensor(getattr(dataset[i], name), mts.io.load_buffer(wrapped))
    # target= keeps one field (a dataset of single maps) or several
    single = Dataset.from_diskdataset(zip_path, tmp_path / "energy", target="energy")
    assert single.fields == ["tensor"]
    assert_matches_metatensor(single[3], theirs[3])
    kept = Dataset.from_diskdataset(zip_path, tmp_path / "forces", target=["forces"])
    assert kept.fields == ["forces"]
    assert_matches_metatensor(kept[3].forces, theirs[-4])
    with pytest.raises(blockmap.ValidationError, match="dipole"):
        Dataset.from_diskdataset(zip_path, tmp_path / "nope", target="dipole")
    one = tmp_path / "one.zip"
    _diskdataset(one, [{"energy": t} for t in theirs[:3]])
    assert len(Dataset.from_diskdataset(one, tmp_path / "converted-one")) == 3
    with pytest.raises(blockmap.FormatError, match="not a DiskDataset"):
        Dataset.from_diskdataset(tmp_path / "converted-one", tmp_path / "nope")


def test_from_diskdataset_refuses_what_it_cannot_convert(tmp_path, maps):
    pytest.importorskip("metatensor")
    theirs = [tensor.to_metatensor() for tensor in maps[:4]]
    out = tmp_path / "out"
    # samples of different fields: the first that differs is named
    uneven = tmp_path / "uneven.zip"
    _diskdataset(uneven, [{"energy": t} for t in theirs[:3]] + [{"forces": theirs[3]}])
    with pytest.raises(blockmap.FormatError, match=r"sample 3 .*missing \['energy'\]"):
        Dataset.from_diskdataset(uneven, out)
    # a member that is not a field is refused, not left out
    other = tmp_path / "other.zip"
    _diskdataset(other, [{"energy": t} for t in theirs], extra=["notes/readme.txt"])
    with pytest.raises(blockmap.FormatError, match="readme"):
        Dataset.from_diskdataset(other, out)
    assert not out.exists()


def test_from_diskdataset_converts_systems(tmp_path, maps):
    # expected to pass once blockmap._systems (tensormap_from_mta) is merged
    # (importorskip: their own import warnings silenced; both are installed)
    torch = pytest.importorskip("torch")
    mta = pytest.importorskip("metatomic.torch")
    from blockmap._systems import tensormap_from_mta

    theirs = [tensor.to_metatensor() for tensor in maps[:3]]
    systems = []
    for n in (2, 3, 5):
        system = mta.System(
            types=torch.arange(1, n + 1, dtype=torch.int32),
            positions=torch.arange(3 * n, dtype=torch.float64).reshape(n, 3),
            cell=torch.eye(3, dtype=torch.float64) * 10,
            pbc=torch.tensor([True, True, True]),
        )
        stream = io.BytesIO()
        mta.save(stream, system)
        systems.append(stream.getvalue())
    zip_path = tmp_path / "disk.zip"
    _diskdataset(zip_path, [{"energy": t} for t in theirs], systems=systems)
    dataset = Dataset.from_diskdataset(zip_path, tmp_path / "converted")
    assert dataset.fields == ["system", "energy"]
    for i, data in enumerate(systems):
        assert blockmap.equal(dataset[i].system, tensormap_from_mta(data))
        assert_matches_metatensor(dataset[i].energy, theirs[i])
    assert dataset.field("system").column("n_samples").tolist() == [2, 3, 5]
    # a system.mta that is not one: refused (not left out), nothing written
    bogus = tmp_path / "bogus.zip"
    _diskdataset(bogus, [{"energy": t} for t in theirs], systems=[b"not a zip"] * 3)
    with pytest.raises(blockmap.FormatError, match="system.mta"):
        Dataset.from_diskdataset(bogus, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_maps_of_a_dataset_cross_multiprocessing_as_references(tmp_path):
    from multiprocessing.reduction import ForkingPickler

    from bench.workload import build_blockmap, make_arrays

    big = build_blockmap(make_arrays(n_keys=2, n_samples=1200, n_grad_samples=150))
    assert big.nbytes > blockmap.get_auto_share_threshold()
    path = tmp_path / "big"
    blockmap.save_dataset(path, [big])
    tensor = Dataset(path)[0]
    # not copied into shared memory: the reference is smaller and free
    message = ForkingPickler.dumps(tensor)
    assert len(message) < 400
    received = pickle.loads(message)
    assert not received.is_shared()
    assert_identical(received, big)


def test_a_dataset_file_never_loads_as_one_map(saved, maps, tmp_path):
    # half-written: the last map's own archive ends the file
    open_writer = DatasetWriter(saved, append=True)
    open_writer.write(maps[0])
    data = saved.read_bytes()
    calls = [
        lambda: blockmap.load(saved),
        lambda: blockmap.load(saved, mmap=True),
        lambda: blockmap.load(saved, keys=maps[0].keys),
        lambda: blockmap.TensorMap.load(os.fspath(saved)),
        lambda: blockmap.load_block(saved),
        lambda: blockmap.load_buffer(data),
        lambda: blockmap.load_buffer(np.frombuffer(data, np.uint8)),
    ]
    with open(saved, "rb") as stream:

        def from_the_start():
            stream.seek(0)
            return blockmap.load(stream)

        calls.append(from_the_start)
        for _state in ("half-written", "committed"):
            for call in calls:
                with pytest.raises(blockmap.FormatError, match=r"blockmap\.Dataset\(path\)"):
                    call()
            # verify checks it as the dataset it is
            assert blockmap.io.verify(saved) is None
            open_writer.close()
            data = saved.read_bytes()
    # re-running a conversion whose inputs match its own output refuses it
    folder = tmp_path / "out"
    folder.mkdir()
    for i in range(3):
        blockmap.save(folder / f"{i}.mts", maps[i])
    first = Dataset.from_files(sorted(folder.glob("*")), folder / "all.data")
    assert len(first) == 3
    before = (folder / "all.data").read_bytes()
    with pytest.raises(blockmap.FormatError, match="dataset"):
        Dataset.from_files(sorted(folder.glob("*")), folder / "all.data", overwrite=True)
    assert (folder / "all.data").read_bytes() == before
