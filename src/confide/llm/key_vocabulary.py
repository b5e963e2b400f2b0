"""The fixed vocabulary of keys that extraction may give a memory.

A key is read by more people and programs than a value (agents' context headers, audit
entries, operators), so extraction never builds one from what the user said: a key built that
way (``dislikes_ex_husband_robert``, ``likes_cocaine``) says as much as the value. Every
extracted key is one of:

* a single-valued key (``city``, ``preferred_name``, ``health_condition``...), including keys
  made from closed word lists (``daughter_name``, ``pet_dog_count``, ``favorite_color``);
* a many-valued family (``likes``, ``dislikes``, ``pain``...), numbered when a user has more
  than one (``likes``, ``likes.2``, ``likes.3``); the specific words live only in the value.

Anything else (an LLM's free-text key) is mapped onto the family its first words name, or
onto :data:`GENERIC_KEY`; words the key carried that the value lacks are moved into the value.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import replace

from confide.llm.candidates import Candidate
from confide.llm.offline_vocab import KIN_PLURAL, PETS, REL, REL_ALIASES

__all__ = ["GENERIC_KEY", "MANY_VALUED", "family", "is_vocabulary", "to_vocabulary"]

GENERIC_KEY = "note"
"""Where a key that names no known family goes."""

MANY_VALUED: frozenset[str] = frozenset(
    {
        "likes",
        "dislikes",
        "prefers",
        "favorite",
        "routine",
        "appointment",
        "pain",
        "visit",
        "relationship",
        GENERIC_KEY,
    }
)
"""Families a user may hold many memories of; numbered ``family``, ``family.2``, ..."""

SINGLE_VALUED: frozenset[str] = frozenset(
    [
        "age",
        "allergy",
        "birth_year",
        "birthday",
        "birthplace",
        "business",
        "call_time",
        "city",
        "communication_style",
        "current_location",
        "current_situation",
        "diet",
        "employer",
        "former_business",
        "former_employer",
        "former_occupation",
        "health_condition",
        "hearing",
        "hometown",
        "language",
        "living_situation",
        "marital_status",
        "marriage",
        "medication",
        "military_service",
        "mobility",
        "mood",
        "moved_to",
        "name",
        "occupation",
        "preferred_name",
        "pronouns",
        "retirement",
        "sleep",
        "spouse_name",
        "vision",
    ]
)

FAVORITE_TOPICS: frozenset[str] = frozenset(
    [
        "color",
        "colour",
        "food",
        "music",
        "singer",
        "hobby",
        "song",
        "movie",
        "film",
        "book",
        "author",
        "show",
        "tv_show",
        "sport",
        "team",
        "season",
        "flower",
        "animal",
        "drink",
        "dessert",
        "meal",
        "holiday",
        "place",
        "game",
        "hymn",
        "band",
        "artist",
        "restaurant",
        "subject",
        "fruit",
        "breakfast",
        "drink",
    ]
)
"""Topics ``favorite_<topic>`` may name; any other favourite goes to the ``favorite`` family."""

# Other spellings of a family's first word, as models and people write them.
_ALIASES = {
    "like": "likes",
    "loves": "likes",
    "love": "likes",
    "enjoys": "likes",
    "interest": "likes",
    "interests": "likes",
    "hobby": "likes",
    "hobbies": "likes",
    "dislike": "dislikes",
    "hates": "dislikes",
    "hate": "dislikes",
    "prefer": "prefers",
    "preference": "prefers",
    "preferences": "prefers",
    "favourite": "favorite",
    "favorites": "favorite",
    "routines": "routine",
    "habit": "routine",
    "appointments": "appointment",
    "visits": "visit",
    "relation": "relationship",
    "relationships": "relationship",
}

_RELATIONS = sorted(
    {REL_ALIASES.get(w, w) for w in (r.lower() for r in REL.split("|"))}
    | set(REL_ALIASES.values())
    | {"grandchild", "sibling"}
)
_REL_WORDS = "|".join(re.escape(r.replace("-", "_").replace(" ", "_")) for r in _RELATIONS)
_KIN_WORDS = "|".join(sorted(set(KIN_PLURAL.values())))
_PET_WORDS = "|".join(sorted(set(PETS.values())))
_CLOSED = re.compile(
    rf"(?:{_REL_WORDS})_(?:name|passed_away|occupation|military_service)|"
    rf"(?:{_KIN_WORDS})_count|pet_(?:{_PET_WORDS})_(?:name|names|count)|"
    rf"favorite_(?:{'|'.join(sorted(FAVORITE_TOPICS))})"
)
_NUMBERED = re.compile(r"(?P<base>[a-z0-9_]+)\.(?P<n>[2-9]|[1-9][0-9]+)")


def is_vocabulary(key: str) -> bool:
    """Whether ``key`` is in the vocabulary exactly (a family's number included)."""
    low = key.lower()
    numbered = _NUMBERED.fullmatch(low)
    if numbered is not None:
        return numbered["base"] in MANY_VALUED
    return low in SINGLE_VALUED or low in MANY_VALUED or _CLOSED.fullmatch(low) is not None


def family(key: str) -> tuple[str, str]:
    """``(vocabulary key without number, words left over)`` for any key.

    ``likes_gardening`` -> ``("likes", "gardening")``; ``allergy_penicillin`` ->
    ``("allergy", "penicillin")``; ``daughter_name`` -> ``("daughter_name", "")``;
    ``ex_husband_robert`` -> ``("note", "ex husband robert")``.
    """
    low = key.lower().replace("-", "_").replace(" ", "_")
    numbered = _NUMBERED.fullmatch(low)
    if numbered is not None and numbered["base"] in MANY_VALUED:
        return numbered["base"], ""
    if is_vocabulary(low):
        return low, ""
    parts = [p for p in re.split(r"[_.]+", low) if p]
    # The longest known head wins: "former_occupation_teacher" is a former occupation.
    for cut in range(len(parts) - 1, 0, -1):
        head = "_".join(parts[:cut])
        head = _ALIASES.get(head, head)
        if head in MANY_VALUED or head in SINGLE_VALUED:
            return head, " ".join(parts[cut:])
    return GENERIC_KEY, " ".join(parts)


def _numbered(base: str, taken: Collection[str]) -> str:
    if base not in MANY_VALUED:
        return base
    if base not in taken:
        return base
    n = 2
    while f"{base}.{n}" in taken:
        n += 1
    return f"{base}.{n}"


def to_vocabulary(candidate: Candidate, taken: Collection[str]) -> Candidate:
    """``candidate`` with a vocabulary key, numbered past the lower-cased keys in ``taken``.

    A single-valued key comes back as it is even when taken (the caller decides what an
    existing key means). Words the original key held beyond its family are kept in the value
    when the value does not already say them.
    """
    base, rest = family(candidate.key)
    key = candidate.key.lower() if candidate.key.lower() not in taken else ""
    if not (key and is_vocabulary(key) and family(key)[0] == base):
        key = _numbered(base, taken)
    value = candidate.value
    if rest and not all(word in value.lower() for word in rest.split()):
        value = f"{rest}: {value}"
    return replace(candidate, key=key, value=value)
