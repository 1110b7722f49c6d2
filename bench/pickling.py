"""The ``pickle`` family of the benchmark: W pickled and unpickled.

Protocol 5 with out-of-band buffers (dumps and loads timed together, as dask
and ray move data), protocol 5 in-band and protocol 4 (dumps and loads timed
apart). The bytes that a ``loads`` reads are made in the worker before timing,
from the object built there; the bytes a ``dumps`` makes are loaded back after
timing and checked against W. Registered into :data:`bench.registry.OPERATIONS`
on import, with the goals of issue 4 ("Benchmark").

:data:`PICKLED` names the object of W each library pickles; the transports
family moves the same objects. The ``torch*`` rows pickle blockmap's W
switched to torch tensors (:data:`PICKLED_TORCH`) next to the same tensors
as a plain list, in the numpy column.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np

from .checks import check_list, check_map, check_unpickled, first_values
from .measure import format_bytes
from .registry import (
    OTHER_NAME,
    TARGETS,
    CheckError,
    Context,
    Implementation,
    Operation,
    memory_goal,
    register,
    relative_memory_goal,
    time_goal,
)
from .workload import WorkloadArrays, build_blockmap, build_metatensor, flat_arrays

__all__ = ["IN_BAND_PICKLES", "PICKLED", "PICKLED_TORCH", "TORCH_PICKLES"]


#: Library -> (the object's name in the timed calls, its builder from W's arrays).
#: numpy pickles the flat list of :func:`bench.workload.flat_arrays`.
PICKLED: dict[str, tuple[str, Callable[[WorkloadArrays], Any]]] = {
    "blockmap": ("tensor", build_blockmap),
    "numpy": ("arrays", flat_arrays),
    OTHER_NAME: ("tensor", build_metatensor),
}


def _pickle_oob(obj: Any) -> tuple[bytes, list[pickle.PickleBuffer], Any]:
    """Protocol 5 with out-of-band buffers, dumps then loads, as dask and ray do."""
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return data, buffers, pickle.loads(data, buffers=buffers)


def _finish_oob(library: str) -> Callable[[Context, Any, Any], str]:
    def finish(context: Context, state: Any, result: Any) -> str:
        data, buffers, loaded = result
        checked = check_unpickled(context, library, loaded)
        shared = np.shares_memory(first_values(library, loaded), context.arrays.blocks[0].values)
        return (
            f"stream {format_bytes(len(data))} + {len(buffers)} "
            f"buffer{'' if len(buffers) == 1 else 's'}, "
            f"{'views' if shared else 'copies'} the source; {checked}"
        )

    return finish


def _dumps_setup(library: str, protocol: int) -> Callable[[Context], Any]:
    def setup(context: Context) -> tuple[Any, int]:
        return PICKLED[library][1](context.arrays), protocol

    return setup


def _dumps(state: tuple[Any, int]) -> bytes:
    return pickle.dumps(state[0], protocol=state[1])


def _finish_dumps(library: str) -> Callable[[Context, Any, Any], str]:
    def finish(context: Context, state: Any, data: bytes) -> str:
        return f"pickle {format_bytes(len(data))}; " + check_unpickled(
            context, library, pickle.loads(data)
        )

    return finish


def _loads_setup(library: str, protocol: int) -> Callable[[Context], Any]:
    def setup(context: Context) -> bytes:
        # Only the bytes are kept: the object they come from is released.
        return pickle.dumps(PICKLED[library][1](context.arrays), protocol=protocol)

    return setup


def _loads(data: bytes) -> Any:
    return pickle.loads(data)


def _finish_loads(library: str) -> Callable[[Context, Any, Any], str]:
    def finish(context: Context, state: Any, loaded: Any) -> str:
        return check_unpickled(context, library, loaded)

    return finish


def _register_pickle(name: str, title: str, kind: str, protocol: int) -> None:
    """Register a pickle operation of ``kind`` ``oob``, ``dumps`` or ``loads``."""
    implementations: dict[str, Implementation] = {}
    for library, (obj, build) in PICKLED.items():
        if kind == "oob":
            implementations[library] = Implementation(
                call=f"bufs = []; data = pickle.dumps({obj}, protocol=5, "
                "buffer_callback=bufs.append); pickle.loads(data, buffers=bufs)",
                setup=lambda c, build=build: build(c.arrays),
                run=_pickle_oob,
                finish=_finish_oob(library),
            )
        elif kind == "dumps":
            implementations[library] = Implementation(
                call=f"pickle.dumps({obj}, protocol={protocol})",
                setup=_dumps_setup(library, protocol),
                run=_dumps,
                finish=_finish_dumps(library),
            )
        else:
            implementations[library] = Implementation(
                call=f"pickle.loads(data) (data = pickle.dumps({obj}, protocol={protocol}), "
                "made before, not timed)",
                setup=_loads_setup(library, protocol),
                run=_loads,
                finish=_finish_loads(library),
            )
    register(Operation(name, title, "pickle", implementations))


_register_pickle("p5oob", "pickle p5 out-of-band dumps + loads", "oob", 5)
_register_pickle("p5dumps", "pickle p5 in-band dumps", "dumps", 5)
_register_pickle("p5loads", "pickle p5 in-band loads", "loads", 5)
_register_pickle("p4dumps", "pickle p4 dumps", "dumps", 4)
_register_pickle("p4loads", "pickle p4 loads", "loads", 4)

# -- torch-backed W -----------------------------------------------------------
#
# blockmap's W switched to torch tensors (``tensor.to(arrays="torch")``, no
# copy) next to the same tensors pickled as a plain list: the cost of
# pickling torch-backed maps against what torch itself does.


def _build_torch_blockmap(arrays: WorkloadArrays) -> Any:
    return build_blockmap(arrays).to(arrays="torch")


def _torch_tensors(arrays: WorkloadArrays) -> list[Any]:
    import torch

    return [torch.from_numpy(array) for array in flat_arrays(arrays)]


#: library -> (the object's name in the timed calls, its builder)
PICKLED_TORCH: dict[str, tuple[str, Callable[[WorkloadArrays], Any]]] = {
    "blockmap": ("tensor.to(arrays='torch')", _build_torch_blockmap),
    "numpy": ("tensors (W's arrays as a list of torch tensors)", _torch_tensors),
}


def _check_torch(context: Context, library: str, loaded: Any) -> str:
    import torch

    if library == "numpy":
        if not isinstance(loaded, list) or not all(isinstance(t, torch.Tensor) for t in loaded):
            raise CheckError("unpickled something else than a list of torch tensors")
        return check_list(context, [t.numpy() for t in loaded])
    if not isinstance(loaded.block(0).values, torch.Tensor):
        raise CheckError("the unpickled map is not torch-backed")
    return "torch-backed; " + check_map(context, loaded)


def _finish_torch(kind: str, library: str) -> Callable[[Context, Any, Any], str]:
    def finish(context: Context, state: Any, result: Any) -> str:
        if kind == "oob":
            data, buffers, loaded = result
            note = f"stream {format_bytes(len(data))} + {len(buffers)} buffers; "
        elif kind == "dumps":
            loaded, note = pickle.loads(result), f"pickle {format_bytes(len(result))}; "
        else:
            loaded, note = result, ""
        return note + _check_torch(context, library, loaded)

    return finish


def _register_torch_pickle(name: str, title: str, kind: str, protocol: int) -> None:
    implementations: dict[str, Implementation] = {}
    for library, (obj, build) in PICKLED_TORCH.items():
        if kind == "oob":
            call = (
                f"bufs = []; data = pickle.dumps({obj}, protocol=5, "
                "buffer_callback=bufs.append); pickle.loads(data, buffers=bufs)"
            )
            setup: Callable[[Context], Any] = lambda c, build=build: build(c.arrays)  # noqa: E731
            run: Callable[[Any], Any] = _pickle_oob
        elif kind == "dumps":
            call = f"pickle.dumps({obj}, protocol={protocol})"
            setup = lambda c, build=build: (build(c.arrays), protocol)  # noqa: E731
            run = _dumps
        else:
            call = f"pickle.loads(data) (data = pickle.dumps({obj}, protocol={protocol}))"
            setup = lambda c, build=build: pickle.dumps(build(c.arrays), protocol=protocol)  # noqa: E731
            run = _loads
        implementations[library] = Implementation(
            call=call, setup=setup, run=run, finish=_finish_torch(kind, library)
        )
    register(Operation(name, title, "pickle", implementations))


_register_torch_pickle(
    "torchp5oob", "torch-backed W: pickle p5 out-of-band dumps + loads", "oob", 5
)
_register_torch_pickle("torchp4dumps", "torch-backed W: pickle p4 dumps", "dumps", 4)
_register_torch_pickle("torchp4loads", "torch-backed W: pickle p4 loads", "loads", 4)

#: The torch-backed pickle operations: name -> the title's short form.
TORCH_PICKLES: dict[str, str] = {
    "torchp5oob": "torch-backed W, p5 out-of-band dumps + loads",
    "torchp4dumps": "torch-backed W, p4 dumps",
    "torchp4loads": "torch-backed W, p4 loads",
}


#: The in-band pickle operations (issue 4): name -> the title's short form.
IN_BAND_PICKLES: dict[str, str] = {
    "p5dumps": "p5 in-band dumps",
    "p5loads": "p5 in-band loads",
    "p4dumps": "p4 dumps",
    "p4loads": "p4 loads",
}


TARGETS.extend(
    [
        time_goal(
            "p5 out-of-band dumps + loads: within 2x of numpy's time",
            "p5oob",
            ("p5oob", "numpy"),
            2.0,
        ),
        time_goal(
            "p5 out-of-band dumps + loads: at least 1000x faster than metatensor-core",
            "p5oob",
            ("p5oob", OTHER_NAME),
            1 / 1000,
        ),
        memory_goal(
            "p5 out-of-band dumps + loads: peak memory growth under 1% of the data (metadata only)",
            "p5oob",
            0.01,
        ),
        *(
            time_goal(f"{short}: at most 1.0x the plain tensors' time", name, (name, "numpy"), 1.0)
            for name, short in TORCH_PICKLES.items()
        ),
        *(
            goal
            for name, short in IN_BAND_PICKLES.items()
            for goal in (
                time_goal(f"{short}: at most 1.0x numpy's time", name, (name, "numpy"), 1.0),
                relative_memory_goal(
                    f"{short}: peak memory growth <= numpy + 5%", name, (name, "numpy"), 0.05
                ),
            )
        ),
    ]
)
