"""Bearer API keys: random tokens stored as SHA-256 hashes, each bound to one account and to
the agents it may act as.

A token reads ``cfk_<id>_<secret>``: the id finds the row, the hash of the whole token is
compared in constant time. The token itself is shown once, when created. Every request
verifies its token against the database (nothing is cached), so a revocation holds from the
next request on, in every running server.

Agents: a key made without agents acts as agent ``default`` only; a key made with agents
acts as exactly those, and a request naming no agent acts as the key's first one.

Scopes: ``service`` (every agent-facing route: what every key could do before scopes
existed, so keys made then are ``service`` keys), ``read`` (only routes that change
nothing) and ``admin`` (``service`` plus the operator routes: erasure, the app admin API).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass

from confide.errors import NotFoundError, ValidationError
from confide.gate import DEFAULT_AGENT, Principal, Scope
from confide.storage.base import Storage
from confide.storage.service import ApiKeyRow, ServiceTables
from confide.storage.service.sessions import SqlServiceTables

__all__ = ["DEFAULT_AGENT", "ApiKey", "ApiKeys", "hash_token"]

PREFIX = "cfk"
ADMIN_SCOPE = "admin"
SERVICE_SCOPE = "service"
READ_SCOPE = "read"
SCOPES = (ADMIN_SCOPE, SERVICE_SCOPE, READ_SCOPE)
_MAX_AGENT = 64  # the longest agent name ``memory_query`` accepts


def hash_token(token: str) -> str:
    """The SHA-256 hex digest of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A verified, unrevoked API key: its id, its account and the agents it may act as."""

    id: str
    account_id: str
    agents: tuple[str, ...]
    admin: bool = False
    """Whether the key may call operator routes (``DELETE /v1/users/{id}``)."""
    scope: str = SERVICE_SCOPE
    """``admin``, ``service`` or ``read`` (see the module docstring)."""

    @property
    def read_only(self) -> bool:
        """Whether the key may only call routes that change nothing."""
        return self.scope == READ_SCOPE

    @property
    def principal(self) -> Principal:
        """Who a request with this key acts as, for the gate."""
        return Principal(
            account_id=self.account_id, scope=Scope(self.scope), agents=self.agents, key_id=self.id
        )

    @property
    def allowed_agents(self) -> tuple[str, ...]:
        """The agents requests with this key may name (``default`` for an unbound key)."""
        return self.principal.allowed_agents

    def agent_for(self, requested: str | None) -> str:
        """The agent a request acts as: the one it names, or the key's first.

        Raises:
            PermissionDeniedError: the request names an agent the key is not bound to.
        """
        return self.principal.agent_for(requested)


def scope_of(stored: str) -> str:
    """The scope a stored ``scopes`` value grants (empty: a key made before scopes:
    ``service``)."""
    names = stored.split(",")
    for scope in SCOPES:
        if scope in names:
            return scope
    return SERVICE_SCOPE


def _agent_names(agents: Iterable[str]) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(agents))  # repeated names collapse, order kept
    for name in names:
        if not name.strip() or name != name.strip() or len(name) > _MAX_AGENT:
            raise ValidationError(
                f"agent names must be 1-{_MAX_AGENT} characters without surrounding spaces"
            )
    return names


class ApiKeys:
    """Creates, lists, revokes and verifies API keys stored in the service tables."""

    def __init__(self, tables: ServiceTables) -> None:
        self._tables = tables

    @classmethod
    def over(cls, storage: Storage) -> ApiKeys:
        """API keys kept in ``storage``."""
        return cls(SqlServiceTables(storage.database))

    def create(
        self,
        account_id: str,
        *,
        agents: Iterable[str] = (),
        admin: bool = False,
        scope: str | None = None,
    ) -> str:
        """Make a key for ``account_id`` and return the token (it is not stored).

        ``agents`` are the agents the key may act as, the first being the one a request
        naming none acts as; without any, the key acts as agent ``default`` only.
        ``scope`` is ``service`` (the default), ``read`` or ``admin``; ``admin=True`` is
        ``scope="admin"`` (an admin key may also call operator routes).

        Raises:
            ValidationError: an empty account id, a malformed agent name, an unknown scope
                or ``admin`` with another scope.
        """
        if not account_id.strip():
            raise ValidationError("account id must not be empty")
        if scope is not None and scope not in SCOPES:
            raise ValidationError(f"scope must be one of {', '.join(SCOPES)}")
        if admin and scope not in (None, ADMIN_SCOPE):
            raise ValidationError("an admin key has the admin scope")
        chosen = ADMIN_SCOPE if admin else (scope or SERVICE_SCOPE)
        names = _agent_names(agents)
        key_id = secrets.token_hex(8)
        token = f"{PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
        self._tables.insert_api_key(
            ApiKeyRow(
                id=key_id,
                account_id=account_id,
                token_hash=hash_token(token),
                created_at=time.time(),
                revoked_at=None,
                agents=names,
                scopes=chosen,
            )
        )
        return token

    def of_account(self, account_id: str) -> list[ApiKeyRow]:
        """The keys of an account, revoked ones included, oldest first."""
        return self._tables.api_keys(account_id)

    def revoke(self, key_id: str) -> ApiKeyRow:
        """Revoke a key: every request with it fails from now on. Revoking twice is harmless
        (the first revocation time is kept).

        Raises:
            NotFoundError: no key has this id.
        """
        row = self._tables.revoke_api_key(key_id, time.time())
        if row is None:
            raise NotFoundError(f"API key {key_id} not found")
        return row

    def verify(self, token: str) -> ApiKey | None:
        """The key a token belongs to, or ``None`` when it is malformed, unknown or revoked."""
        parts = token.split("_", 2)
        if len(parts) != 3 or parts[0] != PREFIX:
            return None
        row = self._tables.get_api_key(parts[1])
        if row is None or row.revoked_at is not None:
            return None
        if not hmac.compare_digest(row.token_hash, hash_token(token)):
            return None
        return ApiKey(
            id=row.id,
            account_id=row.account_id,
            agents=row.agents,
            admin=ADMIN_SCOPE in row.scopes.split(","),
            scope=scope_of(row.scopes),
        )

    def account_of(self, token: str) -> str | None:
        """The account a valid token belongs to, or ``None``."""
        key = self.verify(token)
        return None if key is None else key.account_id
