"""Checks an extracted memory must pass: a usable key, a short value, grounded in the user."""

from __future__ import annotations

import re

__all__ = ["MAX_EXTRACTED_VALUE_CHARS", "is_grounded", "normalize_key", "validate_value"]

MAX_EXTRACTED_VALUE_CHARS = 280

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")
_KEY_JUNK = re.compile(r"[^a-z0-9_.\-]+")
_WORD = re.compile(r"[a-z0-9']+")
_FILLER = frozenset(
    re.findall(
        r"\S+",
        """a an the and or but of to in on at for with by from as is are was were be been has have
    had do does did not no yes user user's users they them their theirs themselves others he
    she his her him it its
    this that these those i me my we our you your named called who which when where about
    likes like prefers feels felt lives living name s""",
    )
)


def validate_value(value: str) -> str | None:
    """Trim ``value`` to one or two sentences of at most 280 characters, or reject it.

    Whitespace is collapsed and wrapping quotes removed; beyond two sentences only the
    first two are kept; if that is still too long only the first is kept; a first
    sentence longer than 280 characters, or an empty value, is rejected (``None``).
    """
    text = " ".join(value.split()).strip().strip("\"'").strip()
    if not text:
        return None
    sentences = _SENTENCE_END.split(text)
    text = " ".join(sentences[:2])
    if len(text) > MAX_EXTRACTED_VALUE_CHARS:
        text = sentences[0]
    return text if len(text) <= MAX_EXTRACTED_VALUE_CHARS else None


def normalize_key(key: str) -> str | None:
    """A snake_case key (lower case, spaces to ``_``), or ``None`` if nothing usable is left."""
    text = _KEY_JUNK.sub("_", key.strip().lower()).strip("_.-")
    text = re.sub(r"_+", "_", text)[:128]
    return text or None


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _content(text: str) -> set[str]:
    return {_stem(w.strip("'")) for w in _WORD.findall(text.lower()) if w not in _FILLER}


def is_grounded(value: str, user_text: str, *, min_share: float = 0.5) -> bool:
    """Whether the user said it: at least ``min_share`` of the value's content words (lightly
    stemmed, filler words ignored) appear in the user's own turns.

    A value with no content words is grounded only if the user said something at all.
    """
    words = _content(value)
    said = _content(user_text)
    if not words:
        return bool(said)
    return len(words & said) / len(words) >= min_share
