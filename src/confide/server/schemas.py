"""Request and response bodies. Voice-bridge routes use camelCase; ``/v1`` uses snake_case.

Every request body carries an example and its ``required`` list in the OpenAPI document. The
voice-bridge bodies accept missing fields at parse time so the route can answer with the tool
contract's ``Missing required fields`` (naming them); their schemas still mark them required.
A tool body's arguments are documented here but validated by the tool
(:func:`confide.conversation.tools.parse_arguments`), as on every other door.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

from confide.conversation.tools import tool_parameters
from confide.retrieval.memory_query import display_label
from confide.storage.service import CallSessionRow
from confide.types import MAX_VALUE_CHARS, Memory

# Upper bounds for the voice-bridge bodies' strings (they accept missing fields, so that the
# route can name them, but never an unbounded string).
_Id = Annotated[str, Field(max_length=256)]
_Text = Annotated[str, Field(max_length=MAX_VALUE_CHARS)]

_CAMEL = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")
_SNAKE = ConfigDict(extra="forbid")


def documented(example: dict[str, Any], *, required: list[str] | None = None) -> ConfigDict:
    """Schema extras: an example body and, when given, the fields the route requires."""
    extra: dict[str, Any] = {"examples": [example]}
    if required is not None:
        extra["required"] = required
    return ConfigDict(json_schema_extra=extra)


_CALL = {"callSessionId": "0b6e4f1c-2f1a-4c7e-9a51-3d2f0c8b7a10", "lineId": "line-42",
         "accountId": "acme"}  # fmt: skip
_CALL_REQUIRED = ["callSessionId", "lineId", "accountId"]


def _arg(tool: str, name: str) -> WithJsonSchema:
    """A tool argument's documentation: its schema in the tool's definition."""
    return WithJsonSchema(tool_parameters(tool)["properties"][name])


class ToolCallBody(BaseModel):
    """Fields every tool call carries: the call session, the line (user) and the account."""

    model_config = _CAMEL
    call_session_id: _Id | None = None
    line_id: _Id | None = None
    account_id: _Id | None = None


class AnyToolBody(ToolCallBody):
    """``POST /tools/{name}``: the call's fields and the tool's arguments (either spelling)."""

    model_config = ConfigDict(extra="allow") | documented(dict(_CALL), required=_CALL_REQUIRED)


class StoreMemoryBody(ToolCallBody):
    """``POST /tools/store_memory``: ``memoryType``, ``key``, ``value`` required."""

    model_config = documented(
        {**_CALL, "memoryType": "fact", "key": "dog_name",
         "value": "The user has a dog called Biscuit.", "confidence": 0.9,
         "suggestReminder": False},
        required=[*_CALL_REQUIRED, "memoryType", "key", "value"],
    )  # fmt: skip

    memory_type: Annotated[Any, _arg("store_memory", "memory_type")] = None
    key: Annotated[Any, _arg("store_memory", "key")] = None
    value: Annotated[Any, _arg("store_memory", "value")] = None
    confidence: Annotated[Any, _arg("store_memory", "confidence")] = None
    suggest_reminder: Annotated[Any, _arg("store_memory", "suggest_reminder")] = None


class UpdateMemoryBody(ToolCallBody):
    """``POST /tools/update_memory``: ``existingKey`` and ``newValue`` required."""

    model_config = documented(
        {
            **_CALL,
            "existingKey": "dog_name",
            "newValue": "The user has a dog called Biscuit, who is 12.",
        },
        required=[*_CALL_REQUIRED, "existingKey", "newValue"],
    )

    existing_key: Annotated[Any, _arg("update_memory", "existing_key")] = None
    new_value: Annotated[Any, _arg("update_memory", "new_value")] = None
    memory_type: Annotated[Any, _arg("update_memory", "memory_type")] = None
    confidence: Annotated[Any, _arg("update_memory", "confidence")] = None


class TargetBody(ToolCallBody):
    """``POST /tools/forget_memory`` and ``/tools/mark_private``: ``key`` or ``memoryId``
    (one of the two is required)."""

    model_config = documented({**_CALL, "key": "dog_name"}, required=_CALL_REQUIRED)

    key: Annotated[Any, _arg("forget_memory", "key")] = None
    memory_id: Annotated[Any, _arg("forget_memory", "memory_id")] = None


class HeldWorker(BaseModel):
    """The service process holding a call's turns (``id`` made at its start)."""

    id: str
    host: str | None = None
    pid: int | None = None


class HeldResponse(BaseModel):
    """409 on a call session another process holds: send the call's requests there."""

    success: bool = False
    error: str = "Call session is held by another worker"
    worker: HeldWorker | None = None


class ToolResponse(BaseModel):
    """The answer to a tool call, or an error: ``error`` says what is wrong, ``fields`` names
    the request fields at fault and ``allowed`` the values a field with a fixed set takes."""

    model_config = ConfigDict(populate_by_name=True)
    success: bool
    memoryId: str | None = None
    action: str | None = None
    suggestReminder: bool | None = None
    message: str | None = None
    error: str | None = None
    fields: list[str] | None = None
    allowed: dict[str, list[str]] | None = None


class CreateSessionBody(BaseModel):
    """``POST /sessions``."""

    model_config = _CAMEL | documented(
        {"accountId": "acme", "lineId": "line-42", "isReminderCall": False},
        required=["accountId", "lineId"],
    )
    account_id: _Id | None = None
    line_id: _Id | None = None
    is_reminder_call: bool = False


