"""Tool schemas, argument models, and the offline extractor on every tool example."""

from __future__ import annotations

import json

import pytest

from confide.conversation.tools import (
    TOOL_EXAMPLES,
    TOOL_NAMES,
    ForgetMemoryArgs,
    MemoryQueryArgs,
    StoreMemoryArgs,
    UpdateMemoryArgs,
    chat_tools,
    parse_arguments,
    realtime_tools,
    reminder_offer,
    tool_parameters,
    tools_json,
    written_value,
)
from confide.errors import ValidationError
from confide.llm.offline import OfflineExtractor
from confide.types import MemoryType


def test_names_and_forms() -> None:
    assert TOOL_NAMES == (
        "store_memory", "update_memory", "forget_memory", "mark_private", "memory_query",
    )  # fmt: skip
    chat = chat_tools()
    realtime = realtime_tools()
    assert [t["function"]["name"] for t in chat] == list(TOOL_NAMES)
    assert [t["name"] for t in realtime] == list(TOOL_NAMES)
    assert all(t["type"] == "function" and "parameters" in t for t in realtime)
    assert json.loads(tools_json("realtime")) == realtime
    assert json.loads(tools_json()) == chat


def test_schema_contracts() -> None:
    params = {t["name"]: t["parameters"] for t in realtime_tools()}
    store = params["store_memory"]
    assert store["required"] == ["memory_type", "key", "value"]
    assert set(store["properties"]) == {
        "memory_type", "key", "value", "confidence", "suggest_reminder",
    }  # fmt: skip
    assert store["properties"]["memory_type"]["enum"] == [
        "fact", "preference", "follow_up", "context", "history", "wellbeing", "insight",
        "procedural",
    ]  # fmt: skip
    assert params["update_memory"]["required"] == ["existing_key", "new_value"]
    assert set(params["forget_memory"]["properties"]) == {"key", "memory_id"}
    assert set(params["mark_private"]["properties"]) == {"key", "memory_id"}
    query = params["memory_query"]["properties"]
    assert set(query) == {
        "agent", "query", "categories", "filters", "top_k", "return", "budget_tokens",
        "threshold",
    }  # fmt: skip
    assert query["top_k"]["default"] == 3
    assert query["return"]["enum"] == ["bullets", "full"]


def test_descriptions_say_store_proactively_and_silently() -> None:
    store = realtime_tools()[0]["description"].lower()
    assert "proactively" in store and "never confirm" in store
    for example in TOOL_EXAMPLES:
        assert example.sentence in realtime_tools()[0]["description"]


@pytest.mark.parametrize("example", TOOL_EXAMPLES, ids=lambda e: f"{e.key}")
def test_offline_extractor_handles_every_tool_example(example: object) -> None:
    from confide.conversation.tools import ToolExample

    assert isinstance(example, ToolExample)
    found = {c.key: c for c in OfflineExtractor().extract_text(example.sentence)}
    assert example.key in found, example.sentence
    candidate = found[example.key]
    assert candidate.type.value == example.type
    assert example.value.lower() in candidate.value.lower()


