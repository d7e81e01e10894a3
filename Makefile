# make run: set up a virtualenv, install, and run the demo (server on the embedded store + simulated agents)
# make test: set up and run the whole test suite (what CI runs)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test lint bench clean

# An editable install keeps the compiled modules (setup.py) beside their sources: rebuilt when a source changes.
SOURCES := $(shell find collector exporter -name '*.py' -o -name '*.c')

$(BIN)/mastwatch: pyproject.toml setup.py $(SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

run: $(BIN)/mastwatch
	$(BIN)/mastwatch demo

test: $(BIN)/mastwatch
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -rs

lint: $(BIN)/mastwatch
	$(BIN)/ruff check .

bench: $(BIN)/mastwatch
	$(BIN)/python benchmarks/throughput.py
	$(BIN)/python benchmarks/memory.py

clean:
	rm -rf $(VENV) mastwatch-data *.egg-info
