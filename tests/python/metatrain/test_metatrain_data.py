"""blockmap.metatrain's data side against metatrain's own, in this process:
convert (from the DiskDataset zip and from the xyz options), the dataset
contract (items, target info, atom counts, Subset, the atom-count sampler),
the batch path (joins equal metatensor-torch's, batches equal metatrain's
CollateFn + unpack_batch, with 0 and 2 DataLoader workers), the stored
neighbour lists, and the errors."""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import blockmap
import blockmap.metatrain
from blockmap.exceptions import FormatError, MissingFileError, ValidationError

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.:FutureWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning"),
    # metatrain 2026.4.1 on omegaconf's newer API
    pytest.mark.filterwarnings("ignore:register_new_resolver:UserWarning"),
]
torch = pytest.importorskip("torch")
pytest.importorskip("metatrain")

import metatensor.torch as mtt  # noqa: E402
from metatomic.torch import NeighborListOptions  # noqa: E402
from metatrain.utils.data.dataset import DiskDataset  # noqa: E402

from blockmap.metatrain import _batch, _neighbors  # noqa: E402
from blockmap.metatrain._dataset import MetatrainDataset  # noqa: E402

TARGETS = {"energy": {"key": "energy"}}
OPTIONS = NeighborListOptions(cutoff=5.0, full_list=True, strict=True)


@pytest.fixture(scope="module")
def patched():
    blockmap.metatrain.install()
    yield
    blockmap.metatrain.uninstall()


@pytest.fixture(scope="module")
def disk(tiny):
    return DiskDataset(tiny / "data.zip", fields=["energy"])


@pytest.fixture(scope="module")
def ours(tiny):
    return MetatrainDataset(tiny / "zip.bmdata", fields=TARGETS)


def assert_systems_equal(a, b):
    assert torch.equal(a.positions, b.positions) and a.positions.dtype == b.positions.dtype
    assert torch.equal(a.types, b.types) and a.types.dtype == b.types.dtype
    assert torch.equal(a.cell, b.cell) and torch.equal(a.pbc, b.pbc)
    assert a.known_neighbor_lists() == b.known_neighbor_lists()
    for options in a.known_neighbor_lists():
        x, y = a.get_neighbor_list(options), b.get_neighbor_list(options)
        assert torch.equal(x.values, y.values) and x.samples == y.samples
    assert a.known_data() == b.known_data()


def assert_maps_equal(a, b):
    assert a.keys == b.keys
    for x, y in zip(a.blocks(), b.blocks(), strict=True):
        assert x.values.dtype == y.values.dtype and torch.equal(x.values, y.values)
        assert x.samples == y.samples and x.properties == y.properties
        assert x.components == y.components
        assert x.gradients_list() == y.gradients_list()
        for parameter in x.gradients_list():
            gx, gy = x.gradient(parameter), y.gradient(parameter)
            assert gx.samples == gy.samples and torch.equal(gx.values, gy.values)


# ---------------------------------------------------------------- convert


def test_both_conversions_hold_the_zip_entries(tiny, disk):
    from_zip = blockmap.Dataset(tiny / "zip.bmdata")
    from_xyz = blockmap.Dataset(tiny / "xyz.bmdata")
    assert from_zip.fields == from_xyz.fields == ["system", "energy"]
    counts = disk.get_all_atom_counts()
    np.testing.assert_array_equal(from_zip.column("n_atoms"), counts)
    np.testing.assert_array_equal(from_xyz.column("n_atoms"), counts)
    for i in range(len(disk)):
        for field in ("system", "energy"):
            assert blockmap.equal(getattr(from_zip[i], field), getattr(from_xyz[i], field))
    gradient = from_xyz[3].energy.block().gradient("positions")
    assert list(gradient.samples.names) == ["sample", "atom"]
    assert list(from_xyz[3].energy.block().samples.values[:, 0]) == [3]


def test_from_diskdataset_writes_what_convert_writes(tiny, disk, tmp_path):
    """Dataset.from_diskdataset and convert of a zip write the same fields
    and columns (the atom counts derived as the systems are written, equal
    to metatrain's own), so convert writes the zip once; without the
    system field there is no atom count."""
    direct = blockmap.Dataset.from_diskdataset(tiny / "data.zip", tmp_path / "direct.bmdata")
    converted = blockmap.Dataset(tiny / "zip.bmdata")
    assert direct.fields == converted.fields == ["system", "energy"]
    assert direct.columns == converted.columns == ["n_atoms", "n_samples"]
    np.testing.assert_array_equal(direct.column("n_atoms"), disk.get_all_atom_counts())
    np.testing.assert_array_equal(direct.column("n_atoms"), converted.column("n_atoms"))
    for i in (0, 17, 39):
        for name in direct.fields:
            assert blockmap.equal(getattr(direct[i], name), getattr(converted[i], name))
    single = blockmap.Dataset.from_diskdataset(
        tiny / "data.zip", tmp_path / "single.bmdata", target="system"
    )
    np.testing.assert_array_equal(single.column("n_atoms"), disk.get_all_atom_counts())
    energy = blockmap.Dataset.from_diskdataset(
        tiny / "data.zip", tmp_path / "energy.bmdata", target="energy"
    )
    assert energy.columns == ["n_samples"]


def test_convert_errors_and_nothing_half_written(tiny, tmp_path):
    with pytest.raises(MissingFileError, match="no such file"):
        blockmap.metatrain.convert(tmp_path / "absent.zip", tmp_path / "a.bmdata")
    not_disk = tmp_path / "maps.zip"
    import zipfile

    with zipfile.ZipFile(not_disk, "w") as archive:
        archive.writestr("hello.txt", "not a dataset")
    with pytest.raises(FormatError, match="not a DiskDataset"):
        blockmap.metatrain.convert(not_disk, tmp_path / "a.bmdata")
    empty = tmp_path / "empty.yaml"
    for text, error, message in (
        ("seed: 1\n", ValidationError, "no training_set"),
        (
            "training_set:\n  targets:\n    energy:\n      key: energy\n",
            ValidationError,
            "names no systems",
        ),
        ("training_set: 0.5\n", ValidationError, "names no files"),
        ("- a list\n", ValidationError, "no training_set"),
        ("training_set: [unclosed\n", FormatError, "not an options file"),
    ):
        empty.write_text(text)
        with pytest.raises(error, match=message):
            blockmap.metatrain.convert(empty, tmp_path / "a.bmdata")
    with pytest.raises(ValidationError, match="end in '.bmdata'"):
        blockmap.metatrain.convert(tiny / "data.zip", tmp_path / "a.zip")
    # DEST exists: refused, saying how to overwrite
    with pytest.raises(ValidationError, match="overwrite=True"):
        blockmap.metatrain.convert(tiny / "data.zip", tiny / "zip.bmdata")
    # a validation set naming a missing file: the training set written
    # first is removed again, and no temporary file is left
    options = tmp_path / "options.yaml"
    text = (tiny / "options.yaml").read_text()
    text = text.replace("validation_set: 0.1", f"validation_set: {tmp_path / 'absent.xyz'}")
    options.write_text(text)
    with pytest.raises(MissingFileError, match="absent.xyz"):
        blockmap.metatrain.convert(options, tmp_path / "out.bmdata")
    assert sorted(os.listdir(tmp_path)) == ["empty.yaml", "maps.zip", "options.yaml"]
    # with overwrite, DEST is replaced; through the command line as well
    target = tmp_path / "copy.bmdata"
    shutil.copy(tiny / "zip.bmdata", target)
    argv = ["convert", str(tiny / "data.zip"), str(target)]
    assert blockmap.metatrain.main(argv) == 1
    assert blockmap.metatrain.main([*argv, "--overwrite"]) == 0
    assert len(blockmap.Dataset(target)) == 40


RICH_OPTIONS = """\
training_set:
  systems:
    read_from: {xyz}
    length_unit: angstrom
  targets:
    energy:
      key: energy
      unit: eV
      forces:
        key: forces
    mtt::dipole:
      key: mu
      type:
        cartesian:
          rank: 1
      num_subtargets: 1
  extra_data:
    mtt::weight:
      key: weight
      type: scalar
      num_subtargets: 1
"""


