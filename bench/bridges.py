"""The ``metatensor`` family of the benchmark: metatensor-core's own objects
moved by blockmap, the bridges, and the key/component operations.

- **Transports of metatensor-core's map** (W built with metatensor-core):
  the blockmap column is that map after ``blockmap.metatensor.register()``
  (done in the setup, not timed); the metatensor-core column is the same map
  without blockmap; numpy moves W's arrays as a list.
- **Bridges**: ``from_metatensor`` of metatensor-core's W and
  ``to_metatensor`` of blockmap's W, blockmap's column only (nothing else
  does it); the check is that no array was copied.
- **metatensor-torch bridges**: ``from_metatensor_torch`` of
  metatensor-torch's W (its tensors viewing W's arrays) and
  ``to_metatensor_torch`` of blockmap's W; the check is that every values
  tensor is at the source's address; numpy's column copies W's arrays, the
  cost of a conversion that copied.
- **keys_to_properties, keys_to_samples, components_to_properties** on W,
  blockmap's against metatensor-core's own.

Registered into :data:`bench.registry.OPERATIONS` on import, with the goals
of the drop-in issue.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

import numpy as np

from .checks import check_map, check_unpickled
from .measure import format_bytes
from .pickling import _pickle_oob
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
from .transports import _dask_finish, _dask_run, _dask_setup, _queue_child, _queue_run, _tiny
from .workload import build_blockmap, build_metatensor, flat_arrays

__all__: list[str] = []

FAMILY = "metatensor"


def _registered(build: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``build``, after ``blockmap.metatensor.register()`` in this process."""

    def registered_build(arrays: Any) -> Any:
        import blockmap.metatensor

        blockmap.metatensor.register()
        return build(arrays)

    return registered_build


#: library -> (the object in the timed call, its builder): the blockmap column
#: moves metatensor-core's map, registered
MOVED: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "blockmap": ("tensor", _registered(build_metatensor)),
    "numpy": ("arrays", flat_arrays),
    OTHER_NAME: ("tensor", build_metatensor),
}


def _check(context: Context, library: str, received: Any) -> str:
    if library == "blockmap":
        import metatensor

        if not isinstance(received, metatensor.TensorMap):
            raise CheckError(f"received a {type(received).__name__}, not metatensor's TensorMap")
        return "metatensor-core's map; " + check_map(context, received)
    return check_unpickled(context, library, received)


# -- pickle protocol 5 out of band -------------------------------------------


def _oob_finish(library: str) -> Callable[[Context, Any, Any], str]:
    def finish(context: Context, state: Any, result: Any) -> str:
        data, buffers, loaded = result
        return f"stream {format_bytes(len(data))} + {len(buffers)} buffers; " + _check(
            context, library, loaded
        )

    return finish


register(
    Operation(
        "mtsp5oob",
        "metatensor-core map: pickle p5 out-of-band dumps + loads",
        FAMILY,
        {
            library: Implementation(
                call=f"pickle.dumps({obj}, protocol=5, buffer_callback=bufs.append); "
                "pickle.loads(data, buffers=bufs)"
                + (" (after blockmap.metatensor.register())" if library == "blockmap" else ""),
                setup=lambda c, build=build: build(c.arrays),
                run=_pickle_oob,
                finish=_oob_finish(library),
            )
            for library, (obj, build) in MOVED.items()
        },
    )
)


# -- dask -------------------------------------------------------------------


def _dask_check(library: str) -> Callable[[Context, Any, Any], str]:
    finish = _dask_finish(library)

    def check(context: Context, state: Any, result: Any) -> str:
        note = finish(context, state, result)
        if library == "blockmap":
            import metatensor

            if not isinstance(result[1], metatensor.TensorMap):
                raise CheckError("dask gave back something else than metatensor's TensorMap")
            note = "metatensor-core's map; " + note
        return note

    return check


register(
    Operation(
        "mtsdask",
        "metatensor-core map: dask scatter to a worker + gather",
        FAMILY,
        {
            library: Implementation(
                call=f"[f] = client.scatter([{obj}], direct=True); client.gather(f, direct=True)"
                + (" (registered)" if library == "blockmap" else ""),
                # building the registered map first registers this process,
                # so that the cluster's workers preload the registration
                setup=_dask_setup(
                    library, MOVED[library][1], OTHER_NAME if library == "blockmap" else None
                ),
                run=_dask_run,
                finish=_dask_check(library),
            )
            for library, (obj, _) in MOVED.items()
        },
    )
)


# -- multiprocessing Queue ----------------------------------------------------


def _queue_setup(library: str) -> Callable[[Context], Any]:
    def setup(context: Context) -> dict[str, Any]:
        import blockmap

        spawn = multiprocessing.get_context("spawn")
        requests, answers = spawn.Queue(), spawn.Queue()
        child = spawn.Process(target=_queue_child, args=(requests, answers), daemon=True)
        child.start()
        obj = MOVED[library][1](context.arrays)
        warm = _tiny(OTHER_NAME if library == "blockmap" else library)
        if library == "blockmap":
            warm = blockmap.share_memory(warm)
            obj = blockmap.share_memory(obj)
        requests.put(warm)
        answers.get()
        return {"requests": requests, "answers": answers, "child": child, "obj": obj}

    return setup


