# windowfit — build, test, demo and benchmark. Every target installs what it needs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(VENV))/bin:$(HOME)/.cargo/bin:$(PATH)

.PHONY: demo test test-rust test-python dev release bench services lint lint-rust lint-python clean

## demo: build into .venv and run `windowfit demo` on the embedded sample session
demo: dev
	$(VENV)/bin/windowfit demo

## test: lint, cargo tests, pytest (property tests, references, real servers on loopback)
test: lint test-rust test-python

## lint: clippy on the core and the bindings, ruff, mypy on the package, stubtest on _core
lint: lint-rust lint-python

## lint-rust: rustfmt and clippy (with the bindings feature), warnings are errors
lint-rust:
	cargo fmt --check
	cargo clippy --all-targets --features python --quiet -- -D warnings

## lint-python: ruff lint and format check, mypy, and stubtest of the compiled _core against _core.pyi
lint-python: dev
	$(VENV)/bin/ruff check python tests benches
	$(VENV)/bin/ruff format --check python tests benches
	$(VENV)/bin/mypy python/windowfit
	$(VENV)/bin/python -m mypy.stubtest windowfit._core

## test-rust: unit tests of the pure-Rust core, and a compile of the bindings
test-rust:
	cargo test --lib --quiet
	cargo check --lib --features python --quiet

## test-python: build the extension (dev profile, cached) and run pytest
test-python: dev services
	$(PY) -m pytest -q -p no:cacheprovider tests

$(VENV)/.deps: requirements-dev.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

## dev: (re)build the extension into .venv, editable, dev profile (deps optimized; cached in target/)
dev: $(VENV)/.deps
	$(VENV)/bin/maturin develop

## release: build the extension with the release profile (for benchmarks)
release: $(VENV)/.deps
	$(VENV)/bin/maturin develop --release

## services: install redis-server from Debian's packages if missing (tests start it on loopback)
services:
	@command -v redis-server >/dev/null || { \
	  echo "installing redis-server"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null) \
	  || { echo "cannot install redis-server"; exit 1; }; }
	@# the Debian package starts a system instance; tests use their own on a free port
	@-service redis-server stop >/dev/null 2>&1 || true

## bench: release build, then the pytest-benchmark suites side by side with the peers
bench: release services
	$(PY) -m pytest -q -p no:cacheprovider benches --benchmark-only --benchmark-columns=min,median,mean,rounds

clean:
	rm -rf target $(VENV) .pytest_cache .hypothesis
