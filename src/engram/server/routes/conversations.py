"""``/v1/conversations/{conversation_id}``: chat messages and the history built from them.

Message contents are sealed under the user's key and never logged. After each saved
message a background task checks whether the conversation needs a rolling summary; tests
wait for it with ``app.state.services.tasks.join()``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from engram.chat.types import MAX_MESSAGE_CHARS, ChatMessage
from engram.server.deps import Account, Svc

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])

ConversationId = Annotated[str, Field(min_length=1, max_length=256)]


class NewMessageBody(BaseModel):
    """A message to save; ``subject_id`` names who the conversation is about."""

    model_config = ConfigDict(extra="forbid")

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
    conversation_id: str, body: NewMessageBody, services: Svc, account: Account
) -> SavedMessageOut:
    """Save a message; a conversation belongs to the user of its first message (404 for
    anyone else). Schedules the rolling-summary check in the background."""
    saved = await asyncio.to_thread(
        services.chat.add_message,
        {**body.model_dump(), "account_id": account, "conversation_id": conversation_id},
    )
    services.schedule_summary(account_id=account, conversation_id=conversation_id)
    return SavedMessageOut(id=saved.id, index=saved.index)


@router.get("/{conversation_id}/messages", response_model=MessageListOut)
async def list_messages(
    conversation_id: str,
    services: Svc,
    account: Account,
    user_id: Annotated[str, Query(min_length=1, max_length=256)],
    cursor: Annotated[int | None, Query(ge=-1)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> MessageListOut:
    """The conversation's messages after index ``cursor``, oldest first."""
    page = await asyncio.to_thread(
        services.chat.list_messages,
        account_id=account,
        user_id=user_id,
        conversation_id=conversation_id,
        cursor=cursor,
        limit=limit,
    )
    return MessageListOut(
        messages=[MessageOut.of(m) for m in page.messages], next_cursor=page.next_cursor
    )
