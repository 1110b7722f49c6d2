"""metatomic's systems as TensorMaps (blockmap._systems, docs/format.md
"Systems as TensorMaps"): system.mta files written by metatrain's
DiskDatasetWriter (through metatomic's own save) convert to the documented
map and back to metatomic.torch.System bit for bit, neighbor lists (as
metatrain computes them) and extra data included in the maps of
tensormaps_from_mta; whatever a conversion does not encode is refused,
never left out; hostile zips are FormatErrors in bounded memory."""

import io
import json
import re
import struct
import sys
import textwrap
import zipfile

import numpy as np
import pytest

import blockmap
from blockmap._systems import (
    CELL,
    POSITIONS,
    system_from_tensormap,
    system_from_tensormaps,
    tensormap_from_mta,
    tensormap_from_system,
    tensormaps_from_mta,
    tensormaps_from_system,
)
from blockmap.metatensor_torch import from_metatensor_torch, to_metatensor_torch
from helpers import TESTS_DIR
from helpers.child import run_python
from helpers.memory import PEAK

# importorskip imports with the modules' own warnings silenced (torch's
# deprecation of torch.jit.interface, which metatensor-learn and metatomic
# use); `make test` fails on a skip, and installs all of them
metatensor = pytest.importorskip("metatensor")
torch = pytest.importorskip("torch")
mta = pytest.importorskip("metatomic.torch")
mtt = pytest.importorskip("metatensor.torch")
writers = pytest.importorskip("metatrain.utils.data.writers")
neighbors = pytest.importorskip("metatrain.utils.neighbor_lists")
TorchLabels, TorchBlock, TorchMap = mtt.Labels, mtt.TensorBlock, mtt.TensorMap

ROOT = TESTS_DIR.parent.parent


