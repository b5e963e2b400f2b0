"""Offline extractor rules about people: the user's names, family, friends and pets."""

from __future__ import annotations

import re

from confide.llm.candidates import Candidate
from confide.llm.offline_vocab import (
    ADV,
    KIN,
    KIN_ADJ,
    KIN_PLURAL,
    NAME,
    NOT_NAMES,
    NUM,
    PET,
    PETS,
    REL,
    SEP,
    Build,
    F,
    H,
    P,
    Rule,
    cand,
    num,
    rel,
    rule,
)
from confide.types import MemoryType

__all__ = ["PEOPLE_RULES"]

# "'s name is", "is named", "is called", "called", ", " ... between a noun and a name.
_NAMED = r"(?:(?i:'s name is|'s name's|'s called|'s named|\s+is\s+named|\s+is\s+called|\s+named|"
_NAMED += r"\s+called|\s+by the name of|\s+is)|,)?\s+"


def _name(t: MemoryType, key: str, conf: float = 0.7) -> Build:
    def build(m: re.Match[str], _: str) -> list[Candidate]:
        return [] if m["n"] in NOT_NAMES else cand(t, key, m["n"], conf)

    return build


def _kin_name(m: re.Match[str], _: str) -> list[Candidate]:
    if m["n"] in NOT_NAMES:
        return []
    return cand(F, f"{rel(m['rel'])}_name", m["n"])


def _late(m: re.Match[str], _: str) -> list[Candidate]:
    who = rel(m["rel"])
    name = f" {m['n']}" if m["n"] and m["n"] not in NOT_NAMES else ""
    return cand(H, f"{who}_passed_away", f"{who}{name} has passed away")


def _passed(m: re.Match[str], _: str) -> list[Candidate]:
    who = rel(m["rel"])
    name = f" {m['n']}" if m["n"] and m["n"] not in NOT_NAMES else ""
    return cand(H, f"{who}_passed_away", f"{who}{name} passed away{m['when'] or ''}")


def _counts(m: re.Match[str], clause: str) -> list[Candidate]:
    out: list[Candidate] = []
    past = m["verb"].lower().endswith("had")
    rest = clause[m.start("first") :]
    pairs = re.finditer(
        rf"(?i:(?P<n>{NUM})\s+(?:(?:little|old|young|grown|beautiful|wonderful|lovely|big|"
        rf"small|sweet|grown-up|adult|rescue|pet|black|white|orange|tabby)\s+)*"
        rf"(?P<what>{KIN}|{PET}))\b",
        rest,
    )
    for pair in pairs:
        n, what = num(pair["n"]), pair["what"].lower()
        if what in KIN_PLURAL:
            if n == 1 and what in {"kid", "child", "kids", "children"}:
                continue  # "a kid" is more often a story than a count
            out += cand(F, f"{KIN_PLURAL[what]}_count", f"{n} {what}")
            continue
        if past:
            continue  # "I had two dogs" is probably no longer true
        species = PETS[what]
        tail = rest[pair.end() :]
        names = re.match(
            rf"\s*(?:,|(?i:named|called))\s*(?P<names>{NAME}(?:(?:\s*,\s*|\s+and\s+){NAME})*)",
            tail,
        )
        if n == 1 and names:
            out += cand(F, f"pet_{species}_name", names["names"])
        elif n == 1 and re.match(rf"\s+{NAME}", tail):
            continue  # "a dog Rusty": the pet-name rule reads it
        else:
            out += cand(F, f"pet_{species}_count", f"{n} {what}")
            if names:
                out += cand(F, f"pet_{species}_names", names["names"])
    return out


def _pet_name(m: re.Match[str], _: str) -> list[Candidate]:
    if m["n"] in NOT_NAMES:
        return []
    return cand(F, f"pet_{PETS[m['pet'].lower()]}_name", m["n"])


