"""Insights (theory of mind): what a user's recent activity suggests about them.

:meth:`InsightWriter.run_user` is one job for one user, run off the hot path by a worker:

1. skipped when the user had an insight in the last 24 hours (a forgotten one counts), when
   no LLM is configured, when the account's daily LLM budget is nearly spent (the usage
   ledger's :meth:`~confide.llm.usage.UsageLedger.must_defer`) or when there is nothing new
   to read;
2. one model call (temperature 0, at most 220 tokens, :data:`INSIGHT_PROMPT`) reads the
   latest five *activity items* (the user's episodic memories: session and conversation
   summaries, what was discussed, decided or done), at most three *new semantic memories*
   (facts, preferences and the like stored since the last insight, within a week) and the
   last 1,000 characters of the *recent conversation* (:func:`conversation_snippet` of the
   latest messages of the chat that triggered the job, opened by the worker from the
   store; never stored elsewhere or logged);
3. the answer, ``{"insights": [{"summary", "tags", "importance"}]}``, gives 0-3 insights;
   each passes the semantic writing guard (third person, at most 280 characters) and the
   survivors are stored in one transaction as type ``insight``, category
   ``relationship_dynamic``, importance 2 (ranking gives them a low weight, see
   ``RankingWeights.w_insight``). An insight that restates one the user has (the write-time
   de-duplication policy's bands) is not stored again. An empty list stores nothing.

A failed call or a malformed answer raises :class:`~confide.errors.ProviderError` before
anything is written, so the worker may retry the job with backoff. Nothing here logs a
memory, a prompt or an answer; reports hold counts only.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from confide.conversation.writing import Outcome, check_semantic
from confide.errors import ProviderError
from confide.llm.answers import json_object
from confide.llm.base import Message
from confide.llm.usage import metered
from confide.types import Memory, MemoryFilter, MemoryState, MemoryType, Source, utcnow
from confide.workers.model_job import ModelJob

__all__ = [
    "INSIGHT_CATEGORY",
    "INSIGHT_PROMPT",
    "InsightReport",
    "InsightWriter",
    "ProposedInsight",
    "conversation_snippet",
    "parse_insights",
]

log = logging.getLogger(__name__)

INSIGHT_CATEGORY = "relationship_dynamic"
INSIGHT_IMPORTANCE = 2
MAX_ACTIVITY_ITEMS = 5
MAX_NEW_SEMANTIC = 3
MAX_CONTEXT_CHARS = 1_000
SNIPPET_MESSAGES = 10
"""The latest messages of the triggering conversation a snippet is made of."""
MAX_INSIGHTS = 3
MAX_TOKENS = 220
MAX_TAGS = 5
SKIP_WINDOW = timedelta(hours=24)
NEW_WINDOW = timedelta(days=7)
OPERATION = "insights"

SEMANTIC_TYPES: tuple[MemoryType, ...] = (
    MemoryType.FACT,
    MemoryType.PREFERENCE,
    MemoryType.FOLLOW_UP,
    MemoryType.CONTEXT,
    MemoryType.HISTORY,
    MemoryType.WELLBEING,
)
"""What counts as a semantic memory for the insight's input."""

INSIGHT_PROMPT = """\
You help a companion understand the person it talks to. From the person's recent activity, \
new facts about them and the recent conversation, infer 1 to 3 insights about the person: \
what they care about, how they feel, what they need from the companion.

Rules:
- Each insight is one or two complete sentences in the third person, naming "The user" \
(never "I", "you", "he" or "she" without a name), at most 280 characters.
- Infer only what the input supports. No advice, no repetition of a single fact.
- If nothing worth inferring, return an empty list.

Answer with one JSON object and nothing else:
{"insights": [{"summary": "...", "tags": ["..."], "importance": 1-5}]}
"""
"""The fixed system prompt of the insight call."""

_TAG = re.compile(r"[^a-z0-9_\-]+")


@dataclass(frozen=True, slots=True)
class ProposedInsight:
    """One insight as the model wrote it (text kept out of ``repr``)."""

    summary: str = field(repr=False)
    tags: tuple[str, ...] = ()
    importance: int = INSIGHT_IMPORTANCE


