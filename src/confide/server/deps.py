"""Request dependencies: the service container, the caller's API key and its account.

The key is read from the database on every request (nothing is cached), so a revoked key
is refused (401) from its next request on. Which agents a key may act as is decided by
:meth:`~confide.server.auth.ApiKey.agent_for`; routes that let the caller name an agent
take :data:`Key` and call it, so that rule is applied in this one way everywhere.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from confide.gate import Principal
from confide.server.auth import ApiKey
from confide.server.errors import ApiError
from confide.server.services import Services

__all__ = [
    "Account",
    "Caller",
    "Key",
    "Svc",
    "check_account",
    "get_services",
    "require_account",
    "require_key",
    "require_principal",
]

_bearer = HTTPBearer(auto_error=False, description="An API key from `confide keys create`.")


def get_services(request: Request) -> Services:
    """The app's :class:`Services`."""
    services: Services = request.app.state.services
    return services


async def require_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> ApiKey:
    """The request's bearer API key; 401 when missing, invalid or revoked."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        if request.headers.get("authorization"):
            raise ApiError(401, "Send the API key as the header Authorization: Bearer <key>")
        raise ApiError(401, "Missing API key: send the header Authorization: Bearer <key>")
    services = get_services(request)
    key = await asyncio.to_thread(services.keys.verify, credentials.credentials)
    if key is None:
        raise ApiError(401, "Invalid API key")
    # What the key's scope allows is the gate's to decide (confide.gate), not the route's.
    return key


async def require_principal(key: Annotated[ApiKey, Depends(require_key)]) -> Principal:
    """Who the request acts as, for the gate (:mod:`confide.gate`)."""
    return key.principal


async def require_account(key: Annotated[ApiKey, Depends(require_key)]) -> str:
    """The account of the request's bearer API key; 401 when missing or invalid."""
    return key.account_id


def check_account(key_account: str, requested: str | None) -> None:
    """Refuse (403) a request naming another account than the key's."""
    if requested is not None and requested != key_account:
        raise ApiError(403, "API key is not valid for this account")


Svc = Annotated[Services, Depends(get_services)]
Key = Annotated[ApiKey, Depends(require_key)]
Caller = Annotated[Principal, Depends(require_principal)]
Account = Annotated[str, Depends(require_account)]
