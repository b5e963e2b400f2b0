"""The user's own words retold in the third person, as memories are written.

The offline paths (the extractor, the rolling summaries, the app memory paragraph) and the
memory tools keep what the user said, but store it the way the writing rules
(:mod:`confide.conversation.writing`) ask every memory to be written: about the user, in the
third person. :func:`third_person` does the rewriting, word by word and deterministically:

* in each sentence the first mention of the speaker becomes ``the user`` (``the user's``),
  later ones ``they``/``them``/``their``/``theirs``/``themselves``; ``we``/``us``/``our``
  become ``the user and others`` (then ``they``/``them``/``their``);
* the verb after a subject ``I`` agrees with its new subject, past a few adverbs:
  ``I live`` -> ``The user lives``, ``I'm`` -> ``The user is``, ``I don't`` -> ``The user
  doesn't``, ``I'd been`` -> ``the user had been``; a verb in the past tense or a modal is
  left as it is;
* second person (``you``) is left alone: whom it means depends on who speaks, so a caller
  drops such a sentence or refuses the text (:func:`second_person`).

The rules are heuristics over words, not a parser: English only, and a word that is both
a noun and a verb after ``I`` is taken for the verb.
"""

from __future__ import annotations

import re

__all__ = [
    "about_user",
    "as_memory",
    "first_person",
    "is_instruction",
    "retell",
    "second_person",
    "strip_lead_in",
    "third_person",
]

_TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*|[^A-Za-z]+")
_WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)*")
_SENTENCE_BREAK = re.compile(r"[.!?]\s|\n")


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


