"""Consent: which writes apply at once and which wait for the user.

The rule asks for the user's consent, given in the UI or in the conversation. Two kinds of
writes:

* **live** writes, the agent's tool calls during a conversation (``store_memory``,
  ``update_memory``), are made on what the user says in it: the user who says "call me
  Annie" in the call has given their consent. A live write applies at once, whatever its
  key and confidence, settling the key's pending proposals (confirming one that holds the
  same value, superseding the others). When it would have needed consent (a sensitive key,
  or a benign one too few signals corroborate), its audit history names
  :data:`CONSENTED_IN_CONVERSATION` as its actor rather than ``agent``.
* **inferred** writes (end-of-session extraction, the multi-fact pass, insights,
  consolidation) are what a model or a rule concluded, not what the user asked for. There
  are two kinds of keys:

  * **sensitive** keys (``preferred_name``, ``pronouns``, ``city``, ``language`` by
    default; ``CONFIDE_SENSITIVE_KEYS``) never change on an inference: one that would set
    one, the first time or again, is held as a proposal
    (:mod:`confide.conversation.proposals`). It applies when the user confirms it (API or
    review page), or when a live tool call states the key.
  * **benign** keys (every other) apply automatically only when two of these signals
    corroborate the value (:meth:`ConsentPolicy.signals`):

    - ``live``: a live tool call made it, during the conversation (the agent heard it);
    - ``confident``: the writer's confidence is at least ``CONFIDE_CONSENT_MIN_CONFIDENCE``
      (0.7, what the extractors give a plain statement);
    - ``heard``: the value is in the user's own words in this session (at least half of its
      content words appear in one user turn; extraction requires this of every memory);
    - ``repeated``: the user said it in two separate turns, or a pending proposal for the
      key already holds the same value (the user said it in an earlier session too).

    A benign inferred write with fewer signals is held as a proposal like a sensitive one
    (or, with no proposal store, not written).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from confide.conversation.validation import is_grounded

__all__ = [
    "CONSENTED_IN_CONVERSATION",
    "DEFAULT_SENSITIVE_KEYS",
    "ConsentPolicy",
    "Signal",
]

DEFAULT_SENSITIVE_KEYS: frozenset[str] = frozenset(
    {"preferred_name", "pronouns", "city", "language"}
)

CONSENTED_IN_CONVERSATION = "agent:consented-in-conversation"
"""The audit actor of a live write the user consented to in the conversation: one that would
have waited as a proposal had it been inferred (a sensitive key, or a benign one with too few
signals). Other live writes are audited as ``agent``."""


class Signal(StrEnum):
    """One piece of evidence that a benign value is what the user meant."""

    LIVE = "live"
    CONFIDENT = "confident"
    HEARD = "heard"
    REPEATED = "repeated"


@dataclass(frozen=True, kw_only=True)
class ConsentPolicy:
    """Sensitive keys, the confidence that counts as a signal, and how many signals a benign
    write needs (see the module docstring)."""

    sensitive_keys: frozenset[str] = field(default=DEFAULT_SENSITIVE_KEYS)
    min_confidence: float = 0.7
    required: int = 2

    @classmethod
    def of(cls, sensitive_keys: Collection[str], *, min_confidence: float = 0.7) -> ConsentPolicy:
        """A policy over ``sensitive_keys`` (compared case-insensitively)."""
        return cls(
            sensitive_keys=frozenset(k.lower() for k in sensitive_keys),
            min_confidence=min_confidence,
        )

    def is_sensitive(self, key: str) -> bool:
        """Whether ``key`` never changes on an inference alone."""
        return key.lower() in self.sensitive_keys

    def signals(
        self,
        *,
        value: str,
        confidence: float,
        live: bool,
        user_turns: Sequence[str] = (),
        pending_same: bool = False,
    ) -> frozenset[Signal]:
        """The signals that corroborate ``value``."""
        found: set[Signal] = set()
        if live:
            found.add(Signal.LIVE)
        if confidence >= self.min_confidence:
            found.add(Signal.CONFIDENT)
        said_in = sum(1 for turn in user_turns if is_grounded(value, turn))
        if said_in >= 1:
            found.add(Signal.HEARD)
        if said_in >= 2 or pending_same:
            found.add(Signal.REPEATED)
        return frozenset(found)

    def corroborated(self, signals: Collection[Signal]) -> bool:
        """Whether a benign write with these signals applies at once (an inferred one), or
        applies without naming the user's consent in its audit (a live one)."""
        return len(signals) >= self.required
