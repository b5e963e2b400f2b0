"""``/v1/memories``: the core store over REST, scoped to the API key's account."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from engram.server.deps import Account, Svc
from engram.server.schemas import (
    HistoryList,
    HistoryOut,
    MemoryList,
    MemoryOut,
    NewMemoryBody,
    PatchMemoryBody,
)
from engram.types import MemoryFilter, Source

router = APIRouter(prefix="/v1/memories", tags=["memories"])


@router.get("", response_model=MemoryList)
async def list_memories(
    services: Svc,
    account: Account,
    user_id: Annotated[str, Query(min_length=1, max_length=256)],
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> MemoryList:
    """A user's active memories, newest first."""
    memories = await services.aengine.list_memories(
        MemoryFilter(account_id=account, user_id=user_id), limit=limit, offset=offset
    )
    return MemoryList(memories=[MemoryOut.of(m) for m in memories])


@router.post("", response_model=MemoryOut, status_code=201)
async def create_memory(body: NewMemoryBody, services: Svc, account: Account) -> MemoryOut:
    """Store a memory (no de-duplication: the caller asked for exactly this)."""
    memory = await services.aengine.store(
        {**body.model_dump(), "account_id": account, "source": Source.API}, actor="api"
    )
    services.metrics.memory_written("created")
    return MemoryOut.of(memory)


@router.get("/{memory_id}", response_model=MemoryOut)
async def get_memory(memory_id: str, services: Svc, account: Account) -> MemoryOut:
    """One memory version."""
    return MemoryOut.of(await services.aengine.get(memory_id, account_id=account))


@router.patch("/{memory_id}", response_model=MemoryOut)
async def patch_memory(
    memory_id: str, body: PatchMemoryBody, services: Svc, account: Account
) -> MemoryOut:
    """Write a new version with the given fields changed."""
    patch = body.model_dump(exclude_none=True)
    memory = await services.aengine.update(memory_id, patch, account_id=account, actor="api")
    services.metrics.memory_written("updated")
    return MemoryOut.of(memory)


@router.delete("/{memory_id}", response_model=MemoryOut)
async def forget_memory(memory_id: str, services: Svc, account: Account) -> MemoryOut:
    """Soft-delete a memory (restorable until purged)."""
    return MemoryOut.of(await services.aengine.forget(memory_id, account_id=account, actor="api"))


@router.post("/{memory_id}/restore", response_model=MemoryOut)
async def restore_memory(memory_id: str, services: Svc, account: Account) -> MemoryOut:
    """Bring a forgotten memory back."""
    return MemoryOut.of(await services.aengine.restore(memory_id, account_id=account, actor="api"))


@router.get("/{memory_id}/history", response_model=HistoryList)
async def memory_history(memory_id: str, services: Svc, account: Account) -> HistoryList:
    """Audit events of every version, newest first (no values)."""
    events = await services.aengine.history(memory_id, account_id=account)
    return HistoryList(
        history=[
            HistoryOut(
                event=e.event.value,
                memory_id=e.memory_id,
                old_ref=e.old_ref,
                new_ref=e.new_ref,
                actor=e.actor,
                meta=e.meta,
                ts=e.ts,
            )
            for e in events
        ]
    )


__all__ = ["router"]
