"""Proposed changes, held (sealed) until the user confirms them.

No inference (end-of-session extraction, the multi-fact pass) sets a sensitive key
(``preferred_name``, ``pronouns``, ``city``, ``language`` by default) on its own, and a benign
inferred write that too few signals corroborate waits too
(:mod:`confide.conversation.consent`): each files a :class:`ProposedChange` here. A live tool
call never does: the user who says it in the conversation has consented, so it applies at
once and settles the key's pending proposals. The proposal is kept for ``ttl`` (7 days by
default), its values sealed under the user's key exactly like memory values; its key is
sealed with them and stored only blinded (like a memory's key). It is applied when the user
confirms it (through the API, or by stating the same value in a live tool call) and the
decision is recorded: a confirmation is an engine update whose audit actor names the
proposal; a rejection or a superseding live write is an operational event. Neither carries a
value.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from confide.conversation.dedup import normalise
from confide.conversation.extraction import ProposedChange
from confide.crypto.envelope import SealedValue
from confide.engine import MemoryEngine
from confide.errors import ConflictError, IntegrityError, NotFoundError
from confide.index.codec import from_ts
from confide.storage.base import SERVICE_KEYS_BLINDED
from confide.storage.service import ProposalRow, ServiceTables
from confide.types import HistoryEventType, Memory, MemoryType, OpEvent, Source

__all__ = ["Proposal", "ProposalStore"]

log = logging.getLogger(__name__)

PENDING = "pending"


@dataclass(frozen=True, kw_only=True)
class Proposal:
    """A proposal as the API shows it to its owner (values decrypted)."""

    id: str
    account_id: str
    user_id: str
    key: str
    type: MemoryType
    current_value: str | None
    proposed_value: str
    status: str
    created_at: datetime
    expires_at: datetime


def _actor(proposal_id: str) -> str:
    return f"proposal:{proposal_id}"


class ProposalStore:
    """Seals, stores, lists and decides proposals; a :class:`ProposalSink` for extraction.

    Args:
        engine: the memory engine (its envelope and user keys seal the values).
        tables: the service tables.
        ttl: how long a proposal waits for a decision.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        tables: ServiceTables,
        *,
        ttl: timedelta = timedelta(days=7),
    ) -> None:
        self._engine = engine
        self._tables = tables
        self._ttl = ttl

    async def propose(self, change: ProposedChange) -> None:
        """File ``change`` (the :class:`ProposalSink` method)."""
        await asyncio.to_thread(self.file, change)

    def file(self, change: ProposedChange) -> str:
        """Seal and store ``change``; return the proposal id (the pending one's, when the
        same key already waits with the same value: a change is filed once)."""
        blinded = self._engine.blind_key(change.account_id, change.key)
        for row in self._tables.pending_proposals(
            change.account_id, change.user_id, key=blinded, now=time.time()
        ):
            if normalise(self._open(row).proposed_value) == normalise(change.proposed_value):
                return row.id
        proposal_id = str(uuid.uuid4())
        key_id, sealed = self._seal(
            change.key,
            change.current_value,
            change.proposed_value,
            account_id=change.account_id,
            user_id=change.user_id,
            proposal_id=proposal_id,
        )
        now = time.time()
        self._tables.insert_proposal(
            ProposalRow(
                id=proposal_id,
                account_id=change.account_id,
                user_id=change.user_id,
                key=self._engine.blind_key(change.account_id, change.key),
                type=change.type.value,
                confidence=change.confidence,
                session_id=change.session_id,
                status=PENDING,
                created_at=now,
                expires_at=now + self._ttl.total_seconds(),
                decided_at=None,
                key_id=key_id,
                ciphertext=sealed.ciphertext,
                wrapped_key=sealed.wrapped_key,
            )
        )
        self._op(change.account_id, change.user_id, "proposal_filed", None)
        self._audit(change.account_id, change.user_id, change.key, proposal_id, "held")
        return proposal_id

    def pending(self, *, account_id: str, user_id: str) -> list[Proposal]:
        """The user's unexpired pending proposals, newest first."""
        rows = self._tables.pending_proposals(account_id, user_id, key=None, now=time.time())
        return [self._open(r) for r in rows]

    def get(self, proposal_id: str, *, account_id: str) -> Proposal:
        """One proposal; :class:`NotFoundError` if not in this account."""
        row = self._tables.get_proposal(account_id, proposal_id)
        if row is None:
            raise NotFoundError("proposal not found")
        return self._open(row)

    def confirm(self, proposal_id: str, *, account_id: str) -> Memory:
        """Apply a pending proposal to its memory and return the new version.

        Raises:
            NotFoundError: no such proposal in this account.
            ConflictError: it was already decided or has expired.
        """
        row = self._pending_row(account_id, proposal_id)
        proposal = self._open(row)
        if not self._tables.decide_proposal(
            proposal_id, "confirmed", time.time(), account_id=account_id
        ):
            raise ConflictError("proposal was already decided")
        memory, _ = self._engine.update_by_key(
            account_id=account_id,
            user_id=row.user_id,
            key=proposal.key,
            value=proposal.proposed_value,
            type=MemoryType(row.type),
            source=Source.EXTRACTION,
            actor=_actor(proposal_id),
        )
        self._audit(account_id, row.user_id, proposal.key, proposal_id, "confirmed")
        log.info("proposal confirmed")
        return memory

    def reject(self, proposal_id: str, *, account_id: str) -> None:
        """Discard a pending proposal (recorded as an operational event)."""
        row = self._pending_row(account_id, proposal_id)
        proposal = self._open(row)
        if not self._tables.decide_proposal(
            proposal_id, "rejected", time.time(), account_id=account_id
        ):
            raise ConflictError("proposal was already decided")
        self._op(account_id, row.user_id, "proposal_rejected", None)
        self._audit(account_id, row.user_id, proposal.key, proposal_id, "rejected")

    def has_pending_value(self, *, account_id: str, user_id: str, key: str, value: str) -> bool:
        """Whether a pending proposal for ``key`` holds ``value`` (normalised)."""
        blinded = self._engine.blind_key(account_id, key)
        rows = self._tables.pending_proposals(account_id, user_id, key=blinded, now=time.time())
        return any(normalise(self._open(r).proposed_value) == normalise(value) for r in rows)

    def settle_by_live_write(
        self, *, account_id: str, user_id: str, key: str, value: str
    ) -> str | None:
        """Settle pending proposals for ``key`` after the user stated it in a live call.

        A stated value equal to the proposal confirms it; another value supersedes it.
        The live write itself is made by the caller. Returns ``"confirmed"``,
        ``"superseded"`` or ``None`` when nothing was pending.
        """
        blinded = self._engine.blind_key(account_id, key)
        rows = self._tables.pending_proposals(account_id, user_id, key=blinded, now=time.time())
        outcome: str | None = None
        for row in rows:
            proposal = self._open(row)
            same = normalise(proposal.proposed_value) == normalise(value)
            status = "confirmed" if same else "superseded"
            if self._tables.decide_proposal(row.id, status, time.time(), account_id=account_id):
                self._op(account_id, user_id, f"proposal_{status}", None)
                self._audit(account_id, user_id, key, row.id, status)
                outcome = outcome or status
        return outcome

    def upgrade_keys(self, *, batch: int = 500) -> int:
        """Blind the keys an older version left in clear in proposals and session events.

        A proposal gets its key sealed with its values and its key column blinded; session
        events get the blinded key. Returns how many proposals were re-sealed; runs when the
        service starts on a store marked ``pending`` by the ``blind-keys`` steps. Safe to re-run.
        """
        done = 0
        while rows := self._tables.clear_key_proposals(batch):
            for row in rows:
                self._reseal(row)
            done += len(rows)
        while events := self._tables.clear_event_keys(batch):
            for account_id, key in events:
                self._tables.replace_event_keys(
                    account_id, key, self._engine.blind_key(account_id, key)
                )
        self._engine.set_meta_value(SERVICE_KEYS_BLINDED, "done")
        return done

    def _reseal(self, row: ProposalRow) -> None:
        stored_key = self._engine.blind_key(row.account_id, row.key)
        try:
            proposal = self._open(row)
        except IntegrityError:
            # It cannot be opened (tampered, or its owner erased): keep no clear key either.
            self._tables.reseal_proposal(row.id, stored_key, b"", b"")
            return
        _, sealed = self._seal(
            proposal.key,
            proposal.current_value,
            proposal.proposed_value,
            account_id=row.account_id,
            user_id=row.user_id,
            proposal_id=row.id,
            key_id=row.key_id,
        )
        self._tables.reseal_proposal(row.id, stored_key, sealed.ciphertext, sealed.wrapped_key)

    def _seal(
        self,
        key: str,
        current: str | None,
        proposed: str,
        *,
        account_id: str,
        user_id: str,
        proposal_id: str,
        key_id: str | None = None,
    ) -> tuple[str, SealedValue]:
        payload = json.dumps(
            {"key": key, "current": current, "proposed": proposed}, ensure_ascii=False
        ).encode()
        return self._engine.seal_value(
            payload, account_id=account_id, user_id=user_id, record_id=proposal_id, key_id=key_id
        )

    def _pending_row(self, account_id: str, proposal_id: str) -> ProposalRow:
        row = self._tables.get_proposal(account_id, proposal_id)
        if row is None:
            raise NotFoundError("proposal not found")
        if row.status != PENDING:
            raise ConflictError(f"proposal is {row.status}")
        if row.expires_at <= time.time():
            raise ConflictError("proposal has expired")
        return row

    def _open(self, row: ProposalRow) -> Proposal:
        raw = self._engine.open_value(
            SealedValue(row.ciphertext, row.wrapped_key),
            account_id=row.account_id,
            user_id=row.user_id,
            record_id=row.id,
            key_id=row.key_id,
        )
        payload = json.loads(raw)
        status = row.status
        if status == PENDING and row.expires_at <= time.time():
            status = "expired"
        return Proposal(
            id=row.id,
            account_id=row.account_id,
            user_id=row.user_id,
            # Proposals filed before keys were blinded kept the key in clear, not sealed.
            key=str(payload.get("key", row.key)),
            type=MemoryType(row.type),
            current_value=payload.get("current"),
            proposed_value=str(payload["proposed"]),
            status=status,
            created_at=from_ts(row.created_at) or datetime.now(),
            expires_at=from_ts(row.expires_at) or datetime.now(),
        )

    def _audit(
        self, account_id: str, user_id: str, key: str, proposal_id: str, decision: str
    ) -> None:
        """A PROPOSAL event in the history of the memory the proposal is about."""
        current = self._engine.get_by_key(account_id=account_id, user_id=user_id, key=key)
        if current is not None:
            self._engine.note(
                current.id,
                HistoryEventType.PROPOSAL,
                account_id=account_id,
                actor=_actor(proposal_id),
                meta={"key": key, "proposal_id": proposal_id, "decision": decision},
            )

    def _op(self, account_id: str, user_id: str, op: str, memory_id: str | None) -> None:
        self._engine.record_op(
            OpEvent(user_id=user_id, node="proposals", op=op, memory_id=memory_id),
            account_id=account_id,
        )
