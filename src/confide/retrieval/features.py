"""Query and memory features the ranker uses: names, entities, time expressions.

All functions are pure and work on decrypted text in memory; nothing is logged.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache

from confide.index.tokenize import terms

__all__ = [
    "QueryFeatures",
    "content_words",
    "entities",
    "has_time_expression",
    "mentions",
    "names",
    "neutral_question",
    "query_features",
    "question_name_terms",
]

_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_TIME_EXPR = re.compile(
    rf"\b(yesterday|today|tonight|tomorrow|ago|last|next|weekend|week|month|year|since|"
    rf"recently|soon|{_MONTHS}|{_DAYS}|(?:19|20)\d\d)\b",
    re.IGNORECASE,
)
_TIME_QUESTION = re.compile(
    r"\b(when|what (?:year|month|day|date|time)|how long|which (?:year|month|day))\b",
    re.IGNORECASE,
)
_ENTITY = re.compile(r"\b[A-Z][a-zA-Z0-9'\-]+|\b[A-Z]{2,}\b")
_COMMON = frozenset(
    re.split(
        r"\s+",
        "I I'm I've I'll I'd The A An And But So Oh Hey Hi Yes No Wow Thanks Thank What When "
        "Where Who Why How Which Did Do Does Is Are Was Were That This It My Your",
    )
)


@lru_cache(maxsize=65536)
def has_time_expression(text: str) -> bool:
    """Whether a text mentions a time: a date word, a weekday, a month, a year, "ago"..."""
    return _TIME_EXPR.search(text) is not None


@lru_cache(maxsize=65536)
def entities(text: str) -> frozenset[str]:
    """Capitalised words and acronyms, lower-cased; common sentence openers are dropped."""
    found = {m.group().rstrip("'s") for m in _ENTITY.finditer(text)}
    return frozenset(e.lower() for e in found if e not in _COMMON and len(e) > 1)


@lru_cache(maxsize=65536)
def mentions(text: str, name: str) -> bool:
    """Whether ``name`` occurs in ``text`` as a whole word (case-insensitive)."""
    return re.search(rf"\b{re.escape(name)}\b", text, re.IGNORECASE) is not None


# Questions whose answer is a proper name: "which cities...", "what is the name of...",
# "where did she go...". Their evidence holds a name the question does not.
_NAME_QUESTION = re.compile(
    r"\b(where|(which|what)\b[^?]*\b(names?|called|cit(y|ies)|countr(y|ies)|places?|"
    r"locations?|states?|books?|novels?|authors?|games?|movies?|films?|shows?|bands?|songs?|"
    r"artists?|teams?|brands?|restaurants?|stores?|compan(y|ies)|schools?|pets?|dogs?|cats?))\b",
    re.IGNORECASE,
)


_CAPITALISED = re.compile(r"\b[A-Z][a-zA-Z0-9\-]+")


_SENTENCE_END = ".!?:;\"'([“‘"


def _opens(text: str, m: re.Match[str]) -> bool:
    """Whether the word at ``m`` opens a sentence (capitalised there whatever it is)."""
    before = text[: m.start()].rstrip()
    return not before or before[-1] in _SENTENCE_END


@lru_cache(maxsize=65536)
def names(text: str) -> frozenset[str]:
    """Capitalised words inside a sentence (not opening one), lower-cased: likely names."""
    found = {m.group().lower() for m in _CAPITALISED.finditer(text) if not _opens(text, m)}
    return frozenset(found - {w.lower() for w in _COMMON})


# A word of a question: letters and digits in any script, joined by apostrophes or hyphens
# ("O'Brien", "Ana-María", "Caroline's", "Caroline’s").
_QUESTION_WORD = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*")
_POSSESSIVE = re.compile(r"['’]s$")

NEUTRAL_NAME = "they"
"""What a common name is replaced by in the embedded question: a pronoun that stands for
anyone, so the sentence still reads as one about a person."""


def _name_term(text: str, m: re.Match[str]) -> str | None:
    """The search term of a capitalised word inside a sentence, possessive dropped; ``None``
    for anything else (a sentence's first word may be a capitalised content word:
    "Kayaking: how often...")."""
    word = _POSSESSIVE.sub("", m.group())
    if not word[:1].isupper() or word in _COMMON:
        return None
    if _opens(text, m):
        return None
    found = terms(word)
    return found[0] if len(found) == 1 else None


def question_name_terms(text: str) -> frozenset[str]:
    """The search terms of a question's capitalised words inside a sentence (names, places,
    acronyms)."""
    found = (_name_term(text, m) for m in _QUESTION_WORD.finditer(text))
    return frozenset(t for t in found if t is not None)


def neutral_question(text: str, common: Collection[str]) -> str:
    """``text`` with each capitalised word inside a sentence whose term is in ``common``
    replaced by :data:`NEUTRAL_NAME` ("What does Caroline paint?" -> "What does they
    paint?").

    A name found in a large share of a user's memories (the user's own name, which every
    turn they spoke carries) tells none of them apart, yet it dominates the embedding of a
    short question: the question then sits close to every turn of that person, chit-chat
    included, rather than to the ones about what it asks. Lexical search and the speaker
    boost still see the name.
    """
    if not common:
        return text

    def swap(m: re.Match[str]) -> str:
        return NEUTRAL_NAME if _name_term(text, m) in common else m.group()

    return re.sub(r"\s+", " ", _QUESTION_WORD.sub(swap, text)).strip()


@lru_cache(maxsize=65536)
def content_words(text: str) -> int:
    """How many content terms a text holds (stopwords and one-letter words left out)."""
    return len(terms(text))


@dataclass(frozen=True)
class QueryFeatures:
    """What the ranker needs to know about a query."""

    text: str
    asks_time: bool
    entities: frozenset[str]
    asks_name: bool = False


def query_features(text: str) -> QueryFeatures:
    """Analyse a query once, before ranking."""
    return QueryFeatures(
        text=text,
        asks_time=_TIME_QUESTION.search(text) is not None,
        entities=entities(text),
        asks_name=_NAME_QUESTION.search(text) is not None,
    )
