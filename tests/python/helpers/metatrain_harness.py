"""Run metatrain's ``mtt train`` in this process, recording every training
and validation loss (``float.hex``) and where each epoch's time goes.

usage: python metatrain_harness.py MODE OPTIONS.yaml OUT.json [mtt train arguments]

MODE: ``plain`` (metatrain alone), ``blockmap-first`` (blockmap.metatrain
imported and installed before metatrain is imported), ``metatrain-first``
(metatrain's CLI and the soap_bpnn trainer imported first). OUT.json gets
``{"epochs": [{"epoch_s", "getitem", "collate", "unpack", "losses"}],
"blockmap_batches": n}``; with DataLoader workers, item reading and
collation happen in the workers and read 0 here.
"""

import atexit
import json
import sys
import time

import torch

torch.set_num_threads(1)
MODE, OPTIONS, OUT = sys.argv[1:4]
EXTRA = sys.argv[4:]

if MODE == "blockmap-first":
    import blockmap.metatrain

    blockmap.metatrain.install()
elif MODE == "metatrain-first":
    import metatrain.cli.train  # noqa: F401
    import metatrain.soap_bpnn.trainer  # noqa: F401

    import blockmap.metatrain

    blockmap.metatrain.install()
elif MODE != "plain":
    raise SystemExit(f"unknown mode {MODE}")

import metatrain.soap_bpnn.trainer as trainer_module  # noqa: E402
import metatrain.utils.data.dataset as data_module  # noqa: E402
from metatrain.utils.loss import LossAggregator  # noqa: E402

events = []  # (kind, start, duration, extra)


def timed(kind, function):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        out = function(*args, **kwargs)
        events.append((kind, start, time.perf_counter() - start, None))
        return out

    wrapper.__wrapped__ = function
    return wrapper


data_module.DiskDataset.__getitem__ = timed("getitem", data_module.DiskDataset.__getitem__)
data_module.CollateFn.__call__ = timed("collate", data_module.CollateFn.__call__)
trainer_module.unpack_batch = timed("unpack", trainer_module.unpack_batch)
blockmap_batches = [0]
if MODE != "plain":
    from blockmap.metatrain import _batch, _dataset

    _dataset.MetatrainDataset.__getitem__ = timed("getitem", _dataset.MetatrainDataset.__getitem__)
    original_unpack = _batch.unpack

    def unpack(batch):
        blockmap_batches[0] += 1
        return original_unpack(batch)

    _batch.unpack = unpack

original_loss = LossAggregator.__call__


def loss(self, *args, **kwargs):
    out = original_loss(self, *args, **kwargs)
    kind = "train" if torch.is_grad_enabled() else "val"
    events.append(("loss", time.perf_counter(), 0.0, [kind, float(out.item()).hex()]))
    return out


LossAggregator.__call__ = loss
original_accumulator = trainer_module.RMSEAccumulator
accumulators = [0]


def accumulator(*args, **kwargs):
    # made twice at the start of each epoch (training and validation)
    if accumulators[0] % 2 == 0:
        events.append(("epoch_start", time.perf_counter(), 0.0, None))
    accumulators[0] += 1
    return original_accumulator(*args, **kwargs)


trainer_module.RMSEAccumulator = accumulator
original_train = trainer_module.Trainer.train


def train(self, *args, **kwargs):
    out = original_train(self, *args, **kwargs)
    events.append(("train_end", time.perf_counter(), 0.0, None))
    return out


trainer_module.Trainer.train = train


def dump():
    bounds = [e[1] for e in events if e[0] == "epoch_start"]
    bounds += [e[1] for e in events if e[0] == "train_end"][:1]
    epochs = []
    for low, high in zip(bounds[:-1], bounds[1:], strict=True):
        inside = [e for e in events if low <= e[1] < high]
        epoch = {
            k: sum(e[2] for e in inside if e[0] == k) for k in ("getitem", "collate", "unpack")
        }
        epoch["epoch_s"] = high - low
        epoch["losses"] = [e[3] for e in inside if e[0] == "loss"]
        epochs.append(epoch)
    with open(OUT, "w") as file:
        json.dump({"epochs": epochs, "blockmap_batches": blockmap_batches[0]}, file, indent=1)


atexit.register(dump)
argv = ["train", OPTIONS, "-o", OUT.replace(".json", ".pt"), *EXTRA]
if MODE == "plain":
    from metatrain.__main__ import main

    sys.argv = ["mtt", *argv]
    main()
else:
    sys.exit(blockmap.metatrain.main(argv))
