"""Offline extractor rules about appointments, visits, health and how the user feels."""

from __future__ import annotations

import re

from confide.llm.candidates import Candidate
from confide.llm.offline_vocab import (
    ADV,
    APPOINTMENT_WHAT,
    BODY,
    CONDITIONS,
    FEELINGS,
    HAS_TIME,
    KIN_ADJ,
    KIN_PLURAL,
    MODIFIERS,
    NAME,
    NOT_NAMES,
    REL,
    TIME_TAIL,
    F,
    R,
    Rule,
    U,
    W,
    cand,
    rel,
    rule,
    slug,
)

__all__ = ["HEALTH_RULES"]

_I_HAVE = r"(?i:i have|i've got|i have got|i've|i got|i've also got|i also have|we have|we've got)"
_PROCEDURES = (
    r"(?:physical therapy|physio|eye exam|checkup|check-up|blood work|bloodwork|dialysis|chemo|"
    r"mammogram|colonoscopy|flu shot|covid shot|booster|hearing test|surgery|operation|scan|"
    r"x-ray|mri|ct scan|biopsy|procedure|infusion|injection|physical|ultrasound|"
    r"(?:[a-z]+\s+)?(?:surgery|operation|replacement|scan|test|shot|procedure))"
)
_VISIT_VERBS = (
    r"(?i:visiting|coming|flying in|stopping by|dropping by|driving up|driving down|"
    r"taking me|picking me up|coming over|coming by|coming round|coming around|coming to see me|"
    r"coming home|coming up|coming down|coming to visit|popping in|popping over|"
    r"staying with me|staying with us|visit|come|come over|come by)"
)


def _appointment(m: re.Match[str], _: str) -> list[Candidate]:
    what = rel(m["what"]).replace("'s", "")
    value = re.sub(
        r"(?i)^(?:I have|I've got|I have got|I've|I'm|I am|I got|I'll be|we have|we've got)\s+"
        r"(?:(?:getting|having|going to|seeing|to see|going for)\s+)?",
        "",
        m[0],
    )
    return cand(U, f"appointment_{slug(what)}", value)


def _timed_appointment(m: re.Match[str], clause: str) -> list[Candidate]:
    if not HAS_TIME.search(m[0]):
        return []
    return _appointment(m, clause)


def _visit(m: re.Match[str], _: str) -> list[Candidate]:
    if m["who"] and m["who"] in NOT_NAMES:
        return []
    if not HAS_TIME.search(m[0]):
        return []
    if m["rel"]:
        who = rel(m["rel"])
    elif m["kin"]:
        who = KIN_PLURAL.get(m["kin"].lower(), m["kin"].lower())
    else:
        who = m["who"].lower()
    return cand(U, f"visit_{who}", m[0])


def _feeling(m: re.Match[str], _: str) -> list[Candidate]:
    verb = "does not feel " if m.groupdict().get("neg") else "feels "
    return cand(W, "mood", verb + m["feel"] + (m["why"] or ""))


_TIMED = rf"[^,.;!?]*?{TIME_TAIL}(?=\s*(?:[,.;!?]|$|(?i:and|so|but)\b))"

