"""Same-fact judges: do two memories of one user say the same thing?

Consolidation asks a :class:`SameFactJudge` about pairs its pre-filters let through. Two
judges ship:

* :class:`OfflineJudge`, the default (no key, no network): two values are one fact only
  when their words line up (see :func:`unaligned`): every content word on each side is met
  on the other by the same stem or a near-identical word (cosine of the two words with the
  embedder), numbers agree and count the same things, and a word on one side only is one
  the other sentence already implies, or a modifier that refines a noun both name
  ("her younger sister" / "a sister"). Predicate phrases of one relation ("loves" /
  "enjoys" / "her favourite hobby is") are one word by a closed lexicon
  (:mod:`confide.workers.predicates`); the things they relate never are. Siblings that
  differ (fish / meat, vitamin D / C, high / low, week / month) never line up, however close
  the sentences are; a missed merge only leaves a duplicate, a wrong one destroys a fact.
  Then nothing may set them apart (different names, different words of one kind, negation
  on one side only) and their embeddings must be close enough; keys of one vocabulary
  family lower the similarity it needs.
* :class:`LLMJudge`: batches of 5-10 pairs per prompt (:data:`JUDGE_PROMPT`) to the
  configured model through the usage ledger, answered as one JSON object; it can also word
  the merged fact. It defers while the account's LLM budget is low.

A judge answers a :class:`Verdict` per pair, or ``None`` when it could not decide (a
malformed answer): such a pair is left for a later run.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from confide.config import Settings
from confide.embedders import Embedder
from confide.errors import ProviderError
from confide.index.tokenize import STOPWORDS, stem, tokenize
from confide.llm.answers import json_object
from confide.llm.base import LLM, Message
from confide.llm.key_vocabulary import GENERIC_KEY, family
from confide.llm.usage import UsageLedger, metered
from confide.types import Memory
from confide.workers.predicates import MARKER, predicate_tokens

__all__ = [
    "JUDGE_PROMPT",
    "LLMJudge",
    "OfflineJudge",
    "Pair",
    "SameFactJudge",
    "Verdict",
    "batches",
    "judge_from_settings",
    "numbers_in",
    "unaligned",
]

log = logging.getLogger(__name__)

MAX_MERGED_CHARS = 280
OPERATION = "consolidation"
"""The ledger operation of the LLM judge's calls."""


@dataclass(frozen=True, slots=True)
class Pair:
    """Two active memories of one user and the cosine of their stored embeddings."""

    first: Memory
    second: Memory
    score: float


@dataclass(frozen=True, slots=True)
class Verdict:
    """A judge's answer about one pair.

    ``reason`` is a code (``similar``, ``numbers``, ``names``, ``contrast``, ``negation``,
    ``order``, ``unaligned``, ``extra``, ``distant``, ``llm``), never memory text;
    ``merged`` is the fact as the judge worded it for the merged memory (``None``: keep the
    newer of the two values).
    """

    same: bool
    reason: str
    merged: str | None = None


class SameFactJudge(Protocol):
    """Decides whether pairs of memories state the same fact."""

    name: str
    """``offline`` or ``llm``: recorded with every merge."""

    def available(self, account_id: str) -> bool:
        """Whether the judge may run for the account now (an LLM judge waits on a low budget)."""
        ...

    async def judge(
        self, pairs: Sequence[Pair], *, account_id: str, user_id: str
    ) -> list[Verdict | None]:
        """A verdict per pair, in order; ``None`` for a pair it could not decide.

        Raises:
            ProviderError: the model could not be reached (nothing was decided).
        """
        ...


# ---- features the offline judge compares --------------------------------------------------
_NUMBER_WORDS = {
    "zero": "0",
    "one": "1",
    "once": "1",
    "two": "2",
    "twice": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "fifteen": "15",
    "twenty": "20",
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "hundred": "100",
    "first": "1st",
    "second": "2nd",
    "third": "3rd",
    "fourth": "4th",
    "fifth": "5th",
    "half": "0.5",
    "dozen": "12",
}
_DIGITS = re.compile(r"\d+(?:[.,:]\d+)?")
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")

