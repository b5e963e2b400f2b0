"""App memories: ``/v1/apps/{app_id}/...`` for agents, ``/apps/{appId}/...`` for admins.

Ending a conversation answers at once (202); the memory is written and the scope compacted
in the background (tests wait with ``app.state.services.tasks.join()``). The messages are
never stored nor logged. The admin routes need an API key with the ``admin`` scope; each is
served under ``/v1/apps`` too (``/v1/apps/{app_id}/memories``, ``DELETE /v1/apps/{app_id}``),
so every app route has a ``/v1`` path.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from confide.apps.scope import AppMessage
from confide.server.deps import Caller, Svc
from confide.server.schemas import documented

router = APIRouter(prefix="/v1/apps", tags=["apps"])
admin_router = APIRouter(prefix="/apps", tags=["apps admin"])

AppId = Annotated[
    str, Path(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]*$")
]
ConversationId = Annotated[str, Path(min_length=1, max_length=256)]
MemoryId = Annotated[str, Path(min_length=1, max_length=256)]


class EndConversationBody(BaseModel):
    """The ended conversation's messages (read once, not stored), why it ended, and the user
    it was with (the memory records them, so that erasing the user deletes it)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True) | documented(
        {"messages": [{"role": "user", "content": "Use metric units from now on, please."},
                      {"role": "assistant", "content": "Done: metric units from now on."}],
         "reason": "user closed the app", "userId": "line-42"},
        required=["messages"],
    )  # fmt: skip

    messages: list[AppMessage] = Field(min_length=1, max_length=1000)
    reason: str | None = Field(default=None, max_length=500)
    user_id: str | None = Field(default=None, min_length=1, max_length=256, alias="userId")


class EndConversationOut(BaseModel):
    """The work was accepted and runs in the background."""

    status: str = "accepted"
    app_id: str = Field(serialization_alias="appId")
    conversation_id: str = Field(serialization_alias="conversationId")


class AppContextOut(BaseModel):
    """The system message with the app's memories (``content`` empty when it has none)."""

    role: str = "system"
    content: str


class AppSettingsBody(BaseModel):
    """An app's display name (shown in its context) and cap override (``null``: default)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True) | documented(
        {"name": "Team Notes", "memoryCap": 5}, required=[]
    )

    name: str | None = Field(default=None, min_length=1, max_length=100)
    memory_cap: int | None = Field(default=None, ge=1, le=100, alias="memoryCap")


class AppSettingsOut(BaseModel):
    """An app's settings as applied."""

    app_id: str = Field(serialization_alias="appId")
    name: str
    memory_cap: int = Field(serialization_alias="memoryCap")
    uninstalled: bool


@router.post(
    "/{app_id}/conversations/{conversation_id}/end",
    status_code=202,
    response_model=EndConversationOut,
    response_model_by_alias=True,
)
async def end_conversation(
    app_id: AppId,
    conversation_id: ConversationId,
    body: EndConversationBody,
    services: Svc,
    caller: Caller,
) -> EndConversationOut:
    """Write one memory of the conversation for the app, in the background, and keep the
    app within its cap (deferred while the account's LLM budget is below 20%)."""
    user_id = await services.agate.open_app_end(caller, body.user_id)
    services.schedule_app_end(
        account_id=caller.account_id,
        app_id=app_id,
        conversation_id=conversation_id,
        messages=body.messages,
        reason=body.reason,
        user_id=user_id,
    )
    return EndConversationOut(app_id=app_id, conversation_id=conversation_id)


@router.get("/{app_id}/context", response_model=AppContextOut)
async def app_context(app_id: AppId, services: Svc, caller: Caller) -> AppContextOut:
    """The system message to place before a conversation with the app."""
    text = await services.agate.app_context(caller, app_id)
    return AppContextOut(content=text)


