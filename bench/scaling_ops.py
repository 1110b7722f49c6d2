"""The scaling report's maps and operations, and its worker commands.

The maps of the two series (see :mod:`bench.scaling`) and, for every
operation, its setup, timed run and check per library (:data:`OPS`); the
``scaling-worker`` and ``scaling-prepare`` commands run one of them in a
fresh process. :mod:`bench.scaling` runs the series and writes the report.
"""

from __future__ import annotations

import argparse
import importlib
import json
import multiprocessing
import os
import pickle
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .measure import measure
from .registry import MODULES, OTHER_NAME, CheckError, Context
from .workload import (
    CENTER_TYPES,
    BlockArrays,
    GradientArrays,
    LabelsArrays,
    WorkloadArrays,
    build_blockmap,
    build_metatensor,
    flat_arrays,
    nbytes,
)

__all__ = [
    "LIBRARIES",
    "OPS",
    "Op",
    "add_commands",
    "generated",
    "numpy_map_files",
    "open_files_limit",
    "series_arrays",
]

#: Total bytes of values in the ``blocks`` series.
BLOCKS_TOTAL = 80_000_000
#: Properties and components of each block of the ``blocks`` series.
BLOCK_PROPERTIES = 20

# ---------------------------------------------------------------------------
# The maps
# ---------------------------------------------------------------------------


def _column(name: str, values: Any) -> LabelsArrays:
    return LabelsArrays([name], np.ascontiguousarray(np.asarray(values, np.int32).reshape(-1, 1)))


def generated(
    n_blocks: int, n_samples: int, n_properties: int, n_grad_samples: int | None
) -> WorkloadArrays:
    """A map of ``n_blocks`` blocks of values ``(n_samples, 3, n_properties)``,
    with a ``positions`` gradient ``(n_grad_samples, 3, 3, n_properties)``
    unless ``n_grad_samples`` is None; block ``i``'s values are all ``i``."""
    keys = np.empty((n_blocks, 2), dtype=np.int32)
    index = np.arange(n_blocks)
    keys[:, 0] = index // len(CENTER_TYPES)
    keys[:, 1] = np.asarray(CENTER_TYPES, np.int32)[index % len(CENTER_TYPES)]
    o3_mu, xyz = _column("o3_mu", [-1, 0, 1]), _column("xyz", [0, 1, 2])
    properties = _column("n", np.arange(n_properties))
    rows = np.arange(n_samples)
    blocks = []
    for i in range(n_blocks):
        samples = np.empty((n_samples, 2), dtype=np.int32)
        samples[:, 0], samples[:, 1] = rows // 24, rows % 24
        gradients = []
        if n_grad_samples is not None:
            grad_samples = np.empty((n_grad_samples, 3), dtype=np.int32)
            parents = np.arange(n_grad_samples)
            grad_samples[:, 0], grad_samples[:, 1], grad_samples[:, 2] = (
                parents,
                samples[parents, 0],
                parents % 24,
            )
            gradients.append(
                GradientArrays(
                    "positions",
                    np.full((n_grad_samples, 3, 3, n_properties), float(i)),
                    LabelsArrays(["sample", "system", "atom"], grad_samples),
                    [xyz],
                )
            )
        blocks.append(
            BlockArrays(
                np.full((n_samples, 3, n_properties), float(i)),
                LabelsArrays(["system", "atom"], samples),
                [o3_mu],
                properties,
                gradients,
            )
        )
    return WorkloadArrays(LabelsArrays(["o3_lambda", "center_type"], keys), blocks)


def series_arrays(series: str, size: float) -> WorkloadArrays:
    """The map of ``series`` at ``size`` (a block count, or a scale of W)."""
    if series == "blocks":
        n_blocks = int(size)
        rows = max(1, round(BLOCKS_TOTAL / (8 * 3 * BLOCK_PROPERTIES * n_blocks)))
        return generated(n_blocks, rows, BLOCK_PROPERTIES, None)
    return generated(100, max(1, round(2400 * size)), 100, max(1, round(300 * size)))


# ---------------------------------------------------------------------------
# The operations: (setup, timed run, check) per library
# ---------------------------------------------------------------------------

BLOCKMAP, NUMPY, MT = "blockmap", "numpy", OTHER_NAME
#: numpy pickling its value arrays only (no label arrays), for the out-of-band row.
NUMPY_VALUES = "numpy-values"
LIBRARIES = (BLOCKMAP, NUMPY, MT, NUMPY_VALUES)


