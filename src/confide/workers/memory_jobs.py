"""The memory jobs a worker runs: consolidation, insights and the multi-fact pass.

Each handler reads ids from its job's payload (never text), builds the job's object over the
engine and runs it to the end in the worker's thread. A model failure raises
:class:`~confide.errors.ProviderError` before anything is written, so the worker retries the
job with backoff and the data stays as it was. Without a model, consolidation uses the
offline same-fact judge, the multi-fact pass the offline extractor
(:class:`~confide.workers.multifact_trigger.MultiFactTrigger` decides which messages get it),
and insights are not enqueued at all (:func:`enqueue_insights` checks).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

from confide.chat.messages import MessageStore
from confide.conversation.dedup import DedupPolicy
from confide.embedders.base import Embedder
from confide.engine import MemoryEngine
from confide.errors import NotFoundError
from confide.llm.base import LLM
from confide.llm.usage import UsageLedger
from confide.types import MemoryFilter
from confide.workers.consolidation import Consolidator
from confide.workers.insights import SNIPPET_MESSAGES, InsightWriter, conversation_snippet
from confide.workers.judges import judge_from_settings
from confide.workers.multifact_trigger import MULTIFACT, MultiFactTrigger, enqueue_multifact
from confide.workers.queue import enqueue
from confide.workers.worker import JobContext, Worker

__all__ = [
    "MemoryJobs",
    "call_snippet",
    "enqueue_insights",
    "enqueue_multifact",
    "recent_snippet",
]

INSIGHTS = "insights"
CONSOLIDATION = "consolidation"


@dataclass(frozen=True, slots=True)
class MemoryJobs:
    """The parts the memory jobs need beyond the engine: the embedder (the offline judge and
    de-duplication), the metered model (``None``: no model configured) and its ledger."""

    embedder: Embedder | None = None
    llm: LLM | None = None
    ledger: UsageLedger | None = None

    def register(self, worker: Worker) -> None:
        """Register ``consolidation`` (always: offline judge without a model),
        ``multifact`` (always: the offline extractor without a model) and ``insights`` (it
        skips when no model is configured)."""
        worker.register(CONSOLIDATION, self.consolidate, uses_llm=self.llm is not None)
        worker.register(INSIGHTS, self.insights, uses_llm=True)
        worker.register(MULTIFACT, self.multifact, uses_llm=self.llm is not None)

    def consolidate(self, ctx: JobContext) -> int:
        """Consolidate every user of the job's account; returns the merges made."""
        account_id = _text(ctx, "account_id") or ctx.job.account_id
        if account_id is None:
            return 0
        judge = judge_from_settings(
            ctx.settings, embedder=self.embedder, llm=self.llm, ledger=self.ledger
        )
        consolidator = Consolidator(ctx.engine, judge, ctx.settings)
        reports = asyncio.run(consolidator.run_account(account_id, now=_when(ctx)))
        return sum(r.merges for r in reports)

    def insights(self, ctx: JobContext) -> int:
        """Write the user's insights (1-3, or none); returns how many were stored.

        A job naming the conversation that queued it gives the model a snippet of that
        conversation's latest messages, opened here from the store (the payload holds ids
        only) and never logged; one naming a voice call, whose turns were never stored, gives
        it what the call left: the memories written from it (:func:`call_snippet`).
        """
        account_id, user_id = ctx.job.account_id, _text(ctx, "user_id")
        if account_id is None or user_id is None:
            return 0
        conversation_id = _text(ctx, "conversation_id")
        session_id = _text(ctx, "session_id")
        snippet = ""
        if conversation_id is not None:
            snippet = recent_snippet(
                ctx.engine, account_id=account_id, user_id=user_id, conversation_id=conversation_id
            )
        elif session_id is not None:
            snippet = call_snippet(
                ctx.engine, account_id=account_id, user_id=user_id, session_id=session_id
            )
        writer = InsightWriter(ctx.engine, self.llm, ctx.settings, ledger=self.ledger)
        report = asyncio.run(
            writer.run_user(
                account_id=account_id, user_id=user_id, now=_when(ctx), recent_context=snippet
            )
        )
        return report.stored

    def multifact(self, ctx: JobContext) -> int:
        """Run the multi-fact pass over one saved chat message (the model's, or the offline
        extractor's without one); returns the writes."""
        account_id, user_id = ctx.job.account_id, _text(ctx, "user_id")
        conversation_id, index = _text(ctx, "conversation_id"), ctx.payload.get("index")
        if account_id is None or user_id is None or conversation_id is None:
            return 0
        if not isinstance(index, int):
            return 0
        dedup = DedupPolicy(
            text_threshold=ctx.settings.dedup_text_threshold,
            cosine_threshold=ctx.settings.dedup_cosine_threshold,
            embedder=self.embedder,
        )
        trigger = MultiFactTrigger(
            ctx.engine, self.llm, ctx.settings, dedup=dedup, ledger=self.ledger
        )
        report = asyncio.run(
            trigger.run_message(
                account_id=account_id,
                user_id=user_id,
                conversation_id=conversation_id,
                index=index,
                now=_when(ctx),
            )
        )
        return report.stored


