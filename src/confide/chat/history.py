"""A conversation's history for a chat model: recent messages plus memory as context.

The window is the conversation's newest ``window`` (20) messages; given a channel, only
that channel's messages (and those saved without one), so a conversation held over several
channels shows each its own thread, and every channel's only when no channel is named.

Tiers, each run on its own so one that fails (logged with counts, never values) leaves
the others' answer intact:

- **long-term**: keyword (blind BM25) search over the user's important memories
  (importance >= 3; summary chunks have their own tier), at most 5, as one system message
  ``Relevant context from past interactions:`` with ``- `` bullets;
- **summaries**: the rolling summaries' chunks (same user and subject) most similar to the
  input, at most 3 at cosine >= ``summary_min`` (``CONFIDE_HISTORY_SUMMARY_MIN_COSINE``,
  chosen on LoCoMo by ``bench/summary_threshold.py``), as one system message
  ``Summaries of earlier conversations:`` (needs an embedder);
- **semantic**: the user's other memories whose cosine similarity to the input is >= 0.8,
  at most 3, as one system message ``Similar past interactions that may be relevant:``
  (needs an embedder);
- **subject facts**: when the conversation is about a subject, the user's facts of it and
  everyone's shared ones (``Known facts about {name} from conversations:``).

:meth:`HistoryBuilder.tiers` gives the same findings in the older three-tier form
(:class:`~confide.chat.types.MemoryContext`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from confide.chat.facts import FACT_MEMORY_CATEGORY, SubjectFacts, facts_section
from confide.chat.messages import MessageStore
from confide.chat.types import (
    ChatMessage,
    ContextItem,
    ContextMessage,
    ConversationHistory,
    HistoryMetadata,
    MemoryContext,
    SubjectFact,
)
from confide.conversation.procedural import in_default_context
from confide.embedders.base import Embedder, Vector
from confide.engine.ops import OpsSink
from confide.index.tokenize import terms
from confide.retrieval.bm25 import BM25Params
from confide.retrieval.ports import MemoryReader
from confide.storage.base import ScoredId
from confide.types import Memory, MemoryFilter, category_filter

__all__ = [
    "CHUNK_CATEGORY",
    "LONG_TERM_HEADER",
    "SEMANTIC_HEADER",
    "SUMMARY_HEADER",
    "Found",
    "HistoryBuilder",
    "Tiers",
]

log = logging.getLogger(__name__)

CHUNK_CATEGORY = "conversation_summary"
LONG_TERM_HEADER = "Relevant context from past interactions:"
SEMANTIC_HEADER = "Similar past interactions that may be relevant:"
SUMMARY_HEADER = "Summaries of earlier conversations:"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Found:
    """A memory a tier found, with its cosine to the input (``None``: found by keyword)."""

    memory: Memory
    score: float | None = None


@dataclass(frozen=True, slots=True)
class Tiers:
    """What each tier found for one input (``None``: the tier failed, or did not run)."""

    recent: list[ChatMessage]
    subject: str | None
    long_term: list[Found] | None
    summaries: list[Found] | None
    semantic: list[Found] | None
    facts: list[SubjectFact] | None


class HistoryBuilder:
    """Builds :class:`ConversationHistory` from the message store and the memory reader."""

    long_term_limit = 5
    long_term_importance = 3
    semantic_limit = 3
    semantic_min = 0.8
    summary_limit = 3

    def __init__(
        self,
        reader: MemoryReader,
        messages: MessageStore,
        facts: SubjectFacts,
        *,
        embedder: Embedder | None,
        window: int,
        summary_min: float = 0.15,
        ops: OpsSink | None = None,
    ) -> None:
        self.reader = reader
        self.ops = ops
        self.messages = messages
        self.facts = facts
        self.embedder = embedder
        self.window = window
        self.summary_min = summary_min
        self.bm25 = BM25Params()

    def build(
        self,
        text: str,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        channel: str | None = None,
        categories: Sequence[str] | None = None,
    ) -> ConversationHistory:
        """The history of one conversation for the input ``text``.

        ``categories`` are the memory categories the reading agent may see (its allowlist,
        resolved by the caller); ``None`` reads every category.

        ``channel`` (where the reply goes) picks the window: that channel's messages and
        those saved without one; ``None`` spans every channel. It also picks the channel's
        guidelines in the static prompt (:func:`confide.chat.prompt.build_static_prompt`).
        Raises :class:`~confide.errors.NotFoundError` for another user's conversation.
        """
        found = self.gather(
            text,
            account_id=account_id,
            user_id=user_id,
            conversation_id=conversation_id,
            channel=channel,
            categories=categories,
        )
        recent = found.recent
        context: list[ContextMessage] = []
        if found.long_term:
            context.append(_bullets(LONG_TERM_HEADER, found.long_term))
        if found.summaries:
            context.append(_bullets(SUMMARY_HEADER, found.summaries))
        if found.semantic:
            context.append(_bullets(SEMANTIC_HEADER, found.semantic))
        if found.subject is not None and found.facts:
            section = facts_section(found.subject, found.facts, user_id=user_id)
            if section:
                context.append(ContextMessage(content=section))
        return ConversationHistory(
            messages=[_message(m) for m in recent],
            context_messages=context,
            metadata=HistoryMetadata(
                conversation_id=conversation_id,
                message_count=len(recent),
                oldest_message_timestamp=recent[0].timestamp if recent else None,
                newest_message_timestamp=recent[-1].timestamp if recent else None,
                has_long_term_context=bool(found.long_term),
                has_semantic_context=bool(found.semantic),
                has_summary_context=bool(found.summaries),
            ),
        )

    def tiers(
        self,
        text: str,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        channel: str | None = None,
        categories: Sequence[str] | None = None,
    ) -> MemoryContext:
        """The same findings as :meth:`build`, in the older three-tier form.

        ``short_term``: the window's messages; ``long_term``: the summary chunks, the
        keyword tier's important memories and the subject's facts; ``semantic``: the
        memories found by similarity. Raises as :meth:`build`.
        """
        found = self.gather(
            text,
            account_id=account_id,
            user_id=user_id,
            conversation_id=conversation_id,
            channel=channel,
            categories=categories,
        )
        long_term = [_item("summary", f) for f in found.summaries or ()]
        long_term += [_item("memory", f) for f in found.long_term or ()]
        long_term += [
            ContextItem(
                id=fact.id,
                kind="fact",
                content=fact.content,
                category=FACT_MEMORY_CATEGORY,
                created_at=fact.created_at,
            )
            for fact in found.facts or ()
        ]
        return MemoryContext(
            short_term=[_message(m) for m in found.recent],
            long_term=long_term,
            semantic=[_item("memory", f) for f in found.semantic or ()],
        )

    def gather(
        self,
        text: str,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        channel: str | None = None,
        categories: Sequence[str] | None = None,
    ) -> Tiers:
        """Run every tier for ``text`` (see :meth:`build` for the arguments)."""
        recent = self.messages.recent(
            account_id=account_id,
            user_id=user_id,
            conversation_id=conversation_id,
            limit=self.window,
            channel=channel,
        )
        subject = next((m.subject_id for m in reversed(recent) if m.subject_id), None)
        long_term = _tier(
            "long-term",
            lambda: self.long_term(
                text, account_id=account_id, user_id=user_id, categories=categories
            ),
        )
        summaries = _tier(
            "summaries",
            lambda: self.summaries(
                text,
                account_id=account_id,
                user_id=user_id,
                subject=subject,
                categories=categories,
            ),
        )
        semantic = _tier(
            "semantic",
            lambda: self.semantic(
                text, account_id=account_id, user_id=user_id, categories=categories
            ),
        )
        if semantic is not None:
            shown = {f.memory.id for f in long_term or ()}
            semantic = [f for f in semantic if f.memory.id not in shown]
        facts = None
        if subject is not None and (categories is None or FACT_MEMORY_CATEGORY in categories):
            facts = _tier(
                "facts",
                lambda: self.facts.visible(
                    account_id=account_id, user_id=user_id, subject_id=subject
                ),
            )
        if self.ops is not None:
            count = len(long_term or ()) + len(summaries or ()) + len(semantic or ())
            self.ops.emit_op(
                "context",
                "search",
                account_id=account_id,
                user_id=user_id,
                status="ok" if count else "empty",
            )
        return Tiers(recent, subject, long_term, summaries, semantic, facts)

    def long_term(
        self,
        text: str,
        *,
        account_id: str,
        user_id: str,
        categories: Sequence[str] | None = None,
    ) -> list[Found]:
        """The user's important memories that share words with ``text``, best first (of
        ``categories`` only, when given)."""
        tokens = self.reader.blind_terms(account_id, terms(text))
        if not tokens:
            return []
        flt = MemoryFilter(
            account_id=account_id,
            user_id=user_id,
            importance_min=self.long_term_importance,
            categories=category_filter(categories),
        )
        hits = self.reader.search_index.lexical_search(
            flt, tokens, 2 * self.long_term_limit, k1=self.bm25.k1, b=self.bm25.b
        )
        found = [
            Found(m)
            for m, _ in self._open(flt, hits)
            if m.category != CHUNK_CATEGORY and in_default_context(m)
        ]
        return found[: self.long_term_limit]

    def summaries(
        self,
        text: str,
        *,
        account_id: str,
        user_id: str,
        subject: str | None,
        categories: Sequence[str] | None = None,
        minimum: float | None = None,
        limit: int | None = None,
    ) -> list[Found]:
        """The summary chunks of the user's conversations about ``subject`` (``None``: of
        those about no subject) most similar to ``text``: at most :attr:`summary_limit`, at
        cosine >= :attr:`summary_min` (``minimum`` and ``limit`` replace them); none when
        ``categories`` leaves the chunks' category out."""
        if self.embedder is None:
            return []
        if categories is not None and CHUNK_CATEGORY not in categories:
            return []
        floor = self.summary_min if minimum is None else minimum
        count = self.summary_limit if limit is None else limit
        vector: Vector = self.embedder.embed_one(text)
        flt = MemoryFilter(
            account_id=account_id,
            user_id=user_id,
            subject_id=subject,
            categories=(CHUNK_CATEGORY,),
        )
        # A conversation about no subject cannot filter on that in the index: look deeper.
        hits = self.reader.search_index.vector_search(
            flt, vector, (4 if subject is not None else 8) * count
        )
        close = [h for h in hits if h.score >= floor]
        found = [
            Found(m, score)
            for m, score in self._open(flt, close)
            if m.subject_id == subject and in_default_context(m)
        ]
        return found[:count]

    def semantic(
        self,
        text: str,
        *,
        account_id: str,
        user_id: str,
        categories: Sequence[str] | None = None,
    ) -> list[Found]:
        """The user's memories at least :attr:`semantic_min` similar (of ``categories``
        only, when given); summary chunks and subject facts have tiers of their own."""
        if self.embedder is None:
            return []
        vector: Vector = self.embedder.embed_one(text)
        flt = MemoryFilter(
            account_id=account_id,
            user_id=user_id,
            categories=category_filter(categories),
        )
        hits = self.reader.search_index.vector_search(flt, vector, 4 * self.semantic_limit)
        close = [h for h in hits if h.score >= self.semantic_min]
        found = [
            Found(m, score)
            for m, score in self._open(flt, close)
            if m.category not in (FACT_MEMORY_CATEGORY, CHUNK_CATEGORY) and in_default_context(m)
        ]
        return found[: self.semantic_limit]

    def _open(self, flt: MemoryFilter, hits: Sequence[ScoredId]) -> list[tuple[Memory, float]]:
        """The hits' memories and scores in the hits' order (rows that fail authentication
        left out)."""
        rows = {h.memory_id: h.row for h in hits if h.row is not None}
        missing = [h.memory_id for h in hits if h.row is None]
        if missing:
            rows.update({r.id: r for r in self.reader.rows_in_filter(flt, missing)})
        out = []
        for hit in hits:
            row = rows.get(hit.memory_id)
            if row is None:
                continue
            contents = self.reader.try_open_contents(row)
            if contents is not None:
                out.append((self.reader.memory_of(row, contents), hit.score))
        return out


def _tier(name: str, run: Callable[[], T]) -> T | None:
    try:
        return run()
    except Exception as exc:  # one tier failing must not take the history down
        log.warning("history tier %s failed: %s", name, type(exc).__name__)
        return None


def _bullets(header: str, found: Sequence[Found]) -> ContextMessage:
    lines = [header, *(f"- {' '.join(f.memory.value.split())}" for f in found)]
    return ContextMessage(content="\n".join(lines))


def _item(kind: Literal["memory", "summary"], found: Found) -> ContextItem:
    m = found.memory
    return ContextItem(
        id=m.id,
        kind=kind,
        content=" ".join(m.value.split()),
        category=m.category,
        created_at=m.created_at,
        score=None if found.score is None else round(found.score, 4),
    )


def _message(m: ChatMessage) -> dict[str, str]:
    return {"role": m.role, "content": m.content, "timestamp": m.timestamp.isoformat()}
