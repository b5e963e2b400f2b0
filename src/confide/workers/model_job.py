"""What the jobs that ask the model about one user share: their parts and the budget check.

:class:`~confide.workers.insights.InsightWriter` and
:class:`~confide.workers.multifact.MultiFactPass` each make one model call for one user and
write what survives the writing rules and the write-time de-duplication policy. They take
the same parts, wired the same way, from :class:`ModelJob`.
"""

from __future__ import annotations

import asyncio

from confide.config import Settings
from confide.conversation.dedup import DedupPolicy
from confide.conversation.writing import WritingTally
from confide.engine import MemoryEngine
from confide.llm.base import LLM
from confide.llm.usage import UsageLedger

__all__ = ["ModelJob"]


class ModelJob:
    """The parts of a job that asks the model about one user and writes what it answers.

    Args:
        engine: the memory engine.
        llm: the model (wrap it in :class:`~confide.llm.usage.MeteredLLM` so its calls are
            in the usage ledger); ``None``: every run is skipped (``no_llm``).
        settings: the engine's settings (the de-duplication bands, the job's own limits).
        ledger: the usage ledger whose daily budget the job respects (``None``: no budget).
        dedup: the write-time de-duplication policy (the service's, with its embedder);
            default: extraction's bands from ``settings``, text only.
        timeout: seconds the model's call may take.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        llm: LLM | None,
        settings: Settings,
        *,
        ledger: UsageLedger | None = None,
        dedup: DedupPolicy | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.engine = engine
        self.llm = llm
        self.settings = settings
        self.ledger = ledger
        self.dedup = dedup or DedupPolicy(
            text_threshold=settings.dedup_text_threshold,
            cosine_threshold=settings.dedup_cosine_threshold,
        )
        self.timeout = timeout
        self.writing = WritingTally()
        """Verdicts of the writing rules on everything the model wrote for this job."""

    async def over_budget(self, account_id: str) -> bool:
        """Whether the account's daily LLM budget is nearly spent, so the job makes no call
        (the ledger's :meth:`~confide.llm.usage.UsageLedger.must_defer`; never without one).

        Raises:
            StorageError: reading the usage ledger failed.
        """
        if self.ledger is None:
            return False
        return await asyncio.to_thread(self.ledger.must_defer, account_id)
