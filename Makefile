# Everyday targets. `make run` and `make test` are the README's two commands.
VENV ?= .venv
PY := $(VENV)/bin/python
# `make test` (and lint, bench): everything the suite and the linters need. `fast` (numba)
# compiles the SQLite vector index's loops; the tests compare them with NumPy's.
EXTRAS ?= test,postgres,local,server,tokens,fast,mcp,langgraph
# `make run`: the demo's embedder (local), `confide serve` (server) and exact token budgets
# (tokens); no test tools, no PostgreSQL driver, no numba.
RUN_EXTRAS ?= local,server,tokens

.PHONY: run test test-clocks check-wheel lint bench venv

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

test: lint check-wheel
	$(PY) -m pytest -q

# The wheel alone, installed with the `local` extra into a fresh virtualenv outside the
# repository, answers `confide --version` and runs `confide demo`.
check-wheel: venv
	$(PY) tests/packaging/check_wheel.py

# The whole suite again from fixed instants of the wall clock (TEST_CLOCK, tests/conftest.py):
# the start of a UTC day (a Sunday), 19:30 on a Monday (past most accounts' daily slots), and
# 23:59 on the last day of a month (the run crosses into the next day and month).
CLOCKS ?= 2027-01-03T00:00:00Z 2026-11-30T19:30:00Z 2027-02-28T23:59:00Z
test-clocks: venv
	set -e; for clock in $(CLOCKS); do echo "TEST_CLOCK=$$clock"; TEST_CLOCK=$$clock $(PY) -m pytest -q; done

bench: venv
	$(PY) bench/store.py
