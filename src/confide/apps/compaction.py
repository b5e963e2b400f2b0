"""Keeping an app scope within its cap: an LLM decision, a FIFO fallback, one lock per scope.

When a new memory takes a scope over its cap, one LLM call sees every memory (with ids) and
the new one and answers ``{"action": "delete"|"edit", "targetMemoryId", "newContent",
"reason"}``: ``delete`` forgets the target; ``edit`` merges the new memory into the target (a
new version of it, audited as ``MERGE`` with the merged memory's id) and forgets the new one.
An LLM error or timeout, an invalid decision (unknown id, missing content, bad JSON, an
edit whose content the writing guard rejects: :func:`~confide.apps.writer.check_app_memory`,
counted in :attr:`Compactor.writing`) or a database error after one retry falls back to
FIFO: the oldest memory is forgotten.

An edit gives the target the merged memory's sources (the users whose words it was written
from, see :mod:`confide.storage.derived`), so erasing one of them deletes the target too.

Each change commits in one engine transaction that ends by locking the scope (an advisory
lock on PostgreSQL; SQLite has one writer) and counting it: a change that would take the
scope below its cap (another worker compacted it meanwhile) rolls back, so concurrent ends
leave exactly the cap. Every eviction and merge is in the audit history with who decided
(``decided_by``: ``llm`` or ``fallback``), why the fallback ran (``cause``) and the reason;
the LLM's reason may quote memory text, so it is sealed under the scope's key.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from confide.apps.scope import MAX_MEMORY_CHARS, AppScope, clip
from confide.apps.writer import check_app_memory
from confide.conversation.writing import WritingTally
from confide.crypto.envelope import SealedValue
from confide.engine import MemoryEngine
from confide.errors import ConfideError, ConflictError, ProviderError, StorageError
from confide.llm.answers import json_object
from confide.llm.base import LLM, Message
from confide.storage.apps import SqlAppTables
from confide.storage.base import Transaction
from confide.storage.derived import copy_memory_sources
from confide.types import HistoryEventType, Memory, MemoryFilter

__all__ = [
    "COMPACTION_PROMPT",
    "CompactionOutcome",
    "Compactor",
    "Decision",
    "InvalidDecisionError",
    "parse_decision",
    "reason_of",
]

log = logging.getLogger(__name__)

COMPACTION_PROMPT = (
    "You curate the memory of an app: at most {cap} short memories it reads every time it "
    "works. A new memory took it over the limit. Choose one change that brings it back: "
    '"delete" removes the least useful memory (it may be the new one); "edit" merges the '
    "new memory into a related older one, whose content becomes newContent (one factual "
    f"paragraph, at most {MAX_MEMORY_CHARS} characters). Answer with one JSON object and "
    'nothing else: {{"action": "delete" | "edit", "targetMemoryId": "...", '
    '"newContent": "...", "reason": "..."}}.'
)
_SPARE_ROUNDS = 5
Cause = Literal["no_llm", "llm_error", "llm_timeout", "invalid_decision", "database_error"]


class InvalidDecisionError(ConfideError):
    """The model's answer is not a usable compaction decision."""


class _BelowCap(Exception):
    """The change would take the scope below its cap: another worker compacted it."""


@dataclass(frozen=True, slots=True)
class Decision:
    """A compaction decision: what to do to which memory, and why."""

    action: Literal["delete", "edit"]
    target_id: str
    new_content: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """What compaction did: the changes made (``delete``/``edit`` with who decided and the
    fallback's cause) and the scope's count after them."""

    changes: tuple[tuple[str, str, str | None], ...]
    count: int


def parse_decision(
    text: str, memories: Sequence[Memory], new: Memory, *, writing: WritingTally | None = None
) -> Decision:
    """The model's answer as a :class:`Decision` about ``memories``; an edit's content
    passes the app memory writing guard (trimmed, or refused), counted in ``writing``.

    Raises:
        InvalidDecisionError: not JSON, an unknown action or target, an edit without
            content, with content the writing guard rejects, or of the new memory into
            itself.
    """
    try:
        data = json_object(text)
    except ValueError as exc:
        raise InvalidDecisionError(f"compaction answer {exc}") from None
    action = data.get("action")
    target = data.get("targetMemoryId")
    if action not in ("delete", "edit"):
        raise InvalidDecisionError("compaction answer has no valid action")
    if not isinstance(target, str) or target not in {m.id for m in memories}:
        raise InvalidDecisionError("compaction answer names an unknown memory")
    reason = data.get("reason")
    reason = clip(reason, 500) if isinstance(reason, str) else ""
    content = data.get("newContent")
    if action == "delete":
        return Decision("delete", target, None, reason)
    if not isinstance(content, str) or not content.strip():
        raise InvalidDecisionError("compaction edit has no newContent")
    if target == new.id:
        raise InvalidDecisionError("compaction edit merges the new memory into itself")
    verdict = check_app_memory(content)
    if writing is not None:
        writing.add(verdict)
    if verdict.text is None:
        raise InvalidDecisionError(f"compaction edit breaks the writing rules ({verdict.reason})")
    return Decision("edit", target, clip(verdict.text), reason)


