"""The chat feature's tables: messages and the summarised ranges of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from confide.engine import MemoryEngine
from confide.storage.base import Capability
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.confined import OTHER, ConfinedRoleHarness

if TYPE_CHECKING:
    from confide.storage.postgres import PostgresStorage
from confide.storage.chat import MessageRow, SqlMessageTables, SummaryRange


def _message(account_id: str, message_id: str) -> MessageRow:
    return MessageRow(
        id=message_id,
        account_id=account_id,
        user_id="user-1",
        conversation_id="conversation-1",
        index=0,
        role="user",
        channel=None,
        subject_id=None,
        created_at=1.0,
        summarised_at=None,
        key_id="key-1",
        ciphertext=b"sealed",
        wrapped_key=b"wrapped",
    )


class ChatConformance(ConfinedRoleHarness):
    """Chat messages and summaries work for their account, and only for it."""

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_messages_and_summaries_work_as_their_account(
        self, confined: PostgresStorage, confined_engine: MemoryEngine
    ) -> None:
        memory = add(confined_engine, value="tea")
        messages = SqlMessageTables(confined)
        for account in (ACCOUNT, OTHER):
            generation = confined.key_generation(account, "user-1")
            row = _message(account, f"m-{account}")
            assert messages.next_index_and_insert(row, key_generation=generation) == 0
        with confined.transaction() as tx:
            messages.lock_conversation(tx, ACCOUNT, "conversation-1")
            summary = SummaryRange(ACCOUNT, "user-1", "conversation-1", 0, 1, memory.id, 2.0)
            assert messages.record_summary(tx, summary)
            assert messages.mark_summarised(tx, summary) == 1
        assert [m.id for m in messages.messages(ACCOUNT, "conversation-1", after=-1, limit=5)] == [
            f"m-{ACCOUNT}"
        ]
        assert messages.unsummarised(ACCOUNT, "conversation-1") == []
        assert [s.memory_id for s in messages.summaries(ACCOUNT, "conversation-1")] == [memory.id]
        assert len(messages.unsummarised(OTHER, "conversation-1")) == 1
