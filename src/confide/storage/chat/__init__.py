"""Chat messages and the ranges of them summarised: rows, role protocols and their SQL.

A message is kept as a sealed payload (the caller seals its content under the owner's key,
bound to the message id) beside plain columns that say whose it is, where it sits in its
conversation and whether it was summarised. ``conversation_summaries`` records each
summarised range once: ``(account_id, conversation_id, range_start, range_end)`` is unique,
so a range written twice (a retry, two concurrent triggers, a crash between the LLM call
and the commit) fails inside the transaction that would have stored it twice.

:class:`MessageTables` holds the reads, the writes that stand alone, and the writes a summary
commits inside the engine's memory transaction (given that transaction: the engine's
``commit_batch(within=...)`` hands it over). Both SQL backends share the SQL below, written
once with ``?`` placeholders.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from confide.errors import NotFoundError, StaleKeyError
from confide.storage.database import MemoryStore, TransactionStatements
from confide.storage.schema import Feature, Migration, account_policies, no_statistics

__all__ = [
    "CHAT_FEATURE",
    "MessageRow",
    "MessageTables",
    "SqlMessageTables",
    "SummaryRange",
]


@dataclass(frozen=True, slots=True)
class MessageRow:
    """One stored chat message: owner, place and role in clear, its content sealed.

    ``index`` counts the conversation's messages from 0; ``summarised_at`` is when a
    summary covered it (``None`` until then).
    """

    id: str
    account_id: str
    user_id: str
    conversation_id: str
    index: int
    role: str
    channel: str | None
    subject_id: str | None
    created_at: float
    summarised_at: float | None
    key_id: str
    ciphertext: bytes
    wrapped_key: bytes


@dataclass(frozen=True, slots=True)
class SummaryRange:
    """A summarised range ``[range_start, range_end)`` of a conversation and its chunk."""

    account_id: str
    user_id: str
    conversation_id: str
    range_start: int
    range_end: int
    memory_id: str
    created_at: float


_COLUMNS = (
    "id, account_id, user_id, conversation_id, idx, role, channel, subject_id, created_at, "
    "summarised_at, key_id, ciphertext, wrapped_key"
)


def _message(values: Sequence[Any]) -> MessageRow:
    row = list(values)
    row[4] = int(row[4])
    row[11] = bytes(row[11])
    row[12] = bytes(row[12])
    return MessageRow(*row)


class MessageTables(Protocol):
    """Reads of messages and summarised ranges, and writes that stand alone."""

    def next_index_and_insert(self, row: MessageRow, *, key_generation: int) -> int:
        """Insert ``row`` at the conversation's next index (its ``index`` is ignored).

        Returns the index given. Raises :class:`~confide.errors.NotFoundError` when the
        conversation holds another user's messages, and :class:`~confide.errors.StaleKeyError`
        when the user's key generation is no longer ``key_generation`` (the user was erased
        since the row was sealed).
        """
        ...

    def messages(
        self, account_id: str, conversation_id: str, *, after: int, limit: int
    ) -> list[MessageRow]:
        """Messages with an index above ``after``, oldest first, at most ``limit``."""
        ...

    def recent(
        self, account_id: str, conversation_id: str, *, limit: int, channel: str | None = None
    ) -> list[MessageRow]:
        """The newest ``limit`` messages, oldest first; given a ``channel``, only that
        channel's messages and those saved without one."""
        ...

    def count(self, account_id: str, conversation_id: str) -> int:
        """How many messages the conversation holds."""
        ...

    def unsummarised(self, account_id: str, conversation_id: str) -> list[MessageRow]:
        """Messages no summary covers yet, oldest first."""
        ...

    def summaries(self, account_id: str, conversation_id: str) -> list[SummaryRange]:
        """The summarised ranges, oldest first."""
        ...

    def owner(self, account_id: str, conversation_id: str) -> str | None:
        """The user whose conversation it is (``None``: it holds no message)."""
        ...

    def purge_summarised(self, before: float, limit: int) -> int:
        """Delete up to ``limit`` messages summarised before ``before``; how many."""
        ...

    def record_summary(self, tx: TransactionStatements, summary: SummaryRange) -> bool:
        """Record a summarised range in ``tx`` (a memory transaction, so the range commits
        with the summary's memory); False (nothing written) when it is recorded already."""
        ...

    def mark_summarised(self, tx: TransactionStatements, summary: SummaryRange) -> int:
        """Mark the messages of ``summary``'s range summarised at its ``created_at``, in
        ``tx``; how many were not yet."""
        ...


class _ConversationTransaction(TransactionStatements, Protocol):
    """A memory transaction as the message tables write through it: statements and the
    user's key generation (held against an erasure until commit)."""

    def key_generation(self, account_id: str, user_id: str) -> int | None:
        """The user's key generation (None: no row)."""
        ...


