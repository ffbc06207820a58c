# windowfit — build, test, demo and benchmark. Every target installs what it needs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(VENV))/bin:$(HOME)/.cargo/bin:$(PATH)

.PHONY: demo demo-build test test-rust test-python dev release bench bench-counting device-bundle bench-store eval profile services lint lint-rust lint-python clean

# the shared real agent runs, next to the repository (or to its worktree)
AGENT_RUNS ?= $(firstword $(wildcard ../shared/data/agent-sessions/mini-swe-agent-deepseek-60.tar.gz ../../shared/data/agent-sessions/mini-swe-agent-deepseek-60.tar.gz))
AGENT_RUN ?= output_deepseek_chat_test_1-100_django__django-13658_django__django-13658.traj.json
DEMO_OUT ?= demo-out

## demo: install only what the demo needs (requirements-demo.txt), build an optimized extension
## once (cargo profile `demo`: release without LTO), run `windowfit demo` on the embedded sample
## session, then plot the sample's replay (`bench --plot`) and, when the shared agent runs are
## present, `bench` one real run with its plot
demo: $(VENV)/.demo-build
	$(VENV)/bin/windowfit demo
	mkdir -p $(DEMO_OUT)
	@# section 4 above printed the sample's replay: only its plot here, not a second table
	$(VENV)/bin/windowfit bench --sample --context-window 16000 --output-reserve 2000 \
	  --no-langchain --plot $(DEMO_OUT)/bench-sample.png --json > /dev/null
	@echo "plot of the sample session's replay: $(DEMO_OUT)/bench-sample.png"
	@if [ -n "$(AGENT_RUNS)" ] && [ -f "$(AGENT_RUNS)" ]; then \
	  tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  tar -xzf "$(AGENT_RUNS)" -C "$$tmp" "$(AGENT_RUN)" && \
	  $(VENV)/bin/windowfit bench "$$tmp/$(AGENT_RUN)" --model deepseek-chat \
	    --context-window 16000 --no-langchain --plot $(DEMO_OUT)/bench-agent-run.png; \
	else echo "(shared/data/agent-sessions not present: skipping the real agent run)"; fi

## test: lint, cargo tests, pytest (property tests, references, real servers on loopback)
test: lint test-rust test-python

## lint: clippy on the core and the bindings, ruff, mypy on the package, stubtest on _core
lint: lint-rust lint-python

## lint-rust: rustfmt and clippy (with the bindings feature), warnings are errors; the
## bindings' build script needs the venv's interpreter (VIRTUAL_ENV points PyO3 at it)
lint-rust: $(VENV)/.deps
	cargo fmt --check
	cargo clippy --all-targets --features python --quiet -- -D warnings

## lint-python: ruff lint and format check, the layering check (no import cycle, stages never
## import the manager, the store never imports the session), mypy, and stubtest of the compiled
## _core against _core.pyi
lint-python: dev
	$(VENV)/bin/ruff check python tests benches tools examples
	$(VENV)/bin/ruff format --check python tests benches tools examples
	$(PY) tools/check_layout.py
	$(VENV)/bin/mypy python/windowfit
	$(VENV)/bin/python -m mypy.stubtest windowfit._core

## test-rust: unit tests of the pure-Rust core, and a compile of the bindings
test-rust: $(VENV)/.deps
	cargo test --lib --quiet
	cargo check --lib --features python --quiet

## test-python: build the extension (dev profile, cached) and run pytest on every core
## (PYTEST_WORKERS=0 runs it in one process)
PYTEST_WORKERS ?= auto
test-python: dev services
	WINDOWFIT_REQUIRE_EXTRAS=1 $(PY) -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist worksteal tests

$(VENV)/.demo-deps: requirements-demo.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-demo.txt
	touch $@

$(VENV)/.deps: requirements-dev.txt requirements-demo.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@ $(VENV)/.demo-deps

