"""``/v1/conversations/{conversation_id}``: chat messages and the history built from them.

Message contents are sealed under the user's key and never logged. After each saved
message a background task checks whether the conversation needs a rolling summary; tests
wait for it with ``app.state.services.tasks.join()``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from confide.chat.types import MAX_MESSAGE_CHARS, ChatMessage
from confide.engine.core import MAX_OFFSET
from confide.server.deps import Caller, Svc
from confide.server.schemas import documented

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])

ConversationId = Annotated[str, Field(min_length=1, max_length=256)]


class NewMessageBody(BaseModel):
    """A message to save; ``subject_id`` names who the conversation is about."""

    model_config = ConfigDict(extra="forbid") | documented(
        {"user_id": "line-42", "role": "user", "content": "My sister Maya moved to Lisbon.",
         "subject_id": "maya", "channel": "chat"},
        required=["user_id", "role", "content"],
    )  # fmt: skip

    user_id: str = Field(min_length=1, max_length=256)
    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    subject_id: str | None = Field(default=None, min_length=1, max_length=256)
    channel: str | None = Field(default=None, min_length=1, max_length=64)


class SavedMessageOut(BaseModel):
    """Where the message landed: its id and index (from 0) in the conversation."""

    id: str
    index: int


class MessageOut(BaseModel):
    """One message of the conversation."""

    id: str
    index: int
    role: Literal["user", "assistant"]
    content: str
    timestamp: str
    subject_id: str | None = None
    channel: str | None = None

    @classmethod
    def of(cls, m: ChatMessage) -> MessageOut:
        """The API form of a message."""
        return cls(
            id=m.id,
            index=m.index,
            role=m.role,
            content=m.content,
            timestamp=m.timestamp.isoformat(),
            subject_id=m.subject_id,
            channel=m.channel,
        )


class MessageListOut(BaseModel):
    """A page of messages, oldest first; pass ``next_cursor`` as ``cursor`` for the next."""

    messages: list[MessageOut]
    next_cursor: int | None


@router.post("/{conversation_id}/messages", status_code=201, response_model=SavedMessageOut)
async def add_message(
    conversation_id: str, body: NewMessageBody, services: Svc, caller: Caller
) -> SavedMessageOut:
    """Save a message; a conversation belongs to the user of its first message (404 for
    anyone else). Queues the rolling-summary check, and the multi-fact pass of a long user
    message, for a background worker."""
    saved = await services.agate.add_message(
        caller, {**body.model_dump(), "conversation_id": conversation_id}
    )
    account = caller.account_id
    await asyncio.to_thread(
        services.enqueue_summary, account_id=account, conversation_id=conversation_id
    )
    await services.multifact.message_saved(
        account_id=account,
        user_id=body.user_id,
        conversation_id=conversation_id,
        index=saved.index,
        role=body.role,
        length=len(body.content),
    )
    return SavedMessageOut(id=saved.id, index=saved.index)


@router.get("/{conversation_id}/messages", response_model=MessageListOut)
async def list_messages(
    conversation_id: str,
    services: Svc,
    caller: Caller,
    user_id: Annotated[str, Query(min_length=1, max_length=256)],
    cursor: Annotated[int | None, Query(ge=-1, le=MAX_OFFSET)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> MessageListOut:
    """The conversation's messages after index ``cursor``, oldest first."""
    page = await services.agate.list_messages(
        caller,
        user_id=user_id,
        conversation_id=conversation_id,
        cursor=cursor,
        limit=limit,
    )
    return MessageListOut(
        messages=[MessageOut.of(m) for m in page.messages], next_cursor=page.next_cursor
    )


class RetrieveBody(BaseModel):
    """The user's new input, to find memory relevant to it."""

    model_config = ConfigDict(extra="forbid") | documented(
        {"user_id": "line-42", "input": "Where does Maya live now?", "channel": "chat"},
        required=["user_id", "input"],
    )

    user_id: str = Field(min_length=1, max_length=256)
    input: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    channel: str | None = Field(default=None, min_length=1, max_length=64)
    agent: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="the agent the history is for (one the key is bound to; default: its "
        "first): memory of its allowlist's categories only",
    )


class HistoryMessageOut(BaseModel):
    """A user or assistant message of the history."""

    role: Literal["user", "assistant"]
    content: str
    timestamp: str


class ContextMessageOut(BaseModel):
    """A system message with memory, to place before the conversation's messages."""

    role: Literal["system"] = "system"
    content: str


class HistoryMetadataOut(BaseModel):
    """Counts and which context tiers answered."""

    model_config = ConfigDict(populate_by_name=True)

    conversation_id: str = Field(alias="conversationId")
    message_count: int = Field(alias="messageCount")
    oldest_message_timestamp: str | None = Field(alias="oldestMessageTimestamp")
    newest_message_timestamp: str | None = Field(alias="newestMessageTimestamp")
    has_long_term_context: bool = Field(alias="hasLongTermContext")
    has_semantic_context: bool = Field(alias="hasSemanticContext")


class ConversationHistoryOut(BaseModel):
    """``messages`` (recent, oldest first), ``contextMessages`` (system messages to place
    before them) and ``metadata``."""

    model_config = ConfigDict(populate_by_name=True)

    messages: list[HistoryMessageOut]
    context_messages: list[ContextMessageOut] = Field(alias="contextMessages")
    metadata: HistoryMetadataOut


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


@router.post(
    "/{conversation_id}/retrieve",
    response_model=ConversationHistoryOut,
    response_model_by_alias=True,
)
async def retrieve(
    conversation_id: str, body: RetrieveBody, services: Svc, caller: Caller
) -> ConversationHistoryOut:
    """The conversation's recent messages, with memory relevant to ``input`` as context
    messages (404 for another user's conversation; 403 for an agent the key is not bound to).
    """
    history = await services.agate.retrieve(
        caller,
        body.input,
        user_id=body.user_id,
        conversation_id=conversation_id,
        channel=body.channel,
        agent=body.agent,
    )
    meta = history.metadata
    return ConversationHistoryOut(
        messages=[HistoryMessageOut.model_validate(m) for m in history.messages],
        context_messages=[ContextMessageOut(content=c.content) for c in history.context_messages],
        metadata=HistoryMetadataOut(
            conversation_id=meta.conversation_id,
            message_count=meta.message_count,
            oldest_message_timestamp=_iso(meta.oldest_message_timestamp),
            newest_message_timestamp=_iso(meta.newest_message_timestamp),
            has_long_term_context=meta.has_long_term_context,
            has_semantic_context=meta.has_semantic_context,
        ),
    )
