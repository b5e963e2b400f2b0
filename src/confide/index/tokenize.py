"""Lexical tokenisation for BM25: text → normalised terms (plain strings).

Lower-cases (NFKC), splits on anything that is not a letter or digit, drops possessive
``'s``, stopwords and one-character terms (digits excepted), and applies a light suffix
stemmer so that "paintings", "painted" and "painting" meet. Storage hashes the terms
(HMAC) before it keeps them; this module never sees keys.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["STOPWORDS", "TOKENIZER_VERSION", "stem", "terms", "tokenize"]

TOKENIZER_VERSION = 1
"""The version of :func:`terms` that stores record beside their search terms.

Bump it with any change that alters what :func:`terms` returns for some text (the word
pattern, normalisation, :data:`STOPWORDS`, the stemmer's rules), or what text of a memory is
tokenised (``confide.index.memory_text.lexical_text``): stored terms are hashed, so terms made
the old way no longer match queries made the new way. Stores written with another version are
refused until ``confide reindex`` has re-written their terms. A test pins a digest of this
module's output and tables together with the number.
"""

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*", re.UNICODE)

STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "aren't",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "can't",
        "cannot",
        "could",
        "couldn't",
        "did",
        "didn't",
        "do",
        "does",
        "doesn't",
        "doing",
        "don't",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "hadn't",
        "has",
        "hasn't",
        "have",
        "haven't",
        "having",
        "he",
        "he'd",
        "he'll",
        "he's",
        "her",
        "here",
        "here's",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "how's",
        "i",
        "i'd",
        "i'll",
        "i'm",
        "i've",
        "if",
        "in",
        "into",
        "is",
        "isn't",
        "it",
        "it's",
        "its",
        "itself",
        "let's",
        "me",
        "more",
        "most",
        "mustn't",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "ought",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "shan't",
        "she",
        "she'd",
        "she'll",
        "she's",
        "should",
        "shouldn't",
        "so",
        "some",
        "such",
        "than",
        "that",
        "that's",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "there's",
        "these",
        "they",
        "they'd",
        "they'll",
        "they're",
        "they've",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "wasn't",
        "we",
        "we'd",
        "we'll",
        "we're",
        "we've",
        "were",
        "weren't",
        "what",
        "what's",
        "when",
        "when's",
        "where",
        "where's",
        "which",
        "while",
        "who",
        "who's",
        "whom",
        "why",
        "why's",
        "with",
        "won't",
        "would",
        "wouldn't",
        "you",
        "you'd",
        "you'll",
        "you're",
        "you've",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "also",
        "just",
        "really",
        "yeah",
        "oh",
        "hey",
        "hi",
        "ok",
        "okay",
        "will",
        "yes",
        "s",
        "t",
        "d",
        "ll",
        "m",
        "re",
        "ve",
    ]
)

# (suffix, replacement, minimum stem length left after removing the suffix)
_RULES: tuple[tuple[str, str, int], ...] = (
    ("ies", "y", 3),
    ("sses", "ss", 2),
    ("ness", "", 4),
    ("ments", "ment", 4),
    ("ings", "", 4),
    ("ing", "", 4),
    ("edly", "", 4),
    ("ied", "y", 3),
    ("ed", "", 4),
    ("ly", "", 4),
    ("es", "", 4),
    ("s", "", 3),
)
_DOUBLE = re.compile(r"([bdfgklmnprt])\1$")


def stem(word: str) -> str:
    """Strip one common English suffix (a light, predictable stemmer)."""
    if word.isdigit() or len(word) <= 3:
        return word
    for suffix, repl, min_stem in _RULES:
        if word.endswith(suffix) and len(word) - len(suffix) >= min_stem:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            base = word[: -len(suffix)] + repl
            if suffix in ("ing", "ings", "ed", "edly") and _DOUBLE.search(base):
                base = base[:-1]  # running → run, planned → plan
            return base
    return word


def tokenize(text: str) -> list[str]:
    """Split text into lower-case words, possessives removed, nothing else dropped."""
    norm = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'")
    words: list[str] = []
    for match in _WORD.finditer(norm):
        word = match.group()
        if word.endswith("'s"):
            word = word[:-2]
        words.append(word)
    return words


def terms(text: str) -> list[str]:
    """The BM25 terms of a text, in order, repeats kept (term frequency matters)."""
    out: list[str] = []
    for word in tokenize(text):
        if word in STOPWORDS or (len(word) < 2 and not word.isdigit()):
            continue
        out.append(stem(word.replace("'", "")))
    return out
