# Two entry points (see README.md): `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# The CPU wheel first: the project's torch range is then already satisfied.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[dev,dask]"
	# The linear credit's compiled loops into their disk cache, so no audit compiles them.
	$(BIN)/python -m verifier.population.compile_kernels
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/certgate demo

test: $(STAMP)
	bash scripts/install_chromium.sh
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/bounds_speed.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis mlruns mlflow.db certgate-demo