class SqlMessageTables:
    """:class:`MessageTables` on a SQL storage (SQLite or PostgreSQL).

    Args:
        store: the memory store (its transactions check the user's key generation, which
            the memory store keeps, before a message is written).
    """

    def __init__(self, store: MemoryStore[_ConversationTransaction]) -> None:
        self._store = store

    @staticmethod
    def lock_conversation(tx: TransactionStatements, account_id: str, conversation_id: str) -> None:
        """Hold off other writers of this conversation until ``tx`` ends."""
        tx.scope_to(account_id)
        tx.lock(f"{account_id}/{conversation_id}")

    def record_summary(self, tx: TransactionStatements, summary: SummaryRange) -> bool:
        """Insert the range unless it is there (``ON CONFLICT DO NOTHING``: no error, so a
        PostgreSQL transaction stays usable); True when this call recorded it."""
        tx.scope_to(summary.account_id)
        cursor = tx.run(
            "INSERT INTO conversation_summaries (account_id, user_id, conversation_id, "
            "range_start, range_end, memory_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (account_id, conversation_id, range_start, range_end) DO NOTHING",
            [
                summary.account_id,
                summary.user_id,
                summary.conversation_id,
                summary.range_start,
                summary.range_end,
                summary.memory_id,
                summary.created_at,
            ],
        )
        return int(cursor.rowcount) == 1

    def mark_summarised(self, tx: TransactionStatements, summary: SummaryRange) -> int:
        """Mark the messages of ``summary``'s range summarised at its ``created_at``; how
        many were not yet."""
        tx.scope_to(summary.account_id)
        cursor = tx.run(
            "UPDATE messages SET summarised_at = ? WHERE account_id = ? AND conversation_id = ? "
            "AND idx >= ? AND idx < ? AND summarised_at IS NULL",
            [
                summary.created_at,
                summary.account_id,
                summary.conversation_id,
                summary.range_start,
                summary.range_end,
            ],
        )
        return int(cursor.rowcount)

    def next_index_and_insert(self, row: MessageRow, *, key_generation: int) -> int:
        """Insert ``row`` at the conversation's next index, serialised per conversation."""
        with self._store.transaction() as tx:
            tx.scope_to(row.account_id)
            if tx.key_generation(row.account_id, row.user_id) != key_generation:
                raise StaleKeyError("the user's key changed since the message was sealed")
            self.lock_conversation(tx, row.account_id, row.conversation_id)
            first = tx.run(
                "SELECT user_id FROM messages WHERE account_id = ? AND conversation_id = ? LIMIT 1",
                [row.account_id, row.conversation_id],
            ).fetchone()
            if first is None:
                first = tx.run(
                    "SELECT user_id FROM conversation_summaries WHERE account_id = ? "
                    "AND conversation_id = ? LIMIT 1",
                    [row.account_id, row.conversation_id],
                ).fetchone()
            if first is not None and first[0] != row.user_id:
                raise NotFoundError("conversation not found")
            top = tx.run(
                "SELECT MAX(idx) FROM messages WHERE account_id = ? AND conversation_id = ?",
                [row.account_id, row.conversation_id],
            ).fetchone()[0]
            covered = tx.run(
                "SELECT MAX(range_end) FROM conversation_summaries WHERE account_id = ? "
                "AND conversation_id = ?",
                [row.account_id, row.conversation_id],
            ).fetchone()[0]
            index = max(-1 if top is None else int(top), -1 if covered is None else covered - 1)
            index += 1
            tx.run(
                f"INSERT INTO messages ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    row.id,
                    row.account_id,
                    row.user_id,
                    row.conversation_id,
                    index,
                    row.role,
                    row.channel,
                    row.subject_id,
                    row.created_at,
                    row.summarised_at,
                    row.key_id,
                    row.ciphertext,
                    row.wrapped_key,
                ],
            )
        return index

    def messages(
        self, account_id: str, conversation_id: str, *, after: int, limit: int
    ) -> list[MessageRow]:
        """Messages with an index above ``after``, oldest first, at most ``limit``."""
        with self._store.database.reader(account_id) as db:
            rows = db.run(
                f"SELECT {_COLUMNS} FROM messages WHERE account_id = ? AND conversation_id = ? "
                "AND idx > ? ORDER BY idx LIMIT ?",
                [account_id, conversation_id, after, limit],
            ).fetchall()
        return [_message(r) for r in rows]

    def recent(
        self, account_id: str, conversation_id: str, *, limit: int, channel: str | None = None
    ) -> list[MessageRow]:
        """The newest ``limit`` messages, oldest first; given a ``channel``, only that
        channel's messages and those saved without one."""
        where, params = "", [account_id, conversation_id]
        if channel is not None:
            where = " AND (channel = ? OR channel IS NULL)"
            params.append(channel)
        with self._store.database.reader(account_id) as db:
            rows = db.run(
                f"SELECT {_COLUMNS} FROM messages WHERE account_id = ? AND conversation_id = ?"
                f"{where} ORDER BY idx DESC LIMIT ?",
                [*params, limit],
            ).fetchall()
        return [_message(r) for r in reversed(rows)]

    def count(self, account_id: str, conversation_id: str) -> int:
        """How many messages the conversation holds."""
        with self._store.database.reader(account_id) as db:
            row = db.run(
                "SELECT COUNT(*) FROM messages WHERE account_id = ? AND conversation_id = ?",
                [account_id, conversation_id],
            ).fetchone()
        return int(row[0])

    def unsummarised(self, account_id: str, conversation_id: str) -> list[MessageRow]:
        """Messages no summary covers yet, oldest first."""
        with self._store.database.reader(account_id) as db:
            rows = db.run(
                f"SELECT {_COLUMNS} FROM messages WHERE account_id = ? AND conversation_id = ? "
                "AND summarised_at IS NULL ORDER BY idx",
                [account_id, conversation_id],
            ).fetchall()
        return [_message(r) for r in rows]

    def summaries(self, account_id: str, conversation_id: str) -> list[SummaryRange]:
        """The summarised ranges, oldest first."""
        with self._store.database.reader(account_id) as db:
            rows = db.run(
                "SELECT account_id, user_id, conversation_id, range_start, range_end, "
                "memory_id, created_at FROM conversation_summaries WHERE account_id = ? "
                "AND conversation_id = ? ORDER BY range_start",
                [account_id, conversation_id],
            ).fetchall()
        return [SummaryRange(*r) for r in rows]

    def owner(self, account_id: str, conversation_id: str) -> str | None:
        """The user whose conversation it is (``None``: it holds no message)."""
        with self._store.database.reader(account_id) as db:
            row = db.run(
                "SELECT user_id FROM messages WHERE account_id = ? AND conversation_id = ? LIMIT 1",
                [account_id, conversation_id],
            ).fetchone()
        return None if row is None else str(row[0])

    def purge_summarised(self, before: float, limit: int) -> int:
        """Delete up to ``limit`` messages summarised before ``before``; how many."""
        with self._store.database.transaction() as tx:
            tx.across_accounts()  # the retention sweep covers every account
            cursor = tx.run(
                "DELETE FROM messages WHERE id IN (SELECT id FROM messages WHERE "
                "summarised_at IS NOT NULL AND summarised_at < ? ORDER BY summarised_at "
                "LIMIT ?)",
                [before, limit],
            )
            return int(cursor.rowcount)