_FIRST = _set(
    "i i'm i've i'd i'll me my mine myself we we're we've we'd we'll us our ours ourselves"
)
_SECOND = _set(
    "you you're you've you'd you'll your yours yourself yourselves y'all ya'll ya yall u ur"
)
# Between a subject and its verb ("I really like", "I've always been").
_ADVERBS = _set(
    """really just also still always never usually often actually definitely totally only
    even absolutely honestly recently finally sometimes already truly kinda sorta mostly
    generally currently seriously literally barely hardly rarely certainly especially
    personally probably seldom normally typically simply genuinely completely constantly
    occasionally regularly eventually once now then sure mainly basically"""
)
_MODALS = _set(
    """can could will would shall should may might must ought can't cannot couldn't won't
    wouldn't shouldn't mustn't mightn't"""
)
_IRREGULAR_PAST = _set(
    """was were had did said told went came took made gave got felt thought spoke wrote met
    left found knew saw bought brought chose ran sat stood began became kept held lost paid
    sent spent taught understood won ate drank drove flew forgot grew heard led meant slept
    sold fell broke caught built fought hid rode rose sang shook threw woke wore put read set
    let quit cut hit hurt shut swam drew dug fed fled forgave froze hung lay lit overcame
    rang sank slid spun stole stuck struck swore swept tore wept wound didn't wasn't weren't
    hadn't been gone done seen gotten known taken given written eaten forgotten begun driven
    flown grown thrown worn broken chosen spoken stolen woken fallen"""
)
# Verbs ending in "ed" that are not past tense.
_BASE_EED = _set("need feed bleed breed speed succeed proceed exceed heed weed seed embed shed")
# What may follow "I" without being its verb.
_NOT_VERBS = _set(
    """and or but nor too as to who that which the a an in on at with from for of if when
    because so myself alone here there not no"""
)
_THIRD_SINGULAR = {
    "am": "is",
    "are": "is",
    "have": "has",
    "do": "does",
    "don't": "doesn't",
    "haven't": "hasn't",
    "aren't": "isn't",
    "ain't": "isn't",
    "were": "was",
    "weren't": "wasn't",
    "go": "goes",
    "wanna": "wants to",
    "gotta": "has to",
}
_PLURAL = {"am": "are", "was": "were", "wasn't": "weren't"}
_CONTRACTED = {
    "m": ("is", "are"),
    "ve": ("has", "have"),
    "ll": ("will", "will"),
    "re": ("is", "are"),
}
# A verb at the start of a value with no subject ("lives alone", "feels tired").
_PREDICATES = _set(
    """is are was were has had does did can can't cannot likes loves hates enjoys prefers
    wants needs lives works plays grows keeps visits goes takes makes uses feels seems
    wears drives walks runs reads watches cooks bakes owns speaks knows thinks believes
    misses worries attends volunteers teaches studies cares spends gets sees hopes plans
    avoids finds struggles relies trusts remembers forgets follows collects sleeps wakes
    suffers survived served retired moved grew worked taught ran married lost raised
    lived used started stopped quit"""
)
# Words people open with: some always ("Oh", "So", "By the way"), others only when
# punctuation follows them ("Great!", but not "Great weather").
_LEAD_IN = re.compile(
    r"(?i)^(?:(?:oh+|ooh+|wow+|whoa|yeah+|yep|yup|nope|nah|well|ok|okay|um+|uh+|hmm+|haha\w*|"
    r"hah|ha|ah+|lol|aw+|omg|gosh|hey+|hi|hello|thanks|thank you|btw|by the way|anyways?|"
    r"and|but|so|also|plus|honestly|guess what|you know what|of course)\b|"
    r"(?:yes|no|sure|totally|absolutely|definitely|exactly|right|cool|great|awesome|nice|"
    r"true|same|agreed|indeed|man|dude|wow)(?=[,!.]))[\s,!.:;\u2013\u2014-]*"
)
# A name the speaker addresses after a lead-in ("Thanks, Mel!").
_ADDRESS = re.compile(r"^[A-Z][a-z]+(?:\s[A-Z][a-z]+)?\s*[,!.]+\s*")
# Fillers that carry nothing to remember: "you know", a closing "please".
_FILLER = re.compile(r"(?i)\byou know,\s*|,\s*you know\b|,\s*please\b")
_DANGLING = _set("in on at to of with for from by about into and or but the a an that than as")
_AUXILIARIES = _set("am are is have has had was were do did 'm 're 've 'd")
# Words a value may open with that point at something said before them.
_POINTERS = _set("that this these those it being been be having")
# A sentence opening with one of these has dropped its subject ("Gonna try it", "Love that").
_SUBJECT_DROPPED = _set(
    """gonna wanna gotta glad been love loved looks looked sounds sounded seems seemed hope
    hoping thinking feeling got had went made having getting trying going can't cannot
    wish miss missed hate hated need needed know knew think thought feel felt guess reckon
    bet saw heard took was were am is are did does do have has will would could should can
    might must totally just such"""
)
# A sentence opening with one of these points at something said before it.
_POINTING = _set("he she they it this that these those him her them his its their there here")
_IMPERATIVE = _set(
    """please let's lets let don't do remember remind tell call ask take look check give make
    keep try go come stop help imagine picture listen wait see note send show bring put get
    hold find read watch enjoy guess trust believe hang stay be consider kindly ensure avoid
    never always"""
)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text.replace("\u2019", "'"))]


def first_person(text: str) -> bool:
    """Whether ``text`` speaks in the first person (``I``, ``my``, ``we``...)."""
    return any(w in _FIRST for w in _words(text))


def second_person(text: str) -> bool:
    """Whether ``text`` addresses someone (``you``, ``your``...)."""
    return any(w in _SECOND for w in _words(text))


def is_instruction(sentence: str) -> bool:
    """Whether ``sentence`` (its lead-in removed) opens as a request or an order:
    ``Please...``, ``Let's...``, ``Remind me...``, ``Take a look...``."""
    words = _words(sentence)
    return bool(words) and words[0] in _IMPERATIVE


def strip_lead_in(sentence: str) -> str:
    """``sentence`` without the words people open with (``Oh, wow, Mel!``, ``Yeah,``,
    ``By the way,``) nor the fillers ``you know`` and a closing ``please``; the rest
    capitalised."""
    text = " ".join(_FILLER.sub("", sentence.replace("\u2019", "'")).split())
    while True:
        stripped = _LEAD_IN.sub("", text, count=1)
        if stripped == text:
            break
        text = _ADDRESS.sub("", stripped)
    return text[:1].upper() + text[1:]


