"""The ``transports`` family of the benchmark: W sent to another process and
back, or through a store, with the engines users move data with. Registered
into :data:`bench.registry.OPERATIONS` on import, with the goals of the
transports issue; the objects moved are those the pickle family pickles
(:data:`bench.pickling.PICKLED`).

Each run is a fresh process (as for every operation): it starts the engine
(a dask ``LocalCluster`` with one worker process, a multiprocessing child, a
ray instance, a loky pool) and warms it up with a tiny object of the same
kind, all untimed; then times one transfer of W. Peak memory is this
process's only: the other side's is not counted.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterable
from typing import Any

from .checks import check_unpickled, first_values
from .measure import format_bytes, format_seconds
from .pickling import PICKLED
from .registry import TARGETS, CheckError, Context, Implementation, Operation, register, time_goal
from .workload import make_arrays

__all__: list[str] = []

#: Sizes of the tiny W used to warm each engine up.
TINY = {"n_keys": 2, "n_samples": 4, "n_grad_samples": 2, "n_properties": 2}


def _tiny(library: str) -> Any:
    return PICKLED[library][1](make_arrays(seed=1, **TINY))


def _identity(obj: Any) -> Any:
    return obj


def _check(context: Context, library: str, received: Any, note: str = "") -> str:
    checked = check_unpickled(context, library, received)
    return f"{note}; {checked}" if note else checked


#: Makes a per-library setup, finish or similar from the library's name.
PerLibrary = Callable[[str], Any]


def _register(
    name: str,
    title: str,
    call: str,
    setup: PerLibrary,
    run: Callable[[Any], Any],
    finish: PerLibrary,
    libraries: Iterable[str] = tuple(PICKLED),
) -> None:
    """Register a transports operation done alike by ``libraries``; ``call``
    names the object ``{obj}``, as :data:`PICKLED` does per library."""
    register(
        Operation(
            name,
            title,
            "transports",
            {
                library: Implementation(
                    call=call.format(obj=PICKLED[library][0]),
                    setup=setup(library),
                    run=run,
                    finish=finish(library),
                )
                for library in libraries
            },
        )
    )


# ---------------------------------------------------------------------------
# dask.distributed: scatter to a worker, gather back
# ---------------------------------------------------------------------------


def _dask_setup(
    library: str, build: Callable[[Any], Any] | None = None, warm_with: str | None = None
) -> Any:
    """Start a cluster and warm it with a tiny object of ``warm_with``'s kind
    (default: ``library``'s); the object moved is ``build(W)`` (default: the
    library's in :data:`PICKLED`), built first."""
    build = build or PICKLED[library][1]

    def setup(context: Context) -> tuple[Any, Any, Any]:
        import distributed

        obj = build(context.arrays)
        cluster = distributed.LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            worker_dashboard_address=None,
            silence_logs=50,
        )
        client = distributed.Client(cluster)
        [warm] = client.scatter([_tiny(warm_with or library)], direct=True)
        client.gather(warm, direct=True)
        warm.release()
        return client, cluster, obj

    return setup


def _dask_run(state: tuple[Any, Any, Any]) -> tuple[Any, Any]:
    client, _, obj = state
    # in a list: one future for the whole object (numpy's list included)
    [future] = client.scatter([obj], direct=True)
    return future, client.gather(future, direct=True)


def _dask_finish(library: str) -> Any:
    def finish(context: Context, state: tuple[Any, Any, Any], result: tuple[Any, Any]) -> str:
        client, cluster, _ = state
        future, received = result
        try:
            return _check(context, library, received, "worker memory not counted")
        finally:
            future.release()
            client.close()
            cluster.close()

    return finish


_register(
    "dask",
    "dask: scatter to a worker + gather",
    "[f] = client.scatter([{obj}], direct=True); client.gather(f, direct=True)",
    _dask_setup,
    _dask_run,
    _dask_finish,
)


# ---------------------------------------------------------------------------
# multiprocessing.Queue to a child process, plain and after share_memory()
# ---------------------------------------------------------------------------


def _queue_child(requests: Any, answers: Any) -> None:
    """Receive objects and answer with their length, until ``None``."""
    held = []
    while (obj := requests.get()) is not None:
        held.append(obj)  # keep it: a shared map stays mapped in both processes
        answers.put(len(obj))


def _queue_setup(library: str, shared: bool) -> Any:
    def setup(context: Context) -> dict[str, Any]:
        spawn = multiprocessing.get_context("spawn")
        requests, answers = spawn.Queue(), spawn.Queue()
        child = spawn.Process(target=_queue_child, args=(requests, answers), daemon=True)
        child.start()
        warm = _tiny(library)
        if shared:
            warm.share_memory()
        requests.put(warm)
        answers.get()
        obj = PICKLED[library][1](context.arrays)
        state: dict[str, Any] = {"requests": requests, "answers": answers, "child": child}
        if shared:
            start = time.perf_counter()
            obj.share_memory()
            state["share"] = time.perf_counter() - start
        state["obj"] = obj
        return state

    return setup


