"""The predicate lexicon: phrases of one relation become one marker, the longest phrase
first, the words around it untouched."""

from __future__ import annotations

import itertools
from pathlib import Path

from confide.embedders.local import LocalMiniLMEmbedder
from confide.index.tokenize import tokenize
from confide.testing.builders import read_jsonl, unstored_memory
from confide.workers.consolidation import merge_groups
from confide.workers.judges import OfflineJudge, Pair
from confide.workers.predicates import MARKER, predicate_tokens

PARAPHRASES = Path(__file__).resolve().parents[2] / "bench/data/consolidation_paraphrases.jsonl"


def test_a_phrase_becomes_one_marker_spelled_as_written() -> None:
    tokens = predicate_tokens(tokenize("Penicillin gives her an allergic reaction"))
    assert tokens == [
        ("penicillin", "penicillin"),
        (MARKER + "allergic", "gives her an allergic reaction"),
    ]
    assert predicate_tokens(tokenize("Is allergic to penicillin"))[1][0] == MARKER + "allergic"


def test_the_longest_phrase_wins_and_other_words_stay() -> None:
    assert [t for t, _ in predicate_tokens(tokenize("Her favourite hobby is gardening"))] == [
        "her",
        MARKER + "like",
        "is",
        "gardening",
    ]
    # "favourite" alone names no relation: "her favourite fruit" keeps its words.
    assert [t for t, _ in predicate_tokens(tokenize("Her favourite fruit is mango"))] == [
        "her",
        "favourite",
        "fruit",
        "is",
        "mango",
    ]
    assert [t for t, _ in predicate_tokens(tokenize("Lives with her daughter"))] == [
        "lives",
        "with",
        "her",
        "daughter",
    ]


def test_fifteen_paraphrases_of_five_facts_form_five_groups() -> None:
    rows = read_jsonl(PARAPHRASES)
    memories = [unstored_memory(n, row["value"], row["key"]) for n, row in enumerate(rows)]
    judge = OfflineJudge(LocalMiniLMEmbedder(threads=1))
    pairs = [Pair(a, b, 1.0) for a, b in itertools.combinations(memories, 2)]
    cosines = judge.cosines(pairs)
    decided = [
        (Pair(p.first, p.second, c), judge.decide(p, c))
        for p, c in zip(pairs, cosines, strict=True)
    ]
    fact = {m.id: row["fact"] for m, row in zip(memories, rows, strict=True)}
    groups = [{fact[m.id] for m in members} for members, _, _ in merge_groups(decided)]
    assert sorted(len(members) for members, _, _ in merge_groups(decided)) == [3] * 5
    assert all(len(facts) == 1 for facts in groups)  # no group spans two facts
