"""``/v1/proposals``: proposed changes to sensitive memories, confirmed or rejected by a person."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from confide.conversation.proposals import Proposal
from confide.retrieval.memory_query import display_label
from confide.server.deps import Caller, Svc
from confide.server.schemas import MemoryOut, OkResponse, ProposalList, ProposalOut

router = APIRouter(prefix="/v1/proposals", tags=["proposals"])


def _out(p: Proposal) -> ProposalOut:
    return ProposalOut(
        id=p.id,
        user_id=p.user_id,
        key=p.key,
        type=p.type.value,
        current_value=p.current_value,
        proposed_value=p.proposed_value,
        status=p.status,
        created_at=p.created_at,
        expires_at=p.expires_at,
        label=display_label(p.key, category=None, memory_type=p.type.value),
    )


@router.get("", response_model=ProposalList)
async def list_proposals(
    services: Svc, caller: Caller, user_id: Annotated[str, Query(min_length=1)]
) -> ProposalList:
    """A user's pending proposals, newest first."""
    pending = await services.agate.pending_proposals(caller, user_id)
    return ProposalList(proposals=[_out(p) for p in pending])


@router.post("/{proposal_id}/confirm", response_model=MemoryOut)
async def confirm_proposal(proposal_id: str, services: Svc, caller: Caller) -> MemoryOut:
    """Apply the proposal to its memory; returns the new version."""
    memory = await services.agate.confirm_proposal(caller, proposal_id)
    services.metrics.memory_written("updated")
    return MemoryOut.of(memory)


@router.post("/{proposal_id}/reject", response_model=OkResponse)
async def reject_proposal(proposal_id: str, services: Svc, caller: Caller) -> OkResponse:
    """Discard the proposal."""
    await services.agate.reject_proposal(caller, proposal_id)
    return OkResponse()