def _queue_run(state: dict[str, Any]) -> int:
    state["requests"].put(state["obj"])
    return int(state["answers"].get())


def _queue_finish(library: str) -> Any:
    def finish(context: Context, state: dict[str, Any], result: int) -> str:
        from multiprocessing.reduction import ForkingPickler

        state["requests"].put(None)
        state["child"].join(timeout=60)
        if result != len(state["obj"]):
            raise CheckError(f"the child saw {result} blocks, W has {len(state['obj'])}")
        note = _check(context, library, state["obj"])
        if "share" in state:
            message = len(ForkingPickler.dumps(state["obj"]))
            note = (
                f"message {format_bytes(message)}; share_memory() took "
                f"{format_seconds(state['share'])} before, not timed; {note}"
            )
        return note

    return finish


_register(
    "queue",
    "multiprocessing Queue to a child (plain pickle)",
    "queue.put({obj}); answer.get()",
    lambda library: _queue_setup(library, shared=False),
    _queue_run,
    _queue_finish,
)
# numpy arrays and metatensor maps have no share_memory(): numpy arrays go as
# usual (the reference), metatensor-core is in the plain row
_register(
    "queueshm",
    "multiprocessing Queue after share_memory()",
    "queue.put({obj}); answer.get() (blockmap: after tensor.share_memory(), not timed)",
    lambda library: _queue_setup(library, shared=library == "blockmap"),
    _queue_run,
    _queue_finish,
    libraries=("blockmap", "numpy"),
)


# ---------------------------------------------------------------------------
# ray: put into the object store, get back
# ---------------------------------------------------------------------------


def _ray_setup(library: str) -> Any:
    def setup(context: Context) -> Any:
        import os

        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        import ray

        obj = PICKLED[library][1](context.arrays)
        ray.init(
            num_cpus=1,
            include_dashboard=False,
            object_store_memory=3 * 2**30,
            log_to_driver=False,
            logging_level="ERROR",
        )
        ray.get(ray.put(_tiny(library)))
        return obj

    return setup


def _ray_run(obj: Any) -> tuple[Any, Any]:
    import ray

    ref = ray.put(obj)
    return ref, ray.get(ref)


def _ray_finish(library: str) -> Any:
    def finish(context: Context, state: Any, result: tuple[Any, Any]) -> str:
        import numpy as np
        import ray

        ref, received = result
        try:
            values = first_values(library, received)
            viewed = "read-only views of the store" if not values.flags.writeable else "copies"
            shares = np.shares_memory(values, first_values(library, ray.get(ref)))
            return _check(context, library, received, f"{viewed}{' (zero-copy)' if shares else ''}")
        finally:
            del ref, received
            ray.shutdown()

    return finish


_register(
    "ray",
    "ray: put + get",
    "ray.get(ray.put({obj}))",
    _ray_setup,
    _ray_run,
    _ray_finish,
    # ray 2.60 crashes (SIGSEGV in unpack_pickle5_buffers) on metatensor-core
    # maps: not compared
    libraries=("blockmap", "numpy"),
)


# ---------------------------------------------------------------------------
# joblib (loky): one task taking W and returning it
# ---------------------------------------------------------------------------


def _joblib_setup(library: str) -> Any:
    def setup(context: Context) -> Any:
        import joblib

        joblib.Parallel(n_jobs=2)(joblib.delayed(_identity)(_tiny(library)) for _ in range(2))
        return PICKLED[library][1](context.arrays)

    return setup


def _joblib_run(obj: Any) -> Any:
    import joblib

    return joblib.Parallel(n_jobs=2)([joblib.delayed(_identity)(obj)])[0]


def _joblib_finish(library: str) -> Any:
    def finish(context: Context, state: Any, received: Any) -> str:
        from joblib.externals.loky import get_reusable_executor

        try:
            return _check(context, library, received)
        finally:
            get_reusable_executor().shutdown(wait=True)

    return finish


_register(
    "joblib",
    "joblib Parallel(n_jobs=2): one task, W in and out",
    "Parallel(n_jobs=2)([delayed(identity)({obj})])",
    _joblib_setup,
    _joblib_run,
    _joblib_finish,
)

#: Goals of the transports issue: dask within 1.1x of numpy's time; a shared
#: map through a Queue costs metadata only (here: under 1% of the time numpy
#: arrays take through the same Queue).
TARGETS.extend(
    [
        time_goal(
            "dask scatter + gather: at most 1.1x numpy's time", "dask", ("dask", "numpy"), 1.1
        ),
        time_goal(
            "Queue after share_memory(): metadata only, under 1% of numpy's time",
            "queueshm",
            ("queueshm", "numpy"),
            0.01,
        ),
    ]
)
