"""The principal a LangGraph class acts for, from its constructor's arguments."""

from __future__ import annotations

from confide.errors import ValidationError
from confide.gate import Principal, Scope

__all__ = ["door_principal"]


def door_principal(
    account_id: str | None, principal: Principal | None, agent: str | None
) -> tuple[Principal, str | None]:
    """The principal (given, or a ``service`` one of ``account_id`` bound to ``agent``) and the
    agent the class acts as (``None`` when none is named).

    Raises:
        ValidationError: neither an account nor a principal, or a principal of another
            account than ``account_id``.
        PermissionDeniedError: an agent the principal is not bound to.
    """
    if principal is None:
        if not account_id:
            raise ValidationError("an account_id or a principal is required")
        principal = Principal(
            account_id=account_id, scope=Scope.SERVICE, agents=() if agent is None else (agent,)
        )
    elif account_id is not None and account_id != principal.account_id:
        raise ValidationError("account_id differs from the principal's account")
    return principal, None if agent is None else principal.agent_for(agent)