def retell(sentence: str) -> str | None:
    """One sentence of the user's as a sentence of a memory, or ``None`` when it is not a
    statement that stands on its own.

    The lead-in goes (:func:`strip_lead_in`), the rest is retold (:func:`third_person`) and
    ends with a full stop. Not statements: a request or an order (:func:`is_instruction`),
    words to someone (``you``), a sentence that drops its subject (``Gonna...``, ``Love
    that...``) or opens by pointing back at what was said before it (``It was...``,
    ``They've...``).
    """
    said = strip_lead_in(sentence)
    words = _words(said)
    if not words or is_instruction(said) or second_person(said):
        return None
    if words[0] in _SUBJECT_DROPPED or words[0].split("'")[0] in _POINTING:
        return None
    told = third_person(said).strip().rstrip("!.,;:- ").strip()
    return told[:1].upper() + told[1:] + "." if told else None


def _third_singular(verb: str) -> str:
    low = verb.lower()
    if low in _THIRD_SINGULAR:
        return _THIRD_SINGULAR[low]
    if (
        low in _MODALS
        or low in _IRREGULAR_PAST
        or low in _NOT_VERBS
        or low.endswith("n't")
        or (low.endswith("ed") and low not in _BASE_EED)
        or "'" in low
    ):
        return verb
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(low) > 1 and low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _participle(word: str) -> bool:
    low = word.lower()
    return low in _IRREGULAR_PAST or (low.endswith("ed") and low not in _BASE_EED)


def _next_word(tokens: list[str], i: int) -> int | None:
    """The index of the word after token ``i`` past adverbs, if only spaces come between."""
    j = i + 1
    while j < len(tokens):
        token = tokens[j]
        if not token[0].isalpha():
            if token.strip():
                return None
            j += 1
            continue
        if token.lower() in _ADVERBS:
            j += 1
            continue
        return j
    return None


def _word_before(tokens: list[str], i: int) -> int | None:
    """The index of the word before token ``i``, if only spaces come between."""
    j = i - 1
    while j >= 0 and not tokens[j].strip():
        j -= 1
    return j if j >= 0 and tokens[j][0].isalpha() else None


def _agree(word: str, *, singular: bool) -> str:
    """``word`` (a verb after ``I``/``we``) agreeing with its new subject, its case kept."""
    low = word.lower()
    agreed = _third_singular(word) if singular else _PLURAL.get(low, word)
    return agreed[:1].upper() + agreed[1:] if word[0].isupper() else agreed


def _paired(tokens: list[str], k: int) -> bool:
    """Whether the ``and`` at token ``k`` joins a sentence's first words to ``I`` as one
    subject (``My wife and I``, ``Tom and I``)."""
    words: list[str] = []
    for token in reversed(tokens[:k]):
        if _SENTENCE_BREAK.search(token + " ") and not token[0].isalpha():
            break
        if token[0].isalpha():
            words.insert(0, token)
    if not 1 <= len(words) <= 4:
        return False
    if words[0].lower() in ("the user", "the user and others", "they"):
        return False  # a retold "I"/"we": a clause of its own came first
    first = words[0].lower().split()[0]  # a retold "My" is already "The user's"
    return first in ("my", "our", "the") or (len(words) == 1 and words[0].istitle())


def _subject(tokens: list[str], i: int, *, named: bool) -> str:
    """The subject ``I``/``we`` (or a contraction) at token ``i`` retold; the verb that goes
    with it (the next word, or the auxiliary before it in a question) agrees in place."""
    head, _, tail = tokens[i].lower().partition("'")
    k = _word_before(tokens, i)
    before = "" if k is None else tokens[k].lower()
    paired = k is not None and before == "and" and head == "i" and _paired(tokens, k)
    singular = head == "i" and not named and not paired
    subject = "they" if named else ("the user" if head == "i" else "the user and others")
    if paired:
        subject = "the user"  # "my wife and I": a subject of two, its verb plural
    if tail == "d":
        j = _next_word(tokens, i)
        return subject + (" had" if j is not None and _participle(tokens[j]) else " would")
    if tail:
        return f"{subject} {_CONTRACTED[tail][0 if singular else 1]}"
    j = _next_word(tokens, i)
    if k is not None and before in _AUXILIARIES:
        tokens[k] = _agree(tokens[k], singular=singular)  # a question: "do I drive"
    elif j is not None and before not in _MODALS:
        tokens[j] = _agree(tokens[j], singular=singular)
    return subject


