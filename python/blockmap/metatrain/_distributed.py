"""Distributed training under ``torchrun`` and SLURM, on CPU and CUDA: the
replacements :mod:`._patch` installs for metatrain's own.

metatrain 2026.4 turns distributed training on only from SLURM variables
(``resolve_distributed``), tells its main process from ``SLURM_PROCID``
alone (``is_main_process``: under ``torchrun`` every process believes it
is the main one, and they overwrite each other's checkpoints and logs),
and starts NCCL on a CUDA device unconditionally
(``initialize_slurm_nccl_process_group``: on a CPU-only machine,
``local_rank % torch.cuda.device_count()`` divides by zero), then wraps
the model in ``DistributedDataParallel(model, device_ids=[device])``,
which torch refuses for a CPU model. Here:

- the launch is read from ``torchrun``'s variables (``RANK``,
  ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``, set
  by torchrun and by any launcher that follows its convention) when they
  are there, else from SLURM's (``SLURM_PROCID``, ``SLURM_NTASKS``,
  ``SLURM_LOCALID``, through metatrain's own ``DistributedEnvironment``);
- the process group is NCCL on CUDA when CUDA devices are visible
  (metatrain's own choice of device: the local rank modulo the devices
  visible), gloo on CPU otherwise;
- ``DistributedDataParallel`` of a CPU model gets no ``device_ids``.

These are what metatrain does in each case where it works (SLURM with
CUDA): nothing changes there.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["launch", "replacements"]


def launch() -> tuple[str, int, int, int] | None:
    """The launcher of this process and its (rank, local rank, world size):
    ``("torchrun", ...)`` when torchrun's variables are set, ``("slurm",
    ...)`` inside a SLURM job step, ``None`` otherwise."""
    env = os.environ
    if all(name in env for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")):
        try:
            return (
                "torchrun",
                int(env["RANK"]),
                int(env["LOCAL_RANK"]),
                int(env["WORLD_SIZE"]),
            )
        except ValueError:
            return None
    if "SLURM_JOB_ID" in env and "SLURM_PROCID" in env:
        try:
            return (
                "slurm",
                int(env["SLURM_PROCID"]),
                int(env.get("SLURM_LOCALID", "0")),
                int(env.get("SLURM_NTASKS", "1")),
            )
        except ValueError:
            return None
    return None


def replacements(original: dict[str, Any]) -> dict[str, Any]:
    """The replacements of metatrain's ``resolve_distributed``,
    ``is_main_process`` and ``initialize_slurm_nccl_process_group``
    (``original`` holds metatrain's, by name)."""
    original_resolve = original["resolve_distributed"]
    original_main = original["is_main_process"]

    def resolve_distributed(distributed: Any) -> bool:
        found = launch()
        if distributed is None and found is not None and found[0] == "torchrun":
            return found[3] > 1
        return bool(original_resolve(distributed))

    def is_main_process() -> bool:
        found = launch()
        if found is not None and found[0] == "torchrun":
            return found[1] == 0
        return bool(original_main())

    def initialize_slurm_nccl_process_group(port: int) -> tuple[Any, int, int]:
        import torch
        import torch.distributed

        found = launch()
        if found is None or found[0] == "slurm":
            # sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and LOCAL_RANK
            # from SLURM's variables, as metatrain does
            from metatrain.utils.distributed.slurm import DistributedEnvironment

            DistributedEnvironment(port)
        local_rank = int(os.environ["LOCAL_RANK"])
        if torch.cuda.is_available() and torch.cuda.device_count() > 0:
            device = torch.device("cuda", local_rank % torch.cuda.device_count())
            torch.cuda.set_device(device)
            torch.distributed.init_process_group(backend="nccl", device_id=device)
        else:
            device = torch.device("cpu")
            torch.distributed.init_process_group(backend="gloo")
        return device, torch.distributed.get_world_size(), torch.distributed.get_rank()

    return {
        "resolve_distributed": resolve_distributed,
        "is_main_process": is_main_process,
        "initialize_slurm_nccl_process_group": initialize_slurm_nccl_process_group,
    }


def ddp_init(original_init: Any) -> Any:
    """metatrain's ``DistributedDataParallel.__init__``, without
    ``device_ids`` for a model on the CPU (torch refuses them there)."""

    def __init__(self: Any, module: Any, *args: Any, **kwargs: Any) -> None:
        device_ids = kwargs.get("device_ids")
        if device_ids is not None and all(
            getattr(device, "type", device) == "cpu" for device in device_ids
        ):
            kwargs["device_ids"] = None
        original_init(self, module, *args, **kwargs)

    return __init__


def main_process_first(function: Any) -> None:
    """Call ``function`` in rank 0 first, then, once it is done, in the
    other ranks of the default process group (when one is initialized and
    has more than one rank; otherwise just call it): what rank 0 writes
    (a neighbour-list store) the others open instead of computing and
    writing it again at the same time."""
    import torch.distributed

    if not (
        torch.distributed.is_available()
        and torch.distributed.is_initialized()
        and torch.distributed.get_world_size() > 1
    ):
        function()
        return
    if torch.distributed.get_rank() == 0:
        function()
    torch.distributed.barrier()
    if torch.distributed.get_rank() != 0:
        function()
