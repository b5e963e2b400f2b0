# Everyday targets. `make run` and `make test` are the README's two commands.
VENV ?= .venv
PY := $(VENV)/bin/python
# `fast` (numba) compiles the SQLite vector index's loops; the tests compare them with NumPy's.
EXTRAS ?= test,postgres,local,server,tokens,fast

.PHONY: run test lint bench venv

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Installs once per set of extras, again only when pyproject.toml changes.
comma := ,
STAMP := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $@

venv: $(STAMP)

run: venv
	$(VENV)/bin/engram demo

lint: venv
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: lint
	$(PY) -m pytest -q

bench: venv
	$(PY) bench/store.py