# Words of one kind: two values naming different members of a group state different facts.
# Synonyms share a canonical member.
_GROUPS: dict[str, dict[str, str]] = {
    "kin": {
        **{w: w for w in ("mother", "father", "parent", "sister", "brother", "sibling")},
        **{w: w for w in ("son", "daughter", "child", "cousin", "aunt", "uncle", "niece")},
        **{w: w for w in ("nephew", "grandmother", "grandfather", "grandson", "granddaughter")},
        "grandchild": "grandchild",
        **{w: w for w in ("wife", "husband", "spouse", "partner", "boyfriend", "girlfriend")},
        **{w: w for w in ("fiance", "fiancee", "friend", "neighbor", "colleague", "boss")},
        **{w: w for w in ("roommate", "stepmother", "stepfather", "stepson", "stepdaughter")},
        "mom": "mother",
        "mum": "mother",
        "dad": "father",
        "grandma": "grandmother",
        "granny": "grandmother",
        "grandpa": "grandfather",
        "kid": "child",
        "neighbour": "neighbor",
        "coworker": "colleague",
        "co-worker": "colleague",
    },
    "weekday": {
        w: w for w in ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
    },
    "month": {
        w: w
        for w in (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        )
    },
    "season": {
        **{w: w for w in ("spring", "summer", "autumn", "winter")},
        "fall": "autumn",
    },
    "daypart": {
        w: w for w in ("morning", "afternoon", "evening", "night", "noon", "midnight", "dawn")
    },
    "meal": {w: w for w in ("breakfast", "brunch", "lunch", "dinner", "supper")},
    "colour": {
        **{w: w for w in ("red", "blue", "green", "yellow", "purple", "orange", "pink")},
        **{w: w for w in ("black", "white", "brown", "grey", "teal", "violet")},
        "gray": "grey",
    },
    "animal": {
        **{w: w for w in ("dog", "cat", "bird", "fish", "hamster", "rabbit", "horse")},
        **{w: w for w in ("parrot", "turtle", "snake", "lizard", "guinea", "ferret")},
        "puppy": "dog",
        "kitten": "cat",
        "bunny": "rabbit",
    },
    "drink": {
        **{w: w for w in ("coffee", "tea", "water", "juice", "milk", "wine", "beer")},
        **{w: w for w in ("soda", "cocoa", "lemonade", "whisky", "whiskey")},
    },
    "sport": {
        **{w: w for w in ("tennis", "soccer", "football", "basketball", "golf", "baseball")},
        **{w: w for w in ("swimming", "running", "cycling", "yoga", "hiking", "skiing")},
        **{w: w for w in ("chess", "bowling", "boxing", "climbing", "rowing", "pilates")},
        "biking": "cycling",
        "jogging": "running",
        "swim": "swimming",
        "run": "running",
        "hike": "hiking",
    },
    "instrument": {
        w: w
        for w in ("piano", "guitar", "violin", "cello", "drums", "flute", "saxophone", "ukulele")
    },
    "language": {
        **{w: w for w in ("english", "spanish", "french", "german", "italian", "portuguese")},
        **{w: w for w in ("chinese", "mandarin", "japanese", "korean", "arabic", "russian")},
        **{w: w for w in ("hindi", "dutch", "greek", "polish", "turkish", "swedish")},
    },
    # Days, weeks and years are left out: "daily" and "every day" say one thing.
    "unit": {
        **{w: w for w in ("mile", "kilometer", "meter", "minute", "hour", "pound", "kilogram")},
        **{w: w for w in ("gram", "liter", "cup", "glass", "dollar", "euro", "step")},
        "km": "kilometer",
        "kilometre": "kilometer",
        "metre": "meter",
        "kg": "kilogram",
        "lb": "pound",
        "litre": "liter",
        "min": "minute",
        "hr": "hour",
    },
    "feeling": {
        **{w: w for w in ("happy", "sad", "lonely", "anxious", "tired", "proud", "relaxed")},
        **{w: w for w in ("excited", "calm", "angry", "worried", "bored", "scared", "grateful")},
        "afraid": "scared",
        "nervous": "anxious",
    },
    "genre": {
        **{w: w for w in ("mystery", "romance", "thriller", "fantasy", "horror", "comedy")},
        **{w: w for w in ("biography", "history", "poetry", "western", "drama", "documentary")},
        "crime": "mystery",
        "detective": "mystery",
    },
    "game": {
        **{w: w for w in ("chess", "cards", "checkers", "bingo", "scrabble", "sudoku", "dominoes")},
        **{w: w for w in ("crossword", "puzzle", "poker", "bridge", "backgammon", "mahjong")},
        "draughts": "checkers",
    },
    "occupation": {
        **{w: w for w in ("nurse", "teacher", "doctor", "dentist", "lawyer", "engineer")},
        **{w: w for w in ("farmer", "driver", "mechanic", "electrician", "plumber", "baker")},
        **{w: w for w in ("carpenter", "secretary", "accountant", "professor", "pharmacist")},
        **{w: w for w in ("firefighter", "pilot", "chef", "waiter", "waitress", "cleaner")},
        **{w: w for w in ("librarian", "journalist", "architect", "programmer", "banker")},
        **{w: w for w in ("soldier", "policeman", "priest", "therapist", "veterinarian")},
        **{w: w for w in ("hairdresser", "physiotherapist", "tailor", "butcher", "fisherman")},
        "cook": "chef",
        "vet": "veterinarian",
        "physician": "doctor",
        "gp": "doctor",
    },
    "transport": {
        **{w: w for w in ("bus", "taxi", "car", "train", "tram", "bicycle", "subway")},
        **{w: w for w in ("plane", "boat", "ferry", "motorbike", "scooter", "coach")},
        "bike": "bicycle",
        "metro": "subway",
        "underground": "subway",
        "cab": "taxi",
        "airplane": "plane",
    },
    "relative_age": {"older": "older", "younger": "younger", "elder": "older"},
    "frequency": {
        **{w: w for w in ("daily", "weekly", "monthly", "yearly", "annually", "hourly")},
        "everyday": "daily",
        "nightly": "daily",
    },
}
_MEMBER: dict[str, tuple[str, str]] = {
    word: (group, canonical)
    for group, words in _GROUPS.items()
    for word, canonical in words.items()
}
_NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "none",
        "nobody",
        "nothing",
        "neither",
        "nor",
        "without",
        "cannot",
        "dislike",
        "dislikes",
        "disliked",
        "hate",
        "hates",
        "hated",
        "avoid",
        "avoids",
        "stopped",
        "quit",
        "former",
        "formerly",
        "ex",
        "used",
        "anymore",
        "longer",
    }
)
# Capitalised words that are not names.
_NOT_NAMES = frozenset(
    {"user", "the", "a", "an", "i", "he", "she", "they", "his", "her", "their", "it", "this"}
)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text.replace("\u2019", "'"))]


