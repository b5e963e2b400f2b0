"""A backend outside Confide proves itself with ``confide.testing.conformance`` alone.

A throwaway project, run by pytest in a process of its own as its author would run it,
registers a third backend (SQLite under another URL scheme) and subclasses the suites.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import confide

PROJECT_CONFTEST = 'pytest_plugins = ["confide.testing.conformance"]\n'

BACKEND = '''
from pathlib import Path

import pytest

from confide.storage import Capability, register_backend
from confide.storage.sqlite import SqliteStorage
from confide.testing.conformance import ErasureConformance, MemoriesConformance, StatefulConformance


class WrappedStorage(SqliteStorage):
    """SQLite under another name."""

    name = "wrapped"
{changes}

def open_wrapped(url: str, *, features=(), **_options: int) -> WrappedStorage:
    return WrappedStorage(url.split("://", 1)[1].removeprefix("/"), features=features)


register_backend("wrapped", open_wrapped)


class TestWrapped(MemoriesConformance, ErasureConformance, StatefulConformance):
    def new_storage_url(self, folder: Path, request: pytest.FixtureRequest) -> str:
        return f"wrapped:///{{folder / 'confide.db'}}"
'''

# Loses every memory it is asked for, and cannot show its files.
BROKEN = """
    capabilities = frozenset(SqliteStorage.capabilities - {Capability.DATA_FILES})

    def get_memory(self, account_id, memory_id):
        return None
"""


def _run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, changes: str
) -> pytest.RunResult:
    # The project finds this Confide, as an installed one would be found.
    monkeypatch.setenv("PYTHONPATH", str(Path(confide.__file__).resolve().parents[1]))
    pytester.makeconftest(PROJECT_CONFTEST)
    pytester.makepyfile(test_wrapped=BACKEND.format(changes=changes))
    return pytester.runpytest_subprocess(
        "-ra", "--strict-markers", "-W", "error", "-p", "no:cacheprovider", "-p", "no:asyncio"
    )


def test_a_third_backend_passes_the_suites(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _run(pytester, monkeypatch, "")
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert set(outcomes) == {"passed"} and outcomes["passed"] >= 18


def test_a_broken_backend_fails_them(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _run(pytester, monkeypatch, BROKEN)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["FAILED *TestWrapped::test_store_and_get_round_trip*"])
    # The carving and residue-scan tests need the store's files: skipped for the capability
    # it lacks (carving after erasure and after purge, the erasure's own scan, rotation).
    skipped = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert len(skipped) == 4
    assert all(line.endswith("the wrapped storage lacks data_files") for line in skipped)