@router.put("/{app_id}", response_model=AppSettingsOut, response_model_by_alias=True)
async def configure_app(
    app_id: AppId, body: AppSettingsBody, services: Svc, caller: Caller
) -> AppSettingsOut:
    """Set the app's display name and cap override (admin keys only)."""
    app = await services.agate.configure_app(
        caller, app_id, name=body.name, memory_cap=body.memory_cap
    )
    return AppSettingsOut(
        app_id=app.app_id, name=app.name, memory_cap=app.memory_cap, uninstalled=app.uninstalled
    )


class AdminMemoryOut(BaseModel):
    """One app memory as the admin API shows it."""

    id: str
    content: str
    created_at: str = Field(serialization_alias="createdAt")
    updated_at: str = Field(serialization_alias="updatedAt")


class AdminMemoriesOut(BaseModel):
    """The app's memories, newest first."""

    memories: list[AdminMemoryOut]


class DeletedAllOut(BaseModel):
    """How many memories were deleted."""

    success: bool = True
    deleted_count: int = Field(serialization_alias="deletedCount")


class DeletedOut(BaseModel):
    """The memory was deleted."""

    success: bool = True


class UninstalledOut(BaseModel):
    """The app is uninstalled; with ``purge``, how many memory rows were deleted and the
    erasure's receipt (follow its scrub at ``GET /v1/erasures/{id}``)."""

    success: bool = True
    app_id: str = Field(serialization_alias="appId")
    purged: bool
    deleted_count: int = Field(serialization_alias="deletedCount")
    erasure: dict[str, Any] | None = None


@router.delete("/{app_id}", response_model=UninstalledOut, response_model_by_alias=True)
@admin_router.delete("/{app_id}", response_model=UninstalledOut, response_model_by_alias=True)
async def uninstall_app(
    app_id: AppId,
    services: Svc,
    caller: Caller,
    purge: Annotated[
        bool,
        Query(
            description="Also crypto-shred the app's memories (deleted with their keys; "
            "cannot be undone). Without it they are kept, and found again when the app is "
            "configured again (PUT /v1/apps/{app_id})."
        ),
    ] = False,
) -> UninstalledOut:
    """Uninstall the app (admin keys only); its memories are kept unless ``purge``."""
    receipt = await services.agate.uninstall_app(caller, app_id, purge=purge)
    return UninstalledOut(
        app_id=app_id,
        purged=receipt is not None,
        deleted_count=0 if receipt is None else int(receipt.deleted.get("memories", 0)),
        erasure=None if receipt is None else receipt.model_dump(mode="json"),
    )


@router.get("/{app_id}/memories", response_model=AdminMemoriesOut, response_model_by_alias=True)
@admin_router.get(
    "/{app_id}/memories", response_model=AdminMemoriesOut, response_model_by_alias=True
)
async def list_app_memories(app_id: AppId, services: Svc, caller: Caller) -> AdminMemoriesOut:
    """Every memory of the app, newest first (admin keys only)."""
    memories = await services.agate.app_memories(caller, app_id)
    return AdminMemoriesOut(
        memories=[
            AdminMemoryOut(
                id=m.id,
                content=m.value,
                created_at=m.created_at.isoformat(),
                updated_at=m.updated_at.isoformat(),
            )
            for m in memories
        ]
    )


@router.delete("/{app_id}/memories", response_model=DeletedAllOut, response_model_by_alias=True)
@admin_router.delete(
    "/{app_id}/memories", response_model=DeletedAllOut, response_model_by_alias=True
)
async def delete_app_memories(app_id: AppId, services: Svc, caller: Caller) -> DeletedAllOut:
    """Delete every memory of the app (soft delete: restorable until purged; admin keys)."""
    count = await services.agate.delete_app_memories(caller, app_id)
    return DeletedAllOut(deleted_count=count)


@router.delete("/{app_id}/memories/{memory_id}", response_model=DeletedOut)
@admin_router.delete("/{app_id}/memories/{memory_id}", response_model=DeletedOut)
async def delete_app_memory(
    app_id: AppId, memory_id: MemoryId, services: Svc, caller: Caller
) -> DeletedOut:
    """Delete one memory of the app; 404 when the app has no such memory (admin keys)."""
    await services.agate.delete_app_memory(caller, app_id, memory_id)
    return DeletedOut()
