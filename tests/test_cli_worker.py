"""``confide worker``: a memory idle past the TTL leaves retrieval after one ``--once`` run,
shows once in the delta header, and can be restored until it is purged."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import time_machine
from click.testing import CliRunner

from confide.cli import main
from confide.client import Confide
from confide.config import Settings
from confide.engine import MemoryEngine, default_thread
from confide.errors import ConflictError
from confide.testing.clock import before_consolidation

ACCOUNT, USER = "acct", "ana"
DAY = 86_400.0


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MEMORY_ENCRYPTION_KEY", raising=False)
    monkeypatch.delenv("CONFIDE_STORAGE_URL", raising=False)
    monkeypatch.setenv("CONFIDE_HOME", str(tmp_path / "home"))
    # Retrieval here is about what is excluded, not how it ranks: blind BM25 is enough.
    monkeypatch.setenv("CONFIDE_EMBEDDER", "none")
    return tmp_path / "home"


def _worker_once() -> str:
    result = CliRunner().invoke(main, ["worker", "--once"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _found(confide: Confide, question: str) -> list[str]:
    return [r.memory.key for r in confide.search(question, user_id=USER, account_id=ACCOUNT)]


def test_worker_help_names_once() -> None:
    result = CliRunner().invoke(main, ["worker", "--help"])
    assert result.exit_code == 0
    assert "--once" in result.output and "Run background jobs" in result.output


@pytest.fixture
def hourly_only() -> Iterator[None]:
    """The test's clock: a moment today when only the hourly schedules are due."""
    with time_machine.travel(before_consolidation(ACCOUNT, time.time()), tick=True):
        yield


@pytest.mark.usefixtures("hourly_only")
def test_an_idle_memory_leaves_retrieval_after_one_run_and_is_restorable_until_purge(
    home: Path,
) -> None:
    with Confide.open(Settings()) as confide:
        [snack] = confide.add("Ana snacks on salted pretzels", user_id=USER, account_id=ACCOUNT)
        confide.add("Ana walks to the pretzel bakery on Sundays", user_id=USER, account_id=ACCOUNT)
        assert sorted(_found(confide, "pretzels")) == ["note", "note.2"]
    thread = default_thread(ACCOUNT, USER)
    with MemoryEngine.open(Settings()) as engine:
        # Written and last read 61 days ago; the other memory was just read.
        long_ago = time.time() - 61 * DAY
        with engine.storage.transaction() as tx:
            tx.update_memory(snack.id, {"updated_at": long_ago, "last_accessed_at": long_ago})
        rev = engine.current_rev(thread)
        # The agent has seen everything so far: the next header holds only what follows.
        engine.deliver_delta(account_id=ACCOUNT, user_id=USER, reader="agent")

    assert "ran 3 jobs: 3 done" in _worker_once()  # ttl, purge and app_resume

    with Confide.open(Settings()) as confide:
        assert _found(confide, "pretzels") == ["note.2"]
        engine = confide.engine
        header = engine.deliver_delta(account_id=ACCOUNT, user_id=USER, reader="agent")
        title, *bullets = header.splitlines()
        assert title == f"Memory updates since rev {rev}:"
        assert len(bullets) == 1 and bullets[0].startswith("- ⌛expired: [")
        assert bullets[0].endswith("] note (imp=2)")  # named by its key, its value out of sight
        # Shown once: the next delivery has nothing new.
        assert engine.deliver_delta(account_id=ACCOUNT, user_id=USER, reader="agent") == ""
        assert engine.op_counts(by="node").get("worker") == 1
    assert "ran 0 jobs" in _worker_once()  # this hour's runs are done

    with Confide.open(Settings()) as confide:
        confide.engine.restore(snack.id, account_id=ACCOUNT)
        assert sorted(_found(confide, "pretzels")) == ["note", "note.2"]
        confide.engine.forget(snack.id, account_id=ACCOUNT)
        assert confide.engine.purge_expired(now=time.time() + 31 * DAY).purged == 1
        with pytest.raises(ConflictError):
            confide.engine.restore(snack.id, account_id=ACCOUNT)
        assert _found(confide, "pretzels") == ["note.2"]
