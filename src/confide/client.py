"""``Confide``: the whole engine as configured, and :meth:`Confide.open`, the one wiring.

:meth:`Confide.open` builds everything an entry point needs from :class:`Settings`: the
storage and the key store with the key ring (through :meth:`MemoryEngine.open`), the
embedder and the indexers that keep its vectors, the categories and agent allowlists for
``memory_query``, and the end-of-session extractor (the configured LLM, or offline). The SDK,
``create_app``, the CLI and background workers all start from it.

Besides the engine (``Confide.engine``) and ``memory_query`` (:meth:`Confide.query`), it offers
the everyday calls known from other memory layers, each in the account :data:`DEFAULT_ACCOUNT`
unless told otherwise: :meth:`Confide.add` (a text, or a conversation whose memories are
extracted), :meth:`Confide.search` (ranked memories with scores), :meth:`Confide.get`,
:meth:`Confide.get_all`, :meth:`Confide.update`, :meth:`Confide.delete` (restorable),
:meth:`Confide.restore`, :meth:`Confide.history`, :meth:`Confide.export` and
:meth:`Confide.erase`. Every call runs through the gate (``components.gate``) as the process,
the operator of the account it names. An id a caller holds keeps naming its memory across
updates: ``get`` and ``update`` follow it to the memory's current version.

:class:`AsyncConfide` (``Confide.open_async``, or ``confide.aio``) offers every call awaited.
The client is embedded: it opens the store itself. Remote callers use
:meth:`Confide.remote` over the HTTP service (``confide serve``), with the same calls.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from confide.apps import AppMessage, EndOutcome
from confide.chat import ConversationHistory, MemoryContext, MessagePage, SavedMessage
from confide.chat.prompt import Delivery
from confide.config import Settings
from confide.conversation.buffer import SessionBuffer
from confide.conversation.extraction import (
    ExtractionPipeline,
    Extractor,
    writing_of,
)
from confide.conversation.procedural import ProceduralGate
from confide.conversation.summarizer import EngineMemorySink
from confide.embedders import Embedder
from confide.engine import MemoryEngine
from confide.errors import ProviderError, ValidationError
from confide.gate import DEFAULT_AGENT, Principal, Scope
from confide.gate.gate import next_note_key
from confide.llm.base import LLM
from confide.llm.usage import UsageReport, metered
from confide.remote import AsyncRemoteConfide, RemoteConfide
from confide.retrieval.budget import token_counter
from confide.retrieval.memory_query import (
    MemoryQueryRequest,
    MemoryQueryResult,
)
from confide.retrieval.results import SearchResult
from confide.storage.base import Capability
from confide.types import (
    DEFAULT_ACCOUNT,
    AddResult,
    ErasureReceipt,
    HistoryEvent,
    Memory,
    MemoryPatch,
    MemoryType,
    NewMemory,
    Source,
    listing_filter,
    update_patch,
)
from confide.wiring import Components, build
from confide.workers.memory_jobs import enqueue_insights
from confide.workers.multifact_trigger import MultiFactTrigger

__all__ = ["DEFAULT_ACCOUNT", "AddResult", "AsyncConfide", "Confide", "SearchResult"]


_MAX_KEYS = 5000
_PAGE_MAX = 1000  # as GET /v1/memories, so the remote SDK answers alike
_WARM_UP_TEXT = "Confide warm-up."
log = logging.getLogger(__name__)
_T = TypeVar("_T")
_P = ParamSpec("_P")
_ACTOR = "sdk"


class Confide:
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
        self._adopt(
            build(
                settings or engine.settings, engine=engine, embedder=embedder, extractor=extractor
            )
        )
        # The engine was given, yet the SDK closes it (``with Confide(engine, ...)``).
        self._closes_engine = True

    def _adopt(self, components: Components) -> None:
        self.components = components
        """The parts this client runs on (:func:`confide.wiring.build`)."""
        self.settings = components.settings
        self.engine = components.engine
        self.embedder = components.embedder
        self.usage = components.usage
        self.llm: LLM | None = components.llm
        """The configured model behind the usage ledger (``None``: none configured)."""
        self.extractor = components.extractor
        self.access = components.access
        self.memory_query = components.memory_query
        self.chat = components.chat
        self.apps = components.apps

    @classmethod
    def of(cls, components: Components) -> Confide:
        """The SDK over components built elsewhere (the service's, the CLI's).

        Closing it closes the components, and the engine only if they opened it.
        """
        confide = cls.__new__(cls)
        confide._adopt(components)
        confide._closes_engine = components.owns_engine
        return confide

    @classmethod
    def open(cls, settings: Settings | None = None) -> Confide:
        """Build a ready Confide from ``settings`` (from the environment when omitted).

        Opens and migrates the storage, opens the key store and key ring, builds the
        configured embedder and extractor (:func:`confide.wiring.build`). Raises
        :class:`~confide.errors.ConfigurationError` for a configuration that cannot work
        (see :meth:`MemoryEngine.open`). Without the ``local`` extra and with no embedder
        configured, opens without one (lexical search only) and warns once; see
        :func:`confide.embedders.configured_embedder`.
        """
        return cls.of(build(settings or Settings()))

    @classmethod
    def open_async(cls, settings: Settings | None = None) -> AsyncConfide:
        """:meth:`open` for asyncio callers: every call of the client awaited
        (:class:`AsyncConfide`; ``async with Confide.open_async() as memory: ...``)."""
        return AsyncConfide(cls.open(settings))

    @functools.cached_property
    def aio(self) -> AsyncConfide:
        """This client's calls, awaitable (:class:`AsyncConfide`; closing either closes both)."""
        return AsyncConfide(self)

    @staticmethod
    def remote(url: str, api_key: str, *, timeout: float = 30.0) -> RemoteConfide:
        """The same calls against a running ``confide serve`` (blocking).

        ``add``, ``search``, ``query`` and ``engine``'s memory operations, acting in the API
        key's account and raising the same errors; see :class:`~confide.remote.RemoteConfide`.
        """
        return RemoteConfide(url, api_key, timeout=timeout)

    @staticmethod
    def remote_async(url: str, api_key: str, *, timeout: float = 30.0) -> AsyncRemoteConfide:
        """:meth:`remote` for asyncio callers (every call is awaited)."""
        return AsyncRemoteConfide(url, api_key, timeout=timeout)

    def warm_up(self, progress: Callable[[str], None] | None = None) -> None:
        """Load now what the first call would otherwise load on its way.

        That is the embedder's model (a fixed text embedded as a batch and as a question,
        which the local model runs on different graphs: no user data), the
        in-process vector index's compiled loops and the token counter. ``progress``
        receives a line before and after (names and seconds only); by default they are
        logged. A failing embedder provider is logged, not raised: the first call tries
        again and reports it.
        """
        say = progress or log.info
        start = time.perf_counter()
        if self.embedder is not None:
            say(f"loading embedder {self.embedder.model_id} …")
            try:
                self.embedder.embed([_WARM_UP_TEXT])
                self.embedder.embed_one(_WARM_UP_TEXT)
            except ProviderError as exc:
                log.warning("embedder warm-up failed: %s", type(exc).__name__)
        if Capability.IN_PROCESS_VECTORS in self.engine.storage.capabilities:
            from confide.storage.sqlite_vectors import warm_up

            warm_up(self.embedder.dims if self.embedder is not None else 384)
        token_counter()
        say(f"warm-up done in {time.perf_counter() - start:.1f} s")

    def query(self, request: MemoryQueryRequest | Mapping[str, Any]) -> MemoryQueryResult:
        """Answer a ``memory_query`` request (a :class:`MemoryQueryRequest` or its fields).

        Raises:
            TypeError: ``request`` is neither (a plain question goes to :meth:`search`).
            ValidationError: a field is missing or invalid.
            PermissionDeniedError: the agent may not read a requested category.
        """
        if not isinstance(request, MemoryQueryRequest | Mapping):
            raise TypeError(
                "query() takes a MemoryQueryRequest or a dict of its fields, such as "
                '{"agent": "default", "account_id": ..., "user_id": ..., "query": ...}, '
                f"not {type(request).__name__}; for a plain question use "
                "search(question, user_id=...)"
            )
        return self.memory_query.query(dict(request) if isinstance(request, Mapping) else request)

    def add(
        self,
        data: str | Sequence[Mapping[str, str]],
        *,
        user_id: str,
        account_id: str = DEFAULT_ACCOUNT,
        key: str | None = None,
        type: MemoryType | str = MemoryType.FACT,
    ) -> list[AddResult]:
        """Remember a text, or what a conversation says about the user.

        A string is stored as one memory of ``type`` (default ``fact``) under ``key``
        (default: the next free ``note`` key: ``note``, ``note.2``, ...). A list of
        ``{"role": "user" | "assistant", "content": ...}`` messages goes through end-of-session
        extraction: the LLM when one is configured (``CONFIDE_LLM_*``, ``XAI_API_KEY``), else
        the offline extractor; only what the user said is kept; ``system`` messages are
        skipped and extraction never changes a key the user already has (such a fact is
        neither stored nor returned). Either way a near duplicate of an active memory is not
        stored again: the memory it repeats is returned instead. Facts that differ in a
        number, a date word, a name or a negation are never duplicates
        (:class:`~confide.conversation.dedup.DedupPolicy`).

        Returns:
            An :class:`AddResult` per memory, in order: a :class:`Memory` whose ``status`` is
            ``"created"`` (stored now) or ``"duplicate"`` (an active memory the text repeats,
            not stored again; ``similarity`` says how close). Empty when nothing was found
            to remember.

        Raises:
            TypeError: ``data`` is neither a string nor a list of message dicts.
            ValidationError: an empty text, an unknown role or an invalid field.
        """
        if isinstance(data, str):
            return self._add_text(
                data, account_id=account_id, user_id=user_id, key=key, memory_type=type
            )
        messages: Sequence[object] = data if isinstance(data, Sequence) else ()
        if messages is not data or not all(isinstance(m, Mapping) for m in messages):
            raise TypeError(
                "add() takes a string or a list of messages such as "
                f'[{{"role": "user", "content": "..."}}], not {type_name(data)}'
            )
        if key is not None:
            raise TypeError("add() takes key= only with a string; extraction picks the keys")
        return self._add_messages(
            [m for m in messages if isinstance(m, Mapping)], account_id=account_id, user_id=user_id
        )

    def search(
        self,
        query: str,
        *,
        user_id: str,
        account_id: str = DEFAULT_ACCOUNT,
        agent: str = "default",
        top_k: int = 5,
        threshold: float | None = None,
    ) -> list[SearchResult]:
        """The user's memories ranked by relevance to ``query``, best first, with scores.

        Runs the hybrid retrieval of ``memory_query`` (vectors, blind BM25, relation edges)
        over every category ``agent`` may read, ``context: all`` ones included. ``threshold``
        drops results whose cosine similarity to the query is below it.

        Raises:
            TypeError: ``query`` is not a string.
            ValidationError: an empty query or an out-of-range ``top_k``.
            PermissionDeniedError: ``agent`` is unknown.
        """
        if not isinstance(query, str):
            raise TypeError(f"search() takes the question as a string, not {type_name(query)}")
        request = {
            "agent": agent,
            "account_id": account_id,
            "user_id": user_id,
            "query": query,
            "top_k": top_k,
            "threshold": threshold,
        }
        return [
            SearchResult(
                memory=memory, score=float(extra["score"]), similarity=extra.get("similarity")
            )
            for memory, extra in self.memory_query.rank(request)
        ]

    def get(self, memory_id: str, *, account_id: str = DEFAULT_ACCOUNT) -> Memory:
        """The memory ``memory_id`` names, as it is now.

        Any id the memory has had works: an update writes a new version with a new id and
        supersedes the old one, and the old id still leads to the current version (forgotten
        ones too; ``state`` says which). ``engine.get`` reads one exact version instead.

        Raises:
            NotFoundError: no memory has had this id in the account.
        """
        return self.components.gate.current(_process(account_id), memory_id)

    def get_all(
        self,
        *,
        user_id: str,
        account_id: str = DEFAULT_ACCOUNT,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
        include_forgotten: bool = False,
    ) -> list[Memory]:
        """The user's active memories, newest first, a page at a time.

        ``filters`` narrows them: ``type`` and ``category`` (a name or a list of names),
        ``agent_id``, ``run_id``. ``limit`` (1..1000) and ``offset`` page through them;
        ``include_forgotten`` adds the forgotten ones :meth:`restore` can still bring back.

        Raises:
            ValidationError: an unknown filter, a bad value, ``limit``/``offset`` out of range.
        """
        if not 1 <= limit <= _PAGE_MAX:
            raise ValidationError(f"limit must be 1..{_PAGE_MAX}", fields=["limit"])
        flt = listing_filter(
            account_id=account_id,
            user_id=user_id,
            filters=filters,
            include_forgotten=include_forgotten,
        )
        return self.components.gate.list_memories(
            _process(account_id), flt, limit=limit, offset=offset
        )

    def update(
        self,
        memory_id: str,
        data: str | MemoryPatch | Mapping[str, Any],
        *,
        account_id: str = DEFAULT_ACCOUNT,
    ) -> Memory:
        """Change a memory: ``data`` is its new text, or the fields to change (``value``,
        ``type``, ``confidence``, ``importance``, ``visibility``, ``tags``).

        The change is written as a new version, which is returned, with a new ``id``; the
        ``id`` you hold (the old one, or any earlier) still names the memory: :meth:`get`,
        :meth:`update`, :meth:`delete` and :meth:`history` follow it to the current version.
        (The REST ``PATCH`` of a superseded version answers 409 instead: this call asks for
        the current version first, ``GET /v1/memories/{id}/current``, and patches that.)

        Raises:
            NotFoundError: no memory has had this id in the account.
            ConflictError: the memory is forgotten (:meth:`restore` it first), or another
                writer changed it meanwhile (read it and retry).
            ValidationError: an empty text or an invalid field.
        """
        principal = _process(account_id)
        current = self.components.gate.current(principal, memory_id)
        return self.components.gate.update(principal, current.id, update_patch(data), actor=_ACTOR)

    def delete(self, memory_id: str, *, account_id: str = DEFAULT_ACCOUNT) -> Memory:
        """Forget a memory (any id it has had): it leaves searches and listings at once and
        :meth:`restore` brings it back until it is purged (``purge_at``). Returns it as
        forgotten. :meth:`erase` removes a user for good.

        Raises:
            NotFoundError: no memory has had this id in the account.
            ConflictError: the memory is already forgotten.
        """
        return self.components.gate.forget(_process(account_id), memory_id, actor=_ACTOR)

    def restore(self, memory_id: str, *, account_id: str = DEFAULT_ACCOUNT) -> Memory:
        """Bring a forgotten memory back (any id it has had); returns it active again.

        Raises:
            NotFoundError: no memory has had this id in the account.
            ConflictError: the memory is not forgotten.
        """
        return self.components.gate.restore(_process(account_id), memory_id, actor=_ACTOR)

    def history(self, memory_id: str, *, account_id: str = DEFAULT_ACCOUNT) -> list[HistoryEvent]:
        """What happened to a memory (any id it has had), newest first: each version's
        ``ADD``/``UPDATE``, ``DELETE``, ``RESTORE``... with ids and actors, never values.

        Raises:
            NotFoundError: no memory has had this id in the account.
        """
        return self.components.gate.history(_process(account_id), memory_id)

    def export(self, *, user_id: str, account_id: str = DEFAULT_ACCOUNT) -> dict[str, Any]:
        """Everything the user owns, decrypted, as a JSON-ready document: ``memories``
        (every version not purged, oldest first) and ``audit`` (see
        :meth:`MemoryEngine.export_user`)."""
        return self.components.gate.export_user(_process(account_id), user_id)

    def erase(self, *, user_id: str, account_id: str = DEFAULT_ACCOUNT) -> ErasureReceipt:
        """Erase the user for good (crypto-shred): every row derived from them is deleted
        and their keys destroyed. Returns the receipt; nothing can be restored."""
        return self.components.gate.erase_user(_process(account_id), user_id)

    def _add_text(
        self,
        text: str,
        *,
        account_id: str,
        user_id: str,
        key: str | None,
        memory_type: MemoryType | str,
    ) -> list[AddResult]:
        value = text.strip()
        if not value:
            raise ValidationError("add() needs a non-empty text")
        kind = MemoryType(memory_type)
        if key is None:
            key = next_note_key(
                self.engine, account_id=account_id, user_id=user_id, memory_type=kind, value=value
            )
        twin = self.components.dedup.find_duplicate(
            self.engine,
            account_id=account_id,
            user_id=user_id,
            key=key,
            value=value,
            memory_type=kind,
        )
        if twin is not None:
            self.engine.emit_memory_op(
                "sdk", "merge", twin.memory, status="duplicate", sim=twin.similarity
            )
            return [AddResult.of(twin.memory, "duplicate", twin.similarity)]
        memory = NewMemory(
            account_id=account_id,
            user_id=user_id,
            key=key,
            value=value,
            type=kind,
            source=Source.API,
        )
        stored = self.engine.store(memory, actor=_ACTOR)
        self.engine.emit_memory_op("sdk", "create", stored)
        return [AddResult.of(stored)]

    def _add_messages(
        self, messages: Sequence[Mapping[Any, Any]], *, account_id: str, user_id: str
    ) -> list[AddResult]:
        buffer = SessionBuffer(max_turns=max(1, len(messages)))
        session_id = f"sdk-{uuid.uuid4().hex}"
        buffer.start(session_id, account_id=account_id, user_id=user_id)
        for message in messages:
            role, content = message.get("role"), message.get("content")
            if not isinstance(role, str) or not isinstance(content, str):
                raise TypeError('each message needs a string "role" and a string "content"')
            if role == "system":
                continue
            if role not in ("user", "assistant"):
                raise ValidationError(
                    f"a message's role must be 'user', 'assistant' or 'system', not {role!r}"
                )
            buffer.add_turn(session_id, "user" if role == "user" else "assistant", content)
        session = buffer.clear(session_id)
        if session is None:  # pragma: no cover - started above, cleared only here
            return []
        sink = EngineMemorySink(self.engine, dedup=self.components.dedup)
        # Consent as in a call: a sensitive key, or a benign one too few signals corroborate,
        # waits as a proposal (listed and confirmed through the service's /v1/proposals).
        pipeline = ExtractionPipeline(
            self.extractor,
            sink,
            proposals=self.components.proposals,
            consent=self.components.consent,
            procedural=ProceduralGate(min_confidence=self.settings.procedural_min_confidence),
            writing=writing_of(self.extractor),
        )
        with metered(account_id, "extraction", f"user:{user_id}"):
            _run(pipeline.run(session))
        results = [
            AddResult.of(m) if twin is None else AddResult.of(m, "duplicate", twin.similarity)
            for m, twin in sink.outcomes
        ]
        # Then the multi-fact pass over each long user turn (the model's, or offline); what
        # it finds already stored is mostly what the pass above just wrote, so only what it
        # stores is reported.
        stored: list[Memory] = []
        _run(self._multifact.conversation_ended(session, collect=stored))
        results += [AddResult.of(m) for m in stored]
        unique: dict[str, AddResult] = {}
        for result in results:
            unique.setdefault(result.id, result)
        return list(unique.values())

    @functools.cached_property
    def _multifact(self) -> MultiFactTrigger:
        """The multi-fact pass of the conversation text the SDK receives, run before each
        call returns (see :mod:`confide.workers.multifact_trigger`)."""
        return MultiFactTrigger(
            self.engine,
            self.llm,
            self.settings,
            dedup=self.components.dedup,
            proposals=self.components.proposals,
            ledger=self.usage,
        )

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
        """Save a chat message (sealed under the user's key), run the summary check and, for
        a long user message, the multi-fact pass (the model's, or the offline extractor's).

        See :class:`~confide.chat.ChatMemory`; raises :class:`~confide.errors.ValidationError`
        for bad input and :class:`~confide.errors.NotFoundError` for another user's
        conversation. A pass the model fails or the day's budget stops is queued for a worker
        (``confide worker``), and so are the user's insights after a summary (with a model
        configured), which read the conversation's latest messages.
        """
        saved, summary = self.chat.add_message_and_summarise(
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
        if summary is not None:
            enqueue_insights(
                self.engine,
                self.chat.llm,
                account_id=account_id,
                user_id=summary.user_id,
                conversation_id=conversation_id,
            )
        _run(
            self._multifact.message_saved(
                account_id=account_id,
                user_id=user_id,
                conversation_id=conversation_id,
                index=saved.index,
                role=role,
                length=len(content),
            )
        )
        return saved

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
        agent: str = DEFAULT_AGENT,
    ) -> ConversationHistory:
        """A conversation's recent messages with memory as context messages, of the
        categories ``agent`` may read (:class:`~confide.errors.PermissionDeniedError` for an
        agent without an allowlist). Given a ``channel``, the recent messages are that
        channel's (and those saved without one); without, every channel's."""
        return self.components.gate.retrieve(
            _process(account_id, agent),
            input,
            user_id=user_id,
            conversation_id=conversation_id,
            channel=channel,
            agent=agent,
        )

    def memory_context(
        self,
        input: str,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        channel: str | None = None,
        agent: str = DEFAULT_AGENT,
    ) -> MemoryContext:
        """:meth:`retrieve` in the older three-tier form: ``short_term`` (the recent
        messages), ``long_term`` (summary chunks, important memories, the subject's facts)
        and ``semantic`` (memories similar to ``input``), under the same rules."""
        return self.components.gate.memory_context(
            _process(account_id, agent),
            input,
            user_id=user_id,
            conversation_id=conversation_id,
            channel=channel,
            agent=agent,
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
        (``profiles`` in the categories YAML; :class:`~confide.errors.ValidationError` when
        the agent has none), with the memories of the categories its allowlist grants."""
        return self.components.gate.deliver(
            _process(account_id, agent),
            agent,
            input,
            user_id=user_id,
            conversation_id=conversation_id,
            subject_id=subject_id,
            channel=channel,
        )

    def end_app_conversation(
        self,
        app_id: str,
        conversation_id: str,
        messages: Sequence[AppMessage | Mapping[str, Any]],
        *,
        reason: str | None = None,
        account_id: str = DEFAULT_ACCOUNT,
        user_id: str | None = None,
    ) -> EndOutcome:
        """Write one memory of an ended conversation for the app and keep it within its cap.

        Blocks until done (the service's route answers at once and works in the background).
        The messages (``{"role", "content"}``) are not stored. While the account has less
        than 20% of its daily LLM budget left the work is deferred (``outcome.deferred``).
        ``user_id``, the user the conversation was with, is recorded with the memory (as a
        keyed pseudonym): erasing that user deletes it.
        Raises :class:`~confide.errors.ValidationError` for a bad app id or messages.
        """
        return _run(
            self.apps.end_conversation(
                account_id=account_id,
                app_id=app_id,
                conversation_id=conversation_id,
                messages=[m if isinstance(m, AppMessage) else dict(m) for m in messages],
                reason=reason,
                user_id=user_id,
            )
        )

    def app_context(self, app_id: str, *, account_id: str = DEFAULT_ACCOUNT) -> str:
        """The app's system message: its memories, newest first (``""`` when none)."""
        return self.apps.context(account_id, app_id)

    def usage_since_last_poll(
        self, *, account_id: str = DEFAULT_ACCOUNT, caller: str = "sdk"
    ) -> UsageReport:
        """LLM usage totals per operation since this caller's previous poll."""
        return self.usage.since_last_poll(account_id, caller)

    def close(self) -> None:
        """Flush access times, release the storage and the embedder's connections."""
        self.components.close()
        if self._closes_engine and not self.components.owns_engine:
            self.engine.close()
            close_embedder = getattr(self.embedder, "close", None)
            if callable(close_embedder):
                close_embedder()

    def __enter__(self) -> Confide:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _process(account_id: str, agent: str = DEFAULT_AGENT) -> Principal:
    """Who an embedded SDK call acts as: the process itself, the operator of the account it
    names (admin), as the agent the call names; the gate applies that agent's allowlist."""
    return Principal(account_id, Scope.ADMIN, agents=(agent,))


def type_name(value: object) -> str:
    """``str``, ``int``, ... of ``value``, for a TypeError's message."""
    return type(value).__name__


def _run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coroutine`` to completion from blocking code, even inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _awaitable(
    method: Callable[Concatenate[Confide, _P], _T],
) -> Callable[Concatenate[AsyncConfide, _P], Coroutine[Any, Any, _T]]:
    """``method`` of :class:`Confide`, awaited: run in a worker thread, off the event loop
    (the one place the asyncio client decides that), with its signature and docstring."""

    async def call(client: AsyncConfide, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        return await asyncio.to_thread(method, client.sync, *args, **kwargs)

    functools.update_wrapper(call, method)
    return call


class AsyncConfide:
    """:class:`Confide` for asyncio callers: every call awaited, with the same arguments,
    results and errors.

    One implementation: each call is the blocking client's, run in a worker thread, so the
    event loop never waits for the store, the embedder or a model. Build it with
    :meth:`Confide.open_async` or from a client (``Confide.aio``).
    """

    def __init__(self, sync: Confide) -> None:
        self.sync = sync
        """The blocking client whose calls these are."""

    @property
    def engine(self) -> MemoryEngine:
        """The memory engine (blocking; its asyncio face is :class:`AsyncMemoryEngine`)."""
        return self.sync.engine

    warm_up = _awaitable(Confide.warm_up)
    query = _awaitable(Confide.query)
    add = _awaitable(Confide.add)
    search = _awaitable(Confide.search)
    get = _awaitable(Confide.get)
    get_all = _awaitable(Confide.get_all)
    update = _awaitable(Confide.update)
    delete = _awaitable(Confide.delete)
    restore = _awaitable(Confide.restore)
    history = _awaitable(Confide.history)
    export = _awaitable(Confide.export)
    erase = _awaitable(Confide.erase)
    add_message = _awaitable(Confide.add_message)
    messages = _awaitable(Confide.messages)
    retrieve = _awaitable(Confide.retrieve)
    memory_context = _awaitable(Confide.memory_context)
    deliver = _awaitable(Confide.deliver)
    end_app_conversation = _awaitable(Confide.end_app_conversation)
    app_context = _awaitable(Confide.app_context)
    usage_since_last_poll = _awaitable(Confide.usage_since_last_poll)
    close = _awaitable(Confide.close)

    async def aclose(self) -> None:
        """As :meth:`close`."""
        await self.close()

    async def __aenter__(self) -> AsyncConfide:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