def _obj(library: str, arrays: WorkloadArrays) -> Any:
    if library == BLOCKMAP:
        return build_blockmap(arrays)
    if library == MT:
        return build_metatensor(arrays)
    if library == NUMPY_VALUES:
        return [block.values for block in arrays.blocks]
    return flat_arrays(arrays)


def _count(library: str, obj: Any) -> int:
    """Blocks in ``obj`` (numpy's flat list: its arrays)."""
    return len(obj.keys) if library in (BLOCKMAP, MT) else len(obj)


def _expected(library: str, arrays: WorkloadArrays) -> int:
    return (
        _count(library, _obj(library, arrays)) if library in (NUMPY, NUMPY_VALUES) else len(arrays)
    )


def _last_value(library: str, obj: Any) -> float:
    """The first value of the last block (of the last array for numpy's list)."""
    if library in (BLOCKMAP, MT):
        return float(np.asarray(obj.block(len(obj.keys) - 1).values).flat[0])
    return float(np.asarray(obj[-1]).flat[0])


def _check(library: str, arrays: WorkloadArrays, obj: Any) -> None:
    """A cheap check that ``obj`` holds the map: its length and one value."""
    if _count(library, obj) != _expected(library, arrays):
        raise CheckError(f"{_count(library, obj)} blocks or arrays, expected more")
    reference = _obj(library, arrays) if library in (NUMPY, NUMPY_VALUES) else None
    expected = (
        float(np.asarray(reference[-1]).flat[0]) if reference is not None else len(arrays) - 1.0
    )
    if _last_value(library, obj) != expected:
        raise CheckError("the last block's values differ")


@dataclass
class Op:
    """One operation: its row title, what is timed per library, and its work."""

    title: str
    calls: dict[str, str]
    setup: Callable[[str, WorkloadArrays, Path], Any]
    run: Callable[[str, Any], Any]
    check: Callable[[str, WorkloadArrays, Any, Any], None] = lambda lib, arrays, state, out: None
    needs_file: bool = False


def _plain_setup(library: str, arrays: WorkloadArrays, workdir: Path) -> Any:
    return _obj(library, arrays)


def _oob(library: str, obj: Any) -> Any:
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return pickle.loads(data, buffers=buffers)


def _roundtrip(protocol: int) -> Callable[[str, Any], Any]:
    def run(library: str, obj: Any) -> Any:
        return pickle.loads(pickle.dumps(obj, protocol=protocol))

    return run


def _check_loaded(library: str, arrays: WorkloadArrays, state: Any, out: Any) -> None:
    _check(library, arrays, out)


# files: prepared once per size by a separate process, read from the page cache


def _file(workdir: Path, library: str) -> Path:
    return workdir / {BLOCKMAP: "map.mts", NUMPY: "arrays.npz", MT: "metatensor.mts"}[library]


def _prepare(arrays: WorkloadArrays, workdir: Path, files: Sequence[str]) -> None:
    """Write ``files`` (library names; numpy's as ``numpy-npz`` and ``numpy-npy``)."""
    import blockmap

    for name in files:
        if name == BLOCKMAP:
            blockmap.save(_file(workdir, BLOCKMAP), build_blockmap(arrays))
        elif name == "numpy-npz":
            np.savez(_file(workdir, NUMPY), *flat_arrays(arrays))
        elif name == "numpy-npy":
            (workdir / "npy").mkdir()
            for index, array in enumerate(flat_arrays(arrays)):
                np.save(workdir / "npy" / f"{index:06d}.npy", array)
        elif name == MT:
            import metatensor

            metatensor.save(str(_file(workdir, MT)), build_metatensor(arrays))


def _save_setup(library: str, arrays: WorkloadArrays, workdir: Path) -> Any:
    suffix = ".npz" if library == NUMPY else ".mts"
    return _obj(library, arrays), workdir / f"save-{os.getpid()}{suffix}"


def _save(library: str, state: Any) -> None:
    obj, path = state
    if library == BLOCKMAP:
        import blockmap

        blockmap.save(path, obj)
    elif library == NUMPY:
        np.savez(path, *obj)
    else:
        import metatensor

        metatensor.save(str(path), obj)


def _save_check(library: str, arrays: WorkloadArrays, state: Any, out: Any) -> None:
    path = state[1]
    if not path.exists():
        raise CheckError("nothing saved")
    path.unlink()


def _load(library: str, workdir: Path) -> Any:
    if library == BLOCKMAP:
        import blockmap

        return blockmap.load(_file(workdir, library))
    if library == NUMPY:
        with np.load(_file(workdir, library)) as archive:
            return [archive[f"arr_{i}"] for i in range(len(archive.files))]
    import metatensor

    return metatensor.load(str(_file(workdir, library)))