def _prompt(cap: int, memories: Sequence[Memory], new: Memory) -> list[Message]:
    lines = [
        f"[{m.id}] (created {m.created_at.date().isoformat()}) {clip(m.value)}"
        for m in memories
        if m.id != new.id
    ]
    user = (
        "Memories:\n"
        + "\n".join(lines)
        + f"\n\nNew memory:\n[{new.id}] (created {new.created_at.date().isoformat()}) "
        + clip(new.value)
    )
    return [
        {"role": "system", "content": COMPACTION_PROMPT.format(cap=cap)},
        {"role": "user", "content": user},
    ]


def reason_of(engine: MemoryEngine, scope: AppScope, meta: Mapping[str, Any]) -> str | None:
    """The reason recorded in a compaction's audit ``meta`` (opening a sealed LLM reason)."""
    sealed = meta.get("reason_sealed")
    if isinstance(sealed, dict):
        raw = engine.open_value(
            SealedValue(
                base64.b64decode(sealed["ciphertext"]), base64.b64decode(sealed["wrapped_key"])
            ),
            account_id=scope.account_id,
            user_id=scope.owner,
            record_id=str(sealed["record"]),
            key_id=str(sealed["key_id"]),
        )
        return raw.decode()
    reason = meta.get("reason")
    return reason if isinstance(reason, str) else None


