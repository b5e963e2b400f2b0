"""``/v1/conversations/{conversation_id}``: the history built from a conversation's messages.

Three answers for a turn, each a translation of one gate operation: ``retrieve`` (recent
messages and memory as context messages), ``memory_context`` (the same findings in the
older three-tier form) and ``deliver`` (what to send the agent's model, as its profile's
delivery mode says). Nothing here logs an input or a message.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from confide.chat.types import MAX_MESSAGE_CHARS, ContextItem
from confide.server.deps import Caller, Svc
from confide.server.schemas import documented

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])

_CHANNEL = Field(
    default=None,
    min_length=1,
    max_length=64,
    description="where the reply goes: the recent messages are this channel's (and those "
    "saved without one); without it, every channel's",
)
_AGENT = Field(
    default=None,
    min_length=1,
    max_length=64,
    description="the agent the history is for (one the key is bound to; default: its "
    "first): memory of its allowlist's categories only",
)


class RetrieveBody(BaseModel):
    """The user's new input, to find memory relevant to it."""

    model_config = ConfigDict(extra="forbid") | documented(
        {"user_id": "line-42", "input": "Where does Maya live now?", "channel": "chat"},
        required=["user_id", "input"],
    )

    user_id: str = Field(min_length=1, max_length=256)
    input: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    channel: str | None = _CHANNEL
    agent: str | None = _AGENT


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
    has_summary_context: bool = Field(alias="hasSummaryContext")


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
            has_summary_context=meta.has_summary_context,
        ),
    )


class ContextItemOut(BaseModel):
    """What a tier found: a memory, a summary chunk or a subject fact; ``score`` is its
    cosine to the input when a vector search found it."""

    model_config = ConfigDict(populate_by_name=True)

    id: str
    kind: Literal["memory", "summary", "fact"]
    content: str
    category: str | None
    created_at: str = Field(alias="createdAt")
    score: float | None

    @classmethod
    def of(cls, item: ContextItem) -> ContextItemOut:
        """The API form of a tier's item."""
        return cls(
            id=item.id,
            kind=item.kind,
            content=item.content,
            category=item.category,
            created_at=item.created_at.isoformat(),
            score=item.score,
        )


class MemoryContextOut(BaseModel):
    """The older three-tier form: ``shortTerm`` (the recent messages, oldest first),
    ``longTerm`` (summary chunks, important memories, the subject's facts) and ``semantic``
    (memories similar to the input)."""

    model_config = ConfigDict(populate_by_name=True)

    short_term: list[HistoryMessageOut] = Field(alias="shortTerm")
    long_term: list[ContextItemOut] = Field(alias="longTerm")
    semantic: list[ContextItemOut]


@router.post(
    "/{conversation_id}/memory_context",
    response_model=MemoryContextOut,
    response_model_by_alias=True,
)
async def memory_context(
    conversation_id: str, body: RetrieveBody, services: Svc, caller: Caller
) -> MemoryContextOut:
    """What ``retrieve`` finds, in the older three-tier form ``{shortTerm, longTerm,
    semantic}`` (404 for another user's conversation; 403 for an agent the key is not bound
    to)."""
    tiers = await services.agate.memory_context(
        caller,
        body.input,
        user_id=body.user_id,
        conversation_id=conversation_id,
        channel=body.channel,
        agent=body.agent,
    )
    return MemoryContextOut(
        short_term=[HistoryMessageOut.model_validate(m) for m in tiers.short_term],
        long_term=[ContextItemOut.of(i) for i in tiers.long_term],
        semantic=[ContextItemOut.of(i) for i in tiers.semantic],
    )


class DeliverBody(BaseModel):
    """The user's new input and the agent whose model gets the turn."""

    model_config = ConfigDict(extra="forbid") | documented(
        {"user_id": "line-42", "input": "Where does Maya live now?", "agent": "concierge",
         "subject_id": "maya", "channel": "chat"},
        required=["user_id", "input"],
    )  # fmt: skip

    user_id: str = Field(min_length=1, max_length=256)
    input: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    agent: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="the agent whose profile shapes the turn (one the key is bound to; "
        "default: its first): memory of its allowlist's categories only",
    )
    subject_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="instructions delivery: whose facts to write into the prompt",
    )
    channel: str | None = _CHANNEL


class DeliveryOut(BaseModel):
    """What to send the agent's model: ``history`` mode sends ``systemPrompt`` (the same
    bytes every turn), then ``contextMessages``, then ``messages``; ``instructions`` mode
    one ``systemPrompt`` with memory written in (no context messages, no messages)."""

    model_config = ConfigDict(populate_by_name=True)

    mode: Literal["history", "instructions"]
    system_prompt: str = Field(alias="systemPrompt")
    context_messages: list[ContextMessageOut] = Field(alias="contextMessages")
    messages: list[HistoryMessageOut]


@router.post(
    "/{conversation_id}/deliver",
    response_model=DeliveryOut,
    response_model_by_alias=True,
)
async def deliver(
    conversation_id: str, body: DeliverBody, services: Svc, caller: Caller
) -> DeliveryOut:
    """What to send the agent's model this turn, as its profile's delivery mode says (400
    for an agent without a profile; 403 for one the key is not bound to; 404 for another
    user's conversation)."""
    turn = await services.agate.deliver(
        caller,
        body.agent,
        body.input,
        user_id=body.user_id,
        conversation_id=conversation_id,
        subject_id=body.subject_id,
        channel=body.channel,
    )
    return DeliveryOut(
        mode=turn.mode.value,
        system_prompt=turn.system_prompt,
        context_messages=[ContextMessageOut(content=c.content) for c in turn.context_messages],
        messages=[HistoryMessageOut.model_validate(m) for m in turn.messages],
    )
