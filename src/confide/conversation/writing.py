"""The writing rules every model-written memory passes before it is stored.

Two guards, both deterministic (no model, no embedder), both *reject or trim*, never rewrite:

* the **semantic** guard (facts, preferences, insights, multi-fact candidates, summary
  facts, values written through the memory tools): a complete, self-contained sentence in
  the third person, no pronoun that points outside the memory, one or two sentences, at
  most 280 characters;
* the **episodic** guard (session and conversation summaries): what was discussed, decided
  or done, in the past tense, in the third person.

Both guards refuse a question (a sentence ending in ``?``) and an instruction (a memory
opening with ``Please``, ``Remember``, ``Remind``, ``Don't``, ``Never``, ``Always``...): a
memory says what is known, not what to ask or do.

Trimming removes what a model adds around a memory (wrapping quotes, a list marker, a label
such as ``Insight:``, sentences past the second, a second sentence that takes the text over
280 characters); everything else that breaks a rule rejects the text. A :class:`Verdict`
says which; a :class:`WritingTally` counts verdicts so the *first-pass rate* (accepted
unchanged / all) can be reported. Nothing here logs or keeps the text.

The checks are heuristics over words, chosen to be strict about what makes a memory
unusable later (``I``/``you``, a leading ``She`` whose referent is gone, a fragment with
no verb, a summary in the present tense) and lenient elsewhere: a pronoun after its
antecedent (``Ann grows roses in her garden``) is self-contained and passes.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from enum import StrEnum

from confide.conversation.validation import MAX_EXTRACTED_VALUE_CHARS

__all__ = [
    "Outcome",
    "Verdict",
    "WritingTally",
    "check_episodic",
    "check_semantic",
]

MAX_SEMANTIC_SENTENCES = 2

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")
_LEADING_MARK = re.compile(r"^(?:[-*\u2022]\s+|\d{1,2}[.)]\s+)")
_LABEL = re.compile(
    r"^(?:insight|fact|memory|note|summary|candidate|answer)\s*\d*\s*:\s+", re.IGNORECASE
)
_WORD = re.compile(r"[A-Za-z0-9]+(?:['\u2019][A-Za-z]+)*")
# Quoted words and pronoun sets ("she/her") are mentioned, not used as pronouns.
_QUOTED = re.compile(r"\"[^\"]*\"|\u201c[^\u201d]*\u201d|\b[A-Za-z]+(?:/[A-Za-z]+)+\b")


def _vocabulary(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"\S+", text))


_FIRST_SECOND_PERSON = _vocabulary(
    "i i'm i've i'd i'll me my mine myself we we're we've we'd we'll us our ours ourselves "
    "you you're you've you'd you'll your yours yourself yourselves"
)
# A memory that opens with one of these points at something said before it.
_DANGLING_OPENERS = _vocabulary(
    "he she they it him her them his hers their theirs its this that these those also "
    "and but or so then there here"
)
_DANGLING_ENDINGS = _vocabulary(
    "and or but because the a an to of with for in on at that which who whose than as "
    "about from by into my his her their its is are was were"
)
_DETERMINERS = _vocabulary(
    "a an the this that these those my your his her its our their some many few several "
    "every each no any all both two three four five six seven eight nine ten of on in at "
    "for with by from to into about over under after before during per"
)
# "many hobbies", "and interests": a word after these is a noun, not a verb ending in -s.
_NOT_BEFORE_VERB = _DETERMINERS | {"and", "or", "but", "nor"}
_VERBS = _vocabulary(
    """is are was were be been being am has have had does do did can could will would shall
    should may might must likes loves hates enjoys prefers wants needs lives works plays
    grows keeps visits goes takes makes uses feels seems appears tends values wears drives
    walks runs reads watches cooks bakes owns speaks knows thinks believes misses worries
    attends volunteers teaches studies cares calls says talks spends gets gives sees hopes
    plans avoids finds struggles relies trusts remembers forgets follows collects
    said told went came took made gave got felt thought spoke wrote met left found knew saw
    bought brought chose ran sat stood began became kept held lost paid sent spent taught
    understood won ate drank drove flew forgot grew heard led meant slept sold fell broke
    caught built fought hid rode rose sang shook threw woke wore put read set let quit
    agreed"""
)
_IRREGULAR_PAST = _vocabulary(
    """was were had did said told went came took made gave got felt thought spoke wrote met
    left found knew saw bought brought chose ran sat stood began became kept held lost paid
    sent spent taught understood won ate drank drove flew forgot grew heard led meant slept
    sold fell broke caught built fought hid rode rose sang shook threw woke wore"""
)
# A memory opening with one of these tells the agent what to do instead of what is known.
_INSTRUCTION_OPENERS = _vocabulary(
    "please kindly remember remind don't never always ensure ignore let's"
)
_NOT_PAST = _vocabulary(
    "need speed bed red seed feed bleed breed indeed hundred shed weed deed greed seaweed tweed"
)


class Outcome(StrEnum):
    """What a guard made of a text."""

    ACCEPTED = "accepted"
    """Stored as the model wrote it."""
    TRIMMED = "trimmed"
    """Stored after trimming."""
    REJECTED = "rejected"
    """Not stored."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A guard's answer: the text to store (``None`` when rejected) and why it changed.

    ``reason`` names the broken rule (``first_person``, ``too_long``, ...) and never quotes
    the text.
    """

    outcome: Outcome
    text: str | None
    reason: str | None = None

    @property
    def accepted(self) -> bool:
        """Whether there is a text to store (accepted as written or trimmed)."""
        return self.text is not None


def _words(text: str) -> list[str]:
    return [w.lower().replace("\u2019", "'") for w in _WORD.findall(_QUOTED.sub(" mention ", text))]


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def _clean(text: str) -> str:
    """Whitespace collapsed, wrapping quotes, a list marker and a label removed."""
    out = " ".join(text.split())
    while True:
        before = out
        out = _LEADING_MARK.sub("", out)
        out = _LABEL.sub("", out)
        if len(out) >= 2 and out[0] == out[-1] and out[0] in "\"'`":
            out = out[1:-1].strip()
        if out == before:
            return out


def _has_verb(words: list[str]) -> bool:
    for i, word in enumerate(words):
        if word in _VERBS:
            return True
        if i == 0 or words[i - 1] in _NOT_BEFORE_VERB or words[i - 1].isdigit():
            continue
        if len(word) >= 4 and (word.endswith("ed") or word.endswith("s")) and word[-2:] != "ss":
            return True
    return False


def _is_past(words: list[str]) -> bool:
    for i, word in enumerate(words):
        if word in _IRREGULAR_PAST:
            return True
        if word in _NOT_PAST or len(word) < 4 or not word.endswith("ed"):
            continue
        if i > 0 and words[i - 1] in ("the", "a", "an"):
            continue  # "the needed rest" reads as an adjective, not a verb
        return True
    return False


def _common_problem(text: str) -> str | None:
    """The rule ``text`` breaks that both guards enforce, or ``None``."""
    if not text.strip():
        return "empty"
    words = _words(text)
    if any(w in _FIRST_SECOND_PERSON for w in words):
        return "not_third_person"
    if words and words[0] in _DANGLING_OPENERS:
        return "not_self_contained"
    ends = text.endswith(("...", "\u2026", ",", ":", ";", "-"))
    if ends or (words and words[-1] in _DANGLING_ENDINGS):
        return "incomplete"
    if any(s.rstrip(" \"'\u201d)").endswith("?") for s in _sentences(text)):
        return "question"
    if words and words[0] in _INSTRUCTION_OPENERS:
        return "instruction"
    return None


def _verdict(original: str, text: str | None, reason: str | None) -> Verdict:
    if text is None:
        return Verdict(Outcome.REJECTED, None, reason)
    if text == original.strip():
        return Verdict(Outcome.ACCEPTED, text)
    return Verdict(Outcome.TRIMMED, text, reason or "trimmed")


MAX_KEYED_FRAGMENT_WORDS = 8


def check_semantic(
    text: str,
    *,
    keyed: bool = False,
    max_sentences: int = MAX_SEMANTIC_SENTENCES,
    max_chars: int = MAX_EXTRACTED_VALUE_CHARS,
) -> Verdict:
    """The semantic guard: a complete, self-contained, third-person memory of one or two
    sentences and at most 280 characters, with no pronoun pointing outside it.

    Beyond two sentences only the first two are kept; if those pass 280 characters the
    last ones are dropped until they fit; a first sentence over 280 characters is rejected.
    With ``keyed`` the text is the value of a named key (``city``: ``Tucson``): a short
    fragment of at most eight words without a verb is complete together with its key, so it
    passes; a value written as a sentence must still be a complete one. ``max_sentences``
    and ``max_chars`` are for a memory whose prompt sets other bounds (an app memory's
    paragraph: at most 4 sentences and 200 characters); the other rules are the same.
    """
    cleaned = _clean(text)
    reason = None if cleaned == text.strip() else "decorated"
    sentences = _sentences(cleaned)
    if len(sentences) > max_sentences:
        cleaned, reason = " ".join(sentences[:max_sentences]), "too_many_sentences"
        sentences = sentences[:max_sentences]
    while len(cleaned) > max_chars and len(sentences) > 1:
        sentences = sentences[:-1]
        cleaned, reason = " ".join(sentences), "too_long"
    if len(cleaned) > max_chars:
        return _verdict(text, None, "too_long")
    problem = _common_problem(cleaned)
    if problem is not None:
        return _verdict(text, None, problem)
    words = _words(cleaned)
    if words and words[0] in _VERBS:
        return _verdict(text, None, "no_subject")
    fragment = len(words) < 3 or not _has_verb(words)
    if keyed and fragment and len(words) <= MAX_KEYED_FRAGMENT_WORDS:
        return _verdict(text, cleaned, reason)
    if fragment:
        return _verdict(text, None, "incomplete")
    return _verdict(text, cleaned, reason)


def check_episodic(text: str) -> Verdict:
    """The episodic guard: what was discussed, decided or done, told in the past tense and
    the third person (its first sentence carries a past-tense verb).

    Only decoration is trimmed (quotes, a list marker, a label); length is the caller's
    rule (a summary has its own).
    """
    cleaned = _clean(text)
    reason = None if cleaned == text.strip() else "decorated"
    problem = _common_problem(cleaned)
    if problem is not None:
        return _verdict(text, None, problem)
    sentences = _sentences(cleaned) or [cleaned]
    if not _is_past(_words(sentences[0])):
        return _verdict(text, None, "not_past_tense")
    return _verdict(text, cleaned, reason)


class WritingTally:
    """Counts of verdicts by outcome, for the first-pass rate; thread-safe, never texts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[Outcome, int] = dict.fromkeys(Outcome, 0)
        self.reasons: dict[str, int] = {}

    def add(self, verdict: Verdict) -> Verdict:
        """Count ``verdict`` and return it (so a check can be counted where it is made)."""
        with self._lock:
            self.counts[verdict.outcome] += 1
            if verdict.reason is not None:
                self.reasons[verdict.reason] = self.reasons.get(verdict.reason, 0) + 1
        return verdict

    def merge(self, other: WritingTally) -> None:
        """Add ``other``'s counts to these."""
        with self._lock:
            for outcome, n in other.counts.items():
                self.counts[outcome] += n
            for reason, n in other.reasons.items():
                self.reasons[reason] = self.reasons.get(reason, 0) + n

    @property
    def total(self) -> int:
        """Texts checked."""
        return sum(self.counts.values())

    @property
    def first_pass_rate(self) -> float | None:
        """Share of texts accepted unchanged (``None`` before any check)."""
        total = self.total
        return None if total == 0 else self.counts[Outcome.ACCEPTED] / total
