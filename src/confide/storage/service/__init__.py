"""The service tables' interface: call sessions and their events, API keys, proposals.

Backend-neutral: the rows and the :class:`ServiceTables` protocol the service, the API keys
and the proposal store use. Both SQL backends share one implementation over the database
seam, ``SqlServiceTables(storage.database)`` in :mod:`confide.storage.service.sessions`. None
of these tables holds conversation text: events carry tool names, memory ids, blinded keys
and types; proposal values are sealed by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["ApiKeyRow", "CallSessionRow", "ProposalRow", "ServiceTables", "SessionEventRow"]


@dataclass(frozen=True, slots=True)
class CallSessionRow:
    """One call session: who, when, flags and counts (never what was said)."""

    id: str
    account_id: str
    user_id: str
    is_reminder: bool
    created_at: float
    connected_at: float | None
    ended_at: float | None
    tool_calls: int
    memories_extracted: int
    summarization: str | None
    worker_id: str | None = None
    """The service process that holds the call's turns in its memory (``None``: none yet)."""
    worker_host: str | None = None
    """That process's host name, for people reading the row."""
    worker_pid: int | None = None
    """That process's id on its host, for people reading the row."""


@dataclass(frozen=True, slots=True)
class SessionEventRow:
    """An event of a call session (e.g. a tool call with the memory id, blinded key and type)."""

    id: int
    session_id: str
    kind: str
    tool: str | None
    memory_id: str | None
    key: str | None
    memory_type: str | None
    ts: float


@dataclass(frozen=True, slots=True)
class ApiKeyRow:
    """An API key: its public id, its account, the SHA-256 of its secret token and the
    agents it may act as (in the order given; empty: agent ``default`` only)."""

    id: str
    account_id: str
    token_hash: str
    created_at: float
    revoked_at: float | None
    agents: tuple[str, ...] = ()
    scopes: str = ""
    """Extra scopes, comma-separated: ``admin`` allows operator routes (erasure)."""


@dataclass(frozen=True, slots=True)
class ProposalRow:
    """A proposed change to a sensitive memory; key and values are sealed under the user's key
    and ``key`` holds the key blinded (as a memory row does)."""

    id: str
    account_id: str
    user_id: str
    key: str
    type: str
    confidence: float
    session_id: str | None
    status: str
    created_at: float
    expires_at: float
    decided_at: float | None
    key_id: str
    ciphertext: bytes
    wrapped_key: bytes


class ServiceTables(Protocol):
    """Reads and writes of the service tables."""

    def insert_session(self, row: CallSessionRow) -> None:
        """Insert a new call session."""
        ...

    def get_session(self, session_id: str, *, account_id: str) -> CallSessionRow | None:
        """One call session by id, within an account (``None`` when another account's)."""
        ...

    def mark_connected(self, session_id: str, ts: float, *, account_id: str) -> None:
        """Record when the call connected (the first time only)."""
        ...

    def claim_session(
        self, session_id: str, *, account_id: str, worker_id: str, host: str, pid: int
    ) -> CallSessionRow | None:
        """Record ``worker_id`` as the process holding the call's turns unless one already
        is; the session as it stands afterwards (``None`` for an id unknown in the account).

        Two processes claiming at once: one wins, and both get the winner's row.
        """
        ...

    def mark_ended(
        self, session_id: str, ts: float, summarization: str, *, account_id: str
    ) -> bool:
        """Record the end of the call and whether it was summarised; ``False`` (and nothing
        written) when it had already ended."""
        ...

    def set_extracted(self, session_id: str, count: int, outcome: str, *, account_id: str) -> None:
        """Record how many memories extraction stored for the session."""
        ...

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
        ...

    def add_event(self, session_id: str, kind: str, ts: float, *, account_id: str) -> None:
        """Record a bare event (``created``, ``connected``...)."""
        ...

    def events(self, session_id: str, *, account_id: str) -> list[SessionEventRow]:
        """The session's events, oldest first."""
        ...

    def insert_api_key(self, row: ApiKeyRow) -> None:
        """Store a new API key (its hash only) with its agents, in one transaction."""
        ...

    def get_api_key(self, key_id: str) -> ApiKeyRow | None:
        """An API key by its public id, of any account (authentication reads it before an
        account is known)."""
        ...

    def api_keys(self, account_id: str) -> list[ApiKeyRow]:
        """The API keys of an account, revoked ones included, oldest first."""
        ...

    def revoke_api_key(self, key_id: str, ts: float) -> ApiKeyRow | None:
        """Mark a key revoked at ``ts`` (kept if it already was); ``None`` for an unknown id.

        By public id, of any account: an operator's command."""
        ...

    def insert_proposal(self, row: ProposalRow) -> None:
        """Store a proposed change (value already sealed)."""
        ...

    def get_proposal(self, account_id: str, proposal_id: str) -> ProposalRow | None:
        """One proposal by id, within an account."""
        ...

    def pending_proposals(
        self, account_id: str, user_id: str, *, key: str | None, now: float
    ) -> list[ProposalRow]:
        """Unexpired pending proposals of a user, optionally for one (blinded) key, newest first."""
        ...

    def clear_key_proposals(self, limit: int) -> list[ProposalRow]:
        """Up to ``limit`` proposals whose key column is not blinded (an older store)."""
        ...

    def reseal_proposal(
        self, proposal_id: str, stored_key: str, ciphertext: bytes, wrapped_key: bytes
    ) -> None:
        """Replace a proposal's key column and sealed payload."""
        ...

    def clear_event_keys(self, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` distinct ``(account_id, key)`` of session events with a clear key."""
        ...

    def replace_event_keys(self, account_id: str, key: str, stored_key: str) -> None:
        """Replace a clear key in an account's session events by its blinded form."""
        ...

    def decide_proposal(self, proposal_id: str, status: str, ts: float, *, account_id: str) -> bool:
        """Move a pending proposal to ``status``; False if it was no longer pending."""
        ...
