#!/usr/bin/env bash
# build-wheels.sh PYTHON OUT VERSION...: manylinux2014 wheels of blockmap for
# each CPython VERSION (release build, linked with zig against glibc 2.17 so
# that pip on any Linux of 2014 or later installs them; maturin checks the
# tag's compliance as it builds), and the sdist, into OUT. PYTHON is the
# interpreter that runs maturin (with ziglang installed).
set -euo pipefail
cd "$(dirname "$0")/.."
python=$1
out=$2
shift 2
interpreters=()
missing=()
for version in "$@"; do
    if found=$(scripts/find-python.sh "$version"); then
        interpreters+=(-i "$found")
    else
        missing+=("$version")
    fi
done
[ ${#interpreters[@]} -gt 0 ] || { echo "no interpreter to build wheels for" >&2; exit 1; }
rm -rf "$out"
# maturin finds zig as `python3 -m ziglang`: the environment that has it first
export PATH="$(dirname "$python"):$PATH"
mkdir -p "$out"
"$python" -m maturin build --release --zig --compatibility manylinux2014 \
    "${interpreters[@]}" --out "$out"
"$python" -m maturin sdist --out "$out"
ls -l "$out"
if [ ${#missing[@]} -gt 0 ]; then
    echo "no wheel for CPython ${missing[*]}: no such interpreter on this machine" >&2
    exit 1
fi
