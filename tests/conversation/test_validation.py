"""Value validation, key normalisation and grounding."""

from __future__ import annotations

import pytest

from confide.conversation.validation import is_grounded, normalize_key, validate_value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("  Biscuit  ", "Biscuit"),
        ('"quoted"', "quoted"),
        ("One. Two. Three.", "One. Two."),
        ("a\n\n b", "a b"),
        ("", None),
        ("   ", None),
        ("x" * 281, None),
        ("x" * 280, "x" * 280),
        ("Short one. Y" + "y" * 275 + ".", "Short one."),
    ],
)
def test_validate_value(value: str, expected: str | None) -> None:
    assert validate_value(value) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [("Preferred Name", "preferred_name"), ("pet-dog.name", "pet-dog.name"), ("!!", None)],
)
def test_normalize_key(key: str, expected: str | None) -> None:
    assert normalize_key(key) == expected


def test_grounding() -> None:
    user = "I've got a dog, Biscuit, and I'm baking cookies."
    assert is_grounded("User has a dog named Biscuit", user)
    assert is_grounded("bakes cookies", user)
    assert not is_grounded("Sister Margaret moved to Florida", user)
    assert not is_grounded("anything", "")


def test_the_words_a_third_person_retelling_adds_are_not_content() -> None:
    # The offline extractor writes "I live by myself" as "The user lives by themselves".
    assert is_grounded("The user lives by themselves.", "I live by myself.")
    assert is_grounded("The user and others keep theirs tidy.", "We keep ours tidy.")