class CreateSessionResponse(BaseModel):
    """The new session's id."""

    callSessionId: str


class TurnBody(BaseModel):
    """``POST /sessions/{id}/turns``: one utterance, kept in process memory only."""

    model_config = _CAMEL | documented(
        {"speaker": "user", "text": "My dog Biscuit turned twelve today."},
        required=["speaker", "text"],
    )
    speaker: Literal["user", "assistant"] | None = None
    text: _Text | None = None


class OkResponse(BaseModel):
    """A plain acknowledgement."""

    success: bool = True


class EndSessionResponse(BaseModel):
    """Whether extraction was scheduled; when skipped, why."""

    summarization: Literal["scheduled", "skipped"]
    reason: str | None = None


SessionState = Literal["created", "connected", "ended"]
Summarization = Literal["scheduled", "skipped", "done", "failed"]
_OUTCOMES: dict[str, Summarization] = {o: o for o in get_args(Summarization)}


class SessionStatusResponse(BaseModel):
    """``GET /sessions/{id}``: a call session's state and its extraction's outcome.

    ``state`` is ``created`` (not yet connected), ``connected`` or ``ended``.
    ``summarization`` is ``null`` until the call ends, then ``skipped`` (with ``reason``),
    ``scheduled`` (extraction running), ``done`` or ``failed``; ``memoriesExtracted`` counts
    the memories extraction stored. Times and counts only, never what was said.
    """

    callSessionId: str
    lineId: str
    state: SessionState
    isReminderCall: bool
    createdAt: datetime
    connectedAt: datetime | None
    endedAt: datetime | None
    durationSeconds: float | None
    toolCalls: int
    summarization: Summarization | None
    reason: str | None
    memoriesExtracted: int

    @classmethod
    def of(cls, row: CallSessionRow, *, skip_reason: str | None) -> SessionStatusResponse:
        """From a stored session row."""

        def at(ts: float | None) -> datetime | None:
            return None if ts is None else datetime.fromtimestamp(ts, UTC)

        state: SessionState = "created"
        duration = None
        if row.ended_at is not None:
            state = "ended"
            if row.connected_at is not None:
                duration = max(row.ended_at - row.connected_at, 0.0)
        elif row.connected_at is not None:
            state = "connected"
        return cls(
            callSessionId=row.id,
            lineId=row.user_id,
            state=state,
            isReminderCall=row.is_reminder,
            createdAt=datetime.fromtimestamp(row.created_at, UTC),
            connectedAt=at(row.connected_at),
            endedAt=at(row.ended_at),
            durationSeconds=duration,
            toolCalls=row.tool_calls,
            summarization=_OUTCOMES.get(row.summarization or ""),
            reason=skip_reason,
            memoriesExtracted=row.memories_extracted,
        )


class MemoryOut(BaseModel):
    """A memory as ``/v1`` shows it.

    ``row_version`` counts in-place changes of this version (forget, restore, visibility);
    it is also the ``ETag`` of single-memory answers, for ``PATCH``'s ``If-Match``. ``label``
    is the key as a person reads it (``daughter_name`` → ``Daughter name``, a generated
    ``subject_fact.hobby.0a1b2c3d4e5f`` → ``Subject fact: hobby``), for display only.
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
    # The rest of the memory, so the remote SDK returns the same Memory as the embedded one.
    account_id: str | None = None
    user_id: str | None = None
    subject_id: str | None = None
    category: str | None = None
    importance: int | None = None
    source: str | None = None
    pinned: bool | None = None
    lineage_id: str | None = None
    supersedes_id: str | None = None
    tags: list[str] = Field(default_factory=list)
    expires_at: datetime | None = None
    label: str

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
            account_id=memory.account_id,
            user_id=memory.user_id,
            subject_id=memory.subject_id,
            category=memory.category,
            importance=memory.importance,
            source=memory.source.value,
            pinned=memory.pinned,
            lineage_id=memory.lineage_id,
            supersedes_id=memory.supersedes_id,
            tags=list(memory.tags),
            expires_at=memory.expires_at,
            label=display_label(
                memory.key, category=memory.category, memory_type=memory.type.value
            ),
        )


class MemoryList(BaseModel):
    """``GET /v1/memories``."""

    memories: list[MemoryOut]


class NewMemoryBody(BaseModel):
    """``POST /v1/memories``."""

    model_config = _SNAKE | documented(
        {"user_id": "line-42", "key": "dog_name", "value": "Her dog is called Biscuit.",
         "type": "fact", "confidence": 0.9, "importance": 3, "visibility": "private",
         "tags": ["pets"]}
    )  # fmt: skip
    user_id: str
    key: str | None = Field(
        default=None,
        description="default: the user's next free note key (note, note.2, ...), as the SDK's add",
    )
    value: str
    type: str = "fact"
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    importance: int = Field(default=2, ge=1, le=5)
    visibility: str = "private"
    tags: tuple[str, ...] = ()


class PatchMemoryBody(BaseModel):
    """``PATCH /v1/memories/{id}``."""

    model_config = _SNAKE | documented({"value": "Her dog Biscuit is 12."}, required=[])
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
    label: str
    """The key as a person reads it (as :class:`MemoryOut`'s)."""


class ProposalList(BaseModel):
    """``GET /v1/proposals``."""

    proposals: list[ProposalOut]