@dataclass(frozen=True, kw_only=True)
class InsightReport:
    """What one run did, in counts (never texts).

    ``skipped`` says why nothing was asked (``recent_insight``, ``no_llm``, ``budget``,
    ``no_input``); ``None`` when the model was asked. ``proposed`` is the number of
    insights the model gave, ``stored`` those written, ``rejected`` those the writing rules
    refused; ``first_pass`` those stored exactly as written.
    """

    account_id: str
    user_id: str
    skipped: str | None = None
    proposed: int = 0
    stored: int = 0
    rejected: int = 0
    duplicates: int = 0
    first_pass: int = 0
    memory_ids: tuple[str, ...] = ()


def _tags(raw: object) -> tuple[str, ...]:
    if not isinstance(raw, list):
        return ()
    out: list[str] = []
    for item in raw:
        if isinstance(item, str):
            tag = _TAG.sub("_", item.strip().lower()).strip("_")[:64]
            if tag and tag not in out:
                out.append(tag)
    return tuple(out[:MAX_TAGS])


def parse_insights(text: str) -> list[ProposedInsight]:
    """The model's answer as at most three :class:`ProposedInsight`.

    Tags are lower-cased snake_case (at most five); an importance outside 1-5 or missing is
    the default 2.

    Raises:
        ProviderError: the answer is not a JSON object with an ``insights`` list of objects
            each holding a ``summary`` string.
    """
    try:
        data = json_object(text)
    except ValueError as exc:
        raise ProviderError(f"insight answer {exc}") from None
    items = data.get("insights")
    if not isinstance(items, list):
        raise ProviderError("insight answer has no insights list")
    out: list[ProposedInsight] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("summary"), str):
            raise ProviderError("insight answer has an insight without a summary")
        raw = item.get("importance")
        importance = (
            raw
            if isinstance(raw, int) and not isinstance(raw, bool) and 1 <= raw <= 5
            else INSIGHT_IMPORTANCE
        )
        out.append(ProposedInsight(item["summary"], _tags(item.get("tags")), importance))
    return out[:MAX_INSIGHTS]


def _lines(memories: Sequence[Memory]) -> str:
    return "\n".join(f"- {' '.join(m.value.split())}" for m in memories) or "- (none)"


def conversation_snippet(
    messages: Iterable[tuple[str, str]], *, limit: int = MAX_CONTEXT_CHARS
) -> str:
    """``role: text`` lines of ``(role, text)`` pairs, oldest first, cut to their last
    ``limit`` characters (the newest messages kept whole, the oldest one cut at its start).
    """
    text = "\n".join(f"{role}: {' '.join(content.split())}" for role, content in messages)
    return text[-limit:] if limit > 0 else ""


def render_input(
    activity: Sequence[Memory], semantic: Sequence[Memory], recent_context: str
) -> str:
    """The user message of the insight call (the three inputs, labelled)."""
    context = " ".join(recent_context.split())[-MAX_CONTEXT_CHARS:] or "(none)"
    return (
        f"Recent activity:\n{_lines(activity)}\n\n"
        f"New facts:\n{_lines(semantic)}\n\n"
        f"Recent conversation:\n{context}"
    )


