# make run: set up a virtualenv, install, and run the demo (server on the embedded store + simulated agents)
# make test: set up and run the whole test suite (what CI runs)
# make test-pure: the suite again on an install without a C compiler (pure Python, as pip builds it where there is
# none; CI runs it too)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PURE ?= .venv-pure

.PHONY: run test test-pure lint bench clean

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

# Not editable: an editable install would import the compiled modules the other build keeps beside the sources;
# so it is installed again when any file it copies changes. CC=/bin/false stands for a machine without a compiler,
# in the build and for the tests (tests/builds.py).
PACKAGE_FILES := $(shell find mastwatch collector exporter dashboards -type f \( -name '*.py' -o -name '*.c' -o -name '*.md' \))

$(PURE)/bin/mastwatch: pyproject.toml setup.py README.md $(PACKAGE_FILES)
	$(PYTHON) -m venv $(PURE)
	$(PURE)/bin/pip install --quiet --upgrade pip
	rm -rf build/lib.*  # what a compiled non-editable build left there would be packed into this one
	MASTWATCH_COMPILE=0 CC=/bin/false $(PURE)/bin/pip install --quiet '.[test]'
	touch $@

# PYTHONSAFEPATH (Python 3.11+): `python -m` and `-c`, here and in the tests' child processes, would put the working
# directory first on sys.path, where the sources' mastwatch/ (without collector/ and exporter/, which the install
# maps into it) would stand in for the installed package.
test-pure: $(PURE)/bin/mastwatch
	CC=/bin/false PYTHONSAFEPATH=1 $(PURE)/bin/python -m pytest -q -rs

lint: $(BIN)/mastwatch
	$(BIN)/ruff check .

bench: $(BIN)/mastwatch
	$(BIN)/python benchmarks/throughput.py
	$(BIN)/python benchmarks/memory.py

clean:
	rm -rf $(VENV) $(PURE) mastwatch-data *.egg-info
