"""dask.distributed serializers for TensorMap, TensorBlock and Labels.

Registered with ``distributed.protocol.dask_serialize`` /
``dask_deserialize`` as soon as both blockmap and distributed are imported
(in either order: ``blockmap._hooks.when_imported``), so nothing
needs to be done on the client or the workers. Every array travels as its
own out-of-band frame on every path, including the scheduler's, where
plain pickle would use protocol 4 and the copying ``.mts`` archive.

Frames are the protocol 5 pickle layout (docs/pickle.md): the header, then
one frame per array. dask delivers them as byte memoryviews at any
alignment; the reconstructor views aligned frames and copies only
misaligned ones. A frame that arrives read-only for an array that was
writable is copied once, as distributed does for numpy arrays, so that the
receiver gets writable values exactly when the sender had them.
"""

from __future__ import annotations

from typing import Any

from distributed.protocol import dask_deserialize, dask_serialize

from ._blockmap import Labels, TensorBlock, TensorMap, _as_torch, _foreign, _reconstruct
from .exceptions import BlockMapTypeError, FormatError

__all__ = ["deserialize", "register", "serialize"]

Serializable = TensorMap | TensorBlock | Labels


def serialize(obj: Serializable) -> tuple[dict[str, Any], list[Any]]:
    """``(header, frames)`` of ``obj``: no array data is copied.

    Parameters
    ----------
    obj : TensorMap, TensorBlock or Labels
        What to send.

    Returns
    -------
    tuple of (dict, list)
        dask's header and frames: the pickle header and the arrays' memory.

    Raises
    ------
    BlockMapTypeError
        If ``obj`` is not one of blockmap's three classes.
    BlockMapRuntimeError
        If a torch tensor that requires grad is not a leaf.
    BlockMapMemoryError
        If memory for the header cannot be allocated.
    """
    if not isinstance(obj, (TensorMap, TensorBlock, Labels)):
        raise BlockMapTypeError(
            f"blockmap.dask.serialize takes a TensorMap, TensorBlock or Labels, "
            f"got {_foreign(obj) or type(obj).__name__}"
        )
    torch: dict[str, Any] = {}
    if obj._arrays == "torch":
        # the numpy twin (the same memory), and the tensors requiring grad
        _, (obj, requires_grad) = obj.__reduce_ex__(5)
        torch = {"arrays": "torch", "requires_grad": list(requires_grad)}
    _, (version, header, *buffers) = obj.__reduce_ex__(5)
    frames = [header, *(buffer.raw() for buffer in buffers)]
    writeable = [not frame.readonly for frame in frames[1:]]
    return {"version": version, "writeable": writeable, **torch}, frames


def _with_writeable_flag(frame: Any, writeable: bool) -> memoryview:
    try:
        view = memoryview(frame)
    except TypeError:
        raise FormatError(
            f"a dask frame must be a bytes-like object, got {type(frame).__name__}"
        ) from None
    if writeable and view.readonly:
        return memoryview(bytearray(view))
    if not writeable and not view.readonly:
        return view.toreadonly()
    return view


def deserialize(header: dict[str, Any], frames: list[Any]) -> Serializable:
    """Rebuild what :func:`serialize` described, viewing the frames.

    A header or frames that :func:`serialize` did not make raise
    :class:`blockmap.FormatError`.

    Parameters
    ----------
    header : dict
        The header :func:`serialize` made.
    frames : list
        The frames :func:`serialize` made (bytes-like objects).

    Returns
    -------
    TensorMap, TensorBlock or Labels
        The object, viewing the frames.

    Raises
    ------
    FormatError
        If the header or the frames are not what :func:`serialize` made.
    BlockMapMemoryError
        If memory for the labels cannot be allocated.
    """
    if not isinstance(header, dict):
        raise FormatError(f"the dask header must be a dict, got {type(header).__name__}")
    if not isinstance(frames, list | tuple) or not frames:
        raise FormatError("the dask frames must be a non-empty list")
    writeable = header.get("writeable")
    if not isinstance(writeable, list | tuple) or not all(isinstance(w, bool) for w in writeable):
        raise FormatError("the dask header's 'writeable' must be a list of booleans")
    if len(writeable) != len(frames) - 1:
        raise FormatError(
            f"the dask header describes {len(writeable)} buffers "
            f"but {len(frames) - 1} frames arrived"
        )
    buffers = [
        _with_writeable_flag(frame, w) for frame, w in zip(frames[1:], writeable, strict=True)
    ]
    rebuilt = _reconstruct(header.get("version"), frames[0], *buffers)
    if header.get("arrays") == "torch":
        requires_grad = header.get("requires_grad")
        if not isinstance(requires_grad, list) or not all(
            type(i) is int and i >= 0 for i in requires_grad
        ):
            raise FormatError("the dask header's 'requires_grad' must be a list of indices")
        return _as_torch(rebuilt, requires_grad)
    return rebuilt


def register() -> None:
    """Register :func:`serialize` and :func:`deserialize` for blockmap's types."""
    for cls in (TensorMap, TensorBlock, Labels):
        dask_serialize.register(cls)(serialize)
        dask_deserialize.register(cls)(deserialize)


register()
