"""The offline summariser writes as a model's summary must: dated, in the past tense and the
third person, questions, requests and words to the assistant left out."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Literal

from confide.chat import FactCategory
from confide.chat.summaries import OfflineSummariser, Summary
from confide.chat.types import ChatMessage
from confide.conversation.writing import Outcome, check_episodic, check_semantic

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
MAY_25 = datetime(2023, 5, 25, 23, 30, tzinfo=UTC)


Line = tuple[datetime, Literal["user", "assistant"], str]


def _summary(lines: list[Line]) -> Summary:
    messages = [
        ChatMessage(id=f"m{i}", index=i, role=role, content=text, timestamp=when)
        for i, (when, role, text) in enumerate(lines)
    ]
    return asyncio.run(OfflineSummariser().summarise(messages))


def test_a_summary_is_dated_in_the_past_tense_and_about_the_user() -> None:
    summary = _summary(
        [
            (MAY_8, "user", "Hey! I went to a support group yesterday and it was great."),
            (MAY_8, "assistant", "That sounds lovely. I am glad you went."),
            (MAY_8, "user", "Do you think I should go again?"),
            (MAY_8, "user", "Please remind me about it next week."),
            (MAY_25, "user", "My daughter Maya is starting college in September."),
            (MAY_25, "user", "I love how you explain things."),
        ]
    )
    assert summary.summary == (
        "On 8 May 2023, the user went to a support group yesterday and it was great. "
        "On 25 May 2023, the user's daughter Maya is starting college in September."
    )
    assert check_episodic(summary.summary).outcome is Outcome.ACCEPTED
    assert {(f.category, f.content) for f in summary.facts} == {
        # "yesterday" is read against the day it was said
        (FactCategory.OTHER,
         "On 8 May 2023, the user went to a support group yesterday and it was great."),
        (FactCategory.RELATIONSHIP, "The user's daughter Maya is starting college in September."),
    }  # fmt: skip
    assert all(check_semantic(f.content).outcome is Outcome.ACCEPTED for f in summary.facts)


def test_a_first_statement_not_in_the_past_is_reported() -> None:
    summary = _summary([(MAY_8, "user", "I'm keen on counseling or working in mental health.")])
    assert summary.summary == (
        "On 8 May 2023, the user said that they are keen on counseling or working in mental health."
    )
    assert check_episodic(summary.summary).outcome is Outcome.ACCEPTED


def test_a_range_with_nothing_to_retell_says_when_and_how_much() -> None:
    one_day = _summary([(MAY_8, "user", "How are you?"), (MAY_8, "assistant", "Fine, thanks.")])
    assert one_day.summary == "On 8 May 2023, the user and the assistant exchanged 2 messages."
    two_days = _summary([(MAY_8, "user", "Hello?"), (MAY_25, "user", "Anyone there?")])
    assert two_days.summary.startswith("Between 8 May 2023 and 25 May 2023, the user")
    for summary in (one_day, two_days):
        assert check_episodic(summary.summary).outcome is Outcome.ACCEPTED
        assert summary.facts == []
