"""Datasets of format version 3: entries of named fields, columns read
from the index, per-field views, references per field, upgrade."""

import decimal
import enum
import os
import pickle
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import blockmap
from bench.batches import qm9_maps
from blockmap import Dataset, DatasetWriter
from helpers.stored_datasets import STORED


@pytest.fixture(scope="module")
def maps():
    return qm9_maps(12, seed=3)


@pytest.fixture(scope="module")
def fielded(tmp_path_factory, maps):
    path = tmp_path_factory.mktemp("fields") / "fields.bmds"
    with DatasetWriter(path) as writer:
        for i, tensor in enumerate(maps):
            writer.write(
                system=tensor,
                energy=maps[-1 - i],
                columns={"n_atoms": 3 * i, "weight": 0.25 * i},
            )
    return path


def test_entries_are_named_tuples_of_their_fields(fielded, maps):
    ds = Dataset(fielded)
    assert ds.fields == ["system", "energy"]
    assert ds.version == 4
    assert len(ds) == len(maps)
    entry = ds[4]
    assert entry._fields == ("system", "energy")
    assert entry.system == maps[4]
    assert entry.energy == maps[-5]
    assert ds[-1].system == maps[-1]
    assert [e.system == m for e, m in zip(ds[2:5], maps[2:5], strict=True)] == [True] * 3
    assert len(ds.load_all()) == len(maps)
    assert all(e.energy == m for e, m in zip(ds, reversed(maps), strict=True))
    # an entry pickles (DataLoader workers send them), its maps as data
    again = pickle.loads(pickle.dumps(entry))
    assert again._fields == entry._fields and (again.system == maps[4])
    text = repr(ds)
    for part in ("12 entries", "['system', 'energy']", "n_atoms", "version=4"):
        assert part in text
    with pytest.raises(blockmap.BlockMapIndexError):
        ds[12]


def test_the_field_view(fielded, maps):
    ds = Dataset(fielded)
    energy = ds.field("energy")
    assert len(energy) == len(maps)
    assert energy[0] == maps[-1]
    assert len(energy[3:7]) == 4
    assert all(a == b for a, b in zip(energy, reversed(maps), strict=True))
    keys = maps[-3].keys
    key = blockmap.Labels(keys.names, keys.values[:1])
    loaded = energy.load(2, keys=key)
    assert loaded.keys == key
    # which field is meant must be said
    with pytest.raises(blockmap.ValidationError, match=r"ds\.field\(name\)\.load"):
        ds.load(2, keys=key)
    with pytest.raises(blockmap.ValidationError, match="forces"):
        ds.field("forces")


def test_columns_come_from_the_index(fielded, maps):
    ds = Dataset(fielded)
    assert ds.columns == ["n_atoms", "weight", "n_samples"]
    n_atoms = ds.column("n_atoms")
    assert n_atoms.dtype == np.int64 and n_atoms.tolist() == [3 * i for i in range(len(maps))]
    assert ds.column("weight").dtype == np.float64
    assert ds.column("weight")[5] == 1.25
    first = [len(m.block(0).samples) for m in maps]
    assert ds.column("n_samples").tolist() == first
    assert ds.field("energy").column("n_samples").tolist() == first[::-1]
    with pytest.raises(blockmap.ValidationError, match="n_atoms.*weight.*n_samples"):
        ds.column("missing")
    # a view of the first entries (a reference's) has their columns only
    assert len(Dataset(fielded, count=5).column("n_atoms")) == 5


def test_entries_of_another_schema_are_refused(tmp_path, maps):
    path = tmp_path / "d"
    with DatasetWriter(path) as writer:
        writer.write(a=maps[0], b=maps[1], columns={"n": 1})
        with pytest.raises(blockmap.ValidationError, match="fields"):
            writer.write(a=maps[0])
        with pytest.raises(blockmap.ValidationError, match="n: float"):
            writer.write(a=maps[0], b=maps[1], columns={"n": 1.5})
        with pytest.raises(blockmap.ValidationError):
            writer.write(maps[0])
        with pytest.raises(blockmap.BlockMapTypeError):
            writer.write(a=maps[0], b=maps[1], columns={"n": True})
        with pytest.raises(blockmap.BlockMapTypeError):
            writer.write(a=maps[0], b="not a map", columns={"n": 1})
        with pytest.raises(blockmap.ValidationError, match="n_samples"):
            writer.write(a=maps[0], b=maps[1], columns={"n_samples": 1})
    # the refused writes left nothing
    assert len(Dataset(path)) == 1
    with DatasetWriter(path, append=True) as writer:
        with pytest.raises(blockmap.ValidationError, match="fields"):
            writer.write(maps[0])
        writer.write(a=maps[2], b=maps[3], columns={"n": np.int32(7)})
    assert Dataset(path).column("n").tolist() == [1, 7]


