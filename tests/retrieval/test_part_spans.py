"""Sentence spans of a memory's indexed text (the parts a sentence vector is pooled over)."""

from __future__ import annotations

from datetime import datetime

from confide.index.memory_text import index_text, part_spans


def test_spans_are_the_long_sentences_of_the_value_inside_the_indexed_text() -> None:
    value = (
        "Hey Joanna! I won a really big video game tournament last week at the hall. "
        "Then we all went out for pizza with the whole team afterwards?! Nice"
    )
    indexed = index_text(value, speaker="Nate", when=datetime(2023, 5, 8))
    spans = part_spans(indexed, value, min_words=8)
    assert [indexed[a:b].strip() for a, b in spans] == [
        "I won a really big video game tournament last week at the hall.",
        "Then we all went out for pizza with the whole team afterwards?!",
    ]
    # The prefix (date and speaker) is never part of a span.
    assert min(a for a, _ in spans) > len(indexed) - len(value)


def test_a_memory_of_one_long_sentence_has_no_parts() -> None:
    value = "I won a really big video game tournament last week. Yay!"
    assert part_spans(index_text(value, speaker="Nate"), value, min_words=8) == []
    assert part_spans(value, value, min_words=1) == [(0, 51), (51, 56)]


def test_no_parts_when_switched_off_or_the_value_is_not_the_tail() -> None:
    value = "One two three four. Five six seven eight."
    assert part_spans(value, value, min_words=0) == []
    assert part_spans(value, "something else", min_words=1) == []
    assert part_spans(value, value, min_words=4) == [(0, 19), (19, 41)]