def numbers_in(text: str) -> frozenset[str]:
    """The numbers a text states, digits and number words alike (``"two"`` is ``"2"``)."""
    found = {m.replace(",", ".") for m in _DIGITS.findall(text)}
    found.update(_NUMBER_WORDS[w] for w in _words(text) if w in _NUMBER_WORDS)
    return frozenset(found)


_IRREGULAR = {"children": "child", "grandchildren": "grandchild", "buses": "bus"}


def _singular(word: str) -> str:
    if word.endswith("'s"):
        word = word[:-2]
    if word in _MEMBER or len(word) <= 3:
        return word
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word.endswith("ies") and word[:-3] + "y" in _MEMBER:
        return word[:-3] + "y"
    if word.endswith("s") and word[:-1] in _MEMBER:
        return word[:-1]
    return word


def _members(words: Sequence[str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for word in words:
        hit = _MEMBER.get(_singular(word))
        if hit is not None:
            out.setdefault(hit[0], set()).add(hit[1])
    return out


def _negated(words: Sequence[str]) -> bool:
    return any(w in _NEGATIONS or w.endswith("n't") for w in words)


def _names(text: str) -> tuple[set[str], set[str]]:
    """(names: capitalised words inside a sentence, every capitalised word), lower-cased."""
    named: set[str] = set()
    capitalised: set[str] = set()
    for sentence in re.split(r"[.!?;:]\s+", text):
        for position, word in enumerate(_WORD.findall(sentence)):
            bare = word.removesuffix("'s").removesuffix("\u2019s")
            if not bare[:1].isupper() or bare.lower() in _NOT_NAMES:
                continue
            capitalised.add(bare.lower())
            if position > 0 and _singular(bare.lower()) not in _MEMBER:
                named.add(bare.lower())
    return named, capitalised


def difference(first: str, second: str) -> str | None:
    """Why two values cannot be one fact (``numbers``, ``names``, ``contrast``,
    ``negation``), or ``None`` when nothing sets them apart."""
    numbers_a, numbers_b = numbers_in(first), numbers_in(second)
    if numbers_a and numbers_b and numbers_a != numbers_b:
        return "numbers"
    names_a, caps_a = _names(first)
    names_b, caps_b = _names(second)
    if names_a - caps_b and names_b - caps_a:
        return "names"
    words_a, words_b = _words(first), _words(second)
    groups_a, groups_b = _members(words_a), _members(words_b)
    for group in groups_a.keys() & groups_b.keys():
        if groups_a[group] != groups_b[group]:
            return "contrast"
    # A person on one side only ("her dog" / "her neighbour's dog") is another fact.
    if ("kin" in groups_a) != ("kin" in groups_b):
        return "contrast"
    if _negated(words_a) != _negated(words_b):
        return "negation"
    return None


# ---- word alignment ------------------------------------------------------------------------
# Verbs and words that carry no fact of their own in a memory ("has a dog named Max" / "her
# dog is called Max"): they need no counterpart on the other side.
_LIGHT = frozenset(
    {
        "named",
        "called",
        "name",
        "go",
        "goes",
        "going",
        "get",
        "gets",
        "getting",
        "take",
        "takes",
        "taking",
        "make",
        "makes",
        "do",
        "does",
        "doing",
        "every",
        "per",
        "around",
        "really",
        "also",
        "together",
        "usually",
        "especially",
        "particularly",
        "user",
        "she",
        "he",
        "they",
    }
)
# Words the search index drops as stopwords that still change a fact ("once a week" / "more
# than once a week", "both ears" / "her ears", "every day" / "every other day").
_MEANINGFUL = frozenset(
    {
        "above",
        "below",
        "after",
        "before",
        "against",
        "between",
        "both",
        "during",
        "few",
        "more",
        "most",
        "only",
        "other",
        "over",
        "under",
        "off",
        "out",
        "down",
        "too",
        "again",
    }
)
_KEEP_SHORT = re.compile(r"[b-hj-z]")  # one letter that names something (vitamin D); not a / i


@dataclass(frozen=True, slots=True)
class _Aligned:
    """A value's content words as stems (first spelling kept), its number bindings, and its
    tokens in order, each with its stem when it is a content word."""

    words: dict[str, str]
    bound: frozenset[tuple[str, str]]
    tokens: tuple[tuple[str, str | None], ...] = ()


def _align_terms(text: str) -> _Aligned:
    words: dict[str, str] = {}
    bound: set[tuple[str, str]] = set()
    pending: list[str] = []
    tokens: list[tuple[str, str | None]] = []
    for token, spelling in predicate_tokens(tokenize(text)):
        tokens.append((token, None))
        number = _NUMBER_WORDS.get(token) or (token if _DIGITS.fullmatch(token) else None)
        if number is not None:
            pending.append(number)
            continue
        if token in _NEGATIONS or token in _LIGHT:
            continue
        if token in STOPWORDS and token not in _MEANINGFUL:
            continue
        if len(token) < 2 and not _KEEP_SHORT.fullmatch(token):
            continue
        base = token if token.startswith(MARKER) else stem(token.replace("'", ""))
        words.setdefault(base, spelling)
        tokens[-1] = (token, base)
        # A number counts the next thing named: "two sons and a daughter" is not
        # "two daughters and a son".
        bound.update((n, base) for n in pending)
        pending.clear()
    bound.update((n, "") for n in pending)
    return _Aligned(words, frozenset(bound), tuple(tokens))


# Words before a noun that make it another thing, not a closer description of the same one
# ("great grandmother", "step mother", "the other day", "her next appointment").
_NOT_REFINING = frozenset(
    {
        "great",
        "step",
        "half",
        "foster",
        "god",
        "grand",
        "future",
        "next",
        "last",
        "previous",
        "non",
        "anti",
        "fake",
        "pretend",
        "imaginary",
        "mock",
        "pseudo",
        "would",
    }
)
# Words that open a noun phrase: what follows them up to the noun describes the noun.
_DETERMINERS = frozenset(
    {"a", "an", "the", "her", "his", "their", "my", "your", "our", "its", "this", "that"}
)


def _refines(word: str, mine: _Aligned, other: _Aligned) -> bool:
    """Whether ``word``, on this side only, is a modifier of a noun both sides name that the
    other side leaves unmodified ("Ana is her younger sister" / "Her sister is called Ana"):
    a closer description of the same thing, not another fact.

    The word must sit between a determiner and the shared noun (other words of this side
    only may stand with it: "her own little garden"), and on the other side no content word
    of its own may stand right before that noun (a competing modifier: "a little German" /
    "fluent German"). Quantities, numbers, negations and words that make the noun another
    thing (:data:`_NOT_REFINING`) never refine.
    """
    tokens = mine.tokens

    def one_sided(stem_: str | None) -> bool:
        return stem_ is not None and stem_ not in other.words and not stem_.startswith(MARKER)

    def modifier(index: int) -> bool:
        token, stem_ = tokens[index]
        return one_sided(stem_) and token not in _MEANINGFUL and token not in _NOT_REFINING

    for index, (_, stem_) in enumerate(tokens):
        if stem_ != word or not modifier(index):
            continue
        before = index - 1
        while before >= 0 and modifier(before):
            before -= 1
        if before < 0 or tokens[before][0] not in _DETERMINERS:
            continue
        after = index + 1
        while after < len(tokens) and modifier(after):
            after += 1
        if after >= len(tokens):
            continue
        head = tokens[after][1]
        if head is None or head.startswith(MARKER) or head not in other.words:
            continue
        if not _competing(head, other, mine):
            return True
    return False


def _competing(head: str, other: _Aligned, mine: _Aligned) -> bool:
    """Whether the other side puts a content word of its own right before ``head``."""
    for index, (_, stem_) in enumerate(other.tokens):
        if stem_ != head or index == 0:
            continue
        previous = other.tokens[index - 1][1]
        if previous is not None and previous not in mine.words:
            return True
    return False


_RELATIONS = frozenset({"to", "than", "over", "from", "into", "before", "after", "instead"})


def _relations(text: str) -> set[tuple[str, str, str]]:
    """(word, relation, word) around each relation word: "prefers showers to baths"."""
    out: set[tuple[str, str, str]] = set()
    tokens = [t for t in tokenize(text) if t not in _LIGHT]
    content = [stem(t) if t not in STOPWORDS and len(t) > 1 else None for t in tokens]
    for i, token in enumerate(tokens):
        if token not in _RELATIONS:
            continue
        before = next((w for w in reversed(content[:i]) if w), None)
        after = next((w for w in content[i + 1 :] if w), None)
        if before and after:
            out.add((before, token, after))
    return out


def _same_root(a: str, b: str) -> bool:
    """One word in two forms ("allergic" / "allergy", "coffee" / "coffees"): a shared start
    of five letters or more and at most three letters more on either side ("bear" / "beard"
    and "fish" / "fisherman" stay apart)."""
    if a.isdigit() or b.isdigit():
        return False
    shorter = min(len(a), len(b))
    common = next((i for i in range(shorter) if a[i] != b[i]), shorter)
    return common >= 5 and len(a) - common <= 3 and len(b) - common <= 3


WordSimilarity = Callable[[str, str], float]
"""The cosine of two short texts (words or a word and a sentence) by the embedder."""


def unaligned(
    first: str,
    second: str,
    similarity: WordSimilarity | None = None,
    *,
    synonym_cosine: float = 0.89,
    cover_cosine: float = 0.5,
) -> str | None:
    """Why the words of two values do not line up, or ``None`` when they do.

    ``numbers``: the values state different numbers, or count different things with one.
    ``order``: the same words in swapped roles ("showers to baths" / "baths to showers").
    ``unaligned``: each side has a content word the other lacks (siblings such as fish /
    meat, or words the embedder cannot show to be interchangeable: only a word cosine of at
    least ``synonym_cosine``, as "mom" / "mother", or one root in two forms counts).
    ``extra``: one side adds a content word the other sentence does not already imply (its
    cosine with that sentence is below ``cover_cosine``; without ``similarity`` any word
    added blocks) and that does not refine a noun both sides name (see :func:`_refines`).
    Predicate phrases of one class (:data:`~confide.workers.predicates.PREDICATE_CLASSES`)
    count as one word.
    """
    if numbers_in(first) != numbers_in(second):
        return "numbers"
    a, b = _align_terms(first), _align_terms(second)
    if a.bound != b.bound:
        return "numbers"
    relations_b = _relations(second)
    if any((y, r, x) in relations_b for x, r, y in _relations(first) if x != y):
        return "order"
    left = [s for s in a.words if s not in b.words]
    right = [s for s in b.words if s not in a.words]
    for x in list(left):
        for y in right:
            # A predicate class lines up only with itself ("works as" is not "works at").
            if x.startswith(MARKER) or y.startswith(MARKER):
                continue
            if _same_root(x, y) or (
                similarity is not None and similarity(a.words[x], b.words[y]) >= synonym_cosine
            ):
                left.remove(x)
                right.remove(y)
                break
    # A modifier on one side only of a noun both name ("younger sister" / "sister") is a
    # refinement of the same thing when the other side has none of its own there.
    left = [s for s in left if not _refines(s, a, b)]
    right = [s for s in right if not _refines(s, b, a)]
    if left and right:
        return "unaligned"
    extra, words, other = (left, a.words, second) if left else (right, b.words, first)
    if not extra:
        return None
    if similarity is None:
        return "extra"
    if any(similarity(words[s], other) < cover_cosine for s in extra):
        return "extra"
    return None


def _same_family(first: Memory, second: Memory) -> bool:
    family_a, family_b = family(first.key)[0], family(second.key)[0]
    return family_a == family_b and family_a != GENERIC_KEY


class OfflineJudge:
    """The same-fact judge that needs no model (see the module docstring).

    The default cosine (0.69) is the one ``bench/consolidation.py`` chooses on the dev half
    of its labelled pairs (``CONFIDE_CONSOLIDATION_SAME_COSINE``).

    Args:
        embedder: embeds the two values (without the date the index adds) for their cosine,
            and the few words that differ between them (see :func:`unaligned`); ``None``: the
            cosine of the stored embeddings, and only words of one stem or root line up.
        same_cosine: the cosine two values need to be one fact.
        same_key_cosine: the cosine they need when their keys are of one vocabulary family.
        synonym_cosine: the cosine two differing words need to count as one word.
        cover_cosine: the cosine a word on one side only needs with the other value.
    """

    name = "offline"

    CACHE_LIMIT = 20_000
    """Embedded words and values kept between pairs (a daily run embeds a few per pair)."""

    def __init__(
        self,
        embedder: Embedder | None = None,
        *,
        same_cosine: float = 0.69,
        same_key_cosine: float = 0.65,
        synonym_cosine: float = 0.89,
        cover_cosine: float = 0.5,
    ) -> None:
        self.embedder = embedder
        self.same_cosine = same_cosine
        self.same_key_cosine = same_key_cosine
        self.synonym_cosine = synonym_cosine
        self.cover_cosine = cover_cosine
        self._vectors: dict[str, np.ndarray] = {}

    def available(self, account_id: str) -> bool:
        """Always: the offline judge spends nothing."""
        return True

    def _embed(self, texts: Sequence[str]) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if not missing or self.embedder is None:
            return
        if len(self._vectors) + len(missing) > self.CACHE_LIMIT:
            self._vectors.clear()
        vectors = np.asarray(self.embedder.embed(missing), dtype=np.float32)
        self._vectors.update(zip(missing, vectors, strict=True))

    def _vector(self, text: str) -> np.ndarray:
        if text not in self._vectors:
            self._embed([text])
        return self._vectors[text]

    def _prefetch(self, pairs: Sequence[Pair]) -> None:
        """Embed in one batch the words the pairs may compare (those on one side only)."""
        texts: list[str] = []
        for pair in pairs:
            a, b = _align_terms(pair.first.value), _align_terms(pair.second.value)
            left = [a.words[s] for s in a.words if s not in b.words]
            right = [b.words[s] for s in b.words if s not in a.words]
            texts.extend(left + right)
            if bool(left) != bool(right):
                texts.append(pair.second.value if left else pair.first.value)
        self._embed(texts)

    def similarity(self, first: str, second: str) -> float:
        """The embedder's cosine of two short texts (cached)."""
        return float(self._vector(first) @ self._vector(second))

    def cosines(self, pairs: Sequence[Pair]) -> list[float]:
        """The cosine of each pair's two values (see ``embedder``)."""
        if self.embedder is None or not pairs:
            return [p.score for p in pairs]
        texts = list(dict.fromkeys(v for p in pairs for v in (p.first.value, p.second.value)))
        vectors = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        row = {text: i for i, text in enumerate(texts)}
        return [float(vectors[row[p.first.value]] @ vectors[row[p.second.value]]) for p in pairs]

    def decide(self, pair: Pair, cosine: float) -> Verdict:
        """The verdict on one pair given the cosine of its values (embeds a few of their
        words when the judge has an embedder)."""
        first, second = pair.first.value, pair.second.value
        apart = unaligned(
            first,
            second,
            self.similarity if self.embedder is not None else None,
            synonym_cosine=self.synonym_cosine,
            cover_cosine=self.cover_cosine,
        )
        apart = apart or difference(first, second)
        if apart is not None:
            return Verdict(False, apart)
        needed = self.same_key_cosine if _same_family(pair.first, pair.second) else self.same_cosine
        return Verdict(True, "similar") if cosine >= needed else Verdict(False, "distant")

    def _judge(self, pairs: Sequence[Pair]) -> list[Verdict | None]:
        cosines = self.cosines(pairs)
        if self.embedder is not None:
            self._prefetch(pairs)
        return [self.decide(p, c) for p, c in zip(pairs, cosines, strict=True)]

    async def judge(
        self, pairs: Sequence[Pair], *, account_id: str, user_id: str
    ) -> list[Verdict | None]:
        """A verdict on every pair (the offline judge always decides)."""
        return await asyncio.to_thread(self._judge, pairs)


# ---- the LLM judge ---------------------------------------------------------------------------
JUDGE_PROMPT = (
    "You keep the long-term memory of an assistant about one user, and decide which memories "
    "state the same fact twice. Two memories state the same fact when either says everything "
    "the other says, in other words, so one of them can go without losing anything. They are "
    "different facts when they differ in a person, a relation, a number, a time, a place, or "
    'whether something holds: "Walks 2 miles daily" and "Walks 3 miles daily" are different '
    'facts; so are "Has a sister named Ana" and "Has a cousin named Ana". For each numbered '
    "pair answer whether its two memories state the same fact and, when they do, one sentence "
    f"in the third person that states it (at most {MAX_MERGED_CHARS} characters). Answer with "
    'one JSON object and nothing else: {"pairs": [{"pair": 1, "same": true, "merged": "..."}, '
    '{"pair": 2, "same": false}]}.'
)
MIN_BATCH = 5
MAX_BATCH = 10


def batches(count: int, *, largest: int = MAX_BATCH) -> list[range]:
    """Split ``count`` pairs into as few prompts of at most ``largest`` pairs as possible,
    their sizes as even as can be (so each holds at least 5 when there are 5 pairs)."""
    if count <= 0:
        return []
    parts = math.ceil(count / largest)
    size, extra = divmod(count, parts)
    out, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        out.append(range(start, end))
        start = end
    return out


def _prompt(pairs: Sequence[Pair]) -> list[Message]:
    blocks = [f"Pair {n}:\nA: {p.first.value}\nB: {p.second.value}" for n, p in enumerate(pairs, 1)]
    return [
        {"role": "system", "content": JUDGE_PROMPT},
        {"role": "user", "content": "\n\n".join(blocks)},
    ]


def parse_verdicts(text: str, count: int) -> list[Verdict | None]:
    """The verdicts an answer gives on ``count`` pairs; ``None`` for each it does not
    answer usably (all of them when the answer is not the JSON object asked for)."""
    out: list[Verdict | None] = [None] * count
    try:
        data = json_object(text)
    except ValueError:
        return out
    entries = data.get("pairs")
    if not isinstance(entries, list):
        return out
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        number, same = entry.get("pair"), entry.get("same")
        if isinstance(number, bool) or not isinstance(number, int) or not isinstance(same, bool):
            continue
        if not 1 <= number <= count or out[number - 1] is not None:
            continue
        merged = entry.get("merged")
        worded = (
            merged.strip()
            if same and isinstance(merged, str) and 0 < len(merged.strip()) <= MAX_MERGED_CHARS
            else None
        )
        out[number - 1] = Verdict(same, "llm", worded)
    return out


class LLMJudge:
    """The same-fact judge that asks a model, 5-10 pairs a prompt (see the module).

    Args:
        llm: the model, normally the metered client (its calls go to the usage ledger).
        ledger: the usage ledger whose budget the judge respects (``None``: no budget).
        timeout: seconds one call may take.
        largest_batch: pairs per prompt at most (5-10).
    """

    name = "llm"

    def __init__(
        self,
        llm: LLM,
        *,
        ledger: UsageLedger | None = None,
        timeout: float = 30.0,
        largest_batch: int = MAX_BATCH,
    ) -> None:
        if not MIN_BATCH <= largest_batch <= MAX_BATCH:
            raise ValueError(f"largest_batch must be {MIN_BATCH}-{MAX_BATCH}")
        self.llm = llm
        self.ledger = ledger
        self.timeout = timeout
        self.largest_batch = largest_batch

    def available(self, account_id: str) -> bool:
        """False while the account's LLM budget for the day is low (background work waits)."""
        return self.ledger is None or not self.ledger.must_defer(account_id)

    async def judge(
        self, pairs: Sequence[Pair], *, account_id: str, user_id: str
    ) -> list[Verdict | None]:
        """Verdicts from the model, one prompt per batch.

        Raises:
            ProviderError: a call failed or timed out; nothing is decided then.
        """
        out: list[Verdict | None] = []
        with metered(account_id, OPERATION, f"user:{user_id}"):
            for part in batches(len(pairs), largest=self.largest_batch):
                chunk = [pairs[i] for i in part]
                try:
                    answer = await asyncio.wait_for(
                        self.llm.complete(_prompt(chunk), temperature=0.0, timeout=self.timeout),
                        self.timeout,
                    )
                except TimeoutError:
                    raise ProviderError("the same-fact judge timed out") from None
                verdicts = parse_verdicts(answer, len(chunk))
                if any(v is None for v in verdicts):
                    log.warning(
                        "same-fact judge left %d of %d pairs undecided",
                        sum(v is None for v in verdicts),
                        len(chunk),
                    )
                out.extend(verdicts)
        return out


def judge_from_settings(
    settings: Settings,
    *,
    embedder: Embedder | None,
    llm: LLM | None,
    ledger: UsageLedger | None = None,
) -> SameFactJudge:
    """The LLM judge when a model is configured (``llm``, normally the metered client), else
    the offline judge with the ``consolidation_same_*`` cosines."""
    if llm is not None:
        return LLMJudge(llm, ledger=ledger)
    return OfflineJudge(
        embedder,
        same_cosine=settings.consolidation_same_cosine,
        same_key_cosine=settings.consolidation_same_key_cosine,
    )
