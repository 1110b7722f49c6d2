"""Hypothesis strategies that build random valid blockmap objects.

- ``label_names``: valid but odd label names (``_``, ``__``, 100 characters,
  names of archive entries such as ``values`` or ``gradients``);
- ``labels_objects``: Labels with 1 to 3 dimensions, 0 to 6 unique entries,
  int32 values over the whole range;
- ``tensor_blocks`` / ``tensor_maps``: blocks and maps of every element type
  blockmap supports (helpers/dtypes.py), 0 to 3 components, blocks with
  0 samples, maps with 0 blocks, gradients two deep (a gradient of a
  gradient), with parameter names that are archive entry names, and info
  dicts with any text (``for_metatensor=True`` leaves out what metatensor-core
  0.2.6 refuses: components without entries, NUL characters in info);
- ``SETTINGS``: the settings every property test uses: deterministic
  (derandomized, no example database), no deadline. The environment variable
  ``BLOCKMAP_PROPERTY_EXAMPLES=<n>`` runs ``n`` random (not derandomized)
  examples per test instead, for a longer local search.

Values are random bytes (NaN payloads, negative zeros and subnormals
included) from a seed hypothesis draws, so values of any size cost one draw;
booleans are 0 or 1.
"""

import dataclasses
import functools
import operator
import os
import string

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from blockmap import Labels, TensorBlock, TensorMap

from .dtypes import ALL_DTYPES

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _settings():
    examples = os.environ.get("BLOCKMAP_PROPERTY_EXAMPLES")
    common = {
        "deadline": None,
        "database": None,
        "print_blob": True,
        # building a map with gradients two deep and up to 7 dimensions takes
        # more draws than hypothesis expects of a "fast" strategy
        "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    }
    if examples:
        return settings(max_examples=int(examples), derandomize=False, **common)
    return settings(max_examples=60, derandomize=True, **common)


SETTINGS = _settings()


def scaled(settings_, fraction):
    """``settings_`` with ``fraction`` of its examples (at least 5)."""
    return settings(settings_, max_examples=max(5, int(settings_.max_examples * fraction)))


# ------------------------------------------------------------------ names

ODD_NAMES = [
    "_",
    "__",
    "_0",
    "A",
    "Z9",
    "a" * 100,
    "_" * 30,
    # names of archive entries and directories (a gradient parameter becomes
    # a directory: blocks/0/gradients/<parameter>/values.npy)
    "values",
    "samples",
    "components",
    "properties",
    "gradients",
    "keys",
    "info",
    "blocks",
    "npy",
]

_FIRST = string.ascii_letters + "_"
_regular_names = st.builds(
    operator.add, st.sampled_from(_FIRST), st.text(_FIRST + string.digits, max_size=12)
)
label_names = st.one_of(st.sampled_from(ODD_NAMES), _regular_names)


@functools.cache
def _name_lists(min_size, max_size):
    return st.lists(label_names, min_size=min_size, max_size=max_size, unique=True)


@st.composite
def unique_names(draw, min_size, max_size, exclude=()):
    """Unique names, none of them in ``exclude`` (then at least 0 of them)."""
    if not exclude:
        return draw(_name_lists(min_size, max_size))
    assert min_size == 0
    names = draw(_name_lists(0, max_size + len(exclude)))
    return [name for name in names if name not in exclude][:max_size]


# ----------------------------------------------------------------- labels

label_entries = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([INT32_MIN, INT32_MAX, INT32_MIN + 1, INT32_MAX - 1]),
    st.integers(INT32_MIN, INT32_MAX),
)


@functools.cache
def _counts(min_count, max_count):
    # every count about as likely (a list strategy mostly draws short lists),
    # shrinking towards the smallest non-zero count
    counts = list(range(max(min_count, 1), max_count + 1))
    return st.sampled_from(counts + [0] if min_count == 0 else counts)


@functools.cache
def _rows(n_dims, count, n_parent=None):
    columns = [label_entries] * n_dims
    if n_parent is not None:
        # gradient samples: the first column points into the parent's samples
        columns[0] = st.integers(0, max(n_parent - 1, 0))
    return st.lists(st.tuples(*columns), min_size=count, max_size=count, unique=True)


@st.composite
def label_rows(draw, n_dims, min_count=0, max_count=6, n_parent=None):
    """Unique rows of ``n_dims`` int32 values, as a ``(count, n_dims)`` array."""
    count = draw(_counts(min_count, max_count))
    if n_parent is not None and n_dims == 1:
        count = min(count, n_parent)
    rows = draw(_rows(n_dims, count, n_parent))
    return np.array(rows, dtype=np.int32).reshape(len(rows), n_dims)


@st.composite
def labels_with_names(draw, names, min_count=0, max_count=6):
    return Labels(list(names), draw(label_rows(len(names), min_count, max_count)))


@st.composite
def labels_objects(draw, max_dims=3, max_count=6):
    names = draw(unique_names(1, max_dims))
    return draw(labels_with_names(names, max_count=max_count))


# ------------------------------------------------------------------ values

dtypes = st.sampled_from([np.dtype(dtype) for dtype in ALL_DTYPES])


