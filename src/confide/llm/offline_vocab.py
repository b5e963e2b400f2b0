"""Shared pieces of the offline extractor's rule tables: the rule type, helpers, vocabulary.

Patterns are compiled case-sensitively so that names must be capitalised; the wording around
them is wrapped in ``(?i:...)``. The topic modules (``offline_rules_people``, ``_life``,
``_health``, ``_habits``) build their rules from these pieces.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from confide.llm.candidates import Candidate
from confide.types import MemoryType

__all__ = ["Build", "Rule", "slug"]


F, P, U = MemoryType.FACT, MemoryType.PREFERENCE, MemoryType.FOLLOW_UP
C, H, W, R = MemoryType.CONTEXT, MemoryType.HISTORY, MemoryType.WELLBEING, MemoryType.PROCEDURAL

Build = Callable[[re.Match[str], str], list[Candidate]]


@dataclass(frozen=True)
class Rule:
    """A pattern and the function that turns one of its matches into candidates.

    A match claims its span so later, vaguer rules do not read the same words again,
    unless ``overlap`` is set.
    """

    pattern: re.Pattern[str]
    build: Build
    overlap: bool = False


def _words(text: str) -> list[str]:
    return text.split()


def alt(words: str) -> str:
    """A regex alternation of space-separated words (``_`` stands for a space), longest first."""
    return "|".join(sorted((w.replace("_", " ") for w in words.split()), key=len, reverse=True))


NAME = r"[A-Z][a-z]+(?:[-'][A-Z][a-z]+)?"
PLACE = r"[A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,2}"
NUM_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19, "twenty": 20, "a dozen": 12, "a couple of": 2,
    "a couple": 2, "a pair of": 2,
}  # fmt: skip
NUM = r"\d{1,2}|" + "|".join(sorted(NUM_WORDS, key=len, reverse=True))
# Between a subject and its verb: spaces, or nothing before a contraction ("I'm", "we've").
SEP = r"(?:\s+|(?='))"
# Adverbs people slip in between subject and verb ("I really", "I still", "I've always").
ADV = r"(?:(?i:really|just|still|also|always|usually|normally|absolutely|truly|do|sure|"
ADV += r"certainly|definitely|honestly|actually|totally|simply|mostly|now|even)\s+)*"
REL = alt(
    "wife husband partner spouse daughter son granddaughter grandson great-granddaughter "
    "great-grandson sister brother mother mom mum father dad niece nephew aunt uncle cousin "
    "best_friend friend neighbor neighbour caregiver carer daughter-in-law son-in-law "
    "stepdaughter stepson boyfriend girlfriend fiance fiancee grandmother grandfather "
    "boy girl hubby grandbaby twin_sister twin_brother"
)
REL_ALIASES = {
    "mom": "mother", "mum": "mother", "dad": "father", "neighbour": "neighbor",
    "boy": "son", "girl": "daughter", "hubby": "husband", "fiancee": "fiance",
    "twin sister": "sister", "twin brother": "brother", "grandbaby": "grandchild",
}  # fmt: skip
# Words that may sit between "my" and a relation or pet ("my oldest boy", "our old cat").
KIN_ADJ = alt(
    "late dear youngest oldest eldest older younger little big baby middle only old new "
    "sweet lovely darling beloved first second"
)
KIN_PLURAL = {
    "daughters": "daughters", "sons": "sons", "children": "children", "kids": "children",
    "child": "children", "kid": "children", "grandchildren": "grandchildren",
    "grandkids": "grandchildren", "grandchild": "grandchildren", "grandkid": "grandchildren",
    "great-grandchildren": "great_grandchildren", "great-grandkids": "great_grandchildren",
    "great-grandchild": "great_grandchildren", "grandsons": "grandsons",
    "granddaughters": "granddaughters", "sisters": "sisters", "brothers": "brothers",
    "siblings": "siblings", "daughter": "daughters", "son": "sons", "sister": "sisters",
    "brother": "brothers", "grandson": "grandsons", "granddaughter": "granddaughters",
    "boys": "sons", "girls": "daughters", "stepchildren": "stepchildren",
}  # fmt: skip
PETS = {
    "dog": "dog", "dogs": "dog", "puppy": "dog", "puppies": "dog", "cat": "cat", "cats": "cat",
    "kitten": "cat", "kittens": "cat", "kitty": "cat", "parakeet": "parakeet",
    "parakeets": "parakeet", "budgie": "budgie", "budgies": "budgie", "parrot": "parrot",
    "parrots": "parrot", "canary": "canary", "canaries": "canary", "bird": "bird",
    "birds": "bird", "fish": "fish", "goldfish": "goldfish", "hamster": "hamster",
    "hamsters": "hamster", "rabbit": "rabbit", "rabbits": "rabbit", "bunny": "rabbit",
    "bunnies": "rabbit", "chicken": "chicken", "chickens": "chicken", "hen": "chicken",
    "hens": "chicken", "horse": "horse", "horses": "horse", "pony": "horse",
    "turtle": "turtle", "turtles": "turtle", "tortoise": "tortoise", "guinea pig": "guinea_pig",
    "guinea pigs": "guinea_pig", "goat": "goat", "goats": "goat", "ferret": "ferret",
    "ferrets": "ferret", "cockatiel": "cockatiel", "lizard": "lizard",
}  # fmt: skip
DOG_BREEDS = (
    "retriever retrievers terrier terriers labrador labradors lab labs poodle poodles beagle "
    "beagles collie collies shepherd shepherds spaniel spaniels dachshund dachshunds chihuahua "
    "chihuahuas pug pugs schnauzer schnauzers corgi corgis husky huskies boxer boxers bulldog "
    "bulldogs mutt mutts greyhound greyhounds pointer setter sheepdog yorkie yorkies shih_tzu "
    "maltese pomeranian doodle labradoodle goldendoodle"
)
PETS.update({b.replace("_", " "): "dog" for b in DOG_BREEDS.split()})
PET = "|".join(sorted(PETS, key=len, reverse=True))
KIN = "|".join(sorted(KIN_PLURAL, key=len, reverse=True))
OCCUPATIONS = frozenset(
    _words(
        """teacher nurse pilot firefighter engineer accountant doctor lawyer farmer mechanic
    electrician plumber carpenter secretary librarian chef cook waitress waiter salesman
    saleswoman soldier driver professor dentist pharmacist architect banker journalist writer
    musician artist photographer seamstress tailor baker butcher miner machinist welder janitor
    clerk cashier manager programmer developer designer scientist therapist counselor vet
    veterinarian midwife paramedic postman mailman homemaker housewife principal minister
    pastor priest rabbi sailor fisherman rancher officer policeman bookkeeper hairdresser
    barber typist consultant analyst technician contractor realtor agent caretaker trucker
    nanny housekeeper receptionist administrator supervisor foreman editor reporter surveyor
    lineman conductor engineer printer painter mason roofer inspector auditor broker
    salesperson assistant aide operator dispatcher"""
    )
)
FEELINGS = alt(
    "lonely sad down depressed happy great good better worse tired exhausted anxious worried "
    "nervous scared afraid stressed overwhelmed bored frustrated angry upset grumpy cheerful "
    "excited content calm confused forgetful sick ill unwell weak dizzy blue low glad grateful "
    "hopeful isolated restless miserable wonderful fantastic awful terrible rough homesick "
    "heartbroken fed_up out_of_sorts under_the_weather on_edge antsy cranky irritable "
    "peaceful relaxed rested refreshed drained worn_out run_down sleepy fine okay ok alright "
    "lucky blessed proud"
)
MODIFIERS = alt(
    "so very really a_bit a_little quite pretty kind_of kinda much rather extremely sort_of "
    "a_tad terribly awfully bit little fairly somewhat more less too a_lot"
)
BODY = alt(
    "knees knee back lower_back hips hip shoulders shoulder neck head feet foot hands hand legs "
    "leg arms arm wrist wrists ankle ankles stomach chest tooth teeth eyes joints fingers "
    "toes elbow elbows"
)
CONDITIONS = alt(
    "type_2_diabetes type_1_diabetes diabetes arthritis asthma copd dementia alzheimer's "
    "parkinson's high_blood_pressure heart_disease a_heart_condition cancer glaucoma "
    "macular_degeneration osteoporosis atrial_fibrillation afib neuropathy emphysema "
    "kidney_disease epilepsy sciatica gout migraines vertigo tinnitus a_bad_heart "
    "congestive_heart_failure heart_failure a_pacemaker cataracts lupus fibromyalgia "
    "multiple_sclerosis ms shingles a_bad_back osteoarthritis rheumatoid_arthritis "
    "high_cholesterol low_blood_pressure hypertension depression anxiety diabetes_type_2 "
    "sleep_apnea celiac crohn's"
)
APPOINTMENT_WHAT = alt(
    "doctor's doctor dentist dental eye hair hairdresser cardiologist physical_therapy physio "
    "therapy therapist podiatrist optometrist optician blood_test lab surgery vet lawyer "
    "audiologist hearing specialist nurse massage counseling counselling oncologist "
    "dermatologist chiropractor eye_doctor foot_doctor heart_doctor surgeon neurologist "
    "urologist gp physician pharmacy"
)
HOLIDAYS = (
    r"thanksgiving|christmas(?:\s+eve)?|easter|new\s+year'?s(?:\s+eve|\s+day)?|"
    r"the\s+holidays|hanukkah|passover|the\s+fourth(?:\s+of\s+july)?|independence\s+day|"
    r"memorial\s+day|labor\s+day|mother's\s+day|father's\s+day|my\s+birthday"
)
DAYS = r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?"
MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*"
TIME_WORD = (
    rf"(?:today|tonight|tomorrow(?:\s+(?:morning|afternoon|evening|night))?|"
    rf"(?:this|next|later\s+this)\s+(?:week|weekend|month|year|{DAYS}|morning|afternoon|evening)|"
    rf"{DAYS}(?:\s+(?:morning|afternoon|evening|night)s?)?|"
    rf"{MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?|"
    rf"\d{{1,2}}(?::\d{{2}})?\s*(?:am|pm|a\.m\.|p\.m\.|o'clock)?|noon|"
    rf"the\s+\d{{1,2}}(?:st|nd|rd|th)|in\s+(?:a|two|three|\d)\s+(?:days?|weeks?)|"
    rf"{HOLIDAYS}|morning|afternoon|evening|weekend)"
)
TIME_TAIL = (
    r"(?i:\s*,?\s*(?:(?:on|this|next|at|in|by|every|before|after|for|over)\s+)?"
    rf"{TIME_WORD})*"
)
# A time phrase somewhere later in the clause (required by visit and appointment rules).
HAS_TIME = re.compile(rf"(?i)\b{TIME_WORD}\b(?!\s+(?:years?|months?)\s+ago)")
NOT_NAMES = frozenset(
    _words(
        """I I'm It The This That There Here What When Where Why How Who Yes No Oh Okay Ok
    Well Sure Thanks Thank Hello Hi Hey Monday Tuesday Wednesday Thursday Friday Saturday
    Sunday January February March April May June July August September October November
    December Christmas Easter Thanksgiving God Mom Dad Grandma Grandpa Mr Mrs Ms Dr"""
    )
)
STOP = frozenset(_words("a an the my our to for doing some of about with at in on"))
END = r"(?=\s*(?:[,.;!?]|$))"
OBJ = r"(?P<obj>[^,.;!?]+?)"
OBJ_END = (
    r"(?=\s+(?i:in the|on|at|with|when|because|since|every|but|so|while|after|before|during|"
    r"if|and I|over|rather than|instead of|than|these days|nowadays|anymore)\b|\s*[,.;!?]|$)"
)
PRONOUNS = frozenset(_words("it that this them you him her those these they he she"))


def slug(text: str, *, max_words: int = 4) -> str:
    """A snake_case key fragment: lower-cased words, stop words dropped, at most 4 words."""
    words = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP]
    return "_".join(words[:max_words])[:60]


def num(text: str) -> int:
    """The number a digit string or number word stands for (1 when unknown)."""
    low = " ".join(text.lower().split())
    return int(low) if low.isdigit() else NUM_WORDS.get(low, 1)


def rel(text: str) -> str:
    """A relation word as a key fragment ("Mum" -> "mother", "son-in-law" -> "son_in_law")."""
    low = " ".join(text.lower().split())
    low = REL_ALIASES.get(low, low)
    return low.replace("-", "_").replace(" ", "_")


def clean(text: str) -> str:
    """Trim punctuation, spaces and trailing intensifiers from a value."""
    text = re.sub(r"(?i)\s+(?:at all|very much|so much|a lot|anymore|any more|really)$", "", text)
    return " ".join(text.strip(" ,.;!?").split())


def cand(t: MemoryType, key: str, value: str, conf: float = 0.7) -> list[Candidate]:
    """One candidate (or none when the key or the cleaned value is empty)."""
    value = clean(value)
    if not key or not value:
        return []
    return [Candidate(type=t, key=key, value=value, confidence=conf)]


def rule(pattern: str, build: Build, *, overlap: bool = False) -> Rule:
    """Compile ``pattern`` into a :class:`Rule`."""
    return Rule(re.compile(pattern), build, overlap)


def occupation_words(text: str) -> str | None:
    """``text`` if its last word names an occupation ("school teacher"), else ``None``."""
    words = clean(text).split()
    if not words:
        return None
    head = words[-1].lower()
    return " ".join(words) if head in OCCUPATIONS or head.endswith(("ist", "ician")) else None
