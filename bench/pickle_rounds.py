"""Rows of the ``pickle`` family for issue 45: protocol 5 out-of-band round
trips as a user makes them, and the per-access cost of a torch block's values.

- ``p5oobread``: dumps + loads + reading one element of every array of the
  result (each block's values and samples, and its gradient's), the round trip
  issue 45 defines, as the first call of a fresh process; ``p5oobreadwarm``:
  the same after one untimed round trip in the process (its result kept
  alive, as the timed one's is).
- ``p5oobmany`` / ``p5oobmanywarm``: the same on a map of many small blocks
  (:func:`make_many_blocks`: 20,000 blocks of 10 rows, the many-block maps
  metatensor users report), against its 40,000 arrays in numpy.
- ``torchvalues``: ``block.values`` of every block of torch-backed W,
  :data:`VALUES_ROUNDS` times (each access checks that the tensor still is
  the block's memory), against the same accesses on numpy-backed W.

Registered into :data:`bench.registry.OPERATIONS` on import, with their goals.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .checks import check_unpickled
from .measure import format_bytes
from .pickling import PICKLED
from .registry import (
    LIBRARIES,
    TARGETS,
    CheckError,
    Context,
    Goal,
    Implementation,
    Operation,
    Results,
    register,
    time_goal,
)

__all__ = ["MANY_BLOCKS", "VALUES_ROUNDS", "ManyBlocks", "make_many_blocks"]

#: Blocks and rows per block of the many-block map (the full size; ``--small``
#: uses a hundredth of the blocks).
MANY_BLOCKS: tuple[int, int] = (20_000, 10)
#: Rounds of ``block.values`` over W's 100 blocks in ``torchvalues``.
VALUES_ROUNDS = 1000


@dataclass(frozen=True)
class ManyBlocks:
    """A map of many small blocks as numpy arrays: keys ``structure``; each
    block values ``(rows, 3, 10)`` float64, samples ``(system, atom)`` (the
    block's system, atoms ``0..rows-1``), components ``o3_mu`` and properties
    ``n`` shared by every block, no gradient."""

    keys: np.ndarray
    values: list[np.ndarray]
    samples: list[np.ndarray]
    components: np.ndarray
    properties: np.ndarray


def make_many_blocks(blocks: int, rows: int, seed: int = 0) -> ManyBlocks:
    """The arrays of a map of ``blocks`` blocks of ``rows`` rows."""
    rng = np.random.default_rng(seed)
    atoms = np.arange(rows, dtype=np.int32)
    return ManyBlocks(
        keys=np.arange(blocks, dtype=np.int32).reshape(-1, 1),
        values=[rng.random((rows, 3, 10)) for _ in range(blocks)],
        samples=[
            np.stack([np.full(rows, b, dtype=np.int32), atoms], axis=1) for b in range(blocks)
        ],
        components=np.array([[-1], [0], [1]], dtype=np.int32),
        properties=np.arange(10, dtype=np.int32).reshape(-1, 1),
    )


def _many(context: Context) -> ManyBlocks:
    blocks, rows = MANY_BLOCKS
    if len(context.arrays.blocks) < 100:  # --small
        blocks //= 100
    return make_many_blocks(blocks, rows)


def _many_blockmap(many: ManyBlocks) -> Any:
    import blockmap

    components = [blockmap.Labels(["o3_mu"], many.components)]
    properties = blockmap.Labels(["n"], many.properties)
    blocks = [
        blockmap.TensorBlock(
            values, blockmap.Labels(["system", "atom"], samples), components, properties
        )
        for values, samples in zip(many.values, many.samples, strict=True)
    ]
    return blockmap.TensorMap(blockmap.Labels(["structure"], many.keys), blocks)


def _many_numpy(many: ManyBlocks) -> list[np.ndarray]:
    flat: list[np.ndarray] = []
    for values, samples in zip(many.values, many.samples, strict=True):
        flat += [values, samples]
    return flat


def _read_map(tensor: Any) -> None:
    """Read one element of every array of a map: values and samples of each
    block and of each gradient."""
    for block in tensor.blocks():
        block.values.flat[0]
        block.samples.values.flat[0]
        for _, gradient in block.gradients():
            gradient.values.flat[0]
            gradient.samples.values.flat[0]


def _read_list(arrays: list[np.ndarray]) -> None:
    for array in arrays:
        array.flat[0]


def _round_trip(library: str) -> Callable[[Any], Any]:
    read = _read_list if library == "numpy" else _read_map

    def run(obj: Any) -> tuple[bytes, list[pickle.PickleBuffer], Any]:
        buffers: list[pickle.PickleBuffer] = []
        data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
        loaded = pickle.loads(data, buffers=buffers)
        read(loaded)
        return data, buffers, loaded

    return run


def _warm(run: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``run`` on the object of a state made by :func:`_warm_setup`."""
    return lambda state: run(state[0])


def _warm_setup(
    build: Callable[[Context], Any], run: Callable[[Any], Any]
) -> Callable[[Context], Any]:
    """Build the object and make one untimed round trip, kept alive."""

    def setup(context: Context) -> tuple[Any, Any]:
        obj = build(context)
        return obj, run(obj)

    return setup


def _check_many(context: Context, library: str, obj: Any, loaded: Any) -> str:
    if library == "numpy":
        ours, theirs = loaded, obj
    else:
        ours = [a for b in loaded.blocks() for a in (b.values, b.samples.values)]
        theirs = [a for b in obj.blocks() for a in (b.values, b.samples.values)]
    if len(ours) != len(theirs) or not all(
        np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True)
    ):
        raise CheckError("the unpickled map differs from the pickled one")
    return f"{len(ours)} arrays equal to the pickled ones"


