"""Offline extractor rules about the user's life: places, home, getting around, work history."""

from __future__ import annotations

import re

from confide.llm.candidates import Candidate
from confide.llm.offline_vocab import (
    ADV,
    END,
    KIN_ADJ,
    PLACE,
    REL,
    SEP,
    F,
    H,
    Rule,
    cand,
    occupation_words,
    rel,
    rule,
)

__all__ = ["LIFE_RULES"]

# Who may be the subject of a statement about the user's household.
_WE = r"\b(?:(?i:i|we)|(?i:my|our)\s+[^,.;!?]{1,30}?\s+(?i:and i))"
# "a small town called", "a farm in", "a little village outside of" before a place name.
_PLACE_INTRO = r"(?:(?i:a|an|the)\s+[^,.;A-Z]*?(?i:called|named|in|outside of|outside|near)\s+)?"
_YEARS = r"(?P<dur>\s+for\s+(?:[\w-]+\s+)?(?:[\w-]+\s+)?years|\s+since\s+\d{4})?"


def _former(m: re.Match[str], _: str) -> list[Candidate]:
    return cand(H, "former_occupation", m["occ"] + (m["dur"] or ""))


def _current(m: re.Match[str], _: str) -> list[Candidate]:
    occ = occupation_words(m["occ"])
    return cand(F, "occupation", occ) if occ else []