class Compactor:
    """Brings an app scope back to its cap after a new memory (see the module docstring).

    Args:
        engine: the memory engine.
        llm: the deciding model; ``None``: FIFO every time.
        timeout: seconds the model's call may take.
    """

    def __init__(self, engine: MemoryEngine, llm: LLM | None, *, timeout: float = 30.0) -> None:
        self.engine = engine
        self.llm = llm
        self.timeout = timeout
        self.writing = WritingTally()
        """The writing guard's verdicts on the model's edits (first-pass rate)."""

    def scope_memories(self, scope: AppScope) -> list[Memory]:
        """The scope's active memories, oldest first."""
        flt = MemoryFilter(account_id=scope.account_id, user_id=scope.owner, app_id=scope.app_id)
        memories = self.engine.list_memories(flt, limit=10_000)
        return sorted(memories, key=lambda m: (m.created_at, m.id))

    async def compact(self, scope: AppScope, new: Memory, cap: int) -> CompactionOutcome:
        """Bring the scope within ``cap``; returns what was done and the count after."""
        changes: list[tuple[str, str, str | None]] = []
        rounds = 0
        limit = _SPARE_ROUNDS
        while rounds < limit:
            memories = await asyncio.to_thread(self.scope_memories, scope)
            if len(memories) <= cap:
                break
            if rounds == 0:  # a lowered cap takes one round per memory over it
                limit += len(memories) - cap
            rounds += 1
            newest = new if any(m.id == new.id for m in memories) else memories[-1]
            decision, cause = await self._decide(scope, cap, memories, newest)
            if decision is not None:
                done, cause = await self._apply_decision(scope, cap, decision, newest)
                if done is not None:
                    if done:
                        changes.append((decision.action, "llm", None))
                    continue
            oldest = memories[0]
            meta = {
                "decided_by": "fallback",
                "cause": cause,
                "reason": f"fifo: the oldest memory is evicted ({cause})",
            }
            try:
                applied = await asyncio.to_thread(self._delete, scope, cap, oldest, meta)
            except (ConflictError, StorageError) as exc:
                log.warning("app compaction fallback retried: %s", type(exc).__name__)
                continue
            if applied:
                changes.append(("delete", "fallback", cause))
        count = len(await asyncio.to_thread(self.scope_memories, scope))
        if count > cap:
            log.error("app scope still holds %d memories over a cap of %d", count, cap)
        return CompactionOutcome(tuple(changes), count)

    async def _decide(
        self, scope: AppScope, cap: int, memories: Sequence[Memory], new: Memory
    ) -> tuple[Decision | None, Cause]:
        if self.llm is None:
            return None, "no_llm"
        try:
            answer = await asyncio.wait_for(
                self.llm.complete(
                    _prompt(cap, memories, new), temperature=0.0, timeout=self.timeout
                ),
                self.timeout,
            )
        except TimeoutError:
            return None, "llm_timeout"
        except ProviderError as exc:
            timed_out = "timed out" in str(exc)
            log.warning("app compaction LLM failed: %s", "timeout" if timed_out else "error")
            return None, "llm_timeout" if timed_out else "llm_error"
        try:
            return parse_decision(answer, memories, new, writing=self.writing), "no_llm"
        except InvalidDecisionError:
            log.warning("app compaction LLM answered an invalid decision")
            return None, "invalid_decision"

    async def _apply_decision(
        self, scope: AppScope, cap: int, decision: Decision, new: Memory
    ) -> tuple[bool | None, Cause]:
        """``(True, _)`` applied, ``(False, _)`` not needed any more, ``(None, cause)``: the
        fallback must run."""
        for attempt in range(2):
            memories = {m.id: m for m in await asyncio.to_thread(self.scope_memories, scope)}
            if len(memories) <= cap:
                return False, "no_llm"
            target = memories.get(decision.target_id)
            merged = memories.get(new.id)
            if target is None or (decision.action == "edit" and merged is None):
                return None, "invalid_decision"
            meta = {"decided_by": "llm", **self._sealed_reason(scope, target.id, decision.reason)}
            try:
                if decision.action == "delete":
                    done = await asyncio.to_thread(self._delete, scope, cap, target, meta)
                else:
                    assert merged is not None and decision.new_content is not None
                    done = await asyncio.to_thread(
                        self._merge, scope, cap, target, merged, decision.new_content, meta
                    )
                return done, "no_llm"
            except (ConflictError, StorageError) as exc:
                log.warning(
                    "app compaction write failed (attempt %d): %s", attempt + 1, type(exc).__name__
                )
        return None, "database_error"

    def _sealed_reason(self, scope: AppScope, record: str, reason: str) -> dict[str, Any]:
        record_id = f"compaction/{record}"
        key_id, sealed = self.engine.seal_value(
            reason.encode(), account_id=scope.account_id, user_id=scope.owner, record_id=record_id
        )
        return {
            "reason_sealed": {
                "record": record_id,
                "key_id": key_id,
                "ciphertext": base64.b64encode(sealed.ciphertext).decode(),
                "wrapped_key": base64.b64encode(sealed.wrapped_key).decode(),
            }
        }

    def _at_cap(self, scope: AppScope, cap: int) -> Any:
        def check(tx: Transaction, _: Sequence[Memory]) -> None:
            SqlAppTables.lock_app_scope(tx, scope.account_id, scope.app_id)
            if SqlAppTables.count_app_memories(tx, scope.account_id, scope.app_id) < cap:
                raise _BelowCap

        return check

    def _delete(self, scope: AppScope, cap: int, target: Memory, meta: dict[str, Any]) -> bool:
        try:
            self.engine.commit_batch(
                forget=[target],
                within=self._at_cap(scope, cap),
                meta={"compaction": "delete", **meta},
                actor="app-compaction",
            )
        except _BelowCap:
            return False
        return True

    def _merge(
        self,
        scope: AppScope,
        cap: int,
        target: Memory,
        merged: Memory,
        content: str,
        meta: dict[str, Any],
    ) -> bool:
        at_cap = self._at_cap(scope, cap)

        def merge_sources(tx: Transaction, written: Sequence[Memory]) -> None:
            # The target now holds the merged memory's words: it derives from its users too.
            copy_memory_sources(tx, scope.account_id, merged.lineage_id, target.lineage_id)
            at_cap(tx, written)

        try:
            self.engine.commit_batch(
                revisions=[(target, {"value": content})],
                forget=[merged],
                within=merge_sources,
                event=HistoryEventType.MERGE,
                meta={"compaction": "edit", "merged_ids": [merged.id], **meta},
                actor="app-compaction",
            )
        except _BelowCap:
            return False
        return True
