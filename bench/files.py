"""The ``files`` family of the benchmark: save W to a file, load it, map it.

blockmap saves and loads ``.mts`` files, numpy an ``.npz`` (and, to map it,
one ``.npy`` per array), metatensor-core its ``.mts`` (it cannot map a file),
safetensors one ``.safetensors`` file of W's arrays (``save_file``,
``load_file``, and ``safe_open`` with ``get_slice`` for the lazy load).
The files that load operations read are prepared once per benchmark run
(:func:`bench.registry.register_prepared`); a saved file is deleted after its
size is noted. Registered into :data:`bench.registry.OPERATIONS` on import,
with the goals of issue 3 ("Benchmark", and its memory bound on save).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from .checks import check_list, check_map
from .measure import format_bytes
from .registry import (
    LIBRARIES,
    OTHER_NAME,
    SAFETENSORS,
    TARGETS,
    CheckError,
    Context,
    Implementation,
    Operation,
    memory_goal,
    register,
    register_prepared,
    relative_memory_goal,
    time_goal,
)
from .workload import WorkloadArrays, build_blockmap, build_metatensor, flat_arrays

__all__ = ["BLOCKMAP_FILE", "METATENSOR_FILE", "NUMPY_DIR", "NUMPY_FILE", "SAFETENSORS_FILE"]


def _fresh_path(context: Context, library: str, suffix: str) -> Path:
    """A path in the work directory that no other process uses."""
    return context.workdir / f"save-{library}-{os.getpid()}{suffix}"


def _finish_save(context: Context, state: tuple[Any, Path], result: Any) -> str:
    """Report the written file's size, then delete it."""
    path = state[1]
    if not path.exists():
        raise CheckError(f"{path.name} was not written")
    size = path.stat().st_size
    path.unlink()
    return f"file {format_bytes(size)}"


# ---------------------------------------------------------------------------
# Prepared files (written once per benchmark run, not timed)
# ---------------------------------------------------------------------------

BLOCKMAP_FILE = "blockmap.mts"
NUMPY_FILE = "numpy.npz"
NUMPY_DIR = "numpy-npy"
METATENSOR_FILE = "metatensor.mts"
SAFETENSORS_FILE = "arrays.safetensors"


