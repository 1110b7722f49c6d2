"""Shared fixtures for the blockmap Python tests, and the check that nothing
was skipped when every engine is installed.

The factories return plain numpy arrays next to the blocks they build, so a test
can compare a block's data to the exact array it was built from.

The tests are grouped by area (core, io, pickle, transports, slow); a module
that needs an optional engine (metatensor-core, hypothesis, dask, ray, joblib)
skips itself when the engine is missing, so numpy and pytest are enough for the
rest. ``make test`` installs every engine and sets ``BLOCKMAP_REQUIRE_ALL=1``:
then a skipped test fails the session (:func:`pytest_sessionfinish`).
"""

import gc
import os

import numpy as np
import pytest

from blockmap import Labels, TensorBlock, TensorMap
from helpers import io_cases


@pytest.fixture
def rng():
    return np.random.default_rng(0x5EED)


@pytest.fixture
def random_values(rng):
    """``random_values(shape, dtype=np.float64)``: C-contiguous random data."""

    def make(shape, dtype=np.float64):
        return np.ascontiguousarray(io_cases.random_values(rng, shape, dtype))

    return make


def _components(component_sizes, component_names=None):
    if component_names is None:
        component_names = [f"c{i}" for i in range(len(component_sizes))]
    return [
        Labels([name], np.arange(size, dtype=np.int32).reshape(-1, 1))
        for name, size in zip(component_names, component_sizes, strict=True)
    ]


def _samples(n_samples, sample_names=("system", "atom")):
    values = np.zeros((n_samples, len(sample_names)), dtype=np.int32)
    values[:, -1] = np.arange(n_samples)
    return Labels(list(sample_names), values)


@pytest.fixture
def block_and_values(random_values):
    """``block_and_values(n_samples=3, component_sizes=(), n_properties=2, ...)``.

    Returns ``(block, values)`` where ``values`` is the array given to the block.
    Samples are named ("system", "atom") and properties ("n",) by default.
    """

    def make(
        n_samples=3,
        component_sizes=(),
        n_properties=2,
        dtype=np.float64,
        sample_names=("system", "atom"),
        component_names=None,
        property_name="n",
    ):
        shape = (n_samples, *component_sizes, n_properties)
        values = random_values(shape, dtype)
        block = TensorBlock(
            values=values,
            samples=_samples(n_samples, sample_names),
            components=_components(component_sizes, component_names),
            properties=Labels.range(property_name, n_properties),
        )
        return block, values

    return make


@pytest.fixture
def gradient_and_values(random_values):
    """``gradient_and_values(parent, n_samples=4, extra=(("xyz", 3),), ...)``.

    Builds a valid gradient block for ``parent``: samples ("sample", "system",
    "atom") pointing inside the parent's samples, components ``extra`` followed by
    the parent's components, the parent's properties and dtype.
    Returns ``(gradient, values)``.
    """

    def make(parent, n_samples=4, extra=(("xyz", 3),), sample_names=None):
        n_parent = len(parent.samples)
        if n_parent == 0:
            n_samples = 0
        if sample_names is None:
            sample_names = ["sample", "system", "atom"]
        samples_values = np.zeros((n_samples, len(sample_names)), dtype=np.int32)
        if n_samples:
            samples_values[:, 0] = np.arange(n_samples) % n_parent
            samples_values[:, -1] = np.arange(n_samples)
        samples = Labels(list(sample_names), samples_values)
        components = [Labels.range(name, size) for name, size in extra]
        components += list(parent.components)
        shape = (n_samples, *(len(c) for c in components), len(parent.properties))
        values = random_values(shape, parent.dtype)
        gradient = TensorBlock(values, samples, components, parent.properties)
        return gradient, values

    return make


@pytest.fixture
def tensor(block_and_values, gradient_and_values):
    """A TensorMap with keys ("o3_lambda", "center_type") = (0, 1), (1, 6).

    Block ``i`` has components ``[o3_mu]`` of size ``2 * o3_lambda + 1``, samples
    ("system", "atom"), properties ("n",) and a "positions" gradient.
    """
    keys = Labels(["o3_lambda", "center_type"], np.array([[0, 1], [1, 6]]))
    blocks = []
    for o3_lambda, n_samples in ((0, 3), (1, 5)):
        block, _ = block_and_values(
            n_samples=n_samples,
            component_sizes=(2 * o3_lambda + 1,),
            n_properties=4,
            component_names=["o3_mu"],
        )
        gradient, _ = gradient_and_values(block, n_samples=2 * n_samples)
        block.add_gradient("positions", gradient)
        blocks.append(block)
    return TensorMap(keys, blocks)


@pytest.fixture(autouse=True, scope="module")
def _no_leaked_segments():
    """After each test module, no shared-memory segment is left open: every
    map that was shared (or received shared) has been freed with it."""
    before = io_cases.open_segments()
    yield
    gc.collect()
    leaked = io_cases.open_segments() - before
    assert leaked <= 0, f"{leaked} shared-memory segment(s) left open by this module"


# ------------------------------------------------- nothing skipped, when asked

#: The environment variable that makes any skipped test fail the session.
REQUIRE_ALL = "BLOCKMAP_REQUIRE_ALL"

_skipped = []


def _requires_all():
    return os.environ.get(REQUIRE_ALL, "") not in ("", "0")


def _note_skip(report):
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    _skipped.append(f"{report.nodeid or report.fspath}: {reason}")


def pytest_collectreport(report):
    """A module that skipped itself (``pytest.importorskip``) is noted."""
    if report.skipped:
        _note_skip(report)


def pytest_runtest_logreport(report):
    """A skipped test is noted (an expected failure is not a skip)."""
    if report.skipped and not hasattr(report, "wasxfail"):
        _note_skip(report)


def pytest_terminal_summary(terminalreporter):
    if _requires_all() and _skipped:
        terminalreporter.section(f"{REQUIRE_ALL} is set: nothing may be skipped", red=True)
        for line in _skipped:
            terminalreporter.line(line)


def pytest_sessionfinish(session, exitstatus):
    """With ``BLOCKMAP_REQUIRE_ALL`` set, a session that skipped anything fails."""
    if _requires_all() and _skipped and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# ------------------------------------------- testing the installed package

#: Set by ``make test-wheels``: the tests run against a wheel installed into
#: a fresh virtual environment, and must not import the source tree's package.
TEST_INSTALLED = "BLOCKMAP_TEST_INSTALLED"


def pytest_sessionstart(session):
    """With ``BLOCKMAP_TEST_INSTALLED`` set, ``blockmap`` must come from
    site-packages (the wheel), not from the source tree's ``python/``."""
    if os.environ.get(TEST_INSTALLED, "") not in ("", "0"):
        import blockmap

        location = os.path.dirname(blockmap.__file__)
        if "site-packages" not in location.split(os.sep):
            raise pytest.UsageError(
                f"{TEST_INSTALLED} is set but blockmap was imported from {location}, "
                "not from an installed package"
            )
