"""Helpers for the pickle tests (test_pickle.py).

- ``identity``, ``doubled``: module-level functions that workers (spawned
  multiprocessing, dask, ray, joblib) can import;
- ``wire_arrays``: the arrays of a map, block or labels in the order of the
  pickle buffers (docs/pickle.md, format version 3: small labels equal to
  earlier ones have no buffer);
- ``CRAFTED``: crafted reconstructor input, each case a function that loads
  it. ``main`` runs the named cases in this process, printing ``START name``
  before each and ``RESULT {json}`` after it, so that a parent process can
  tell which case crashed the interpreter.
"""

import json
import os
import pickle
import sys

import numpy as np

import blockmap
from blockmap import Labels, TensorBlock, TensorMap
from blockmap._blockmap import _reconstruct

from .io_cases import archive_entries, make_map


def identity(data):
    """Returns its argument: a worker sends back what it was sent."""
    return data


def _doubled_block(block):
    doubled = TensorBlock(2 * block.values, block.samples, block.components, block.properties)
    for parameter, gradient in block.gradients():
        doubled.add_gradient(parameter, _doubled_block(gradient))
    return doubled


def doubled(tensor):
    """A new map: the blocks of ``tensor`` with values (and gradients) doubled,
    and its info."""
    result = TensorMap(tensor.keys, [_doubled_block(block) for block in tensor.blocks()])
    for key, value in tensor.info().items():
        result.set_info(key, value)
    return result


# ---------------------------------------------------------------- wire order


#: labels up to this size equal to labels sent before them are referred to,
#: not sent again (``SHARED_LABELS_MAX`` in src/pickle/mod.rs)
SHARED_LABELS_MAX = 4096


def _labels_arrays(name, labels, sent):
    """The labels' buffer, unless small labels with the same names and
    values are in ``sent`` (updated; None: version 1, every labels sent)."""
    values = labels.values
    if sent is not None and values.nbytes <= SHARED_LABELS_MAX:
        key = (tuple(labels.names), values.tobytes())
        if key in sent:
            return []
        sent.add(key)
    return [(name, values)]


def _block_arrays(prefix, block, is_gradient, sent):
    arrays = [(f"{prefix}values", block.values)]
    arrays += _labels_arrays(f"{prefix}samples", block.samples, sent)
    for k, component in enumerate(block.components):
        arrays += _labels_arrays(f"{prefix}components/{k}", component, sent)
    if not is_gradient:
        arrays += _labels_arrays(f"{prefix}properties", block.properties, sent)
    for parameter in sorted(block.gradients_list()):
        gradient = block.gradient(parameter)
        arrays += _block_arrays(f"{prefix}gradients/{parameter}/", gradient, True, sent)
    return arrays


def wire_arrays(data, refer=True):
    """``[(name, array)]`` in the order of the protocol 5 buffers: for a map
    the keys, then each block; for a block its values, samples, components,
    properties (not for gradients), then its gradients sorted by parameter,
    recursively; small labels equal to labels before them are left out
    (the header refers to the first; ``refer=False``: version 1, all in)."""
    sent = set() if refer else None
    if isinstance(data, Labels):
        return [("labels", data.values)]
    if isinstance(data, TensorBlock):
        return _block_arrays("", data, False, sent)
    assert isinstance(data, TensorMap)
    arrays = _labels_arrays("keys", data.keys, sent)
    for i, block in enumerate(data.blocks()):
        arrays += _block_arrays(f"blocks/{i}/", block, False, sent)
    return arrays


def is_values(name):
    """Whether the wire array ``name`` is values (a block's or a gradient's):
    received data may view those; labels always own a copy."""
    return name == "values" or name.endswith("/values")


# ------------------------------------------------------------ crafted input


def crafted_map():
    """Two blocks with a component and gradients two deep, and info."""
    tensor = make_map(np.random.default_rng(7), n_samples=(2, 3), component_sizes=(3,), nested=True)
    tensor.set_info("origin", "crafted")
    return tensor


