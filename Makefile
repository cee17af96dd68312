# Every target installs what it needs: a virtualenv in .venv (keyed on
# pyproject.toml) and the Go-built testbed binaries in ~/.cache/model-serving-addon.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
ARGS ?=

.PHONY: all venv binaries crds lint unit test demo clean

all: test

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

venv: $(STAMP)

binaries: venv
	$(BIN)/python -m testbed build

crds: venv
	$(BIN)/model-serving-addon crds

lint: venv
	$(BIN)/ruff check addon_api addon_manager addon_agent testbed tests
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest -q tests/unit

test: venv binaries lint
	$(BIN)/pytest -q tests $(ARGS)

demo: venv binaries
	$(BIN)/python -m testbed demo $(ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