def _queue_finish(library: str) -> Callable[[Context, Any, Any], str]:
    def finish(context: Context, state: dict[str, Any], result: int) -> str:
        from multiprocessing.reduction import ForkingPickler

        state["requests"].put(None)
        state["child"].join(timeout=60)
        if result != len(state["obj"]):
            raise CheckError(f"the child saw {result} blocks, W has {len(state['obj'])}")
        note = _check(context, library, state["obj"])
        message = len(ForkingPickler.dumps(state["obj"]))
        return f"message {format_bytes(message)}; {note}"

    return finish


register(
    Operation(
        "mtsqueue",
        "metatensor-core map: multiprocessing Queue to a child",
        FAMILY,
        {
            library: Implementation(
                call="queue.put(tensor); answer.get()"
                + (
                    " (tensor = blockmap.share_memory(tensor) after register(), not timed)"
                    if library == "blockmap"
                    else ""
                ),
                setup=_queue_setup(library),
                run=_queue_run,
                finish=_queue_finish(library),
            )
            for library in MOVED
        },
    )
)


# -- bridges -----------------------------------------------------------------


def _no_copy(source: list[np.ndarray], result: list[np.ndarray]) -> str:
    if len(source) != len(result):
        raise CheckError(f"{len(result)} arrays, expected {len(source)}")
    for a, b in zip(source, result, strict=True):
        if a.__array_interface__["data"][0] != b.__array_interface__["data"][0]:
            raise CheckError("an array was copied")
    return f"all {len(source)} values arrays shared"


def _values_of(tensor: Any) -> list[np.ndarray]:
    arrays = []
    for block in tensor.blocks():
        arrays.append(np.asarray(block.values))
        for _, gradient in block.gradients():
            arrays.append(np.asarray(gradient.values))
    return arrays


def _from_metatensor(tensor: Any) -> Any:
    from blockmap.metatensor import from_metatensor

    return from_metatensor(tensor)


def _to_metatensor(tensor: Any) -> Any:
    return tensor.to_metatensor()


def _bridge_setup(build: Callable[[Any], Any]) -> Callable[[Context], Any]:
    def setup(context: Context) -> Any:
        import metatensor

        import blockmap.metatensor

        del metatensor, blockmap  # imported before timing: the timed call converts only
        return build(context.arrays)

    return setup


def _bridge_finish(context: Context, state: Any, result: Any) -> str:
    return _no_copy(_values_of(state), _values_of(result)) + "; " + check_map(context, result)


register(
    Operation(
        "from_metatensor",
        "from_metatensor(metatensor-core's W)",
        FAMILY,
        {
            "blockmap": Implementation(
                call="blockmap.metatensor.from_metatensor(tensor)",
                setup=_bridge_setup(build_metatensor),
                run=_from_metatensor,
                finish=_bridge_finish,
            )
        },
    )
)
register(
    Operation(
        "to_metatensor",
        "to_metatensor(blockmap's W)",
        FAMILY,
        {
            "blockmap": Implementation(
                call="tensor.to_metatensor()",
                setup=_bridge_setup(build_blockmap),
                run=_to_metatensor,
                finish=_bridge_finish,
            )
        },
    )
)


# -- metatensor-torch bridges --------------------------------------------------


class _TorchLibrary:
    """metatensor-torch's classes with numpy's arguments, for
    :func:`bench.workload._build`: W's arrays as ``torch.from_numpy`` views
    (metatensor-torch keeps the tensors it is given: nothing is copied)."""

    def __init__(self) -> None:
        import metatensor.torch
        import torch

        self.mtt, self.torch = metatensor.torch, torch

    def Labels(self, names: list[str], values: np.ndarray) -> Any:  # noqa: N802
        return self.mtt.Labels(list(names), self.torch.from_numpy(values))

    def TensorBlock(self, values: np.ndarray, *labels: Any) -> Any:  # noqa: N802
        return self.mtt.TensorBlock(self.torch.from_numpy(values), *labels)

    def TensorMap(self, keys: Any, blocks: list[Any]) -> Any:  # noqa: N802
        return self.mtt.TensorMap(keys, blocks)


def build_metatensor_torch(arrays: Any) -> Any:
    """W as metatensor-torch's map, its tensors viewing W's arrays."""
    from .workload import _build

    return _build(_TorchLibrary(), arrays)


def _torch_setup(build: Callable[[Any], Any]) -> Callable[[Context], Any]:
    def setup(context: Context) -> Any:
        import metatensor.torch

        import blockmap.metatensor_torch

        del metatensor, blockmap  # imported before timing: the timed call converts only
        return build(context.arrays)

    return setup


def _from_metatensor_torch(tensor: Any) -> Any:
    from blockmap.metatensor_torch import from_metatensor_torch

    return from_metatensor_torch(tensor)


def _to_metatensor_torch(tensor: Any) -> Any:
    from blockmap.metatensor_torch import to_metatensor_torch

    return to_metatensor_torch(tensor)


