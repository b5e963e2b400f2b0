"""``/v1/conversations/{conversation_id}/messages``: a conversation's chat messages.

Message contents are sealed under the user's key and never logged. After each saved
message a background task checks whether the conversation needs a rolling summary; tests
wait for it with ``app.state.services.tasks.join()``. The history built from the messages
(retrieve, the three-tier memory context, a turn's delivery) is :mod:`.history`'s.
"""

from __future__ import annotations

import asyncio
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