@st.composite
def values_arrays(draw, shape, dtype):
    """A C-contiguous, aligned, writable array of random bytes; for floating
    types, one time in two, a quarter of the elements are special values
    (NaN with a payload, infinities, -0.0, the smallest subnormal, extremes)."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    raw = rng.bytes(size * dtype.itemsize)
    if dtype == np.bool_:
        raw = bytes(b & 1 for b in raw)
    values = np.frombuffer(raw, dtype=dtype).copy()
    if dtype.kind in "fc" and size and draw(st.booleans()):
        real = np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype
        info = np.finfo(real)
        nan_payload = np.array(np.nan, dtype=real)
        nan_payload.view(f"u{real.itemsize}")[...] |= 1
        specials = np.array(
            [np.nan, -np.nan, np.inf, -np.inf, -0.0, info.smallest_subnormal, info.max, info.min],
            dtype=real,
        )
        specials = np.append(specials, nan_payload)
        chosen = rng.random(size) < 0.25
        picked = rng.choice(specials, size=int(chosen.sum()))
        if dtype.kind == "c":
            values.real[chosen] = picked
            values.imag[chosen] = rng.choice(specials, size=len(picked))
        else:
            values[chosen] = picked
    return values.reshape(shape)


# ------------------------------------------------------------- structure


@dataclasses.dataclass
class Structure:
    """What every block of a map shares: names and gradient parameters.

    For a gradient, ``sample_names`` starts with "sample", ``component_names``
    are the extra components in front of the parent's, and
    ``property_names`` is empty (the properties are the parent's).
    """

    sample_names: list
    component_names: list
    property_names: list
    gradients: dict

    def depth(self):
        return 1 + max((g.depth() for g in self.gradients.values()), default=0)


@st.composite
def _gradient_structures(draw, used_components, depth):
    others = draw(unique_names(0, 2, exclude={"sample"}))
    extra = draw(unique_names(0, 1, exclude=set(used_components)))
    gradients = {}
    if depth > 1:
        gradients = draw(
            st.dictionaries(
                label_names,
                _gradient_structures([*extra, *used_components], depth - 1),
                max_size=2,
            )
        )
    return Structure(["sample", *others], extra, [], gradients)


@st.composite
def structures(draw, max_components=3, max_gradient_depth=2):
    sample_names = draw(unique_names(1, 3))
    component_names = draw(unique_names(0, max_components))
    property_names = draw(unique_names(1, 2))
    gradients = {}
    if max_gradient_depth > 0:
        gradients = draw(
            st.dictionaries(
                label_names,
                _gradient_structures(component_names, max_gradient_depth),
                max_size=2,
            )
        )
    return Structure(sample_names, component_names, property_names, gradients)


# ------------------------------------------------------------------ blocks

MAX_SAMPLES = 5


@st.composite
def blocks_with_structure(draw, structure, dtype, parent=None, for_metatensor=False):
    """A block with ``structure``'s names and gradients; a gradient of
    ``parent`` when it is given. Components have 0 to 3 entries (1 to 3
    ``for_metatensor``: metatensor-core refuses components without entries)."""
    if parent is None:
        samples = draw(labels_with_names(structure.sample_names, max_count=MAX_SAMPLES))
        components = []
        properties = draw(labels_with_names(structure.property_names, max_count=4))
    else:
        n_parent = len(parent.samples)
        max_count = MAX_SAMPLES if n_parent else 0
        rows = draw(label_rows(len(structure.sample_names), max_count=max_count, n_parent=n_parent))
        samples = Labels(structure.sample_names, rows)
        components = list(parent.components)
        properties = parent.properties
    min_entries = 1 if for_metatensor else 0
    extra = [
        Labels.range(name, draw(_counts(min_entries, 3))) for name in structure.component_names
    ]
    components = extra + components
    shape = (len(samples), *(len(c) for c in components), len(properties))
    values = draw(values_arrays(shape, dtype))
    block = TensorBlock(values, samples, components, properties)
    for parameter, gradient in structure.gradients.items():
        gradient_block = draw(blocks_with_structure(gradient, dtype, block, for_metatensor))
        block.add_gradient(parameter, gradient_block)
    return block


@st.composite
def tensor_blocks(draw, dtype=None, max_components=3, max_gradient_depth=2, for_metatensor=False):
    """A block of element type ``dtype`` (drawn when None)."""
    structure = draw(structures(max_components, max_gradient_depth))
    dtype = draw(dtypes) if dtype is None else np.dtype(dtype)
    return draw(blocks_with_structure(structure, dtype, for_metatensor=for_metatensor))


# -------------------------------------------------------------------- maps


def info_dicts(for_metatensor=False):
    # any character that UTF-8 can encode (not a lone surrogate)
    excluded = "\x00" if for_metatensor else ""
    characters = st.characters(exclude_categories=["Cs"], exclude_characters=excluded)
    text = st.text(characters, max_size=20)
    return st.dictionaries(text, text, max_size=4)


@st.composite
def tensor_maps(
    draw, dtype=None, max_blocks=4, max_components=3, max_gradient_depth=2, for_metatensor=False
):
    """A map whose blocks share a random structure and element type
    ``dtype`` (drawn when None: all blocks of a map have one dtype)."""
    structure = draw(structures(max_components, max_gradient_depth))
    keys = draw(labels_objects(max_count=max_blocks))
    dtype = draw(dtypes) if dtype is None else np.dtype(dtype)
    blocks = []
    for _ in range(len(keys)):
        blocks.append(draw(blocks_with_structure(structure, dtype, None, for_metatensor)))
    tensor = TensorMap(keys, blocks)
    for key, value in draw(info_dicts(for_metatensor)).items():
        tensor.set_info(key, value)
    return tensor
