#!/usr/bin/env bash
# Run every Rust test binary (the library's unit tests and the integration
# tests in tests/*.rs, built without the python feature) under valgrind's
# memcheck. Fails on any memory error and on definitely lost memory.
#
#     scripts/check-memory.sh            # all test binaries
#     scripts/check-memory.sh io::       # a test-name filter, passed to each
#
# Only definitely lost blocks are errors (and shown): the test harness
# exits while its threads still hold a few thread handles, which memcheck
# reports as "possibly lost"; that is not a leak of the code under test.
#
# Needs valgrind (Debian: apt-get install valgrind). Suppressions, each
# with the reason it is a false positive, are in scripts/valgrind.supp.

set -euo pipefail
cd "$(dirname "$0")/.."

valgrind=${VALGRIND:-valgrind}
if ! command -v "$valgrind" >/dev/null; then
    echo "check-memory: valgrind not found (apt-get install valgrind)" >&2
    exit 1
fi

# test executables, from cargo's JSON messages: artifacts built with the
# test profile that have an executable
binaries=()
while IFS= read -r binary; do
    binaries+=("$binary")
done < <(
    cargo test --no-run --message-format=json |
        grep '"reason":"compiler-artifact"' |
        grep '"test":true' |
        sed -n 's/.*"executable":"\([^"]*\)".*/\1/p'
)
if ((${#binaries[@]} == 0)); then
    echo "check-memory: cargo built no test binary" >&2
    exit 1
fi

failed=()
for binary in "${binaries[@]}"; do
    echo "=== valgrind ${binary#"$PWD"/}"
    if ! "$valgrind" --tool=memcheck --error-exitcode=1 \
        --leak-check=full --errors-for-leak-kinds=definite \
        --show-leak-kinds=definite \
        --suppressions=scripts/valgrind.supp \
        --quiet "$binary" "$@"; then
        failed+=("$binary")
    fi
done

if ((${#failed[@]})); then
    echo "check-memory: memcheck failed for: ${failed[*]}" >&2
    exit 1
fi
echo "check-memory: ${#binaries[@]} test binaries clean under memcheck"
