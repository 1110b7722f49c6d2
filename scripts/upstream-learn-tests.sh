#!/usr/bin/env bash
# upstream-learn-tests.sh [PYTHON] [TAG]: metatensor-learn's own tests
# (python/metatensor_learn/tests of github.com/metatensor/metatensor at
# TAG, default metatensor-learn-v0.5.0, with the data file they read), run
# twice with PYTHON (default: python3, which needs metatensor-core, the
# metatensor-learn of TAG's minor version, metatensor-operations, torch,
# scipy and sympy): on metatensor-learn itself, then on blockmap.learn,
# `metatensor` being bound to blockmap's names for that run by a
# conftest.py written here. The 0.6 tests: `make learn-0.6-env`, then
# `scripts/upstream-learn-tests.sh target/venv-learn-0.6/bin/python
# metatensor-learn-v0.6.1` (the newest 0.6 tag with tests; 0.6.2 changed
# one function of nn/_module.py). The files come from the git repository
# METATENSOR_REPO if set (a clone of metatensor with the tag), otherwise
# git fetches the tag. docs/learn.md gives the counts (some of the
# suite's tests fail on metatensor-learn itself here: the counts are read,
# not the exit status).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-python3}
tag=${2:-metatensor-learn-v0.5.0}
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

repo=${METATENSOR_REPO:-}
if [ -z "$repo" ]; then
    repo=$work/repo
    git -C "$work" init -q repo
    git -C "$repo" fetch -q --depth 1 https://github.com/metatensor/metatensor.git \
        tag "$tag"
fi
git -C "$repo" archive "$tag" \
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
    echo "== $label ($tag)"
    local out=$work/out.txt
    (cd "$work/python/metatensor_learn" &&
        env "$@" OMP_NUM_THREADS=1 PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" \
            "$python" -m pytest -q -p no:cacheprovider \
            -W "ignore:\`torch.jit:FutureWarning" tests >"$out" 2>&1) || true
    tail -n 20 "$out"
}
run "metatensor-learn on metatensor-core" BM_SHIM=0
run "metatensor-learn's tests on blockmap.learn" BM_SHIM=1
