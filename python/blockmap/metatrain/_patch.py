"""The patches that make metatrain serve ``.bmdata`` datasets with
blockmap, everything else left as it is.

- ``get_dataset`` (as ``metatrain.cli.train``, ``metatrain.cli.eval`` and
  ``metatrain.utils.data`` hold it): a ``read_from`` ending in ``.bmdata``
  opens a :class:`~._dataset.MetatrainDataset`, anything else goes to
  metatrain's own; ``read_systems`` likewise (``mtt eval`` without targets);
- ``CollateFn.__call__``: batches of blockmap items go through
  :func:`~._batch.collate`, others through metatrain's own;
- ``unpack_batch`` and ``get_system_with_neighbor_lists_transform``:
  metatrain's modules import them by name, so every loaded ``metatrain.*``
  module that holds the original gets the wrapper, when the patches are
  installed and again at each ``get_dataset`` (architectures are imported
  late). The transform's wrapper makes sure the neighbour lists of every
  blockmap dataset opened are stored (computed here, in the main process,
  before any DataLoader worker forks).

:func:`install` is idempotent; :func:`uninstall` puts the originals back.
These functions are metatrain's internals, not an API it keeps: the
patches are installed only on the metatrain versions they were written
for and tested with (:data:`SUPPORTED`, in :mod:`._version`, the range of
blockmap's ``metatrain`` extra); on another, :func:`install` raises an
``ImportError`` naming that range, and patches nothing.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from .. import Dataset
from ..exceptions import BlockMapError, ValidationError
from . import _batch, _dataset, _distributed, _neighbors
from ._version import SUPPORTED, check_version, require_tested

__all__ = ["SUPPORTED", "check_version", "install", "uninstall"]

#: name -> (original, wrapper), filled by install()
_patched: dict[str, tuple[Any, Any]] = {}

#: held by install, uninstall and _walk: two threads installing at once
#: would otherwise both take the first one's wrappers for metatrain's
#: originals (and uninstall would put wrappers back)
_LOCK = threading.RLock()


def _bmdata(path: Any) -> bool:
    return str(path).endswith(".bmdata")


def _not_bmdata(read_from: Any, error: Exception) -> str | None:
    """The message naming ``.bmdata`` when metatrain found no reader for
    ``read_from`` (``error``) and it looks meant for blockmap: a suffix
    ``.bmdata`` in other case, ``.data``, or a blockmap dataset under
    another name."""
    if "not linked to a default reader" not in str(error):
        return None
    path = str(read_from)
    suffix = os.path.splitext(path)[1]
    if suffix.lower() in (".bmdata", ".data"):
        why = f"it ends in '{suffix}'"
    else:
        try:
            Dataset(path)
        except BlockMapError:
            return None
        why = "it is a blockmap dataset"
    return (
        f"read_from '{path}': {why}, and blockmap serves the datasets whose read_from "
        "ends in '.bmdata' (lower case), under `python -m blockmap.metatrain train` / "
        "`eval`: rename the file (or write it with `python -m blockmap.metatrain convert "
        f"SOURCE DEST.bmdata`); metatrain says: {error}"
    )


def _walk() -> None:
    """Replace the originals held by every loaded metatrain module."""
    with _LOCK:
        _walk_locked()


def _walk_locked() -> None:
    _replace({id(original): wrapper for original, wrapper in _patched.values()})


def _replace(by_id: dict[int, Any]) -> None:
    """Set every attribute of a loaded metatrain module whose value's id is
    a key of ``by_id`` to that key's value."""
    for name, module in list(sys.modules.items()):
        if not (name == "metatrain" or name.startswith("metatrain.")) or module is None:
            continue
        namespace = getattr(module, "__dict__", None)
        if namespace is None:
            continue
        for attribute, value in list(namespace.items()):
            replacement = by_id.get(id(value))
            if replacement is not None:
                setattr(module, attribute, replacement)


def install() -> None:
    """Install the patches (again: a no-op)."""
    with _LOCK:
        _install_locked()