def _mmap(library: str, workdir: Path) -> Any:
    if library == BLOCKMAP:
        import blockmap

        return blockmap.load(_file(workdir, library), mmap=True)
    return [np.load(path, mmap_mode="r") for path in sorted((workdir / "npy").iterdir())]


def _construct_setup(library: str, arrays: WorkloadArrays, workdir: Path) -> Any:
    import blockmap

    module: Any = blockmap
    if library == MT:
        import metatensor

        module = metatensor
    return module, arrays


def _construct(library: str, state: Any) -> Any:
    from .workload import _build

    return _build(*state)


def _lookup_setup(library: str, arrays: WorkloadArrays, workdir: Path) -> Any:
    keys = [(int(a), int(b)) for a, b in arrays.keys.values]
    if library == NUMPY:
        return {key: block.values for key, block in zip(keys, arrays.blocks, strict=True)}, keys
    return _obj(library, arrays), keys


def _lookup(library: str, state: Any) -> list[Any]:
    """Every block, each looked up by its key once."""
    obj, keys = state
    if library == NUMPY:
        return [obj[key] for key in keys]
    if library == BLOCKMAP:
        return [obj.block(o3_lambda=a, center_type=b) for a, b in keys]
    return [obj.block({"o3_lambda": a, "center_type": b}) for a, b in keys]


def _lookup_check(library: str, arrays: WorkloadArrays, state: Any, out: Any) -> None:
    if (
        len(out) != len(arrays)
        or float(np.asarray(_values(library, out[-1])).flat[0]) != len(arrays) - 1.0
    ):
        raise CheckError("lookups returned the wrong blocks")


def _values(library: str, found: Any) -> Any:
    return found if library == NUMPY else found.values


def _queue_setup(library: str, arrays: WorkloadArrays, workdir: Path) -> Any:
    from .transports import _queue_child

    spawn = multiprocessing.get_context("spawn")
    requests, answers = spawn.Queue(), spawn.Queue()
    child = spawn.Process(target=_queue_child, args=(requests, answers), daemon=True)
    child.start()
    warm = _obj(library, generated(2, 2, 2, None))
    if library == BLOCKMAP:
        warm.share_memory()
    requests.put(warm)
    answers.get()
    return {"obj": _obj(library, arrays), "requests": requests, "answers": answers, "child": child}


def _queue(library: str, state: dict[str, Any]) -> int:
    if library == BLOCKMAP:
        state["obj"].share_memory()
    state["requests"].put(state["obj"])
    return int(state["answers"].get())


def _queue_check(library: str, arrays: WorkloadArrays, state: Any, out: Any) -> None:
    state["requests"].put(None)
    state["child"].join(timeout=60)
    if out != _count(library, state["obj"]):
        raise CheckError(f"the child saw {out} entries")


def _dask_setup(library: str, arrays: WorkloadArrays, workdir: Path) -> Any:
    from .transports import _dask_setup as transports_setup

    return transports_setup(library)(Context(arrays, workdir))


def _dask(library: str, state: Any) -> Any:
    from .transports import _dask_run

    return _dask_run(state)


def _dask_check(library: str, arrays: WorkloadArrays, state: Any, out: Any) -> None:
    client, cluster, _ = state
    future, received = out
    try:
        _check(library, arrays, received)
    finally:
        future.release()
        client.close()
        cluster.close()


_ALL = {BLOCKMAP: "tensor", NUMPY: "arrays", MT: "tensor"}

