"""``GET /v1/ops?since=1d``: the key's account's operational events, counted by op and node."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from confide.engine.ops import parse_window
from confide.server.deps import Account, Svc

router = APIRouter(prefix="/v1", tags=["ops"])


class OpsOut(BaseModel):
    """Events of the account between ``since`` and ``until`` (ISO 8601, UTC)."""

    model_config = ConfigDict(populate_by_name=True)

    since: str
    until: str
    total: int
    by_op: dict[str, int] = Field(serialization_alias="byOp")
    by_node: dict[str, int] = Field(serialization_alias="byNode")


@router.get("/ops", response_model=OpsOut, response_model_by_alias=True)
async def ops(
    services: Svc,
    account: Account,
    since: Annotated[str, Query(description="Look-back window: 30m, 12h, 1d, 7d")] = "1d",
) -> OpsOut:
    """Operational events of the key's account (never another's) in the window, counted by
    operation and by node. Any key may read them, a ``read`` key too."""
    window = parse_window(since)
    until = time.time()
    start = until - window.total_seconds()
    engine = services.engine

    def counts(by: str) -> dict[str, int]:
        return engine.op_counts(by=by, since=start, until=until, account_id=account)

    by_op = await asyncio.to_thread(counts, "op")
    by_node = await asyncio.to_thread(counts, "node")
    return OpsOut(
        since=datetime.fromtimestamp(start, UTC).isoformat(),
        until=datetime.fromtimestamp(until, UTC).isoformat(),
        total=sum(by_op.values()),
        by_op=dict(sorted(by_op.items())),
        by_node=dict(sorted(by_node.items())),
    )
