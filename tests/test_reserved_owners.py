"""User ids of the form ``app:<id>`` belong to app scopes: no user's data is sealed under an
app's keys, and an app memory belongs to its own scope's owner only."""

from __future__ import annotations

import pytest

from confide.chat.types import NewMessage
from confide.errors import ValidationError
from confide.types import NewMemory, validated


@pytest.mark.parametrize(
    "fields",
    [
        {"user_id": "app:notes"},
        {"user_id": "app:notes", "app_id": "other"},
        {"user_id": "someone", "app_id": "notes"},
    ],
)
def test_app_owners_are_reserved_for_their_scope(fields: dict[str, str]) -> None:
    with pytest.raises(ValidationError, match="app"):
        validated(NewMemory, {"account_id": "a", "key": "k", "value": "v", **fields})


def test_an_app_memory_belongs_to_its_scope_owner() -> None:
    memory = validated(
        NewMemory,
        {"account_id": "a", "user_id": "app:notes", "app_id": "notes", "key": "k", "value": "v"},
    )
    assert memory.user_id == "app:notes"


def test_a_chat_message_cannot_be_sealed_under_an_app_owner() -> None:
    with pytest.raises(ValidationError, match="reserved"):
        validated(
            NewMessage,
            {
                "account_id": "a",
                "conversation_id": "c",
                "user_id": "app:notes",
                "role": "user",
                "content": "hello",
            },
        )