OPS: dict[str, Op] = {
    "oob": Op(
        "pickle p5 out-of-band dumps + loads",
        {
            **{
                lib: f"pickle.loads(pickle.dumps({n}, 5, buffer_callback=b.append), buffers=b)"
                for lib, n in _ALL.items()
            },
            NUMPY_VALUES: "the same, of the value arrays only",
        },
        _plain_setup,
        _oob,
        _check_loaded,
    ),
    "p5": Op(
        "pickle p5 in-band dumps + loads",
        {lib: f"pickle.loads(pickle.dumps({n}, 5))" for lib, n in _ALL.items()},
        _plain_setup,
        _roundtrip(5),
        _check_loaded,
    ),
    "p4": Op(
        "pickle p4 dumps + loads",
        {lib: f"pickle.loads(pickle.dumps({n}, 4))" for lib, n in _ALL.items()},
        _plain_setup,
        _roundtrip(4),
        _check_loaded,
    ),
    "save": Op(
        "save to a file",
        {
            BLOCKMAP: "blockmap.save(path, tensor)",
            NUMPY: "np.savez(path, *arrays)",
            MT: "metatensor.save(path, tensor)",
        },
        _save_setup,
        _save,
        _save_check,
    ),
    "load": Op(
        "load from a file, all data read",
        {
            BLOCKMAP: "blockmap.load(path)",
            NUMPY: "every array of np.load(path.npz)",
            MT: "metatensor.load(path)",
        },
        lambda library, arrays, workdir: workdir,
        _load,
        _check_loaded,
        needs_file=True,
    ),
    "mmap": Op(
        "mapped load",
        {
            BLOCKMAP: "blockmap.load(path, mmap=True)",
            NUMPY: "np.load(p, mmap_mode='r') for each .npy",
        },
        lambda library, arrays, workdir: workdir,
        _mmap,
        _check_loaded,
        needs_file=True,
    ),
    "construct": Op(
        "TensorMap construction (Labels, blocks, map)",
        {BLOCKMAP: "TensorMap(Labels(keys), [TensorBlock(...), ...])", MT: "the same"},
        _construct_setup,
        _construct,
        _check_loaded,
    ),
    "lookup": Op(
        "block() lookup of every block by its key",
        {
            BLOCKMAP: "[tensor.block(o3_lambda=a, center_type=b) for a, b in keys]",
            NUMPY: "[dict_of_values[(a, b)] for a, b in keys]",
            MT: "[tensor.block({'o3_lambda': a, 'center_type': b}) for a, b in keys]",
        },
        _lookup_setup,
        _lookup,
        _lookup_check,
    ),
    "shmqueue": Op(
        "share_memory() + Queue round trip to a child",
        {
            BLOCKMAP: "tensor.share_memory(); queue.put(tensor); answer.get()",
            NUMPY: "queue.put(arrays); answer.get() (no share_memory)",
        },
        _queue_setup,
        _queue,
        _queue_check,
    ),
    "dask": Op(
        "dask: scatter to a worker + gather",
        {
            lib: f"[f] = client.scatter([{n}], direct=True); client.gather(f)"
            for lib, n in _ALL.items()
        },
        _dask_setup,
        _dask,
        _dask_check,
    ),
}


def _raiseopen_files_limit() -> None:
    """numpy maps each ``.npy`` with a file descriptor of its own: 20,001 at
    10,000 blocks, over the usual soft limit of 1,024."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def open_files_limit() -> int:
    """The most files a worker can hold open, less a margin for the interpreter's own."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return sys.maxsize if hard == resource.RLIM_INFINITY else hard - 64


def numpy_map_files(series: str, size: float) -> int:
    """The ``.npy`` files numpy's mapped load opens: one per array of its flat list
    (values and samples per block; W-shaped maps add their gradient's two)."""
    return 2 * int(size) if series == "blocks" else 4 * 100


def _worker(args: argparse.Namespace) -> int:
    _raiseopen_files_limit()
    # imported before the clock starts, as the main bench's workers do: an
    # operation's own import would be timed (8 to 35 ms for blockmap, more
    # than its mapped load)
    for module in MODULES.get(args.library, ("numpy",)):
        importlib.import_module(module)
    op = OPS[args.operation]
    arrays = series_arrays(args.series, args.size)
    state = op.setup(args.library, arrays, args.workdir)
    measured = measure(lambda: op.run(args.library, state), repeat=1)
    record: dict[str, Any] = {
        "seconds": measured.times[0],
        "peak_growth": measured.peak_growth,
        "data_bytes": nbytes(arrays),
        "problem": None,
    }
    try:
        op.check(args.library, arrays, state, measured.result)
    except CheckError as error:
        record["problem"] = str(error)
    print(json.dumps(record), flush=True)
    return 0


def _prepare_command(args: argparse.Namespace) -> int:
    _prepare(series_arrays(args.series, args.size), args.workdir, args.libraries.split(","))
    print(json.dumps({"done": True}), flush=True)
    return 0


def add_commands(commands: Any) -> None:
    """Add ``scaling-worker`` and ``scaling-prepare`` (the fresh processes of :func:`run`)."""
    worker = commands.add_parser("scaling-worker", help="(started by scaling) one timed run")
    worker.add_argument("--operation", required=True, choices=sorted(OPS))
    worker.add_argument("--library", required=True, choices=LIBRARIES)
    worker.set_defaults(run=_worker)
    prepare = commands.add_parser("scaling-prepare", help="(started by scaling) write the files")
    prepare.add_argument("--libraries", required=True)
    prepare.set_defaults(run=_prepare_command)
    for command in (worker, prepare):
        command.add_argument("--series", required=True, choices=("blocks", "bytes"))
        command.add_argument("--size", required=True, type=float)
        command.add_argument("--workdir", required=True, type=Path)