# pip, run by maturin, lists every optional dependency it skips ("Ignoring anthropic:
# markers 'extra == ...' don't match"); the build's own output and exit status are kept.
QUIET_EXTRAS := 2>&1 | grep -v "^Ignoring .*: markers 'extra == "; exit $${PIPESTATUS[0]}

RUST_SOURCES := Cargo.toml Cargo.lock $(shell find src -name '*.rs' 2>/dev/null)

## demo-build: the demo's extension, rebuilt only when the Rust sources change (the Python
## package is installed editable, so its changes need no build)
demo-build: $(VENV)/.demo-build
$(VENV)/.demo-build: $(VENV)/.demo-deps $(wildcard $(RUST_SOURCES))
	$(VENV)/bin/maturin develop --profile demo $(QUIET_EXTRAS)
	touch $@

## dev: (re)build the extension into .venv, editable, dev profile (deps optimized; cached in target/)
dev: $(VENV)/.deps
	rm -f $(VENV)/.demo-build
	$(VENV)/bin/maturin develop $(QUIET_EXTRAS)

## release: build the extension with the release profile (for benchmarks)
release: $(VENV)/.deps
	rm -f $(VENV)/.demo-build
	$(VENV)/bin/maturin develop --release $(QUIET_EXTRAS)

## services: install redis-server (+ redis-cli) and PostgreSQL from Debian's packages if missing.
## The tests start their own servers (a Redis, a 3-master Redis Cluster, a PostgreSQL run as an
## unprivileged user) on loopback ports in temporary directories, and stop them afterwards.
services:
	@{ command -v redis-server && command -v redis-cli; } >/dev/null || { \
	  echo "installing redis-server"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null) \
	  || { echo "cannot install redis-server"; exit 1; }; }
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  echo "installing postgresql"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) \
	  || { echo "cannot install postgresql"; exit 1; }; }
	@# the Debian packages start system instances; tests use their own on free ports
	@-service redis-server stop >/dev/null 2>&1 || true
	@-service postgresql stop >/dev/null 2>&1 || true

## bench: release build, then the pytest-benchmark suites (benches/suites) side by side with the peers
bench: release services
	$(PY) -m pytest -q -p no:cacheprovider -o python_files='bench_*.py' benches/suites \
	  --benchmark-only --benchmark-columns=min,median,mean,rounds

## eval: context quality — the manager against a plain window on generated dialogs and the
## real agent runs (shared/data/agent-sessions, skipped when absent); table + target/eval_context.png
EVAL_ARGS ?= --dialogs 20 --seed 100 --runs 60
eval: dev
	$(PY) -m pip install -q 'matplotlib>=3.7'
	$(PY) benches/eval/eval_context.py $(EVAL_ARGS) --plot target/eval_context.png
	$(PY) benches/eval/eval_recall.py

## bench-store: the stores under load (worker processes x shared sessions), SQLite, Redis,
## Redis Cluster and PostgreSQL side by side; checks nothing was lost or duplicated
bench-store: dev services
	PYTHONPATH=python $(PY) benches/suites/bench_store_load.py $(BENCH_STORE_ARGS)

## bench-counting: release build, then the counting engine against every exact peer in its
## fastest mode (benches/reports/report_field.py: fresh processes, first pass and steady state)
bench-counting: release
	$(PY) benches/reports/report_field.py --runs 3 --threads 1 2

## device-bundle: .device/ for benches/device/field.sh on a many-core machine without a
## package index: windowfit's wheel for its CPython (DEVICE_PYTHON), the peers, the reference
DEVICE_PYTHON ?= 3.12
device-bundle: $(VENV)/.deps
	$(PY) benches/device/bundle.py --python $(DEVICE_PYTHON)

## profile: instructions per call of each workload under callgrind (benches/profile), this
## tree against the commit given as BEFORE
BEFORE ?= deef124
profile: dev
	$(PY) benches/profile/callgrind_workload.py --table --before $(BEFORE) --after HEAD

clean:
	rm -rf target $(VENV) .pytest_cache .hypothesis
