"""Subject facts: ``GET /v1/subjects/{subject_id}/facts``, ``PATCH /v1/facts/{id}/visibility``
and ``DELETE /v1/facts/{id}``.

Only a fact's owner may share, unshare or delete it; anyone else gets 404, the same answer
as for a fact that does not exist. Sharing, unsharing (``PRIVACY``) and deleting
(``DELETE``) are recorded in the fact's audit history with the acting user.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from confide.chat.types import SubjectFact
from confide.server.deps import Caller, Svc
from confide.server.schemas import documented

router = APIRouter(prefix="/v1", tags=["facts"])

UserId = Annotated[str, Query(min_length=1, max_length=256)]


class FactOut(BaseModel):
    """A subject fact as the asking user sees it."""

    id: str
    user_id: str
    subject_id: str
    category: str
    content: str
    visibility: Literal["private", "shared"]
    version: int
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, fact: SubjectFact) -> FactOut:
        """The API form of a fact."""
        return cls(
            id=fact.id,
            user_id=fact.user_id,
            subject_id=fact.subject_id,
            category=fact.category.value,
            content=fact.content,
            visibility=fact.visibility,
            version=fact.version,
            created_at=fact.created_at.isoformat(),
            updated_at=fact.updated_at.isoformat(),
        )


class FactList(BaseModel):
    """The user's own facts of the subject and everyone's shared ones, oldest first."""

    facts: list[FactOut]


class VisibilityBody(BaseModel):
    """Who may see the fact: its owner only, or every user of the account."""

    model_config = ConfigDict(extra="forbid") | documented(
        {"user_id": "line-42", "visibility": "shared"}, required=["user_id", "visibility"]
    )

    user_id: str = Field(min_length=1, max_length=256)
    visibility: Literal["private", "shared"]


@router.get("/subjects/{subject_id}/facts", response_model=FactList)
async def subject_facts(
    subject_id: str, user_id: UserId, services: Svc, caller: Caller
) -> FactList:
    """The user's facts of the subject, and the ones other users shared."""
    facts = await services.agate.subject_facts(caller, user_id=user_id, subject_id=subject_id)
    return FactList(facts=[FactOut.of(f) for f in facts])


@router.patch("/facts/{fact_id}/visibility", response_model=FactOut)
async def fact_visibility(
    fact_id: str, body: VisibilityBody, services: Svc, caller: Caller
) -> FactOut:
    """Share or unshare a fact (its owner only; 404 for anyone else)."""
    fact = await services.agate.set_fact_visibility(
        caller,
        user_id=body.user_id,
        fact_id=fact_id,
        visibility=body.visibility,
    )
    return FactOut.of(fact)


@router.delete("/facts/{fact_id}", status_code=204)
async def delete_fact(fact_id: str, user_id: UserId, services: Svc, caller: Caller) -> None:
    """Delete a fact (its owner only; 404 for anyone else)."""
    await services.agate.delete_fact(caller, user_id=user_id, fact_id=fact_id)
