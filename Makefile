# `make run` and `make test` do all set-up on a fresh machine: they create .venv and install what is missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stamp-install
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt
export PIP_DISABLE_PIP_VERSION_CHECK := 1
PYTEST_WORKERS ?= 2

.PHONY: install run test bench lint clean

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/gpu-arena demo

test: install
	$(PY) -m pytest -n $(PYTEST_WORKERS) -p no:cacheprovider

bench: install
	$(PY) bench/bench_core.py
	$(PY) bench/bench_eval.py

lint: install
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