def _named(arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
    """W's arrays as safetensors takes them: by name, in flat order."""
    return {f"a{index:05d}": array for index, array in enumerate(arrays)}


def _in_order(named: Any) -> list[Any]:
    """The arrays of a safetensors dict (or lazy file), in flat order."""
    return [named[name] for name in sorted(named.keys())]


@register_prepared(BLOCKMAP_FILE)
def _prepare_blockmap(arrays: WorkloadArrays, path: Path) -> None:
    import blockmap

    blockmap.save(path, build_blockmap(arrays))


@register_prepared(NUMPY_FILE)
def _prepare_numpy(arrays: WorkloadArrays, path: Path) -> None:
    np.savez(path, *flat_arrays(arrays))


@register_prepared(NUMPY_DIR)
def _prepare_numpy_dir(arrays: WorkloadArrays, path: Path) -> None:
    path.mkdir()
    for index, array in enumerate(flat_arrays(arrays)):
        np.save(path / f"{index:05d}.npy", array)


@register_prepared(SAFETENSORS_FILE)
def _prepare_safetensors(arrays: WorkloadArrays, path: Path) -> None:
    from safetensors.numpy import save_file

    save_file(_named(flat_arrays(arrays)), str(path))


@register_prepared(METATENSOR_FILE)
def _prepare_metatensor(arrays: WorkloadArrays, path: Path) -> None:
    import metatensor

    metatensor.save(str(path), build_metatensor(arrays))


# ---------------------------------------------------------------------------
# Operations: save to a file
# ---------------------------------------------------------------------------


def _blockmap_save(state: tuple[Any, Path]) -> None:
    """blockmap's save as the others save: atomic, not synced."""
    import blockmap

    blockmap.save(state[1], state[0], durable=False)


def _blockmap_save_durable(state: tuple[Any, Path]) -> None:
    """blockmap's default save: synced before it returns."""
    import blockmap

    blockmap.save(state[1], state[0])


def _numpy_save(state: tuple[list[np.ndarray], Path]) -> None:
    np.savez(state[1], *state[0])


def _metatensor_save(state: tuple[Any, Path]) -> None:
    import metatensor

    metatensor.save(str(state[1]), state[0])


def _safetensors_save(state: tuple[dict[str, np.ndarray], Path]) -> None:
    from safetensors.numpy import save_file

    save_file(state[0], str(state[1]))


# what each library saves, and a path of its own (both save operations)
def _blockmap_to_save(c: Context) -> tuple[Any, Path]:
    return build_blockmap(c.arrays), _fresh_path(c, "blockmap", ".mts")


def _numpy_to_save(c: Context) -> tuple[list[np.ndarray], Path]:
    return flat_arrays(c.arrays), _fresh_path(c, "numpy", ".npz")


def _safetensors_to_save(c: Context) -> tuple[dict[str, np.ndarray], Path]:
    return _named(flat_arrays(c.arrays)), _fresh_path(c, "safetensors", ".safetensors")


register(
    Operation(
        name="save",
        title="save to a file",
        family="files",
        implementations={
            "blockmap": Implementation(
                call="blockmap.save(path, tensor, durable=False)",
                setup=_blockmap_to_save,
                run=_blockmap_save,
                finish=_finish_save,
            ),
            "numpy": Implementation(
                call="np.savez(path, *arrays)",
                setup=_numpy_to_save,
                run=_numpy_save,
                finish=_finish_save,
            ),
            OTHER_NAME: Implementation(
                call="metatensor.save(path, tensor)",
                setup=lambda c: (
                    build_metatensor(c.arrays),
                    _fresh_path(c, "metatensor", ".mts"),
                ),
                run=_metatensor_save,
                finish=_finish_save,
            ),
            SAFETENSORS: Implementation(
                call="safetensors.numpy.save_file({name: array}, path)",
                setup=_safetensors_to_save,
                run=_safetensors_save,
                finish=_finish_save,
            ),
        },
    )
)


def _synced(save: Any) -> Any:
    """``save``, then the file's data and its directory synced to storage:
    what blockmap's save does before it returns (so that a completed save
    survives a crash), done for the others after theirs."""

    def save_durably(state: tuple[Any, Path]) -> None:
        save(state)
        path = state[1]
        with open(path, "rb") as file:
            os.fdatasync(file.fileno())
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    return save_durably


register(
    Operation(
        name="savesync",
        title="save to a file, durable (data synced before returning)",
        family="files",
        implementations={
            "blockmap": Implementation(
                call="blockmap.save(path, tensor) (durable by default: it syncs before returning)",
                setup=_blockmap_to_save,
                run=_blockmap_save_durable,
                finish=_finish_save,
            ),
            "numpy": Implementation(
                call="np.savez(path, *arrays); os.fdatasync; fsync of the directory",
                setup=_numpy_to_save,
                run=_synced(_numpy_save),
                finish=_finish_save,
            ),
            SAFETENSORS: Implementation(
                call="safetensors.numpy.save_file(...); os.fdatasync; fsync of the directory",
                setup=_safetensors_to_save,
                run=_synced(_safetensors_save),
                finish=_finish_save,
            ),
        },
    )
)


# ---------------------------------------------------------------------------
# Operations: load from a file, all data read
# ---------------------------------------------------------------------------


def _blockmap_load(path: Path) -> Any:
    import blockmap

    return blockmap.load(path)


def _numpy_load(path: Path) -> list[np.ndarray]:
    with np.load(path) as npz:
        return [npz[name] for name in npz.files]


def _metatensor_load(path: Path) -> Any:
    import metatensor

    return metatensor.load(str(path))


def _safetensors_load(path: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(path))


register(
    Operation(
        name="load",
        title="load from a file, all data read",
        family="files",
        implementations={
            "blockmap": Implementation(
                call="blockmap.load(path)",
                setup=lambda c: c.workdir / BLOCKMAP_FILE,
                run=_blockmap_load,
                finish=lambda c, state, tensor: check_map(c, tensor),
                needs=(BLOCKMAP_FILE,),
            ),
            "numpy": Implementation(
                call="npz = np.load(path); [npz[k] for k in npz.files]",
                setup=lambda c: c.workdir / NUMPY_FILE,
                run=_numpy_load,
                finish=lambda c, state, loaded: check_list(c, loaded),
                needs=(NUMPY_FILE,),
            ),
            OTHER_NAME: Implementation(
                call="metatensor.load(path)",
                setup=lambda c: c.workdir / METATENSOR_FILE,
                run=_metatensor_load,
                finish=lambda c, state, tensor: check_map(c, tensor),
                needs=(METATENSOR_FILE,),
            ),
            SAFETENSORS: Implementation(
                call="safetensors.numpy.load_file(path)",
                setup=lambda c: c.workdir / SAFETENSORS_FILE,
                run=_safetensors_load,
                finish=lambda c, state, loaded: check_list(c, _in_order(loaded)),
                needs=(SAFETENSORS_FILE,),
            ),
        },
    )
)


# ---------------------------------------------------------------------------
# Operations: mapped load
# ---------------------------------------------------------------------------


def _blockmap_mmap(path: Path) -> Any:
    import blockmap

    return blockmap.load(path, mmap=True)


def _numpy_mmap(paths: list[Path]) -> list[np.ndarray]:
    return [np.load(path, mmap_mode="r") for path in paths]


def _safetensors_open(path: Path) -> tuple[Any, list[Any]]:
    from safetensors import safe_open

    lazy = safe_open(str(path), framework="np")
    return lazy, [lazy.get_slice(name) for name in sorted(lazy.keys())]


def _finish_safetensors_open(context: Context, state: Any, result: Any) -> str:
    _, slices = result
    # read after timing: the lazy slices give the data when indexed
    return "lazy slices; " + check_list(context, [piece[:] for piece in slices])


register(
    Operation(
        name="mmap",
        title="mapped load",
        family="files",
        implementations={
            "blockmap": Implementation(
                call="blockmap.load(path, mmap=True)",
                setup=lambda c: c.workdir / BLOCKMAP_FILE,
                run=_blockmap_mmap,
                finish=lambda c, state, tensor: check_map(c, tensor),
                needs=(BLOCKMAP_FILE,),
            ),
            "numpy": Implementation(
                call='[np.load(f, mmap_mode="r") for f in files] (one .npy per array)',
                setup=lambda c: sorted((c.workdir / NUMPY_DIR).iterdir()),
                run=_numpy_mmap,
                finish=lambda c, state, loaded: check_list(c, loaded),
                needs=(NUMPY_DIR,),
            ),
            # metatensor-core cannot map a file.
            SAFETENSORS: Implementation(
                call='f = safe_open(path, framework="np"); '
                "[f.get_slice(k) for k in sorted(f.keys())]",
                setup=lambda c: c.workdir / SAFETENSORS_FILE,
                run=_safetensors_open,
                finish=_finish_safetensors_open,
                needs=(SAFETENSORS_FILE,),
            ),
        },
    )
)


#: The speed issue's goals against safetensors: save and load at most its
#: time, mapped load within 2x of its lazy open, with RSS growth of at most
#: W's labels (2.4 MB) plus 2 MB.
TARGETS.extend(
    [
        time_goal("save: at most 1.0x safetensors' save_file", "save", ("save", SAFETENSORS), 1.0),
        time_goal(
            "durable save: at most 1.0x safetensors' save_file followed by the same syncs",
            "savesync",
            ("savesync", SAFETENSORS),
            1.0,
        ),
        time_goal("load: at most 1.0x safetensors' load_file", "load", ("load", SAFETENSORS), 1.0),
        relative_memory_goal(
            "load: peak memory growth <= safetensors'", "load", ("load", SAFETENSORS), 0.0
        ),
        time_goal(
            "mapped load: at most 2x safetensors' safe_open + get_slice",
            "mmap",
            ("mmap", SAFETENSORS),
            2.0,
        ),
        time_goal(
            "mapped load: at most 5x safetensors' safe_open + get_slice (issue 45's bar)",
            "mmap",
            ("mmap", SAFETENSORS),
            5.0,
        ),
        memory_goal(
            "mapped load: peak memory growth at most the labels (2.4 MB) + 2 MB",
            "mmap",
            4.4e6 / 794.3e6,
        ),
    ]
)
TARGETS.extend(
    [
        time_goal("save: at most 1.0x numpy's time", "save", ("save", "numpy"), 1.0),
        time_goal(
            "save: at least 3x faster than metatensor-core", "save", ("save", OTHER_NAME), 1 / 3
        ),
        time_goal("load: at most 1.0x numpy's time", "load", ("load", "numpy"), 1.0),
        time_goal(
            "load: at least 3x faster than metatensor-core", "load", ("load", OTHER_NAME), 1 / 3
        ),
        time_goal(
            "mapped load: under 1% of the full load's time", "mmap", ("load", LIBRARIES[0]), 0.01
        ),
        memory_goal("save: peak memory growth under 2% of the data", "save", 0.02),
        memory_goal("durable save: peak memory growth under 2% of the data", "savesync", 0.02),
    ]
)