def _install_locked() -> None:
    if _patched:
        _walk()
        return
    import importlib

    require_tested()
    from metatrain.utils import neighbor_lists

    data_module = importlib.import_module("metatrain.utils.data.dataset")
    # metatrain.utils.data's attribute get_dataset is the function: the
    # module, from sys.modules
    get_dataset_module = importlib.import_module("metatrain.utils.data.get_dataset")
    readers = importlib.import_module("metatrain.utils.data.readers")

    original_get_dataset = get_dataset_module.get_dataset
    original_read_systems = readers.read_systems
    original_unpack = data_module.unpack_batch
    original_transform = neighbor_lists.get_system_with_neighbor_lists_transform
    original_call = data_module.CollateFn.__call__
    slurm = importlib.import_module("metatrain.utils.distributed.slurm")
    distributed_logging = importlib.import_module("metatrain.utils.distributed.logging")
    ddp_module = importlib.import_module("metatrain.utils.distributed.distributed_data_parallel")
    original_ddp_init = ddp_module.DistributedDataParallel.__init__
    distributed = _distributed.replacements(
        {
            "resolve_distributed": slurm.resolve_distributed,
            "is_main_process": distributed_logging.is_main_process,
            "initialize_slurm_nccl_process_group": slurm.initialize_slurm_nccl_process_group,
        }
    )

    def get_dataset(options: Any) -> Any:
        _walk()
        read_from = options["systems"]["read_from"]
        if not _bmdata(read_from):
            try:
                return original_get_dataset(options)
            except ValueError as error:
                hint = _not_bmdata(read_from, error)
                if hint is None:
                    raise
                raise ValidationError(hint) from error
        targets = options["targets"]
        extra_data = options.get("extra_data", {}) or {}
        dataset = _dataset.MetatrainDataset(
            options["systems"]["read_from"], fields={**targets, **extra_data}
        )
        _dataset.opened.add(dataset)
        target_info = dataset.get_target_info(targets)
        extra_info = dataset.get_target_info(extra_data, is_extra_data=True)
        return dataset, target_info, extra_info

    def read_systems(filename: Any, *args: Any, **kwargs: Any) -> Any:
        if not _bmdata(filename):
            return original_read_systems(filename, *args, **kwargs)
        dataset = _dataset.MetatrainDataset(filename, fields=[])
        return [dataset.system(i) for i in range(len(dataset))]

    def unpack_batch(batch: Any) -> Any:
        if type(batch) is _batch.Batch:
            return _batch.unpack(batch)
        return original_unpack(batch)

    def get_system_with_neighbor_lists_transform(requested: Any) -> Any:
        transform = original_transform(requested)

        def ensure() -> None:
            for dataset in list(_dataset.opened):
                for options in requested:
                    _neighbors.ensure(dataset, options)

        # one process computes and writes a store, the others open it
        _distributed.main_process_first(ensure)
        return _batch.NeighborTransform(transform, list(requested))

    def call(self: Any, batch: Any) -> Any:
        if _batch.is_blockmap_batch(batch):
            return _batch.collate(self.target_keys, self.callables, batch)
        return original_call(self, batch)

    for wrapper, original in (
        (get_dataset, original_get_dataset),
        (read_systems, original_read_systems),
        (unpack_batch, original_unpack),
        (get_system_with_neighbor_lists_transform, original_transform),
        (distributed["resolve_distributed"], slurm.resolve_distributed),
        (distributed["is_main_process"], distributed_logging.is_main_process),
        (
            distributed["initialize_slurm_nccl_process_group"],
            slurm.initialize_slurm_nccl_process_group,
        ),
    ):
        wrapper.__doc__ = original.__doc__
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        _patched[original.__name__] = (original, wrapper)
    _patched["CollateFn.__call__"] = (original_call, call)
    data_module.CollateFn.__call__ = call  # type: ignore[method-assign]
    ddp_init = _distributed.ddp_init(original_ddp_init)
    _patched["DistributedDataParallel.__init__"] = (original_ddp_init, ddp_init)
    ddp_module.DistributedDataParallel.__init__ = ddp_init
    _dataset.patched = True
    _walk()


def uninstall() -> None:
    """Put metatrain's originals back."""
    with _LOCK:
        _uninstall_locked()


def _uninstall_locked() -> None:
    if not _patched:
        return
    import importlib

    data_module = importlib.import_module("metatrain.utils.data.dataset")
    original_call, _ = _patched.pop("CollateFn.__call__")
    data_module.CollateFn.__call__ = original_call  # type: ignore[method-assign]
    ddp_module = importlib.import_module("metatrain.utils.distributed.distributed_data_parallel")
    original_ddp_init, _ = _patched.pop("DistributedDataParallel.__init__")
    ddp_module.DistributedDataParallel.__init__ = original_ddp_init
    _replace({id(wrapper): original for original, wrapper in _patched.values()})
    _patched.clear()
    _dataset.patched = False