def _system(n, periodic, dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    positions = torch.rand((n, 3), generator=generator, dtype=torch.float64).to(dtype) * 7
    pbc = torch.tensor(periodic)
    cell = torch.tensor([[6.5, 0.0, 0.0], [1.25, 7.0, 0.0], [0.5, 0.75, 8.0]], dtype=dtype)
    cell[~pbc] = 0
    types = torch.randint(1, 119, (n,), generator=generator, dtype=torch.int32)
    return mta.System(types=types, positions=positions, cell=cell, pbc=pbc)


def _bits(tensor):
    return tensor.detach().contiguous().numpy().tobytes()


def _same_system(a, b):
    assert a.positions.dtype == b.positions.dtype and a.cell.dtype == b.cell.dtype
    assert a.types.dtype == b.types.dtype == torch.int32
    assert a.pbc.dtype == b.pbc.dtype == torch.bool
    for name in ("positions", "cell", "types", "pbc"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape, name
        assert _bits(x) == _bits(y), name


SYSTEMS = [
    _system(5, [True, True, True], seed=1),
    _system(3, [False, False, False], seed=2),
    _system(4, [True, False, True], seed=3),
    _system(0, [False, False, False], seed=4),
    # float32 systems are written as float64 by metatomic's save
    _system(6, [True, True, True], dtype=torch.float32, seed=5),
]


@pytest.fixture(scope="module")
def diskdataset(tmp_path_factory):
    """The system.mta members of a DiskDataset written by metatrain."""
    path = tmp_path_factory.mktemp("systems") / "dataset.zip"
    writer = writers.DiskDatasetWriter(path)
    for system in SYSTEMS:
        energy = TorchMap(
            TorchLabels.single(),
            [
                TorchBlock(
                    values=torch.zeros((1, 1), dtype=torch.float64),
                    samples=TorchLabels(["system"], torch.tensor([[0]], dtype=torch.int32)),
                    components=[],
                    properties=TorchLabels.range("energy", 1),
                )
            ],
        )
        writer.write([system], {"energy": energy})
    writer.finish()
    with zipfile.ZipFile(path) as archive:
        return [archive.read(f"{i}/system.mta") for i in range(len(SYSTEMS))]


def test_diskdataset_systems_convert_and_come_back_bit_for_bit(diskdataset):
    for system, data in zip(SYSTEMS, diskdataset, strict=True):
        stored = mta.load_system_buffer(torch.frombuffer(bytearray(data), dtype=torch.uint8))
        tensor = tensormap_from_mta(data)
        # the documented encoding
        assert tensor.keys.names == ["array"]
        assert tensor.keys.values.tolist() == [[POSITIONS], [CELL]]
        positions, cell = tensor.block(array=POSITIONS), tensor.block(array=CELL)
        for block in (positions, cell):
            assert block.samples.names == ["atom_or_vector", "type_or_pbc"]
            assert [c.names for c in block.components] == [["xyz"]]
            assert block.components[0].values.tolist() == [[0], [1], [2]]
            assert block.properties.names == ["_"] and len(block.properties) == 1
            assert block.values.dtype == np.float64
        n = len(system)
        assert positions.values.shape == (n, 3, 1) and cell.values.shape == (3, 3, 1)
        assert positions.samples.values.tolist() == [
            [i, int(t)] for i, t in enumerate(system.types)
        ]
        assert cell.samples.values.tolist() == [[i, int(p)] for i, p in enumerate(system.pbc)]
        assert positions.values[:, :, 0].tobytes() == _bits(stored.positions)
        assert cell.values[:, :, 0].tobytes() == _bits(stored.cell)
        back = system_from_tensormap(tensor)
        _same_system(back, stored)
        # what metatrain stored is the system given, in float64
        _same_system(back, system.to(torch.float64))
        # the same map from the System object itself
        assert blockmap.equal(tensormap_from_system(stored), tensor)
        # a valid metatensor map: metatensor-core reads its .mts
        core = metatensor.io.load_buffer(blockmap.save_buffer(tensor))
        assert core.keys.names == ["array"] and len(core) == 2


def test_system_objects_keep_their_dtype(diskdataset):
    for system in SYSTEMS + [s.to(torch.float32) for s in SYSTEMS[:2]]:
        tensor = tensormap_from_system(system)
        assert tensor.block(array=POSITIONS).values.dtype == system.positions.numpy().dtype
        _same_system(system_from_tensormap(tensor), system)
        # the values are a copy, not the system's memory
        assert not np.shares_memory(tensor.block(array=POSITIONS).values, system.positions.numpy())
    tensor = tensormap_from_mta(diskdataset[0])
    as32 = system_from_tensormap(tensor, torch.float32)
    assert as32.positions.dtype == as32.cell.dtype == torch.float32
    _same_system(as32, SYSTEMS[0].to(torch.float32))
    # a float32 system.mta (not what metatomic writes, which it reads all the
    # same) keeps its dtype
    data = _mta(_members(SYSTEMS[4]))
    assert tensormap_from_mta(data).block(array=CELL).values.dtype == np.float32
    _same_system(system_from_tensormap(tensormap_from_mta(data)), SYSTEMS[4])
    # two systems' maps join into one batch (a "tensor" sample dimension)
    joined = blockmap.join([tensormap_from_mta(d) for d in diskdataset[:2]], axis="samples")
    assert joined.block(array=POSITIONS).values.shape == (8, 3, 1)
    # torch-backed maps convert too
    torched = from_metatensor_torch(to_metatensor_torch(tensor))
    _same_system(system_from_tensormap(torched), SYSTEMS[0])


def _with_neighbors_and_data(system, data):
    system = mta.System(
        types=system.types, positions=system.positions, cell=system.cell, pbc=system.pbc
    )
    options = mta.NeighborListOptions(cutoff=3.0, full_list=True, strict=True)
    samples = ["first_atom", "second_atom", "cell_shift_a", "cell_shift_b", "cell_shift_c"]
    pairs = TorchBlock(
        values=torch.zeros((1, 3, 1), dtype=torch.float64),
        samples=TorchLabels(samples, torch.tensor([[0, 1, 0, 0, 0]], dtype=torch.int32)),
        components=[TorchLabels.range("xyz", 3)],
        properties=TorchLabels.range("distance", 1),
    )
    system.add_neighbor_list(options, pairs)
    if data:
        charge = TorchMap(
            TorchLabels.single(),
            [
                TorchBlock(
                    values=torch.zeros((1, 1), dtype=torch.float64),
                    samples=TorchLabels.range("system", 1),
                    components=[],
                    properties=TorchLabels.range("charge", 1),
                )
            ],
        )
        system.add_data("charge", charge)
    return system


def _saved(system):
    stream = io.BytesIO()
    mta.save(stream, system)
    return stream.getvalue()


def test_neighbor_lists_and_extra_data_are_refused_not_left_out():
    with_pairs = _with_neighbors_and_data(SYSTEMS[0], data=False)
    data = _saved(with_pairs)
    with pytest.raises(blockmap.FormatError, match=r"neighbor lists \('pairs/0/"):
        tensormap_from_mta(data)
    with pytest.raises(blockmap.ValidationError, match="neighbor lists"):
        tensormap_from_system(with_pairs)
    # dropped on request only
    _same_system(
        system_from_tensormap(tensormap_from_mta(data, drop_neighbor_lists=True)), SYSTEMS[0]
    )
    _same_system(
        system_from_tensormap(tensormap_from_system(with_pairs, drop_neighbor_lists=True)),
        SYSTEMS[0],
    )
    with_data = _with_neighbors_and_data(SYSTEMS[0], data=True)
    with pytest.raises(blockmap.FormatError, match="extra data .'data/charge.mts'"):
        tensormap_from_mta(_saved(with_data), drop_neighbor_lists=True)
    with pytest.raises(blockmap.ValidationError, match="extra data .charge"):
        tensormap_from_system(with_data, drop_neighbor_lists=True)


def _npy(array):
    stream = io.BytesIO()
    np.save(stream, array)
    return stream.getvalue()


def _members(system):
    return {
        "positions.npy": _npy(system.positions.numpy()),
        "cell.npy": _npy(system.cell.numpy()),
        "types.npy": _npy(system.types.numpy()),
        "pbc.npy": _npy(system.pbc.numpy()),
    }


def _mta(members, compression=zipfile.ZIP_STORED):
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w", compression=compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return stream.getvalue()


def _changed(name, data):
    members = _members(SYSTEMS[0])
    if data is None:
        del members[name]
    else:
        members[name] = data
    return _mta(members)


def test_what_cannot_be_converted_is_a_format_error(diskdataset):
    pbc_byte = bytearray(_npy(np.array([True, False, True])))
    pbc_byte[-1] = 2
    cases = [
        (
            _changed("positions.npy", _npy(np.zeros((5, 4)))),
            r"positions must have the shape \(n, 3\)",
        ),
        (
            _changed("positions.npy", _npy(np.zeros((5, 3), dtype=np.int32))),
            "positions must be float",
        ),
        (_changed("cell.npy", _npy(np.zeros((3, 3), dtype=np.float32))), "dtype of the positions"),
        (_changed("cell.npy", _npy(np.zeros(9))), r"cell must have the shape \(3, 3\)"),
        (
            _changed("types.npy", _npy(np.zeros(4, dtype=np.int32))),
            r"types must have the shape \(5,\)",
        ),
        (_changed("types.npy", _npy(np.zeros(5))), "types must be int32"),
        (_changed("types.npy", _npy(np.full(5, 2**40))), "outside int32"),
        (_changed("pbc.npy", _npy(np.ones(3, dtype=np.int64))), "pbc must be 3 booleans"),
        (_changed("pbc.npy", bytes(pbc_byte)), "other than 0 and 1"),
        (_changed("pbc.npy", _npy(np.zeros(3, dtype=bool))), "cell vector 0 is not zero"),
        (_changed("types.npy", None), "'types.npy': no such member"),
        # a member metatomic's format does not have (a later format's
        # version, say) is refused, not skipped
        (_changed("version.json", b'{"version": 2}'), r"members 'version\.json' are not part"),
        (_changed("pairs/0/options.txt", b"{}"), "'pairs/0/options.txt' are not part"),
        (_changed("positions.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", 60000) + b"{"), "npy"),
        (b"", "zip"),
        (b"not a zip" * 20, "zip"),
    ]
    for data, match in cases:
        with pytest.raises(blockmap.FormatError, match=match):
            tensormap_from_mta(data)
    # every truncation of a real system.mta (the last member is itself an
    # archive, whose end record a truncated zip exposes)
    data = _saved(_with_neighbors_and_data(SYSTEMS[0], data=True))
    assert len(tensormaps_from_mta(data)) == 3
    for end in range(len(data)):
        with pytest.raises(blockmap.FormatError):
            tensormaps_from_mta(data[:end])
    # a zip cut right after a last member that is itself a system.mta
    # would read as that member (the zip reader refuses an archive lying
    # inside an entry of an incomplete one)
    inner = _saved(SYSTEMS[1])
    outer = _mta({**_members(SYSTEMS[0]), "data/inner.mts": inner})
    cut = outer[: outer.index(inner) + len(inner)]
    assert system_from_tensormap(tensormap_from_mta(inner)).positions.shape == (3, 3)
    with pytest.raises(blockmap.FormatError, match="inside an entry of another archive"):
        tensormap_from_mta(cut)
    # after other bytes: a system.mta starts at its first byte
    with pytest.raises(blockmap.FormatError, match="no entry starts at the beginning"):
        tensormap_from_mta(b"#!" + inner)
    # a corrupted payload fails its CRC
    corrupt = bytearray(diskdataset[0])
    corrupt[200] ^= 0xFF
    with pytest.raises(blockmap.FormatError):
        tensormap_from_mta(bytes(corrupt))
    with pytest.raises(blockmap.BlockMapTypeError):
        tensormap_from_mta("positions.npy")


def _bomb(path, rows=12 << 20):
    """A system.mta whose positions declare ``rows`` x 3 float64, deflated."""
    header = f"{{'descr': '<f8', 'fortran_order': False, 'shape': ({rows}, 3), }}"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    piece = bytes(1 << 20)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("positions.npy", "w", force_zip64=True) as member:
            member.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
            for _ in range(rows * 24 // len(piece)):
                member.write(piece)
        for name, data in list(_members(SYSTEMS[0]).items())[1:]:
            archive.writestr(name, data)


CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path[:0] = [sys.argv[1]]
    import blockmap
    from blockmap._systems import tensormap_from_mta


    data = open(sys.argv[2], "rb").read()
    reset_peak()
    before = peak_bytes()
    try:
        tensormap_from_mta(data)
        outcome = "converted"
    except blockmap.BlockMapError as error:
        outcome = type(error).__name__ + ": " + str(error)
    print(json.dumps({"growth": peak_bytes() - before, "outcome": outcome}))
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/status")
def test_a_zip_bomb_is_refused_in_bounded_memory(tmp_path):
    bomb = tmp_path / "system.mta"
    _bomb(bomb)
    size = bomb.stat().st_size
    assert size < 1_000_000
    result = run_python(PEAK + CHILD, str(ROOT / "python"), str(bomb), timeout=300)
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    assert measured["outcome"].startswith("FormatError"), measured
    assert "zip bomb" in measured["outcome"]
    # the positions declare 288 MiB; the reader may take 8 times the zip's
    # size and 16 MiB, and refuses before allocating
    assert measured["growth"] <= 12 * size + 16_000_000, measured


def test_maps_that_are_not_systems_are_refused():
    tensor = tensormap_from_system(SYSTEMS[0])
    with pytest.raises(blockmap.BlockMapTypeError):
        system_from_tensormap(SYSTEMS[0])
    with pytest.raises(blockmap.BlockMapTypeError):
        tensormap_from_system(tensor)
    with pytest.raises(blockmap.BlockMapTypeError):
        system_from_tensormap(tensor, "float32")
    with pytest.raises(blockmap.ValidationError, match="dtype must be torch.float16"):
        system_from_tensormap(tensor, torch.int32)
    positions, cell = tensor.block(array=POSITIONS), tensor.block(array=CELL)

    def block(values, samples, like):
        return blockmap.TensorBlock(
            values, blockmap.Labels(like.samples.names, samples), like.components, like.properties
        )

    def pair(first, second):
        return blockmap.TensorMap(
            blockmap.Labels(["array"], np.array([[0], [1]], dtype=np.int32)), [first, second]
        )

    cell_samples = cell.samples.values.copy()
    open_cell = cell_samples.copy()
    open_cell[:, 1] = 0
    two_pbc = cell_samples.copy()
    two_pbc[0, 1] = 2
    renumbered = positions.samples.values.copy()
    renumbered[:, 0] += 1
    cases = [
        (blockmap.TensorMap(blockmap.Labels.single(), [positions]), "keys must be 'array'"),
        (pair(cell, positions), "has 5 rows, not 3"),
        (pair(positions, block(cell.values[:2], cell_samples[:2], cell)), "has 2 rows, not 3"),
        (pair(positions, block(cell.values, two_pbc, cell)), "0 or 1"),
        (pair(positions, block(cell.values, open_cell, cell)), "not periodic"),
        (pair(block(positions.values, renumbered, positions), cell), "numbered 0, 1"),
    ]
    for bad, match in cases:
        with pytest.raises(blockmap.ValidationError, match=match):
            system_from_tensormap(bad)


def _same_neighbors_and_data(a, b):
    assert a.known_neighbor_lists() == b.known_neighbor_lists()
    for options in a.known_neighbor_lists():
        x, y = a.get_neighbor_list(options), b.get_neighbor_list(options)
        assert _bits(x.values) == _bits(y.values)
        assert _bits(x.samples.values) == _bits(y.samples.values)
        assert x.samples.names == y.samples.names and x.properties.names == y.properties.names
    assert a.known_data() == b.known_data()
    for name in a.known_data():
        assert mtt.equal(a.get_data(name), b.get_data(name))


def test_neighbor_lists_and_extra_data_convert_as_maps_of_their_own(tmp_path):
    """A DiskDataset entry as `mtt eval` writes it: the neighbor lists the
    model asked for, computed by metatrain, stored with the system."""
    requested = [
        mta.NeighborListOptions(cutoff=3.5, full_list=True, strict=True, requestor="model"),
        mta.NeighborListOptions(cutoff=2.25, full_list=False, strict=False),
    ]
    requested[0].add_requestor("other")
    requested[0].length_unit = "angstrom"
    systems = [neighbors.get_system_with_neighbor_lists(SYSTEMS[i], requested) for i in (0, 2)]
    path = tmp_path / "eval.zip"
    writer = writers.DiskDatasetWriter(path)
    for system in systems:
        writer.write([system], {})
    writer.finish()
    with zipfile.ZipFile(path) as archive:
        stored = [archive.read(f"{i}/system.mta") for i in range(len(systems))]
    # and one with extra data, through metatomic's save
    stored.append(_saved(_with_neighbors_and_data(SYSTEMS[1], data=True)))
    for data in stored:
        loaded = mta.load_system_buffer(torch.frombuffer(bytearray(data), dtype=torch.uint8))
        maps = tensormaps_from_mta(data)
        names = ["system"] + [f"pairs/{i}" for i in range(len(loaded.known_neighbor_lists()))]
        assert list(maps) == names + [f"data/{name}" for name in loaded.known_data()]
        if not loaded.known_data():
            assert blockmap.equal(
                maps["system"], tensormap_from_mta(data, drop_neighbor_lists=True)
            )
        back = system_from_tensormaps(maps)
        _same_system(back, loaded)
        _same_neighbors_and_data(back, loaded)
        # the same maps from the System object
        again = tensormaps_from_system(loaded)
        assert list(again) == list(maps)
        for name in maps:
            assert blockmap.equal(again[name], maps[name]), name
            assert again[name].info() == maps[name].info(), name
    # metatomic keeps the lists sorted (by cutoff): the 3.5 one is second
    maps = tensormaps_from_mta(stored[0])
    assert maps["pairs/1"].info() == {
        "cutoff": "3.5",
        "full_list": "true",
        "strict": "true",
        "length_unit": "angstrom",
        "requestors": '["model", "other"]',
    }
    assert maps["pairs/0"].info()["cutoff"] == "2.25"
    # neighbor lists of metatrain's own computation, kept as stored
    pairs = maps["pairs/1"].block(0)
    reference = systems[0].get_neighbor_list(requested[0])
    assert pairs.values.tobytes() == _bits(reference.values)
    assert len(pairs.samples) > 0


def test_neighbor_list_members_that_cannot_be_converted_are_format_errors():
    members = _members(SYSTEMS[0])
    saved = zipfile.ZipFile(io.BytesIO(_saved(_with_neighbors_and_data(SYSTEMS[0], data=True))))
    options = saved.read("pairs/0/options.json")
    pairs = saved.read("pairs/0/data.mts")
    float32_pairs = blockmap.save_buffer(blockmap.load_block_buffer(pairs).to(dtype=np.float32))
    cases = [
        ({"pairs/0/options.json": options}, "neighbor list 0 has no data.mts"),
        ({"pairs/3/data.mts": pairs}, "neighbor list 3 has no options.json"),
        ({"pairs/0/options.json": b"{not json", "pairs/0/data.mts": pairs}, "not JSON"),
        # 200,000 nested brackets: json's recursion limit, not a bare RecursionError
        ({"pairs/0/options.json": b"[" * 200_000, "pairs/0/data.mts": pairs}, "not JSON"),
        (
            {
                "pairs/0/options.json": options.replace(b'"strict"', b'"future"'),
                "pairs/0/data.mts": pairs,
            },
            "fields .'future'. blockmap does not know",
        ),
        (
            {"pairs/0/options.json": options.replace(b"true", b"1"), "pairs/0/data.mts": pairs},
            "booleans",
        ),
        (
            {"pairs/0/options.json": options, "pairs/0/data.mts": b"not an archive"},
            "pairs/0/data.mts",
        ),
        # what metatomic writes for a float32 system, and cannot load back
        (
            {"pairs/0/options.json": options, "pairs/0/data.mts": float32_pairs},
            "not a neighbor list",
        ),
        ({"data/charge.mts": b"PK\x05\x06" + bytes(18)}, "data/charge.mts"),
    ]
    # a cutoff metatomic takes and no list has: NaN, infinite, negative, 0
    for cutoff in (float("nan"), float("inf"), -3.0, 0.0):
        bits = int.from_bytes(struct.pack("<d", cutoff), "little")
        crafted = re.sub(rb'"cutoff": ?[0-9]+', f'"cutoff": {bits}'.encode(), options)
        assert crafted != options
        cases.append(
            (
                {"pairs/0/options.json": crafted, "pairs/0/data.mts": pairs},
                "not a finite positive length",
            )
        )
    # pairs of atoms the system does not have (metatomic takes them)
    stored = blockmap.load_block_buffer(pairs)
    n_atoms = len(SYSTEMS[0])
    for row, match in (
        ([0, n_atoms, 0, 0, 0], f"names atom {n_atoms} as its second_atom, and the system has"),
        ([-1, 1, 0, 0, 0], "names atom -1 as its first_atom"),
    ):
        outside = blockmap.TensorBlock(
            stored.values,
            blockmap.Labels(stored.samples.names, np.array([row], dtype=np.int32)),
            stored.components,
            stored.properties,
        )
        cases.append(
            (
                {"pairs/0/options.json": options, "pairs/0/data.mts": _block_buffer(outside)},
                match,
            )
        )
    for extra, match in cases:
        with pytest.raises(blockmap.FormatError, match=match):
            tensormaps_from_mta(_mta({**members, **extra}))


def _block_buffer(block):
    return bytes(blockmap.save_buffer(block))


def test_maps_that_are_not_a_system_with_neighbors_are_refused():
    maps = tensormaps_from_system(_with_neighbors_and_data(SYSTEMS[0], data=True))
    system = maps["system"]
    with pytest.raises(blockmap.BlockMapTypeError):
        system_from_tensormaps([system])
    with pytest.raises(blockmap.BlockMapTypeError):
        system_from_tensormaps({"system": SYSTEMS[0]})
    with pytest.raises(blockmap.BlockMapTypeError):
        tensormaps_from_system(system)
    pairs = maps["pairs/0"]
    bad_flag = pairs.copy()
    bad_flag.set_info("full_list", '"yes"')
    bad_json = pairs.copy()
    bad_json.set_info("requestors", "[")
    deep_json = pairs.copy()
    deep_json.set_info("requestors", "[" * 200_000)
    cases = [
        ({"pairs/0": pairs}, "one named 'system'"),
        ({"system": system, "neighbors": pairs}, "'neighbors' is not a map of a system"),
        ({"system": system, "pairs/0": system}, "one block"),
        ({"system": system, "pairs/0": bad_flag}, "full_list and strict"),
        ({"system": system, "pairs/0": bad_json}, "JSONDecodeError"),
        ({"system": system, "pairs/0": deep_json}, "RecursionError"),
        ({"system": system, "pairs/0": maps["data/charge"]}, "must hold cutoff"),
        # metatomic's own refusal (a neighbor list with the wrong samples)
        ({"system": system, "pairs/0": _renamed(pairs)}, "metatomic refuses"),
    ]
    # options metatomic takes and no list has, pairs of atoms the system
    # does not have (metatomic takes them too)
    for cutoff in ("nan", "inf", "-1.0", "0.0", "1e400"):
        crafted = pairs.copy()
        crafted.set_info("cutoff", cutoff)
        cases.append(({"system": system, "pairs/0": crafted}, "finite positive float cutoff"))
    block = pairs.block(0)
    outside = blockmap.TensorMap(
        pairs.keys,
        [
            blockmap.TensorBlock(
                block.values,
                blockmap.Labels(block.samples.names, np.array([[7, 0, 0, 0, 0]], dtype=np.int32)),
                block.components,
                block.properties,
            )
        ],
    )
    for key, value in pairs.info().items():
        outside.set_info(key, value)
    cases.append(({"system": system, "pairs/0": outside}, "names atom 7 as its first_atom"))
    for bad, match in cases:
        with pytest.raises(blockmap.ValidationError, match=match):
            system_from_tensormaps(bad)
    _same_neighbors_and_data(
        system_from_tensormaps(maps, torch.float32),
        _with_neighbors_and_data(SYSTEMS[0], data=True).to(torch.float32),
    )


def _renamed(pairs):
    block = pairs.block(0)
    samples = blockmap.Labels(["a", "b", "c", "d", "e"], block.samples.values)
    renamed = blockmap.TensorMap(
        pairs.keys,
        [blockmap.TensorBlock(block.values, samples, block.components, block.properties)],
    )
    for key, value in pairs.info().items():
        renamed.set_info(key, value)
    return renamed


def test_from_diskdataset_keeps_the_neighbor_lists_as_fields(tmp_path):
    """`Dataset.from_diskdataset` of a zip whose systems carry neighbor
    lists (as `mtt eval` writes them): every list is a field of its own,
    the system's field comes back to the same System."""
    requested = [mta.NeighborListOptions(cutoff=3.5, full_list=True, strict=True)]
    systems = [neighbors.get_system_with_neighbor_lists(SYSTEMS[i], requested) for i in (0, 2)]
    path = tmp_path / "eval.zip"
    writer = writers.DiskDatasetWriter(path)
    for system in systems:
        writer.write([system], {})
    writer.finish()
    dataset = blockmap.Dataset.from_diskdataset(path, tmp_path / "converted")
    with zipfile.ZipFile(path) as archive:
        for i in range(len(systems)):
            maps = tensormaps_from_mta(archive.read(f"{i}/system.mta"))
            lists = [name for name in maps if name.startswith("pairs/")]
            assert lists, "the systems carry neighbor lists"
            assert dataset.fields == ["system"] + [f"system/{name}" for name in lists]
            entry = {"system": dataset.field("system")[i]}
            for name in lists:
                entry[name] = dataset.field(f"system/{name}")[i]
                assert blockmap.equal(entry[name], maps[name])
                assert entry[name].info() == maps[name].info()
            assert blockmap.equal(entry["system"], maps["system"])
            back = system_from_tensormaps(entry)
            _same_system(back, systems[i])
            _same_neighbors_and_data(back, systems[i])
    # target="system" keeps the lists with it
    only = blockmap.Dataset.from_diskdataset(path, tmp_path / "only", target="system")
    assert only.fields == dataset.fields
