"""Who a call acts for: the principal every door hands to the gate.

A door turns its own credentials into a :class:`Principal` (an API key over HTTP, MCP or the
Realtime socket; the configured account over MCP's stdio; the process itself in the embedded
SDK) and nothing more: what the principal may do is decided by :mod:`confide.gate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from confide.errors import PermissionDeniedError, ValidationError

__all__ = ["DEFAULT_AGENT", "Principal", "Scope"]

DEFAULT_AGENT = "default"
"""The agent of a principal bound to no agent (the allowlist name Confide ships)."""


class Scope(StrEnum):
    """What a principal may do.

    ``service``: every agent-facing operation (reads and writes of the account's users'
    memories); ``read``: only operations that change nothing; ``admin``: ``service`` plus
    the operator's (erasure, app memories).
    """

    ADMIN = "admin"
    SERVICE = "service"
    READ = "read"


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of one operation, as its door authenticated it.

    Args:
        account_id: the account every operation is confined to.
        scope: what the caller may do (:class:`Scope`).
        agents: the agents the caller may act as, the first being the one a call naming none
            acts as; empty: :data:`DEFAULT_AGENT` only.
        user_id: the one user a door pins every call to (an MCP server started for a user, a
            call session); ``None``: the call names its user.
        key_id: the API key's id, when the door authenticated one (for audit).
    """

    account_id: str
    scope: Scope = Scope.SERVICE
    agents: tuple[str, ...] = ()
    user_id: str | None = None
    key_id: str | None = None

    @property
    def may_write(self) -> bool:
        """Whether the principal may change anything."""
        return self.scope != Scope.READ

    @property
    def is_admin(self) -> bool:
        """Whether the principal may call the operator's operations."""
        return self.scope == Scope.ADMIN

    @property
    def allowed_agents(self) -> tuple[str, ...]:
        """The agents the principal may name (:data:`DEFAULT_AGENT` when bound to none)."""
        return self.agents or (DEFAULT_AGENT,)

    def agent_for(self, requested: str | None) -> str:
        """The agent a call acts as: the one it names, or the principal's first.

        Raises:
            PermissionDeniedError: the call names an agent the principal is not bound to.
        """
        if requested is None:
            return self.allowed_agents[0]
        if requested not in self.allowed_agents:
            raise PermissionDeniedError(f"API key may not act as agent {requested!r}")
        return requested

    def acting_user(self, requested: str | None) -> str:
        """The user a call acts on: the pinned one, or the one it names.

        Raises:
            PermissionDeniedError: the call names another user than the pinned one.
            ValidationError: no user is pinned and the call names none.
        """
        if self.user_id is not None:
            if requested is not None and requested != self.user_id:
                raise PermissionDeniedError("this caller acts for another user")
            return self.user_id
        if requested is None or not requested.strip():
            raise ValidationError("user_id is required")
        return requested
