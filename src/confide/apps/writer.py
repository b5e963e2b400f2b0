"""Writing an app memory from an ended conversation: one LLM call, or an offline paragraph.

The memory is a single paragraph of 2-4 factual sentences, at most 200 characters, about
the user's preferences, decisions, problems solved and open items. Without an LLM (or when
its call fails) :func:`offline_paragraph` makes one deterministically from the user's own
sentences, so the feature works without a key.

The model's paragraph passes the semantic writing guard
(:func:`confide.conversation.writing.check_semantic`) with the prompt's own bounds, at most 4
sentences and 200 characters: the prompt asks for the user's standing preferences,
decisions and open items, facts to read later, not an account of what happened, so the
episodic guard (past tense) does not fit it. A paragraph the guard rejects is a failed
answer (:class:`ProviderError`: the offline paragraph is written instead). The offline
paragraph keeps the user's own statements, retold in the third person, and passes the same
guard.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from confide.apps.scope import MAX_MEMORY_CHARS, AppMessage, clip
from confide.conversation.writing import Outcome, Verdict, WritingTally, check_semantic
from confide.errors import ProviderError
from confide.llm.answers import unfenced
from confide.llm.base import LLM, Message
from confide.llm.offline import split_clauses
from confide.llm.third_person import (
    first_person,
    is_instruction,
    retell,
    second_person,
    strip_lead_in,
)

__all__ = [
    "MAX_MEMORY_SENTENCES",
    "MEMORY_PROMPT",
    "LLMMemoryWriter",
    "MemoryWriter",
    "check_app_memory",
    "offline_paragraph",
]

MAX_MEMORY_SENTENCES = 4
"""The most sentences an app memory's paragraph keeps (the prompt asks for 2-4)."""

MEMORY_PROMPT = (
    "You write one memory of a finished conversation between a user and an app, for the app "
    "to read the next time it works with this user. Answer with a single paragraph of 2-4 "
    f"sentences, factual, at most {MAX_MEMORY_CHARS} characters, about the user's "
    "preferences, decisions, problems solved and open items. No preamble, no list, no quotes."
)
_TRANSCRIPT_CHARS = 24_000
_MIN_WORDS = 4
"""The fewest words of an offline paragraph's sentence (``The user did.`` says nothing)."""
_SIGNALS = (
    "prefer", "like", "love", "hate", "want", "always", "never", "decid", "chose", "choose",
    "switch", "use ", "fixed", "solved", "works", "resolved", "todo", "to do", "need",
    "next", "still", "open", "later", "will", "should", "problem", "issue", "error", "bug",
)  # fmt: skip


class MemoryWriter(Protocol):
    """Turns an ended conversation into one memory paragraph."""

    async def write(self, messages: Sequence[AppMessage]) -> str:
        """The paragraph; raises :class:`ProviderError` when it cannot make one."""
        ...


def transcript(messages: Sequence[AppMessage]) -> str:
    """The conversation as ``role: content`` lines, its newest part when very long."""
    text = "\n".join(f"{m.role}: {' '.join(m.content.split())}" for m in messages)
    return text[-_TRANSCRIPT_CHARS:]


def check_app_memory(text: str) -> Verdict:
    """The writing guard of a model-written app memory (a compaction edit's content too):
    the semantic rules, at most :data:`MAX_MEMORY_SENTENCES` sentences and
    ``MAX_MEMORY_CHARS`` characters."""
    return check_semantic(text, max_sentences=MAX_MEMORY_SENTENCES, max_chars=MAX_MEMORY_CHARS)


class LLMMemoryWriter:
    """One chat-completion call with :data:`MEMORY_PROMPT`, its answer through
    :func:`check_app_memory` (counted in :attr:`writing`)."""

    def __init__(self, llm: LLM, *, timeout: float = 30.0, temperature: float = 0.2) -> None:
        self.llm = llm
        self.timeout = timeout
        self.temperature = temperature
        self.writing = WritingTally()

    async def write(self, messages: Sequence[AppMessage]) -> str:
        """Ask the model once; :class:`ProviderError` on a failure, an empty answer or one
        the writing guard rejects (naming the broken rule, never the text)."""
        prompt: list[Message] = [
            {"role": "system", "content": MEMORY_PROMPT},
            {"role": "user", "content": transcript(messages)},
        ]
        try:
            answer = await asyncio.wait_for(
                self.llm.complete(prompt, temperature=self.temperature, timeout=self.timeout),
                self.timeout,
            )
        except TimeoutError:
            raise ProviderError(f"LLM request timed out after {self.timeout:g}s") from None
        body = " ".join(unfenced(answer).split())
        if not body:
            raise ProviderError("LLM answered with an empty memory")
        verdict = self.writing.add(check_app_memory(body))
        if verdict.text is None:
            raise ProviderError(f"LLM memory broke the writing rules ({verdict.reason})")
        return clip(verdict.text)


def offline_paragraph(messages: Sequence[AppMessage]) -> str:
    """A deterministic, extractive memory of at most 200 characters that passes
    :func:`check_app_memory`, as a model's must.

    The user's statements (not questions, hypotheticals, requests, nor words to someone:
    :func:`~confide.llm.third_person.retell`), retold in the third person (``I prefer dark
    mode`` -> ``The user prefers dark mode.``); those that carry a preference, a decision, a
    solved problem or an open item come first (in the order said), then the others; whole
    sentences are kept while they fit, at most four. Without a user message, the
    assistant's sentences that speak of neither party (``I``, ``you``) are used as they are.
    """
    user = [m for m in messages if m.role == "user"]
    sentences = []
    for message in user or [m for m in messages if m.role == "assistant"]:
        for clause in split_clauses(message.content):
            told = retell(clause) if user else _impersonal(clause)
            if told is None or len(told.split()) < _MIN_WORDS:
                continue
            if check_app_memory(told).outcome is Outcome.ACCEPTED:
                sentences.append(told)
    sentences = list(dict.fromkeys(sentences))
    flagged = [s for s in sentences if any(sig in s.lower() for sig in _SIGNALS)]
    ordered = flagged + [s for s in sentences if s not in flagged]
    chosen: list[str] = []
    length = 0
    for text in ordered:
        if chosen and length + 1 + len(text) > MAX_MEMORY_CHARS:
            continue
        chosen.append(text)
        length += len(text) + (1 if len(chosen) > 1 else 0)
        if len(chosen) == MAX_MEMORY_SENTENCES:
            break
    if not chosen:
        return "The conversation ended without details to remember."
    return clip(" ".join(chosen))


def _impersonal(sentence: str) -> str | None:
    """An assistant's sentence that speaks of neither party, ending with a full stop."""
    said = strip_lead_in(sentence).rstrip("!.,;:- ").strip()
    if not said or first_person(said) or second_person(said) or is_instruction(said):
        return None
    return said + "."