def test_convert_keeps_vector_targets_and_extra_data(tiny, tmp_path, patched):
    """A cartesian (vector) target and extra data from the xyz options are
    fields equal to what metatrain's readers give, and metatrain's
    get_dataset serves them (targets and extra data apart)."""
    import ase.io
    from metatrain.utils.data import read_extra_data, read_targets
    from metatrain.utils.omegaconf import expand_dataset_config
    from omegaconf import OmegaConf

    frames = ase.io.read(tiny / "data.xyz", ":8")
    rng = np.random.default_rng(2)
    for atoms in frames:
        atoms.info["mu"] = rng.normal(size=3)
        atoms.info["weight"] = float(rng.uniform())
    ase.io.write(tmp_path / "rich.xyz", frames, format="extxyz")
    options = tmp_path / "rich.yaml"
    options.write_text(RICH_OPTIONS.format(xyz=tmp_path / "rich.xyz"))
    blockmap.metatrain.convert(options, tmp_path / "rich.bmdata")

    config = expand_dataset_config(OmegaConf.load(options)["training_set"])[0]
    targets, _ = read_targets(config["targets"])
    extra, _ = read_extra_data(config["extra_data"])
    config["systems"]["read_from"] = str(tmp_path / "rich.bmdata")
    dataset, target_info, extra_info = mtt_data_get_dataset()(config)
    assert isinstance(dataset, MetatrainDataset)
    # DiskDataset's get_target_info adds the system index to the extra data
    assert set(target_info) == {"energy", "mtt::dipole"}
    assert set(extra_info) == {"mtt::weight", "mtt::aux::system_index"}
    for name, maps in {**targets, **extra}.items():
        for i in (0, 7):
            ours, theirs = dataset[i][name], maps[i]
            assert ours.keys == theirs.keys, name
            for x, y in zip(ours.blocks(), theirs.blocks(), strict=True):
                assert torch.equal(x.values, y.values) and x.components == y.components
                assert x.properties == y.properties and x.samples.names == y.samples.names
                assert x.samples.values[:, 0].tolist() == [i] * len(x.samples)


#: a convert run by ``python -c``, killed (SIGKILL) from the inside at a
#: chosen moment: ``item:K`` when the K-th entry (sample or system) of any
#: file is about to be written, ``closed:K`` just after the K-th dataset
#: writer is closed (its file put in place: the moment the hidden first
#: step of a zip's conversion appeared), ``none`` not at all (killed from
#: the outside by the test)
KILLED_CONVERT = """
import os, signal, sys
import blockmap
from blockmap.metatrain import _convert, _diskdataset

mode, source, dest, overwrite = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
kind, _, count = mode.partition(":")
seen = {"item": 0, "closed": 0}

def kill_at(what):
    seen[what] += 1
    if kind == what and seen[what] == int(count):
        os.kill(os.getpid(), signal.SIGKILL)

def progress(items, wanted, unit):
    for item in items:
        kill_at("item")
        yield item

class Writer:
    def __init__(self, path, *args, **kwargs):
        self.writer = blockmap.DatasetWriter(path, *args, **kwargs)

    def __enter__(self):
        self.writer.__enter__()
        return self

    def __exit__(self, *args):
        result = self.writer.__exit__(*args)
        kill_at("closed")
        return result

    def write(self, *args, **kwargs):
        return self.writer.write(*args, **kwargs)

    def close(self):
        self.writer.close()
        kill_at("closed")

    def __getattr__(self, name):
        # the rest (path, ...) as the writer has it
        return getattr(self.writer, name)

for module in (_diskdataset, _convert):
    module._progress = progress
    module.DatasetWriter = Writer
print("started", flush=True)
_convert.convert(source, dest, overwrite=overwrite)
"""


def _killed_converts(source, folder, moments, old=None):
    """Run a convert of ``source`` into ``folder / "out.bmdata"`` killed at
    each of ``moments`` (KILLED_CONVERT's modes, or seconds after it
    started, killed from the outside), and check after each that every
    file it writes is as it was (absent, or ``old``'s bytes) or complete,
    and that nothing else is left in ``folder``. Returns what was seen."""
    import subprocess
    import sys
    import time

    dest = folder / "out.bmdata"
    outputs = [dest, folder / "out.validation.bmdata", folder / "out.test.bmdata"]
    seen = []
    for moment in moments:
        for path in outputs:
            path.unlink(missing_ok=True)
        if old is not None:
            shutil.copy(old, dest)
        mode = moment if isinstance(moment, str) else "none"
        argv = [sys.executable, "-c", KILLED_CONVERT, mode, str(source), str(dest)]
        with subprocess.Popen([*argv, "1" if old else "0"], stdout=subprocess.PIPE) as process:
            if isinstance(moment, str):
                process.wait(timeout=300)
            else:
                assert process.stdout.readline() == b"started\n"
                time.sleep(moment)
                process.kill()
                process.wait(timeout=60)
        state = []
        for path in outputs:
            if not path.exists():
                state.append("absent")
            elif old is not None and path == dest and path.read_bytes() == old.read_bytes():
                state.append("old")
            else:
                written = blockmap.Dataset(path)
                assert written.committed and len(written) > 0, (moment, path)
                assert written.columns == ["n_atoms", "n_samples"], (moment, path)
                MetatrainDataset(path, fields=TARGETS)
                state.append("complete")
        # the creation lock a killed writer left (hidden, taken over by the
        # next writer: docs/format.md) aside
        left = sorted(
            name
            for name in set(os.listdir(folder)) - {p.name for p in outputs}
            if not (name.startswith(".") and name.endswith(".lock"))
        )
        assert left == [], (moment, left)
        seen.append((moment, process.returncode, tuple(state)))
    return seen


def test_convert_of_a_zip_killed_at_any_moment_leaves_old_or_new(tiny, tmp_path):
    """A zip's convert killed (SIGKILL) at many moments, from the inside
    (before writing, at entries 1, 20 and 40, just after its dataset is put
    in place) and from the outside (every tenth of a run's time) leaves
    DEST as it was (absent, or the old file with overwrite) or complete,
    and nothing beside it (a hidden first-step file was left behind when
    killed just after it appeared: the zip was written twice)."""
    import time

    folder = tmp_path / "out"
    folder.mkdir()
    started = time.monotonic()
    complete = _killed_converts(tiny / "data.zip", folder, ["none"])
    took = time.monotonic() - started
    assert complete == [("none", 0, ("complete", "absent", "absent"))]
    inside = ["item:1", "item:20", "item:40", "closed:1"]
    outside = [took * i / 10 for i in range(1, 11)]
    seen = _killed_converts(tiny / "data.zip", folder, inside + outside)
    for moment, code, _ in seen[: len(inside)]:
        assert code == -9, moment
    assert {state for _, _, state in seen} <= {
        ("absent", "absent", "absent"),
        ("complete", "absent", "absent"),
    }
    # over an old DEST (overwrite): old or complete
    old = tmp_path / "old.bmdata"
    small_copy(tiny, old, count=3)
    seen = _killed_converts(tiny / "data.zip", folder, inside + outside[::3], old=old)
    assert {state for _, _, state in seen} <= {
        ("old", "absent", "absent"),
        ("complete", "absent", "absent"),
    }
    assert seen[0][2][0] == "old" and seen[3][2][0] == "complete"


