"""Distributed training from one .bmdata (issue 43): ``torchrun
--nproc_per_node 2 -m blockmap.metatrain train`` and the same under SLURM's
variables (two processes started as ``srun`` starts them), on CPU (gloo):
each run is a DistributedDataParallel training with one process group of
2, only rank 0 writes the checkpoints, logs and final model, each rank
reads about half of what the trainer reads, and the final weights and
optimizer state equal those of the same launch reading metatrain's
DiskDataset zip (the oracle, run here too).

Each process runs tests/python/helpers/metatrain_ddp.py, which calls
``blockmap.metatrain.main`` and counts the entries each rank reads inside
the trainer (``MetatrainDataset.read_counts``, ``bytes_read()``)."""

import json
import os
import socket
import subprocess
import sys

import pytest

from helpers import TESTS_DIR, metatrain_data

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:`torch.jit.:FutureWarning"),
    pytest.mark.filterwarnings("ignore:register_new_resolver:UserWarning"),
]
pytest.importorskip("metatrain")
torch = pytest.importorskip("torch")

HELPER = TESTS_DIR / "helpers" / "metatrain_ddp.py"
#: what a launcher of one machine sets; removed so that each run sees only its own
LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def environment(**extra):
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in LAUNCH_VARIABLES and not name.startswith(("SLURM_", "TORCHELASTIC_"))
    }
    env.update(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", **extra)
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def options(directory, read_from, port=None):
    path = directory / "options.yaml"
    metatrain_data.write_options(path, read_from, epochs=2, workers=0)
    if port is not None:
        text = path.read_text().replace(
            "    num_workers: 0\n", f"    num_workers: 0\n    distributed_port: {port}\n"
        )
        path.write_text(text)
    return path


def torchrun(directory, read_from):
    directory.mkdir()
    options(directory, read_from)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node", "2", str(HELPER), "reads", "train", "options.yaml"]
    command += ["-o", "model.pt"]
    done = subprocess.run(
        command, cwd=directory, env=environment(), capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return directory


def slurm(directory, read_from):
    """Two tasks as ``srun --ntasks 2`` starts them on one node."""
    directory.mkdir()
    options(directory, read_from, port=free_port())
    command = [sys.executable, str(HELPER), "reads", "train", "options.yaml", "-o", "model.pt"]
    tasks = []
    for rank in range(2):
        env = environment(
            SLURM_JOB_ID="4242",
            SLURM_PROCID=str(rank),
            SLURM_LOCALID=str(rank),
            SLURM_NTASKS="2",
            SLURM_JOB_NODELIST="localhost",
        )
        tasks.append(
            subprocess.Popen(
                command,
                cwd=directory,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [task.communicate(timeout=900)[0] for task in tasks]
    for task, output in zip(tasks, outputs, strict=True):
        assert task.returncode == 0, output[-4000:]
    return directory


def reads(directory):
    return [json.loads((directory / f"reads.{rank}.json").read_text()) for rank in range(2)]


def state(directory):
    checkpoint = torch.load(directory / "model.ckpt", weights_only=False, map_location="cpu")
    return checkpoint["model_state_dict"], checkpoint["optimizer_state_dict"]


#: the atomic types of the tiny dataset (Ni, Cu)
TYPES = [28, 29]


def assert_equal(left, right, where=""):
    if where.endswith("type_to_index"):
        # a lookup table metatrain makes with torch.empty and fills at the
        # atomic types only: the rest is whatever the memory held
        assert torch.equal(left[TYPES], right[TYPES]), where
    elif isinstance(left, torch.Tensor):
        assert isinstance(right, torch.Tensor) and torch.equal(left, right), where
    elif isinstance(left, dict):
        assert set(left) == set(right), where
        for key in left:
            assert_equal(left[key], right[key], f"{where}/{key}")
    elif isinstance(left, (list, tuple)):
        assert len(left) == len(right), where
        for i, (a, b) in enumerate(zip(left, right, strict=True)):
            assert_equal(a, b, f"{where}/{i}")
    else:
        assert left == right, where


def written(directory):
    """The files of the run, relative to its directory."""
    return sorted(
        str(path.relative_to(directory)) for path in directory.rglob("*") if path.is_file()
    )


@pytest.fixture(scope="module")
def runs(tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    return {
        "disk": torchrun(root / "disk", tiny / "data.zip"),
        "torchrun": torchrun(root / "torchrun", tiny / "zip.bmdata"),
        "slurm": slurm(root / "slurm", tiny / "zip.bmdata"),
    }


@pytest.mark.parametrize("launch", ["torchrun", "slurm"])
def test_two_processes_train_one_model_equal_to_the_diskdataset_oracle(runs, launch):
    ours, oracle = reads(runs[launch]), reads(runs["disk"])
    # one process group of 2 on CPU, in each rank of each run
    for record in ours + oracle:
        assert (record["world"], record["backend"]) == (2, "gloo")
    model, optimizer = state(runs[launch])
    disk_model, disk_optimizer = state(runs["disk"])
    assert_equal(model, disk_model, "model")
    assert_equal(optimizer, disk_optimizer, "optimizer")


@pytest.mark.parametrize("launch", ["torchrun", "slurm"])
def test_only_rank_zero_writes(runs, launch):
    directory = runs[launch]
    files = written(directory)
    # one run directory (outputs/<date>/<time>), made by rank 0: every
    # process of a launch without the patches believes it is the main one,
    # makes its own (or the next, "<time>.1") and writes into it
    made = sorted({str(p.relative_to(directory)) for p in directory.glob("outputs/*/*")})
    assert len(made) == 1, files
    for name in ("train.log", "train.csv", "options_restart.yaml", "model.ckpt", "model.pt"):
        assert f"{made[0]}/{name}" in files, files
    assert "model.pt" in files and "model.ckpt" in files
    # the log of one process: each of the 2 epochs logged once
    # the neighbour-list store of the dataset: computed by rank 0 alone
    # (the first run here), or opened by both
    computed = [record["lists_computed"] for record in reads(directory)]
    assert computed in ([40, 0], [0, 0]), computed
    log = (directory / made[0] / "train.log").read_text()
    assert log.count("Epoch") == 2, log
    assert log.count("Training finished") == 1, log


@pytest.mark.parametrize("launch", ["torchrun", "slurm"])
def test_each_rank_reads_its_own_share(runs, launch):
    ours = reads(runs[launch])
    total = sum(record["entries"] for record in ours)
    assert total > 0
    for record in ours:
        # each rank reads about half of what the two read inside the
        # trainer (DistributedSampler pads a shard by at most one entry
        # per pass: 5 passes here)
        assert record["entries"] <= total / 2 + 5, (record["entries"], total)
        assert 0 < record["bytes"] < record["dataset_bytes"][0] * 2
    # what a DiskDataset rank reads, entry for entry
    oracle = reads(runs["disk"])
    assert sorted(record["entries"] for record in ours) == sorted(
        record["entries"] for record in oracle
    )
