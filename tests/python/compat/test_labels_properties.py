"""Property tests: blockmap's set operations and selections on random Labels,
against metatensor-core's on the same Labels (derandomized, modest counts).

The values are drawn from a small range so that the operands share entries
often, in any order, and the names of a selection are any subset of the
dimensions in any order.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blockmap

mts = pytest.importorskip("metatensor")

SETTINGS = settings(derandomize=True, max_examples=60, deadline=None, database=None)
NAMES = ["a", "b", "c", "d"]


@st.composite
def rows(draw, n_dims, max_count=10):
    """Unique rows of ``n_dims`` small values."""
    entries = st.tuples(*[st.integers(-2, 2)] * n_dims)
    drawn = draw(st.lists(entries, max_size=max_count, unique=True))
    return np.array(drawn, dtype=np.int32).reshape(len(drawn), n_dims)


@st.composite
def operands(draw):
    """Names and the values of two Labels with those names."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    return names, draw(rows(len(names))), draw(rows(len(names)))


@st.composite
def selections(draw):
    """Names and values of Labels, and names and values of a selection."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    selected = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    return names, draw(rows(len(names), 16)), selected, draw(rows(len(selected), 6))


def both(names, values):
    return mts.Labels(names, values), blockmap.Labels(names, values)


@SETTINGS
@given(operands(), st.sampled_from(["union", "intersection", "difference"]))
def test_set_operations(assert_same, drawn, operation):
    names, first, second = drawn
    (mts_first, first), (mts_second, second) = both(names, first), both(names, second)
    expected = getattr(mts_first, f"{operation}_and_mapping")(mts_second)
    actual = getattr(first, f"{operation}_and_mapping")(second)
    assert_same(expected, actual)
    assert_same(getattr(mts_first, operation)(mts_second), getattr(first, operation)(second))

    # and what the mappings mean: result[mapping[i]] == operand[i], or -1
    result, mappings = actual[0], actual[1:]
    for operand, mapping in zip((first, second), mappings, strict=False):
        assert len(mapping) == len(operand)
        for i, position in enumerate(mapping):
            if position >= 0:
                assert result[int(position)] == operand[i]
            else:
                assert operand[i] not in result


@SETTINGS
@given(selections())
def test_select(assert_same, drawn):
    names, values, selected_names, selected_values = drawn
    mts_labels, labels = both(names, values)
    mts_selection, selection = both(selected_names, selected_values)
    selected = labels.select(selection)
    assert_same(mts_labels.select(mts_selection), selected)

    # and what it means: the entries whose values in those dimensions are in
    # the selection, in order (of the selection when it has all dimensions in
    # the same order, as metatensor does)
    if selected_names == names:
        expected = [labels.position(row) for row in selected_values.tolist()]
        expected = [i for i in expected if i is not None]
    else:
        columns = [names.index(name) for name in selected_names]
        wanted = {tuple(row) for row in selected_values.tolist()}
        entries = [tuple(row[c] for c in columns) for row in values.tolist()]
        expected = [i for i, entry in enumerate(entries) if entry in wanted]
    assert selected.tolist() == expected
