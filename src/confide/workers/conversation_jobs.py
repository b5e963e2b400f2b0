"""The conversation jobs a worker runs: chat rolling summaries and deferred app memory work.

``chat_summary`` is queued by every saved chat message (payload: the conversation's id; the
account is the job's); a key held only while the job is queued makes a burst of messages
queue one job, and a message saved after the job started queues the next. Its handler runs
:meth:`~confide.chat.ChatMemory.summarise_if_due`, which reads the unsummarised messages from
the store; a summary made queues the user's ``insights`` (with a model configured), naming
the conversation, whose latest messages that job reads.

``app_resume`` does the app memory work the account's LLM budget deferred (ended
conversations kept sealed in the store, :meth:`~confide.apps.AppMemories.resume_deferred`):
queued for the account when work is deferred (a job of an LLM kind waits for the next
budget day without spending an attempt), and hourly for every account by the
schedule. Ending a conversation itself stays immediate in the service: it has the messages
in memory, and they are never stored in clear to hand them to a job.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from confide.apps import AppMemories
from confide.chat import ChatMemory
from confide.engine import MemoryEngine
from confide.workers.memory_jobs import enqueue_insights
from confide.workers.queue import enqueue
from confide.workers.worker import JobContext, Worker

__all__ = [
    "APP_RESUME",
    "CHAT_SUMMARY",
    "ConversationJobs",
    "ConversationParts",
    "enqueue_app_resume",
    "enqueue_chat_summary",
]

CHAT_SUMMARY = "chat_summary"
APP_RESUME = "app_resume"


class ConversationParts(Protocol):
    """What the conversation jobs run on: the chat memory and the app memories (the SDK's
    :class:`~confide.client.Confide` and the service both have them)."""

    @property
    def chat(self) -> ChatMemory:
        """The chat memory whose summaries the ``chat_summary`` job writes."""
        ...

    @property
    def apps(self) -> AppMemories:
        """The app memories whose deferred work ``app_resume`` does."""
        ...


class ConversationJobs:
    """The ``chat_summary`` and ``app_resume`` handlers over ``parts``.

    ``parts`` is read at each run, so a service that swaps its chat memory runs the new
    one. ``uses_llm`` registers both as LLM kinds: the worker holds them while the account
    has less than 20% of its daily budget left, as the chat and app memories themselves
    would.
    """

    def __init__(self, parts: ConversationParts, *, uses_llm: bool = True) -> None:
        self.parts = parts
        self.uses_llm = uses_llm

    def register(self, worker: Worker) -> None:
        """Register ``chat_summary`` and ``app_resume`` on ``worker``."""
        worker.register(CHAT_SUMMARY, self.chat_summary, uses_llm=self.uses_llm)
        worker.register(APP_RESUME, self.app_resume, uses_llm=self.uses_llm)

    def chat_summary(self, ctx: JobContext) -> bool:
        """Summarise the conversation when enough is unsummarised; whether it did.

        A model failure raises before anything is written: the job is retried with backoff
        and the messages stay unsummarised.
        """
        account_id, conversation_id = ctx.job.account_id, ctx.payload.get("conversation_id")
        if account_id is None or not isinstance(conversation_id, str) or not conversation_id:
            return False
        chat = self.parts.chat
        outcome = asyncio.run(
            chat.summarise_if_due(account_id=account_id, conversation_id=conversation_id)
        )
        if outcome is None:
            return False
        enqueue_insights(
            ctx.engine,
            chat.llm,
            account_id=account_id,
            user_id=outcome.user_id,
            conversation_id=conversation_id,
        )
        return True

    def app_resume(self, ctx: JobContext) -> int:
        """Do deferred app memory work the budget now allows (of the job's account, or of
        every account for the scheduled run); how many ended conversations were written."""
        return asyncio.run(self.parts.apps.resume_deferred(ctx.job.account_id))


def enqueue_chat_summary(
    engine: MemoryEngine, *, account_id: str, conversation_id: str
) -> str | None:
    """Queue the conversation's rolling-summary check (one while one is queued)."""
    return enqueue(
        engine,
        CHAT_SUMMARY,
        account_id=account_id,
        payload={"conversation_id": conversation_id},
        dedupe_key=f"{CHAT_SUMMARY}:{account_id}:{conversation_id}",
        while_queued=True,
    )


def enqueue_app_resume(engine: MemoryEngine, *, account_id: str) -> str | None:
    """Queue the account's deferred app memory work (one while one is queued)."""
    return enqueue(
        engine,
        APP_RESUME,
        account_id=account_id,
        dedupe_key=f"{APP_RESUME}:{account_id}",
        while_queued=True,
    )
