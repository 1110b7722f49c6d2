# Two commands for a newcomer: `make test` and `make demo`. Each sets itself up
# from a fresh clone: a virtual environment in .venv, the pinned Python
# dependencies, and a release build of the extension.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.deps-installed

.PHONY: all test test-fast test-learn-0.6 demo bench scaling fuzz check-memory build lint stubtest rust-test py-test py-test-fast test-installed docs browser wheels test-wheels clean

all: test

$(STAMP): requirements-dev.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt -c constraints.txt
	touch $(STAMP)

# Release build of the extension, installed into .venv (editable: the Python
# sources are used in place, the native module is rebuilt here).
build: $(STAMP)
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH \
		$(PY) -m maturin develop --release --quiet

lint: $(STAMP)
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy --all-targets --features python -- -D warnings
	$(VENV)/bin/ruff check python tests bench examples docs/conf.py docs/_ext
	$(VENV)/bin/ruff format --check python tests bench examples docs/conf.py docs/_ext

# the stubs must describe the built module (needs the build)
stubtest: build
	$(PY) -m mypy.stubtest blockmap._blockmap --allowlist tests/stubtest-allowlist.txt

rust-test:
	cargo test --quiet

# The Python tests come in tiers by cost, marked (pyproject.toml's markers,
# checked with --strict-markers): `slow` (minutes-long runs and timings of
# large runs), `benchmark` (the benchmark harness run on small data) and
# `docs` (the documentation site, built by `make docs`, and its browser
# test). pytest leaves these three out unless told otherwise (the `-m` of
# pyproject.toml's addopts): `make test-fast` runs what is left, `make
# test` every tier (`-m ""`).
#
# Every engine is installed here, so nothing may be skipped: with
# BLOCKMAP_REQUIRE_ALL set, a skipped test fails the run (tests/python/conftest.py).
# The tests of the site (tests/python/docs) check the one `make docs` built
# (BLOCKMAP_DOCS_SITE) and open it in Debian's chromium.
py-test: build docs browser
	BLOCKMAP_REQUIRE_ALL=1 BLOCKMAP_DOCS_SITE=$(abspath $(DOCS_OUT)) $(PY) -m pytest -q -m "" $(PYTEST_ARGS)

py-test-fast: build
	BLOCKMAP_REQUIRE_ALL=1 $(PY) -m pytest -q $(PYTEST_ARGS)

