"""Procedural memories: how the user wants something done, as numbered imperative steps.

A procedural memory is made only from a procedure (at least two steps, each an instruction,
one numbered line each: ``1. Boil the water.`` then ``2. Steep the tea for four minutes.``)
and only on an explicit request or a high-confidence detection:

* **explicit request**: the user's own words ask for it to be kept (:func:`is_explicit_request`:
  "remember how ...", "save these steps", "here's how ...", "step by step"); a write through
  the API is explicit too;
* **high-confidence detection**: the writer (the agent's tool call or the extractor) gives a
  confidence of at least ``CONFIDE_PROCEDURAL_MIN_CONFIDENCE`` (0.9).

Anything else typed ``procedural`` (a single habit, "speak slower", a routine said in
passing) is how the user likes things done, not a procedure: :class:`ProceduralGate` keeps it
as a ``preference``, so it still reaches the agent's default context. Procedural memories
never do: they are fetched only with ``categories: ["procedural"]`` (the shipped categories
file gives them ``context: explicit``), and instructions and chat context leave them out
(:func:`in_default_context`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from confide.types import Memory, MemoryType

__all__ = [
    "PROCEDURAL_CATEGORY",
    "ProceduralGate",
    "in_default_context",
    "is_explicit_request",
    "numbered_steps",
]

PROCEDURAL_CATEGORY = MemoryType.PROCEDURAL.value
MAX_STEPS = 12
_MAX_STEP_CHARS = 200

_NUMBERED = re.compile(r"(?:^|(?<=\s))\(?(\d{1,2})[.)]\s+")
_SEPARATORS = re.compile(r"\n+|;\s*|,?\s+(?:and\s+)?then\s+|\s*(?:->|→)\s*", re.IGNORECASE)
# A step that starts with a subject or a determiner describes; an instruction starts with a
# verb ("Boil", "Ask", "Don't"). Without a tagger, refusing the common non-verbs is enough
# to keep statements ("I like tea", "The user walks") out.
_NOT_IMPERATIVE = frozenset(
    [
        "i",
        "i'm",
        "i've",
        "i'd",
        "me",
        "my",
        "mine",
        "you",
        "you're",
        "your",
        "he",
        "he's",
        "his",
        "she",
        "she's",
        "her",
        "hers",
        "they",
        "they're",
        "their",
        "we",
        "we're",
        "our",
        "it",
        "it's",
        "its",
        "there",
        "this",
        "that",
        "these",
        "those",
        "the",
        "a",
        "an",
        "user",
        "users",
        "mom",
        "dad",
    ]
)
_EXPLICIT = re.compile(
    r"\b(?:remember|save|note|keep|store|write down|memori[sz]e)\b[^.?!]{0,60}?"
    r"\b(?:how|steps?|routine|procedure|recipe|instructions?|order|way)\b"
    r"|\bhere(?:'s| is) how\b|\bstep[- ]by[- ]step\b|\bthe steps are\b",
    re.IGNORECASE,
)


def numbered_steps(text: str) -> str | None:
    """``text`` as numbered imperative steps (one ``"1. Step."`` line each), or ``None`` when it
    is not a procedure: fewer than two steps, more than :data:`MAX_STEPS`, or a step that
    does not read as an instruction."""
    flat = " ".join(text.split()) if _NUMBERED.search(text) else text.strip()
    if _NUMBERED.search(flat):
        parts = _NUMBERED.split(flat)
        # split() keeps the numbers: [before, n1, step1, n2, step2, ...]
        head = parts[0].strip()
        if head and not head.endswith(":"):
            return None  # prose before the first number (a heading is fine): not steps
        steps = [parts[i].strip() for i in range(2, len(parts), 2)]
    else:
        steps = [s.strip() for s in _SEPARATORS.split(flat)]
    steps = [s.strip(" .;,") for s in steps if s and s.strip(" .;,")]
    if not 2 <= len(steps) <= MAX_STEPS:
        return None
    if any(len(s) > _MAX_STEP_CHARS or not _imperative(s) for s in steps):
        return None
    return "\n".join(f"{i}. {s[:1].upper()}{s[1:]}." for i, s in enumerate(steps, 1))


def _imperative(step: str) -> bool:
    first = step.split()[0].lower().strip("\"'(")
    return first.replace("'", "").isalpha() and first not in _NOT_IMPERATIVE


def is_explicit_request(user_text: str) -> bool:
    """Whether the user's words ask for a procedure to be kept ("remember how I take my
    tea", "save these steps", "here's how ...", "step by step")."""
    return _EXPLICIT.search(user_text) is not None


@dataclass(frozen=True, kw_only=True)
class ProceduralGate:
    """Decides what a write typed ``procedural`` becomes (see the module docstring).

    Args:
        min_confidence: the confidence that counts as a high-confidence detection.
    """

    min_confidence: float = 0.9

    def admit(self, *, value: str, confidence: float, explicit: bool) -> tuple[MemoryType, str]:
        """``(PROCEDURAL, the numbered steps)`` for a procedure asked for or detected with
        high confidence; ``(PREFERENCE, value)`` otherwise."""
        steps = numbered_steps(value)
        if steps is not None and (explicit or confidence >= self.min_confidence):
            return MemoryType.PROCEDURAL, steps
        return MemoryType.PREFERENCE, value


def in_default_context(memory: Memory) -> bool:
    """Whether ``memory`` may go into an agent's default context (procedures never do)."""
    return memory.type is not MemoryType.PROCEDURAL and memory.category != PROCEDURAL_CATEGORY
