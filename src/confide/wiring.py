"""The composition root: :func:`build` makes every component of Confide once, from settings.

The SDK (:class:`~confide.client.Confide`), the HTTP service
(:func:`~confide.server.create_app`), the MCP server, the worker and the CLI all take their
parts from one :class:`Components`, so each exists once per process: one usage ledger and one
metered LLM (every call the process makes is in the ledger), one vector indexer on the
engine, one chat memory, one app memory, one dispatcher and one gate. Doors add only what
their protocol needs (the service its metrics, tasks and keys).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from confide.apps import AppMemories
from confide.chat import ChatMemory
from confide.config import Settings
from confide.conversation.buffer import SessionBuffer, Turn
from confide.conversation.consent import DEFAULT_SENSITIVE_KEYS, ConsentPolicy
from confide.conversation.dedup import DedupPolicy
from confide.conversation.dispatcher import EngineDispatcher, QueryHandler
from confide.conversation.extraction import Extractor, LLMExtractor
from confide.conversation.procedural import ProceduralGate
from confide.conversation.proposals import ProposalStore
from confide.conversation.query_handler import RetrievalQueryHandler
from confide.conversation.summarizer import SessionSummarizer, extractor_from_settings
from confide.embedders import Embedder, configured_embedder
from confide.engine import MemoryEngine
from confide.gate import Gate
from confide.index.vectors import VectorIndexer
from confide.llm.registry import llm_from_settings
from confide.llm.usage import MeteredLLM, UsageLedger
from confide.retrieval.access import AccessTracker
from confide.retrieval.categories import CategoriesConfig, load_categories
from confide.retrieval.memory_query import MemoryQueryService
from confide.retrieval.query import QUERY_WORKERS, use_workers
from confide.storage.apps import SqlAppTables
from confide.storage.base import SERVICE_KEYS_BLINDED
from confide.storage.service.sessions import SqlServiceTables
from confide.workers.conversation_jobs import enqueue_app_resume
from confide.workers.registry import standard_worker
from confide.workers.worker import Worker

__all__ = ["Components", "build"]


@dataclass
class WriteListeners:
    """Who hears of each memory write a tool makes (the service's metrics, when served)."""

    listeners: list[Callable[[str], None]] = field(default_factory=list)

    def __call__(self, action: str) -> None:
        for listener in self.listeners:
            listener(action)


@dataclass(kw_only=True, eq=False)
class Components:
    """Everything :func:`build` made, shared by the doors of one process.

    Attributes:
        settings: the settings it was built from.
        engine: the memory engine (its vector indexer added once, here).
        owns_engine: whether :meth:`close` closes the engine (it opened it).
        embedder: the embedder (``None``: lexical retrieval only).
        usage: the usage ledger every LLM call is metered into.
        llm: the configured model behind the ledger (``None``: none configured).
        extractor: turns a finished conversation into memories (the LLM, else offline).
        access: records when memories were read (for ranking).
        categories: the categories and agent allowlists.
        memory_query: hybrid retrieval (``memory_query``, ``search``).
        query: the ``memory_query`` tool's handler.
        chat: the chat memory (messages, history, summaries, subject facts).
        apps: the app memories.
        buffer: the in-process buffer of live call sessions' turns.
        dedup: the near-duplicate policy of every write path.
        proposals: the consent queue.
        consent: what needs consent before it is stored.
        dispatcher: runs the memory tools.
        gate: the rules every door's call passes.
        summarizer: distils an ended call into memories.
        on_write: listeners told of each tool write.
    """

    settings: Settings
    engine: MemoryEngine
    owns_engine: bool
    embedder: Embedder | None
    usage: UsageLedger
    llm: MeteredLLM | None
    extractor: Extractor
    access: AccessTracker
    categories: CategoriesConfig
    memory_query: MemoryQueryService
    query: QueryHandler
    chat: ChatMemory
    apps: AppMemories
    buffer: SessionBuffer
    dedup: DedupPolicy
    proposals: ProposalStore
    consent: ConsentPolicy
    dispatcher: EngineDispatcher
    gate: Gate
    summarizer: SessionSummarizer
    on_write: WriteListeners
    _closed: bool = field(default=False, init=False, repr=False)

    @property
    def sensitive_keys(self) -> tuple[str, ...]:
        """The keys whose inferred values wait for the user's consent."""
        return sensitive_keys_of(self.settings)

    def worker(self, *, clock: Callable[[], float] | None = None) -> Worker:
        """The standard job worker over these components (``confide worker``, the service's
        worker thread)."""
        return standard_worker(
            self.engine,
            self.settings,
            usage=self.usage,
            embedder=self.embedder,
            llm=self.llm,
            clock=clock,
            conversations=self,
        )

    def close(self) -> None:
        """Flush access times; close the engine and the embedder if :func:`build` opened them.

        A second call does nothing.
        """
        if self._closed:
            return
        self._closed = True
        self.access.close()
        if self.owns_engine:
            self.engine.close()
            close_embedder = getattr(self.embedder, "close", None)
            if callable(close_embedder):
                close_embedder()


QUERY_WORKERS_BY_BACKEND: dict[str, int] = {"postgres": 4}
"""The query path's threads for a store whose reads wait on another process: there more
threads overlap more round trips (four served about a tenth more queries than two at 8 and 32
clients on two ``confide serve`` processes, ``bench/throughput.py``). Other stores get
:data:`confide.retrieval.query.QUERY_WORKERS`. The pool is the process's: in a process that
wires clients of both stores, the last one wired sizes it."""

SIDE_READS_AFTER_EMBEDDING: frozenset[str] = frozenset({"postgres"})
"""Stores whose ``memory_query`` starts its ``context: all`` listing and delta check once the
question is embedded (:attr:`MemoryQueryService.side_reads_after_embedding`): on PostgreSQL
their statements otherwise keep the server busy on the cores the embedding needs (two runs at
100k: the early start +0.34 and +0.44 ms median); on SQLite the early start is the faster
(−0.15 and −0.27 ms median)."""


def sensitive_keys_of(settings: Settings) -> tuple[str, ...]:
    """The configured sensitive keys, else Confide's defaults."""
    if settings.sensitive_keys is None:
        return tuple(sorted(DEFAULT_SENSITIVE_KEYS))
    return tuple(settings.sensitive_keys)


def build(
    settings: Settings | None = None,
    *,
    engine: MemoryEngine | None = None,
    embedder: Embedder | None = None,
    extractor: Extractor | None = None,
    query: QueryHandler | None = None,
) -> Components:
    """Make Confide's components from ``settings`` (from the environment when omitted).

    Args:
        settings: the configuration (for a given ``engine``, by default the engine's).
        engine: an open engine to build on (the caller closes it); by default one is opened
            from ``settings`` with the configured embedder and closed by
            :meth:`Components.close`.
        embedder: the embedder (by default the configured one when the engine is opened
            here, none for a given engine).
        extractor: overrides the end-of-session extractor chosen from ``settings``.
        query: overrides the ``memory_query`` tool's handler.

    Raises:
        ConfigurationError: a configuration that cannot work (see :meth:`MemoryEngine.open`).
    """
    owns_engine = engine is None
    if engine is None:
        settings = settings or Settings()
        embedder = embedder if embedder is not None else configured_embedder(settings)
        engine = MemoryEngine.open(settings)
    settings = settings or engine.settings
    if embedder is not None:
        _index_vectors(engine, embedder, settings)
    usage = UsageLedger(
        SqlAppTables(engine.storage),
        prices=settings.llm_prices,
        budget_units=settings.llm_budget_units,
    )
    configured = llm_from_settings(settings)
    llm = None if configured is None else MeteredLLM(configured, usage)
    if extractor is None:
        extractor = extractor_from_settings(settings) if llm is None else LLMExtractor(llm)
    access = AccessTracker(engine.storage)
    use_workers(QUERY_WORKERS_BY_BACKEND.get(engine.storage.name, QUERY_WORKERS))
    memory_query = MemoryQueryService(
        engine,
        load_categories(settings.categories_file),
        embedder=embedder,
        weights=settings.ranking,
        access=access,
        deltas=engine,
        ops=engine,
        side_reads_after_embedding=engine.storage.name in SIDE_READS_AFTER_EMBEDDING,
    )
    handler: QueryHandler = query or RetrievalQueryHandler(memory_query)
    categories = (
        handler.service.categories
        if isinstance(handler, RetrievalQueryHandler)
        else memory_query.categories
    )
    sensitive = sensitive_keys_of(settings)
    dedup = DedupPolicy(
        text_threshold=settings.dedup_text_threshold,
        cosine_threshold=settings.dedup_cosine_threshold,
        embedder=embedder,
    )
    tables = SqlServiceTables(engine.storage.database)
    proposals = ProposalStore(engine, tables, ttl=timedelta(days=settings.proposal_ttl_days))
    if engine.meta_value(SERVICE_KEYS_BLINDED) != "done":
        # An older store: proposals and session events still hold keys in clear.
        proposals.upgrade_keys()
    consent = ConsentPolicy.of(sensitive, min_confidence=settings.consent_min_confidence)
    buffer = SessionBuffer(
        on_turn=lambda account, user, turn: _classified(engine, account, user, turn)
    )
    on_write = WriteListeners()

    def user_turns(session_id: str) -> Sequence[str]:
        """What the user said in a live call (in memory only), for the consent signals."""
        live = buffer.get(session_id)
        return [] if live is None else [t.summary for t in live.turns if t.speaker == "user"]

    chat = ChatMemory(engine, settings=settings, embedder=embedder, llm=llm, ledger=usage)
    # Work the budget defers is queued for a worker (``confide worker``) to resume.
    apps = AppMemories(
        engine,
        settings=settings,
        llm=llm,
        ledger=usage,
        on_defer=lambda account_id: enqueue_app_resume(engine, account_id=account_id),
    )
    dispatcher = EngineDispatcher(
        engine,
        dedup=dedup,
        proposals=proposals,
        sensitive_keys=sensitive,
        tool_log=tables,
        on_write=on_write,
        query=handler,
        consent=consent,
        procedural=ProceduralGate(min_confidence=settings.procedural_min_confidence),
        user_turns=user_turns,
    )
    return Components(
        settings=settings,
        engine=engine,
        owns_engine=owns_engine,
        embedder=embedder,
        usage=usage,
        llm=llm,
        extractor=extractor,
        access=access,
        categories=categories,
        memory_query=memory_query,
        query=handler,
        chat=chat,
        apps=apps,
        buffer=buffer,
        dedup=dedup,
        proposals=proposals,
        consent=consent,
        dispatcher=dispatcher,
        gate=Gate(engine, dispatcher, categories, chat=chat, apps=apps, proposals=proposals),
        summarizer=SessionSummarizer(
            engine,
            proposals=proposals,
            extractor=extractor,
            settings=settings,
            dedup=dedup,
            sensitive_keys=sensitive,
        ),
        on_write=on_write,
    )


def _index_vectors(engine: MemoryEngine, embedder: Embedder, settings: Settings) -> None:
    """Give ``engine`` a vector indexer over ``embedder`` unless it has one already (two
    components over one engine index each memory once)."""
    for indexer in engine.indexers:
        if isinstance(indexer, VectorIndexer) and (
            indexer.embedder is embedder or indexer.embedder.model_id == embedder.model_id
        ):
            return
    engine.add_indexer(
        VectorIndexer(
            engine.storage,
            embedder,
            link_top_k=settings.link_top_k,
            link_min=settings.link_min,
            run_context=settings.run_context,
        )
    )


def _classified(engine: MemoryEngine, account_id: str, user_id: str, turn: Turn) -> None:
    """A turn's intent as an operational event (node ``hotpath``, op ``classify``)."""
    engine.emit_op(
        "hotpath",
        "classify",
        account_id=account_id,
        user_id=user_id,
        category=str(turn.intent),
        status=turn.speaker,
    )