class InsightWriter(ModelJob):
    """Writes a user's insights (see the module docstring).

    Takes the parts of :class:`~confide.workers.model_job.ModelJob`: the engine, the model
    (``None``: every run is skipped, ``no_llm``), the settings, and keyword-only the usage
    ledger, the de-duplication policy and the call's timeout.
    """

    async def run_user(
        self,
        *,
        account_id: str,
        user_id: str,
        now: datetime | None = None,
        recent_context: str = "",
    ) -> InsightReport:
        """Infer and store up to three insights about one user.

        ``recent_context`` is text the caller holds in memory (the last turns of a live
        conversation); only its last 1,000 characters are read and it is never stored.

        Raises:
            ProviderError: the model failed or answered without the schema; nothing was
                written and the job may be retried.
            StorageError: the database failed; nothing was written.
        """
        when = now or utcnow()
        report = InsightReport(account_id=account_id, user_id=user_id)
        owner = MemoryFilter(account_id=account_id, user_id=user_id)
        last = await asyncio.to_thread(self._last_insight, owner)
        if last is not None and last.created_at > when - SKIP_WINDOW:
            return self._logged(replace(report, skipped="recent_insight"))
        if self.llm is None:
            return self._logged(replace(report, skipped="no_llm"))
        if await self.over_budget(account_id):
            return self._logged(replace(report, skipped="budget"))
        since = when - NEW_WINDOW if last is None else max(last.created_at, when - NEW_WINDOW)
        activity, semantic = await asyncio.to_thread(self._inputs, owner, since)
        if not activity and not semantic and not recent_context.strip():
            return self._logged(replace(report, skipped="no_input"))
        messages: list[Message] = [
            {"role": "system", "content": INSIGHT_PROMPT},
            {"role": "user", "content": render_input(activity, semantic, recent_context)},
        ]
        with metered(account_id, OPERATION, f"user:{user_id}"):
            answer = await self.llm.complete(
                messages, temperature=0.0, timeout=self.timeout, max_tokens=MAX_TOKENS
            )
        proposed = parse_insights(answer)
        kept: list[tuple[str, ProposedInsight]] = []
        first_pass = 0
        for insight in proposed:
            verdict = self.writing.add(check_semantic(insight.summary))
            if verdict.text is not None:
                kept.append((verdict.text, insight))
                first_pass += verdict.outcome is Outcome.ACCEPTED
        stored: list[Memory] = []
        if kept:
            stored = await asyncio.to_thread(self._store, account_id, user_id, kept)
        duplicates = len(kept) - len(stored)
        return self._logged(
            replace(
                report,
                proposed=len(proposed),
                stored=len(stored),
                rejected=len(proposed) - len(kept),
                duplicates=duplicates,
                first_pass=first_pass,
                memory_ids=tuple(m.id for m in stored),
            )
        )

    def _last_insight(self, owner: MemoryFilter) -> Memory | None:
        flt = owner.model_copy(
            update={
                "types": (MemoryType.INSIGHT,),
                "states": (MemoryState.ACTIVE, MemoryState.SOFT_DELETED),
            }
        )
        latest = self.engine.list_memories(flt, limit=1)
        return latest[0] if latest else None

    def _inputs(self, owner: MemoryFilter, since: datetime) -> tuple[list[Memory], list[Memory]]:
        activity = self.engine.list_memories(
            owner.model_copy(update={"types": (MemoryType.EPISODIC,)}), limit=MAX_ACTIVITY_ITEMS
        )
        semantic = self.engine.list_memories(
            owner.model_copy(update={"types": SEMANTIC_TYPES, "created_after": since}),
            limit=MAX_NEW_SEMANTIC,
        )
        return activity, semantic

    def _store(
        self, account_id: str, user_id: str, kept: Sequence[tuple[str, ProposedInsight]]
    ) -> list[Memory]:
        flt = MemoryFilter(account_id=account_id, user_id=user_id, types=(MemoryType.INSIGHT,))
        taken = {m.key for m in self.engine.list_memories(flt, limit=10_000)}
        new: list[dict[str, Any]] = []
        number = 1
        for text, insight in kept:
            twin = self.dedup.find_duplicate(
                self.engine,
                account_id=account_id,
                user_id=user_id,
                key="insight",
                value=text,
                memory_type=MemoryType.INSIGHT,
            )
            if twin is not None or any(n["value"] == text for n in new):
                continue
            while f"insight.{number}" in taken:
                number += 1
            taken.add(f"insight.{number}")
            new.append(
                {
                    "account_id": account_id,
                    "user_id": user_id,
                    "key": f"insight.{number}",
                    "value": text,
                    "type": MemoryType.INSIGHT,
                    "category": INSIGHT_CATEGORY,
                    "importance": INSIGHT_IMPORTANCE,
                    "source": Source.INSIGHT,
                    "confidence": 0.6,
                    "tags": insight.tags,
                    "metadata": {"model_importance": insight.importance},
                }
            )
        return self.engine.commit_batch(new=new, actor="insights") if new else []

    @staticmethod
    def _logged(report: InsightReport) -> InsightReport:
        log.info(
            "insights: skipped=%s proposed=%d stored=%d rejected=%d duplicates=%d",
            report.skipped or "no",
            report.proposed,
            report.stored,
            report.rejected,
            report.duplicates,
        )
        return report
