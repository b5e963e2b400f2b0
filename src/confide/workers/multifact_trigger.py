"""Which conversation text gets the multi-fact pass: one rule, every write path.

Every write path that brings conversation text reaches the pass
(:class:`~confide.workers.multifact.MultiFactPass`) through :class:`MultiFactTrigger`, so the
doors decide nothing themselves:

* a **saved chat message** (``POST /v1/conversations/{id}/messages``, the SDK's
  ``add_message``): :meth:`MultiFactTrigger.message_saved`, by ids; the job opens the sealed
  message, so no text travels;
* a **finished conversation held in memory** (the end of a voice call, the SDK's
  ``add(messages)`` and so ``POST /v1/add``): :meth:`MultiFactTrigger.conversation_ended`, over
  the turns where they already are (they are never stored to hand them over).

The rule: each user turn longer than ``CONFIDE_MULTIFACT_MIN_CHARS``, never an assistant's.
With a model configured the pass asks it; with none the offline extractor reads the turn (no
call, no budget), so a long turn is never left unread for want of a model. What the pass
infers goes through extraction's checks and consent: a sensitive key waits as a proposal.

A saved message's pass is queued for a worker when the trigger ``queues`` (the service: the
request answers first), else run before the call returns (the SDK's blocking calls, like its
summary check); one run here that the model fails, or the day's budget stops, is queued for a
worker instead, which retries it (or waits for the next budget day). A conversation held in
memory cannot be queued (its text is stored nowhere): a turn the model fails on is logged and
left, and the next turns are still read. Nothing here logs or keeps a text.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from confide.config import Settings
from confide.conversation.buffer import Session
from confide.conversation.dedup import DedupPolicy
from confide.conversation.extraction import ProposalSink
from confide.conversation.proposals import ProposalStore
from confide.engine import MemoryEngine
from confide.errors import ProviderError
from confide.llm.base import LLM
from confide.llm.offline import OfflineExtractor
from confide.llm.usage import UsageLedger
from confide.storage.service.sessions import SqlServiceTables
from confide.types import Memory
from confide.workers.multifact import MultiFactPass, MultiFactReport
from confide.workers.queue import enqueue

__all__ = ["MULTIFACT", "MultiFactTrigger", "enqueue_multifact"]

log = logging.getLogger(__name__)

MULTIFACT = "multifact"
"""The job kind of a saved message's pass."""


def enqueue_multifact(
    engine: MemoryEngine, *, account_id: str, user_id: str, conversation_id: str, index: int
) -> str | None:
    """Queue the pass over one saved message (ids only); the new job's id.

    Whether a message gets the pass is :class:`MultiFactTrigger`'s decision: call it rather
    than this.
    """
    return enqueue(
        engine,
        MULTIFACT,
        account_id=account_id,
        payload={"user_id": user_id, "conversation_id": conversation_id, "index": index},
    )


class MultiFactTrigger:
    """The multi-fact pass for every write path that brings conversation text.

    Args:
        engine: the memory engine.
        llm: the metered model; ``None``: the offline extractor reads each turn.
        settings: ``multifact_min_chars``, the caps, the de-duplication bands, the sensitive
            keys and the proposals' time to live.
        dedup: the write-time de-duplication policy (default: extraction's bands, text only).
        proposals: where held candidates go (default: the engine's proposal store).
        ledger: the usage ledger whose daily budget a model's pass respects.
        queues: whether a saved message's pass is queued for a worker (the service) or run
            before :meth:`message_saved` returns (the SDK).
    """

    def __init__(
        self,
        engine: MemoryEngine,
        llm: LLM | None,
        settings: Settings,
        *,
        dedup: DedupPolicy | None = None,
        proposals: ProposalSink | None = None,
        ledger: UsageLedger | None = None,
        queues: bool = False,
    ) -> None:
        self.engine = engine
        self.llm = llm
        self.settings = settings
        self.dedup = dedup
        self.proposals = proposals or ProposalStore(
            engine,
            SqlServiceTables(engine.storage.database),
            ttl=timedelta(days=settings.proposal_ttl_days),
        )
        self.ledger = ledger
        self.queues = queues

    def applies(self, *, role: str, length: int) -> bool:
        """The rule: a user turn longer than ``CONFIDE_MULTIFACT_MIN_CHARS``."""
        return role == "user" and length > self.settings.multifact_min_chars

    def build(self) -> MultiFactPass:
        """The pass over the model, or over the offline extractor when there is none."""
        return MultiFactPass(
            self.engine,
            self.llm,
            self.settings,
            dedup=self.dedup,
            proposals=self.proposals,
            ledger=self.ledger,
            extractor=OfflineExtractor() if self.llm is None else None,
        )

    async def message_saved(
        self,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        index: int,
        role: str,
        length: int,
        collect: list[Memory] | None = None,
    ) -> bool:
        """A chat message was saved (``length``: its content's characters): queue or run its
        pass if the rule says so; whether it did. ``collect`` receives the memories a pass
        run here writes.

        Raises:
            StorageError: queueing the job or reading the message failed.
        """
        if not self.applies(role=role, length=length):
            return False
        if not self.queues:
            try:
                report = await self.run_message(
                    account_id=account_id,
                    user_id=user_id,
                    conversation_id=conversation_id,
                    index=index,
                    collect=collect,
                )
            except ProviderError:
                log.warning("multifact: the model failed; the message is queued for a worker")
            else:
                if report.skipped != "budget":
                    return True
        await asyncio.to_thread(
            enqueue_multifact,
            self.engine,
            account_id=account_id,
            user_id=user_id,
            conversation_id=conversation_id,
            index=index,
        )
        return True

    async def run_message(
        self,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        index: int,
        now: datetime | None = None,
        collect: list[Memory] | None = None,
    ) -> MultiFactReport:
        """Run the pass over one saved message now (a worker's job, or the SDK's call).

        Raises:
            NotFoundError: no such message of this user.
            ValidationError: the message is the assistant's.
            ProviderError: the model failed; nothing was written.
        """
        return await self.build().run_message(
            account_id=account_id,
            user_id=user_id,
            conversation_id=conversation_id,
            index=index,
            now=now,
            collect=collect,
        )

    async def conversation_ended(
        self, session: Session, *, collect: list[Memory] | None = None
    ) -> list[MultiFactReport]:
        """Run the pass over each long user turn of a finished conversation held in memory
        (a voice call's buffer, the SDK's messages), in order; one report per long turn (a
        turn the model failed on: ``skipped="failed"``, nothing written for it).
        ``collect`` receives the memories written.

        Raises:
            StorageError: reading the user's memories or writing one failed.
        """
        job = self.build()
        reports = []
        for turn in session.turns:
            if not self.applies(role=turn.speaker, length=len(turn.summary)):
                continue
            try:
                report = await job.run_turn(
                    account_id=session.account_id,
                    user_id=session.user_id,
                    turn_text=turn.summary,
                    session_id=session.session_id,
                    collect=collect,
                )
            except ProviderError:
                log.warning("multifact: the model failed on a turn of an ended conversation")
                report = MultiFactReport(
                    account_id=session.account_id, user_id=session.user_id, skipped="failed"
                )
            reports.append(report)
        return reports
