"""``/v1/users``: the account's users, a user's export, and erasure (admin API keys only)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from confide.server.deps import Caller, Svc

router = APIRouter(prefix="/v1/users", tags=["users"])
UserId = Annotated[str, Path(min_length=1, max_length=256)]


@router.get("")
async def list_users(services: Svc, caller: Caller) -> dict[str, list[str]]:
    """The ids of the key's account's users that have memories, sorted (ids only; apps'
    internal owners ``app:<id>`` are never listed)."""
    users = await services.agate.user_ids(caller)
    return {"users": users}


@router.get("/{user_id}/export")
async def export_user(user_id: UserId, services: Svc, caller: Caller) -> dict[str, Any]:
    """Everything the user owns in the key's account, decrypted, as a JSON document."""
    return await services.agate.export_user(caller, user_id)


@router.delete("/{user_id}")
async def erase_user(
    user_id: Annotated[str, Path(min_length=1, max_length=256)],
    services: Svc,
    caller: Caller,
) -> dict[str, Any]:
    """Erase a user of the key's account (crypto-shred) and return the receipt.

    Every row derived from the user is deleted and their keys are destroyed in the key
    store; every running process notices at its next write. Needs an admin key.
    """
    receipt = await services.agate.erase_user(caller, user_id)
    return receipt.model_dump(mode="json")


erasures = APIRouter(prefix="/v1/erasures", tags=["users"])


@erasures.get("/{erasure_id}")
async def get_erasure(
    erasure_id: Annotated[str, Path(min_length=1, max_length=64)],
    services: Svc,
    caller: Caller,
) -> dict[str, Any]:
    """Where an erasure stands (the receipt's ``id``): ``status`` is ``verified`` once a
    scrub completed and a scan of the files found nothing, ``scrubbed`` when the files are
    not readable by the service to verify it, ``pending`` (with ``detail`` naming what
    blocks it) while the worker retries. Needs an admin key."""
    report = await services.agate.erasure(caller, erasure_id)
    return report.model_dump(mode="json")