def _chat(blob: str, real: str) -> tuple[str, ...]:
    # Chat messages (content sealed by the engine under the owner's key) and the ranges of
    # them summarised. A range is recorded once: the unique key makes a second commit of the
    # same range a no-op inside the transaction that would have stored its chunk twice.
    return (
        f"""CREATE TABLE IF NOT EXISTS messages (
            id TEXT PRIMARY KEY, account_id TEXT NOT NULL, user_id TEXT NOT NULL,
            conversation_id TEXT NOT NULL, idx INTEGER NOT NULL, role TEXT NOT NULL,
            channel TEXT, subject_id TEXT, created_at {real} NOT NULL, summarised_at {real},
            key_id TEXT NOT NULL, ciphertext {blob} NOT NULL, wrapped_key {blob} NOT NULL,
            UNIQUE (account_id, conversation_id, idx))""",
        "CREATE INDEX IF NOT EXISTS messages_owner ON messages (account_id, user_id)",
        "CREATE INDEX IF NOT EXISTS messages_summarised ON messages (summarised_at)",
        f"""CREATE TABLE IF NOT EXISTS conversation_summaries (
            account_id TEXT NOT NULL, user_id TEXT NOT NULL, conversation_id TEXT NOT NULL,
            range_start INTEGER NOT NULL, range_end INTEGER NOT NULL, memory_id TEXT NOT NULL,
            created_at {real} NOT NULL,
            PRIMARY KEY (account_id, conversation_id, range_start, range_end))""",
        "CREATE INDEX IF NOT EXISTS conversation_summaries_owner "
        "ON conversation_summaries (account_id, user_id)",
    )


CHAT_FEATURE = Feature(
    name="chat",
    migrations=(
        Migration(
            version=1,
            name="chat-messages",
            sqlite=_chat("BLOB", "REAL"),
            postgres=(*_chat("BYTEA", "DOUBLE PRECISION"), *no_statistics("messages")),
        ),
        Migration(
            version=2,
            name="row-level-security",
            sqlite=(),
            postgres=account_policies("messages", "conversation_summaries"),
        ),
    ),
    owner_tables=("messages", "conversation_summaries"),
    sealed_tables=("messages",),
)
"""Chat messages and the summarised ranges of them."""
