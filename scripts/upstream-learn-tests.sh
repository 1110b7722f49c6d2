#!/usr/bin/env bash
# upstream-learn-tests.sh [PYTHON]: metatensor-learn 0.5.0's own tests
# (python/metatensor_learn/tests of github.com/metatensor/metatensor at tag
# metatensor-learn-v0.5.0, with the data file they read), run twice with
# PYTHON (default: python3, which needs metatensor-core, metatensor-learn,
# metatensor-operations, torch, scipy and sympy): on metatensor-learn
# itself, then on blockmap.learn, `metatensor` being bound to blockmap's
# names for that run by a conftest.py written here. The files come from
# the git repository METATENSOR_REPO if set (a clone of metatensor with the
# tag), otherwise git fetches the tag. docs/learn.md gives the counts.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-python3}
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

repo=${METATENSOR_REPO:-}
if [ -z "$repo" ]; then
    repo=$work/repo
    git -C "$work" init -q repo
    git -C "$repo" fetch -q --depth 1 https://github.com/metatensor/metatensor.git \
        tag metatensor-learn-v0.5.0
fi
git -C "$repo" archive metatensor-learn-v0.5.0 \
    python/metatensor_learn/tests python/metatensor_learn/pyproject.toml \
    python/metatensor_operations/tests/data/qm7-spherical-expansion.mts |
    tar -x -C "$work"

cat >"$work/python/metatensor_learn/tests/conftest.py" <<'PY'
# with BM_SHIM=1: `metatensor` (and metatensor.learn, .io) are blockmap's
import os
import sys
import types
import warnings

if os.environ.get("BM_SHIM") == "1":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import blockmap
        import blockmap.io
        import blockmap.learn
        import blockmap.learn.nn._layer_norm
        import blockmap.operations

    shim = types.ModuleType("metatensor")
    shim.__path__ = []
    for name in blockmap.__all__:
        setattr(shim, name, getattr(blockmap, name))
    for name in blockmap.operations.__all__:
        setattr(shim, name, getattr(blockmap.operations, name))
    for name in ("join", "join_blocks", "split", "split_block"):
        setattr(shim, name, getattr(blockmap, name))
    shim.io = blockmap.io
    shim.learn = blockmap.learn
    sys.modules["metatensor"] = shim
    sys.modules["metatensor.io"] = blockmap.io
    for name in ("learn", "learn.data", "learn.nn", "learn.nn._layer_norm"):
        sys.modules[f"metatensor.{name}"] = sys.modules[f"blockmap.{name}"]
PY

run() {  # LABEL, then the environment of the run
    local label=$1
    shift
    echo "== $label"
    (cd "$work/python/metatensor_learn" &&
        env "$@" OMP_NUM_THREADS=1 PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" \
            "$python" -m pytest -q -p no:cacheprovider \
            -W "ignore:\`torch.jit:FutureWarning" tests | tail -n 20) || true
}
run "metatensor-learn on metatensor-core" BM_SHIM=0
run "metatensor-learn's tests on blockmap.learn" BM_SHIM=1