def test_fields_and_columns_in_another_order_are_the_same_schema(tmp_path, maps):
    path = tmp_path / "d"
    with DatasetWriter(path) as writer:
        writer.write(a=maps[0], b=maps[1], columns={"n": 1, "w": 0.5})
        # keyword order is the caller's, not a schema change
        writer.write(b=maps[3], a=maps[2], columns={"w": 1.5, "n": 2})
        # an int for a float column is float(n); a float for an int one is refused
        writer.write(a=maps[4], b=maps[5], columns={"n": 3, "w": 2})
        with pytest.raises(blockmap.ValidationError, match="n: float"):
            writer.write(a=maps[4], b=maps[5], columns={"n": 3.0, "w": 2.0})
        # numpy's bool is a bool, as Python's is: not silently 1.0
        with pytest.raises(blockmap.BlockMapTypeError, match="bool"):
            writer.write(a=maps[4], b=maps[5], columns={"n": 3, "w": np.True_})
    ds = Dataset(path)
    assert ds.fields == ["a", "b"]
    assert len(ds) == 3
    assert (ds[1].a == maps[2]) and (ds[1].b == maps[3])
    assert ds.column("n").tolist() == [1, 2, 3]
    assert ds.column("w").tolist() == [0.5, 1.5, 2.0]
    assert ds.column("w").dtype == np.float64


def test_names_that_are_not_utf8_text_are_validation_errors(tmp_path, maps):
    path = tmp_path / "d"
    with DatasetWriter(path) as writer:
        with pytest.raises(blockmap.ValidationError, match="field names .* surrogate"):
            writer.write(**{"a\udc80": maps[0]})
        with pytest.raises(blockmap.ValidationError, match="column names .* surrogate"):
            writer.write(a=maps[0], columns={"\udc80": 1})
        with pytest.raises(blockmap.BlockMapTypeError, match="column names are str, not int"):
            writer.write(a=maps[0], columns={1: 1})
        writer.write(a=maps[0])
    assert len(Dataset(path)) == 1


def test_a_field_map_travels_as_a_reference(fielded, maps):
    ds = Dataset(fielded)
    tensor = ds[7].energy
    message = ForkingPickler.dumps(tensor)
    assert len(message) < 400
    received = pickle.loads(message)
    assert received == maps[-8]
    assert pickle.loads(ForkingPickler.dumps(ds[7].system)) == maps[7]


def test_a_field_reference_detects_a_changed_file(tmp_path, maps):
    path = tmp_path / "changing"
    with DatasetWriter(path) as writer:
        for i in range(4):
            writer.write(a=maps[i], b=maps[i + 4])
    of_map = ForkingPickler.dumps(Dataset(path)[2].b)
    # appended: the reference still gives its map
    with DatasetWriter(path, append=True) as writer:
        writer.write(a=maps[8], b=maps[9])
    assert pickle.loads(of_map) == maps[6]
    # replaced by another dataset of the same fields: the file this process
    # opened for the reference stays open and gives the pickled map; one
    # opened afresh is detected
    with DatasetWriter(path, overwrite=True) as writer:
        for i in range(4):
            writer.write(a=maps[i + 4], b=maps[i])
    assert pickle.loads(of_map) == maps[6]
    import blockmap.dataset as module

    module._opened.clear()
    module._recent.clear()
    with pytest.raises(blockmap.BlockMapIOError, match="replaced"):
        pickle.loads(of_map)


def test_equal_labels_share_memory_across_reads(fielded):
    ds = Dataset(fielded)
    a, b = ds[0].system, ds[5].system
    shared = a.block(0).properties.values
    assert np.shares_memory(shared, b.block(0).properties.values)
    # samples are the entry's own
    assert not np.shares_memory(a.block(0).samples.values, b.block(0).samples.values)
    # array data views the mapping, 64-byte aligned
    assert a.block(0).values.ctypes.data % 64 == 0


