"""Messages and help of ``python -m blockmap.metatrain`` that name the way
out (issue 43), each checked by running the command as a user does: help
of ``train`` / ``eval`` without metatrain's import or third-party
warnings, blockmap's errors inside ``train`` named as blockmap's (not
under metatrain's "open an issue" banner), a ``read_from`` that looks
meant for blockmap naming ``.bmdata``, the conversion of options reading a
DiskDataset zip naming the zip's, labelled progress and what ``convert``
wrote."""

import os
import shutil
import subprocess
import sys

import pytest

import blockmap
import blockmap.metatrain

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.:FutureWarning"),
    pytest.mark.filterwarnings("ignore:register_new_resolver:UserWarning"),
]
pytest.importorskip("metatrain")

from helpers import metatrain_data  # noqa: E402

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def run(*arguments, cwd):
    return subprocess.run(
        [sys.executable, "-m", "blockmap.metatrain", *map(str, arguments)],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize("command", ["train", "eval"])
def test_help_says_what_blockmap_adds_without_importing_metatrain(command, tmp_path):
    probe = (
        "import sys, blockmap.metatrain\n"
        f"status = blockmap.metatrain.main([{command!r}, '--help'])\n"
        "assert status == 0, status\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('metatrain', 'torch', 'metatomic'))\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", probe],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no third-party warnings
    assert f"usage: python -m blockmap.metatrain {command}" in done.stdout
    assert ".bmdata" in done.stdout
    assert "usage: mtt" not in done.stdout
    if command == "train":
        assert "neighbour lists" in done.stdout and "torchrun" in done.stdout


def test_convert_prints_what_it_wrote(tiny, tmp_path):
    done = run("convert", tiny / "data.zip", "out.bmdata", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = blockmap.Dataset(tmp_path / "out.bmdata")
    size = os.path.getsize(tmp_path / "out.bmdata")
    line = done.stdout.strip()
    assert line.startswith("wrote out.bmdata: 40 entries, ")
    assert f"{len(data.fields)} fields ({', '.join(data.fields)})" in line
    assert f"({size:,} bytes)" in line


def test_convert_progress_labels_every_phase(tiny, tmp_path):
    metatrain_data.write_options(tmp_path / "options.yaml", tiny / "data.xyz")
    done = run("convert", "options.yaml", "out.bmdata", "--progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert "reading the systems of" in err and "ASE" in err
    assert "done in" in err
    assert "reading the targets" in err
    assert "writing 'out.bmdata'" in err
    done = run("convert", tiny / "data.zip", "zip.bmdata", "--progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "converting 'data.zip' into 'zip.bmdata'" in done.stderr


def test_convert_of_options_reading_a_zip_says_to_convert_the_zip(tiny, tmp_path):
    metatrain_data.write_options(tmp_path / "options.yaml", tiny / "data.zip")
    done = run("convert", "options.yaml", "out.bmdata", cwd=tmp_path)
    assert done.returncode == 1
    assert "DiskDataset zip" in done.stderr
    assert f"python -m blockmap.metatrain convert {tiny / 'data.zip'} DEST.bmdata" in done.stderr
    assert not (tmp_path / "out.bmdata").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["data.BMDATA", "data.data", "data.bin"])
def test_a_read_from_meant_for_blockmap_names_bmdata(tiny, tmp_path, name):
    shutil.copy(tiny / "zip.bmdata", tmp_path / name)
    metatrain_data.write_options(tmp_path / "options.yaml", name)
    done = run("train", "options.yaml", cwd=tmp_path)
    assert done.returncode == 1
    out = done.stdout + done.stderr
    assert "blockmap error (blockmap.ValidationError)" in out, out[-3000:]
    assert "ends in '.bmdata'" in out
    assert "python -m blockmap.metatrain train" in out
    assert "metatrain/issues" not in out


@pytest.mark.slow
def test_blockmaps_errors_inside_train_say_they_are_blockmaps(tiny, tmp_path):
    # a dataset of the energies alone, without systems: blockmap's
    # ValidationError when train opens it
    energies = blockmap.Dataset(tiny / "zip.bmdata").field("energy")
    with blockmap.DatasetWriter(tmp_path / "data.bmdata") as writer:
        for tensor in energies:
            writer.write(energy=tensor)
    metatrain_data.write_options(tmp_path / "options.yaml", "data.bmdata")
    done = run("train", "options.yaml", cwd=tmp_path)
    assert done.returncode == 1
    out = done.stdout + done.stderr
    assert "blockmap error (blockmap.ValidationError)" in out, out[-3000:]
    assert "it has no 'system' field" in out
    assert "metatrain/issues" not in out
    assert "error.log" in out  # where the traceback is


@pytest.mark.slow
def test_metatrains_own_errors_keep_metatrains_banner(tiny, tmp_path):
    metatrain_data.write_options(tmp_path / "options.yaml", tmp_path / "absent.xyz")
    done = run("train", "options.yaml", cwd=tmp_path)
    assert done.returncode == 1
    out = done.stdout + done.stderr
    assert "blockmap error" not in out


def test_train_says_when_a_neighbor_store_is_computed_reused_and_why(tiny, tmp_path, caplog):
    import torch  # noqa: F401 - metatomic's options need it loaded
    from metatomic.torch import NeighborListOptions

    from blockmap.metatrain import _neighbors
    from blockmap.metatrain._dataset import MetatrainDataset

    path = tmp_path / "data.bmdata"
    shutil.copy(tiny / "zip.bmdata", path)
    options = NeighborListOptions(cutoff=5.0, full_list=True, strict=True)
    store = _neighbors.store_path(str(path), (5.0, True, True))

    def messages():
        caplog.clear()
        with caplog.at_level("INFO", logger="blockmap.metatrain._neighbors"):
            _neighbors.ensure(MetatrainDataset(path, fields=["energy"]), options)
        return caplog.text

    first = messages()
    assert "neighbour lists (cutoff 5.0, full list, strict): computing them for the 40" in first
    assert "(there is no store yet)" in first
    assert "4 of 40 structures" in first and "40 structures computed in" in first
    again = messages()
    assert f"reusing the store {store}, computed for this dataset by metatrain" in again
    assert "computing" not in again
    # the dataset written again: the store beside it is another dataset's
    blockmap.metatrain.convert(tiny / "data.zip", path, overwrite=True)
    assert "the store there is not used: it was computed for another dataset" in messages()


def test_convert_says_what_train_does_with_a_store_beside_dest(tiny, tmp_path):
    path = tmp_path / "data.bmdata"
    shutil.copy(tiny / "zip.bmdata", path)
    beside = tmp_path / "data.bmdata.neighbors-5.0-full-strict.bmdata"
    with blockmap.DatasetWriter(beside) as writer:
        tensor = blockmap.Dataset(path)[0].system
        tensor.set_info("dataset_id", "another")
        writer.write(tensor)
    done = run("convert", tiny / "data.zip", "data.bmdata", "--overwrite", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        f"the neighbour-list store {beside.name} was computed for another dataset of this "
        "name: train computes the lists again and replaces it"
    ) in done.stdout
