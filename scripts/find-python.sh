#!/usr/bin/env bash
# find-python.sh X.Y: print the path of a CPython X.Y interpreter (on PATH as
# pythonX.Y, or one of pyenv's versions), or say on stderr why there is none
# and exit 1.
set -euo pipefail
version=$1
candidates=()
command -v "python$version" >/dev/null 2>&1 && candidates+=("$(command -v "python$version")")
if command -v pyenv >/dev/null 2>&1; then
    root=$(pyenv root)
    for dir in "$root"/versions/"$version".*; do
        [ -x "$dir/bin/python$version" ] && candidates+=("$dir/bin/python$version")
    done
fi
for python in "${candidates[@]}"; do
    # a pyenv shim answers even when its version is not active: ask it
    if found=$("$python" -c 'import sys; print(sys.executable)' 2>/dev/null) \
        && "$found" -c "import sys; assert sys.version_info[:2] == tuple(map(int, '$version'.split('.')))" 2>/dev/null; then
        echo "$found"
        exit 0
    fi
done
echo "no CPython $version here (neither python$version on PATH nor a pyenv version $version.*)" >&2
exit 1
