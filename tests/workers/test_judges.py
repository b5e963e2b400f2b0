"""The same-fact judges: the offline judge's rules, and the LLM judge's plumbing over real
HTTP to the scripted server (batching, malformed answers, failures, the usage ledger)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from confide.config import Settings
from confide.embedders import Embedder
from confide.embedders.local import LocalMiniLMEmbedder
from confide.errors import ProviderError
from confide.llm import OpenAICompatibleLLM
from confide.llm.usage import MeteredLLM, UsageLedger
from confide.storage import FEATURES
from confide.storage.apps import SqlAppTables
from confide.storage.sqlite import SqliteStorage
from confide.testing.builders import unstored_memory
from confide.testing.scripted_llm import RecordedRequest, ScriptedLLMServer, ScriptedReply
from confide.workers.judges import (
    JUDGE_PROMPT,
    LLMJudge,
    OfflineJudge,
    Pair,
    Verdict,
    batches,
    difference,
    judge_from_settings,
    parse_verdicts,
    unaligned,
)


def _pair(first: str, second: str, score: float, key: str = "note") -> Pair:
    return Pair(unstored_memory(1, first, key), unstored_memory(2, second, key), score)


def _pairs(count: int) -> list[Pair]:
    return [
        Pair(
            unstored_memory(2 * i, f"Fact {i} said once"),
            unstored_memory(2 * i + 1, f"Fact {i} said again"),
            0.9,
        )
        for i in range(count)
    ]


def _judge(pairs: Sequence[Pair], judge: LLMJudge | OfflineJudge) -> list[Verdict | None]:
    return asyncio.run(judge.judge(pairs, account_id="acct", user_id="ana"))


@pytest.mark.parametrize(
    ("first", "second", "why"),
    [
        ("Walks 2 miles daily", "Walks 3 miles daily", "numbers"),
        ("Walks two miles daily", "Walks 3 miles daily", "numbers"),
        ("Has a sister named Ana", "Has a cousin named Ana", "contrast"),
        ("Her sister is called Ana", "Her sister is called Maria", "names"),
        ("Goes swimming on Mondays", "Goes swimming on Tuesdays", "contrast"),
        ("Likes spicy food", "Does not like spicy food", "negation"),
        ("Drinks coffee every morning", "Drinks tea every morning", "contrast"),
        ("Has three children", "Has three grandchildren", "contrast"),
        ("Her cousin Pedro is a pilot", "Her cousin Pedro is a chef", "contrast"),
        ("Takes the bus to the clinic", "Takes a taxi to the clinic", "contrast"),
        ("Enjoys walking her dog", "Enjoys walking her neighbour's dog", "contrast"),
    ],
)
def test_the_offline_judge_sets_apart_facts_that_differ_in_one_detail(
    first: str, second: str, why: str
) -> None:
    assert difference(first, second) == why
    verdict = OfflineJudge().decide(_pair(first, second, 0.99), 0.99)
    assert not verdict.same


def test_the_offline_judge_needs_the_cosine_less_for_keys_of_one_family() -> None:
    judge = OfflineJudge(same_cosine=0.8, same_key_cosine=0.7)
    said = ("Ana is her sister", "Has a sister named Ana")
    plain = _pair(said[0], said[1], 0.75)
    keyed = _pair(said[0], said[1], 0.75, "sister_name")
    assert difference(*said) is None
    assert judge.decide(plain, 0.75) == Verdict(False, "distant")
    assert judge.decide(keyed, 0.75) == Verdict(True, "similar")
    assert _judge([plain], OfflineJudge(same_cosine=0.7)) == [Verdict(True, "similar")]


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    """The real local embedder: whether two words are interchangeable is a question of
    meaning."""
    return LocalMiniLMEmbedder(threads=1)


# Facts that differ in one word or in a word on one side only: the alignment of their words
# keeps them apart by itself, with the embedder or without, word lists aside.
SIBLINGS = [
    ("Takes vitamin D every morning", "Takes vitamin C every morning"),
    ("Her favourite fruit is mango", "Her favourite fruit is papaya"),
    ("Knits scarves for her grandchildren", "Knits sweaters for her grandchildren"),
    ("Eats fish on Fridays", "Eats meat on Fridays"),
    ("Bakes bread every Saturday", "Bakes cakes every Saturday"),
    ("Has high blood pressure", "Has low blood pressure"),
    ("Volunteers at the shelter twice a month", "Volunteers at the shelter twice a week"),
    ("Speaks a little German", "Speaks fluent German"),
    ("Her son-in-law is called Marco", "Her son is called Marco"),
    ("Lives with her daughter", "Lives next door to her daughter"),
    ("Walks to the park every day", "Walks to the park every other day"),
    ("Wears hearing aids in both ears", "Wears hearing aids in her ears"),
]


@pytest.mark.parametrize(("first", "second"), SIBLINGS)
def test_words_that_do_not_line_up_keep_facts_apart(
    first: str, second: str, minilm: Embedder
) -> None:
    why = {"unaligned", "extra", "numbers"}
    assert unaligned(first, second) in why
    assert unaligned(first, second, OfflineJudge(minilm).similarity) in why
    judge = OfflineJudge(minilm, same_cosine=0.5, same_key_cosine=0.5)
    verdicts = asyncio.run(
        judge.judge([_pair(first, second, 0.99)], account_id="acct", user_id="ana")
    )
    assert verdicts[0] is not None and not verdicts[0].same
    assert verdicts[0].reason in why


def test_numbers_must_agree_and_count_the_same_things() -> None:
    assert unaligned("Has two sons and a daughter", "Has two daughters and a son") == "numbers"
    assert unaligned("Goes to the gym three times a week", "Goes to the gym a week") == "numbers"
    assert unaligned("Walks 2 miles daily", "Walks two miles daily") is None


def test_the_same_words_in_swapped_roles_are_another_fact() -> None:
    assert unaligned("Prefers showers to baths", "Prefers baths to showers") == "order"
    assert unaligned("Her favourite colour is blue", "Blue is her favourite colour") is None


def test_one_root_lines_up_and_a_longer_word_on_it_does_not() -> None:
    assert unaligned("Drinks coffee at noon", "Drinks coffees at noon") is None
    assert unaligned("Paints birds", "Paints fishermen") == "unaligned"
    assert unaligned("Paints fish", "Paints fishermen") == "unaligned"
    assert unaligned("Lives with her grandson", "Lives with her granddaughter") == "unaligned"


def test_paraphrases_line_up_by_stem_root_or_a_near_identical_word(minilm: Embedder) -> None:
    judge = OfflineJudge(minilm)
    assert unaligned("Is allergic to penicillin", "Has a penicillin allergy") is None
    assert unaligned("Has a dog named Max", "Max is her dog") is None
    mom = ("Visits her mother every Sunday", "Every Sunday she visits her mom")
    assert unaligned(*mom) == "unaligned"  # without the embedder, mom is not mother
    assert unaligned(*mom, judge.similarity) is None
    pair = _pair(mom[0], mom[1], 0.9)
    assert _judge([pair], judge) == [Verdict(True, "similar")]


def test_the_offline_judge_embeds_each_word_once(minilm: Embedder) -> None:
    calls: list[int] = []

    class Counting:
        model_id, dims = minilm.model_id, minilm.dims

        def embed(self, texts: Sequence[str]) -> Any:
            calls.append(len(texts))
            return minilm.embed(texts)

    judge = OfflineJudge(cast(Embedder, Counting()))
    pairs = [_pair(a, b, 0.9) for a, b in SIBLINGS]
    first = _judge(pairs, judge)
    words = sum(calls[1:])  # the first call embeds the values for their cosine
    calls.clear()
    assert _judge(pairs, judge) == first
    assert len(calls) == 1 and words > 0  # only the values again: every word came from cache


@pytest.mark.parametrize("count", [1, 4, 5, 9, 10, 11, 19, 23, 50])
def test_batches_hold_five_to_ten_pairs(count: int) -> None:
    parts = batches(count)
    assert [i for part in parts for i in part] == list(range(count))
    assert all(len(p) <= 10 for p in parts)
    assert all(len(p) >= 5 for p in parts) or len(parts) == 1


def test_the_llm_judge_asks_in_batches_and_reads_each_answer(tmp_path: Path) -> None:
    def answer(request: RecordedRequest) -> ScriptedReply:
        asked = request.messages[1]["content"].count("Pair ")
        verdicts = [
            {"pair": n, "same": n % 2 == 1, "merged": f"Merged fact {n}"}
            for n in range(1, asked + 1)
        ]
        return ScriptedReply(content="```json\n" + json.dumps({"pairs": verdicts}) + "\n```")

    storage = SqliteStorage(tmp_path / "confide.db", features=FEATURES)
    storage.migrate()
    ledger = UsageLedger(SqlAppTables(storage))
    with ScriptedLLMServer(responder=answer) as server:
        llm = MeteredLLM(OpenAICompatibleLLM(base_url=server.base_url, model="scripted"), ledger)
        verdicts = _judge(_pairs(12), LLMJudge(llm, ledger=ledger))
        requests = server.requests
    assert [r.messages[0]["content"] for r in requests] == [JUDGE_PROMPT, JUDGE_PROMPT]
    assert [r.messages[1]["content"].count("Pair ") for r in requests] == [6, 6]
    assert all(r.json["temperature"] == 0.0 for r in requests)
    assert "A: Fact 0 said once\nB: Fact 0 said again" in requests[0].messages[1]["content"]
    assert [v.same if v else None for v in verdicts] == [n % 2 == 0 for n in range(12)]
    assert verdicts[0] == Verdict(True, "llm", "Merged fact 1")
    assert verdicts[1] == Verdict(False, "llm", None)  # no wording for different facts
    (totals,) = ledger.report("acct", since=None).operations
    assert (totals.operation, totals.calls) == ("consolidation", 2)
    storage.close()


def test_malformed_answers_leave_their_pairs_undecided() -> None:
    partial = json.dumps(
        {
            "pairs": [
                {"pair": 1, "same": True},
                {"pair": 2, "same": "yes"},
                {"pair": 3, "same": False},
                {"pair": 3, "same": True},
                {"pair": 99, "same": True},
                {"pair": True, "same": True},
                {"pair": 4, "same": True, "merged": "x" * 281},
            ]
        }
    )
    with ScriptedLLMServer(["this is not JSON", partial]) as server:
        llm = OpenAICompatibleLLM(base_url=server.base_url, model="scripted")
        verdicts = _judge(_pairs(10), LLMJudge(llm, largest_batch=5))
    assert verdicts[:5] == [None] * 5
    assert verdicts[5:] == [
        Verdict(True, "llm"),
        None,
        Verdict(False, "llm"),  # the first answer about a pair counts
        Verdict(True, "llm"),  # a wording over 280 characters is dropped
        None,
    ]
    assert parse_verdicts("[1, 2]", 2) == [None, None]
    assert parse_verdicts('{"pairs": "all"}', 1) == [None]


def test_a_failed_call_decides_nothing() -> None:
    with ScriptedLLMServer(default=ScriptedReply(status=503)) as server:
        llm = OpenAICompatibleLLM(base_url=server.base_url, model="scripted")
        with pytest.raises(ProviderError):
            _judge(_pairs(3), LLMJudge(llm))


def test_a_slow_model_times_out_as_a_provider_error() -> None:
    with ScriptedLLMServer([ScriptedReply(content="{}", delay=5.0)]) as server:
        llm = OpenAICompatibleLLM(base_url=server.base_url, model="scripted")
        with pytest.raises(ProviderError):
            _judge(_pairs(1), LLMJudge(llm, timeout=0.2))


def test_batch_size_is_bounded() -> None:
    with ScriptedLLMServer() as server:
        llm = OpenAICompatibleLLM(base_url=server.base_url, model="scripted")
        with pytest.raises(ValueError, match="5-10"):
            LLMJudge(llm, largest_batch=12)


def test_the_offline_judge_is_the_default_without_a_model() -> None:
    settings = Settings.defaults().model_copy(update={"consolidation_same_cosine": 0.75})
    offline = judge_from_settings(settings, embedder=None, llm=None)
    assert isinstance(offline, OfflineJudge) and offline.same_cosine == 0.75
    assert offline.available("acct")
    with ScriptedLLMServer() as server:
        llm = OpenAICompatibleLLM(base_url=server.base_url, model="scripted")
        assert isinstance(judge_from_settings(settings, embedder=None, llm=llm), LLMJudge)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Loves gardening", "Enjoys gardening"),
        (
            "Enjoys gardening and grows tomatoes",
            "Her favourite hobby is gardening; she grows tomatoes",
        ),
        ("Is fond of jazz", "Likes jazz"),
        ("Is allergic to penicillin", "Penicillin gives her an allergic reaction"),
        ("Has a penicillin allergy", "Penicillin gives him allergic reactions"),
        ("Is afraid of dogs", "Dogs scare her"),
        ("Lives in Porto", "Is based in Porto"),
        ("Works as a nurse", "Is employed as a nurse"),
        ("Works at the bank", "Is employed by the bank"),
    ],
)
def test_predicates_of_one_relation_line_up_without_the_embedder(first: str, second: str) -> None:
    assert unaligned(first, second) is None


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Loves fish", "Enjoys meat"),  # one predicate class, two objects
        ("Is allergic to penicillin", "Peanuts give her an allergic reaction"),
        ("Is allergic to penicillin", "Penicillin gives her a headache"),
        ("Lives in Lisbon", "Works in Lisbon"),  # two relations
        ("Works as a nurse", "Works at a nursing home"),
        ("Is afraid of dogs", "Loves dogs"),
        # Two classes never line up, however alike they are spelled.
        ("Her daughter works as a nurse", "Her daughter works at a nursery"),
    ],
)
def test_a_predicate_class_never_joins_different_objects_or_relations(
    first: str, second: str, minilm: Embedder
) -> None:
    judge = OfflineJudge(minilm, same_cosine=0.5, same_key_cosine=0.5)
    assert unaligned(first, second) is not None
    verdict = judge.decide(_pair(first, second, 0.99), 0.99)
    assert not verdict.same


def test_a_one_sided_modifier_of_a_shared_noun_is_a_refinement(minilm: Embedder) -> None:
    assert unaligned("Ana is her younger sister", "Has a sister named Ana") is None
    assert unaligned("Has a sister named Ana", "Ana is her younger sister") is None
    assert unaligned("Has a cat", "Has a black cat") is None
    assert unaligned("Her sister lives in Boston", "Her older sister lives in Boston") is None
    judge = OfflineJudge(minilm)
    pair = _pair("Ana is her younger sister", "Her sister is called Ana", 0.9)
    assert _judge([pair], judge) == [Verdict(True, "similar")]


@pytest.mark.parametrize(
    ("first", "second", "why"),
    [
        # The other side has a modifier of its own there: two descriptions, not one.
        ("Drives a red car", "Drives a small car", "unaligned"),
        ("Her older sister lives in Boston", "Her younger sister lives in Boston", "unaligned"),
        # Words that make the noun another thing, or quantities, never refine.
        ("Her grandmother lives in Porto", "Her great grandmother lives in Porto", "extra"),
        ("Her mother visits on Sundays", "Her step mother visits on Sundays", "extra"),
        ("Has an appointment on Friday", "Has her next appointment on Friday", "extra"),
        ("Is her daughter", "Is her only daughter", "extra"),
        # No determiner before it: an adverb, not a modifier of the noun.
        ("Eats meat", "Rarely eats meat", "extra"),
        # A modifier of a noun the other side does not name refines nothing.
        ("Has a sister", "Has a younger brother", "unaligned"),
    ],
)
def test_a_modifier_refines_only_an_unmodified_noun_of_the_other_side(
    first: str, second: str, why: str, minilm: Embedder
) -> None:
    assert unaligned(first, second) == why
    judge = OfflineJudge(minilm, same_cosine=0.5, same_key_cosine=0.5)
    verdict = judge.decide(_pair(first, second, 0.99), 0.99)
    assert not verdict.same