def _finish(many: bool, library: str, warm: bool) -> Callable[[Context, Any, Any], str]:
    def finish(context: Context, state: Any, result: Any) -> str:
        data, buffers, loaded = result
        obj = state[0] if warm else state
        checked = (
            _check_many(context, library, obj, loaded)
            if many
            else check_unpickled(context, library, loaded)
        )
        return f"stream {format_bytes(len(data))} + {len(buffers)} buffers; {checked}"

    return finish


def _register_round(name: str, title: str, many: bool, warm: bool) -> None:
    implementations: dict[str, Implementation] = {}
    for library in ("blockmap", "numpy"):
        if many:
            obj = "tensor (20,000 blocks)" if library == "blockmap" else "arrays (40,000)"
            maker = _many_blockmap if library == "blockmap" else _many_numpy
            build: Callable[[Context], Any] = lambda c, maker=maker: maker(_many(c))  # noqa: E731
        else:
            obj, builder = PICKLED[library]
            build = lambda c, builder=builder: builder(c.arrays)  # noqa: E731
        run = _round_trip(library)
        read = (
            "a.flat[0] for each array"
            if library == "numpy"
            else "values.flat[0] and samples.values.flat[0] of each block and gradient"
        )
        implementations[library] = Implementation(
            call=f"bufs = []; data = pickle.dumps({obj}, protocol=5, buffer_callback="
            f"bufs.append); loaded = pickle.loads(data, buffers=bufs); {read} of loaded"
            + ("; after one untimed round trip in the process" if warm else ""),
            setup=_warm_setup(build, run) if warm else build,
            run=_warm(run) if warm else run,
            finish=_finish(many, library, warm),
        )
    register(Operation(name, title, "pickle", implementations))


_register_round("p5oobread", "pickle p5 out-of-band dumps + loads + read, first call", False, False)
_register_round("p5oobreadwarm", "pickle p5 out-of-band dumps + loads + read, warm", False, True)
_register_round(
    "p5oobmany",
    "20,000 blocks of 10 rows: p5 out-of-band dumps + loads + read, first call",
    True,
    False,
)
_register_round(
    "p5oobmanywarm",
    "20,000 blocks of 10 rows: p5 out-of-band dumps + loads + read, warm",
    True,
    True,
)


def _values_setup(torch: bool) -> Callable[[Context], Any]:
    def setup(context: Context) -> list[Any]:
        import blockmap

        def labels(content: Any) -> blockmap.Labels:
            return blockmap.Labels(content.names, content.values)

        blocks = []
        for block in context.arrays.blocks:
            values: Any = block.values
            if torch:
                import torch as torch_module

                values = torch_module.from_numpy(values)
            blocks.append(
                blockmap.TensorBlock(
                    values,
                    labels(block.samples),
                    [labels(c) for c in block.components],
                    labels(block.properties),
                )
            )
        return blockmap.TensorMap(labels(context.arrays.keys), blocks).blocks()

    return setup


def _values(blocks: list[Any]) -> Any:
    values = None
    for _ in range(VALUES_ROUNDS):
        for block in blocks:
            values = block.values
    return values


def _finish_values(torch: bool) -> Callable[[Context, Any, Any], str]:
    def finish(context: Context, blocks: Any, values: Any) -> str:
        kind = type(values).__module__.split(".")[0]
        if kind != ("torch" if torch else "numpy"):
            raise CheckError(f"block.values gave a {type(values).__name__}")
        last = blocks[-1]
        if torch and values is not last.values:
            raise CheckError("block.values is not the tensor the block was made from")
        return f"{VALUES_ROUNDS * len(blocks)} accesses"

    return finish


register(
    Operation(
        "torchvalues",
        f"block.values, {VALUES_ROUNDS} rounds over W's blocks (made from torch tensors; "
        "numpy column: from numpy arrays)",
        "pickle",
        {
            library: Implementation(
                call=f"for _ in range({VALUES_ROUNDS}): for b in blocks: b.values "
                + (
                    "(W's blocks made from torch tensors, TensorBlock(torch.from_numpy(v), ...))"
                    if torch
                    else "(W's blocks made from numpy arrays)"
                ),
                setup=_values_setup(torch),
                run=_values,
                finish=_finish_values(torch),
            )
            for library, torch in (("blockmap", True), ("numpy", False))
        },
    )
)


def _per_access_goal(limit: float) -> Goal:
    def evaluate(result: Results) -> tuple[bool, str] | None:
        ours = result.measurement("torchvalues", LIBRARIES[0])
        if ours is None:
            return None
        # W's 100 blocks (the small W has 4: the goal is for W)
        per_access = ours.median / (VALUES_ROUNDS * 100)
        return per_access <= limit, (
            f"{per_access * 1e9:.0f} ns per access (limit {limit * 1e9:.0f} ns)"
        )

    return Goal("torch-backed block.values: at most 1 us per access", ("torchvalues",), evaluate)


TARGETS.extend(
    [
        *(
            time_goal(f"{title}: at most 1.0x numpy's time", name, (name, "numpy"), 1.0)
            for name, title in (
                ("p5oobread", "p5 out-of-band dumps + loads + read, first call"),
                ("p5oobreadwarm", "p5 out-of-band dumps + loads + read, warm"),
                ("p5oobmany", "20,000 small blocks, p5 dumps + loads + read, first call"),
                ("p5oobmanywarm", "20,000 small blocks, p5 dumps + loads + read, warm"),
            )
        ),
        _per_access_goal(1e-6),
    ]
)