def _parts(data=None):
    """``(header as a dict, [bytearray per buffer], {name: buffer index})``."""
    data = crafted_map() if data is None else data
    _, args = data.__reduce_ex__(5)
    version, header, *buffers = args
    assert version == 3
    names = {name: i for i, (name, _) in enumerate(wire_arrays(data))}
    return json.loads(header), [bytearray(b.raw()) for b in buffers], names


def _load(header, buffers, version=3):
    if isinstance(header, dict):
        header = json.dumps(header).encode()
    return _reconstruct(version, header, *buffers)


def _edit_buffer(name, edit):
    """A case that replaces buffer ``name`` by ``edit(buffer)``."""

    def case():
        header, buffers, names = _parts()
        index = names[name]
        buffers[index] = edit(buffers[index])
        return _load(header, buffers)

    return case


def _edit_header(edit):
    """A case that loads the real buffers with a header changed by ``edit(header)``
    (which changes the dict in place or returns the new header)."""

    def case():
        header, buffers, _ = _parts()
        changed = edit(header)
        return _load(header if changed is None else changed, buffers)

    return case


def _edit_raw_header(edit):
    """A case that loads the real buffers with ``edit(header bytes)``."""

    def case():
        _, args = crafted_map().__reduce_ex__(5)
        version, header, *buffers = args
        return _reconstruct(version, edit(header), *buffers)

    return case


def _set(path, value):
    """An edit setting ``header[path[0]][path[1]]... = value``."""

    def edit(header):
        target = header
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _without_last_buffer():
    header, buffers, _ = _parts()
    return _load(header, buffers[:-1])


def _with_extra_buffer(extra):
    def case():
        header, buffers, _ = _parts()
        return _load(header, [*buffers, extra])

    return case


def _only_header():
    header, _, _ = _parts()
    return _load(header, [])


def _no_header():
    return _reconstruct(1)


def _zeros(buffer):
    return bytearray(len(buffer))


def _repeat_first_label(n_columns):
    def edit(buffer):
        rows = np.frombuffer(bytes(buffer), dtype=np.int32).reshape(-1, n_columns).copy()
        rows[1] = rows[0]
        return bytearray(rows.tobytes())

    return edit


def _set_column(column, value, n_columns):
    def edit(buffer):
        rows = np.frombuffer(bytes(buffer), dtype=np.int32).reshape(-1, n_columns).copy()
        rows[:, column] = value
        return bytearray(rows.tobytes())

    return edit


def _nested_gradients(depth):
    """A header whose "alpha" gradient has gradients ``depth`` deep (and too few
    buffers for them); the JSON text is built by hand (json.dumps recurses)."""

    def edit(header):
        alpha = json.dumps(header["blocks"][0]["gradients"]["alpha"])
        header["blocks"][0]["gradients"]["alpha"] = "@@"
        nested = (alpha[:-1] + ', "gradients": {"g": ') * depth + alpha + "}}" * depth
        return json.dumps(header).replace('"@@"', nested).encode()

    return edit


def _deep_json(depth):
    def edit(_header):
        return ('{"kind": "labels", "labels": ' + "[" * depth + "]" * depth + "}").encode()

    return edit


def _more_blocks_than_keys():
    header, buffers, names = _parts()
    first = names["blocks/0/values"]
    second = names["blocks/1/values"]
    header["blocks"].append(header["blocks"][0])
    return _load(header, buffers + buffers[first:second])


def _fewer_blocks_than_keys():
    header, buffers, names = _parts()
    second = names["blocks/1/values"]
    del header["blocks"][1]
    return _load(header, buffers[:second])


