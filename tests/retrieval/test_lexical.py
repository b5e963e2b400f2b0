"""Tokenisation for BM25 and the BM25 arithmetic."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TypedDict

import pytest

from confide.index import tokenize
from confide.index.memory_text import lexical_text
from confide.index.tokenize import STOPWORDS, TOKENIZER_VERSION, stem, terms
from confide.retrieval.bm25 import BM25Params, bm25_idf, bm25_score, query_term_counts
from confide.types import Memory, MemoryState, MemoryType, Source, Visibility


class _Corpus(TypedDict):
    """Keyword arguments of ``bm25_score`` shared by a test's calls."""

    doc_len: int
    n_docs: int
    avg_doc_len: float


class _Stats(_Corpus):
    doc_freqs: Mapping[str, int]


def test_terms_lowercase_strip_punctuation_stopwords_and_possessives() -> None:
    assert terms("What did Caroline's SISTER paint, yesterday?!") == [
        "caroline",
        "sister",
        "paint",
        "yesterday",
    ]


def test_terms_keep_numbers_and_unicode_words() -> None:
    assert terms("Moved to Zürich in 2023, 3 kids") == ["moved", "zürich", "2023", "3", "kid"]


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("paintings", "paint"),
        ("painted", "paint"),
        ("painting", "paint"),
        ("running", "run"),
        ("stories", "story"),
        ("class", "class"),
        ("bus", "bus"),
        ("2023", "2023"),
    ],
)
def test_light_stemmer(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_query_and_document_forms_meet() -> None:
    assert set(terms("She loves painting sunsets")) & set(terms("I painted a sunset"))


def test_the_tokenizer_version_moves_with_what_it_makes() -> None:
    # Stores keep hashes of these terms. When this digest changes, stored terms no longer
    # match new queries: bump TOKENIZER_VERSION with it (stores then ask for a reindex).
    when = datetime(2023, 5, 8, tzinfo=UTC)
    memory = Memory(
        id="m",
        lineage_id="m",
        account_id="a",
        user_id="u",
        key="daughter_name",
        value="Caroline's daughters aren't running; they're PAINTING in Zürich since 2023!",
        metadata={"speaker": "Mel"},
        type=MemoryType.FACT,
        confidence=1.0,
        importance=3,
        source=Source.API,
        visibility=Visibility.PRIVATE,
        pinned=False,
        version=1,
        state=MemoryState.ACTIVE,
        created_at=when,
        updated_at=when,
    )
    words = "Possessives' stemming: happiness, studies, planned, quickly, classes, buses, a b 7"
    # Its tables too, for the edits a sample would miss.
    tables = [tokenize._WORD.pattern, tokenize._RULES, tokenize._DOUBLE.pattern]
    made = [terms(lexical_text(memory)), terms(words), sorted(STOPWORDS), tables]
    digest = hashlib.sha256(json.dumps(made).encode()).hexdigest()[:16]
    assert (TOKENIZER_VERSION, digest) == (1, "94b660b393e5690f")


def test_bm25_matches_hand_computation() -> None:
    params = BM25Params(k1=1.2, b=0.75)
    idf = math.log(1 + (10 - 2 + 0.5) / (2 + 0.5))
    expected = idf * 2 * 2.2 / (2 + 1.2 * (1 - 0.75 + 0.75 * 8 / 10))
    score = bm25_score(
        {"paint": 1},
        {"paint": 2, "sunset": 1},
        doc_len=8,
        doc_freqs={"paint": 2},
        n_docs=10,
        avg_doc_len=10.0,
        params=params,
    )
    assert score == pytest.approx(expected)


def test_bm25_rare_terms_weigh_more_and_absent_terms_nothing() -> None:
    assert bm25_idf(1, 100) > bm25_idf(50, 100) > 0
    common = _Corpus(doc_len=5, n_docs=100, avg_doc_len=5.0)
    rare = bm25_score({"x": 1}, {"x": 1}, doc_freqs={"x": 1}, **common)
    frequent = bm25_score({"x": 1}, {"x": 1}, doc_freqs={"x": 60}, **common)
    assert rare > frequent
    assert bm25_score({"y": 1}, {"x": 3}, doc_freqs={"x": 1}, **common) == 0.0


def test_bm25_saturates_and_counts_repeated_query_terms() -> None:
    stats = _Stats(doc_len=10, doc_freqs={"x": 3}, n_docs=50, avg_doc_len=10.0)
    one, two, ten = (bm25_score({"x": 1}, {"x": tf}, **stats) for tf in (1, 2, 10))
    assert one < two < ten < one * (BM25Params().k1 + 1)
    twice = bm25_score(query_term_counts(["x", "x"]), {"x": 1}, **stats)
    assert twice == pytest.approx(2 * one)
