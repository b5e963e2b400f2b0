"""``Engram``: the whole engine as configured, and :meth:`Engram.open`, the one wiring.

:meth:`Engram.open` builds everything an entry point needs from :class:`Settings`: the
storage and the key store with the key ring (through :meth:`MemoryEngine.open`), the
embedder and the indexers that keep its vectors, the categories and agent allowlists for
``memory_query``, and the end-of-session extractor (the configured LLM, or offline). The SDK,
``create_app``, the CLI and background workers all start from it.
"""

from __future__ import annotations

from typing import Any

from engram.chat import ChatMemory, ConversationHistory, MessagePage, SavedMessage
from engram.chat.prompt import Delivery
from engram.config import Settings
from engram.conversation.extraction import Extractor
from engram.conversation.summarizer import extractor_from_settings
from engram.embedders import Embedder, embedder_from_settings
from engram.engine import MemoryEngine
from engram.index.vectors import VectorIndexer
from engram.retrieval.access import AccessTracker
from engram.retrieval.categories import load_categories
from engram.retrieval.memory_query import (
    MemoryQueryRequest,
    MemoryQueryResult,
    MemoryQueryService,
)

__all__ = ["Engram"]


class Engram:
    """A memory engine plus hybrid retrieval (``memory_query``) and extraction.

    ``engine`` offers every store operation; :meth:`query` answers ``memory_query``;
    ``extractor`` turns a finished conversation into memories.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        embedder: Embedder | None,
        settings: Settings | None = None,
        extractor: Extractor | None = None,
    ) -> None:
        self.settings = settings or engine.settings
        self.engine = engine
        self.embedder = embedder
        if embedder is not None:
            engine.add_indexer(
                VectorIndexer(
                    engine.storage,
                    embedder,
                    link_top_k=self.settings.link_top_k,
                    link_min=self.settings.link_min,
                )
            )
        self.extractor = extractor or extractor_from_settings(self.settings)
        self.access = AccessTracker(engine.storage)
        self.memory_query = MemoryQueryService(
            engine,
            load_categories(self.settings.categories_file),
            embedder=embedder,
            weights=self.settings.ranking,
            access=self.access,
        )
        self.chat = ChatMemory(engine, settings=self.settings, embedder=embedder)

    @classmethod
    def open(cls, settings: Settings | None = None) -> Engram:
        """Build a ready Engram from ``settings`` (from the environment when omitted).

        Opens and migrates the storage, opens the key store and key ring, builds the
        configured embedder and extractor. Raises :class:`~engram.errors.ConfigurationError`
        for a configuration that cannot work (see :meth:`MemoryEngine.open`).
        """
        settings = settings or Settings()
        embedder = embedder_from_settings(settings)
        return cls(MemoryEngine.open(settings), embedder=embedder, settings=settings)

    def query(self, request: MemoryQueryRequest | dict[str, Any]) -> MemoryQueryResult:
        """Answer a ``memory_query`` request."""
        return self.memory_query.query(request)

    def add_message(
        self,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        role: str,
        content: str,
        subject_id: str | None = None,
        channel: str | None = None,
    ) -> SavedMessage:
        """Save a chat message (sealed under the user's key) and run the summary check.

        See :class:`~engram.chat.ChatMemory`; raises :class:`~engram.errors.ValidationError`
        for bad input and :class:`~engram.errors.NotFoundError` for another user's
        conversation.
        """
        return self.chat.add_message_and_summarise(
            {
                "account_id": account_id,
                "user_id": user_id,
                "conversation_id": conversation_id,
                "role": role,
                "content": content,
                "subject_id": subject_id,
                "channel": channel,
            }
        )

    def messages(
        self,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        cursor: int | None = None,
        limit: int = 50,
    ) -> MessagePage:
        """A page of a conversation's messages, oldest first (``next_cursor`` continues it)."""
        return self.chat.list_messages(
            account_id=account_id,
            user_id=user_id,
            conversation_id=conversation_id,
            cursor=cursor,
            limit=limit,
        )

    def retrieve(
        self,
        input: str,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        channel: str | None = None,
    ) -> ConversationHistory:
        """A conversation's recent messages with memory as context messages."""
        return self.chat.retrieve(
            input,
            account_id=account_id,
            user_id=user_id,
            conversation_id=conversation_id,
            channel=channel,
        )

    def deliver(
        self,
        agent: str,
        input: str,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str | None = None,
        subject_id: str | None = None,
        channel: str | None = None,
    ) -> Delivery:
        """What to send ``agent``'s model this turn, as its profile's delivery mode says
        (``profiles`` in the categories YAML; :class:`~engram.errors.ValidationError` when
        the agent has none)."""
        return self.chat.deliver(
            self.memory_query.categories.profile(agent),
            input,
            account_id=account_id,
            user_id=user_id,
            conversation_id=conversation_id,
            subject_id=subject_id,
            channel=channel,
        )

    def close(self) -> None:
        """Flush access times and release the storage."""
        self.access.close()
        self.engine.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
