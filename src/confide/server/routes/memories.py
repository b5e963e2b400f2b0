"""``/v1/memories``: the core store over REST, through the gate under the API key's principal
(its account, its scope; app memories need an admin key, see :mod:`confide.gate`)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response

from confide.engine.core import MAX_OFFSET
from confide.server.deps import Caller, Svc
from confide.server.errors import ApiError
from confide.server.schemas import (
    HistoryList,
    HistoryOut,
    MemoryList,
    MemoryOut,
    NewMemoryBody,
    PatchMemoryBody,
    ToolResponse,
)
from confide.types import Memory, listing_filter

router = APIRouter(prefix="/v1/memories", tags=["memories"])

_ETAG = re.compile(r'"(\d{1,18})"|(\d{1,18})')
_PATCH_ERRORS: dict[int | str, dict[str, Any]] = {
    409: {
        "model": ToolResponse,
        "description": "The memory is forgotten, or another writer changed it meanwhile",
    },
    412: {
        "model": ToolResponse,
        "description": "If-Match does not name the memory's current version and row version",
    },
}


def _etag(memory: Memory) -> str:
    # A version's row version names its state; the id is in the URL the tag belongs to.
    return f'"{memory.row_version}"'


def _out(memory: Memory, response: Response) -> MemoryOut:
    response.headers["ETag"] = _etag(memory)
    return MemoryOut.of(memory)


def _expected_row_version(if_match: str | None) -> int | None:
    """The row version an ``If-Match`` header asks for (``None``: any, or no header)."""
    if if_match is None or if_match.strip() == "*":
        return None
    tag = if_match.strip()
    if tag.startswith("W/"):
        # If-Match compares strongly (RFC 9110): a weak tag never matches.
        raise ApiError(412, "If-Match takes the strong ETag of the memory's current version")
    match = _ETAG.fullmatch(tag)
    if match is None:
        raise ApiError(400, 'If-Match must be one ETag as this service sends it, e.g. "3"')
    return int(match.group(1) or match.group(2))


@router.get("", response_model=MemoryList)
async def list_memories(
    services: Svc,
    caller: Caller,
    user_id: Annotated[str, Query(min_length=1, max_length=256)],
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    include_forgotten: bool = False,
    type: Annotated[list[str] | None, Query(description="Only these types (repeatable)")] = None,
    category: Annotated[
        list[str] | None, Query(description="Only these categories (repeatable)")
    ] = None,
    agent_id: Annotated[str | None, Query(max_length=256)] = None,
    run_id: Annotated[str | None, Query(max_length=256)] = None,
) -> MemoryList:
    """A user's active memories (and forgotten ones, still restorable, on request), newest
    first; ``type``, ``category``, ``agent_id`` and ``run_id`` narrow the list."""
    filters = {"type": type, "category": category, "agent_id": agent_id, "run_id": run_id}
    flt = listing_filter(
        account_id=caller.account_id,
        user_id=user_id,
        filters={k: v for k, v in filters.items() if v is not None},
        include_forgotten=include_forgotten,
    )
    memories = await services.agate.list_memories(caller, flt, limit=limit, offset=offset)
    return MemoryList(memories=[MemoryOut.of(m) for m in memories])


@router.post("", response_model=MemoryOut, status_code=201)
async def create_memory(body: NewMemoryBody, services: Svc, caller: Caller) -> MemoryOut:
    """Store a memory (no de-duplication: the caller asked for exactly this)."""
    memory = await services.agate.store(caller, body.model_dump(), actor="api")
    services.metrics.memory_written("created")
    return MemoryOut.of(memory)


@router.get("/{memory_id}", response_model=MemoryOut)
async def get_memory(
    memory_id: str, services: Svc, caller: Caller, response: Response
) -> MemoryOut:
    """One memory version; its ``ETag`` is what ``PATCH`` takes as ``If-Match``."""
    return _out(await services.agate.get(caller, memory_id), response)


@router.get("/{memory_id}/current", response_model=MemoryOut)
async def current_memory(
    memory_id: str, services: Svc, caller: Caller, response: Response
) -> MemoryOut:
    """The current version of the memory this id names (the id of any of its versions,
    superseded ones included); its ``ETag`` is what ``PATCH`` of that version takes."""
    return _out(await services.agate.current(caller, memory_id), response)


@router.patch("/{memory_id}", response_model=MemoryOut, responses=_PATCH_ERRORS)
async def patch_memory(
    memory_id: str,
    body: PatchMemoryBody,
    services: Svc,
    caller: Caller,
    response: Response,
    if_match: Annotated[
        str | None,
        Header(
            description=(
                "The ETag of this memory as last read (GET or PATCH answers carry it). The "
                "change applies only while this id is still the memory's current version, "
                "unchanged since (not forgotten, restored, re-marked or updated): else 412. "
                "Without it, a version that a newer one superseded, or a writer that "
                "changed the memory meanwhile, still fails the update with 409."
            ),
            examples=['"3"'],
        ),
    ] = None,
) -> MemoryOut:
    """Write a new version with the given fields changed (the answer is that version)."""
    patch = body.model_dump(exclude_none=True)
    memory = await services.agate.update(
        caller,
        memory_id,
        patch,
        actor="api",
        expected_row_version=_expected_row_version(if_match),
    )
    services.metrics.memory_written("updated")
    # The answer is the new version, another resource than the one patched: its ETag is
    # that resource's (RFC 9110 Content-Location).
    response.headers["Content-Location"] = f"{router.prefix}/{memory.id}"
    return _out(memory, response)


@router.delete("/{memory_id}", response_model=MemoryOut)
async def forget_memory(
    memory_id: str, services: Svc, caller: Caller, response: Response
) -> MemoryOut:
    """Soft-delete a memory (restorable until purged)."""
    memory = await services.agate.forget(caller, memory_id, actor="api")
    return _out(memory, response)


@router.post("/{memory_id}/restore", response_model=MemoryOut)
async def restore_memory(
    memory_id: str, services: Svc, caller: Caller, response: Response
) -> MemoryOut:
    """Bring a forgotten memory back."""
    memory = await services.agate.restore(caller, memory_id, actor="api")
    return _out(memory, response)


@router.get("/{memory_id}/history", response_model=HistoryList)
async def memory_history(memory_id: str, services: Svc, caller: Caller) -> HistoryList:
    """Audit events of every version, newest first (no values)."""
    events = await services.agate.history(caller, memory_id)
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