def test_parse_arguments() -> None:
    store = parse_arguments(
        "store_memory", '{"memory_type": "follow_up", "key": "appointment_doctor", '
        '"value": "Tuesday 10am", "suggest_reminder": true}'
    )  # fmt: skip
    assert isinstance(store, StoreMemoryArgs)
    assert store.memory_type is MemoryType.FOLLOW_UP and store.suggest_reminder
    assert store.confidence == 1.0
    update = parse_arguments("update_memory", '{"existing_key": "City", "new_value": "Tucson"}')
    assert isinstance(update, UpdateMemoryArgs) and update.memory_type is None
    forget = parse_arguments("forget_memory", '{"memory_id": "m1"}')
    assert isinstance(forget, ForgetMemoryArgs) and forget.key is None
    query = parse_arguments("memory_query", '{"query": "family", "return": "full"}')
    assert isinstance(query, MemoryQueryArgs)
    assert (query.top_k, query.return_) == (3, "full")


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("nope", "{}", "unknown tool"),
        ("store_memory", "{", "not valid JSON"),
        ("store_memory", "[]", "JSON object"),
        ("store_memory", '{"memory_type": "gossip", "key": "k", "value": "v"}', "memory_type"),
        ("forget_memory", "{}", "invalid"),
        ("memory_query", '{"query": "x", "top_k": 0}', "top_k"),
    ],
)
def test_parse_arguments_refuses(name: str, args: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse_arguments(name, args)


def test_reminder_offer_mentions_the_value() -> None:
    assert "Tuesday" in reminder_offer("doctor on Tuesday")


def test_arguments_take_either_spelling_and_errors_name_them_as_given() -> None:
    update = parse_arguments("update_memory", {"existingKey": "City", "new_value": "Tucson"})
    assert isinstance(update, UpdateMemoryArgs)
    assert (update.existing_key, update.new_value) == ("City", "Tucson")
    query = parse_arguments("memory_query", {"query": "family", "topK": 5, "budgetTokens": 9})
    assert isinstance(query, MemoryQueryArgs) and (query.top_k, query.budget_tokens) == (5, 9)
    with pytest.raises(ValidationError) as caught:
        parse_arguments("store_memory", {"memoryType": "gossip", "key": "k"})
    assert caught.value.fields == ("memoryType", "value")
    assert set(caught.value.allowed) == {"memoryType"}
    assert "gossip" not in str(caught.value)
    # A blank or null argument is one not given; the rule over two fields names both.
    with pytest.raises(ValidationError) as neither:
        parse_arguments("forget_memory", {"key": "  ", "memoryId": None})
    assert str(neither.value) == "forget_memory: invalid arguments: give key or memoryId"
    assert neither.value.fields == ("key", "memoryId")


def test_tool_parameters_in_either_spelling() -> None:
    snake = tool_parameters("update_memory")
    camel = tool_parameters("update_memory", camel=True)
    assert snake["required"] == ["existing_key", "new_value"]
    assert camel["required"] == ["existingKey", "newValue"]
    assert set(tool_parameters("memory_history", camel=True)["properties"]) == {"key", "memoryId"}
    assert "return" in tool_parameters("memory_query", camel=True)["properties"]
    with pytest.raises(ValidationError, match="unknown tool"):
        tool_parameters("nope")


def test_every_tool_example_passes_the_writing_rules_as_written() -> None:
    for example in TOOL_EXAMPLES:
        assert written_value(example.value, MemoryType(example.type)) == example.value


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("I live alone", "The user lives alone"),
        ("My daughter Sarah lives in Denver.", "The user's daughter Sarah lives in Denver."),
        ("uses a walker", "The user uses a walker"),
        ("Loves gardening.", "The user loves gardening."),
        ('"Fact: The user likes tea."', "The user likes tea."),
        ("Tucson", "Tucson"),
        ("1. Boil the water. 2. Steep the tea. 3. Add milk.",
         "1. Boil the water. 2. Steep the tea. 3. Add milk."),
    ],
)  # fmt: skip
def test_a_tool_value_is_normalised_where_that_is_safe(value: str, stored: str) -> None:
    store = parse_arguments("store_memory", {"memoryType": "fact", "key": "k", "value": value})
    assert isinstance(store, StoreMemoryArgs) and store.value == stored
    update = parse_arguments("update_memory", {"existingKey": "k", "newValue": value})
    assert isinstance(update, UpdateMemoryArgs) and update.new_value == stored


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("Her dog is called Zanzibar.", "not_self_contained"),
        ("You prefer Zanzibar tea.", "not_third_person"),
        ("Does the user like Zanzibar?", "question"),
        ("Remind the user about Zanzibar.", "instruction"),
        ("Zanzibar. Zanzibar is far. The user went there.", "too_many_sentences"),
    ],
)
def test_a_tool_value_the_rules_cannot_mend_is_refused_naming_the_rule(
    value: str, rule: str
) -> None:
    with pytest.raises(ValidationError) as store:
        parse_arguments("store_memory", {"memory_type": "fact", "key": "k", "value": value})
    assert store.value.fields == ("value",)
    assert str(store.value).startswith(f"store_memory: invalid arguments: value: breaks the "
                                       f"writing rules ({rule}): ")  # fmt: skip
    assert "Zanzibar" not in str(store.value)  # values are never echoed
    with pytest.raises(ValidationError) as update:
        parse_arguments("update_memory", {"existingKey": "k", "newValue": value})
    assert update.value.fields == ("newValue",)