def test_version_1_files_open_read_only_and_upgrade(tmp_path):
    with open(STORED / "expected.pickle", "rb") as f:
        expected = pickle.load(f)
    copy = tmp_path / "v1"
    copy.write_bytes((STORED / "v1-appended.bmds").read_bytes())
    old = Dataset(copy)
    assert old.version == 1 and old.fields == ["tensor"]
    with pytest.raises(blockmap.ValidationError, match=r"Dataset\.upgrade"):
        DatasetWriter(copy, append=True)
    with pytest.raises(blockmap.ValidationError, match=r"Dataset\.upgrade"):
        old.column("n_samples")
    assert copy.read_bytes() == (STORED / "v1-appended.bmds").read_bytes()
    dst = tmp_path / "v2"
    Dataset.upgrade(copy, dst)
    new = Dataset(dst)
    assert new.version == 4 and len(new) == 4
    for got, want in zip(new, expected["v1-appended.bmds"], strict=True):
        assert got == want
    assert new.column("n_samples").tolist() == [
        len(m.block(0).samples) for m in expected["v1-appended.bmds"]
    ]
    # appending works once upgraded
    with DatasetWriter(dst, append=True) as writer:
        writer.write(expected["v1-committed.bmds"][0])
    assert len(Dataset(dst)) == 5
    # a failed upgrade leaves dst as it was
    dst.write_bytes(b"kept")
    with pytest.raises(blockmap.BlockMapError):
        Dataset.upgrade(tmp_path / "missing", dst)
    assert dst.read_bytes() == b"kept"
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".bm-")]


