"""Named tuples whose field names need not be identifiers, and which pickle.

metatensor-learn's ``Sample`` and ``Batch`` (``metatensor_learn/data/
_namedtuple.py``, a copy of :func:`collections.namedtuple`) accept any
field name (``sample["with space"]``, shown as ``'with space'=2``) and
read fields by name (``sample["system"]``), but their classes are made at
run time and found by no module attribute, so neither they nor their
instances pickle: a ``DataLoader`` with workers waits forever for a batch
its worker could not send. The classes made here behave the same, and
pickle by their type name and field names: a class is made once per
``(typename, field_names)`` in each process (the cache below), an instance
pickles as that pair and its values, and the class itself (an attribute
of a pickled ``Dataset``, for spawn workers) as that pair, through
:mod:`copyreg` on its metaclass.
"""

from __future__ import annotations

import copyreg
import keyword
import operator
import sys
import threading
import weakref
from operator import itemgetter
from typing import Any

__all__ = ["namedtuple"]


class FieldsType(type):
    """The metaclass of the named tuples: their pickling is registered on it."""


# weak values: a class lives as long as something uses it, so a process
# that unpickles many different classes does not keep them all
_CLASSES: weakref.WeakValueDictionary[tuple[str, tuple[str, ...]], FieldsType] = (
    weakref.WeakValueDictionary()
)
_LOCK = threading.Lock()


def namedtuple(typename: str, field_names: Any) -> FieldsType:
    """The named tuple class ``typename`` with fields ``field_names``, made
    on the first call with this pair and the same class afterwards.

    Parameters
    ----------
    typename
        the name of the class (``"Sample"``, ``"Batch"``)
    field_names
        the field names, any strings, unique

    Returns
    -------
    FieldsType
        a subclass of ``tuple`` with ``_fields``, ``_asdict``, ``_make``,
        ``_replace``, an attribute per field whose name is an identifier,
        and ``__getitem__`` that takes a field name too

    Raises
    ------
    ValueError
        ``typename`` is a keyword, or a field name repeats
    """
    fields = tuple(map(str, field_names))
    typename = str(typename)
    key = (typename, fields)
    cls = _CLASSES.get(key)
    if cls is None:
        made = _make_class(typename, fields)
        with _LOCK:
            cls = _CLASSES.setdefault(key, made)
    return cls


def _is_reserved(name: str) -> bool:
    """Whether a field named ``name`` gets no attribute: a dunder name (it
    would replace the class's ``__new__``, ``__len__``, ``__reduce__``...)
    or one of the class's own attributes; such a field is read by its name
    or position (``sample["__len__"]``, ``sample[0]``)."""
    return (name.startswith("__") and name.endswith("__")) or name in _OWN


#: the attributes the class defines itself (see _make_class)
_OWN = frozenset(["_fields", "_make", "_replace", "_asdict"])


def _make_class(typename: str, field_names: tuple[str, ...]) -> FieldsType:
    # the class metatensor-learn's namedtuple makes, with the same names,
    # arguments, repr and methods; but no name is ever compiled into code
    # (metatensor-learn's `eval`s a lambda of the argument names: a field
    # named `_cls` or `_tuple_new`, or `_0` after a name that is not an
    # identifier, made it a SyntaxError or a wrong `__new__`) nor into a
    # format string (a `%` in a name broke its repr): every str name works
    if keyword.iskeyword(typename):
        raise ValueError(f"Type names cannot be a keyword: {typename!r}")
    typename = sys.intern(typename)

    seen = set()
    for name in field_names:
        if name in seen:
            raise ValueError(f"Encountered duplicate field name: {name!r}")
        seen.add(name)

    field_names = tuple(map(sys.intern, field_names))
    num_fields = len(field_names)
    # the argument of each field, as metatensor-learn names it: the field's
    # name when it is an identifier and not a keyword, `_<index>` otherwise
    # (then only when no field has that name: the field's own name wins)
    arg_names = [
        name if name.isidentifier() and not keyword.iskeyword(name) else f"_{index}"
        for index, name in enumerate(field_names)
    ]
    keywords: dict[str, int] = {}
    for index, name in enumerate(arg_names):
        if name == field_names[index]:
            keywords[name] = index
    for index, name in enumerate(arg_names):
        keywords.setdefault(name, index)
    # the repr's `name=` of each field, quoted when it is not an argument
    # name (metatensor-learn's `'with space'=2`)
    shown = [
        f"{name}=" if name == arg_names[index] else f"'{name}'="
        for index, name in enumerate(field_names)
    ]
    arg_list = ", ".join(arg_names)
    if num_fields == 1:
        arg_list += ","
    positions = {name: index for index, name in enumerate(field_names)}
    tuple_new = tuple.__new__
    tuple_getitem = tuple.__getitem__

    def __new__(_cls: Any, /, *args: Any, **kwargs: Any) -> Any:
        if not kwargs and len(args) == num_fields:
            return tuple_new(_cls, args)
        return tuple_new(_cls, _bound(typename, field_names, arg_names, keywords, args, kwargs))

    __new__.__doc__ = f"Create new instance of {typename}({arg_list})"

    @classmethod  # type: ignore[misc]
    def _make(cls: Any, iterable: Any) -> Any:
        result = tuple_new(cls, iterable)
        if len(result) != num_fields:
            raise TypeError(f"Expected {num_fields} arguments, got {len(result)}")
        return result

    _make.__func__.__doc__ = f"Make a new {typename} object from a sequence or iterable"

    def _replace(self: Any, /, **kwds: Any) -> Any:
        result = self._make(map(kwds.pop, field_names, self))
        if kwds:
            raise TypeError(f"Got unexpected field names: {list(kwds)!r}")
        return result

    _replace.__doc__ = f"Return a new {typename} object replacing specified fields with new values"

    def __repr__(self: Any) -> str:
        "Return a nicely formatted representation string"
        parts = ", ".join(map(operator.add, shown, map(repr, self)))
        return f"{self.__class__.__name__}({parts})"

    def _asdict(self: Any) -> dict[str, Any]:
        "Return a new dict which maps field names to their values."
        return dict(zip(self._fields, self, strict=True))

    def __getnewargs__(self: Any) -> tuple[Any, ...]:
        "Return self as a plain tuple.  Used by copy and pickle."
        return tuple(self)

    def __getitem__(self: Any, key: Any) -> Any:
        if isinstance(key, str):
            return tuple_getitem(self, positions[key])
        return tuple_getitem(self, key)

    def __reduce__(self: Any) -> tuple[Any, ...]:
        "The class (by its type name and fields) and the values, for pickle."
        return (_rebuild, (type(self), tuple(self)))

    for method in (
        __new__,
        _make.__func__,
        _replace,
        __repr__,
        _asdict,
        __getnewargs__,
        __getitem__,
        __reduce__,
    ):
        method.__qualname__ = f"{typename}.{method.__name__}"

    class_namespace = {
        "__doc__": f"{typename}({arg_list})",
        "__slots__": (),
        "_fields": field_names,
        "__new__": __new__,
        "_make": _make,
        "__replace__": _replace,
        "_replace": _replace,
        "__repr__": __repr__,
        "_asdict": _asdict,
        "__getnewargs__": __getnewargs__,
        "__getitem__": __getitem__,
        "__reduce__": __reduce__,
        "__match_args__": field_names,
    }
    for index, name in enumerate(field_names):
        if name.isidentifier() and not _is_reserved(name):
            doc = sys.intern(f"Alias for field number {index}")
            class_namespace[name] = property(itemgetter(index), doc=doc)

    result = FieldsType(typename, (tuple,), class_namespace)
    result.__module__ = __name__
    return result


