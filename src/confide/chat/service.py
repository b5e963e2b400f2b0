"""``ChatMemory``: the chat features over one engine, as the SDK and the service use them.

It holds the message store, the history builder (over the engine as a
:class:`~confide.retrieval.ports.MemoryReader`), the subject facts and the rolling
summaries (the configured LLM's summariser, or the offline one).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from confide.chat.facts import FACT_MEMORY_CATEGORY, SubjectFacts, facts_section
from confide.chat.history import HistoryBuilder
from confide.chat.messages import MessageStore
from confide.chat.prompt import Delivery, build_static_prompt
from confide.chat.summaries import (
    LLMSummariser,
    OfflineSummariser,
    RollingSummaries,
    Summariser,
    SummaryOutcome,
)
from confide.chat.types import (
    ConversationHistory,
    MemoryContext,
    MessagePage,
    NewMessage,
    SavedMessage,
    SubjectFact,
)
from confide.config import Settings
from confide.conversation.procedural import in_default_context
from confide.conversation.prompts import build_system_prompt
from confide.embedders.base import Embedder
from confide.engine import MemoryEngine
from confide.errors import ValidationError
from confide.llm.base import LLM
from confide.llm.registry import llm_from_settings
from confide.llm.usage import UsageLedger, metered
from confide.retrieval.profiles import AgentProfile, DeliveryMode
from confide.types import MemoryFilter, Visibility, category_filter

__all__ = ["ChatMemory"]

T = TypeVar("T")


class ChatMemory:
    """Messages, history, rolling summaries and subject facts of one engine.

    Args:
        engine: the memory engine (its keys seal messages; chunks and facts are memories).
        settings: window, retention and summary knobs (``engine.settings`` by default).
        embedder: for the semantic tier of :meth:`retrieve` (none: the tier is skipped).
        llm: the summaries' model; by default the configured one, else the offline
            summariser. ``summariser`` replaces both.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        llm: LLM | None = None,
        summariser: Summariser | None = None,
        ledger: UsageLedger | None = None,
    ) -> None:
        self.engine = engine
        self.ledger = ledger
        self.settings = settings or engine.settings
        self.messages = MessageStore(engine)
        self.facts = SubjectFacts(engine)
        self.history = HistoryBuilder(
            engine,
            self.messages,
            self.facts,
            embedder=embedder,
            window=self.settings.history_window,
            summary_min=self.settings.history_summary_min_cosine,
            ops=engine,
        )
        self.llm = llm if llm is not None else llm_from_settings(self.settings)
        """The model of the summaries and of the insights a summary queues (``None``: none
        configured)."""
        if summariser is None:
            model = self.llm
            summariser = OfflineSummariser() if model is None else LLMSummariser(model)
        self.summaries = RollingSummaries(
            engine,
            self.messages,
            self.facts,
            summariser,
            trigger=self.settings.summary_trigger,
            batch=self.settings.summary_batch,
        )

    # ---- messages ----------------------------------------------------------------------------
    def add_message(self, message: NewMessage | dict[str, Any]) -> SavedMessage:
        """Save a message (sealed) at its conversation's next index.

        Raises :class:`~confide.errors.ValidationError` for a bad field and
        :class:`~confide.errors.NotFoundError` when the conversation is another user's.
        """
        return self.messages.add(message)

    def add_message_and_summarise(
        self, message: NewMessage | dict[str, Any]
    ) -> tuple[SavedMessage, SummaryOutcome | None]:
        """:meth:`add_message`, then the summary check, waited for (the SDK's blocking path);
        the saved message and the summary made, if one was."""
        saved = self.add_message(message)
        new = message if isinstance(message, NewMessage) else NewMessage.model_validate(message)
        outcome = _run_blocking(
            self.summarise_if_due(account_id=new.account_id, conversation_id=new.conversation_id)
        )
        return saved, outcome

    def list_messages(
        self,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        cursor: int | None = None,
        limit: int = 50,
    ) -> MessagePage:
        """A page of the conversation's messages after index ``cursor``, oldest first."""
        return self.messages.page(
            account_id=account_id,
            user_id=user_id,
            conversation_id=conversation_id,
            cursor=cursor,
            limit=limit,
        )

    def purge_messages(self, *, now: float | None = None) -> int:
        """Delete messages summarised more than ``CONFIDE_MESSAGE_RETENTION_DAYS`` ago; with
        the setting unset (the default) every message is kept and nothing is deleted."""
        return self.messages.purge(retention_days=self.settings.message_retention_days, now=now)

    # ---- history -----------------------------------------------------------------------------
    def retrieve(
        self,
        text: str,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        channel: str | None = None,
        categories: Sequence[str] | None = None,
    ) -> ConversationHistory:
        """The conversation's recent messages and memory as context messages.

        ``categories``: the memory categories the reading agent may see (its allowlist, as
        :meth:`~confide.retrieval.categories.CategoriesConfig.resolve` gives it); ``None``:
        every category. ``channel``: the window holds that channel's messages (and those
        saved without one); ``None``: every channel's. Raises
        :class:`~confide.errors.NotFoundError` for another user's conversation; a context
        tier that fails is logged (counts only) and left out.
        """
        return self.history.build(
            text,
            account_id=account_id,
            user_id=user_id,
            conversation_id=conversation_id,
            channel=channel,
            categories=categories,
        )

    def memory_context(
        self,
        text: str,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        channel: str | None = None,
        categories: Sequence[str] | None = None,
    ) -> MemoryContext:
        """:meth:`retrieve` in the older three-tier form: ``short_term`` (the window),
        ``long_term`` (summary chunks, important memories, subject facts) and ``semantic``
        (memories similar to ``text``). Same arguments and errors as :meth:`retrieve`."""
        return self.history.tiers(
            text,
            account_id=account_id,
            user_id=user_id,
            conversation_id=conversation_id,
            channel=channel,
            categories=categories,
        )

    # ---- prompts -----------------------------------------------------------------------------
    def deliver(
        self,
        profile: AgentProfile,
        text: str,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str | None = None,
        subject_id: str | None = None,
        channel: str | None = None,
        memory_limit: int = 100,
        categories: Sequence[str] | None = None,
    ) -> Delivery:
        """What to send the profile's model for this turn, in the profile's delivery mode.

        ``history``: the static prompt (the same bytes every turn), memory as context
        messages, the conversation's recent messages (``conversation_id`` required).
        ``instructions``: the static prompt with the user's memories (at most
        ``memory_limit``) and, given ``subject_id``, the subject's facts written in.
        ``categories`` limits the memories (and the facts) to the agent's allowlist, as in
        :meth:`retrieve`.
        """
        static = build_static_prompt(profile, channel=channel)
        if profile.delivery is DeliveryMode.HISTORY:
            if conversation_id is None:
                raise ValidationError("history delivery needs a conversation_id")
            history = self.retrieve(
                text,
                account_id=account_id,
                user_id=user_id,
                conversation_id=conversation_id,
                channel=channel,
                categories=categories,
            )
            return Delivery(
                DeliveryMode.HISTORY, static, history.context_messages, history.messages
            )
        memories = [
            m
            for m in self.engine.list_memories(
                MemoryFilter(
                    account_id=account_id,
                    user_id=user_id,
                    categories=category_filter(categories),
                ),
                limit=memory_limit,
            )
            # Facts come with their visibility below; procedures only when asked for.
            if m.category != FACT_MEMORY_CATEGORY and in_default_context(m)
        ]
        prompt = build_system_prompt(static, memories)
        if subject_id is not None and (categories is None or FACT_MEMORY_CATEGORY in categories):
            section = self.facts_prompt(
                account_id=account_id, user_id=user_id, subject_id=subject_id
            )
            if section:
                prompt = f"{prompt}\n\n{section}"
        return Delivery(DeliveryMode.INSTRUCTIONS, prompt)

    # ---- summaries ---------------------------------------------------------------------------
    async def summarise_if_due(
        self, *, account_id: str, conversation_id: str
    ) -> SummaryOutcome | None:
        """Summarise the conversation's oldest messages when enough are unsummarised.

        Waits (returns ``None``, the messages kept for the next check) while the account
        has less than 20% of its daily LLM budget left.
        """
        if self.ledger is not None and self.ledger.must_defer(account_id):
            return None  # the range stays unsummarised: the next trigger takes it up
        with metered(account_id, "chat_summary", f"conversation:{conversation_id}"):
            return await self.summaries.run(account_id=account_id, conversation_id=conversation_id)

    # ---- subject facts -----------------------------------------------------------------------
    def subject_facts(self, *, account_id: str, user_id: str, subject_id: str) -> list[SubjectFact]:
        """The user's facts of the subject and everyone's shared ones, oldest first."""
        return self.facts.visible(account_id=account_id, user_id=user_id, subject_id=subject_id)

    def facts_prompt(
        self, *, account_id: str, user_id: str, subject_id: str, name: str | None = None
    ) -> str | None:
        """The ``Known facts about {name} from conversations:`` section (``None``: no facts)."""
        facts = self.subject_facts(account_id=account_id, user_id=user_id, subject_id=subject_id)
        return facts_section(name or subject_id, facts, user_id=user_id)

    def set_fact_visibility(
        self, *, account_id: str, user_id: str, fact_id: str, visibility: Visibility | str
    ) -> SubjectFact:
        """Share or unshare a fact; only its owner may (:class:`NotFoundError` for others)."""
        return self.facts.set_visibility(
            account_id=account_id, user_id=user_id, fact_id=fact_id, visibility=visibility
        )

    def delete_fact(self, *, account_id: str, user_id: str, fact_id: str) -> None:
        """Delete a fact; only its owner may (:class:`NotFoundError` for anyone else)."""
        self.facts.delete(account_id=account_id, user_id=user_id, fact_id=fact_id)


def _run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from blocking code, inside a running loop or not."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
