"""The offline extractor: turns plain user speech into typed memories without any model.

It is the embedded default when no LLM is configured. It reads only the user's turns, one
clause at a time, through a table of hand-written patterns (``offline_rules`` and its topic
modules) covering:
names and preferred names, pronouns, language; family members (with names and counts) and
pets (species, names, counts); where the user lives, grew up, was born or moved; likes,
dislikes, favourites and preferences; current and former work, military service,
retirement and marriage; living situation, mobility and hearing; appointments and visits
with their time words; feelings, sleep and pain; health conditions and allergies; daily
routines; how the user wants to be spoken to; where they are right now.

Limits, by design (see docs/conversation.md):

* English only, first person only ("I", "my", "we"). Sentences that ask, suppose or report
  ("Do you have kids?", "If I had a dog...", "My friend says...") are skipped whole, by
  word-based tests that also skip some real statements.
* Names must be capitalised; transcripts without capital letters lose them.
* No coreference: "She visits on Sunday" does not know who "she" is.
* No inference: insights (e.g. "seems lonelier on weekends") are never produced.
* Keys come from a fixed vocabulary (``key_vocabulary``), never from the words used: "I hate
  my ex-husband Robert" is ``dislikes`` with the words in the value; a second dislike in the
  same call or already stored is ``dislikes.2`` (duplicates of stored values are caught by
  value, downstream).
* One value per rule key per call: the first clause that produces one wins.

Values are written about the user in the third person, as the writing rules ask of every
memory (:func:`~confide.llm.third_person.about_user`): ``I live alone`` is ``living_situation``
= ``The user lives alone``, ``My back is killing me`` is ``pain`` = ``The user's back is
killing them``; a name, a place or a count stays as it was said (``Maya``, ``2 daughters``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import replace

from confide.llm.candidates import Candidate, TurnLike
from confide.llm.key_vocabulary import to_vocabulary
from confide.llm.offline_rules import RULES
from confide.llm.third_person import about_user, third_person

__all__ = ["OfflineExtractor", "split_clauses"]

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_CLAUSE = re.compile(
    r",?\s+(?:and|but|so)\s+(?=(?:I|I'm|I've|I'll|we|We|we're|my|My)\b)|,\s+but\s+|\s+-+\s+"
)


# A request about how to talk to the user is kept even when phrased as a question.
_REQUEST = re.compile(
    r"(?i)^(?:please\s+)?(?:could|can|would|will)\s+you\s+(?:please\s+)?"
    r"(?:speak|talk)\b"
)
_QUESTION = re.compile(
    r"(?i)^(?:(?:oh|well|so|and|hey|hmm|um)\s*,?\s+)?(?:what|who|whom|whose|where|when|why|how|"
    r"which|do|does|did|is|are|was|were|can|could|would|will|should|shall|have|has|had|"
    r"may|might|am)\b(?!')"
)
# Hypotheticals, wishes and wondering: nothing in them is a fact about the user.
_HYPOTHETICAL = re.compile(
    r"(?i)\b(?:if|unless|suppose|supposing|imagine|pretend|wonder|wondering|wish|whether)\b|"
    r"\b(?:i|we)\s+(?:might|may|should|could|would|ought to)\s+(?!rather\b|prefer\b)|"
    r"\b(?:i|we)'d\s+(?!rather\b|prefer\b|much\b|far\b|really\b|like to be called\b)|"
    r"\bmaybe\s+(?:i|we)\b|\bthinking (?:about|of)\b"
)
# Someone else's words or opinions: "my friend says she hates the cold".
_REPORTED = re.compile(
    r"(?i)\b(?!i\b)(?:[a-z']+)\s+(?:says|said|told me|tells me|thinks|thought|believes|"
    r"reckons|claims|mentioned|keeps saying|wants me to|asked me|told him|told her|told us)\b"
)


def _asserts(sentence: str) -> bool:
    """Whether a sentence states something, rather than asks, supposes or reports it."""
    s = sentence.strip()
    if _REQUEST.match(s):
        return True
    if s.endswith("?") or _QUESTION.match(s):
        return False
    return not (_HYPOTHETICAL.search(s) or _REPORTED.search(s))


def split_clauses(text: str) -> list[str]:
    """Split speech into sentences, then at ``and``/``but``/``so`` before a new subject.

    Questions, hypotheticals ("if I had a dog") and reported speech ("my friend says...")
    are dropped: they yield no clauses.
    """
    text = text.replace("’", "'").replace("‘", "'")
    out: list[str] = []
    for sentence in _SENTENCE.split(text):
        if not _asserts(sentence):
            continue
        out += [c.strip() for c in _CLAUSE.split(sentence) if c and c.strip()]
    return out


def _overlaps(span: tuple[int, int], claimed: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in claimed)


class OfflineExtractor:
    """A rule-based :class:`~confide.conversation.extraction.Extractor` that needs no model."""

    name = "offline"

    def extract_text(self, text: str) -> list[Candidate]:
        """Candidates found in one piece of user speech, keys from the fixed vocabulary."""
        return self._keyed(self._found(text).values(), ())

    @staticmethod
    def _keyed(found: Collection[tuple[Candidate, str]], skip: Collection[str]) -> list[Candidate]:
        """The candidates with vocabulary keys, numbered past ``skip`` and each other, their
        values written about the user (a value that cannot be is dropped)."""
        taken = set(skip)
        out = []
        for candidate, clause in found:
            keyed = to_vocabulary(candidate, taken)
            if keyed.key in taken:
                continue  # a single-valued key already stored
            told = about_user(candidate.value, clause)
            if told is None:
                continue
            # The key's own words, when the vocabulary moved them into the value, lead it.
            moved = keyed.value[: len(keyed.value) - len(candidate.value)]
            taken.add(keyed.key)
            out.append(replace(keyed, value=third_person(moved) + told))
        return out

    @staticmethod
    def _found(text: str) -> dict[str, tuple[Candidate, str]]:
        """What the rules find, by the rule's own key (first value per key), each with the
        clause it was found in."""
        found: dict[str, tuple[Candidate, str]] = {}
        for clause in split_clauses(text):
            claimed: list[tuple[int, int]] = []
            for rule in RULES:
                for match in rule.pattern.finditer(clause):
                    if not rule.overlap and _overlaps(match.span(), claimed):
                        continue
                    candidates = rule.build(match, clause)
                    if candidates and not rule.overlap:
                        claimed.append(match.span())
                    for candidate in candidates:
                        found.setdefault(candidate.key, (candidate, clause))
        return found

    async def extract(
        self, turns: Sequence[TurnLike], *, skip_keys: Collection[str] = ()
    ) -> list[Candidate]:
        """Candidates from the user's turns, without keys in ``skip_keys`` (case-insensitive).

        Never raises for unusual input; text it does not understand yields nothing.
        """
        skip = {k.lower() for k in skip_keys}
        found: dict[str, tuple[Candidate, str]] = {}
        for turn in turns:
            if turn.speaker != "user":
                continue
            for key, candidate in self._found(turn.summary).items():
                found.setdefault(key, candidate)
        return self._keyed(list(found.values()), skip)
