"""Request dependencies: the service container and the caller's account."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from engram.server.errors import ApiError
from engram.server.services import Services

__all__ = [
    "Account",
    "AdminAccount",
    "Svc",
    "check_account",
    "get_services",
    "require_account",
    "require_admin_account",
]

_bearer = HTTPBearer(auto_error=False, description="An API key from `engram keys create`.")


def get_services(request: Request) -> Services:
    """The app's :class:`Services`."""
    services: Services = request.app.state.services
    return services


async def require_account(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The account of the request's bearer API key; 401 when missing or invalid."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise ApiError(401, "Missing API key")
    services = get_services(request)
    account = await asyncio.to_thread(services.keys.account_of, credentials.credentials)
    if account is None:
        raise ApiError(401, "Invalid API key")
    return account


async def require_admin_account(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The account of an admin API key (``engram keys create --admin``); 401 or 403 else."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise ApiError(401, "Missing API key")
    services = get_services(request)
    found = await asyncio.to_thread(services.keys.admin_account_of, credentials.credentials)
    if found is None:
        raise ApiError(401, "Invalid API key")
    account, admin = found
    if not admin:
        raise ApiError(403, "This route needs an API key with the admin scope")
    return account


def check_account(key_account: str, requested: str | None) -> None:
    """Refuse (403) a request naming another account than the key's."""
    if requested is not None and requested != key_account:
        raise ApiError(403, "API key is not valid for this account")


Svc = Annotated[Services, Depends(get_services)]
Account = Annotated[str, Depends(require_account)]
AdminAccount = Annotated[str, Depends(require_admin_account)]
