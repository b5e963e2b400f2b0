"""The SDK's chat methods on ``Confide`` (both backends), ``memory_query`` reaching summary
chunks, and ``confide purge`` keeping messages unless a retention is set, then removing
summarised ones past it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from confide.chat.history import CHUNK_CATEGORY
from confide.cli import main
from confide.client import Confide
from confide.config import Settings
from confide.engine import MemoryEngine
from confide.errors import NotFoundError, ValidationError
from confide.storage.chat import SqlMessageTables

ACCOUNT = "acct-1"
KEY = "22" * 32


def _conversation(memory: Confide, count: int = 31) -> None:
    for i in range(count):
        memory.add_message(
            account_id=ACCOUNT,
            user_id="ann",
            conversation_id="c1",
            role="user" if i % 2 == 0 else "assistant",
            content="I love gardening with roses." if i == 0 else f"plain line {i}",
        )


def test_sdk_saves_lists_retrieves_and_summarises(engine: MemoryEngine) -> None:
    memory = Confide(engine, embedder=None)
    _conversation(memory)  # the 31st message runs the summary (offline, no LLM set)
    page = memory.messages(account_id=ACCOUNT, user_id="ann", conversation_id="c1", limit=5)
    assert [m.index for m in page.messages] == [0, 1, 2, 3, 4] and page.next_cursor == 4
    [summary] = SqlMessageTables(engine.storage).summaries(ACCOUNT, "c1")
    assert (summary.range_start, summary.range_end) == (0, 20)
    history = memory.retrieve(
        "do I love gardening?", account_id=ACCOUNT, user_id="ann", conversation_id="c1"
    )
    assert history.metadata.message_count == 20
    assert history.metadata.has_long_term_context
    assert "The user loves gardening with roses." in history.context_messages[0].content
    # memory_query reaches the summary chunk too.
    found = memory.query(
        {"agent": "default", "account_id": ACCOUNT, "user_id": "ann", "query": "gardening roses"}
    )
    assert CHUNK_CATEGORY in {r["category"] for r in found.results}
    with pytest.raises(NotFoundError):
        memory.messages(account_id=ACCOUNT, user_id="bob", conversation_id="c1")
    with pytest.raises(ValidationError):
        memory.add_message(
            account_id=ACCOUNT, user_id="ann", conversation_id="c1", role="robot", content="x"
        )
    with pytest.raises(ValidationError, match="no profile"):
        memory.deliver("default", "hi", account_id=ACCOUNT, user_id="ann", conversation_id="c1")


def test_cli_purge_keeps_messages_unless_a_retention_is_set(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Confide.open(Settings(home=home, encryption_key=KEY, embedder="none")) as memory:
        _conversation(memory)
    env = {
        "CONFIDE_HOME": str(home),
        "MEMORY_ENCRYPTION_KEY": KEY,
        "CONFIDE_EMBEDDER": "none",
        "CONFIDE_STORAGE_URL": "",
    }
    kept = CliRunner().invoke(main, ["purge"], env=env, catch_exceptions=False)
    assert kept.exit_code == 0 and "chat messages kept" in kept.output
    env["CONFIDE_MESSAGE_RETENTION_DAYS"] = "30"
    young = CliRunner().invoke(main, ["purge"], env=env, catch_exceptions=False)
    assert young.exit_code == 0 and "purged 0 summarised chat messages" in young.output
    env["CONFIDE_MESSAGE_RETENTION_DAYS"] = "0"
    purged = CliRunner().invoke(main, ["purge"], env=env, catch_exceptions=False)
    assert purged.exit_code == 0 and "purged 20 summarised chat messages" in purged.output
    with Confide.open(Settings(home=home, encryption_key=KEY, embedder="none")) as memory:
        page = memory.messages(account_id=ACCOUNT, user_id="ann", conversation_id="c1")
        assert [m.index for m in page.messages] == list(range(20, 31))