@pytest.mark.slow
def test_convert_of_options_killed_at_any_moment_leaves_old_or_new(tiny, tmp_path):
    """An options file naming a training, a validation and a test set:
    its convert killed at many moments leaves each file absent or complete
    and nothing else; until the first file is put in place (all three are
    written first), none is there."""
    import time

    options = tmp_path / "options.yaml"
    text = (tiny / "options.yaml").read_text()
    text = text.replace("validation_set: 0.1", VALIDATION_AND_TEST.format(xyz=tiny / "data.xyz"))
    text = text.replace("test_set: 0.1\n", "")
    options.write_text(text)
    folder = tmp_path / "out"
    folder.mkdir()
    started = time.monotonic()
    assert _killed_converts(options, folder, ["none"])[0][2] == ("complete",) * 3
    took = time.monotonic() - started
    # 40 systems a file: items 1 and 40 of the training set, 1 of the test set
    inside = ["item:1", "item:40", "item:81", "item:120", "closed:1", "closed:2"]
    seen = _killed_converts(options, folder, inside + [took * i / 8 for i in range(2, 9)])
    states = {state for _, _, state in seen}
    for moment, _, state in seen[:4]:
        assert state == ("absent",) * 3, moment
    # closed in turn: the test set, the validation set, then the training set
    assert seen[4][2] == ("absent", "absent", "complete")
    assert seen[5][2] == ("absent", "complete", "complete")
    assert states <= {
        ("absent",) * 3,
        ("absent", "absent", "complete"),
        ("absent", "complete", "complete"),
        ("complete",) * 3,
    }


VALIDATION_AND_TEST = """validation_set:
  systems:
    read_from: {xyz}
    length_unit: angstrom
  targets:
    energy:
      key: energy
      unit: eV
test_set:
  systems:
    read_from: {xyz}
    length_unit: angstrom
  targets:
    energy:
      key: energy
      unit: eV"""


#: each case of test_convert_refuses_what_is_not_a_regular_file, run in
#: one process with a timeout (a regression hangs, then fails)
NOT_REGULAR = """
import os, sys, warnings
warnings.simplefilter("ignore")
import blockmap.metatrain
from metatomic.torch import NeighborListOptions
from blockmap.metatrain import _neighbors
from blockmap.metatrain._dataset import MetatrainDataset

folder, zip_path, xyz = sys.argv[1:4]
fifo = os.path.join(folder, "fifo")
os.mkfifo(fifo)
for name in ("fifo.zip", "fifo.yaml", "fifo.xyz"):
    os.symlink(fifo, os.path.join(folder, name))
os.mkdir(os.path.join(folder, "folder.zip"))

def options(systems, energy):
    path = os.path.join(folder, "options.yaml")
    with open(path, "w") as file:
        file.write(
            f"training_set:\\n  systems:\\n    read_from: {systems}\\n  targets:\\n"
            f"    energy:\\n      read_from: {energy}\\n      key: energy\\n"
        )
    return path

cases = {
    "zip": (os.path.join(folder, "fifo.zip"), "out.bmdata", False),
    "options file": (os.path.join(folder, "fifo.yaml"), "out.bmdata", False),
    "systems' read_from": (options(os.path.join(folder, "fifo.xyz"), xyz), "out.bmdata", False),
    "a target's read_from": (options(xyz, os.path.join(folder, "fifo.xyz")), "out.bmdata", False),
    "dest": (zip_path, "fifo.bmdata", True),
    "directory": (os.path.join(folder, "folder.zip"), "out.bmdata", False),
}
os.mkfifo(os.path.join(folder, "fifo.bmdata"))
for case, (source, dest, overwrite) in cases.items():
    try:
        blockmap.metatrain.convert(source, os.path.join(folder, dest), overwrite=overwrite)
        print(f"{case}: converted", flush=True)
    except Exception as error:
        print(f"{case}: {type(error).__name__}: {error}", flush=True)

# a neighbour-list store's path that is a FIFO: kept in memory
dataset = MetatrainDataset(zip_path.replace("data.zip", "zip.bmdata"), fields=["energy"])
options = NeighborListOptions(cutoff=3.0, full_list=True, strict=True)
store = _neighbors.store_path(os.path.join(folder, "copy.bmdata"), (3.0, True, True))
dataset.path = os.path.join(folder, "copy.bmdata")
os.mkfifo(store)
found = _neighbors.ensure(dataset, options)
print(f"store: {type(found.maps).__name__} of {len(found.maps)}", flush=True)
"""


