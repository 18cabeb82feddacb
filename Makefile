# dra-constructs: every task sets up what it needs. The two commands a newcomer runs:
#   make synth   - create .venv, install, synthesize examples/ into dist/
#   make test    - create .venv, install, lint, type-check and run the whole test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: setup synth check-dist test lint unit imports check-imports bench audit-corpus sanitizer-image clean controlplane controlplane-if-go

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

synth: setup
	$(PY) scripts/synth_examples.py --out dist

check-dist: setup
	$(PY) scripts/synth_examples.py --check dist

lint: setup
	$(VENV)/bin/ruff check src tests examples benchmarks scripts
	$(VENV)/bin/mypy

# The tests' real Kubernetes control plane (etcd, kube-apiserver, -scheduler, -controller-manager), built from
# pinned Go modules into ~/.cache/dra-constructs/controlplane (once; then seconds). Needs Go 1.26.
controlplane: setup
	$(PY) scripts/build_controlplane.py

# What `make test` runs: builds when Go is present; without Go the control-plane tests skip (fail under CI=true).
controlplane-if-go: setup
	$(PY) scripts/build_controlplane.py --if-available

unit: setup controlplane-if-go
	$(VENV)/bin/pytest -n 2 --dist loadgroup --durations=60

test: lint unit check-dist

imports: setup
	$(PY) scripts/generate_imports.py

check-imports: imports
	git diff --exit-code -- imports

# Performance goals are checked by these (ratios against a baseline in the same run); numbers in docs/.
bench: setup
	$(PY) benchmarks/synth_bench.py --diagnostic
	$(PY) benchmarks/cel_bench.py
	$(PY) benchmarks/audit_bench.py all
	$(PY) benchmarks/tenant_rules_bench.py
	$(PY) benchmarks/sanitizer_barrier.py
	$(PY) benchmarks/devhandles_scan.py
	$(PY) benchmarks/sanitizer_construct.py

# The real-world corpus (../shared/corpus/realworld, or DRA_CORPUS_DIR) against tests/guardrails/corpus_expectations.yaml.
audit-corpus: setup
	$(PY) scripts/audit_corpus.py

# The sanitizer agent's base image (images/sanitizer) with docker, podman or buildah; says so where none.
# SANITIZER_IMAGE=registry/dra-sanitizer-base:TAG, PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:..., SANITIZER_PUSH=1.
sanitizer-image:
	sh scripts/sanitizer_image.sh

clean:
	rm -rf $(VENV) .tools build
