"""SQL of the service tables: call sessions and their events, API keys, proposed changes.

Written once with ``?`` placeholders against the database seam
(:mod:`confide.storage.database`), so both backends share it. None of these tables holds
conversation text: events carry tool names, memory ids, blinded keys and types; proposal
values and keys are sealed by the caller, and proposals are looked up by blinded key.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from confide.crypto.envelope import BLIND_KEY_PREFIX
from confide.storage.database import Database, Statements
from confide.storage.schema import Feature, Migration, account_policies, no_statistics
from confide.storage.service import ApiKeyRow, CallSessionRow, ProposalRow, SessionEventRow

__all__ = ["SERVICE_FEATURE", "SqlServiceTables"]

_SESSION_COLUMNS = (
    "id, account_id, user_id, is_reminder, created_at, connected_at, ended_at, "
    "tool_calls, memories_extracted, summarization, worker_id, worker_host, worker_pid"
)
_API_KEY_COLUMNS = "id, account_id, token_hash, created_at, revoked_at, scopes"
_PROPOSAL_COLUMNS = (
    "id, account_id, user_id, key, type, confidence, session_id, status, created_at, "
    "expires_at, decided_at, key_id, ciphertext, wrapped_key"
)


def _session(values: Sequence[Any]) -> CallSessionRow:
    row = list(values)
    row[3] = bool(row[3])
    return CallSessionRow(*row)


def _api_key(values: Sequence[Any], agents: tuple[str, ...]) -> ApiKeyRow:
    key_id, account_id, token_hash, created_at, revoked_at, scopes = values
    return ApiKeyRow(key_id, account_id, token_hash, created_at, revoked_at, agents, scopes or "")


def _proposal(values: Sequence[Any]) -> ProposalRow:
    row = list(values)
    row[12] = bytes(row[12])
    row[13] = bytes(row[13])
    return ProposalRow(*row)


class SqlServiceTables:
    """:class:`~confide.storage.service.ServiceTables` on a SQL storage (SQLite or PostgreSQL)."""

    def __init__(self, storage: Database) -> None:
        self._storage = storage

    def _read(self, account_id: str) -> AbstractContextManager[Statements]:
        return self._storage.reader(account_id)

    @contextmanager
    def _write(self, account_id: str) -> Iterator[Statements]:
        with self._storage.transaction() as tx:
            tx.scope_to(account_id)
            yield tx

    @contextmanager
    def _write_across_accounts(self) -> Iterator[Statements]:
        with self._storage.transaction() as tx:
            tx.across_accounts()
            yield tx

    # ---- call sessions -----------------------------------------------------------------------
    def insert_session(self, row: CallSessionRow) -> None:
        """Insert a new call session."""
        with self._write(row.account_id) as tx:
            tx.run(
                f"INSERT INTO call_sessions ({_SESSION_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    row.id,
                    row.account_id,
                    row.user_id,
                    int(row.is_reminder),
                    row.created_at,
                    row.connected_at,
                    row.ended_at,
                    row.tool_calls,
                    row.memories_extracted,
                    row.summarization,
                    row.worker_id,
                    row.worker_host,
                    row.worker_pid,
                ],
            )

    def get_session(self, session_id: str, *, account_id: str) -> CallSessionRow | None:
        """One call session by id, within an account."""
        with self._read(account_id) as db:
            row = db.run(
                f"SELECT {_SESSION_COLUMNS} FROM call_sessions WHERE id = ? AND account_id = ?",
                [session_id, account_id],
            ).fetchone()
        return None if row is None else _session(row)

    def mark_connected(self, session_id: str, ts: float, *, account_id: str) -> None:
        """Record when the call connected (the first time only)."""
        with self._write(account_id) as tx:
            tx.run(
                "UPDATE call_sessions SET connected_at = COALESCE(connected_at, ?) "
                "WHERE id = ? AND account_id = ?",
                [ts, session_id, account_id],
            )

    def claim_session(
        self, session_id: str, *, account_id: str, worker_id: str, host: str, pid: int
    ) -> CallSessionRow | None:
        """Record the process holding the call's turns unless one already is; the session
        as it stands afterwards (``None`` for an id unknown in the account)."""
        with self._write(account_id) as tx:
            # A conditional update: of two processes claiming at once, the second finds
            # worker_id set and changes nothing; both then read the winner.
            tx.run(
                "UPDATE call_sessions SET worker_id = ?, worker_host = ?, worker_pid = ? "
                "WHERE id = ? AND account_id = ? AND worker_id IS NULL",
                [worker_id, host, pid, session_id, account_id],
            )
            row = tx.run(
                f"SELECT {_SESSION_COLUMNS} FROM call_sessions WHERE id = ? AND account_id = ?",
                [session_id, account_id],
            ).fetchone()
        return None if row is None else _session(row)

    def mark_ended(
        self, session_id: str, ts: float, summarization: str, *, account_id: str
    ) -> bool:
        """Record the end of the call and whether it was summarised; ``False`` (and nothing
        written) when it had already ended."""
        with self._write(account_id) as tx:
            ended = tx.run(
                "UPDATE call_sessions SET ended_at = ?, summarization = ? "
                "WHERE id = ? AND account_id = ? AND ended_at IS NULL",
                [ts, summarization, session_id, account_id],
            ).rowcount
            if ended != 1:
                return False
            self._event(tx, session_id, account_id, "ended", None, None, None, None, ts)
            return True

    def set_extracted(self, session_id: str, count: int, outcome: str, *, account_id: str) -> None:
        """Record how many memories extraction stored for the session."""
        with self._write(account_id) as tx:
            tx.run(
                "UPDATE call_sessions SET memories_extracted = ?, summarization = ? "
                "WHERE id = ? AND account_id = ?",
                [count, outcome, session_id, account_id],
            )

    def add_tool_call(
        self,
        session_id: str,
        *,
        account_id: str,
        tool: str,
        memory_id: str | None,
        key: str | None,
        memory_type: str | None,
        ts: float,
    ) -> None:
        """Record a tool call as a session event and count it on the session."""
        with self._write(account_id) as tx:
            tx.run(
                "UPDATE call_sessions SET tool_calls = tool_calls + 1 "
                "WHERE id = ? AND account_id = ?",
                [session_id, account_id],
            )
            self._event(
                tx, session_id, account_id, "tool_call", tool, memory_id, key, memory_type, ts
            )

    def add_event(self, session_id: str, kind: str, ts: float, *, account_id: str) -> None:
        """Record a bare event (``created``, ``connected``...)."""
        with self._write(account_id) as tx:
            self._event(tx, session_id, account_id, kind, None, None, None, None, ts)

    @staticmethod
    def _event(
        tx: Statements,
        session_id: str,
        account_id: str,
        kind: str,
        tool: str | None,
        memory_id: str | None,
        key: str | None,
        memory_type: str | None,
        ts: float,
    ) -> None:
        tx.run(
            "INSERT INTO session_events (session_id, account_id, user_id, kind, tool, "
            "memory_id, key, memory_type, ts) SELECT id, account_id, user_id, ?, ?, ?, ?, ?, ? "
            "FROM call_sessions WHERE id = ? AND account_id = ?",
            [kind, tool, memory_id, key, memory_type, ts, session_id, account_id],
        )

    def events(self, session_id: str, *, account_id: str) -> list[SessionEventRow]:
        """The session's events, oldest first."""
        with self._read(account_id) as db:
            rows = db.run(
                "SELECT id, session_id, kind, tool, memory_id, key, memory_type, ts "
                "FROM session_events WHERE session_id = ? AND account_id = ? ORDER BY id",
                [session_id, account_id],
            ).fetchall()
        return [SessionEventRow(*r) for r in rows]

    # ---- API keys ----------------------------------------------------------------------------
    def insert_api_key(self, row: ApiKeyRow) -> None:
        """Store a new API key (its hash only) with its agents, in one transaction."""
        with self._write(row.account_id) as tx:
            tx.run(
                f"INSERT INTO api_keys ({_API_KEY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    row.id,
                    row.account_id,
                    row.token_hash,
                    row.created_at,
                    row.revoked_at,
                    row.scopes,
                ],
            )
            for position, agent in enumerate(row.agents):
                tx.run(
                    "INSERT INTO api_key_agents (key_id, agent, position) VALUES (?, ?, ?)",
                    [row.id, agent, position],
                )

    def get_api_key(self, key_id: str) -> ApiKeyRow | None:
        """An API key by its public id."""
        # Authentication looks the key up before any account is known: its row names one.
        with self._storage.reader_across_accounts() as db:
            row = db.run(
                f"SELECT {_API_KEY_COLUMNS} FROM api_keys WHERE id = ?", [key_id]
            ).fetchone()
            if row is None:
                return None
            agents = db.run(
                "SELECT agent FROM api_key_agents WHERE key_id = ? ORDER BY position", [key_id]
            ).fetchall()
        return _api_key(row, tuple(a[0] for a in agents))

    def api_keys(self, account_id: str) -> list[ApiKeyRow]:
        """The API keys of an account, revoked ones included, oldest first."""
        with self._read(account_id) as db:
            rows = db.run(
                f"SELECT {_API_KEY_COLUMNS} FROM api_keys WHERE account_id = ? "
                "ORDER BY created_at, id",
                [account_id],
            ).fetchall()
            bound = db.run(
                "SELECT a.key_id, a.agent FROM api_key_agents a "
                "JOIN api_keys k ON k.id = a.key_id WHERE k.account_id = ? "
                "ORDER BY a.key_id, a.position",
                [account_id],
            ).fetchall()
        agents: dict[str, list[str]] = {}
        for key_id, agent in bound:
            agents.setdefault(key_id, []).append(agent)
        return [_api_key(r, tuple(agents.get(r[0], ()))) for r in rows]

    def revoke_api_key(self, key_id: str, ts: float) -> ApiKeyRow | None:
        """Mark a key revoked at ``ts`` (kept if it already was); ``None`` for an unknown id."""
        # By public id, as an operator revokes it (``confide keys revoke``): any account's.
        with self._write_across_accounts() as tx:
            tx.run(
                "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?",
                [ts, key_id],
            )
        return self.get_api_key(key_id)

    # ---- proposals ---------------------------------------------------------------------------
    def insert_proposal(self, row: ProposalRow) -> None:
        """Store a proposed change (value already sealed)."""
        with self._write(row.account_id) as tx:
            tx.run(
                f"INSERT INTO proposals ({_PROPOSAL_COLUMNS}, key_lc) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    row.id,
                    row.account_id,
                    row.user_id,
                    row.key,
                    row.type,
                    row.confidence,
                    row.session_id,
                    row.status,
                    row.created_at,
                    row.expires_at,
                    row.decided_at,
                    row.key_id,
                    row.ciphertext,
                    row.wrapped_key,
                    row.key.lower(),
                ],
            )

    def get_proposal(self, account_id: str, proposal_id: str) -> ProposalRow | None:
        """One proposal by id, within an account."""
        with self._read(account_id) as db:
            row = db.run(
                f"SELECT {_PROPOSAL_COLUMNS} FROM proposals WHERE id = ? AND account_id = ?",
                [proposal_id, account_id],
            ).fetchone()
        return None if row is None else _proposal(row)

    def pending_proposals(
        self, account_id: str, user_id: str, *, key: str | None, now: float
    ) -> list[ProposalRow]:
        """Unexpired pending proposals of a user, optionally for one (blinded) key, newest first."""
        sql = (
            f"SELECT {_PROPOSAL_COLUMNS} FROM proposals WHERE account_id = ? AND user_id = ? "
            "AND status = 'pending' AND expires_at > ?"
        )
        params: list[Any] = [account_id, user_id, now]
        if key is not None:
            sql += " AND key_lc = ?"
            params.append(key.lower())
        with self._read(account_id) as db:
            rows = db.run(sql + " ORDER BY created_at DESC", params).fetchall()
        return [_proposal(r) for r in rows]

    # ---- upgrade of an older store (keys in clear) ---------------------------------------------
    def clear_key_proposals(self, limit: int) -> list[ProposalRow]:
        """Up to ``limit`` proposals whose key column is not blinded (an older store)."""
        with self._storage.reader_across_accounts() as db:  # the upgrade covers every account
            rows = db.run(
                f"SELECT {_PROPOSAL_COLUMNS} FROM proposals WHERE substr(key, 1, 2) <> ? "
                "ORDER BY id LIMIT ?",
                [BLIND_KEY_PREFIX, limit],
            ).fetchall()
        return [_proposal(r) for r in rows]

    def reseal_proposal(
        self, proposal_id: str, stored_key: str, ciphertext: bytes, wrapped_key: bytes
    ) -> None:
        """Replace a proposal's key column and sealed payload."""
        with self._write_across_accounts() as tx:  # the upgrade, by id (see above)
            tx.run(
                "UPDATE proposals SET key = ?, key_lc = ?, ciphertext = ?, wrapped_key = ? "
                "WHERE id = ?",
                [stored_key, stored_key, ciphertext, wrapped_key, proposal_id],
            )

    def clear_event_keys(self, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` distinct ``(account_id, key)`` of session events with a clear key."""
        with self._storage.reader_across_accounts() as db:  # the upgrade covers every account
            rows = db.run(
                "SELECT DISTINCT account_id, key FROM session_events WHERE key IS NOT NULL "
                "AND substr(key, 1, 2) <> ? ORDER BY account_id, key LIMIT ?",
                [BLIND_KEY_PREFIX, limit],
            ).fetchall()
        return [(str(a), str(k)) for a, k in rows]

    def replace_event_keys(self, account_id: str, key: str, stored_key: str) -> None:
        """Replace a clear key in an account's session events by its blinded form."""
        with self._write(account_id) as tx:
            tx.run(
                "UPDATE session_events SET key = ? WHERE account_id = ? AND key = ?",
                [stored_key, account_id, key],
            )

    def decide_proposal(self, proposal_id: str, status: str, ts: float, *, account_id: str) -> bool:
        """Move a pending proposal to ``status``; False if it was no longer pending."""
        with self._write(account_id) as tx:
            cursor = tx.run(
                "UPDATE proposals SET status = ?, decided_at = ? WHERE id = ? "
                "AND account_id = ? AND status = 'pending'",
                [status, ts, proposal_id, account_id],
            )
            return cursor.rowcount == 1


def _service(blob: str, real: str, serial: str) -> tuple[str, ...]:
    # Call sessions, their events, API keys and proposed changes. None holds conversation
    # text: events carry tool names, ids, keys and types; proposal values are sealed.
    return (
        f"""CREATE TABLE IF NOT EXISTS call_sessions (
            id TEXT PRIMARY KEY, account_id TEXT NOT NULL, user_id TEXT NOT NULL,
            is_reminder INTEGER NOT NULL, created_at {real} NOT NULL,
            connected_at {real}, ended_at {real},
            tool_calls INTEGER NOT NULL, memories_extracted INTEGER NOT NULL,
            summarization TEXT)""",
        "CREATE INDEX IF NOT EXISTS call_sessions_owner ON call_sessions (account_id, user_id)",
        f"""CREATE TABLE IF NOT EXISTS session_events (
            id {serial}, session_id TEXT NOT NULL, account_id TEXT NOT NULL,
            user_id TEXT NOT NULL, kind TEXT NOT NULL, tool TEXT, memory_id TEXT,
            key TEXT, memory_type TEXT, ts {real} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS session_events_session ON session_events (session_id)",
        f"""CREATE TABLE IF NOT EXISTS api_keys (
            id TEXT PRIMARY KEY, account_id TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE,
            created_at {real} NOT NULL, revoked_at {real})""",
        f"""CREATE TABLE IF NOT EXISTS proposals (
            id TEXT PRIMARY KEY, account_id TEXT NOT NULL, user_id TEXT NOT NULL,
            key TEXT NOT NULL, key_lc TEXT NOT NULL, type TEXT NOT NULL,
            confidence {real} NOT NULL, session_id TEXT, status TEXT NOT NULL,
            created_at {real} NOT NULL, expires_at {real} NOT NULL, decided_at {real},
            key_id TEXT NOT NULL, ciphertext {blob} NOT NULL, wrapped_key {blob} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS proposals_owner "
        "ON proposals (account_id, user_id, key_lc, status)",
    )


# An admin scope for operator routes (erasure over HTTP).
_API_KEY_SCOPES = ("ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS scopes TEXT",)

# The agents an API key may act as, in the order given when it was made (the first is the
# one a request naming no agent acts as). A key with no rows here acts as agent ``default``.
_API_KEY_AGENTS = """CREATE TABLE IF NOT EXISTS api_key_agents (
    key_id TEXT NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    agent TEXT NOT NULL, position INTEGER NOT NULL,
    PRIMARY KEY (key_id, agent))"""

# Keys in proposals and session events are blinded by the service (it holds the account keys
# SQL has not): tables with rows were written with clear keys and are marked for its upgrade.
_SERVICE_KEYS = (
    "EXISTS (SELECT 1 FROM proposals) OR EXISTS (SELECT 1 FROM session_events "
    "WHERE key IS NOT NULL)"
)
_KEYS_BLINDED = (
    "INSERT INTO store_meta (key, value) SELECT 'service_keys_blinded', 'pending' "
    f"WHERE {_SERVICE_KEYS} ON CONFLICT (key) DO NOTHING",
    "INSERT INTO store_meta (key, value) SELECT 'service_keys_blinded', 'done' "
    f"WHERE NOT ({_SERVICE_KEYS}) ON CONFLICT (key) DO NOTHING",
)

# The service process holding a call's turns (they live in its memory, never in the
# database): another process reached by the call's /turns or /end refuses instead of
# summarising part of the call. The id is made at each start; host and pid are for people.
_SESSION_WORKER = (
    "ALTER TABLE call_sessions ADD COLUMN IF NOT EXISTS worker_id TEXT",
    "ALTER TABLE call_sessions ADD COLUMN IF NOT EXISTS worker_host TEXT",
    "ALTER TABLE call_sessions ADD COLUMN IF NOT EXISTS worker_pid INTEGER",
)

SERVICE_FEATURE = Feature(
    name="service",
    migrations=(
        Migration(
            version=1,
            name="service",
            sqlite=_service("BLOB", "REAL", "INTEGER PRIMARY KEY AUTOINCREMENT"),
            postgres=_service(
                "BYTEA", "DOUBLE PRECISION", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
            ),
        ),
        Migration(
            version=2,
            name="api-key-scopes",
            sqlite=_API_KEY_SCOPES,
            postgres=(*_API_KEY_SCOPES, *no_statistics("proposals")),
        ),
        Migration(
            version=3, name="api-key-agents", sqlite=(_API_KEY_AGENTS,), postgres=(_API_KEY_AGENTS,)
        ),
        Migration(version=4, name="blind-keys", sqlite=_KEYS_BLINDED, postgres=_KEYS_BLINDED),
        Migration(
            version=5, name="call-session-worker", sqlite=_SESSION_WORKER, postgres=_SESSION_WORKER
        ),
        Migration(
            version=6,
            name="row-level-security",
            sqlite=(),
            postgres=account_policies("call_sessions", "session_events", "api_keys", "proposals"),
        ),
    ),
    owner_tables=("session_events", "call_sessions", "proposals"),
    sealed_tables=("proposals",),
)
"""Call sessions and their events, API keys and their agents, proposed changes."""