def recent_snippet(
    engine: MemoryEngine, *, account_id: str, user_id: str, conversation_id: str
) -> str:
    """The snippet of the conversation's latest messages an insights run reads
    (:func:`~confide.workers.insights.conversation_snippet`); ``""`` when the conversation
    holds none of the user's (another user's, or gone)."""
    try:
        messages = MessageStore(engine).recent(
            account_id=account_id,
            user_id=user_id,
            conversation_id=conversation_id,
            limit=SNIPPET_MESSAGES,
        )
    except NotFoundError:
        return ""
    return conversation_snippet((m.role, m.content) for m in messages)


CALL_SNIPPET_MEMORIES = 200
"""How many of the user's newest memories :func:`call_snippet` looks through."""


def call_snippet(engine: MemoryEngine, *, account_id: str, user_id: str, session_id: str) -> str:
    """The snippet of an ended voice call an insights run reads: its turns lived only in
    the call's buffer, so what stands for them is the memories written from the call (those
    whose ``metadata.session_id`` names it), oldest first, as ``call: <value>`` lines."""
    newest = engine.list_memories(
        MemoryFilter(account_id=account_id, user_id=user_id), limit=CALL_SNIPPET_MEMORIES
    )
    written = [m for m in newest if m.metadata.get("session_id") == session_id]
    written.sort(key=lambda m: m.created_at)
    return conversation_snippet(("call", m.value) for m in written)


def enqueue_insights(
    engine: MemoryEngine,
    llm: LLM | None,
    *,
    account_id: str,
    user_id: str,
    conversation_id: str | None = None,
    session_id: str | None = None,
) -> str | None:
    """Queue an insights run for the user (once a day per user); nothing without a model.

    ``conversation_id`` names the chat that triggered it: the run reads a snippet of its
    latest messages from the store; ``session_id`` the voice call, whose memories stand for
    its turns (ids only in the payload, never text).
    """
    if llm is None:
        return None
    payload = {"user_id": user_id}
    if conversation_id is not None:
        payload["conversation_id"] = conversation_id
    elif session_id is not None:
        payload["session_id"] = session_id
    return enqueue(
        engine,
        INSIGHTS,
        account_id=account_id,
        payload=payload,
        dedupe_key=f"{INSIGHTS}:{account_id}:{user_id}:{_day()}",
    )


def _text(ctx: JobContext, name: str) -> str | None:
    value = ctx.payload.get(name)
    return value if isinstance(value, str) and value else None


def _when(ctx: JobContext) -> datetime:
    return datetime.fromtimestamp(ctx.now, UTC)


def _day() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")
