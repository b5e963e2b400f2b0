"""The offline extractor's rule table: regular expressions over one clause of user speech.

Each rule's pattern is compiled case-sensitively so that names must be capitalised; the
wording around them is wrapped in ``(?i:...)``. Rules run in order; a rule's match claims its
span so later, vaguer rules do not read the same words again (unless ``overlap`` is set).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from engram.llm.candidates import Candidate
from engram.types import MemoryType

__all__ = ["RULES", "Rule", "slug"]

F, P, U = MemoryType.FACT, MemoryType.PREFERENCE, MemoryType.FOLLOW_UP
C, H, W, R = MemoryType.CONTEXT, MemoryType.HISTORY, MemoryType.WELLBEING, MemoryType.PROCEDURAL

Build = Callable[[re.Match[str], str], list[Candidate]]


@dataclass(frozen=True)
class Rule:
    """A pattern and the function that turns one of its matches into candidates."""

    pattern: re.Pattern[str]
    build: Build
    overlap: bool = False


def _words(text: str) -> list[str]:
    return text.split()


def _alt(words: str) -> str:
    return "|".join(sorted((w.replace("_", " ") for w in words.split()), key=len, reverse=True))


NAME = r"[A-Z][a-z]+(?:[-'][A-Z][a-z]+)?"
PLACE = r"[A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,2}"
NUM_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "a couple": 2,
}  # fmt: skip
NUM = r"\d{1,2}|" + _alt("a_couple_of a_couple " + " ".join(k for k in NUM_WORDS if " " not in k))
REL = _alt(
    "wife husband partner spouse daughter son granddaughter grandson great-granddaughter "
    "great-grandson sister brother mother mom mum father dad niece nephew aunt uncle cousin "
    "best_friend friend neighbor neighbour caregiver carer daughter-in-law son-in-law "
    "stepdaughter stepson boyfriend girlfriend fiance fiancee grandmother grandfather"
)
KIN_PLURAL = {
    "daughters": "daughters", "sons": "sons", "children": "children", "kids": "children",
    "child": "children", "kid": "children", "grandchildren": "grandchildren",
    "grandkids": "grandchildren", "grandchild": "grandchildren", "grandkid": "grandchildren",
    "great-grandchildren": "great_grandchildren", "great-grandkids": "great_grandchildren",
    "grandsons": "grandsons", "granddaughters": "granddaughters", "sisters": "sisters",
    "brothers": "brothers", "siblings": "siblings", "daughter": "daughters", "son": "sons",
    "sister": "sisters", "brother": "brothers", "grandson": "grandsons",
    "granddaughter": "granddaughters",
}  # fmt: skip
PETS = {
    "dog": "dog", "dogs": "dog", "puppy": "dog", "puppies": "dog", "cat": "cat", "cats": "cat",
    "kitten": "cat", "kittens": "cat", "parakeet": "parakeet", "parakeets": "parakeet",
    "budgie": "budgie", "budgies": "budgie", "parrot": "parrot", "parrots": "parrot",
    "canary": "canary", "canaries": "canary", "bird": "bird", "birds": "bird", "fish": "fish",
    "goldfish": "goldfish", "hamster": "hamster", "hamsters": "hamster", "rabbit": "rabbit",
    "rabbits": "rabbit", "bunny": "rabbit", "bunnies": "rabbit", "chicken": "chicken",
    "chickens": "chicken", "hen": "chicken", "hens": "chicken", "horse": "horse",
    "horses": "horse", "turtle": "turtle", "turtles": "turtle", "tortoise": "tortoise",
    "guinea pig": "guinea_pig", "guinea pigs": "guinea_pig", "goat": "goat", "goats": "goat",
    "ferret": "ferret", "ferrets": "ferret", "cockatiel": "cockatiel", "lizard": "lizard",
}  # fmt: skip
PET = "|".join(sorted(PETS, key=len, reverse=True))
KIN = "|".join(sorted(KIN_PLURAL, key=len, reverse=True))
OCCUPATIONS = frozenset(
    _words(
        """teacher nurse pilot firefighter engineer accountant doctor lawyer farmer mechanic
    electrician plumber carpenter secretary librarian chef cook waitress waiter salesman
    saleswoman soldier driver professor dentist pharmacist architect banker journalist writer
    musician artist photographer seamstress tailor baker butcher miner machinist welder janitor
    clerk cashier manager programmer developer designer scientist therapist counselor vet
    veterinarian midwife paramedic postman homemaker housewife principal minister pastor priest
    rabbi sailor fisherman rancher officer policeman secretary bookkeeper hairdresser barber
    typist consultant analyst technician contractor realtor agent caretaker"""
    )
)
FEELINGS = _alt(
    "lonely sad down depressed happy great good better worse tired exhausted anxious worried "
    "nervous scared afraid stressed overwhelmed bored frustrated angry upset grumpy cheerful "
    "excited content calm confused forgetful sick ill unwell weak dizzy blue low glad grateful "
    "hopeful isolated restless miserable wonderful fantastic awful terrible rough"
)
MODIFIERS = _alt("so very really a_bit a_little quite pretty kind_of kinda much rather extremely")
BODY = _alt(
    "knees knee back lower_back hips hip shoulders shoulder neck head feet foot hands hand legs "
    "leg arms arm wrist ankle stomach chest tooth teeth eyes joints"
)
CONDITIONS = _alt(
    "type_2_diabetes type_1_diabetes diabetes arthritis asthma copd dementia alzheimer's "
    "parkinson's high_blood_pressure heart_disease a_heart_condition cancer glaucoma "
    "macular_degeneration osteoporosis atrial_fibrillation afib neuropathy emphysema "
    "kidney_disease epilepsy sciatica gout migraines vertigo tinnitus"
)
APPOINTMENT_WHAT = _alt(
    "doctor's doctor dentist dental eye hair hairdresser cardiologist physical_therapy physio "
    "therapy therapist podiatrist optometrist optician blood_test lab surgery vet lawyer "
    "audiologist hearing specialist nurse massage counseling counselling oncologist "
    "dermatologist chiropractor"
)
TIME_TAIL = (
    r"(?i:\s*,?\s*(?:(?:on|this|next|at|in|by|every|before|after)\s+)?"
    r"(?:today|tonight|tomorrow|(?:this|next)\s+(?:week|weekend|month)|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?(?:\s+(?:morning|afternoon|evening)s?)?|"
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\s+\d{1,2}(?:st|nd|rd|th)?|"
    r"\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.|o'clock)?|noon|the\s+\d{1,2}(?:st|nd|rd|th)|"
    r"morning|afternoon|evening|weekend))*"
)
STOP = frozenset(_words("a an the my our to for doing some of about with at in on"))
_END = r"(?=\s*(?:[,.;!?]|$))"


def slug(text: str, *, max_words: int = 4) -> str:
    """A snake_case key fragment: lower-cased words, stop words dropped, at most 4 words."""
    words = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP]
    return "_".join(words[:max_words])[:60]


def _num(text: str) -> int:
    low = " ".join(text.lower().split())
    return int(low) if low.isdigit() else NUM_WORDS.get(low, 1)


def _rel(text: str) -> str:
    low = " ".join(text.lower().split())
    low = {"mom": "mother", "mum": "mother", "dad": "father", "neighbour": "neighbor"}.get(low, low)
    return low.replace("-", "_").replace(" ", "_").replace("fiancee", "fiance")


def _clean(text: str) -> str:
    text = re.sub(r"(?i)\s+(?:at all|very much|so much|a lot|anymore|any more|really)$", "", text)
    return " ".join(text.strip(" ,.;!?").split())


def _c(t: MemoryType, key: str, value: str, conf: float = 0.7) -> list[Candidate]:
    value = _clean(value)
    if not key or not value:
        return []
    return [Candidate(type=t, key=key, value=value, confidence=conf)]


def _rule(pattern: str, build: Build, *, overlap: bool = False) -> Rule:
    return Rule(re.compile(pattern), build, overlap)


OBJ = r"(?P<obj>[^,.;!?]+?)"
OBJ_END = (
    r"(?=\s+(?i:in the|on|at|with|when|because|since|every|but|so|while|after|before|during|"
    r"if|and I|over|rather than|instead of|than)\b|\s*[,.;!?]|$)"
)


def _likes(m: re.Match[str], _: str) -> list[Candidate]:
    obj = re.sub(r"(?i)^(?:to|doing)\s+", "", _clean(m["obj"]))
    if obj.lower() in {"it", "that", "this", "them", "you", "him", "her", "those", "these"}:
        return []
    return _c(P, f"likes_{slug(obj)}", obj)


def _dislikes(m: re.Match[str], _: str) -> list[Candidate]:
    obj = re.sub(r"(?i)^(?:to|doing)\s+", "", _clean(m["obj"]))
    if obj.lower() in {"it", "that", "this", "them", "you", "him", "her"}:
        return []
    return _c(P, f"dislikes_{slug(obj)}", obj)


def _counts(m: re.Match[str], clause: str) -> list[Candidate]:
    out: list[Candidate] = []
    rest = clause[m.start("first") :]
    pairs = re.finditer(rf"(?i:(?P<n>{NUM})\s+(?:\w+\s+)?(?P<what>{KIN}|{PET}))\b", rest)
    for pair in pairs:
        n, what = _num(pair["n"]), pair["what"].lower()
        if what in KIN_PLURAL:
            out += _c(F, f"{KIN_PLURAL[what]}_count", f"{n} {what}")
            continue
        species = PETS[what]
        tail = rest[pair.end() :]
        names = re.match(
            rf"\s*(?:,|(?i:named|called))\s*(?P<names>{NAME}(?:(?:\s*,\s*|\s+and\s+){NAME})*)",
            tail,
        )
        if n == 1 and names:
            out += _c(F, f"pet_{species}_name", names["names"])
        elif n == 1 and re.match(rf"\s+{NAME}", tail):
            continue  # "a dog Rusty": the pet-name rule reads it
        else:
            out += _c(F, f"pet_{species}_count", f"{n} {what}")
            if names:
                out += _c(F, f"pet_{species}_names", names["names"])
    return out


def _occupation_words(text: str) -> str | None:
    words = _clean(text).split()
    if not words:
        return None
    head = words[-1].lower()
    return " ".join(words) if head in OCCUPATIONS or head.endswith(("ist", "ician")) else None


def _current_occupation(m: re.Match[str], _: str) -> list[Candidate]:
    occ = _occupation_words(m["occ"])
    return _c(F, "occupation", occ) if occ else []


def _former_occupation(m: re.Match[str], _: str) -> list[Candidate]:
    return _c(H, "former_occupation", m["occ"] + (m["dur"] or ""))


def _appointment(m: re.Match[str], clause: str) -> list[Candidate]:
    what = _rel(m["what"]).replace("'s", "")
    value = re.sub(r"(?i)^(?:I have|I've got|I have got|I've|I'm|I am)\s+", "", m[0])
    return _c(U, f"appointment_{slug(what)}", value)


def _visit(m: re.Match[str], _: str) -> list[Candidate]:
    who = _rel(m["rel"]) if m["rel"] else m["who"].lower()
    return _c(U, f"visit_{who}", m[0])


def _feeling(m: re.Match[str], _: str) -> list[Candidate]:
    return _c(W, "mood", "feels " + m["feel"] + (m["why"] or ""))


RULES: tuple[Rule, ...] = (
    # names
    _rule(rf"(?i:my name is|my name's)\s+(?P<n>{NAME})", lambda m, _: _c(F, "name", m["n"])),
    _rule(
        rf"(?i:call me|calls me|known as)\s+(?P<n>{NAME})",
        lambda m, _: _c(P, "preferred_name", m["n"]),
    ),
    _rule(
        rf"^(?i:i'm|i am|this is)\s+(?P<n>{NAME})(?=\s*(?:,|\.|!|$|(?i:here|by the way)))",
        lambda m, _: _c(F, "name", m["n"], 0.6),
    ),
    _rule(
        r"(?i:my pronouns are)\s+(?P<p>[a-z]+/[a-z]+(?:/[a-z]+)?)",
        lambda m, _: _c(F, "pronouns", m["p"].lower()),
    ),
    _rule(
        r"(?i:my (?:first|native|main|mother) (?:language|tongue) is|i speak|grew up speaking)"
        r"\s+(?P<l>[A-Z][a-z]+)",
        lambda m, _: _c(F, "language", m["l"]),
    ),
    # family and pets
    _rule(
        rf"(?i:my|our)\s+(?:(?i:late|dear|youngest|oldest|eldest|older|younger|little|big)\s+)?"
        rf"(?P<rel>(?i:{REL}))(?:'s name is|\s+is|\s+named|\s+called|,)?\s+(?P<n>{NAME})\b"
        rf"(?!\s+(?i:is|will be|are)\s+(?:visiting|coming))",
        lambda m, _: _c(F, f"{_rel(m['rel'])}_name", m["n"]),
        overlap=True,
    ),
    _rule(
        rf"(?i:my|our)\s+(?P<rel>(?i:{REL}))\s+(?P<n>{NAME})(?=\s+(?i:is|will be|are)\s+"
        r"(?:visiting|coming))",
        lambda m, _: _c(F, f"{_rel(m['rel'])}_name", m["n"]),
        overlap=True,
    ),
    _rule(
        rf"(?i:my late)\s+(?P<rel>(?i:{REL}))",
        lambda m, _: _c(H, f"{_rel(m['rel'])}_passed_away", f"{_rel(m['rel'])} has passed away"),
        overlap=True,
    ),
    _rule(
        rf"(?i:my|our)\s+(?P<rel>(?i:{REL}))(?:\s+{NAME})?\s+(?i:passed away|passed|died)"
        r"(?P<when>(?i:\s+(?:\w+\s+(?:years?|months?|weeks?)\s+ago|last\s+\w+|in\s+\d{4})))?",
        lambda m, _: _c(
            H, f"{_rel(m['rel'])}_passed_away", f"{_rel(m['rel'])} passed away{m['when'] or ''}"
        ),
        overlap=True,
    ),
    _rule(
        rf"(?i:married to)\s+(?P<n>{NAME})", lambda m, _: _c(F, "spouse_name", m["n"]), overlap=True
    ),
    _rule(
        r"(?i:i'm|i am)\s+(?:a\s+)?(?P<s>(?i:widow|widower|divorced|single|married))\b",
        lambda m, _: _c(F, "marital_status", m["s"].lower()),
    ),
    _rule(
        rf"(?i:i have|i've got|i have got|we have|we've got|i got|we got)\s+(?P<first>{NUM})\b",
        _counts,
        overlap=True,
    ),
    _rule(
        rf"(?i:my|our|a|an)\s+(?P<pet>(?i:{PET}))(?:'s name is|\s+(?i:named|called)|\s+is|,)?\s+"
        rf"(?P<n>{NAME})\b",
        lambda m, _: _c(F, f"pet_{PETS[m['pet'].lower()]}_name", m["n"]),
        overlap=True,
    ),
    # places
    _rule(
        rf"(?i:i live in|we live in|i'm living in|i am living in|i live just outside|"
        rf"we live just outside)\s+(?:(?i:a|an|the)\s+[^,.;]*?(?i:called|named)\s+)?(?P<p>{PLACE})",
        lambda m, _: _c(F, "city", m["p"]),
    ),
    _rule(
        rf"(?i:i'm from|i am from|i come from|i grew up in|i was raised in)\s+(?P<p>{PLACE})",
        lambda m, _: _c(H, "hometown", m["p"]),
    ),
    _rule(rf"(?i:i was born in)\s+(?P<p>{PLACE})", lambda m, _: _c(H, "birthplace", m["p"])),
    _rule(
        rf"(?i:moved to|relocated to)\s+(?P<p>{PLACE})"
        r"(?P<when>(?i:\s+(?:in\s+\d{4}|last\s+\w+|\w+\s+years\s+ago)))?",
        lambda m, _: _c(H, "moved_to", m["p"] + (m["when"] or "")),
    ),
    # living situation and mobility
    _rule(
        r"(?i:liv(?:e|ing)\s+(?P<how>alone|by myself|on my own))",
        lambda m, _: _c(F, "living_situation", "lives " + m["how"].lower()),
    ),
    _rule(
        r"(?i:i live with|i'm living with|i am living with|i stay with|we live with)\s+"
        r"(?P<who>(?i:my|our)\s+[^,.;!?]+)",
        lambda m, _: _c(F, "living_situation", "lives with " + m["who"]),
    ),
    _rule(
        r"(?i:(?:moved into|live in|living in|i'm in|i am in|stay in)\s+(?:an?\s+|the\s+)?"
        r"(?P<home>assisted living(?: facility| home| community)?|nursing home|"
        r"retirement (?:home|community|village)|care home|senior (?:living|apartments?|home|"
        r"community|housing)))",
        lambda m, _: _c(F, "living_situation", "lives in " + m["home"].lower()),
    ),
    _rule(
        r"(?i:(?:use|using|rely on|need|walk with|get around with)\s+(?:an?\s+|my\s+)?"
        r"(?P<aid>mobility scooter|wheelchair|walker|rollator|cane|walking stick|stick|scooter)"
        r"|(?:i'm|i am) in a (?P<aid2>wheelchair))",
        lambda m, _: _c(F, "mobility", "uses a " + (m["aid"] or m["aid2"]).lower()),
    ),
    _rule(
        r"(?i:(?:can't|cannot|can not|don't|do not|no longer)\s+drive(?:\s+anymore|\s+any more)?)",
        lambda m, _: _c(F, "mobility", m[0].lower()),
    ),
    _rule(
        r"(?i:(?:trouble|difficulty|a hard time|problems)\s+(?:with|walking|climbing|getting)\s+"
        r"(?:up\s+|down\s+)?(?:the\s+)?(?P<what>stairs|steps|walking|far))",
        lambda m, _: _c(F, "mobility", "has " + m[0].lower()),
    ),
    _rule(
        r"(?i:hard of hearing|wear hearing aids|my hearing (?:isn't|is not|is) (?:great|good|"
        r"bad|poor|what it used to be))",
        lambda m, _: _c(F, "hearing", m[0].lower()),
        overlap=True,
    ),
    # appointments and visits (before routines, which would read them too)
    _rule(
        rf"(?i:(?:i have|i've got|i have got|i've)\s+(?:an?\s+|my\s+)?)?"
        rf"(?P<what>(?i:{APPOINTMENT_WHAT}))(?i:'s)?\s+(?i:appointment|appt|visit|check-?up)"
        rf"(?:\s+(?i:is|is on|is at))?{TIME_TAIL}",
        _appointment,
    ),
    _rule(
        rf"(?i:(?:i'm|i am|i'll be)\s+(?:seeing|going to see|going to)\s+(?:the|my)\s+)"
        rf"(?P<what>(?i:{APPOINTMENT_WHAT}))(?i:'s)?{TIME_TAIL}",
        _appointment,
    ),
    _rule(
        rf"(?i:(?:i have|i've got|i have got)\s+(?:an?\s+)?)"
        r"(?P<what>(?i:physical therapy|physio|eye exam|checkup|check-up|blood work|dialysis|"
        r"chemo|mammogram|colonoscopy|flu shot|hearing test|surgery))"
        rf"{TIME_TAIL}",
        _appointment,
    ),
    _rule(
        rf"(?:(?i:my|our)\s+(?P<rel>(?i:{REL}))(?:\s+{NAME})?|(?P<who>{NAME}))\s+"
        r"(?i:is|will be|are|'s)\s+(?i:visiting|coming|flying in|stopping by|dropping by|"
        r"driving up|driving down|taking me)[^,.;!?]*?"
        rf"{TIME_TAIL}(?=\s*(?:[,.;!?]|$|(?i:and)))",
        _visit,
    ),
    # work and life history
    _rule(
        r"(?i:i'm a retired|i am a retired|i retired as an?|i'm retired from being an?)\s+"
        r"(?P<occ>[a-z][a-z ]*?)(?P<dur>)" + _END,
        _former_occupation,
    ),
    _rule(
        r"(?i:i worked as|i used to work as|i used to be|i was)\s+(?:an?\s+)"
        r"(?P<occ>[a-z][a-z ]*?)(?P<dur>\s+for\s+[\w-]+\s+years)?"
        r"(?=\s+(?i:in|at|for)\b|\s*[,.;!?]|$)",
        lambda m, c: (
            _former_occupation(m, c) if _occupation_words(m["occ"]) or "as" in m[0] else []
        ),
    ),
    _rule(
        r"(?i:i taught|i used to teach)\s+(?P<occ>[a-z][a-z ]*?)(?P<dur>)(?=\s+(?:for|at|in)\b|"
        r"\s*[,.;!?]|$)",
        lambda m, _: _c(H, "former_occupation", "taught " + m["occ"]),
    ),
    _rule(
        r"(?i:i (?:ran|owned|used to run|used to own)\s+an?\s+)(?P<b>[a-z]+(?: [a-z]+)?)"
        r"(?P<dur>\s+for\s+[\w-]+\s+years)?",
        lambda m, _: _c(H, "former_business", "ran a " + m["b"] + (m["dur"] or "")),
    ),
    _rule(
        r"(?i:i work as an?|i'm working as an?)\s+(?P<occ>[a-z][a-z ]*?)" + _END,
        lambda m, _: _c(F, "occupation", m["occ"]),
    ),
    _rule(
        r"(?i:i'm an?|i am an?)\s+(?P<occ>[a-z][a-z ]*?)" + _END,
        _current_occupation,
    ),
    _rule(rf"(?i:i work (?:at|for))\s+(?P<org>{PLACE})", lambda m, _: _c(F, "employer", m["org"])),
    _rule(
        r"(?i:served in|was in|joined)\s+(?:the\s+)?(?P<b>Army|Navy|Air Force|Marines|"
        r"Marine Corps|Coast Guard|National Guard)",
        lambda m, _: _c(H, "military_service", "served in the " + m["b"]),
    ),
    _rule(
        r"(?i:i retired)(?P<when>\s+(?:in\s+\d{4}|\w+\s+years\s+ago|last\s+year))?",
        lambda m, _: _c(H, "retirement", "retired" + (m["when"] or "")),
    ),
    _rule(
        r"(?i:(?:i was|we were|i've been|we've been) married for)\s+(?P<d>[\w-]+\s+years)",
        lambda m, _: _c(H, "marriage", "married for " + m["d"]),
    ),
    _rule(
        rf"(?i:my)\s+(?P<rel>(?i:{REL}))\s+(?i:was)\s+(?i:an?)\s+(?P<occ>[a-z][a-z ]*?)" + _END,
        lambda m, _: (
            _c(H, f"{_rel(m['rel'])}_occupation", m["occ"]) if _occupation_words(m["occ"]) else []
        ),
    ),
    # health and feelings
    _rule(
        r"(?i:i'm|i am)\s+(?P<c>diabetic|asthmatic|epileptic|anemic|deaf|blind)\b",
        lambda m, _: _c(F, "health_condition", m["c"].lower()),
    ),
    _rule(
        rf"(?i:i have|i've got|i suffer from|i was diagnosed with|i've been diagnosed with|"
        rf"i live with)\s+(?P<c>(?i:{CONDITIONS})(?:\s+in\s+my\s+\w+)?)",
        lambda m, _: _c(F, "health_condition", m["c"]),
    ),
    _rule(
        r"(?i:allergic to|an allergy to|allergies to)\s+(?P<a>[^,.;!?]+)",
        lambda m, _: _c(F, "allergy", m["a"]),
    ),
    _rule(
        r"(?i:(?:haven't|have not|can't|cannot|couldn't|didn't|don't|not)\s+(?:been\s+)?"
        r"(?:sleep|sleeping|slept)(?:\s+(?:well|much|good|at all))?|trouble sleeping|insomnia|"
        r"sleeping (?:badly|poorly|better|well))",
        lambda m, _: _c(
            W, "sleep", "not sleeping well" if re.search(r"(?i)n't|not", m[0]) else m[0].lower()
        ),
    ),
    _rule(
        rf"(?i:my)\s+(?P<b>(?i:{BODY}))\s+(?i:has been|have been|is|are|'s been|keeps|is really|"
        r"really|hurts|hurt|aches)\s*(?i:hurting|aching|killing me|sore|bothering me|acting up|"
        r"stiff|swollen)?",
        lambda m, _: (
            _c(W, f"pain_{slug(m['b'])}", m[0][3:])
            if re.search(r"(?i)hurt|ach|killing|sore|bother|acting|stiff|swollen", m[0])
            else []
        ),
    ),
    _rule(
        rf"(?i:pain in my|(?:bad|sore)\s+)\s*(?P<b>(?i:{BODY}))",
        lambda m, _: _c(W, f"pain_{slug(m['b'])}", m[0]),
    ),
    _rule(
        rf"(?i:i'm|i am|i've been|i have been|i feel|i'm feeling|i am feeling|i felt|"
        rf"i've been feeling|i have been feeling|feeling)\s+"
        rf"(?P<feel>(?:(?i:{MODIFIERS})\s+)*(?i:{FEELINGS}))\b(?!\s+(?i:at|with|for|to)\b)"
        r"(?P<why>\s+(?i:lately|recently|today|these days|this week|about|because|since|after)"
        r"[^,.;!?]*)?",
        _feeling,
    ),
    # preferences
    _rule(
        r"(?i:my (?:favorite|favourite))\s+(?P<t>[a-z]+(?: [a-z]+)?)\s+(?i:is|are|was)\s+"
        r"(?P<v>[^,.;!?]+)",
        lambda m, _: _c(P, f"favorite_{slug(m['t'])}", m["v"]),
    ),
    _rule(
        r"^(?P<v>[^,.;!?]+?)\s+(?i:is|are)\s+(?i:my (?:favorite|favourite))\s+(?P<t>[a-z]+)",
        lambda m, _: _c(P, f"favorite_{slug(m['t'])}", m["v"].lower()),
    ),
    _rule(
        r"(?i:i (?:really |just |absolutely |truly )?(?:hate|dislike|detest|loathe)|"
        r"i (?:really |just |absolutely )?(?:can't|cannot) (?:stand|bear)|"
        r"i (?:don't|do not) (?:really )?(?:like|care for|enjoy)|"
        r"i'm not (?:really )?(?:a (?:big |huge )?fan of|into|fond of|keen on))\s+" + OBJ + OBJ_END,
        _dislikes,
    ),
    _rule(
        r"(?i:i (?:really |absolutely |just |truly |do )?(?:love|enjoy|adore|like)|"
        r"i'm (?:a (?:big |huge )?fan of|really into|into|fond of|crazy about|passionate about))"
        r"\s+" + OBJ + OBJ_END,
        _likes,
    ),
    _rule(
        r"(?i:i prefer|i'd rather have|i would rather have)\s+(?P<a>[^,.;!?]+?)"
        r"(?:\s+(?i:over|to|rather than|instead of)\s+(?P<b>[^,.;!?]+))?" + _END,
        lambda m, _: _c(
            P, f"prefers_{slug(m['a'])}", m["a"] + (f" over {m['b']}" if m["b"] else "")
        ),
    ),
    # procedures, routines and context
    _rule(
        r"(?i:(?:please|could you|can you|would you)\s+(?:speak|talk)\s+(?:a\s+(?:little\s+)?"
        r"(?:bit\s+)?|more\s+)?(?P<how>slower|slowly|louder|up|more slowly|more clearly|clearly|"
        r"softer|quieter))",
        lambda m, _: _c(R, "communication_style", "speak " + m["how"].lower()),
    ),
    _rule(
        r"(?i:i (?:always |usually |normally |often )?(?P<verb>take|go|have|do|attend|walk|"
        r"volunteer|play|visit|call|swim|read|watch))\s+(?P<what>[^,.;!?]*?)\s*"
        r"(?P<when>(?i:every (?:morning|evening|night|day|week|weekend|\w+day)|each \w+|"
        r"on \w+days|on weekends|after (?:lunch|dinner|breakfast)|before (?:bed|breakfast)|"
        r"twice a \w+|once a \w+|daily))",
        lambda m, _: _c(
            R,
            f"routine_{slug(m['what']) or slug(m['verb'])}",
            m[0][2:],
        ),
    ),
    _rule(
        r"(?i:(?:i'm|i am|we're|we are)\s+(?:at|in)\s+(?:the\s+)?(?P<where>hospital|"
        r"(?:my|the)\s+[\w']+(?:'s)?(?:\s+(?:house|place|office))?|rehab|hospice|airport)"
        r"(?P<when>\s+(?:right now|today|this week|at the moment|for the week|tonight)))",
        lambda m, _: _c(C, "current_location", m[0].split(None, 1)[1]),
    ),
    _rule(
        r"(?i:(?:we're|we are|i'm|i am)\s+(?P<s>snowed in|stuck at home|without power|"
        r"on vacation|on holiday|traveling|travelling|in quarantine|moving house|packing up))",
        lambda m, _: _c(C, "current_situation", m["s"].lower()),
    ),
    _rule(
        r"(?i:i'm|i am|i turned|i'll be|i will be)\s+(?P<a>\d{2,3})(?=\s+(?i:years old)|"
        r"\s*[,.;!?]|$)",
        lambda m, _: _c(F, "age", m["a"] + " years old"),
    ),
    _rule(
        r"(?i:my birthday is|i was born on)\s+(?P<d>(?i:(?:jan|feb|mar|apr|may|jun|jul|aug|sep|"
        r"oct|nov|dec)[a-z]*\s+\d{1,2}(?:st|nd|rd|th)?|\d{1,2}(?:st|nd|rd|th)?\s+of\s+\w+))",
        lambda m, _: _c(F, "birthday", m["d"]),
    ),
)
