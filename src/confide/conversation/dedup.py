"""Write-time de-duplication: a new memory nearly identical to an active one is not stored twice.

Two tests, either is enough:

* normalised text: lower-cased, punctuation dropped, whitespace collapsed; the similarity
  (difflib's ratio) of ``"key words: value"`` must reach ``text_threshold``;
* meaning, when an embedder is configured: the cosine of the two ``key: value`` embeddings
  must reach ``cosine_threshold``.

A memory of another type never counts as a duplicate unless the keys match too, and two
values that differ in what makes a fact this fact are never duplicates, however similar they
read or mean (:func:`distinct_facts`): a number (``1`` / ``0``, ``two`` / ``three``), a day,
month or date word (``Monday`` / ``Tuesday``), a capitalised name (``Sam`` / ``Alex``) or a
negation (``likes`` / ``doesn't like``).

:meth:`DedupPolicy.find_duplicate` asks the indexes for the few nearest active memories
(blind BM25 and, with an embedder, the vector index) instead of scanning the user's whole
memory, so the check costs the same at 10 memories as at 100,000.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal, Protocol

import numpy as np

from confide.conversation.analysis import NOT_NAMES
from confide.engine import MemoryEngine
from confide.index.memory_text import index_text
from confide.index.tokenize import terms
from confide.llm.candidates import Candidate
from confide.llm.key_vocabulary import family, to_vocabulary
from confide.types import Memory, MemoryFilter, MemoryType, utcnow

__all__ = ["DedupPolicy", "Duplicate", "TextEmbedder", "distinct_facts", "normalise"]

_NON_WORD = re.compile(r"[^\w\s]+")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_TOKEN = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_NUMBER_WORDS = _words(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
    "eighty ninety hundred thousand million billion first second third fourth fifth sixth "
    "seventh eighth ninth tenth once twice half dozen"
)
_DATE_WORDS = _words(
    "monday tuesday wednesday thursday friday saturday sunday january february march april "
    "june july august september october november december jan feb mar apr jun jul aug "
    "sep sept oct nov dec today tonight tomorrow yesterday weekend weekday morning afternoon "
    "evening night noon midnight spring summer autumn winter"
)
_NEGATIONS = _words(
    "not no never none nobody nothing nowhere neither nor without cannot dont doesnt didnt "
    "isnt arent wasnt werent wont cant couldnt shouldnt wouldnt hasnt havent hadnt"
)


class TextEmbedder(Protocol):
    """The part of :class:`confide.retrieval.Embedder` the policy needs."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised vectors, one row per text."""
        ...


def normalise(text: str) -> str:
    """Lower-case, drop punctuation, turn ``_`` into spaces and collapse whitespace."""
    return " ".join(_NON_WORD.sub(" ", text.replace("_", " ").lower()).split())


def _markers(value: str) -> tuple[frozenset[str], frozenset[str], int]:
    """What distinguishes one fact from a near twin: its capitalised words (``names``, which a
    lower-case spelling of the same word in the other text still matches), its number and
    date words, and how many negations it has."""
    names: set[str] = set()
    fixed: set[str] = set()
    negations = 0
    for match in _TOKEN.finditer(value):
        word = match.group(0)
        low = word.lower().replace("\u2019", "'")
        if low.endswith("n't") or low.replace("'", "") in _NEGATIONS:
            negations += 1
        elif any(c.isdigit() for c in low) or low in _NUMBER_WORDS or low in _DATE_WORDS:
            fixed.add(low)
        elif word[0].isupper() and low not in NOT_NAMES:
            names.add(low)
    return frozenset(names), frozenset(fixed), negations


def distinct_facts(a: str, b: str) -> bool:
    """Whether two values state different facts whatever their similarity: they differ in a
    number, a day, month or other date word, a capitalised name, or a negation.

    A name counts when it is capitalised in either text and missing (in any case) from the
    other, so ``"ali likes tea"`` and ``"Ali likes tea."`` stay duplicates.
    """
    names_a, fixed_a, negations_a = _markers(a)
    names_b, fixed_b, negations_b = _markers(b)
    if fixed_a != fixed_b or negations_a != negations_b:
        return True
    words_a = {m.group(0).lower() for m in _TOKEN.finditer(a)}
    words_b = {m.group(0).lower() for m in _TOKEN.finditer(b)}
    return not (names_a <= words_b and names_b <= words_a)


