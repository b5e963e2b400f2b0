"""``POST /v1/memory_query``: retrieval for agents and programs that call over REST."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from confide.conversation.tools import MemoryQueryArgs
from confide.server.deps import Caller, Svc
from confide.types import validated

router = APIRouter(prefix="/v1", tags=["retrieval"])

MAX_BUDGET_TOKENS = 100_000
"""The largest token budget retrieval takes (``MemoryQueryRequest``): refused here, with the
field named, before any work."""


class MemoryQueryBody(BaseModel):
    """A ``memory_query`` for one user of the API key's account."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        json_schema_extra={
            "examples": [
                {"user_id": "line-42", "agent": "default", "query": "what is her dog called?",
                 "top_k": 3, "return": "bullets", "budget_tokens": 200}
            ]
        },
    )  # fmt: skip

    user_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="The user; or give it as filters.user_id (both: the same user).",
    )
    agent: str | None = None
    query: str = Field(min_length=1, max_length=4000)
    categories: list[str] | None = None
    filters: dict[str, Any] = Field(default_factory=dict)
    top_k: int = Field(default=3, ge=1, le=50)
    return_: str = Field(default="bullets", alias="return")
    budget_tokens: int | None = Field(default=None, ge=1, le=MAX_BUDGET_TOKENS)
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)


class MemoryQueryResponse(BaseModel):
    """The delta header (``""`` when nothing changed since the agent's last answer), results
    as bullets (``{id, category, text}``; up to two related memories last, ``[related] ...``
    with ``related_to``) or full memories, and their tokens."""

    header: str = ""
    success: bool
    results: list[dict[str, Any]]
    tokens: int


@router.post("/memory_query", response_model=MemoryQueryResponse)
async def memory_query(body: MemoryQueryBody, caller: Caller, services: Svc) -> dict[str, Any]:
    """Hybrid retrieval under the agent's category allowlist, filters and token budget.

    The agent must be one the API key is bound to (403 otherwise); a body naming none acts
    as the key's first agent, or ``default`` for a key made without agents. The user is
    ``user_id`` or ``filters.user_id``; both naming different users is a 400.
    """
    fields = body.model_dump(by_alias=True, exclude={"user_id"}, exclude_none=True)
    args = validated(MemoryQueryArgs, fields)
    # Through the gate and the dispatcher, like the tool: one path, one operational event.
    return await services.agate.call_tool(caller, "memory_query", args, user_id=body.user_id)
