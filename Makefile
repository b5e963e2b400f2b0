# Everyday targets. `make run` and `make test` are the README's two commands.
VENV ?= .venv
PY := $(VENV)/bin/python
# `make test` (and lint, bench): everything the suite and the linters need. `fast` (numba)
# compiles the SQLite vector index's loops; the tests compare them with NumPy's.
EXTRAS ?= test,postgres,local,server,tokens,fast,mcp,langgraph
# `make run`: the demo's embedder (local), `confide serve` (server) and exact token budgets
# (tokens); no test tools, no PostgreSQL driver, no numba.
RUN_EXTRAS ?= local,server,tokens

.PHONY: run test lint bench venv

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Installs once per set of extras, again only when pyproject.toml changes.
comma := ,
stamp = $(VENV)/.installed-$(subst $(comma),-,$(1))

$(VENV)/.installed-%: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[$(subst -,$(comma),$*)]'
	touch $@

venv: $(call stamp,$(EXTRAS))

run: $(call stamp,$(RUN_EXTRAS))
	$(VENV)/bin/confide demo

lint: venv
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: lint
	$(PY) -m pytest -q

bench: venv
	$(PY) bench/store.py
