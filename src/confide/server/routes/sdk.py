"""``/v1/account``, ``/v1/add`` and ``/v1/search``: the SDK's calls over REST.

They let :meth:`Confide.remote <confide.client.Confide.remote>` offer the embedded SDK's
``add`` and ``search`` with the same results and errors. Both act in the API key's account.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from confide.errors import ValidationError
from confide.gate import require_write
from confide.server.deps import Key, Svc, check_account
from confide.server.schemas import MemoryOut, documented
from confide.server.services import Services

router = APIRouter(prefix="/v1", tags=["sdk"])


class AccountOut(BaseModel):
    """The API key's account and the agents it may act as (the first is the default)."""

    account_id: str
    agents: list[str]


class AddBody(BaseModel):
    """``POST /v1/add``: a text, or a conversation whose memories are extracted."""

    model_config = ConfigDict(extra="forbid") | documented(
        {"data": "Her dog is called Biscuit.", "user_id": "line-42", "type": "fact"}
    )

    data: str | list[dict[str, Any]]
    user_id: str = Field(min_length=1, max_length=256)
    account_id: str | None = None
    key: str | None = None
    type: str = "fact"


class AddedOut(MemoryOut):
    """A memory ``add`` answers with, and what it did: ``created`` (stored now) or
    ``duplicate`` (an active memory the text repeats, not stored again; ``similarity`` is
    the score that decided it)."""

    status: Literal["created", "duplicate"]
    similarity: float | None = None


class AddOut(BaseModel):
    """The memories stored or matched, in order (empty when nothing was found to
    remember)."""

    memories: list[AddedOut]


class SearchBody(BaseModel):
    """``POST /v1/search``: the user's memories ranked by relevance to ``query``."""

    model_config = ConfigDict(extra="forbid") | documented(
        {"query": "what is her dog called?", "user_id": "line-42", "top_k": 5}
    )

    query: str = Field(min_length=1, max_length=4000)
    user_id: str = Field(min_length=1, max_length=256)
    account_id: str | None = None
    agent: str | None = None
    top_k: int = Field(default=5, ge=1, le=100)
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)


class SearchHit(BaseModel):
    """One ranked memory with its scores."""

    memory: MemoryOut
    score: float
    similarity: float | None


class SearchOut(BaseModel):
    """Best first."""

    results: list[SearchHit]


def _sdk(services: Services) -> Any:
    if services.sdk is None:
        raise ValidationError("add and search are not available on this server")
    return services.sdk


@router.get("/account", response_model=AccountOut)
async def account(key: Key) -> AccountOut:
    """Who the API key is: its account and agents."""
    return AccountOut(account_id=key.account_id, agents=list(key.allowed_agents))


@router.post("/add", response_model=AddOut)
async def add(body: AddBody, key: Key, services: Svc) -> AddOut:
    """Remember a text, or what a conversation says about the user (de-duplicated)."""
    check_account(key.account_id, body.account_id)
    principal = key.principal
    require_write(principal, "adding memories")
    user = services.gate.user(principal, body.user_id)
    sdk = _sdk(services)
    extra = {} if body.key is None else {"key": body.key}
    try:
        stored = await asyncio.to_thread(
            sdk.add,
            body.data,
            user_id=user,
            account_id=key.account_id,
            type=body.type,
            **extra,
        )
    except (TypeError, ValueError) as exc:
        # Confide's ValidationError is a ValueError too: one message, a 400 either way.
        raise ValidationError(str(exc)) from None
    return AddOut(
        memories=[
            AddedOut(**MemoryOut.of(m).model_dump(), status=m.status, similarity=m.similarity)
            for m in stored
        ]
    )


@router.post("/search", response_model=SearchOut)
async def search(body: SearchBody, key: Key, services: Svc) -> SearchOut:
    """Hybrid retrieval over every category the agent may read, with scores."""
    check_account(key.account_id, body.account_id)
    principal = key.principal
    agent = principal.agent_for(body.agent)
    user = services.gate.user(principal, body.user_id)
    results = await asyncio.to_thread(
        _sdk(services).search,
        body.query,
        user_id=user,
        account_id=key.account_id,
        agent=agent,
        top_k=body.top_k,
        threshold=body.threshold,
    )
    return SearchOut(
        results=[
            SearchHit(memory=MemoryOut.of(r.memory), score=r.score, similarity=r.similarity)
            for r in results
        ]
    )