# Object and possessive forms: (first mention, later mentions).
_OTHER_FORMS = {
    "me": ("the user", "them"),
    "us": ("the user and others", "them"),
    "my": ("the user's", "their"),
    "our": ("the user's", "their"),
    "mine": ("the user's", "theirs"),
    "ours": ("the user's", "theirs"),
    "myself": ("themselves", "themselves"),
    "ourselves": ("themselves", "themselves"),
}


def third_person(text: str, *, named: bool = False) -> str:
    """``text`` retold about the user in the third person (see the module's rules).

    ``named``: the user is already named before ``text`` (``the user said that ...``), so
    its first sentence says ``they`` from the start. Text with no first person comes back
    unchanged.
    """
    text = text.replace("\u2019", "'")
    if not first_person(text):
        return text
    tokens = _TOKEN.findall(text)
    at_start = True
    for i, token in enumerate(tokens):
        if not token[0].isalpha():
            if _SENTENCE_BREAK.search(token + " "):
                at_start, named = True, False
            continue
        low = token.lower()
        out: str | None = None
        if low.partition("'")[0] in ("i", "we") and low in _FIRST:
            out = _subject(tokens, i, named=named)
        elif low in _OTHER_FORMS:
            out = _OTHER_FORMS[low][1 if named else 0]
        if out is not None:
            named = True
            tokens[i] = out[:1].upper() + out[1:] if at_start else out
        at_start = False
    return "".join(tokens)


def as_memory(value: str) -> str:
    """``value`` written about the user: first person retold (:func:`third_person`), and a
    value that opens with its verb (``lives alone``, ``feels tired``) given the user as its
    subject (``The user lives alone``). Anything else comes back as it was."""
    words = _words(value)
    if words and words[0] in _PREDICATES:
        return "The user " + third_person(value[:1].lower() + value[1:], named=True)
    told = third_person(value)
    return told[:1].upper() + told[1:] if told.startswith("the user") else told


def _subject_before(prefix: str, *, reach: int) -> int | None:
    """Where the last ``I``/``we`` of ``prefix`` starts, if only ``reach`` words (or, with 0,
    only auxiliaries and adverbs) and no punctuation stand between it and the end."""
    subjects = list(re.finditer(r"(?i)\b(?:i|we)(?:'[a-z]+)?(?![A-Za-z'])", prefix))
    if not subjects:
        return None
    last = subjects[-1]
    between = prefix[last.end() :]
    if re.search(r"[,;:.!?()\"]", between):
        return None
    words = _words(between)
    if reach == 0:
        return last.start() if all(w in _AUXILIARIES or w in _ADVERBS for w in words) else None
    return last.start() if len(words) <= reach else None


def about_user(value: str, clause: str) -> str | None:
    """A value the offline rules took from ``clause``, written about the user; ``None`` when
    it cannot be (it ends on a word that needs more, or it addresses someone).

    First person is retold (:func:`third_person`); a value that opens with its verb
    (``lives alone``, ``ran a bakery``) or with a word that points back (``that it teaches
    me...``) gets the user as its subject, with the words that stood before it in ``clause``
    (``I'm snowed in`` -> ``The user and others are snowed in``, ``I love that it...`` ->
    ``The user loves that it...``); a value that ends on a word that needs more (``snowed
    in``) takes the rest of the clause. Names, places and counts (``Maya``, ``2 daughters``)
    come back as they were.
    """
    clause = clause.replace("\u2019", "'")
    value = value.replace("\u2019", "'").strip()
    words = _words(value)
    at = clause.lower().find(value.lower())
    if words and at >= 0 and words[-1] in _DANGLING:
        value = clause[at:].rstrip(" .!?;,")
        words = _words(value)
    if not words or words[-1] in _DANGLING:
        return None
    lead = words[0]
    told = None
    opens = lead in _POINTERS or lead not in _NOT_VERBS | _DANGLING
    if at >= 0 and value[:1].islower() and opens:
        reach = 6 if lead in _PREDICATES or lead in _POINTERS else 0
        subject = _subject_before(clause[:at], reach=reach)
        owner = re.search(r"(?i)\b(?:my|our)\s+$", clause[:at])
        if subject is not None:
            told = third_person(clause[subject:at] + value)
        elif owner is not None:
            told = third_person(owner.group(0) + value)
    if told is None:
        told = as_memory(value)
    if second_person(told):
        return None
    return told[:1].upper() + told[1:] if told.lower().startswith("the user") else told