def _gradient_with_properties():
    header, buffers, names = _parts()
    block = header["blocks"][0]
    block["gradients"]["alpha"]["properties"] = block["properties"]
    properties = buffers[names["blocks/0/properties"]]
    # the buffer of the extra labels goes after the gradient's samples and
    # components (those sent: equal ones are references)
    order = list(names)
    start = order.index("blocks/0/gradients/alpha/values")
    own = ("blocks/0/gradients/alpha/samples", "blocks/0/gradients/alpha/components/")
    index = next(names[name] for name in order[start + 1 :] if not name.startswith(own))
    return _load(header, [*buffers[:index], properties, *buffers[index:]])


def _gradient_components_differ_from_parent():
    """The gradient's second component (the parent's, referred to) points
    to the block's properties instead."""
    header, buffers, names = _parts()
    gradient = header["blocks"][0]["gradients"]["positions"]
    assert isinstance(gradient["components"][1], int), "the parent's component, referred to"
    gradient["components"][1] = names["blocks/0/properties"]
    return _load(header, buffers)


def _refer(target):
    """A case whose first block's samples refer to ``target``: a wire name
    (its buffer index) or a JSON value."""

    def case():
        header, buffers, names = _parts()
        index = names.get(target, target) if isinstance(target, str) else target
        if header["blocks"][0]["samples"] is not None:
            del buffers[names["blocks/0/samples"]]
        header["blocks"][0]["samples"] = index
        return _load(header, buffers)

    return case


def _reference_in_version_1():
    """A version 3 header, with references, read as version 1."""
    header, buffers, _ = _parts()
    assert any(isinstance(block["properties"], int) for block in header["blocks"])
    return _load(header, buffers, version=1)


def _as_labels_kind():
    header, buffers, _ = _parts()
    return _load({"kind": "labels", "labels": header["keys"]}, buffers)


def _as_block_kind():
    header, buffers, _ = _parts()
    return _load({"kind": "block", "block": header["blocks"][0]}, buffers)


def _version(version):
    def case():
        header, buffers, _ = _parts()
        return _load(header, buffers, version=version)

    return case


def _archive_parts(data=None):
    data = crafted_map() if data is None else data
    _, args = data.__reduce_ex__(4)
    version, kind, archive = args
    assert version == 0
    return kind, archive


def _v0(edit_archive=None, kind=None, data=None):
    def case():
        real_kind, archive = _archive_parts(data() if data is not None else None)
        if edit_archive is not None:
            archive = edit_archive(archive)
        return _reconstruct(0, real_kind if kind is None else kind, archive)

    return case


def _flip(position):
    """Flip the bits of the byte at ``position`` (a fraction of the length)."""

    def edit(archive):
        archive = bytearray(archive)
        archive[int(len(archive) * position)] ^= 0xFF
        return archive

    return edit


def _flip_payload(entry):
    """Flip the bits of a byte in the payload of the archive entry ``entry``."""

    def edit(archive):
        archive = bytearray(archive)
        (start,) = [e.payload_start for e in archive_entries(archive) if e.name == entry]
        archive[start + 3] ^= 0xFF
        return archive

    return edit


#: Version 0 archives whose payload bytes were changed: pickles carry no
#: checksum (as with numpy arrays), so these load, with the changed values;
#: what matters is that nothing crashes. test_pickle.py checks both.
FLIPPED_V0 = {
    "keys": (_v0(_flip_payload("keys.npy")), "keys.npy"),
    "block values": (
        _v0(_flip_payload("values.npy"), data=lambda: crafted_map().block_by_id(1)),
        "values.npy",
    ),
}


def _v0_only_kind():
    kind, _ = _archive_parts()
    return _reconstruct(0, kind)


def _v0_extra_argument():
    kind, archive = _archive_parts()
    return _reconstruct(0, kind, archive, b"")


def _truncated_stream(protocol, out_of_band=False):
    def case():
        buffers = []
        callback = buffers.append if out_of_band else None
        data = pickle.dumps(crafted_map(), protocol=protocol, buffer_callback=callback)
        return pickle.loads(data[:-10], buffers=buffers if out_of_band else None)

    return case


