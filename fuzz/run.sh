#!/usr/bin/env bash
# Run every fuzz target for SECONDS (default 60) each, one after another,
# one job at a time:
#
#     fuzz/run.sh 1200                  # 20 minutes per target
#     FUZZ_TARGETS=pickle_load fuzz/run.sh 60
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`) and a C++
# compiler. Works on the stable toolchain: cargo-fuzz passes -Z flags,
# which RUSTC_BOOTSTRAP=1 lets stable rustc accept. Builds with
# AddressSanitizer and debug assertions (overflow checks).
#
# Each target reads the committed seeds in corpus/<target>/ and writes what
# it finds to corpus-run/<target>/ (not committed); crashes, timeouts and
# OOMs go to artifacts/<target>/. Reproduce one with
#     RUSTC_BOOTSTRAP=1 cargo fuzz run <target> artifacts/<target>/<file>
#
# Dictionaries of tokens (npy.dict, pickle.dict) help the mutations.
# Limits: -rss_limit_mb=2048, -timeout=10 (seconds per input), and a
# malloc limit per target: one allocation larger than what the largest
# input (-max_len) can legitimately declare is reported as a finding.
# load_archive and pickle_load (whose in-band versions carry archives): a
# DEFLATE entry may declare up to 1032 times its compressed size
# (docs/format.md), so 64 KiB may allocate 66 MiB; npy_header allocates no
# more than its input, plus small bookkeeping.
#
# Exits non-zero when any target found something; the other targets
# still run.

set -uo pipefail

seconds=${1:-60}
cd "$(dirname "$0")"
export RUSTC_BOOTSTRAP=1

targets=(${FUZZ_TARGETS:-npy_header load_archive pickle_load mutate_mapped dataset_v2})

options() {
    case "$1" in
        npy_header) echo "-max_len=8192 -malloc_limit_mb=32 -dict=$PWD/npy.dict" ;;
        load_archive) echo "-max_len=65536 -malloc_limit_mb=96 -dict=$PWD/npy.dict" ;;
        pickle_load) echo "-max_len=65536 -malloc_limit_mb=96 -dict=$PWD/pickle.dict" ;;
        mutate_mapped) echo "-max_len=4096 -malloc_limit_mb=64" ;;
        dataset_v2) echo "-max_len=32768 -malloc_limit_mb=64" ;;
        *) echo "unknown fuzz target '$1'" >&2; return 1 ;;
    esac
}

cargo fuzz build || exit 1

failed=()
for target in "${targets[@]}"; do
    limits=$(options "$target") || exit 1
    mkdir -p "corpus-run/$target"
    echo "=== $target: ${seconds}s ($limits)"
    # shellcheck disable=SC2086
    if ! cargo fuzz run "$target" "corpus-run/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 $limits \
        -print_final_stats=1; then
        failed+=("$target")
    fi
done

if ((${#failed[@]})); then
    echo "fuzzing found problems in: ${failed[*]} (see fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzzing found nothing in ${targets[*]}"