def _addresses(tensor: Any) -> list[int]:
    """The data addresses of every values array or tensor of a map (either
    library), gradients included."""

    def address(values: Any) -> int:
        if hasattr(values, "data_ptr"):
            return int(values.data_ptr())
        return int(values.__array_interface__["data"][0])

    result = []
    for block in tensor.blocks():
        result.append(address(block.values))
        for _, gradient in block.gradients():
            result.append(address(gradient.values))
    return result


def _torch_bridge_finish(context: Context, state: Any, result: Any) -> str:
    source, converted = _addresses(state), _addresses(result)
    if source != converted:
        raise CheckError(
            f"{sum(a != b for a, b in zip(source, converted, strict=False))} of "
            f"{len(source)} values arrays copied (or {len(converted)} arrays)"
        )
    return f"all {len(source)} values tensors shared; " + check_map(context, result)


def _copy(arrays: list[np.ndarray]) -> list[np.ndarray]:
    return [array.copy() for array in arrays]


def _copy_finish(context: Context, state: Any, result: Any) -> str:
    return "a copy of every array (the reference a conversion must stay far under)"


#: what a conversion that copied would cost: numpy copying W's arrays
_NUMPY_COPY = Implementation(
    call="[a.copy() for a in arrays] (a copy of W's arrays: what a copying conversion costs)",
    setup=lambda c: flat_arrays(c.arrays),
    run=_copy,
    finish=_copy_finish,
)

register(
    Operation(
        "from_metatensor_torch",
        "from_metatensor_torch(metatensor-torch's W)",
        FAMILY,
        {
            "blockmap": Implementation(
                call="blockmap.from_metatensor_torch(tensor)",
                setup=_torch_setup(build_metatensor_torch),
                run=_from_metatensor_torch,
                finish=_torch_bridge_finish,
            ),
            "numpy": _NUMPY_COPY,
        },
    )
)
register(
    Operation(
        "to_metatensor_torch",
        "to_metatensor_torch(blockmap's W)",
        FAMILY,
        {
            "blockmap": Implementation(
                call="blockmap.metatensor_torch.to_metatensor_torch(tensor)",
                setup=_torch_setup(build_blockmap),
                run=_to_metatensor_torch,
                finish=_torch_bridge_finish,
            ),
            "numpy": _NUMPY_COPY,
        },
    )
)


# -- keys_to_*, components_to_properties -------------------------------------

#: operation -> (the call, a function of the map)
MOVES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "keys_to_properties": (
        "tensor.keys_to_properties('center_type')",
        lambda t: t.keys_to_properties("center_type"),
    ),
    "keys_to_samples": (
        "tensor.keys_to_samples('center_type')",
        lambda t: t.keys_to_samples("center_type"),
    ),
    "components_to_properties": (
        "tensor.components_to_properties('o3_mu')",
        lambda t: t.components_to_properties("o3_mu"),
    ),
}


def _move_finish(name: str) -> Callable[[Context, Any, Any], str]:
    def finish(context: Context, state: Any, result: Any) -> str:
        nbytes = sum(v.nbytes for v in _values_of(result))
        return f"{len(result.keys)} blocks, {format_bytes(nbytes)} of values"

    return finish


for _name, (_call, _move) in MOVES.items():
    register(
        Operation(
            _name,
            f"{_name} on W",
            FAMILY,
            {
                library: Implementation(
                    call=_call,
                    setup=lambda c, build=build: build(c.arrays),
                    run=_move,
                    finish=_move_finish(_name),
                )
                for library, build in (("blockmap", build_blockmap), (OTHER_NAME, build_metatensor))
            },
        )
    )


TARGETS.extend(
    [
        time_goal(
            "metatensor-core's map, registered, through p5 out-of-band: within 2x numpy's time",
            "mtsp5oob",
            ("mtsp5oob", "numpy"),
            2.0,
        ),
        memory_goal(
            "from_metatensor: no array copied, peak memory growth under 1% of the data",
            "from_metatensor",
            0.01,
        ),
        memory_goal(
            "to_metatensor: no array copied, peak memory growth under 1% of the data",
            "to_metatensor",
            0.01,
        ),
        *(
            goal
            for name in ("from_metatensor_torch", "to_metatensor_torch")
            for goal in (
                memory_goal(
                    f"{name}: no tensor copied, peak memory growth under 1% of the data",
                    name,
                    0.01,
                ),
                time_goal(
                    f"{name}: O(labels), at most 0.1x the time numpy takes to copy W",
                    name,
                    (name, "numpy"),
                    0.1,
                ),
            )
        ),
        *(
            goal
            for name in MOVES
            for goal in (
                time_goal(
                    f"{name}: at most 1.0x metatensor-core's time",
                    name,
                    (name, OTHER_NAME),
                    1.0,
                ),
                relative_memory_goal(
                    f"{name}: peak memory growth <= metatensor-core's",
                    name,
                    (name, OTHER_NAME),
                    0.0,
                ),
            )
        ),
    ]
)
