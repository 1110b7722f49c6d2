"""A public API to add training structures to a ``.bmdata`` dataset
(active learning): :class:`Writer`.

What it writes for a structure is what :func:`blockmap.metatrain.convert`
writes for the same structure in an xyz file, entry for entry: an
``ase.Atoms`` is read by metatrain's own readers (its ASE reader, under the
``targets`` options given), through a one-structure extxyz file, and
written by convert's own code (``_convert._from_readers``); the entry's
``system`` sample index is its index in the dataset, as convert's is.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

# blockmap.DatasetWriter, from the package: blockmap.dataset imports this
# package
from .. import DatasetWriter
from ..exceptions import BlockMapTypeError, ValidationError
from ._convert import _fixed, _from_readers, _path
from ._version import require_tested

__all__ = ["Writer"]


class Writer:
    """Add training structures to the dataset at ``path`` (``.bmdata``, as
    ``python -m blockmap.metatrain train`` reads it).

    Parameters
    ----------
    path : str or os.PathLike
        The dataset.
    targets : dict
        The ``targets:`` section of metatrain options (as an options file
        gives it to ``convert``): which target each quantity is, its key in
        the structures' info or arrays, its gradients (forces, stress).
    append : bool, optional
        Add to the dataset ``path`` holds (its neighbour lists stored
        beside it are computed again at the next training: their store
        names the entry count and checksum they were computed for).
    overwrite : bool, optional
        Replace what ``path`` holds (at the first commit, atomically).

    ``write(atoms)`` adds an ``ase.Atoms``; ``write(system, energy=...)`` a
    metatomic ``System`` with its targets as maps (metatensor-torch or
    blockmap ``TensorMap``). ``close()`` (or leaving a ``with`` block)
    commits, as :class:`blockmap.DatasetWriter`; a block that raises gives
    up a new dataset.

    Raises
    ------
    ExistingFileError
        If ``path`` exists and neither ``append`` nor ``overwrite`` is set.
    ModuleNotFoundError
        If metatrain is not installed.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        targets: Any,
        *,
        append: bool = False,
        overwrite: bool = False,
    ) -> None:
        require_tested()
        self.path = _path(path, "path")
        if not self.path.endswith(".bmdata"):
            raise ValidationError(
                f"'{self.path}' must end in '.bmdata' (metatrain serves a dataset with "
                "blockmap by that suffix)"
            )
        if not hasattr(targets, "items"):
            raise BlockMapTypeError(
                f"targets must be the targets section of metatrain options (a mapping), "
                f"not {type(targets).__name__}"
            )
        self.targets = targets
        self._writer = DatasetWriter(self.path, append=append, overwrite=overwrite)
        self._scratch = tempfile.TemporaryDirectory(prefix="blockmap-writer-")

    def __len__(self) -> int:
        return len(self._writer)

    def write(self, structure: Any, /, **targets: Any) -> None:
        """Add one structure: an ``ase.Atoms`` (its targets read from it as
        metatrain's ASE reader reads them under this writer's ``targets``),
        or a metatomic ``System`` with its targets as maps
        (``write(system, energy=tensor)``, the maps of that one structure).
        The entry is in the file when this returns."""
        import ase

        if isinstance(structure, ase.Atoms):
            if targets:
                raise ValidationError(
                    "the targets of an ase.Atoms are read from it (its info and arrays), "
                    "under the writer's targets options: not given as maps"
                )
            self._write_atoms(structure)
            return
        # metatomic's System is a TorchScript class: known by what it has
        if not all(hasattr(structure, name) for name in ("positions", "types", "cell", "pbc")):
            raise BlockMapTypeError(
                f"write() takes an ase.Atoms or a metatomic System, not {type(structure).__name__}"
            )
        self._write_system(structure, targets)

    def _write_atoms(self, atoms: Any) -> None:
        import ase.io
        from metatrain.utils.omegaconf import expand_dataset_config
        from omegaconf import OmegaConf

        xyz = os.path.join(self._scratch.name, "structure.xyz")
        ase.io.write(xyz, atoms, format="extxyz")
        config = expand_dataset_config(
            OmegaConf.create(
                {
                    "systems": {"read_from": xyz, "reader": "ase"},
                    "targets": _with_files(self.targets, xyz),
                }
            )
        )[0]
        _from_readers(config, self._writer, progress=False, start=len(self._writer))

    def _write_system(self, system: Any, targets: dict[str, Any]) -> None:
        import torch

        from .._blockmap import TensorMap
        from .._systems import tensormaps_from_system
        from ..metatensor_torch import from_metatensor_torch

        names = list(self.targets)
        if sorted(targets) != sorted(names):
            raise ValidationError(
                f"write(system, ...) takes the maps of the targets {names}, got {sorted(targets)}"
            )
        index = len(self._writer)
        system = system.to(dtype=torch.float64)
        maps = {
            "system" if name == "system" else f"system/{name}": tensor
            for name, tensor in tensormaps_from_system(system).items()
        }
        for name in names:
            tensor = targets[name]
            if not isinstance(tensor, TensorMap):
                tensor = from_metatensor_torch(tensor.to(dtype=torch.float64))
            maps[name] = _fixed(tensor, index)
        self._writer.write(**maps, columns={"n_atoms": len(system)})

    def commit(self) -> None:
        """Commit what was written (``DatasetWriter.commit``)."""
        self._writer.commit()

    def close(self) -> None:
        """Commit and close."""
        self._writer.close()
        self._scratch.cleanup()

    def abort(self) -> None:
        """Give up a new dataset not in place yet (``DatasetWriter.abort``)."""
        self._writer.abort()
        self._scratch.cleanup()

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type: Any, *args: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __repr__(self) -> str:
        return f"blockmap.metatrain.Writer('{self.path}', {len(self)} structures)"


def _with_files(targets: Any, xyz: str) -> dict[str, Any]:
    """The ``targets`` options, each read from ``xyz`` (the structure's own
    file: where metatrain's readers find its info and arrays)."""
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(OmegaConf.create(targets), resolve=True)
    assert isinstance(plain, dict)
    out: dict[str, Any] = {}
    for name, conf in plain.items():
        if isinstance(conf, str):
            # the short form: ``energy: key``
            conf = {"key": conf}
        conf = dict(conf or {})
        conf["read_from"] = xyz
        conf.setdefault("reader", "ase")
        for gradient in ("forces", "stress", "virial"):
            value = conf.get(gradient)
            if isinstance(value, dict):
                conf[gradient] = {**value, "read_from": xyz}
                conf[gradient].setdefault("reader", "ase")
        out[name] = conf
    return out