LIFE_RULES: tuple[Rule, ...] = (
    # places
    rule(
        rf"{_WE}{SEP}{ADV}(?i:live|'ve lived|have lived|'ve been living|have been living|"
        rf"am living|'m living|are living|'re living|reside|lived)\s+"
        rf"(?i:in|just outside(?: of)?|outside(?: of)?|near|over in|down in|up in)\s+"
        rf"{_PLACE_INTRO}(?P<p>{PLACE})",
        lambda m, _: cand(F, "city", m["p"]),
    ),
    rule(
        rf"(?:^|\b(?i:originally),?\s+)(?i:i'm|i am|i come|we're|we are)\s+{ADV}(?i:originally\s+)?"
        rf"(?i:from)\s+{_PLACE_INTRO}(?P<p>{PLACE})",
        lambda m, _: cand(H, "hometown", m["p"]),
    ),
    rule(
        rf"(?i:i grew up|i was raised|i was brought up|i spent my (?:childhood|early years|"
        rf"youth|whole childhood|younger years)|i lived as a (?:child|kid|girl|boy))\s+"
        rf"(?i:in|on|near|outside(?: of)?)\s+{_PLACE_INTRO}(?P<p>{PLACE})",
        lambda m, _: cand(H, "hometown", m["p"]),
    ),
    rule(
        rf"(?i:i was born(?: and raised| and bred)? in)\s+{_PLACE_INTRO}(?P<p>{PLACE})",
        lambda m, _: cand(H, "birthplace", m["p"]),
    ),
    rule(
        rf"(?i:moved|relocated|retired)\s+(?:(?i:down|up|out|over|back)\s+)?(?i:to)\s+"
        rf"(?P<p>{PLACE})(?P<when>(?i:\s+(?:in\s+\d{{4}}|last\s+\w+|\w+\s+years\s+ago)))?",
        lambda m, _: cand(H, "moved_to", m["p"] + (m["when"] or "")),
    ),
    # living situation
    rule(
        r"(?i:liv(?:e|ing)\s+(?P<how>alone|by myself|on my own))",
        lambda m, _: cand(F, "living_situation", "lives " + m["how"].lower()),
    ),
    rule(
        r"(?i:^(?:well,?\s+)?(?:it's|it is)\s+just\s+(?:me|myself)"
        r"(?:\s+and\s+(?P<with>(?:the|my)\s+[a-z]+))?"
        r"(?=\s+(?:here|now|these days|at home|in (?:this|the|my)\b)|\s*[,.;!?]|$))",
        lambda m, _: cand(
            F, "living_situation", "lives alone" + (f" with {m['with']}" if m["with"] else "")
        ),
    ),
    rule(
        rf"{_WE}{SEP}{ADV}(?i:live with|'m living with|am living with|stay with|live together with)"
        r"\s+(?P<who>(?i:my|our)\s+[^,.;!?]+)",
        lambda m, _: cand(F, "living_situation", "lives with " + m["who"]),
    ),
    rule(
        rf"(?i:my|our)\s+(?:(?i:{KIN_ADJ})\s+)*(?P<rel>(?i:{REL}))\s+(?:[A-Z][a-z]+\s+)?"
        r"(?i:lives with me|is living with me|has moved in with me|moved in with me|"
        r"stays with me|lives with us|moved in with us)",
        lambda m, _: cand(F, "living_situation", f"lives with {rel(m['rel'])}"),
    ),
    rule(
        r"(?i:(?:moved into|moved to|live in|living in|i'm in|i am in|we're in|stay in|"
        r"staying in)\s+(?:an?\s+|the\s+)?"
        r"(?P<home>assisted living(?: facility| home| community| place)?|nursing home|"
        r"retirement (?:home|community|village|complex)|care home|senior (?:living|apartments?|"
        r"home|community|housing|center)|group home|memory care))",
        lambda m, _: cand(F, "living_situation", "lives in " + m["home"].lower()),
    ),
    # mobility and hearing
    rule(
        r"(?i:(?:use|using|rely on|need|walk with|get around with|got|have)\s+(?:an?\s+|my\s+)?"
        r"(?P<aid>mobility scooter|wheelchair|walker|rollator|cane|walking stick|scooter)"
        r"|(?:i'm|i am) in a (?P<aid2>wheelchair))",
        lambda m, _: cand(F, "mobility", "uses a " + (m["aid"] or m["aid2"]).lower()),
    ),
    rule(
        r"(?i:(?:can't|cannot|can not|don't|do not|no longer|stopped|had to stop|quit|gave up)\s+"
        r"(?:drive|driving)(?:\s+anymore|\s+any more)?(?P<tail>\s+(?:since|after|because|"
        r"last|a few|\w+\s+years\s+ago)[^,.;!?]*)?)",
        lambda m, _: cand(F, "mobility", m[0].lower()),
    ),
    rule(
        r"(?i:(?:gave up|lost|surrendered|turned in|handed in|don't have)\s+my\s+(?:driver's\s+|"
        r"driving\s+)?licen[cs]e(?P<tail>\s+[^,.;!?]*)?)",
        lambda m, _: cand(F, "mobility", m[0].lower()),
    ),
    rule(
        r"(?i:(?:trouble|difficulty|a hard time|problems)\s+(?:with|walking|climbing|getting)\s+"
        r"(?:up\s+|down\s+)?(?:the\s+)?(?P<what>stairs|steps|walking|far))",
        lambda m, _: cand(F, "mobility", "has " + m[0].lower()),
    ),
    rule(
        r"(?i:(?:don't|do not|can't|cannot|can no longer)\s+(?:get around|walk)\s+"
        r"(?:(?:so|very|too|as)\s+)?(?:well|easily|much|far|good|quickly|fast)"
        r"(?:\s+(?:anymore|any more|these days|now))?(?P<tail>\s+(?:since|after|because)\s+"
        r"[^,.;!?]+)?)",
        lambda m, _: cand(F, "mobility", m[0].lower()),
    ),
    rule(
        r"(?i:hard of hearing|(?:wear|have|use|got)\s+(?:a\s+)?hearing aids?|my hearing "
        r"(?:isn't|is not|is|'s|has gotten|is getting) (?:so |very |too )?(?:great|good|bad|"
        r"poor|worse|what it used to be))",
        lambda m, _: cand(F, "hearing", m[0].lower()),
        overlap=True,
    ),
    # work and life history
    rule(
        r"(?i:i'm a retired|i am a retired|i retired as an?|i'm retired from being an?)\s+"
        r"(?P<occ>[a-z][a-z ]*?)(?P<dur>)" + END,
        _former,
    ),
    rule(
        r"(?i:i worked as|i used to work as|i used to be|i was|i spent\s+[\w-]+\s+years\s+as)\s+"
        r"(?:an?\s+)(?P<occ>[a-z][a-z ]*?)" + _YEARS + r"(?=\s+(?i:in|at|for|with|until|till|"
        r"before|when)\b|\s*[,.;!?]|$)",
        lambda m, c: _former(m, c) if occupation_words(m["occ"]) or " as" in m[0] else [],
    ),
    rule(
        r"(?i:i spent\s+(?P<years>[\w-]+\s+years)\s+working\s+(?P<where>(?:for|at|in)\s+"
        r"[^,.;!?]+?))" + END,
        lambda m, _: cand(H, "former_occupation", f"worked {m['where']} for {m['years']}"),
    ),
    rule(
        r"(?i:i taught|i used to teach)\s+(?P<occ>[a-z][a-z ]*?)(?P<dur>)(?=\s+(?:for|at|in)\b|"
        r"\s*[,.;!?]|$)",
        lambda m, _: cand(H, "former_occupation", "taught " + m["occ"]),
    ),
    rule(
        rf"{_WE}\s+(?i:(?:ran|owned|used to run|used to own|had)\s+an?\s+)"
        r"(?P<b>[a-z]+(?: [a-z]+)?)(?=\s+(?:for|in|on|until|back)\b|\s*[,.;!?]|$)"
        r"(?P<dur>\s+for\s+[\w-]+\s+years)?",
        lambda m, _: (
            cand(H, "former_business", "ran a " + m["b"] + (m["dur"] or ""))
            if m["b"].split()[-1]
            in {
                "store",
                "shop",
                "bakery",
                "restaurant",
                "diner",
                "farm",
                "business",
                "salon",
                "garage",
                "cafe",
                "bar",
                "pub",
                "company",
                "firm",
                "practice",
                "motel",
                "hotel",
                "inn",
                "ranch",
                "nursery",
                "pharmacy",
                "deli",
                "bookstore",
                "newsagent",
            }
            else []
        ),
    ),
    rule(
        rf"(?i:i(?:'m| am)?)\s+{ADV}(?i:work|working)\s+(?:(?i:part[- ]time|full[- ]time|"
        r"a few hours a week|a couple of days a week|nights|mornings)\s+)?(?i:as)\s+(?i:an?)\s+"
        r"(?P<occ>[a-z][a-z ]*?)" + END,
        lambda m, _: cand(F, "occupation", m["occ"]),
    ),
    rule(
        r"(?i:i'm an?|i am an?)\s+(?P<occ>[a-z][a-z ]*?)" + END,
        _current,
    ),
    rule(rf"(?i:i work (?:at|for))\s+(?P<org>{PLACE})", lambda m, _: cand(F, "employer", m["org"])),
    rule(
        rf"(?i:my)\s+(?:(?i:{KIN_ADJ})\s+)*(?P<rel>(?i:{REL}))(?:\s+[A-Z][a-z]+)?\s+"
        r"(?i:served in|was in|joined|enlisted in)\s+(?:the\s+)?(?P<b>Army|Navy|Air Force|"
        r"Marines|Marine Corps|Coast Guard|National Guard)",
        lambda m, _: cand(H, f"{rel(m['rel'])}_military_service", "served in the " + m["b"]),
    ),
    rule(
        r"(?i:served in|was in|joined|enlisted in|i was an?)\s+(?:the\s+)?"
        r"(?P<b>Army|Navy|Air Force|Marines|Marine Corps|Coast Guard|National Guard)",
        lambda m, _: cand(H, "military_service", "served in the " + m["b"]),
    ),
    rule(
        r"(?i:i retired|i've been retired|i have been retired)"
        r"(?P<when>\s+(?:in\s+\d{4}|\w+\s+years\s+ago|last\s+year|since\s+\d{4}|for\s+[\w-]+\s+years))?",
        lambda m, _: cand(H, "retirement", "retired" + (m["when"] or "")),
    ),
    rule(
        r"(?i:(?:i was|we were|i've been|we've been|i have been|we have been) married"
        r"(?: for)?)\s+(?P<d>(?:\d+|[a-z]+(?:-[a-z]+)?)\s+years)",
        lambda m, _: cand(H, "marriage", "married for " + m["d"]),
    ),
    rule(
        rf"(?i:my)\s+(?P<rel>(?i:{REL}))\s+(?i:was)\s+(?i:an?)\s+(?P<occ>[a-z][a-z ]*?)" + END,
        lambda m, _: (
            cand(H, f"{rel(m['rel'])}_occupation", m["occ"]) if occupation_words(m["occ"]) else []
        ),
    ),
)
