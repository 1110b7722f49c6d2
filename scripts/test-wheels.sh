#!/usr/bin/env bash
# test-wheels.sh DIST: each wheel in DIST installed into a fresh virtual
# environment of its own Python, with no Rust on PATH, and the core test
# tier run against the installed package (scripts/test-installed.sh); then
# the sdist built (this one needs Rust) and tested the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=$1

status=0
for wheel in "$dist"/*.whl; do
    tag=$(basename "$wheel" | cut -d- -f3)          # cp311
    version="${tag:2:1}.${tag:3}"                     # 3.11
    python=$(scripts/find-python.sh "$version") || { status=1; continue; }
    size=$(stat -c %s "$wheel")
    echo "$version: $(basename "$wheel"), $((size / 1024)) KiB"
    [ "$size" -lt $((3 * 1024 * 1024)) ] || { echo "the wheel is over 3 MB" >&2; status=1; }
    scripts/test-installed.sh "$python" "$wheel" || status=1
done

scripts/test-installed.sh python3 "$(ls "$dist"/*.tar.gz)" || status=1
exit $status