def _bound(
    typename: str,
    names: tuple[str, ...],
    arg_names: list[str],
    keywords: dict[str, int],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> list[Any]:
    """The values of the fields, from the arguments of a call to the class,
    bound as Python binds those of metatensor-learn's compiled ``__new__``
    (``_cls, <arg_names>``), with its errors and messages."""
    function = f"{typename}.__new__()"
    count = len(arg_names)
    missing = object()
    values: list[Any] = list(args[:count]) + [missing] * (count - len(args))
    for name, value in kwargs.items():
        index = keywords.get(name)
        if index is None:
            raise TypeError(f"{function} got an unexpected keyword argument '{name}'")
        if values[index] is not missing:
            raise TypeError(f"{function} got multiple values for argument '{name}'")
        values[index] = value
    if len(args) > count:
        takes = count + 1  # with _cls
        plural = "" if takes == 1 else "s"
        raise TypeError(
            f"{function} takes {takes} positional argument{plural} but {len(args) + 1} were given"
        )
    absent = [
        # an argument `_<index>` that a field of that name took is shown
        # as the field's name
        f"'{arg_names[index]}'" if keywords[arg_names[index]] == index else repr(names[index])
        for index in range(count)
        if values[index] is missing
    ]
    if absent:
        if len(absent) == 1:
            listed = absent[0]
        elif len(absent) == 2:
            listed = f"{absent[0]} and {absent[1]}"
        else:
            listed = ", ".join(absent[:-1]) + f", and {absent[-1]}"
        plural = "" if len(absent) == 1 else "s"
        raise TypeError(
            f"{function} missing {len(absent)} required positional argument{plural}: {listed}"
        )
    return values


def _rebuild(cls: Any, values: Any) -> Any:
    """An instance of the named tuple class ``cls`` (pickle's reconstructor)."""
    from .exceptions import BlockMapTypeError

    if not isinstance(cls, FieldsType) or type(values) is not tuple:
        raise BlockMapTypeError(
            "this pickle is not a blockmap named tuple: its class is "
            f"{type(cls).__name__} and its values {type(values).__name__}, not a class "
            "made by blockmap._namedtuple and a tuple"
        )
    return cls._make(values)


#: the most fields a pickled class may have: a class costs memory per
#: field (its name, interned, and an attribute), which a pickle of a few
#: bytes a name would otherwise multiply
MAX_PICKLED_FIELDS = 10_000


def _class(typename: Any, field_names: Any) -> FieldsType:
    """The class named by a pickle (its type name and field names), checked
    before anything is made of them: strings only, unique, at most
    :data:`MAX_PICKLED_FIELDS`."""
    from .exceptions import BlockMapTypeError, ValidationError

    if (
        type(typename) is not str
        or type(field_names) is not tuple
        or any(type(name) is not str for name in field_names)
    ):
        raise BlockMapTypeError(
            "this pickle is not a blockmap named tuple class: its type name must be a "
            "str and its field names a tuple of str"
        )
    if len(field_names) > MAX_PICKLED_FIELDS:
        raise ValidationError(
            f"this pickle's named tuple class has {len(field_names)} fields, more than the "
            f"{MAX_PICKLED_FIELDS} a pickled class may have"
        )
    try:
        return namedtuple(typename, field_names)
    except ValueError as error:
        raise ValidationError(f"this pickle's named tuple class is refused: {error}") from None


def _reduce_class(cls: FieldsType) -> tuple[Any, ...]:
    return (_class, (cls.__name__, cls._fields))  # type: ignore[attr-defined]


copyreg.pickle(FieldsType, _reduce_class)
