"""Offline extractor rules about tastes and habits: likes, dislikes, routines, context, age."""

from __future__ import annotations

import re

from confide.llm.candidates import Candidate
from confide.llm.offline_vocab import (
    ADV,
    END,
    MONTHS,
    OBJ,
    OBJ_END,
    PRONOUNS,
    SEP,
    C,
    F,
    P,
    R,
    Rule,
    cand,
    rule,
    slug,
)

__all__ = ["HABIT_RULES"]

_SUBJ = r"\b(?:(?i:i|we)|(?i:my|our)\s+[^,.;!?]{1,30}?\s+(?i:and i))"


def _object(m: re.Match[str]) -> str | None:
    obj = re.sub(r"(?i)^(?:to|doing|a good|a nice|a|an|some)\s+", "", m["obj"].strip())
    obj = re.sub(r"(?i)^(?:to|doing|a good|a nice|a|an|some)\s+", "", obj)
    obj = re.sub(r"(?i)\s+(?:too|as well|so much|very much|a lot)$", "", obj)
    return None if not obj or obj.lower() in PRONOUNS else obj


def _likes(m: re.Match[str], _: str) -> list[Candidate]:
    obj = _object(m)
    return cand(P, f"likes_{slug(obj)}", obj) if obj else []


def _dislikes(m: re.Match[str], _: str) -> list[Candidate]:
    obj = _object(m)
    return cand(P, f"dislikes_{slug(obj)}", obj) if obj else []


def _favorite_alone(m: re.Match[str], _: str) -> list[Candidate]:
    value = m["v"].strip()
    words = value.lower().split()
    if len(words) > 4 or words[0] in PRONOUNS | {"that", "which", "what"}:
        return []
    return cand(P, f"favorite_{words[-1]}", value.lower())


def _prefers(m: re.Match[str], _: str) -> list[Candidate]:
    a = re.sub(r"(?i)^(?:have|get|a|an)\s+", "", m["a"].strip())
    a = re.sub(r"(?i)^(?:a|an)\s+", "", a)
    return cand(P, f"prefers_{slug(a)}", a + (f" over {m['b']}" if m["b"] else ""))


_LOVE = r"(?:love|loved|enjoy|enjoyed|adore|like|liked|relish|treasure)"
_HATE = r"(?:hate|hated|dislike|detest|loathe|despise|abhor)"

