# ragmon — the two commands a fresh machine needs:
#   make demo   run the main job embedded, no external services
#   make test   install what the tests need, start the real services, run the suite
# and, while changing code: make test-quick   the tests that need no service and are not slow
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PHOENIX_VERSION ?= 20.26.1

.PHONY: demo test test-quick bench soak mutation lint services bytecode clean

# ragmon and its dependencies go in with uv: the packages pip would install (the same resolution
# of pyproject.toml), in seconds instead of about a minute; pip stays in the venv for the tests
# that build and install the wheel as a user does. Both write the modules' bytecode (.pyc) at install
# time (uv only when asked, --compile-bytecode), and ragmon's own modules are compiled before each
# run: where PYTHONDONTWRITEBYTECODE is set, a process writes none itself and would compile every
# module it imports, each time it starts (1.7 of the 2.7 s `ragmon --help` took on an idle machine)
UV = $(BIN)/uv pip install -q --native-tls --compile-bytecode --python $(BIN)/python
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip uv

$(VENV)/.runtime: pyproject.toml | $(BIN)/python
	$(UV) -e '.[server]'
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(UV) -e '.[dev]'
	touch $@ $(VENV)/.runtime

demo: $(VENV)/.runtime bytecode
	$(BIN)/ragmon demo

services:
	bash tests/services/install.sh

# ragmon's own modules (and the tests' and benchmarks'), compiled where they are; compileall skips
# what is up to date
bytecode: $(VENV)/.runtime
	$(BIN)/python -m compileall -q ragmon monitor collectors exporters alerts tests bench

lint: $(VENV)/.dev
	$(BIN)/ruff check .

# tests/conftest.py groups the tests: the two CPU-bound groups first, one per worker, and a third
# worker for the tests that mostly wait on brokers, subprocesses and timeouts; the groups go out
# in the order it sorts them, not xdist's largest-first
PYTEST_XDIST = --dist loadgroup --no-loadscope-reorder
test: $(VENV)/.dev services lint bytecode
	$(BIN)/python -m pytest -n 3 $(PYTEST_XDIST)

test-quick: $(VENV)/.dev bytecode
	$(BIN)/python -m pytest -n 2 $(PYTEST_XDIST) -m "not integration and not slow" -q

# The peer the OTLP benchmark compares with, in a virtual environment of its own
PHOENIX ?= $(or $(SERVICES_CACHE_DIR),$(HOME)/.cache/ragmon-services)/phoenix-venv
$(PHOENIX)/bin/phoenix:
	$(PYTHON) -m venv $(PHOENIX)
	$(PHOENIX)/bin/python -m pip install -q "arize-phoenix==$(PHOENIX_VERSION)"

# BENCH names some benchmarks to run alone (make bench BENCH="otlp replay"); every one by default
bench: $(VENV)/.dev services $(PHOENIX)/bin/phoenix bytecode
	$(BIN)/python -m bench $(BENCH)

soak: $(VENV)/.dev services bytecode
	$(BIN)/python -m bench.kill_soak
	$(BIN)/python -m bench.soak

# mutmut over the modules that decide verdicts, against their fast tests ([tool.mutmut] in
# pyproject.toml; tests/mutation.py lays the tree out in .mutation/ for it): the count per module
# and every mutant the tests let through. Not part of `make test`: it takes long (docs/testing.md).
# The services' install brings the data some of those fast tests read (presidio-evaluator's templates)
MUTATION_JOBS ?= 2
mutation: $(VENV)/.dev services bytecode
	$(BIN)/python -m tests.mutation --jobs $(MUTATION_JOBS)

clean:
	rm -rf $(VENV) .demo ragmon-data .pytest_cache .hypothesis .mutation
