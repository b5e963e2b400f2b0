"""A registry of background tasks, so responses never wait for them and tests can."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["TaskRegistry"]

log = logging.getLogger(__name__)


class TaskRegistry:
    """Starts fire-and-forget tasks, keeps references to them and lets callers ``join``."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Run ``coro`` in the background on the running loop."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "background task %s failed: %s", task.get_name(), type(task.exception()).__name__
            )

    def __len__(self) -> int:
        return len(self._tasks)

    async def join(self) -> None:
        """Wait until every task started so far (and any they start) has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
