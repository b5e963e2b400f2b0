"""``/v1/users``: operator routes over a user's data (admin API keys only)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from engram.server.deps import AdminAccount, Svc

router = APIRouter(prefix="/v1/users", tags=["users"])


@router.delete("/{user_id}")
async def erase_user(
    user_id: Annotated[str, Path(min_length=1, max_length=256)],
    services: Svc,
    account: AdminAccount,
) -> dict[str, Any]:
    """Erase a user of the key's account (crypto-shred) and return the receipt.

    Every row derived from the user is deleted and their keys are destroyed in the key
    store; every running process notices at its next write. Needs an admin key.
    """
    receipt = await services.aengine.erase_user(account_id=account, user_id=user_id)
    return receipt.model_dump(mode="json")
