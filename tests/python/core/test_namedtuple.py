"""The named tuples of dataset entries and of blockmap.learn's samples and
batches (``blockmap._namedtuple``): made without compiling any name into
code, so that every str field name a dataset writer accepts reads back,
pickles and prints; and metatensor-learn's named tuples where those work
(its ``namedtuple``, in the same process, is the oracle).

Property tests are deterministic (strategies.SETTINGS);
``BLOCKMAP_PROPERTY_EXAMPLES=2000`` searches longer, at random.
"""

import itertools
import keyword
import pickle
import random

import numpy as np
import pytest

import blockmap
from blockmap import Dataset, DatasetWriter, _namedtuple
from blockmap.exceptions import BlockMapError

pytest.importorskip("hypothesis")

from hypothesis import given, note  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from helpers.strategies import SETTINGS  # noqa: E402

#: names that broke the compiled classes (a SyntaxError, or a wrong
#: ``__new__``: the names of its own arguments and globals), broke the
#: repr (``%``), or are the class's own attributes
TRICKY = [
    "_cls",
    "_tuple_new",
    "_0",
    "_1",
    "_2",
    "a b",
    "with space",
    "class",
    "self",
    "x%d",
    "%",
    "%r%s",
    "{}",
    "__new__",
    "__len__",
    "_fields",
    "_make",
    "count",
    "é",
    "",
    " ",
    "\x00",
    "\ud800",
    "mtt::dipole",
    "system/pairs/0",
]

names_strategy = st.lists(
    st.one_of(st.sampled_from(TRICKY), st.text(max_size=12)), max_size=6, unique=True
)


def _map(value):
    labels = blockmap.Labels(["_"], np.zeros((1, 1), dtype=np.int32))
    block = blockmap.TensorBlock(np.full((1, 1), float(value)), labels, [], labels)
    return blockmap.TensorMap(labels, [block])


def assert_named_tuple_of(value, names, values):
    """``value`` is a named tuple with fields ``names`` holding ``values``,
    readable every way metatensor-learn's are."""
    cls = type(value)
    assert value._fields == tuple(names) and len(value) == len(names)
    assert tuple(value) == tuple(values)
    for index, name in enumerate(names):
        assert value[name] is values[index] and value[index] is values[index]
        if name.isidentifier() and not _namedtuple._is_reserved(name):
            assert getattr(value, name) is values[index]
    assert value._asdict() == dict(zip(names, values, strict=True))
    assert cls._make(values) == value and cls(*values) == value
    assert value._replace() == value
    if names:
        replaced = value._replace(**{names[0]: "new"})
        assert replaced[0] == "new" and replaced[1:] == value[1:]
    text = repr(value)
    assert text.startswith(f"{cls.__name__}(")
    back = pickle.loads(pickle.dumps(value))
    assert type(back) is cls and back == value
    assert pickle.loads(pickle.dumps(cls)) is cls


@SETTINGS
@given(names=names_strategy)
def test_every_field_name_makes_a_working_class(names):
    cls = _namedtuple.namedtuple("Sample", names)
    values = [f"value {index}" for index in range(len(names))]
    assert_named_tuple_of(cls(*values), names, values)
    # by keyword: each identifier by its name, the others by `_<index>`
    # when no field has that name
    keywords = {}
    for index, name in enumerate(names):
        if name.isidentifier() and not keyword.iskeyword(name):
            keywords[name] = values[index]
    for index, name in enumerate(names):
        alias = f"_{index}"
        if not (name.isidentifier() and not keyword.iskeyword(name)) and alias not in names:
            keywords[alias] = values[index]
    if len(keywords) == len(names):
        assert cls(**keywords) == tuple(values)


@SETTINGS
@given(names=names_strategy)
def test_every_field_name_a_writer_accepts_reads_back(names, tmp_path_factory):
    """Whatever names ``DatasetWriter.write(**fields)`` accepts, the entry
    reads back: ``ds[0]`` (was a SyntaxError for ``_cls``, ``_0`` after a
    non-identifier, or a TypeError for ``_tuple_new`` and ``x%d``), by name
    and position, pickled and printed."""
    if not names:
        return
    path = tmp_path_factory.mktemp("names") / "names.bmds"
    maps = {name: _map(index) for index, name in enumerate(names)}
    try:
        with DatasetWriter(path) as writer:
            writer.write(**maps)
    except BlockMapError as error:
        note(f"refused by the writer: {error!r}")
        return
    entry = Dataset(path)[0]
    assert entry._fields == tuple(names)
    for index, name in enumerate(names):
        assert entry[name].block(0).values[0, 0] == index == entry[index].block(0).values[0, 0]
    assert_named_tuple_of(entry, names, list(entry))


def test_names_that_broke_the_compiled_classes_read_back(tmp_path):
    """The review's cases, each written and read back."""
    for case in (["_cls"], ["_tuple_new"], ["a b", "_0"], ["x%d", "y"], ["self", "_cls", "%"]):
        path = tmp_path / f"{len(case)}-{abs(hash(tuple(case)))}.bmds"
        with DatasetWriter(path) as writer:
            writer.write(**{name: _map(i) for i, name in enumerate(case)})
        entry = Dataset(path)[0]
        assert entry._fields == tuple(case), case
        assert [entry[name].block(0).values[0, 0] for name in case] == list(range(len(case)))
        assert "Entry(" in repr(entry)
        back = pickle.loads(pickle.dumps(entry))
        assert back._fields == entry._fields


class _Crafted:
    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def test_a_pickle_naming_such_fields_makes_a_working_class():
    """A pickle may name any fields: no name reaches compiled code (the
    strict class check let `_cls` through to a SyntaxError)."""
    for names in (("_cls",), ("a b", "_0"), ("_tuple_new", "x%d")):
        cls = pickle.loads(pickle.dumps(_Crafted(_namedtuple._class, "Sample", names)))
        assert cls._fields == names
        values = list(range(len(names)))
        assert_named_tuple_of(cls(*values), list(names), values)


def test_calls_bind_and_fail_as_metatensor_learns():
    """Where metatensor-learn's compiled class works, blockmap's binds the
    same calls to the same values and refuses the others with the same
    TypeError and message (missing, extra, unknown and repeated
    arguments), and prints the same repr."""
    ml = pytest.importorskip("metatensor.learn")
    theirs_namedtuple = ml.data._namedtuple.namedtuple
    rng = random.Random(5)
    pool = ["a", "b", "with space", "class", "_0", "_1", "é", "_cls", "1x"]
    compared = 0
    for size in range(4):
        for names in itertools.permutations(pool, size):
            try:
                theirs = theirs_namedtuple("S", names)
            except SyntaxError:
                continue  # `_cls`, or `_0` after a non-identifier: blockmap's works
            ours = _namedtuple.namedtuple("S", names)
            arguments = [
                name if name.isidentifier() and not keyword.iskeyword(name) else f"_{i}"
                for i, name in enumerate(names)
            ]
            for _ in range(4):
                positional = list(range(rng.randint(0, size + 1)))
                chosen = rng.sample([*arguments, "zz"], min(size + 1, rng.randint(0, 2)))
                keywords = {name: 9 for name in chosen}

                def outcome(cls, positional=positional, keywords=keywords):
                    try:
                        value = cls(*positional, **keywords)
                    except TypeError as error:
                        return ("TypeError", str(error))
                    return ("ok", repr(value), tuple(value))

                assert outcome(ours) == outcome(theirs), (names, positional, keywords)
                compared += 1
    assert compared > 1000
