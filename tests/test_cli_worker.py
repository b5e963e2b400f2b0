"""``engram worker``: a memory idle past the TTL leaves retrieval after one ``--once`` run,
shows once in the delta header, and can be restored until it is purged."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from engram.cli import main
from engram.client import Engram
from engram.config import Settings
from engram.engine import MemoryEngine, default_thread
from engram.errors import ConflictError

ACCOUNT, USER = "acct", "ana"
DAY = 86_400.0


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MEMORY_ENCRYPTION_KEY", raising=False)
    monkeypatch.delenv("ENGRAM_STORAGE_URL", raising=False)
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "home"))
    # Retrieval here is about what is excluded, not how it ranks: blind BM25 is enough.
    monkeypatch.setenv("ENGRAM_EMBEDDER", "none")
    return tmp_path / "home"


def _worker_once() -> str:
    result = CliRunner().invoke(main, ["worker", "--once"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _found(engram: Engram, question: str) -> list[str]:
    return [r.memory.key for r in engram.search(question, user_id=USER, account_id=ACCOUNT)]


def test_worker_help_names_once() -> None:
    result = CliRunner().invoke(main, ["worker", "--help"])
    assert result.exit_code == 0
    assert "--once" in result.output and "Run background jobs" in result.output


def test_an_idle_memory_leaves_retrieval_after_one_run_and_is_restorable_until_purge(
    home: Path,
) -> None:
    with Engram.open(Settings()) as engram:
        [snack] = engram.add("Ana snacks on salted pretzels", user_id=USER, account_id=ACCOUNT)
        engram.add("Ana walks to the pretzel bakery on Sundays", user_id=USER, account_id=ACCOUNT)
        assert sorted(_found(engram, "pretzels")) == ["note", "note.2"]
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

    with Engram.open(Settings()) as engram:
        assert _found(engram, "pretzels") == ["note.2"]
        engine = engram.engine
        header = engine.deliver_delta(account_id=ACCOUNT, user_id=USER, reader="agent")
        title, *bullets = header.splitlines()
        assert title == f"Memory updates since rev {rev}:"
        assert len(bullets) == 1 and bullets[0].startswith("- ⌛expired: [")
        assert bullets[0].endswith("] note (imp=2)")  # named by its key, its value out of sight
        # Shown once: the next delivery has nothing new.
        assert engine.deliver_delta(account_id=ACCOUNT, user_id=USER, reader="agent") == ""
        assert engine.op_counts(by="node").get("worker") == 1
    assert "ran 0 jobs" in _worker_once()  # this hour's runs are done

    with Engram.open(Settings()) as engram:
        engram.engine.restore(snack.id, account_id=ACCOUNT)
        assert sorted(_found(engram, "pretzels")) == ["note", "note.2"]
        engram.engine.forget(snack.id, account_id=ACCOUNT)
        assert engram.engine.purge_expired(now=time.time() + 31 * DAY).purged == 1
        with pytest.raises(ConflictError):
            engram.engine.restore(snack.id, account_id=ACCOUNT)
        assert _found(engram, "pretzels") == ["note.2"]
