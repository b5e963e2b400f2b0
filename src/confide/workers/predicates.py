"""Predicate classes: phrasings that carry one memory relation.

"Loves gardening", "enjoys gardening" and "her favourite hobby is gardening" state one
relation between the user and gardening; "is allergic to penicillin" and "penicillin gives her
an allergic reaction" another. The embedder scores such predicates like siblings (loves /
enjoys sit as close as fish / meat), so the offline same-fact judge cannot tell them from
words that differ. This closed lexicon names them instead: each phrase of a class becomes one
marker before the words of two values are lined up.

Only predicates are listed, never the things they relate: objects (fish / meat, penicillin /
peanuts) are still compared word by word, so a class never joins two different objects.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MARKER", "PREDICATE_CLASSES", "predicate_tokens"]

MARKER = "~"
"""The first character of a class marker (the tokenizer never yields it)."""

PREDICATE_CLASSES: dict[str, tuple[str, ...]] = {
    "like": (
        "likes",
        "liked",
        "loves",
        "loved",
        "love",
        "enjoys",
        "enjoyed",
        "enjoy",
        "adores",
        "adore",
        "fond of",
        "keen on",
        "fan of",
        "favourite hobby",
        "favorite hobby",
        "favourite pastime",
        "favorite pastime",
        "favourite activity",
        "favorite activity",
    ),
    "allergic": (
        "allergic",
        "allergy",
        "allergies",
        "allergic reaction",
        "allergic reactions",
        "gives allergic reaction",
        "gives allergic reactions",
        "gave allergic reaction",
        "causes allergic reaction",
        "causes allergic reactions",
    ),
    "afraid": (
        "afraid of",
        "scared of",
        "frightened of",
        "fears",
        "fear of",
        "scares",
        "scare her",
        "scare him",
        "scare them",
        "scare me",
        "frightens",
        "frighten her",
        "frighten him",
        "frighten them",
        "frighten me",
    ),
    "resides": (
        "lives in",
        "lived in",
        "living in",
        "resides in",
        "resided in",
        "residing in",
        "based in",
        "resident of",
    ),
    "works_as": (
        "works as",
        "worked as",
        "working as",
        "employed as",
        "job as",
    ),
    "works_at": (
        "works at",
        "worked at",
        "working at",
        "works for",
        "worked for",
        "working for",
        "employed at",
        "employed by",
        "job at",
    ),
}
"""Relation classes and the phrases (lower case, articles and object pronouns left out) that
state them."""

# Skipped inside a phrase: "gives her an allergic reaction" is "gives allergic reaction".
_FILLERS = frozenset({"a", "an", "the", "her", "him", "them", "me", "us", "you", "is", "are"})

_PHRASES: list[tuple[tuple[str, ...], str]] = sorted(
    (
        (tuple(phrase.split()), MARKER + name)
        for name, phrases in PREDICATE_CLASSES.items()
        for phrase in phrases
    ),
    key=lambda entry: -len(entry[0]),
)


def predicate_tokens(tokens: Sequence[str]) -> list[tuple[str, str]]:
    """``(token, spelling)`` for each token, a predicate phrase made one marker token (its
    spelling the words it replaced); every other token is its own spelling. The longest
    phrase wins; fillers inside a phrase go with it."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(tokens):
        hit = _match(tokens, i)
        if hit is None:
            out.append((tokens[i], tokens[i]))
            i += 1
            continue
        end, marker = hit
        out.append((marker, " ".join(tokens[i:end])))
        i = end
    return out


def _match(tokens: Sequence[str], start: int) -> tuple[int, str] | None:
    """(end, marker) of the longest phrase starting at ``start``."""
    for words, marker in _PHRASES:
        at = start
        for n, word in enumerate(words):
            while n > 0 and at < len(tokens) and tokens[at] != word and tokens[at] in _FILLERS:
                at += 1
            if at >= len(tokens) or tokens[at] != word:
                break
            at += 1
        else:
            return at, marker
    return None
