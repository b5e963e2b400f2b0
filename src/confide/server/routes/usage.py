"""``/v1/usage``: the LLM usage ledger's totals for the key's account ("energy")."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from confide.llm.usage import UsageReport
from confide.server.deps import Key, Svc

router = APIRouter(prefix="/v1/usage", tags=["usage"])


class OperationUsageOut(BaseModel):
    """Totals of one operation (``app_memory``, ``app_compaction``, ``chat_summary``,
    ``extraction``, ...)."""

    operation: str
    calls: int
    prompt_tokens: int = Field(serialization_alias="promptTokens")
    completion_tokens: int = Field(serialization_alias="completionTokens")
    cost_units: float = Field(serialization_alias="costUnits")


class BudgetOut(BaseModel):
    """Today's budget (UTC day) and the share of it left."""

    units: float
    remaining_fraction: float = Field(serialization_alias="remainingFraction")


class UsageOut(BaseModel):
    """LLM usage between ``since`` (``null``: the start) and ``until``."""

    since: str | None
    until: str
    calls: int
    cost_units: float = Field(serialization_alias="costUnits")
    operations: list[OperationUsageOut]
    budget: BudgetOut | None


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


@router.get("", response_model=UsageOut, response_model_by_alias=True)
async def usage(
    services: Svc,
    key: Key,
    since: Annotated[datetime | None, Query(description="ISO 8601; default: last poll")] = None,
) -> UsageOut:
    """Totals since the key's previous poll (which this call records), or since ``since``."""
    ledger = services.usage
    account = key.account_id
    report: UsageReport
    if since is None:
        report = await asyncio.to_thread(ledger.since_last_poll, account, f"key:{key.id}")
    else:
        moment = since if since.tzinfo else since.replace(tzinfo=UTC)
        report = await asyncio.to_thread(ledger.report, account, since=moment.timestamp())
    left = await asyncio.to_thread(ledger.remaining_fraction, account)
    return UsageOut(
        since=_iso(report.since),
        until=_iso(report.until) or "",
        calls=report.calls,
        cost_units=round(report.cost_units, 6),
        operations=[
            OperationUsageOut(
                operation=o.operation,
                calls=o.calls,
                prompt_tokens=o.prompt_tokens,
                completion_tokens=o.completion_tokens,
                cost_units=round(o.cost_units, 6),
            )
            for o in report.operations
        ],
        budget=(
            None
            if ledger.budget_units is None or left is None
            else BudgetOut(units=ledger.budget_units, remaining_fraction=round(left, 6))
        ),
    )
