"""Request and response bodies. Voice-bridge routes use camelCase; ``/v1`` uses snake_case."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engram.types import Memory

_CAMEL = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")
_SNAKE = ConfigDict(extra="forbid")


class ToolCallBody(BaseModel):
    """Fields every tool call carries: the call session, the line (user) and the account."""

    model_config = _CAMEL
    call_session_id: str | None = None
    line_id: str | None = None
    account_id: str | None = None


class StoreMemoryBody(ToolCallBody):
    """``POST /tools/store_memory``: ``memoryType``, ``key``, ``value`` required."""

    memory_type: str | None = None
    key: str | None = None
    value: str | None = None
    confidence: float | None = None
    suggest_reminder: bool | None = None


class UpdateMemoryBody(ToolCallBody):
    """``POST /tools/update_memory``: ``existingKey`` and ``newValue`` required."""

    existing_key: str | None = None
    new_value: str | None = None
    memory_type: str | None = None
    confidence: float | None = None


class TargetBody(ToolCallBody):
    """``POST /tools/forget_memory`` and ``/tools/mark_private``: ``key`` or ``memoryId``."""

    key: str | None = None
    memory_id: str | None = None


class ToolResponse(BaseModel):
    """The answer to a tool call."""

    model_config = ConfigDict(populate_by_name=True)
    success: bool
    memoryId: str | None = None
    action: str | None = None
    suggestReminder: bool | None = None
    message: str | None = None
    error: str | None = None


class CreateSessionBody(BaseModel):
    """``POST /sessions``."""

    model_config = _CAMEL
    account_id: str | None = None
    line_id: str | None = None
    is_reminder_call: bool = False


class CreateSessionResponse(BaseModel):
    """The new session's id."""

    callSessionId: str


class TurnBody(BaseModel):
    """``POST /sessions/{id}/turns``: one utterance, kept in process memory only."""

    model_config = _CAMEL
    speaker: Literal["user", "assistant"] | None = None
    text: str | None = None


class OkResponse(BaseModel):
    """A plain acknowledgement."""

    success: bool = True


class EndSessionResponse(BaseModel):
    """Whether extraction was scheduled."""

    summarization: Literal["scheduled", "skipped"]


class MemoryOut(BaseModel):
    """A memory as ``/v1`` shows it.

    ``row_version`` counts in-place changes of this version (forget, restore, visibility);
    it is also the ``ETag`` of single-memory answers, for ``PATCH``'s ``If-Match``.
    """

    id: str
    type: str
    key: str
    value: str
    confidence: float
    visibility: str
    version: int
    row_version: int
    state: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, memory: Memory) -> MemoryOut:
        """From an engine memory."""
        return cls(
            id=memory.id,
            type=memory.type.value,
            key=memory.key,
            value=memory.value,
            confidence=memory.confidence,
            visibility=memory.visibility.value,
            version=memory.version,
            row_version=memory.row_version,
            state=memory.state.value,
            created_at=memory.created_at,
            updated_at=memory.updated_at,
        )


class MemoryList(BaseModel):
    """``GET /v1/memories``."""

    memories: list[MemoryOut]


class NewMemoryBody(BaseModel):
    """``POST /v1/memories``."""

    model_config = _SNAKE
    user_id: str
    key: str
    value: str
    type: str = "fact"
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    importance: int = Field(default=2, ge=1, le=5)
    visibility: str = "private"
    tags: tuple[str, ...] = ()


class PatchMemoryBody(BaseModel):
    """``PATCH /v1/memories/{id}``."""

    model_config = _SNAKE
    value: str | None = None
    type: str | None = None
    confidence: float | None = None
    importance: int | None = None
    visibility: str | None = None
    tags: tuple[str, ...] | None = None


class HistoryOut(BaseModel):
    """One audit event (ids and metadata, never values)."""

    event: str
    memory_id: str
    old_ref: str | None
    new_ref: str | None
    actor: str | None
    meta: dict[str, Any]
    ts: datetime


class HistoryList(BaseModel):
    """``GET /v1/memories/{id}/history``."""

    history: list[HistoryOut]


class ProposalOut(BaseModel):
    """A pending proposal, shown to its owner's account."""

    id: str
    user_id: str
    key: str
    type: str
    current_value: str | None
    proposed_value: str
    status: str
    created_at: datetime
    expires_at: datetime


class ProposalList(BaseModel):
    """``GET /v1/proposals``."""

    proposals: list[ProposalOut]