def _text(key: str, value: str) -> str:
    # Compared by key family: "likes.2: gardening" is "like_gardening: gardening" said again
    # (extraction keys come from a fixed vocabulary, others may not).
    keyed = to_vocabulary(Candidate(type=MemoryType.FACT, key=key, value=value), ())
    return f"{normalise(family(keyed.key)[0])}: {normalise(keyed.value)}"


@dataclass(frozen=True, slots=True)
class Duplicate:
    """The active memory a new one duplicates, and the similarity that decided it: the
    normalised-text ratio (``by="text"``, 1.0 for the same text) or the embedding cosine
    (``by="cosine"``)."""

    memory: Memory
    similarity: float
    by: Literal["text", "cosine"]


@dataclass(frozen=True, kw_only=True)
class DedupPolicy:
    """Decides whether a new memory duplicates one of the user's active memories.

    Args:
        text_threshold: minimum normalised-text similarity (0..1) of ``key: value``.
        cosine_threshold: minimum embedding cosine, used only with an ``embedder``.
        embedder: optional; without one only the text test runs.
    """

    text_threshold: float = 0.92
    cosine_threshold: float = 0.95
    embedder: TextEmbedder | None = None

    neighbours: int = 8

    def find_duplicate(
        self,
        engine: MemoryEngine,
        *,
        account_id: str,
        user_id: str,
        key: str,
        value: str,
        memory_type: MemoryType,
    ) -> Duplicate | None:
        """The user's active memory that the new one duplicates, found through the indexes,
        with the similarity that decided it; ``None`` when there is none."""
        flt = MemoryFilter(account_id=account_id, user_id=user_id)
        index = engine.search_index
        ids: dict[str, float | None] = {}
        tokens = engine.blind_terms(account_id, terms(f"{key.replace('_', ' ')} {value}"))
        for hit in index.lexical_search(flt, tokens, self.neighbours, k1=1.2, b=0.75):
            ids[hit.memory_id] = None
        if self.embedder is not None:
            # The indexer embeds this same text when the memory is stored: one embedding.
            vector = self.embedder.embed([index_text(value, when=utcnow())])[0]
            for hit in index.vector_search(flt, vector, self.neighbours):
                ids[hit.memory_id] = hit.score
        if not ids:
            return None
        nearby = engine.open_rows(engine.rows_in_filter(flt, list(ids)))
        twin = self.duplicate_of(
            key=key, value=value, memory_type=memory_type, existing=nearby, use_embedder=False
        )
        if twin is not None or self.embedder is None:
            return twin
        close = [
            m
            for m in nearby
            if (ids.get(m.id) or 0.0) >= self.cosine_threshold
            and (m.type == memory_type or m.key.lower() == key.lower())
            and not distinct_facts(value, m.value)
        ]
        best = max(close, key=lambda m: ids.get(m.id) or 0.0, default=None)
        return (
            None if best is None else Duplicate(best, _rounded(ids.get(best.id) or 0.0), "cosine")
        )

    def duplicate_of(
        self,
        *,
        key: str,
        value: str,
        memory_type: MemoryType,
        existing: Sequence[Memory],
        use_embedder: bool = True,
    ) -> Duplicate | None:
        """The memory among ``existing`` that the new one duplicates, with the similarity
        that decided it; ``None`` when there is none."""
        candidates = [
            m
            for m in existing
            if (m.type == memory_type or m.key.lower() == key.lower())
            and not distinct_facts(value, m.value)
        ]
        if not candidates:
            return None
        new_text = _text(key, value)
        for memory in candidates:
            old_text = _text(memory.key, memory.value)
            if new_text == old_text:
                return Duplicate(memory, 1.0, "text")
            ratio = SequenceMatcher(None, new_text, old_text).ratio()
            if ratio >= self.text_threshold:
                return Duplicate(memory, _rounded(ratio), "text")
        if self.embedder is None or not use_embedder:
            return None
        vectors = self.embedder.embed([new_text, *(_text(m.key, m.value) for m in candidates)])
        scores = np.asarray(vectors[1:]) @ np.asarray(vectors[0])
        best = int(np.argmax(scores))
        score = float(scores[best])
        if score < self.cosine_threshold:
            return None
        return Duplicate(candidates[best], _rounded(score), "cosine")


def _rounded(similarity: float) -> float:
    # Four places, like the strengths of relation edges: enough to read, no float noise.
    return round(float(similarity), 4)
