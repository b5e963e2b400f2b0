"""Token counting (cl100k offline) and trimming to a budget."""

from __future__ import annotations

from confide.retrieval.budget import count_tokens, estimate_tokens, token_counter, trim_to_budget


def test_counts_with_offline_cl100k() -> None:
    assert token_counter() is not estimate_tokens
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0
    assert count_tokens("<|endoftext|>") > 1  # special tokens are plain text here


def test_estimate_is_a_quarter_of_characters() -> None:
    assert estimate_tokens("abcdefgh") == 2
    assert estimate_tokens("abcdefghi") == 3


def test_trim_keeps_leading_items_that_fit() -> None:
    def words(text: str) -> int:
        return len(text.split())

    texts = ["one two", "three four five", "six", "seven eight"]
    assert trim_to_budget(texts, 5, separator_tokens=0, counter=words) == texts[:2]
    # stops at the first item that does not fit: "six" would fit but ranks lower
    assert trim_to_budget(texts, 4, separator_tokens=0, counter=words) == ["one two"]
    assert trim_to_budget(texts, 6, separator_tokens=1, counter=words) == ["one two"]
    assert trim_to_budget(texts, 0, counter=words) == []
    assert trim_to_budget(texts, 100, counter=words) == texts
