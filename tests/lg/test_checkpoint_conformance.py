"""LangGraph's own checkpointer conformance suite (``langgraph-checkpoint-conformance``)
against :class:`ConfideCheckpointSaver`, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from confide.engine import MemoryEngine
from confide.langgraph import ConfideCheckpointSaver

pytestmark = pytest.mark.asyncio


async def test_passes_the_langgraph_conformance_suite(engine: MemoryEngine) -> None:
    failures: list[str] = []

    def record(capability: str, test: str, passed: bool, error: str | None) -> None:
        if not passed:
            failures.append(f"{capability}.{test}: {error}")

    @checkpointer_test(name=f"ConfideCheckpointSaver[{engine.storage.name}]")
    async def factory() -> AsyncGenerator[BaseCheckpointSaver[str], None]:
        yield ConfideCheckpointSaver(engine, account_id="acme", user_id="owner")

    report = await validate(factory, progress=ProgressCallbacks(on_test_result=record))
    assert failures == []
    assert report.passed_all_base(), report.to_dict()
    assert report.passed_all(), report.to_dict()
