"""The chat layer's data: messages, a conversation's history and subject facts.

Field names are snake_case here (the SDK); the HTTP schemas give the history its camelCase
names.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from confide.types import Identifier, check_user_id

__all__ = [
    "FACT_CATEGORIES",
    "ChatMessage",
    "ContextItem",
    "ContextMessage",
    "ConversationHistory",
    "FactCategory",
    "HistoryMetadata",
    "MemoryContext",
    "MessagePage",
    "NewMessage",
    "SavedMessage",
    "SubjectFact",
]

MAX_MESSAGE_CHARS = 32_000
_STRICT = ConfigDict(frozen=True, extra="forbid")


class FactCategory(StrEnum):
    """What a subject fact is about."""

    PERSONALITY = "personality"
    HOBBY = "hobby"
    RELATIONSHIP = "relationship"
    MILESTONE = "milestone"
    OCCUPATION = "occupation"
    PREFERENCE = "preference"
    HABIT = "habit"
    OTHER = "other"


FACT_CATEGORIES = tuple(c.value for c in FactCategory)


class NewMessage(BaseModel):
    """A message to save in a conversation."""

    model_config = _STRICT

    account_id: Identifier
    conversation_id: Identifier
    user_id: Identifier
    role: Literal["user", "assistant"]
    content: Annotated[str, Field(min_length=1, max_length=MAX_MESSAGE_CHARS)]
    subject_id: Identifier | None = None
    channel: Annotated[str, Field(min_length=1, max_length=64)] | None = None

    @field_validator("user_id")
    @classmethod
    def _user_ok(cls, v: str) -> str:
        return check_user_id(v)


class SavedMessage(BaseModel):
    """Where a saved message landed: its id and its index in the conversation (from 0)."""

    model_config = ConfigDict(frozen=True)

    id: str
    index: int


class ChatMessage(BaseModel):
    """One message of a conversation, opened."""

    model_config = ConfigDict(frozen=True)

    id: str
    index: int
    role: Literal["user", "assistant"]
    content: str
    timestamp: datetime
    subject_id: str | None = None
    channel: str | None = None


class MessagePage(BaseModel):
    """A page of messages, oldest first; ``next_cursor`` continues it (``None``: the end)."""

    model_config = ConfigDict(frozen=True)

    messages: list[ChatMessage]
    next_cursor: int | None


class ContextMessage(BaseModel):
    """A system message callers place before the conversation's messages."""

    model_config = ConfigDict(frozen=True)

    role: Literal["system"] = "system"
    content: str


class HistoryMetadata(BaseModel):
    """What a :class:`ConversationHistory` holds."""

    model_config = ConfigDict(frozen=True)

    conversation_id: str
    message_count: int
    oldest_message_timestamp: datetime | None
    newest_message_timestamp: datetime | None
    has_long_term_context: bool
    has_semantic_context: bool
    has_summary_context: bool = False


class ConversationHistory(BaseModel):
    """A conversation as a chat model takes it.

    ``messages``: the recent user and assistant messages (``role``, ``content``,
    ``timestamp``), oldest first; ``context_messages``: system messages with memory, placed
    before them; ``metadata``: counts and which context tiers answered.
    :class:`MemoryContext` is the older three-tier form of the same findings.
    """

    model_config = ConfigDict(frozen=True)

    messages: list[dict[str, str]]
    context_messages: list[ContextMessage]
    metadata: HistoryMetadata


class ContextItem(BaseModel):
    """Something a context tier found: a memory, a summary chunk or a subject fact.

    ``score`` is its cosine similarity to the input when a vector search found it
    (``None``: found by keyword, or a subject fact).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    kind: Literal["memory", "summary", "fact"]
    content: str
    category: str | None
    created_at: datetime
    score: float | None = None


class MemoryContext(BaseModel):
    """A conversation's history in the older three-tier form.

    ``short_term``: the recent messages (``role``, ``content``, ``timestamp``), oldest
    first, as :attr:`ConversationHistory.messages`; ``long_term``: the summary chunks (best
    first), the important memories the keyword tier found and the subject's facts;
    ``semantic``: the memories found by similarity to the input. The same findings as
    :class:`ConversationHistory`, unformatted.
    """

    model_config = ConfigDict(frozen=True)

    short_term: list[dict[str, str]]
    long_term: list[ContextItem]
    semantic: list[ContextItem]


class SubjectFact(BaseModel):
    """A fact about a subject, as the asking user may see it."""

    model_config = ConfigDict(frozen=True)

    id: str
    user_id: str
    subject_id: str
    category: FactCategory
    content: str
    visibility: Literal["private", "shared"]
    version: int
    created_at: datetime
    updated_at: datetime