HABIT_RULES: tuple[Rule, ...] = (
    rule(
        r"(?i:my (?:favorite|favourite|all-time favorite|all-time favourite))\s+"
        r"(?P<t>[a-z]+(?: [a-z]+)?)\s+(?i:is|are|was|has always been|'s)\s+(?P<v>[^,.;!?]+)",
        lambda m, _: cand(P, f"favorite_{slug(m['t'])}", m["v"]),
    ),
    rule(
        r"^(?P<v>[^,.;!?]+?)\s+(?i:is|are|has always been|have always been)\s+"
        r"(?i:my (?:favorite|favourite|all-time favorite|all-time favourite))\s+(?P<t>[a-z]+)",
        lambda m, _: cand(P, f"favorite_{slug(m['t'])}", m["v"].lower()),
    ),
    rule(
        r"^(?P<v>[^,.;!?]+?)\s+(?i:is|are|has always been|have always been)\s+"
        r"(?i:my (?:favorite|favourite|all-time favorite|all-time favourite))" + END,
        _favorite_alone,
    ),
    rule(
        r"^(?i:nothing beats|there's nothing like|there is nothing like|nothing compares to|"
        r"you can't beat|can't beat)\s+" + OBJ + OBJ_END,
        _likes,
    ),
    rule(
        rf"{_SUBJ}{SEP}{ADV}(?i:{_HATE}|can't stand|cannot stand|can't bear|cannot bear|"
        r"can't stomach|cannot stomach|can't abide|can't tolerate|have no time for|"
        r"don't (?:really |much )?(?:like|care for|enjoy|fancy)|"
        r"do not (?:really )?(?:like|care for|enjoy)|never liked|never cared for|"
        r"have never liked|'ve never liked|"
        r"(?:am|'m|are|'re) not (?:really |much of |very )?(?:a (?:big |huge )?fan of|into|fond of|"
        r"keen on|crazy about|big on))\s+" + OBJ + OBJ_END,
        _dislikes,
    ),
    rule(
        rf"{_SUBJ}{SEP}{ADV}(?i:{_LOVE}|have always loved|'ve always loved|have always enjoyed|"
        r"'ve always enjoyed|(?:am|'m|are|'re) (?:a (?:big |huge )?fan of|really into|into|fond of|"
        r"crazy about|passionate about|mad about|nuts about|big on|partial to|keen on|"
        r"a sucker for|hooked on)|have a soft spot for|get a kick out of)\s+" + OBJ + OBJ_END,
        _likes,
    ),
    rule(
        r"^(?P<obj>[A-Za-z][a-z]+(?: [a-z]+)?)\s+(?i:is|are)\s+(?i:my (?:weakness|guilty pleasure|"
        r"passion|thing|joy|happy place))" + END,
        _likes,
    ),
    rule(
        r"(?i:i'm not much of an?|i am not much of an?|i'm not a big|i'm not really an?)\s+"
        r"(?P<obj>[a-z]+(?: [a-z]+)?)\s+(?i:person|fan|lover|eater|drinker)" + END,
        _dislikes,
    ),
    rule(
        rf"{_SUBJ}{SEP}{ADV}(?i:prefer|'d prefer|would prefer|"
        r"'d (?:much |far |really )?rather(?: have)?|"
        r"would (?:much |far |really )?rather(?: have)?)\s+(?P<a>[^,.;!?]+?)"
        r"(?:\s+(?i:over|to|rather than|instead of|than)\s+(?P<b>[^,.;!?]+))?" + END,
        _prefers,
    ),
    # routines, how to talk to the user, where they are, age
    rule(
        r"(?i:(?:please|could you|can you|would you|try to|you need to|you have to)\s+"
        r"(?:(?:please|maybe|just)\s+)?(?:speak|talk)\s+(?:a\s+(?:little\s+)?(?:bit\s+)?|more\s+)?"
        r"(?P<how>slower|slowly|louder|up|more slowly|more clearly|clearly|softer|quieter))",
        lambda m, _: cand(P, "communication_style", "speak " + m["how"].lower()),
    ),
    rule(
        r"(?i:(?:please\s+)?(?:don't|do not|never)\s+(?:call|ring|phone)\s+(?:me\s+)?"
        r"(?P<when>(?:before|after|past)\s+\d{1,2}(?::\d{2})?\s*(?:am|pm|o'clock)?|"
        r"(?:in the|during the)\s+(?:morning|evening|afternoon)s?|at night))",
        lambda m, _: cand(R, "call_time", m[0]),
    ),
    rule(
        r"(?i:i (?:always |usually |normally |often |still |try to )?(?P<verb>take|go|have|do|"
        r"attend|walk|volunteer|play|visit|call|swim|read|watch|feed|water|check|bake|cook|"
        r"garden|pray|meditate|knit|exercise|stretch))\s+(?P<what>[^,.;!?]*?)\s*"
        r"(?P<when>(?i:every (?:single )?(?:morning|evening|night|day|week|weekend|\w+day)|"
        r"each \w+|on \w+days|on weekends|after (?:lunch|dinner|breakfast|supper)|"
        r"before (?:bed|breakfast|lunch|dinner)|twice a \w+|once a \w+|three times a \w+|daily|"
        r"most (?:days|mornings|evenings|nights)))",
        lambda m, _: cand(R, f"routine_{slug(m['what']) or slug(m['verb'])}", m[0][2:]),
    ),
    rule(
        r"^(?i:(?P<when>every (?:single )?(?:morning|evening|night|day|week|\w+day)"
        r"(?:\s+(?:before|after) (?:bed|breakfast|lunch|dinner|supper))?|"
        r"each (?:morning|evening|night|day)|on \w+days),?\s+i\s+(?:always |usually )?"
        r"(?P<verb>take|go|have|do|walk|play|call|swim|read|watch|feed|water|bake|cook|pray|"
        r"knit|exercise|visit)\s+(?P<what>[^,.;!?]+))",
        lambda m, _: cand(
            R,
            "routine_"
            + {"read": "reading", "walk": "walk", "pray": "prayer"}.get(
                m["verb"].lower(), slug(m["what"]) or m["verb"].lower()
            ),
            m["verb"] + " " + m["what"] + " " + m["when"].lower(),
        ),
    ),
    rule(
        r"(?i:(?:i'm|i am|we're|we are)\s+(?:staying\s+|stuck\s+)?(?:at|in|with)\s+(?:the\s+)?"
        r"(?P<where>hospital|(?:my|the|our)\s+[\w']+(?:'s)?(?:\s+(?:house|place|office|"
        r"apartment|flat|home))?|rehab|hospice|airport)"
        r"(?P<when>\s+(?:right now|today|this week|at the moment|for the week|tonight|for now|"
        r"for a few days|until \w+|till \w+|for the weekend|this weekend)))",
        lambda m, _: cand(
            C, "current_location", re.split(r"(?i)\b(?:at|in|with)\s+", m[0], maxsplit=1)[1]
        ),
    ),
    rule(
        r"(?i:(?:we're|we are|i'm|i am)\s+(?P<s>snowed in|stuck at home|without power|"
        r"on vacation|on holiday|traveling|travelling|in quarantine|moving house|packing up|"
        r"iced in|stuck inside|housebound|in the middle of a move))",
        lambda m, _: cand(C, "current_situation", m["s"].lower()),
    ),
    rule(
        r"(?i:(?:the|our|my)\s+(?P<what>power|electricity|heat|heating|water|internet|phone|"
        r"cable|wifi|wi-fi|air conditioning|ac|furnace|boiler)(?:'s|\s+is|\s+has)\s+"
        r"(?:been\s+)?(?:out|off|down|broken|not working|on the fritz)"
        r"(?P<when>\s+(?:since|all|for)\s+[^,.;!?]+|\s+(?:again|today|right now))?)",
        lambda m, _: cand(C, "current_situation", m[0].split(None, 1)[1]),
    ),
    rule(
        r"(?i:i'm|i am|i turned|i'll be|i will be|i'll turn|i will turn|i just turned)\s+"
        r"(?P<a>\d{2,3})(?=\s+(?i:years old|years young|in|last|this|next|on)\b|\s*[,.;!?]|$)",
        lambda m, _: cand(F, "age", m["a"] + " years old"),
    ),
    rule(
        rf"(?i:my birthday is|i was born on|my birthday's)\s+(?:(?i:on)\s+)?(?P<d>(?i:{MONTHS}\s+"
        r"\d{1,2}(?:st|nd|rd|th)?|(?:the\s+)?\d{1,2}(?:st|nd|rd|th)?\s+of\s+\w+))",
        lambda m, _: cand(F, "birthday", m["d"]),
    ),
)
