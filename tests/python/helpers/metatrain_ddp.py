"""One process of a distributed ``python -m blockmap.metatrain`` run
(a torchrun rank or a SLURM task), counting what it reads.

usage: python metatrain_ddp.py OUT_PREFIX COMMAND [arguments of python -m blockmap.metatrain]

Runs :func:`blockmap.metatrain.main` with the arguments, and writes
``OUT_PREFIX.<rank>.json``: ``{"rank", "world", "entries", "bytes",
"indices", "processes"}`` where ``entries`` / ``bytes`` / ``indices`` are
the dataset entries (``ds[i]``) read inside the trainer's ``train`` (the
composition and scaler passes, the epochs, the validation), by this
process: the ``read_counts`` of blockmap's datasets (and their
``bytes_read``), or the items metatrain's ``DiskDataset`` gave. Workers
are not used (``num_workers: 0``), so every read happens here.
"""

import json
import os
import sys

import torch

torch.set_num_threads(1)
OUT, ARGS = sys.argv[1], sys.argv[2:]

import blockmap.metatrain  # noqa: E402

blockmap.metatrain.install()

import metatrain.soap_bpnn.trainer as trainer_module  # noqa: E402
import metatrain.utils.data.dataset as data_module  # noqa: E402

from blockmap.metatrain import _dataset, _neighbors  # noqa: E402

rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
disk_reads = []
inside = [False]
original_getitem = data_module.DiskDataset.__getitem__


def getitem(self, index):
    if inside[0]:
        disk_reads.append(int(index))
    return original_getitem(self, index)


data_module.DiskDataset.__getitem__ = getitem
original_train = trainer_module.Trainer.train


def train(self, *args, **kwargs):
    datasets = list(_dataset.opened)
    before = [(d.read_counts.copy(), d.bytes_read()) for d in datasets]
    inside[0] = True
    try:
        return original_train(self, *args, **kwargs)
    finally:
        inside[0] = False
        entries = len(disk_reads)
        read_bytes = 0
        indices = sorted(set(disk_reads))
        for dataset, (counts, start) in zip(datasets, before, strict=True):
            entries += int((dataset.read_counts - counts).sum())
            read_bytes += dataset.bytes_read() - start
            indices += [int(i) for i in (dataset.read_counts - counts).nonzero()[0]]
        record = {
            "rank": rank,
            "world": world[0],
            "backend": world[1] if len(world) > 1 else None,
            "entries": entries,
            "bytes": read_bytes,
            "indices": sorted(indices),
            "dataset_entries": [len(d) for d in datasets],
            "dataset_bytes": [os.path.getsize(d.path) for d in datasets],
        }
        record.update(memory({os.path.realpath(d.path) for d in datasets}))
        # the structures whose neighbour lists this process computed
        record["lists_computed"] = _neighbors.computed
        with open(f"{OUT}.{rank}.json", "w") as file:
            json.dump(record, file)


def memory(paths):
    """This process's peak resident set (VmHWM), and the resident and
    proportional sizes of its mappings of ``paths`` (the page cache the
    ranks share: PSS divides each page among the processes mapping it),
    in kB."""
    with open("/proc/self/status") as file:
        peak = next(int(line.split()[1]) for line in file if line.startswith("VmHWM:"))
    rss = pss = 0
    inside_mapping = False
    with open("/proc/self/smaps") as file:
        for line in file:
            fields = line.split()
            if "-" in fields[0] and ":" not in fields[0]:
                inside_mapping = len(fields) >= 6 and os.path.realpath(fields[5]) in paths
            elif inside_mapping and fields[0] == "Rss:":
                rss += int(fields[1])
            elif inside_mapping and fields[0] == "Pss:":
                pss += int(fields[1])
    return {"peak_rss_kb": peak, "mapping_rss_kb": rss, "mapping_pss_kb": pss}


trainer_module.Trainer.train = train
world = [1]  # the size of the process group the trainer made
original_destroy = torch.distributed.destroy_process_group


def destroy(*args, **kwargs):
    world[0] = torch.distributed.get_world_size()
    world.append(torch.distributed.get_backend())
    return original_destroy(*args, **kwargs)


torch.distributed.destroy_process_group = destroy
sys.exit(blockmap.metatrain.main(ARGS))
