"""The ``memory_query`` tool handler: agent tool arguments → :class:`MemoryQueryService`."""

from __future__ import annotations

import asyncio
from typing import Any

from confide.conversation.dispatcher import Owner
from confide.conversation.tools import MemoryQueryArgs
from confide.retrieval.memory_query import MemoryQueryService

DEFAULT_AGENT = "default"


class RetrievalQueryHandler:
    """Answers the ``memory_query`` tool for the caller's own user (the dispatcher's hook)."""

    def __init__(self, service: MemoryQueryService, *, default_agent: str = DEFAULT_AGENT):
        self.service = service
        self.default_agent = default_agent

    async def __call__(self, args: MemoryQueryArgs, *, owner: Owner) -> dict[str, Any]:
        """Run the query off the event loop; ownership comes from the call, not the model."""
        request = {
            "agent": args.agent or self.default_agent,
            "account_id": owner.account_id,
            "user_id": owner.user_id,
            "query": args.query,
            "categories": args.categories,
            "filters": args.filters,
            "top_k": args.top_k,
            "return": args.return_,
            "budget_tokens": args.budget_tokens,
            "threshold": args.threshold,
        }
        result = await asyncio.to_thread(self.service.query, request)
        # The delta header comes first, so an agent reads what changed before what it asked.
        answer: dict[str, Any] = {"header": result.header} if result.header else {}
        return {**answer, "success": True, "results": result.results, "tokens": result.tokens}
