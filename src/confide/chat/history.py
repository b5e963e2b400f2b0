"""A conversation's history for a chat model: recent messages plus memory as context.

Tiers, each run on its own so one that fails (logged with counts, never values) leaves
the others' answer intact:

- **long-term**: keyword (blind BM25) search over the user's important memories
  (importance >= 3; summary chunks are left to the semantic tier), at most 5, as one
  system message ``Relevant context from past interactions:`` with ``- `` bullets;
- **semantic**: conversation chunks of the same user and subject and the user's memories
  whose cosine similarity to the input is >= 0.8, at most 3, as one system message
  ``Similar past interactions that may be relevant:`` (needs an embedder);
- **subject facts**: when the conversation is about a subject, the user's facts of it and
  everyone's shared ones (``Known facts about {name} from conversations:``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from confide.chat.facts import FACT_MEMORY_CATEGORY, SubjectFacts, facts_section
from confide.chat.messages import MessageStore
from confide.chat.types import ChatMessage, ContextMessage, ConversationHistory, HistoryMetadata
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
    "HistoryBuilder",
]

log = logging.getLogger(__name__)

CHUNK_CATEGORY = "conversation_summary"
LONG_TERM_HEADER = "Relevant context from past interactions:"
SEMANTIC_HEADER = "Similar past interactions that may be relevant:"
T = TypeVar("T")


class HistoryBuilder:
    """Builds :class:`ConversationHistory` from the message store and the memory reader."""

    long_term_limit = 5
    long_term_importance = 3
    semantic_limit = 3
    semantic_min = 0.8

    def __init__(
        self,
        reader: MemoryReader,
        messages: MessageStore,
        facts: SubjectFacts,
        *,
        embedder: Embedder | None,
        window: int,
        ops: OpsSink | None = None,
    ) -> None:
        self.reader = reader
        self.ops = ops
        self.messages = messages
        self.facts = facts
        self.embedder = embedder
        self.window = window
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

        The window spans every channel of the conversation; ``channel`` (where the reply
        goes) is accepted for callers that pass it through, and picks the channel's
        guidelines in the static prompt (:func:`confide.chat.prompt.build_static_prompt`).
        Raises :class:`~confide.errors.NotFoundError` for another user's conversation.
        """
        recent = self.messages.recent(
            account_id=account_id,
            user_id=user_id,
            conversation_id=conversation_id,
            limit=self.window,
        )
        subject = next((m.subject_id for m in reversed(recent) if m.subject_id), None)
        context: list[ContextMessage] = []
        long_term = _tier(
            "long-term",
            lambda: self.long_term(
                text, account_id=account_id, user_id=user_id, categories=categories
            ),
        )
        shown = {m.id for m in long_term or ()}
        semantic = _tier(
            "semantic",
            lambda: self.semantic(
                text,
                account_id=account_id,
                user_id=user_id,
                subject=subject,
                categories=categories,
            ),
        )
        semantic = [m for m in semantic or () if m.id not in shown]
        if self.ops is not None:
            found = len(long_term or ()) + len(semantic)
            self.ops.emit_op(
                "context",
                "search",
                account_id=account_id,
                user_id=user_id,
                status="ok" if found else "empty",
            )
        if long_term:
            context.append(_bullets(LONG_TERM_HEADER, long_term))
        if semantic:
            context.append(_bullets(SEMANTIC_HEADER, semantic))
        if subject is not None and (categories is None or FACT_MEMORY_CATEGORY in categories):
            section = _tier(
                "facts",
                lambda: facts_section(
                    subject,
                    self.facts.visible(account_id=account_id, user_id=user_id, subject_id=subject),
                    user_id=user_id,
                ),
            )
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
                has_long_term_context=bool(long_term),
                has_semantic_context=bool(semantic),
            ),
        )

    def long_term(
        self,
        text: str,
        *,
        account_id: str,
        user_id: str,
        categories: Sequence[str] | None = None,
    ) -> list[Memory]:
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
            m
            for m in self._open(flt, hits)
            if m.category != CHUNK_CATEGORY and in_default_context(m)
        ]
        return found[: self.long_term_limit]

    def semantic(
        self,
        text: str,
        *,
        account_id: str,
        user_id: str,
        subject: str | None,
        categories: Sequence[str] | None = None,
    ) -> list[Memory]:
        """Chunks (same subject) and memories at least :attr:`semantic_min` similar (of
        ``categories`` only, when given)."""
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
            m
            for m in self._open(flt, close)
            if m.category != FACT_MEMORY_CATEGORY
            and in_default_context(m)
            and (m.category != CHUNK_CATEGORY or m.subject_id == subject)
        ]
        return found[: self.semantic_limit]

    def _open(self, flt: MemoryFilter, hits: Sequence[ScoredId]) -> list[Memory]:
        """The hits' memories in the hits' order (rows that fail authentication left out)."""
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
                out.append(self.reader.memory_of(row, contents))
        return out


def _tier(name: str, run: Callable[[], T]) -> T | None:
    try:
        return run()
    except Exception as exc:  # one tier failing must not take the history down
        log.warning("history tier %s failed: %s", name, type(exc).__name__)
        return None


def _bullets(header: str, memories: Sequence[Memory]) -> ContextMessage:
    lines = [header, *(f"- {' '.join(m.value.split())}" for m in memories)]
    return ContextMessage(content="\n".join(lines))


def _message(m: ChatMessage) -> dict[str, str]:
    return {"role": m.role, "content": m.content, "timestamp": m.timestamp.isoformat()}