HEALTH_RULES: tuple[Rule, ...] = (
    # appointments and visits (before routines, which would read them too)
    rule(
        rf"(?:{_I_HAVE}\s+(?:an?\s+|my\s+|the\s+)?)?"
        rf"(?P<what>(?i:{APPOINTMENT_WHAT}))(?i:'s)?\s+(?i:appointment|appt|visit|check-?up)"
        rf"(?:\s+(?i:is|is on|is at|scheduled|booked|set))?(?:\s+(?i:with)\s+[^,.;!?]+?)?"
        rf"{TIME_TAIL}",
        _appointment,
    ),
    rule(
        rf"(?i:my)\s+(?i:appointment|appt)\s+(?i:with)\s+(?:(?i:the|my)\s+|(?i:dr\.?)\s+"
        rf"[A-Z][a-z]+\s+)?(?P<what>(?i:{APPOINTMENT_WHAT})?)(?:\s+(?i:is))?{TIME_TAIL}",
        lambda m, c: (
            _timed_appointment(m, c)
            if m["what"]
            else cand(U, "appointment_doctor", m[0])
            if HAS_TIME.search(m[0])
            else []
        ),
    ),
    rule(
        rf"(?i:(?:i'm|i am|i'll be|i will be|i have to|i've got to|i need to|i must)\s+"
        r"(?:seeing|going to see|going to|going in to see|see|go to|go see|heading to|off to|"
        rf"visiting)\s+(?:the|my|a)\s+)(?P<what>(?i:{APPOINTMENT_WHAT}))(?i:'s)?{_TIMED}",
        _timed_appointment,
    ),
    rule(
        rf"(?:{_I_HAVE}|(?i:i'm|i am|i'll be|i will be)\s+(?i:getting|having|going in for|"
        r"going for|scheduled for|booked for|booked in for|due for))\s+"
        rf"(?:(?i:an?|my|the)\s+)?(?P<what>(?i:{_PROCEDURES})){_TIMED}",
        _timed_appointment,
    ),
    rule(
        rf"{_I_HAVE}\s+(?:(?i:an?|my|the)\s+)?(?P<what>(?i:{APPOINTMENT_WHAT}))(?i:'s)?{_TIMED}",
        _timed_appointment,
    ),
    rule(
        rf"(?i:taking me|driving me|bringing me)\s+(?i:to)\s+(?:(?i:the|my|see the|see my)\s+)"
        rf"(?P<what>(?i:{APPOINTMENT_WHAT})){_TIMED}",
        _timed_appointment,
    ),
    rule(
        rf"(?:(?i:my|our)\s+(?:(?i:{KIN_ADJ})\s+)*(?P<rel>(?i:{REL}))(?:,?\s+{NAME},?)?"
        rf"|(?i:the|my|our)\s+(?:(?i:{KIN_ADJ})\s+)*(?P<kin>(?i:kids|children|grandkids|"
        rf"grandchildren|family|boys|girls))|(?P<who>{NAME}))\s+"
        rf"(?i:is|will be|are|'s|'re|'ll|is going to|are going to|plans to|wants to)\s+"
        rf"(?:(?i:all|both|finally|going to)\s+)?{_VISIT_VERBS}{_TIMED}",
        _visit,
    ),
    # health
    rule(
        r"(?i:i'm|i am)\s+(?P<c>diabetic|asthmatic|epileptic|anemic|deaf|blind|pre-diabetic|"
        r"prediabetic|lactose intolerant|gluten intolerant)\b",
        lambda m, _: cand(F, "health_condition", m["c"].lower()),
    ),
    rule(
        rf"(?i:i have|i've got|i suffer from|i was diagnosed with|i've been diagnosed with|"
        rf"i live with|i got diagnosed with|i'm dealing with|they found)\s+"
        rf"(?P<c>(?i:{CONDITIONS})(?:\s+in\s+my\s+\w+)?)",
        lambda m, _: cand(F, "health_condition", m["c"]),
    ),
    rule(
        r"(?i:i'm on|i am on|i take|i'm taking|i have to take|i've been put on|they put me on)\s+"
        r"(?P<med>insulin|oxygen|dialysis|blood thinners|warfarin|metformin|statins|"
        r"(?:blood pressure|heart|thyroid|cholesterol|diabetes|water) (?:pills|medication|meds|"
        r"tablets)|chemo(?:therapy)?)(?P<why>\s+for\s+[^,.;!?]+)?",
        lambda m, _: cand(F, "medication", m["med"] + (m["why"] or "")),
    ),
    rule(
        r"(?i:allergic to|an allergy to|allergies to|a[n]? [a-z]+ allergy\b|intolerant to)"
        r"\s*(?P<a>[^,.;!?]*)",
        lambda m, _: cand(F, "allergy", m["a"] or m[0]),
    ),
    rule(
        r"^(?P<a>[A-Za-z][a-z]+(?: [a-z]+)?)\s+(?i:makes|make|gives|give)\s+me\s+(?i:break out|"
        r"itchy|itch|sneeze|wheeze|swell up|hives|a rash|an allergic reaction)",
        lambda m, _: cand(F, "allergy", m["a"].lower() + " (" + m[0].split(" ", 2)[-1] + ")"),
    ),
    rule(
        r"(?i:(?:haven't|have not|can't|cannot|couldn't|could not|didn't|did not|don't|not)\s+"
        r"(?:been\s+)?(?:sleep|sleeping|slept|get much sleep|get any sleep)(?:\s+(?:well|much|good|"
        r"at all|a wink))?|trouble sleeping|insomnia|sleeping (?:badly|poorly|better|well)|"
        r"i (?:slept|sleep)\s+(?:so\s+|really\s+)?(?:well|badly|poorly|great|terribly|"
        r"like a (?:baby|log|rock)|through the night|in)|up all night|tossing and turning)",
        lambda m, _: cand(
            W,
            "sleep",
            "not sleeping well" if re.search(r"(?i)n't|not\b|insomnia", m[0]) else m[0].lower(),
        ),
    ),
    rule(
        rf"(?i:my)\s+(?P<b>(?i:{BODY}))\s+(?i:has been|have been|is|are|'s been|keeps|keep|hurts|"
        rf"hurt|aches|ache|'s|was|were|feels|feel)\s*{ADV}(?:(?i:{MODIFIERS})\s+)*"
        r"(?i:hurting|aching|killing me|sore|bothering me|acting up|stiff|swollen|throbbing|"
        r"painful|giving me trouble|playing up|numb|tender|flaring up)?",
        lambda m, _: (
            cand(W, f"pain_{slug(m['b'])}", m[0][3:])
            if re.search(
                r"(?i)hurt|ach|killing|sore|bother|acting|stiff|swollen|throb|pain|"
                r"trouble|playing|numb|tender|flar",
                m[0],
            )
            else []
        ),
    ),
    rule(
        rf"(?i:pain in my|(?:bad|sore|stiff|achy|aching|swollen)\s+)\s*(?P<b>(?i:{BODY}))",
        lambda m, _: cand(W, f"pain_{slug(m['b'])}", m[0]),
    ),
    rule(
        r"(?i:i(?:'ve| have)? (?:had|got|have)\s+(?:an?\s+)?(?:(?:terrible|bad|awful|splitting|"
        r"nasty|pounding|little)\s+)?(?P<what>headache|migraine|toothache|backache|stomach ache|"
        r"stomachache|earache))",
        lambda m, _: cand(
            W,
            "pain_"
            + {
                "headache": "head",
                "migraine": "head",
                "toothache": "tooth",
                "backache": "back",
                "earache": "ear",
            }.get(m["what"].lower(), "stomach"),
            m[0].split(None, 1)[1],
        ),
    ),
    # feelings
    rule(
        rf"(?i:i'm|i am|i've been|i have been|i feel|i'm feeling|i am feeling|i felt|"
        rf"i've been feeling|i have been feeling|feeling|i'm getting|i've gotten|i get)\s+"
        r"(?P<neg>(?i:not|not really|not feeling)\s+)?"
        rf"(?P<feel>(?:(?i:{MODIFIERS})\s+)*(?i:{FEELINGS}))\b(?!\s+(?i:at|with|for|to|of)\b)"
        r"(?P<why>\s+(?i:lately|recently|today|these days|this week|about|because|since|after|"
        r"this morning|tonight|all day|at night|on weekends|in the evenings)[^,.;!?]*)?",
        _feeling,
    ),
    rule(
        rf"(?i:i'm in an?|i am in an?)\s+(?P<feel>(?:(?i:{MODIFIERS})\s+)*(?i:good|great|bad|"
        r"foul|lousy|terrible|wonderful|happy|cheerful|grumpy|sour|funny|strange|weird) mood)"
        r"(?P<why>\s+(?i:today|tonight|this morning|lately)[^,.;!?]*)?",
        _feeling,
    ),
    rule(
        rf"(?i:i've been|i have been|i'm|i am|i feel|i've felt)\s+(?:(?i:{MODIFIERS})\s+)*"
        r"(?P<feel>(?i:in a bit of a funk|in a funk|in low spirits|in good spirits|"
        r"in high spirits|down in the dumps|on top of the world|not myself|not quite myself|"
        r"at a loose end|at loose ends))(?P<why>\s+(?i:lately|recently|today|these days|since|"
        r"because)[^,.;!?]*)?",
        _feeling,
    ),
    # visiting carers and nurses are routines, not one-off visits
    rule(
        r"(?i:(?:the|my|a)\s+(?P<who>nurse|carer|caregiver|aide|home help|cleaner|"
        r"physical therapist|therapist|physio|meals on wheels|home health aide)\s+"
        r"(?:comes|visits|stops by|drops by|comes by|comes in|comes over|pops in)\s+"
        r"(?P<when>(?:every|on|each|once a|twice a|three times a)\s+[^,.;!?]+))",
        lambda m, _: cand(R, f"routine_{slug(m['who'])}_visit", m[0].split(None, 1)[1]),
    ),
)