def _stream_missing_buffer():
    buffers = []
    data = pickle.dumps(crafted_map(), protocol=5, buffer_callback=buffers.append)
    return pickle.loads(data, buffers=buffers[:-1])


# name -> (case, what it must raise: "blockmap" for a blockmap ValueError
# (FormatError / ValidationError), "blockmap-any" for any BlockMapError,
# "pickle" for an error of Python's pickle module; a message fragment or None)
CRAFTED = {
    # buffers
    "too_few_buffers": (_without_last_buffer, "blockmap", "too few"),
    "too_many_buffers_empty": (_with_extra_buffer(b""), "blockmap", "buffers"),
    "too_many_buffers_data": (_with_extra_buffer(bytearray(8)), "blockmap", "buffers"),
    "only_the_header": (_only_header, "blockmap", "too few"),
    "no_header": (_no_header, "blockmap", None),
    "values_buffer_shorter": (_edit_buffer("blocks/0/values", lambda b: b[:-8]), "blockmap", None),
    "values_buffer_longer": (
        _edit_buffer("blocks/0/values", lambda b: b + bytes(8)),
        "blockmap",
        None,
    ),
    "values_buffer_one_byte_short": (
        _edit_buffer("blocks/1/values", lambda b: b[:-1]),
        "blockmap",
        None,
    ),
    "values_buffer_empty": (_edit_buffer("blocks/0/values", lambda b: b""), "blockmap", None),
    "keys_buffer_shorter": (_edit_buffer("keys", lambda b: b[:-4]), "blockmap", None),
    "keys_buffer_longer": (_edit_buffer("keys", lambda b: b + bytes(4)), "blockmap", None),
    "nested_gradient_buffer_shorter": (
        _edit_buffer("blocks/1/gradients/positions/gradients/strain/values", lambda b: b[:-8]),
        "blockmap",
        None,
    ),
    "component_buffer_longer": (
        _edit_buffer("blocks/0/components/0", lambda b: b + bytes(4)),
        "blockmap",
        None,
    ),
    # header: shapes, dtypes, counts
    "shape_wrong_size": (_edit_header(_set(["blocks", 0, "shape"], [3, 3, 2])), "blockmap", None),
    "shape_same_size_wrong_axes": (
        _edit_header(_set(["blocks", 0, "shape"], [3, 2, 2])),
        "blockmap",
        None,
    ),
    "shape_fewer_dimensions": (
        _edit_header(_set(["blocks", 0, "shape"], [2, 6])),
        "blockmap",
        None,
    ),
    "shape_more_dimensions": (
        _edit_header(_set(["blocks", 0, "shape"], [2, 3, 2, 1])),
        "blockmap",
        None,
    ),
    "shape_negative": (_edit_header(_set(["blocks", 0, "shape"], [2, -3, 2])), "blockmap", None),
    "shape_overflows": (
        _edit_header(_set(["blocks", 0, "shape"], [2**62, 2**62, 2])),
        "blockmap",
        None,
    ),
    "shape_not_integers": (
        _edit_header(_set(["blocks", 0, "shape"], ["2", 3, 2])),
        "blockmap",
        None,
    ),
    "gradient_shape_wrong": (
        _edit_header(_set(["blocks", 1, "gradients", "positions", "shape"], [6, 3, 3, 3])),
        "blockmap",
        None,
    ),
    "dtype_wrong_size": (_edit_header(_set(["blocks", 0, "dtype"], "<f4")), "blockmap", None),
    "dtype_object": (_edit_header(_set(["blocks", 0, "dtype"], "|O")), "blockmap", None),
    "dtype_unknown": (_edit_header(_set(["blocks", 0, "dtype"], "<x9")), "blockmap", None),
    "dtype_empty": (_edit_header(_set(["blocks", 0, "dtype"], "")), "blockmap", None),
    "dtype_not_a_string": (_edit_header(_set(["blocks", 0, "dtype"], 8)), "blockmap", None),
    "labels_dtype_float": (_edit_header(_set(["keys", "dtype"], "<f4")), "blockmap", "int32"),
    "labels_dtype_int64": (_edit_header(_set(["keys", "dtype"], "<i8")), "blockmap", None),
    "count_wrong": (_edit_header(_set(["blocks", 0, "samples", "count"], 3)), "blockmap", None),
    "count_huge": (_edit_header(_set(["keys", "count"], 2**60)), "blockmap", None),
    "count_negative": (_edit_header(_set(["keys", "count"], -1)), "blockmap", None),
    "names_one_more": (
        _edit_header(_set(["keys", "names"], ["o3_lambda", "center_type", "extra"])),
        "blockmap",
        None,
    ),
    "names_repeated": (
        _edit_header(_set(["keys", "names"], ["o3_lambda", "o3_lambda"])),
        "blockmap",
        None,
    ),
    "names_invalid": (
        _edit_header(_set(["keys", "names"], ["o3 lambda", "center_type"])),
        "blockmap",
        None,
    ),
    # header: structure
    "kind_unknown": (_edit_header(_set(["kind"], "matrix")), "blockmap", None),
    "kind_missing": (_edit_header(lambda h: h.pop("kind") and None), "blockmap", None),
    "kind_labels_with_map_buffers": (_as_labels_kind, "blockmap", None),
    "kind_block_with_map_buffers": (_as_block_kind, "blockmap", None),
    "field_unknown": (_edit_header(_set(["blocks", 0, "extra"], 1)), "blockmap", None),
    "field_missing_properties": (
        _edit_header(lambda h: h["blocks"][0].pop("properties") and None),
        "blockmap",
        None,
    ),
    "gradient_with_properties": (_gradient_with_properties, "blockmap", "properties of its own"),
    "gradients_nested_deeper": (_edit_header(_nested_gradients(3)), "blockmap", None),
    "gradients_nested_10000_deep": (_edit_header(_nested_gradients(10000)), "blockmap", None),
    "json_nested_100000_deep": (_edit_header(_deep_json(100000)), "blockmap", None),
    "more_blocks_than_keys": (_more_blocks_than_keys, "blockmap", None),
    "fewer_blocks_than_keys": (_fewer_blocks_than_keys, "blockmap", None),
    "info_not_a_string": (_edit_header(_set(["info", "origin"], 1)), "blockmap", None),
    "info_not_a_dict": (_edit_header(_set(["info"], ["origin"])), "blockmap", None),
    "header_not_json": (_edit_raw_header(lambda _: b"\xff\xfe not json"), "blockmap", None),
    "header_truncated": (_edit_raw_header(lambda h: h[: len(h) // 2]), "blockmap", None),
    "header_empty": (_edit_raw_header(lambda _: b""), "blockmap", None),
    "header_json_array": (_edit_raw_header(lambda _: b"[]"), "blockmap", None),
    "header_not_a_buffer": (_edit_raw_header(lambda _: 42), "blockmap-any", None),
    # labels and gradients the builders refuse
    "keys_not_unique": (_edit_buffer("keys", _repeat_first_label(2)), "blockmap", "twice"),
    "samples_not_unique": (
        _edit_buffer("blocks/1/samples", _repeat_first_label(2)),
        "blockmap",
        "twice",
    ),
    "components_not_unique": (
        _edit_buffer("blocks/0/components/0", _zeros),
        "blockmap",
        "twice",
    ),
    "gradient_samples_not_unique": (
        _edit_buffer("blocks/0/gradients/positions/samples", _zeros),
        "blockmap",
        "twice",
    ),
    "gradient_sample_out_of_range": (
        _edit_buffer("blocks/0/gradients/alpha/samples", _set_column(0, 99, 2)),
        "blockmap",
        None,
    ),
    "gradient_sample_negative": (
        _edit_buffer("blocks/0/gradients/alpha/samples", _set_column(0, -1, 2)),
        "blockmap",
        None,
    ),
    "gradient_components_differ_from_parent": (
        _gradient_components_differ_from_parent,
        "blockmap",
        None,
    ),
    # references to earlier labels (version 3)
    "labels_reference_to_values": (_refer("blocks/0/values"), "blockmap", "no labels"),
    "labels_reference_to_later_labels": (
        _refer("blocks/1/samples"),
        "blockmap",
        "no labels described before",
    ),
    "labels_reference_beyond_the_buffers": (_refer(10**6), "blockmap", "buffer 1000000"),
    "labels_reference_negative": (_refer(-1), "blockmap", None),
    "labels_reference_float": (_refer(1.0), "blockmap", None),
    "labels_reference_huge": (_refer(2**70), "blockmap", None),
    "labels_reference_in_version_1": (_reference_in_version_1, "blockmap", "version 3"),
    # format versions
    "version_4": (_version(4), "blockmap", "version 4"),
    "version_x": (_version("x"), "blockmap", None),
    "version_none": (_version(None), "blockmap", None),
    "version_negative": (_version(-1), "blockmap", None),
    "version_huge": (_version(2**70), "blockmap", None),
    "version_float": (_version(1.5), "blockmap", None),
    # version 0: the .mts archive in a bytearray
    "v0_corrupt_archive_middle": (_v0(_flip(0.5)), "blockmap", None),
    "v0_corrupt_archive_start": (_v0(_flip(0.0)), "blockmap", None),
    "v0_corrupt_archive_end": (_v0(_flip(0.999)), "blockmap", None),
    "v0_truncated_archive": (_v0(lambda a: a[: len(a) // 2]), "blockmap", None),
    "v0_empty_archive": (_v0(lambda a: b""), "blockmap", None),
    "v0_corrupt_labels_archive": (
        _v0(_flip(0.05), data=lambda: crafted_map().keys),
        "blockmap",
        None,
    ),
    "v0_truncated_labels_archive": (
        _v0(lambda a: a[:-3], data=lambda: crafted_map().keys),
        "blockmap",
        None,
    ),
    "v0_wrong_kind": (_v0(kind="labels"), "blockmap", None),
    "v0_unknown_kind": (_v0(kind="matrix"), "blockmap", None),
    "v0_kind_not_a_string": (_v0(kind=3), "blockmap", None),
    "v0_archive_not_a_buffer": (_v0(lambda a: 3), "blockmap-any", None),
    "v0_no_archive": (_v0_only_kind, "blockmap", None),
    "v0_extra_argument": (_v0_extra_argument, "blockmap", None),
    # pickle streams
    "stream_truncated_protocol_5_in_band": (_truncated_stream(5), "pickle", None),
    "stream_truncated_protocol_5_out_of_band": (_truncated_stream(5, True), "pickle", None),
    "stream_truncated_protocol_4": (_truncated_stream(4), "pickle", None),
    "stream_truncated_protocol_0": (_truncated_stream(0), "pickle", None),
    "stream_missing_a_buffer": (_stream_missing_buffer, "pickle", None),
}

# cases that test the runner: a crash the parent must report by name
RUNNER_SELF_TEST = {"self_test_abort": os.abort}


def _run_case(name):
    case = RUNNER_SELF_TEST[name] if name in RUNNER_SELF_TEST else CRAFTED[name][0]
    try:
        result = case()
    except BaseException as error:  # noqa: B036 - report everything to the parent
        return {
            "name": name,
            "ok": False,
            "mro": [cls.__name__ for cls in type(error).__mro__],
            "module": type(error).__module__,
            "message": str(error),
        }
    return {"name": name, "ok": True, "type": type(result).__name__}


def main(names):
    """Run the crafted cases ``names`` (all when empty), one line per event."""
    for name in names or list(CRAFTED):
        print(f"START {name}", flush=True)
        print("RESULT " + json.dumps(_run_case(name)), flush=True)
    print("DONE", flush=True)


assert issubclass(blockmap.FormatError, ValueError)

if __name__ == "__main__":
    main(sys.argv[1:])