def test_from_files_leaves_nothing_behind_when_an_input_is_missing(tmp_path, maps):
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        blockmap.save(folder / f"{i}.mts", maps[i])
    out = tmp_path / "out"
    out.write_bytes(b"kept")
    inputs = [folder / "0.mts", folder / "1.mts", folder / "missing.mts", folder / "2.mts"]
    with pytest.raises(blockmap.MissingFileError, match="missing.mts"):
        Dataset.from_files(inputs, out, overwrite=True)
    assert out.read_bytes() == b"kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out"]
    out.unlink()
    with pytest.raises(blockmap.MissingFileError):
        Dataset.from_files(inputs, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_dataloader_worker_returns_entries_of_fields(fielded, maps, method):
    DataLoader = pytest.importorskip("torch.utils.data").DataLoader

    ds = Dataset(fielded)
    loader = DataLoader(
        ds, batch_size=4, num_workers=1, collate_fn=list, multiprocessing_context=method
    )
    entries = [entry for batch in loader for entry in batch]
    assert [e._fields for e in entries] == [("system", "energy")] * len(maps)
    for i, entry in enumerate(entries):
        assert entry.system == maps[i]
        assert entry.energy == maps[-1 - i]


def test_a_damaged_entry_is_a_format_error_its_neighbours_read(tmp_path, maps):
    path = tmp_path / "damaged"
    blockmap.save_dataset(path, maps[:3])
    offset, _ = Dataset(path)._slot(1)
    data = bytearray(path.read_bytes())
    # the keys reference of entry 1's map (after the record header, the
    # description length, its n_samples and its field length) points far
    # beyond the file
    at = offset + 16 + 8 + 8 + 8
    data[at : at + 8] = (1 << 62).to_bytes(8, "little")
    path.write_bytes(bytes(data))
    ds = Dataset(path)
    with pytest.raises(blockmap.FormatError, match="entry 1"):
        ds[1]
    assert (ds[0] == maps[0]) and (ds[2] == maps[2])
    # its record header overwritten: the commit's row no longer matches
    data[offset : offset + 3] = b"xxx"
    path.write_bytes(bytes(data))
    with pytest.raises(blockmap.FormatError, match="entry 1"):
        Dataset(path)[1]


def test_field_names_that_are_not_identifiers(tmp_path, maps):
    path = tmp_path / "names"
    with DatasetWriter(path) as writer:
        writer.write(**{"energy": maps[0], "mtt::dipole": maps[1], "class": maps[2]})
    ds = Dataset(path)
    assert ds.fields == ["energy", "mtt::dipole", "class"]
    entry = ds[0]
    # the names kept, read as metatensor-learn's samples read them
    assert entry._fields == ("energy", "mtt::dipole", "class")
    assert (entry[1] == maps[1]) and (entry[2] == maps[2])
    assert (entry["mtt::dipole"] == maps[1]) and entry["class"] is entry[2]
    assert list(entry._asdict()) == ["energy", "mtt::dipole", "class"]
    assert repr(entry).startswith("Entry(energy=TensorMap") and "'mtt::dipole'=" in repr(entry)
    assert ds.field("mtt::dipole")[0] == maps[1]
    again = pickle.loads(pickle.dumps(entry))
    assert type(again) is type(entry) and (again["mtt::dipole"] == maps[1])
    # pickles made when entries reduced to dataset._make_entry still load
    old = pickle.loads(pickle.dumps(_OldEntry(entry._fields, tuple(entry))))
    assert type(old) is type(entry) and (old["mtt::dipole"] == maps[1])


class _OldEntry:
    """Pickles as an entry did before entries were blockmap._namedtuple's."""

    def __init__(self, fields, values):
        self.fields, self.values = fields, values

    def __reduce__(self):
        return blockmap.dataset._make_entry, (self.fields, self.values)


def test_threads_read_at_once(fielded, maps):
    import threading

    ds = Dataset(fielded)
    failures = []

    def read(start):
        try:
            for k in range(200):
                i = (start + k) % len(maps)
                entry = ds[i]
                assert entry.system == maps[i]
                assert entry.energy == maps[-1 - i]
        except Exception as error:  # noqa: BLE001 - reported below
            failures.append(error)

    threads = [threading.Thread(target=read, args=(s,)) for s in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    # the labels cache gave every thread the same shared labels
    a, b = ds[0].system, ds[7].system
    assert np.shares_memory(a.block(0).properties.values, b.block(0).properties.values)


FORK_WHILE_READING = """
import os, sys, threading
import blockmap

ds = blockmap.Dataset(sys.argv[1])
expected = [blockmap.save_buffer(ds[i].system).tobytes() for i in range(len(ds))]
stop = False

def reader():
    i = 0
    while not stop:
        ds[i % len(ds)]
        i += 1

thread = threading.Thread(target=reader)
thread.start()
failed = 0
for _ in range(20):
    pid = os.fork()
    if pid == 0:
        # the reader thread may have held the labels cache's lock: the
        # child takes it over instead of waiting for a thread it lacks
        good = all(
            blockmap.save_buffer(ds[i].system).tobytes() == expected[i] for i in range(len(ds))
        )
        os._exit(0 if good else 1)
    failed += os.waitpid(pid, 0)[1] != 0
stop = True
thread.join()
print(failed)
"""


def test_a_fork_while_a_thread_reads_reads_in_the_child(fielded):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", FORK_WHILE_READING, str(fielded)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,  # a hang guard, not a measure
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"]


def test_a_field_without_blocks_has_n_samples_0(tmp_path, maps):
    empty = blockmap.TensorMap(blockmap.Labels.empty(["k"]), [])
    path = tmp_path / "d"
    with DatasetWriter(path) as writer:
        writer.write(empty=empty, full=maps[0])
        writer.write(full=maps[1], empty=empty)
    ds = Dataset(path)
    assert ds.field("empty").column("n_samples").tolist() == [0, 0]
    assert ds.field("full").column("n_samples").tolist() == [
        len(m.block(0).samples) for m in maps[:2]
    ]
    assert len(ds[1].empty.keys) == 0 and (ds[1].full == maps[1])


def _rchar():
    # bytes read by read/pread calls of this process (page faults of a
    # mapping are not counted): deterministic, unlike read_bytes
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="/proc/self/io")
def test_open_reads_the_rows_and_columns_only_when_asked(tmp_path, maps):
    count = 600
    path = tmp_path / "many.bmds"
    with DatasetWriter(path) as writer:
        for i in range(count):
            writer.write(
                system=maps[i % 12],
                energy=maps[-1 - i % 12],
                columns={"n_atoms": i, "weight": 0.5 * i},
            )
    data = bytearray(path.read_bytes())
    end = len(data)
    commit_at = int.from_bytes(data[end - 24 : end - 16], "little")
    # COMMIT payload: count, schema offset, piece count, then the pieces
    # (one: one session), each naming its SEGMENT record: count, column
    # count, the rows, then the columns
    count_at, pieces_at = commit_at + 16, commit_at + 32
    assert int.from_bytes(data[count_at : count_at + 8], "little") == count
    assert int.from_bytes(data[pieces_at : pieces_at + 8], "little") == 1
    segment_at = int.from_bytes(data[pieces_at + 8 : pieces_at + 16], "little")
    assert data[segment_at : segment_at + 4] == b"BMr\x06"
    rows = 24 * count
    columns = 8 * count * 4  # n_atoms, weight, n_samples of both fields
    before = _rchar()
    ds = Dataset(path)
    read = _rchar() - before
    # the commit record's rows, plus the header, trailer, schema and the
    # bytes of /proc/self/io itself: never the 19 kB of columns
    assert rows <= read < rows + 2048, (read, rows, columns)
    before = _rchar()
    assert ds.column("n_atoms").tolist() == list(range(count))
    assert ds.field("energy").column("n_samples").shape == (count,)
    # the SEGMENT record is mapped: its columns read once, by page faults
    assert _rchar() - before < 2048

    # a value of the SEGMENT record's columns flipped: entries read,
    # columns refused
    length = int.from_bytes(data[segment_at + 8 : segment_at + 16], "little")
    assert length == 16 + rows + columns
    # the last column value (the rows come after the columns)
    data[segment_at + 16 + 16 + columns - 1] ^= 0x40
    damaged = tmp_path / "damaged.bmds"
    damaged.write_bytes(bytes(data))
    ds = Dataset(damaged)
    assert len(ds) == count
    for i in (0, count // 2, count - 1):
        assert ds[i].system == maps[i % 12]
        assert ds[i].energy == maps[-1 - i % 12]
    for read_column in (
        lambda: ds.column("n_samples"),
        lambda: ds.column("weight"),
        lambda: ds.field("energy").column("n_samples"),
    ):
        with pytest.raises(blockmap.FormatError, match=r"damaged\.bmds.*damaged SEGMENT"):
            read_column()


class _Level(enum.IntEnum):
    HIGH = 7


def _column_cases():
    """(value, what is stored) of the values a column takes: Python's
    numbers, numpy's scalars and 0-d arrays, torch's 0-d tensors, by
    value."""
    torch = pytest.importorskip("torch")
    return [
        (3, 3),
        (-(2**63), -(2**63)),
        (_Level.HIGH, 7),
        (np.int32(-4), -4),
        (np.uint8(200), 200),
        (np.uint64(2**63 - 1), 2**63 - 1),
        (np.array(5), 5),
        (np.array(6, dtype=np.int8), 6),
        (torch.tensor(8), 8),
        (torch.tensor(9, dtype=torch.int16), 9),
        (torch.tensor(10, dtype=torch.uint8), 10),
        (2.5, 2.5),
        (np.float32(1.5), 1.5),
        (np.float16(0.25), 0.25),
        (np.array(0.75), 0.75),
        (np.array(1.25, dtype=np.float32), 1.25),
        (torch.tensor(3.5), 3.5),
        (torch.tensor(0.5, dtype=torch.float16), 0.5),
        (torch.tensor(4.5, dtype=torch.float64, requires_grad=True), 4.5),
    ]


def test_column_values_are_numbers_of_any_library(tmp_path, maps):
    cases = _column_cases()
    # one column per kind: ints in an int column, floats in a float one
    ints = [(v, s) for v, s in cases if isinstance(s, int)]
    floats = [(v, s) for v, s in cases if isinstance(s, float)]
    path = tmp_path / "ints"
    with DatasetWriter(path) as writer:
        for i, (value, _) in enumerate(ints):
            writer.write(maps[i % 12], columns={"n": value})
    column = Dataset(path).column("n")
    assert column.dtype == np.int64 and column.tolist() == [s for _, s in ints]
    path = tmp_path / "floats"
    with DatasetWriter(path) as writer:
        for i, (value, _) in enumerate(floats):
            writer.write(maps[i % 12], columns={"w": value})
        # an int of any library in a float column is float(n)
        writer.write(maps[0], columns={"w": np.int16(3)})
    column = Dataset(path).column("w")
    assert column.dtype == np.float64
    assert column.tolist() == [s for _, s in floats] + [3.0]


def test_column_values_that_are_no_number_are_refused_naming_the_column(tmp_path, maps):
    torch = pytest.importorskip("torch")
    bools = [True, np.True_, np.array(False), torch.tensor(True), torch.tensor(False)]
    others = [
        ("3", "str"),
        (1 + 2j, "complex"),
        (None, "NoneType"),
        (decimal.Decimal("1.5"), "Decimal"),
        (object(), "object"),
        (np.complex64(1), "complex64"),
        (np.str_("x"), "<U1"),
        (np.datetime64("2020-01-01"), "datetime64"),
        (np.array([1, 2]), "shape [2]"),
        (np.array([3]), "shape [1]"),
        (np.array(["a"])[0], "<U1"),
        (torch.tensor([3]), "shape [1]"),
        (torch.tensor(1 + 1j), "complex"),
        ([3], "list"),
    ]
    path = tmp_path / "d"
    with DatasetWriter(path) as writer:
        writer.write(maps[0], columns={"n": 1})
        for value in bools:
            with pytest.raises(blockmap.BlockMapTypeError, match=r"column 'n'.*bool"):
                writer.write(maps[1], columns={"n": value})
        for value, named in others:
            with pytest.raises(blockmap.BlockMapTypeError, match="column 'n'") as raised:
                writer.write(maps[1], columns={"n": value})
            assert named in str(raised.value)
        for value in (2**63, -(2**63) - 1, np.uint64(2**63)):
            with pytest.raises(blockmap.ValidationError, match=r"column 'n'.*outside int64"):
                writer.write(maps[1], columns={"n": value})
    # the refused writes wrote nothing
    assert Dataset(path).column("n").tolist() == [1]