# The core tier (tests/python/core, io, pickle; numpy and pytest only)
# against a wheel of the venv's Python installed into a fresh virtual
# environment with numpy and pytest alone, so that the core tier cannot come
# to need an optional engine unnoticed (what `make test-wheels` does for
# each release wheel). The wheel reuses the release build of `make build`.
INSTALLED_OUT := target/installed
test-installed: build
	rm -rf $(INSTALLED_OUT)
	$(PY) -m maturin build --release --quiet --interpreter $(abspath $(PY)) --out $(INSTALLED_OUT)
	scripts/test-installed.sh $(abspath $(PY)) $(INSTALLED_OUT)/*.whl

# blockmap.learn on metatensor-learn 0.6 (what a standalone user of the
# `learn` extra installs; metatrain 2026.4 in .venv pins < 0.6): a second,
# small environment (scripts/learn-0.6-env.sh: metatensor-learn 0.6.2 of
# constraints-learn-0.6.txt over .venv's packages, metatrain hidden; under
# a second to make) running tests/python/compat/test_learn.py (about 30 s),
# and metatensor-learn 0.6's own suite on blockmap.learn when a clone of
# metatensor is given (METATENSOR_REPO; scripts/upstream-learn-tests.sh).
LEARN06 := target/venv-learn-0.6
$(LEARN06)/.installed: $(STAMP) constraints-learn-0.6.txt scripts/learn-0.6-env.sh
	scripts/learn-0.6-env.sh $(abspath $(PY)) $(LEARN06)
	touch $@

test-learn-0.6: build $(LEARN06)/.installed
	BLOCKMAP_REQUIRE_ALL=1 $(LEARN06)/bin/python -m pytest -q tests/python/compat/test_learn.py
	@if [ -n "$(METATENSOR_REPO)" ]; then \
		scripts/upstream-learn-tests.sh $(abspath $(LEARN06))/bin/python metatensor-learn-v0.6.1; \
	else \
		echo "metatensor-learn 0.6's own suite: not run (set METATENSOR_REPO to a clone of metatensor)"; \
	fi

test: build lint stubtest rust-test py-test test-installed test-learn-0.6

# Every tier but the slow ones: lints, stubs, Rust tests and pytest without
# the `slow`, `benchmark` and `docs` tiers (no site is built).
test-fast: build lint stubtest rust-test py-test-fast

# The documentation site (docs/conf.py), into target/docs/html: README and
# the guides of docs/, the API reference made from the public modules, each
# script of examples/ run and shown with its output, the changelog; every
# warning is an error, and every internal link and anchor is checked. About
# 2 minutes on 2 cores, most of it the examples (metatrain's training).
DOCS_OUT ?= target/docs/html
docs: build
	$(PY) -m sphinx -b html -W --keep-going -q docs $(DOCS_OUT)

# Debian's chromium and its driver, for the browser test of the site
# (tests/python/docs/test_browser.py), installed when missing (as root, as
# CI runs; elsewhere: `apt-get install chromium chromium-driver`).
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		if [ "$$(id -u)" != 0 ]; then \
			echo "the browser test needs chromium and chromedriver:" \
				"apt-get install chromium chromium-driver" >&2; exit 1; \
		fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq chromium chromium-driver; \
	fi

demo: build
	$(PY) -m bench demo

# The whole benchmark harness on W (about 30 minutes: every run is a fresh
# process, 7 per operation and library as the speed targets ask, and
# metatensor-core is slow); writes the report and its chart; then the torch
# family (DataLoader throughput, join and split; about 20 minutes) and the
# datasets family (130,000 and 20,000 QM9-like maps and W by blocks, against
# LMDB, HDF5, metatrain's DiskDataset and .mts files; about 35 minutes, and
# 5 GB in the temporary folder), and the training family (metatrain's
# SOAP-BPNN, 3 epochs, from DiskDataset, MemmapDataset and blockmap, 0 and 2
# workers, 200 structures in batches of 8 and 2,000 in batches of 64, each
# cell 3 fresh processes; about 35 minutes), whose sections and chart the
# report keeps.
bench: build
	$(PY) -m bench bench --repeat 7 --markdown docs/benchmarks.md --chart docs/benchmarks.png
	$(PY) -m bench torch --markdown docs/benchmarks.md
	$(PY) -m bench datasets --markdown docs/benchmarks.md
	$(PY) -m bench training --repeat 3 --markdown docs/benchmarks.md

# How each operation's time grows with the number of blocks (1 to 10,000 at
# 80 MB) and with the bytes (W-shaped maps of 8 MB to 800 MB, and 8 GB for the
# operations whose memory fits), every run a fresh process (about 20 minutes);
# writes docs/scaling.md (linked from docs/benchmarks.md) and its chart.
scaling: build
	$(PY) -m bench scaling --huge --markdown docs/scaling.md --chart docs/scaling.png

# Release wheels for CPython 3.11, 3.12 and 3.13 (manylinux2014: linked
# with zig against glibc 2.17, so that pip on any Linux since 2014 installs
# them) and the sdist, into dist/. The interpreters come from PATH
# (python3.X) or pyenv. Not part of `make test` (three release builds take
# several minutes on 2 cores).
WHEEL_PYTHONS ?= 3.11 3.12 3.13
WHEEL_STAMP := $(VENV)/.wheel-deps-installed

$(WHEEL_STAMP): requirements-wheels.txt $(STAMP)
	$(PY) -m pip install --quiet -r requirements-wheels.txt
	touch $(WHEEL_STAMP)

wheels: $(WHEEL_STAMP)
	scripts/build-wheels.sh $(abspath $(PY)) dist $(WHEEL_PYTHONS)

# Each wheel of dist/ installed into a fresh virtual environment of its own
# Python with no Rust on PATH, and the core tier (tests/python/core, io,
# pickle; numpy and pytest only, the optional engines' tests skip
# themselves) run against the installed package (scripts/test-installed.sh);
# then the same for the sdist, built from source. About 20 minutes.
test-wheels: wheels
	scripts/test-wheels.sh dist

# Each cargo-fuzz target for FUZZ_SECONDS, one after another (not part of
# `make test`; needs `cargo install cargo-fuzz --locked`, see fuzz/README.md).
FUZZ_SECONDS ?= 60
fuzz:
	fuzz/run.sh $(FUZZ_SECONDS)

# The Rust test binaries under valgrind memcheck: no errors, no definite leaks.
check-memory:
	scripts/check-memory.sh

clean:
	rm -rf $(VENV) target dist docs/api docs/gallery