_WHEN = (
    r"(?P<when>(?i:\s+(?:back\s+)?(?:\w+\s+(?:years?|months?|weeks?)\s+ago|last\s+\w+|"
    r"in\s+\d{4}|this\s+past\s+\w+)))?"
)
_MY = rf"(?i:my|our)\s+(?:(?i:{KIN_ADJ})\s+)*"

PEOPLE_RULES: tuple[Rule, ...] = (
    # names
    rule(rf"(?i:my name is|my name's)\s+(?P<n>{NAME})", _name(F, "name")),
    rule(
        rf"(?i:call me|calls me|known as|i go by|i\s+\w+\s+go by|i'd like to be called|"
        rf"i like to be called|i prefer to be called|i prefer|i'd prefer)\s+(?P<n>{NAME})\b"
        r"(?!\s+(?i:over|to|than)\b)",
        _name(P, "preferred_name"),
    ),
    rule(
        rf"^(?i:(?:hi|hello|hey|oh)\s*,?\s*)?(?i:i'm|i am|this is|it's|it is)\s+(?P<n>{NAME})"
        r"(?=\s*(?:,|\.|!|$|(?i:here|speaking|by the way|calling)))",
        _name(F, "name", 0.6),
    ),
    rule(
        r"(?i:my pronouns are)\s+(?P<p>[a-z]+/[a-z]+(?:/[a-z]+)?)",
        lambda m, _: cand(F, "pronouns", m["p"].lower()),
    ),
    rule(
        r"(?i:my (?:first|native|main|mother) (?:language|tongue) is|i speak|grew up speaking)"
        r"\s+(?P<l>[A-Z][a-z]+)",
        lambda m, _: cand(F, "language", m["l"]),
    ),
    # family: names, deaths, marriage, counts
    rule(
        rf"{_MY}(?P<rel>(?i:{REL})){_NAMED}(?P<n>{NAME})\b",
        _kin_name,
        overlap=True,
    ),
    rule(
        rf"(?i:my|our)\s+(?i:late)\s+(?P<rel>(?i:{REL}))(?:,?\s+(?P<n>{NAME}))?",
        _late,
        overlap=True,
    ),
    rule(
        rf"(?i:my|our)\s+(?P<rel>(?i:{REL}))(?:,?\s+(?P<n>{NAME}),?)?\s+(?i:passed away|"
        rf"passed on|passed|died){_WHEN}",
        _passed,
        overlap=True,
    ),
    rule(
        rf"(?i:i lost my|we lost my|we lost our)\s+(?P<rel>(?i:{REL}))(?:,?\s+(?P<n>{NAME}),?)?"
        rf"{_WHEN}",
        _passed,
        overlap=True,
    ),
    rule(
        rf"(?i:married to)\s+(?P<n>{NAME})",
        lambda m, _: cand(F, "spouse_name", m["n"]),
        overlap=True,
    ),
    rule(
        r"(?i:i'm|i am|i've been)\s+(?:a\s+)?(?P<s>(?i:widow|widower|divorced|single|married|"
        r"widowed|separated))\b(?!\s+(?i:to|for|since)\b)",
        lambda m, _: cand(F, "marital_status", m["s"].lower()),
    ),
    rule(
        rf"(?P<verb>(?i:i|we|my (?:wife|husband|partner) and i){SEP}{ADV}"
        rf"(?i:have got|have|'ve got|'ve|got|keep|own|had|raised))\s+(?P<first>{NUM})\b",
        _counts,
        overlap=True,
    ),
    # pets
    rule(
        rf"(?i:my|our|a|an)\s+(?:(?i:{KIN_ADJ}|golden|black|white|orange|tabby|grey|gray|"
        rf"german|border|yellow|chocolate|rescue|pet|[a-z]+-haired)\s+){{0,3}}"
        rf"(?P<pet>(?i:{PET})){_NAMED}(?P<n>{NAME})\b",
        _pet_name,
        overlap=True,
    ),
)
