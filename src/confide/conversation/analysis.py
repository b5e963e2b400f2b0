"""Cheap, deterministic reading of one utterance: its intent and the entities it names."""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["MAX_NAMES", "NOT_NAMES", "Intent", "Speaker", "classify_intent", "extract_entities"]

Speaker = Literal["user", "assistant"]
Intent = Literal["question", "request", "statement", "response"]

MAX_NAMES = 5

_REQUEST = re.compile(r"\b(can you|could you|would you|please)\b", re.IGNORECASE)


def _words(text: str) -> list[str]:
    return text.split()


_DAYS = _words("monday tuesday wednesday thursday friday saturday sunday")
_MONTHS = _words(
    "january february march april may june july august september october november december"
)
_TIME_WORDS = re.compile(
    r"\b(?:(?:next|this|last|every)\s+(?:week|weekend|month|year|"
    + "|".join(_DAYS)
    + r")|today|tonight|tomorrow|yesterday|morning|afternoon|evening|night|weekend|noon|"
    r"midnight|"
    + "|".join(_DAYS)
    + "|"
    + "|".join(m for m in _MONTHS if m != "may")
    + r"|\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)|\d{1,2}:\d{2}|\d{1,2}\s+o'clock)\b",
    re.IGNORECASE,
)
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?\b")
# Capitalised words that start sentences far more often than they name anyone (write-time
# de-duplication reads names with it too).
NOT_NAMES = (
    frozenset(
        [
            "i",
            "i'm",
            "i've",
            "i'd",
            "i'll",
            "a",
            "an",
            "the",
            "my",
            "our",
            "your",
            "his",
            "her",
            "their",
            "its",
            "we",
            "you",
            "he",
            "she",
            "they",
            "it",
            "this",
            "that",
            "these",
            "those",
            "there",
            "here",
            "what",
            "when",
            "where",
            "why",
            "how",
            "who",
            "which",
            "whose",
            "can",
            "could",
            "would",
            "should",
            "will",
            "shall",
            "may",
            "might",
            "must",
            "do",
            "does",
            "did",
            "is",
            "are",
            "was",
            "were",
            "be",
            "been",
            "am",
            "have",
            "has",
            "had",
            "please",
            "yes",
            "no",
            "not",
            "yeah",
            "okay",
            "ok",
            "oh",
            "well",
            "so",
            "but",
            "and",
            "or",
            "if",
            "then",
            "also",
            "just",
            "hi",
            "hello",
            "hey",
            "thanks",
            "thank",
            "good",
            "great",
            "sure",
            "maybe",
            "sometimes",
            "today",
            "tonight",
            "tomorrow",
            "yesterday",
            "morning",
            "afternoon",
            "evening",
            "night",
            "let",
            "let's",
            "dear",
            "mr",
            "mrs",
            "ms",
            "dr",
            "after",
            "before",
            "since",
            "until",
            "because",
            "although",
            "though",
            "while",
            "once",
        ]
    )
    | frozenset(_DAYS)
    | frozenset(_MONTHS)
)


def classify_intent(text: str, speaker: Speaker) -> Intent:
    """``response`` for the assistant; for the user ``question`` if the text has a ``?``,
    ``request`` if it says can/could/would you or please, else ``statement``."""
    if speaker == "assistant":
        return "response"
    if "?" in text:
        return "question"
    if _REQUEST.search(text):
        return "request"
    return "statement"


def extract_entities(text: str) -> tuple[str, ...]:
    """Capitalised names (at most :data:`MAX_NAMES`) then day and time words, de-duplicated
    case-insensitively in order of first appearance."""
    seen: set[str] = set()
    names: list[str] = []
    for match in _CAPITALISED.finditer(text):
        word = match.group(0)
        low = word.lower()
        if low in NOT_NAMES or low in seen:
            continue
        seen.add(low)
        names.append(word)
        if len(names) == MAX_NAMES:
            break
    times: list[str] = []
    for match in _TIME_WORDS.finditer(text):
        word = " ".join(match.group(0).lower().split())
        if word not in seen:
            seen.add(word)
            times.append(word)
    return (*names, *times)