def test_convert_refuses_what_is_not_a_regular_file(tiny, tmp_path):
    """A FIFO without a writer as the zip, as the options file, as a
    read_from of the options (the systems' or a target's), or as DEST,
    and a directory as the source, are refused with BlockMapIOError,
    without waiting on them (convert waited forever on a FIFO: only
    os.path.exists was checked); a neighbour-list store whose path is a
    FIFO is kept in memory. Run in a process of its own, with a timeout:
    a regression fails instead of hanging."""
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            NOT_REGULAR,
            str(tmp_path),
            str(tiny / "data.zip"),
            str(tiny / "data.xyz"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    fifo = (
        "BlockMapIOError: cannot read the {} '{}': it is not a regular file but a FIFO (named pipe)"
    )
    assert lines["zip"] == fifo.format("source", tmp_path / "fifo.zip")
    assert lines["options file"] == fifo.format("source", tmp_path / "fifo.yaml")
    assert lines["systems' read_from"] == fifo.format("training_set's file", tmp_path / "fifo.xyz")
    assert lines["a target's read_from"] == fifo.format(
        "training_set's file", tmp_path / "fifo.xyz"
    )
    assert lines["dest"] == (
        f"BlockMapIOError: cannot write '{tmp_path / 'fifo.bmdata'}': it is not a regular file "
        "but a FIFO (named pipe)"
    )
    assert lines["directory"].startswith("BlockMapIOError: ")
    assert lines["directory"].endswith("it is not a regular file but a directory")
    assert lines["store"] == "list of 40"
    assert not (tmp_path / "out.bmdata").exists()


def test_convert_paths_with_spaces_and_non_ascii(tiny, tmp_path):
    folder = tmp_path / "a dïr with spaces"
    folder.mkdir()
    shutil.copy(tiny / "data.zip", folder / "dätä 1.zip")
    shutil.copy(tiny / "data.xyz", folder / "dätä 1.xyz")
    from helpers import metatrain_data

    metatrain_data.write_options(folder / "öptions.yaml", folder / "dätä 1.xyz")
    blockmap.metatrain.convert(folder / "dätä 1.zip", folder / "frøm zip.bmdata")
    blockmap.metatrain.convert(folder / "öptions.yaml", folder / "frøm xyz.bmdata")
    for name in ("frøm zip.bmdata", "frøm xyz.bmdata"):
        assert len(MetatrainDataset(folder / name, fields=TARGETS)) == 40
    with pytest.raises(MissingFileError, match="the directory of"):
        blockmap.metatrain.convert(tiny / "data.zip", tmp_path / "absent" / "x.bmdata")


def test_a_dataset_without_systems_is_refused(tmp_path, patched):
    path = tmp_path / "maps.bmdata"
    labels = blockmap.Labels(["_"], np.zeros((1, 1), dtype=np.int32))
    block = blockmap.TensorBlock(np.zeros((1, 1)), labels, [], labels)
    blockmap.save_dataset(path, [blockmap.TensorMap(labels, [block])])
    with pytest.raises(ValidationError, match="no 'system' field"):
        MetatrainDataset(path)
    from omegaconf import OmegaConf

    options = OmegaConf.create({"systems": {"read_from": str(path)}, "targets": {}})
    with pytest.raises(ValidationError, match="not a metatrain dataset"):
        mtt_data_get_dataset()(options)


def test_a_target_the_dataset_does_not_hold_is_refused(tiny):
    with pytest.raises(ValidationError, match="no field for the target 'dipole'"):
        MetatrainDataset(tiny / "zip.bmdata", fields={"dipole": {"key": "mu"}})
    # a target found by its own name when its key is not a field
    dataset = MetatrainDataset(tiny / "zip.bmdata", fields={"energy": {"key": "U0"}})
    assert dataset[0]._fields == ("system", "energy", "mtt::aux::system_index")


def test_atom_counts_that_disagree_with_the_systems_are_refused(tiny, tmp_path):
    """The atom-count sampler batches by the ``n_atoms`` column: a column
    that disagrees with the systems, or does not hold integers, is refused
    when the dataset is opened; without the column, the systems' counts."""
    source = blockmap.Dataset(tiny / "zip.bmdata")
    counts = source.column("n_atoms")

    def written(name, column):
        path = tmp_path / f"{name}.bmdata"
        with blockmap.DatasetWriter(path) as writer:
            for i in range(4):
                columns = {} if column is None else {"n_atoms": column(i)}
                writer.write(**source[i]._asdict(), columns=columns)
        return path

    wrong = written("wrong", lambda i: int(counts[i]) + (i == 2))
    with pytest.raises(FormatError, match=r"disagrees .* at 1 entries \(entry 2: "):
        MetatrainDataset(wrong, fields=TARGETS)
    with pytest.raises(FormatError, match="holds float64 values, not integers"):
        MetatrainDataset(written("float", lambda i: float(counts[i])), fields=TARGETS)
    with pytest.raises(FormatError, match="disagrees"):
        MetatrainDataset(written("negative", lambda i: -1), fields=TARGETS)
    without = MetatrainDataset(written("without", None), fields=TARGETS)
    assert without.get_all_atom_counts().tolist() == counts[:4].tolist()
    assert without.get_all_atom_counts().dtype == np.int64


def test_atom_counts_that_lie_with_the_systems_columns_are_refused_when_read(
    tiny, tmp_path, monkeypatch
):
    """A dataset whose n_atoms and system n_samples columns lie together
    (here: system maps with the cell block first, a valid system whose
    first block has 3 rows, and n_atoms = 3) opens, but an entry whose
    system has another atom count is refused when it is read: by
    ``ds[i]``, ``get_num_atoms(i)``, ``system(i)``, and so in any batch the
    atom-count sampler makes of it (it was served: get_num_atoms(0) gave 3
    for an 8-atom system, and the sampler's batches held more atoms than
    max_atoms)."""
    from metatrain.utils.data.dataset import CollateFn
    from metatrain.utils.data.samplers import MaxAtomDistributedBatchSampler

    source = blockmap.Dataset(tiny / "zip.bmdata")
    path = tmp_path / "lying.bmdata"
    with blockmap.DatasetWriter(path) as writer:
        for i in range(6):
            entry = source[i]
            system = entry.system
            if i % 2 == 0:
                # the same system, its blocks stored cell first
                keys = blockmap.Labels(["array"], np.array([[1], [0]], dtype=np.int32))
                system = blockmap.TensorMap(keys, [system.block(1), system.block(0)])
            writer.write(
                system=system, energy=entry.energy, columns={"n_atoms": len(system.block(0))}
            )
    dataset = MetatrainDataset(path, fields=TARGETS)
    atoms = [int(n) for n in source.column("n_atoms")[:6]]
    assert dataset.get_all_atom_counts().tolist() == [3, *atoms[1:2], 3, *atoms[3:4], 3, atoms[5]]
    for i in (0, 2, 4):
        for read in (dataset.__getitem__, dataset.get_num_atoms, dataset.system):
            with pytest.raises(FormatError, match=f"entry {i}'s system has {atoms[i]} atoms"):
                read(i)
    for i in (1, 3, 5):
        assert dataset.get_num_atoms(i) == atoms[i] == len(dataset.system(i))
        assert_maps_equal(dataset[i].energy, MetatrainDataset(tiny / "zip.bmdata")[i].energy)
    # counts of -1 in both columns (a crafted index: the writer stores
    # n_samples as it counts them) are refused at open
    monkeypatch.setattr(blockmap.dataset.DatasetField, "column", lambda self, name: -np.ones(6))
    monkeypatch.setattr(blockmap.Dataset, "column", lambda self, name: -np.ones(6, np.int64))
    with pytest.raises(FormatError, match="the atom count of entry 0 is -1, not a count"):
        MetatrainDataset(path, fields=TARGETS)
    monkeypatch.undo()
    # no batch is made of a lying entry
    sampler = MaxAtomDistributedBatchSampler(dataset, max_atoms=20, shuffle=False)
    loader = torch.utils.data.DataLoader(
        dataset, batch_sampler=sampler, collate_fn=CollateFn(["energy"], callables=[])
    )
    with pytest.raises(FormatError, match="system has"):
        list(loader)


def test_indices_that_are_not_entries_are_refused(ours):
    from blockmap.exceptions import BlockMapIndexError

    assert ours[np.int64(3)]._index == ours[torch.tensor(3)]._index == 3
    for index in (40, -1, 2**70, 1.5, "0", None):
        with pytest.raises(BlockMapIndexError):
            ours[index]
    with pytest.raises(BlockMapIndexError):
        torch.utils.data.Subset(ours, [-1])[0]


def test_a_version_1_dataset_is_refused(tmp_path):
    stored = os.path.join(os.path.dirname(__file__), "..", "..", "data", "datasets")
    with pytest.raises(ValidationError, match="not a metatrain dataset"):
        MetatrainDataset(os.path.join(stored, "v1-committed.bmds"))


def mtt_data_get_dataset():
    import metatrain.cli.train

    return metatrain.cli.train.get_dataset


# ---------------------------------------------------------------- the dataset


def test_items_are_diskdataset_items(disk, ours):
    assert len(ours) == len(disk)
    for i in (0, 7, 39):
        a, b = disk[i], ours[i]
        assert b._fields == a._fields == ("system", "energy", "mtt::aux::system_index")
        assert_systems_equal(a.system, b.system)
        assert_systems_equal(a["system"], b["system"])
        assert_systems_equal(a[0], b[0])
        assert list(b._asdict()) == list(a._asdict())
        for name in ("energy", "mtt::aux::system_index"):
            assert_maps_equal(a[name], b[name])
    with pytest.raises(IndexError):
        ours[40]
    # items hold views of the mapped file: two reads see the same memory
    first, second = ours[5]._views["energy"].block(), ours[5]._views["energy"].block()
    assert np.shares_memory(first.values, second.values)
    assert not first.values.flags.writeable


def test_target_info_atom_counts_subset_and_sampler(disk, ours):
    from metatrain.utils.data.samplers import MaxAtomDistributedBatchSampler
    from metatrain.utils.omegaconf import expand_dataset_config
    from omegaconf import OmegaConf

    conf = expand_dataset_config(
        OmegaConf.create(
            {
                "systems": "data.zip",
                "targets": {"energy": {"key": "energy", "forces": {"key": "forces"}}},
            }
        )
    )[0]["targets"]
    mine, theirs = ours.get_target_info(conf), disk.get_target_info(conf)
    assert list(mine) == list(theirs) == ["energy"]
    assert mine["energy"].gradients == theirs["energy"].gradients == ["positions"]
    assert mtt.equal_metadata(mine["energy"].layout, theirs["energy"].layout)
    extra = ours.get_target_info({}, is_extra_data=True)
    assert list(extra) == ["mtt::aux::system_index"]

    np.testing.assert_array_equal(ours.get_all_atom_counts(), disk.get_all_atom_counts())
    assert [ours.get_num_atoms(i) for i in range(40)] == [disk.get_num_atoms(i) for i in range(40)]

    indices = [5, 3, 17, 30, 2, 11]
    subset = torch.utils.data.Subset(ours, indices)
    assert [int(s["mtt::aux::system_index"].block().values[0, 0]) for s in subset] == indices

    batches = []
    for dataset in (disk, ours):
        sampler = MaxAtomDistributedBatchSampler(
            torch.utils.data.Subset(dataset, list(range(0, 40, 2))), max_atoms=60, shuffle=True
        )
        sampler.set_epoch(1)
        batches.append(list(sampler))
    assert batches[0] == batches[1] and len(batches[0]) > 1


# ---------------------------------------------------------------- the batch path


def test_joins_equal_metatensor_torch_joins(disk, ours):
    from blockmap.metatensor_torch import to_metatensor_torch

    for indices in ([0, 1, 2, 3, 4, 5, 6, 7], [39, 2, 17, 5], [9]):
        views = [ours[i]._views["energy"] for i in indices]
        joined = to_metatensor_torch(blockmap.join(views, axis="samples", different_keys="union"))
        expected = mtt.join(
            [disk[i].energy for i in indices], axis="samples", different_keys="union"
        )
        assert_maps_equal(joined, expected)
        gradient = joined.block().gradient("positions")
        # the gradient's sample column points at the joined rows
        assert set(gradient.samples.values[:, 0].tolist()) == set(range(len(indices)))


def test_joins_of_maps_with_different_keys_equal_metatensor_torch_joins():
    """different_keys="union" (what metatrain joins with): items whose maps
    hold different blocks, with gradients."""
    from blockmap.metatensor_torch import to_metatensor_torch

    rng = np.random.default_rng(7)

    def item(system, keys):
        blocks = []
        for key in keys:
            n = int(rng.integers(1, 4))
            samples = np.array([[system, atom] for atom in range(n)], dtype=np.int32)
            block = blockmap.TensorBlock(
                rng.normal(size=(n, 2 * key + 1, 2)),
                blockmap.Labels(["system", "atom"], samples),
                [blockmap.Labels.range("o3_mu", 2 * key + 1)],
                blockmap.Labels.range("p", 2),
            )
            gradient_samples = np.array(
                [[row, a] for row in range(n) for a in range(2)], dtype=np.int32
            )
            block.add_gradient(
                "positions",
                blockmap.TensorBlock(
                    rng.normal(size=(2 * n, 3, 2 * key + 1, 2)),
                    blockmap.Labels(["sample", "atom"], gradient_samples),
                    [blockmap.Labels.range("xyz", 3), blockmap.Labels.range("o3_mu", 2 * key + 1)],
                    blockmap.Labels.range("p", 2),
                ),
            )
            blocks.append(block)
        labels = blockmap.Labels(["o3_lambda"], np.array([[k] for k in keys], dtype=np.int32))
        return blockmap.TensorMap(labels, blocks)

    maps = [item(4, [0, 1]), item(9, [1]), item(2, [2, 0])]
    joined = blockmap.join(maps, axis="samples", different_keys="union")
    expected = mtt.join(
        [to_metatensor_torch(m) for m in maps], axis="samples", different_keys="union"
    )
    assert_maps_equal(to_metatensor_torch(joined), expected)


def callables(neighbor_transform):
    from metatrain.utils.neighbor_lists import get_system_with_neighbor_lists_transform

    return [get_system_with_neighbor_lists_transform([OPTIONS])] if neighbor_transform else []


@pytest.mark.parametrize("neighbor_transform", [False, True])
def test_batches_equal_metatrain_batches(disk, ours, patched, neighbor_transform):
    import metatrain.utils.data as package
    from metatrain.utils.data.dataset import CollateFn, unpack_batch

    # the patch is what metatrain's modules hold
    assert package.unpack_batch is unpack_batch
    assert unpack_batch.__wrapped__ is not unpack_batch
    collate = CollateFn(["energy"], callables=callables(neighbor_transform))
    indices = [4, 0, 33, 12, 7]
    expected = unpack_batch(collate([disk[i] for i in indices]))
    batch = collate([ours[i] for i in indices])
    assert type(batch) is _batch.Batch
    got = unpack_batch(batch)
    for a, b in zip(expected[0], got[0], strict=True):
        assert_systems_equal(a, b)
    assert list(got[1]) == list(expected[1]) == ["energy"]
    assert list(got[2]) == list(expected[2]) == ["mtt::aux::system_index"]
    for name in ("energy",):
        assert_maps_equal(got[1][name], expected[1][name])
    assert_maps_equal(got[2]["mtt::aux::system_index"], expected[2]["mtt::aux::system_index"])


def test_batches_from_workers_equal_batches_in_process(tiny, patched):
    """A DataLoader with 2 forked workers: each Batch crosses as one flat
    tensor (torch's shared memory) and is rebuilt equal to the batch made
    in this process."""
    from metatrain.utils.data.dataset import CollateFn, unpack_batch

    dataset = MetatrainDataset(tiny / "zip.bmdata", fields=TARGETS)
    blockmap.metatrain._dataset.opened.add(dataset)
    collate = CollateFn(["energy"], callables=callables(True))
    subset = torch.utils.data.Subset(dataset, list(range(3, 40, 3)))

    def loader(workers):
        options = {"multiprocessing_context": "fork", "timeout": 120} if workers else {}
        return torch.utils.data.DataLoader(
            subset, batch_size=4, collate_fn=collate, num_workers=workers, **options
        )

    here = [unpack_batch(b) for b in loader(0)]
    there = [unpack_batch(b) for b in loader(2)]
    assert len(here) == len(there) == 4
    for a, b in zip(here, there, strict=True):
        for x, y in zip(a[0], b[0], strict=True):
            assert_systems_equal(x, y)
            assert len(x.known_neighbor_lists()) == 1
        assert_maps_equal(a[1]["energy"], b[1]["energy"])
        assert_maps_equal(a[2]["mtt::aux::system_index"], b[2]["mtt::aux::system_index"])
    # the received tensors (float64 values, int32 labels and types) view one
    # flat tensor in shared memory (labels of at most 32 values travel as lists)
    block = there[0][1]["energy"].block()
    system = there[0][0][0]
    pairs = system.get_neighbor_list(OPTIONS)
    storage = block.values.untyped_storage()
    assert storage.is_shared()
    for tensor in (system.positions, system.types, pairs.values, pairs.samples.values):
        assert tensor.untyped_storage().data_ptr() == storage.data_ptr()


def test_a_batch_of_items_of_several_datasets_is_refused(tiny, ours, disk, patched):
    """metatrain's loaders batch one dataset at a time; a batch that mixes
    datasets, or blockmap items and others, is refused (it used to raise
    a plain ValueError, or AttributeError for a foreign item), whichever
    comes first (metatrain's collate took the batch when a DiskDataset
    item came first)."""
    from metatrain.utils.data.dataset import CollateFn

    other = MetatrainDataset(tiny / "zip.bmdata", fields=TARGETS)
    with pytest.raises(ValidationError, match="from 2 datasets"):
        _batch.collate(["energy"], [], [ours[0], other[1]])
    with pytest.raises(ValidationError, match="must all come from one blockmap dataset"):
        _batch.collate(["energy"], [], [ours[0], (1, 2)])
    collate = CollateFn(["energy"], callables=[])
    for batch in ([ours[0], disk[1]], [disk[1], ours[0]], [disk[1], disk[2], ours[0]]):
        with pytest.raises(ValidationError, match="must all come from one blockmap dataset"):
            collate(batch)


class _Crafted:
    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def test_crafted_batch_pickles_are_refused_clearly(ours):
    """A Batch pickle whose parts do not fit its byte tensor (offsets
    outside it, negative or huge counts, wrong types, repeated keys) raises
    FormatError, and no tensor is viewed outside the buffer."""
    import pickle

    batch = _batch.collate(["energy"], [], [ours[0], ours[1]])
    function, (buffer, systems, targets, extra) = batch.__reduce__()
    assert function is _batch._rebuild
    back = pickle.loads(pickle.dumps(batch))
    assert_maps_equal(back.targets["energy"], batch.targets["energy"])

    values_ref = targets["energy"][1][0][0]
    dtype, offset, shape = values_ref

    def with_values(ref):
        keys, blocks = targets["energy"]
        block = (ref, *blocks[0][1:])
        return {"energy": (keys, [block])}

    keys = targets["energy"][0]
    names, key_shape, key_values = keys
    repeated = ((names, (2, *key_shape[1:]), key_values * 2), targets["energy"][1] * 2)
    cases = [
        (buffer, systems, with_values((dtype, len(buffer), shape)), extra),
        (buffer, systems, with_values((dtype, -8, shape)), extra),
        (buffer, systems, with_values((dtype, offset, (2**40,))), extra),
        (buffer, systems, with_values((dtype, offset, (-1,))), extra),
        (buffer, systems, with_values((dtype, offset + 4, shape)), extra),
        (buffer, systems, with_values(("float64", offset, shape)), extra),
        (buffer, systems, with_values((dtype, 0.0, shape)), extra),
        (buffer, systems, {"energy": repeated}, extra),
        (buffer, systems, {"energy": (keys,)}, extra),
        (buffer, [(1, 2)], targets, extra),
        (buffer.to(torch.float64), systems, targets, extra),
        (buffer, dict(enumerate(systems)), targets, extra),
        (buffer, systems, {1: targets["energy"]}, extra),
    ]
    for args in cases:
        with pytest.raises(FormatError, match="this pickle is not a blockmap batch"):
            pickle.loads(pickle.dumps(_Crafted(_batch._rebuild, *args)))


def test_crafted_batch_contents_are_refused(tiny, patched):
    """What a Batch pickle's buffer and lists hold is checked as it
    arrives, not only where it lies: labels with a repeated row (those of
    more than 32 values travel in the buffer and were made with
    assume_unique), a bool (pbc) holding the byte 2, neighbour-list
    options metatomic takes but no list has (a NaN, infinite or negative
    cutoff, an int for a bool), and pairs of atoms the system does not
    have all raise FormatError; the batch as sent still arrives."""
    import pickle

    dataset = MetatrainDataset(tiny / "zip.bmdata", fields=TARGETS)
    blockmap.metatrain._dataset.opened.add(dataset)
    from metatrain.utils.data.dataset import CollateFn

    batch = CollateFn(["energy"], callables=callables(True))([dataset[i] for i in range(8)])
    function, (buffer, systems, targets, extra) = batch.__reduce__()
    back = pickle.loads(pickle.dumps(batch))
    assert_maps_equal(back.targets["energy"], batch.targets["energy"])

    def arrives(buffer=buffer, systems=systems, targets=targets):
        crafted = _Crafted(_batch._rebuild, buffer, systems, targets, extra)
        return pickle.loads(pickle.dumps(crafted))

    def rows_of(labels):
        names, (dtype, offset, shape) = labels
        return offset, shape

    def with_rows_repeated(labels):
        offset, (count, size) = rows_of(labels)
        assert count > 1 and count * size > _batch._SMALL
        changed = buffer.clone()
        row = size * 4
        changed[offset + row : offset + 2 * row] = changed[offset : offset + row]
        return changed

    keys, blocks = targets["energy"]
    gradient_samples = blocks[0][4][0][1][1]
    lists = systems[0][1]
    described, list_block = lists[0]
    list_samples = list_block[1]
    with pytest.raises(FormatError, match=r"labels \['sample', 'atom'\]: .*twice"):
        arrives(buffer=with_rows_repeated(gradient_samples))
    with pytest.raises(FormatError, match=r"labels \['first_atom', .*twice"):
        arrives(buffer=with_rows_repeated(list_samples))
    # keys of more than 32 values, pointing at those repeated rows
    names, (dtype, offset, (count, size)) = gradient_samples
    crafted_keys = (names, (dtype, offset, (count, size)))
    with pytest.raises(FormatError, match="twice"):
        arrives(
            buffer=with_rows_repeated(gradient_samples),
            targets={"energy": (crafted_keys, blocks)},
        )

    (types, positions, cell, pbc) = systems[0][0]
    changed = buffer.clone()
    changed[pbc[1]] = 2
    with pytest.raises(FormatError, match="a bool tensor holds the byte 2"):
        arrives(buffer=changed)

    n_atoms = positions[2][0]
    offset, (count, size) = rows_of(list_samples)
    for atom in (n_atoms, -1, 10**6):
        changed = buffer.clone()
        changed[offset : offset + 4] = torch.tensor([atom], dtype=torch.int32).view(torch.uint8)
        with pytest.raises(FormatError, match=f"names atom {atom} as its first_atom"):
            arrives(buffer=changed)

    cutoff, full_list, strict, requestors, unit = described
    for options in (
        (float("nan"), full_list, strict, requestors, unit),
        (float("inf"), full_list, strict, requestors, unit),
        (-cutoff, full_list, strict, requestors, unit),
        (0.0, full_list, strict, requestors, unit),
        (int(cutoff), full_list, strict, requestors, unit),
        (cutoff, 2, strict, requestors, unit),
        (cutoff, full_list, None, requestors, unit),
        (cutoff, full_list, strict, (3,), unit),
        (cutoff, full_list, strict, requestors, b"A"),
    ):
        crafted = [(systems[0][0], [(options, list_block)], systems[0][2]), *systems[1:]]
        with pytest.raises(FormatError, match="neighbor list options need"):
            arrives(systems=crafted)
    # the batch as sent arrives
    assert_maps_equal(arrives().targets["energy"], batch.targets["energy"])


def test_crafted_dataset_pickles_are_refused(tiny, tmp_path, monkeypatch):
    """A MetatrainDataset pickles as its dataset (a reference checked
    against the file), its fields and its stores, and everything else is
    derived from the file on arrival: a pickled state used to be taken as
    it came (atom counts, field indices, stored lists of any content).
    Crafted parts raise BlockMapTypeError or FormatError."""
    import pickle

    from blockmap.exceptions import BlockMapTypeError

    path = tmp_path / "data.bmdata"
    small_copy(tiny, path)
    dataset = MetatrainDataset(path, fields=TARGETS)
    store = _neighbors.ensure(dataset, OPTIONS)
    dataset._atom_counts = np.zeros(6, dtype=np.int64)  # not sent: derived again
    back = pickle.loads(pickle.dumps(dataset))
    assert back.get_all_atom_counts().tolist() == blockmap.Dataset(path).column("n_atoms").tolist()
    assert back.sample_fields == dataset.sample_fields and back.path == dataset.path
    assert list(back.neighbors) == [(5.0, True, True)]
    assert torch.equal(back.neighbors[(5.0, True, True)].block(3).values, store.block(3).values)
    # lists kept in memory travel as data, checked on arrival
    dataset.neighbors[(5.0, True, True)] = _neighbors.Store(
        OPTIONS, [store.maps[i] for i in range(6)]
    )
    back = pickle.loads(pickle.dumps(dataset))
    assert type(back.neighbors[(5.0, True, True)].maps) is list

    function, (data, mapping, stores, was_patched) = dataset.__reduce__()
    described, maps = stores[0]
    other = NeighborListOptions(cutoff=3.0, full_list=True, strict=True)
    other_maps = _neighbors.ensure(MetatrainDataset(path, fields=TARGETS), other).maps
    damaged = [m.copy() for m in maps]
    damaged[2] = damaged[3]
    type_errors = [
        ("path", mapping, stores, was_patched),
        (data, [("energy", "energy")], stores, was_patched),
        (data, {"energy": 1}, stores, was_patched),
        (data, mapping, stores[0], was_patched),
        (data, mapping, [described], was_patched),
        (data, mapping, stores, 1),
    ]
    format_errors = [
        ((data, {"dipole": "forces"}, stores, was_patched), "no field for the target"),
        ((data, mapping, [((float("nan"), *described[1:]), maps)], was_patched), "cutoff"),
        ((data, mapping, [(described[:3], maps)], was_patched), "options described"),
        ((data, mapping, [(described, maps[:5])], was_patched), "not this dataset's"),
        ((data, mapping, [(described, other_maps)], was_patched), "not this dataset's"),
        ((data, mapping, [(described, damaged)], was_patched), "damaged"),
        ((data, mapping, [(described, "maps")], was_patched), "held in a str"),
        ((data, mapping, [(described, [1] * 6)], was_patched), "held in a list"),
    ]
    for args in type_errors:
        with pytest.raises(BlockMapTypeError, match="this pickle is not a MetatrainDataset"):
            pickle.loads(pickle.dumps(_Crafted(function, *args)))
    for args, match in format_errors:
        with pytest.raises(FormatError, match=f"this pickle is not a MetatrainDataset: .*{match}"):
            pickle.loads(pickle.dumps(_Crafted(function, *args)))


def test_a_spawned_worker_makes_blockmaps_batches(tiny, patched):
    """A worker started by spawn imports metatrain afresh: unpickling the
    dataset installs the patches there, so its batches come from
    blockmap's batch path (they came from metatrain's own, as tuples)."""
    from metatrain.utils.data.dataset import CollateFn, unpack_batch

    dataset = MetatrainDataset(tiny / "zip.bmdata", fields=TARGETS)
    collate = CollateFn(["energy"], callables=[])
    subset = torch.utils.data.Subset(dataset, list(range(8)))
    loader = torch.utils.data.DataLoader(
        subset,
        batch_size=4,
        collate_fn=collate,
        num_workers=1,
        multiprocessing_context="spawn",
        timeout=120,
    )
    batches = list(loader)
    assert [type(b) for b in batches] == [_batch.Batch, _batch.Batch]
    for i, batch in enumerate(batches):
        here = unpack_batch(collate([dataset[j] for j in range(4 * i, 4 * i + 4)]))
        assert_maps_equal(unpack_batch(batch)[1]["energy"], here[1]["energy"])


# ---------------------------------------------------------------- neighbour lists


def test_stored_neighbor_lists(tiny, tmp_path, monkeypatch):
    from metatrain.utils import neighbor_lists
    from metatrain.utils.data.system_to_ase import system_to_ase

    path = tmp_path / "data.bmdata"
    shutil.copy(tiny / "zip.bmdata", path)
    calls = []
    original = neighbor_lists._compute_single_neighbor_list

    def counted(atoms, options):
        calls.append(options.cutoff)
        return original(atoms, options)

    monkeypatch.setattr(neighbor_lists, "_compute_single_neighbor_list", counted)

    dataset = MetatrainDataset(path, fields=TARGETS)
    store = _neighbors.ensure(dataset, OPTIONS)
    assert len(calls) == 40
    assert os.path.exists(_neighbors.store_path(str(path), (5.0, True, True)))
    for i in range(40):
        expected = original(system_to_ase(disk_system(tiny, i)), OPTIONS)
        got = store.block(i)
        assert torch.equal(got.values, expected.values)
        assert torch.equal(got.samples.values, expected.samples.values)
        assert got.samples == expected.samples and got.components == expected.components
        assert got.properties == expected.properties

    # a new run: reused, nothing computed
    _neighbors.ensure(MetatrainDataset(path, fields=TARGETS), OPTIONS)
    assert len(calls) == 40
    # other options: a new store
    other = NeighborListOptions(cutoff=3.0, full_list=False, strict=True)
    _neighbors.ensure(MetatrainDataset(path, fields=TARGETS), other)
    assert len(calls) == 80 and calls[-1] == 3.0
    assert os.path.exists(_neighbors.store_path(str(path), (3.0, False, True)))
    # a changed dataset (written again, here with one entry less): computed again
    with blockmap.DatasetWriter(path, overwrite=True) as writer:
        source = blockmap.Dataset(tiny / "zip.bmdata")
        counts = source.column("n_atoms")
        for i in range(39):
            entry = source[i]
            writer.write(
                system=entry.system, energy=entry.energy, columns={"n_atoms": int(counts[i])}
            )
    _neighbors.ensure(MetatrainDataset(path, fields=TARGETS), OPTIONS)
    assert len(calls) == 80 + 39
    # an append (what blockmap.metatrain.Writer(..., append=True) does):
    # the store no longer matches the entries, and is computed again
    with blockmap.DatasetWriter(path, append=True) as writer:
        entry = source[39]
        writer.write(system=entry.system, energy=entry.energy, columns={"n_atoms": int(counts[39])})
    _neighbors.ensure(MetatrainDataset(path, fields=TARGETS), OPTIONS)
    assert len(calls) == 80 + 39 + 40


def small_copy(tiny, path, count=6):
    """The first ``count`` entries of the tiny dataset, at ``path``."""
    source = blockmap.Dataset(tiny / "zip.bmdata")
    counts = source.column("n_atoms")
    with blockmap.DatasetWriter(path, overwrite=True) as writer:
        for i in range(count):
            entry = source[i]
            writer.write(**entry._asdict(), columns={"n_atoms": int(counts[i])})


def test_a_damaged_or_foreign_store_is_computed_again(tiny, tmp_path, monkeypatch):
    """A store file that is truncated, damaged (a byte of its lists
    changed), a dataset of fields, another dataset's file, computed by
    another metatrain / vesin or with other options and renamed (pairs up
    to 5 A served for a 3 A cutoff), or holding maps that are not
    neighbour lists is computed again and replaced, never used: the lists
    equal the first computation's each time."""
    path = tmp_path / "data.bmdata"
    small_copy(tiny, path)
    store = _neighbors.store_path(str(path), (5.0, True, True))

    def lists():
        before = _neighbors.computed
        found = _neighbors.ensure(MetatrainDataset(path, fields=TARGETS), OPTIONS)
        return _neighbors.computed - before, [found.block(i) for i in range(6)]

    count, expected = lists()
    assert count == 6
    good = Path(store).read_bytes()
    assert lists()[0] == 0

    def foreign_engine():
        monkeypatch.setattr(_neighbors, "_engine", lambda: "metatrain 0.0, vesin 0.0")

    def fields_dataset(data):
        with blockmap.DatasetWriter(store, overwrite=True) as writer:
            for i in range(6):
                writer.write(a=data[i])

    def not_lists(data, digest):
        # the store's info (the dataset, this code, the CRC the check
        # gives such maps), on maps that are not neighbour lists
        info = blockmap.Dataset(store)[0].info()
        with blockmap.DatasetWriter(store, overwrite=True) as writer:
            for i in range(6):
                tensor = data[i].copy()
                if i == 0:
                    for name, value in {**info, "lists_crc32": digest}.items():
                        tensor.set_info(name, value)
                writer.write(tensor)

    def renamed(cutoff, full_list, strict):
        # a store of other options (computed for this very dataset by this
        # code, intact) under this store's name: its lists are not these
        options = NeighborListOptions(cutoff=cutoff, full_list=full_list, strict=strict)
        _neighbors.ensure(MetatrainDataset(path, fields=TARGETS), options)
        shutil.copy(_neighbors.store_path(str(path), (cutoff, full_list, strict)), store)

    energy = blockmap.Dataset(path).field("energy")
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x40
    cases = {
        "truncated": lambda: Path(store).write_bytes(good[: len(good) // 2]),
        "empty": lambda: Path(store).write_bytes(b""),
        "a byte changed": lambda: Path(store).write_bytes(bytes(flipped)),
        "fields": lambda: fields_dataset(energy),
        "another dataset": lambda: shutil.copy(tiny / "zip.bmdata", store),
        "not lists": lambda: not_lists(energy, ""),
        "another cutoff, renamed": lambda: renamed(3.0, True, True),
        "a half list, renamed": lambda: renamed(5.0, False, True),
        "a loose list, renamed": lambda: renamed(5.0, True, False),
        "another engine": foreign_engine,
    }
    for name, damage in cases.items():
        damage()
        count, got = lists()
        assert count == 6, name
        for x, y in zip(got, expected, strict=True):
            assert torch.equal(x.values, y.values) and x.samples == y.samples, name
        monkeypatch.undo()
    # the last store was computed by "another engine": this one's replaces it
    assert lists()[0] == 6
    assert lists()[0] == 0


def test_a_store_write_killed_leaves_the_old_file(tiny, tmp_path):
    """A process killed (SIGKILL) while it writes the store leaves the file
    that was there, whole, and nothing else; the next run replaces it."""
    import subprocess
    import sys
    import textwrap

    path = tmp_path / "data.bmdata"
    small_copy(tiny, path)
    store = _neighbors.store_path(str(path), (5.0, True, True))
    shutil.copy(tiny / "zip.bmdata", store)  # an old, foreign file
    old = Path(store).read_bytes()
    code = textwrap.dedent(
        """
        import os, signal, sys, warnings
        warnings.simplefilter("ignore")
        from metatomic.torch import NeighborListOptions
        from blockmap.metatrain import _neighbors
        from blockmap.metatrain._dataset import MetatrainDataset

        class Killed:
            def __init__(self, path, **kwargs):
                self.writer = Writer(path, **kwargs)

            def __enter__(self):
                return self

            def __exit__(self, *args):
                self.writer.close()

            def write(self, tensor):
                self.writer.write(tensor)
                os.kill(os.getpid(), signal.SIGKILL)

        Writer = _neighbors.DatasetWriter
        _neighbors.DatasetWriter = Killed
        options = NeighborListOptions(cutoff=5.0, full_list=True, strict=True)
        _neighbors.ensure(MetatrainDataset(sys.argv[1], fields=["energy"]), options)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], timeout=300, capture_output=True, text=True
    )
    assert done.returncode == -9, done.stderr
    assert Path(store).read_bytes() == old
    # and the creation lock the killed writer left (hidden, taken over by
    # the next writer)
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["data.bmdata", os.path.basename(store), f".{os.path.basename(store)}.lock"]
    )
    before = _neighbors.computed
    found = _neighbors.ensure(MetatrainDataset(path, fields=TARGETS), OPTIONS)
    assert _neighbors.computed - before == 6 and len(found.maps) == 6


def test_a_store_replaced_while_written_is_not_used(tiny, tmp_path, monkeypatch):
    """Two writers of a new store both succeed and the last rename wins:
    a process whose store was replaced by another file before it opened it
    keeps its own lists in memory instead of using that file."""
    path = tmp_path / "data.bmdata"
    small_copy(tiny, path)
    store = _neighbors.store_path(str(path), (5.0, True, True))
    other = blockmap.DatasetWriter(store, overwrite=True)
    other.write(blockmap.Dataset(path).field("energy")[0])
    # another writer creating the store holds its creation lock: the
    # store's own writer is refused at once, the lists stay in memory
    found = _neighbors.ensure(MetatrainDataset(path, fields=TARGETS), OPTIONS)
    assert type(found.maps) is list and len(found.maps) == 6
    other.close()
    assert len(blockmap.Dataset(store)) == 1
    # the next run computes it again (the file holds 1 entry)
    before = _neighbors.computed
    _neighbors.ensure(MetatrainDataset(path, fields=TARGETS), OPTIONS)
    assert _neighbors.computed - before == 6


def disk_system(tiny, index):
    return DiskDataset(tiny / "data.zip", fields=[])[index].system


def test_collate_attaches_stored_lists_without_computing(tiny, patched, monkeypatch):
    from metatrain.utils import neighbor_lists
    from metatrain.utils.data.dataset import CollateFn

    dataset = MetatrainDataset(tiny / "zip.bmdata", fields=TARGETS)
    blockmap.metatrain._dataset.opened.add(dataset)
    collate = CollateFn(["energy"], callables=callables(True))  # ensures the store
    calls = []
    monkeypatch.setattr(
        neighbor_lists, "_compute_single_neighbor_list", lambda *a: calls.append(a) or 1 / 0
    )
    systems = collate([dataset[i] for i in range(8)]).systems
    assert calls == [] and all(s.known_neighbor_lists() == [OPTIONS] for s in systems)


def test_lists_stored_with_the_systems_are_used(tiny, tmp_path, patched, monkeypatch):
    """A DiskDataset whose systems hold their neighbour lists: converted,
    its systems keep them (fields system/pairs/0), batches equal metatrain's,
    and nothing is computed or stored."""
    from metatrain.utils import neighbor_lists
    from metatrain.utils.data.dataset import CollateFn, unpack_batch
    from metatrain.utils.data.writers import DiskDatasetWriter

    source = DiskDataset(tiny / "data.zip", fields=["energy"])
    writer = DiskDatasetWriter(str(tmp_path / "lists.zip"))
    for i in range(12):
        item = source[i]
        system = neighbor_lists.get_system_with_neighbor_lists(item.system, [OPTIONS])
        writer.write([system], {"energy": item.energy})
    writer.finish()
    blockmap.metatrain.convert(tmp_path / "lists.zip", tmp_path / "lists.bmdata")
    assert blockmap.Dataset(tmp_path / "lists.bmdata").fields == [
        "system",
        "system/pairs/0",
        "energy",
    ]
    dataset = MetatrainDataset(tmp_path / "lists.bmdata", fields=TARGETS)
    assert dataset.stored_lists == [OPTIONS]
    blockmap.metatrain._dataset.opened.add(dataset)
    disk = DiskDataset(tmp_path / "lists.zip", fields=["energy"])

    def refuse(*args):
        raise AssertionError("a neighbour list was computed")

    monkeypatch.setattr(neighbor_lists, "_compute_single_neighbor_list", refuse)
    collate = CollateFn(["energy"], callables=callables(True))
    expected = unpack_batch(collate([disk[i] for i in range(8)]))
    got = unpack_batch(collate([dataset[i] for i in range(8)]))
    for a, b in zip(expected[0], got[0], strict=True):
        assert_systems_equal(a, b)
        assert b.known_neighbor_lists() == [OPTIONS]
    assert_maps_equal(got[1]["energy"], expected[1]["energy"])
    assert not any("neighbors" in name for name in os.listdir(tmp_path))


def test_patches_installed_from_threads_at_once_and_by_later_modules():
    """In a fresh process: four threads install at once (each import slowed
    down, so that they overlap): metatrain's originals are what uninstall
    puts back, not another thread's wrappers; architectures imported after
    install (pet, llpr, composition, scaler) hold the wrappers; install
    and uninstall twice are no-ops."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import importlib, sys, threading, time, warnings
        warnings.simplefilter("ignore")
        import blockmap.metatrain as bm
        from blockmap.metatrain import _patch
        import metatrain.utils.data.dataset as data

        original = data.CollateFn.__call__
        unpack = data.unpack_batch
        real = importlib.import_module

        def slow(name, *args):
            time.sleep(0.02)
            return real(name, *args)

        importlib.import_module = slow
        threads = [threading.Thread(target=bm.install) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        importlib.import_module = real
        bm.install()
        assert _patch._patched["CollateFn.__call__"][0] is original
        assert _patch._patched["unpack_batch"][0] is unpack
        wrapper = _patch._patched["unpack_batch"][1]
        import metatrain.composition.trainer, metatrain.llpr.trainer
        import metatrain.pet.trainer, metatrain.scaler.trainer
        for name in ("composition", "llpr", "pet", "scaler"):
            assert sys.modules[f"metatrain.{name}.trainer"].unpack_batch is wrapper, name
        bm.uninstall()
        bm.uninstall()
        assert data.CollateFn.__call__ is original and data.unpack_batch is unpack
        assert metatrain.pet.trainer.unpack_batch is unpack
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], timeout=300, capture_output=True, text=True)
    assert done.stdout.strip().endswith("ok"), done.stderr


def test_eval_reads_bmdata_systems_without_targets(tiny, disk, patched):
    import metatrain.cli.eval

    systems = metatrain.cli.eval.read_systems(str(tiny / "xyz.bmdata"), reader=None)
    assert len(systems) == 40
    for i in (0, 21):
        assert_systems_equal(systems[i], disk[i].system)


def test_lists_kept_in_memory_when_the_store_cannot_be_written(tiny, tmp_path, monkeypatch, caplog):
    path = tmp_path / "data.bmdata"
    shutil.copy(tiny / "zip.bmdata", path)

    def refuse(*args, **kwargs):
        raise blockmap.BlockMapIOError("read-only directory")

    monkeypatch.setattr(_neighbors, "DatasetWriter", refuse)
    dataset = MetatrainDataset(path, fields=TARGETS)
    with caplog.at_level("WARNING", logger="blockmap.metatrain._neighbors"):
        store = _neighbors.ensure(dataset, OPTIONS)
    assert "kept in memory" in caplog.text
    assert not os.path.exists(_neighbors.store_path(str(path), (5.0, True, True)))
    assert isinstance(store.maps, list) and len(store.maps) == 40
    expected = _neighbors.ensure(MetatrainDataset(tiny / "zip.bmdata", fields=TARGETS), OPTIONS)
    for i in (0, 39):
        assert torch.equal(store.block(i).values, expected.block(i).values)
        assert store.block(i).samples == expected.block(i).samples


def test_without_metatrain_the_error_says_how_to_install(monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "metatrain" else find_spec(name, *a),
    )
    with pytest.raises(
        ModuleNotFoundError, match=r'pip install "metatrain>=2026\.4,<2026\.5"'
    ) as error:
        blockmap.metatrain.install()
    assert error.value.name == "metatrain"
    assert "pip install blockmap[" not in str(error.value)
