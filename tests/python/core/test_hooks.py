"""``blockmap._hooks.when_imported``: code run once a module is imported.

blockmap hooks the import of distributed (its dask serializers, and
metatensor-core's after ``blockmap.metatensor.register()``) and of loky's
reduction module. A hook is installed at most once per (name, key), and
its finder never recurses, whatever the order of blockmap's import,
``register()`` (twice) and the imports of distributed, loky, torch,
metatensor-core and metatensor-torch: each order runs in a fresh
interpreter, as import state is what is tested.
"""

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import uuid

import pytest

from blockmap import _hooks


def _ours(finders):
    return [finder for finder in finders if getattr(finder, "_blockmap_hook", False)]


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """The name of a module nobody imported yet, importable from tmp_path."""
    name = f"blockmap_hook_probe_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)
    _hooks._WAITING.pop(name, None)


def test_a_hook_is_installed_once_per_key(probe):
    calls = []
    callback = lambda: calls.append("callback")  # noqa: E731
    for _ in range(2):
        _hooks.when_imported(probe, callback)
        # a new callback object under a key given before: the same hook
        _hooks.when_imported(probe, lambda: calls.append("keyed"), key="a key")
    assert calls == []
    assert len(_ours(sys.meta_path)) == 1
    importlib.import_module(probe)
    assert calls == ["callback", "keyed"]
    assert probe not in _hooks._WAITING
    assert len(_ours(sys.meta_path)) <= 1
    # once imported: a hook installed before does not run again, a new one
    # runs at once
    _hooks.when_imported(probe, callback)
    _hooks.when_imported(probe, lambda: calls.append("new"), key="another key")
    assert calls == ["callback", "keyed", "new"]


def test_a_finder_asking_meta_path_again_does_not_recurse(probe):
    """A finder before blockmap's that asks every finder of sys.meta_path
    (as blockmap's did, and as wrapping finders of other libraries do):
    blockmap's does not ask it back for the name it is resolving."""

    class Wrapping:
        def find_spec(self, fullname, path, target=None):
            for finder in sys.meta_path:
                if finder is not self and hasattr(finder, "find_spec"):
                    spec = finder.find_spec(fullname, path, target)
                    if spec is not None:
                        return spec
            return None

    calls = []
    _hooks.when_imported(probe, lambda: calls.append(1))
    wrapping = Wrapping()
    sys.meta_path.insert(0, wrapping)
    try:
        assert importlib.import_module(probe).VALUE == 1
    finally:
        sys.meta_path.remove(wrapping)
    assert calls == [1]


def test_two_copies_of_the_hooks_do_not_call_each_other(probe):
    """A second copy of the module (a reload, or blockmap imported twice
    under two names) has a finder of its own: the two serve the same name
    without asking each other, and each runs its hook once."""
    spec = importlib.util.spec_from_file_location("blockmap_hooks_copy", _hooks.__file__)
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    calls = []
    try:
        _hooks.when_imported(probe, lambda: calls.append("ours"))
        copy.when_imported(probe, lambda: calls.append("copy"))
        assert len(_ours(sys.meta_path)) == 2
        assert importlib.import_module(probe).VALUE == 1
    finally:
        if copy._FINDER in sys.meta_path:
            sys.meta_path.remove(copy._FINDER)
    assert sorted(calls) == ["copy", "ours"]
    assert copy._FINDER not in sys.meta_path


#: the steps of the orders, each a statement of the child
STEPS = {
    "blockmap": "import blockmap",
    "register": "import blockmap.metatensor; blockmap.metatensor.register()",
    "distributed": "from distributed import Client",
    "loky": "import joblib.externals.loky.backend.reduction",
    "torch": "import torch",
    "metatensor": "import metatensor",
    "metatensor.torch": "import metatensor.torch",
}

#: each hooked module before blockmap's import, between it and register(),
#: between the two register() calls and after them (torch and metatensor
#: cannot come after: register() imports metatensor, which imports torch)
ORDERS = [
    ["register", "register", "distributed", "loky", "metatensor.torch"],
    ["distributed", "loky", "metatensor.torch", "blockmap", "register", "register"],
    ["blockmap", "distributed", "metatensor.torch", "register", "loky", "register"],
    ["blockmap", "metatensor", "loky", "register", "distributed", "metatensor.torch", "register"],
]

CHILD = """
import collections, copyreg, importlib.util, json, sys

# blockmap._hooks loaded first, to count the hooks it runs
spec = importlib.util.spec_from_file_location("blockmap._hooks", {hooks!r})
hooks = importlib.util.module_from_spec(spec)
sys.modules["blockmap._hooks"] = hooks
spec.loader.exec_module(hooks)
runs = collections.Counter()
call = hooks._call
def counting(name, callback):
    runs[name, repr(callback)] += 1
    call(name, callback)
hooks._call = counting

most_finders = 0
for step in {steps!r}:
    exec({statements!r}[step])
    finders = [f for f in sys.meta_path if getattr(f, "_blockmap_hook", False)]
    most_finders = max(most_finders, len(finders))

import blockmap, blockmap.dask, blockmap.metatensor, dask, metatensor
from blockmap import _reduction
from distributed.protocol import dask_serialize
from joblib.externals.loky.backend import reduction
print(json.dumps({{
    "runs": sorted(runs.values()),
    "hooked": sorted({{name for name, _ in runs}}),
    "most finders": most_finders,
    "waiting": sorted(hooks._WAITING),
    "blockmap.dask": dask_serialize.dispatch(blockmap.TensorMap) is blockmap.dask.serialize,
    "metatensor dask": dask_serialize.dispatch(metatensor.TensorMap)
        is blockmap.metatensor._dask_serialize,
    "preload": dask.config.get("distributed.worker.preload").count("blockmap.metatensor"),
    "copyreg": copyreg.dispatch_table.get(metatensor.TensorMap) is blockmap.metatensor._reduce,
    "loky": reduction._dispatch_table.get(blockmap.TensorMap) is _reduction._reduce,
}}))
"""


def test_every_order_of_imports_and_registrations():
    """Each order in a fresh interpreter (all at once): no RecursionError,
    each hook run exactly once with its effect in place, at most one
    blockmap finder on sys.meta_path at any time."""
    pytest.importorskip("distributed")
    pytest.importorskip("metatensor.torch")
    pytest.importorskip("joblib")
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                textwrap.dedent(CHILD).format(hooks=_hooks.__file__, steps=order, statements=STEPS),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore::FutureWarning"},
        )
        for order in ORDERS
    ]
    for order, child in zip(ORDERS, children, strict=True):
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, (order, err)
        result = json.loads(out.strip().splitlines()[-1])
        assert result == {
            "runs": [1, 1, 1],
            "hooked": ["distributed", "joblib.externals.loky.backend.reduction"],
            "most finders": 1,
            # standalone loky's, never imported here
            "waiting": ["loky.backend.reduction"],
            "blockmap.dask": True,
            "metatensor dask": True,
            "preload": 1,
            "copyreg": True,
            "loky": True,
        }, order
