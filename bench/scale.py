"""``memory_query`` latency at 10k and 100k memories for one user among many, both backends.

    python bench/scale.py [--sizes 10000,100000] [--backends sqlite,postgres]
                          [--queries 500] [--pool 5000] [--json OUT]
                          [--kernels numba|numpy] [--ingest 2000] [--ingest-batch 32]
                          [--profile OUT] [--phases] [--defer-hnsw]
                          [--compare NAME=VALUE ...]

Memory text is real conversation text (``--text locomo``, the default): every LoCoMo turn
once, then distinct splices of two turns (the first half of one, the second half of another),
so no two memories share a text or a vector. ``--text templates`` uses template sentences
instead. A pool of ``--pool`` distinct texts is embedded once with the local MiniLM and
cached under bench/results/; every further row reuses a pool vector with small noise of its
own, renormalised (the queries are embedded for real).

Rows go through the engine's normal write path (``MemoryEngine.store_many`` with the vector
indexer, batches of 1000, a session ``run_id`` every 20 rows so adjacency edges and the run
context exist) with ``link_top_k=0``: the store-time similarity search per row would only
slow the set-up, and ``related_to`` edges carry no weight in the default ranking. The
queried user owns ``size`` memories; 20 other users own ``size/10`` more between them. After
the load the store is settled as between imports (``_engine_side.settle``: statistics,
SQLite's WAL folded, PostgreSQL vacuumed) so no load aftermath runs during the timed queries;
on SQLite the same holds for the index snapshot the warm-up's first load of the user starts
(written, then the WAL folded, before the timed queries).

Each query is a fresh question through ``Confide.query`` (agent ``default``, top_k 3 unless
``--top-k``), so its embedding is included; the bare query embedding is timed separately on
the same questions, and the retrieval overhead is p95(total) - p95(embedding).

After the timed queries, a serving process: a child process (``_resident.py``) opens the
filled store as a service would, warms up on the same 20 questions, answers the same timed
questions one after another (this process waiting meanwhile) and reports their p50 and p95:
the latency of a service started on the store, with none of the fill's leftovers in its heap
and all that only a fresh process does (the user's index loaded from its snapshot, the
first checkpoints and flushes of its background threads). Then its ``VmRSS``, split into
its own memory (``RssAnon``: the embedder's two graphs, SQLite's in-process index of the
user, caches) and file pages mapped into it (``RssFile``: SQLite's memory-mapped database
among them, which the kernel may drop). The vector index's size is reported beside it:
SQLite's index as held in this process (sign bits, int8 codes, scales, ids), PostgreSQL's
HNSW index as stored; each over its rows gives the bytes per memory.

Speed must not come from a sloppier index, so the run also checks the vector index against
an exact scan of the vectors the indexer stored (each in the context of the row before it
in its run): ``ann_recall@10`` is the share of the index's top 10 (``vector_search`` for
the queried user) whose true cosine reaches the exact 10th best, averaged over
``--recall-queries`` questions.

Two more columns show what one vector search costs on its own (median, the queried user's
top 40): ``search`` sent back to back, ``s/embed`` sent right after embedding the question,
as a query sends it. On a machine that puts idle CPUs to sleep the second is the larger,
most of all for PostgreSQL, where the search is a round trip to a server that sat idle.

First, ingestion: ``--ingest`` texts go through ``store_many`` (``--ingest-batch`` a call)
with the real embedder and default settings, and the rate is set against the bare
embedder's throughput on the same batches, measured just before (the goal is >= 0.9).

``cold`` is the first query of the user once this process has dropped everything it caches
of them (the SQLite in-process vector index, the unwrapped keys): on SQLite that opens the
user's sealed index snapshot and the rows stored after it (the snapshot the warm queries
wrote in the background is waited for first). ``cold rows`` is the same with the snapshot
deleted, as a store without one loads: every sealed vector of the user opened and quantised.
The line under a SQLite row gives the snapshot's sealed size and what its rewrites cost per
new memory at that size (the size over the new rows that trigger a rewrite).

``--kernels numpy`` makes the SQLite index use its NumPy loops even where numba (the ``fast``
extra) is installed, to compare the two in one environment.

``--profile OUT`` runs the timed questions once more (top_k as timed) under cProfile, after
the timed queries, and writes the statistics to ``OUT`` (pstats; a second size or backend adds its
name to the file) and prints the top 25 by cumulative and by own time. The embedding of the
question is left out: the profiled pass answers each question with the vector the pass just
before it computed (same question, same text embedded). The query path's worker threads are
profiled too (a fresh pool that profiles the tasks it runs, not its idle waits) and merged
with the caller's thread, so a caller waiting on a worker (``Future.result``, a lock's
``acquire``) and the worker's own calls both appear: times add up across threads and
overlap in wall time.

``--defer-hnsw`` (PostgreSQL) loads the rows without the HNSW index and builds it once the
load is done, as a bulk import would: inserting into the graph row by row costs more than
the rest of a store (110 rows/s at 100k), which would make a million memories a fill of
hours on two cores. ``fill/s`` is then the load without the index; the build's seconds are
printed under the row (``hnsw_build_s``).

``--phases`` answers as many fresh questions once more (embedding included) with the query
path's steps timed in wall time on the caller's thread and on the workers (``_phases.py``):
each step's milliseconds per query (p50, p95), the median CPU time its thread spent in it
(a step slowed by running slower keeps its CPU time close to its wall time, one that waited
does not) and, for the slowest twentieth of the queries, the median of each step on the
caller's thread, so a slow tail shows what it waited for.

``--compare NAME=VALUE`` (repeatable) answers as many fresh questions twice each on the same
filled store, once as configured and once with one setting of the query path changed, in
alternating order, and prints both arms' p50/p95 and the median and mean of the paired
differences (``_compare.py``, which lists the settings): the way to tell a lever from this
machine's drift between runs.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _compare import compare, p50_p95, parse_setting, print_comparison
from _engine_side import open_storage, settle
from _locomo_data import DEFAULT_DATA, REPO_ROOT, load_conversations
from _phases import print_phases, query_phases
from _progress import counted, progress_bar
from _resident import measure as measure_resident
from confide.client import Confide
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.embedders import Embedder, l2_normalise
from confide.embedders.local import PRECISIONS, LocalMiniLMEmbedder
from confide.engine import MemoryEngine
from confide.index.vectors import in_context
from confide.retrieval import query as query_path
from confide.storage import FEATURES, vector_kernels
from confide.storage.base import Storage
from confide.storage.migrations import POSTGRES_HNSW_INDEX
from confide.types import MemoryFilter

P = ParamSpec("P")
T = TypeVar("T")

RESULTS = REPO_ROOT / "bench" / "results"
HNSW_BUILD_MEMORY = "6GB"
"""``maintenance_work_mem`` of ``--defer-hnsw``'s build: a million memories' graph (about
2 KB each) must fit, or pgvector finishes it on disk, many times slower."""
ACCOUNT = "scale"
USER = "target"

PEOPLE = [
    "Anna",
    "Ben",
    "Carla",
    "David",
    "Emma",
    "Farid",
    "Grace",
    "Hugo",
    "Ines",
    "Jonas",
    "Keiko",
    "Liam",
    "Maya",
    "Noah",
    "Olga",
]
PLACES = [
    "the lake",
    "Lisbon",
    "the farmers market",
    "grandma's house",
    "the gym",
    "the office",
    "the dentist",
    "the library",
    "Kyoto",
    "the beach",
    "the mountains",
    "the new cafe",
]
ACTIVITIES = [
    "went hiking",
    "started a pottery class",
    "ran a half marathon",
    "adopted a puppy",
    "painted the kitchen",
    "read a novel about sailing",
    "cooked a Thai curry",
    "fixed the bicycle",
    "planted tomatoes",
    "visited an old friend",
    "learned to knit",
    "signed up for a choir",
    "booked a flight",
    "finished a puzzle",
    "baked sourdough",
]
FEELINGS = ["happy", "tired", "proud", "anxious", "relaxed", "excited", "a bit lonely"]
TIMES = ["last weekend", "on Tuesday", "in March", "yesterday", "two weeks ago", "this morning"]
PREFS = ["coffee", "green tea", "jazz", "early mornings", "spicy food", "quiet evenings"]
TEMPLATES = [
    "{p} {a} at {pl} {t}.",
    "{t} {p} {a} and felt {f}.",
    "{p} prefers {pr} and {a} {t}.",
    "I {a} with {p} at {pl}; it was {f}.",
    "{p} said they {a} near {pl} {t}.",
    "Reminder: {p} wants to talk about {pr} after visiting {pl}.",
]
QUESTIONS = [
    "What did {p} do at {pl}?",
    "When did {p} {a2}?",
    "How did I feel after {a}?",
    "Does {p} like {pr}?",
    "Who went to {pl} {t}?",
]


_CORPUS: list[list[str]] = []


def use_locomo_text(path: Path) -> None:
    """Draw memories and questions from real conversation text (LoCoMo turns and questions).

    Template sentences use ~70 distinct words, so every term sits in several percent of the
    memories — far from how people talk, and a worst case for any lexical index.
    """
    data = load_conversations(path)
    turns = [t.text for c in data.conversations for t in c.turns if t.text.strip()]
    _CORPUS[:] = [turns, [q.text for q in data.questions]]


def _distinct_turn_texts(turns: Sequence[str], n: int, seed: int) -> list[str]:
    """``n`` distinct texts of a turn's length: every turn once, then the first half of one
    turn joined to the second half of another, no pair twice.

    A person's memories do not repeat: with texts repeated, the vector index would hold
    copies (pgvector's HNSW keeps identical vectors in one element, a smaller and faster
    graph than real data gives) and every posting list would be inflated alike.
    """
    unique = list(dict.fromkeys(turns))
    count = len(unique)
    if n > count * count:
        raise ValueError(f"at most {count * count} distinct texts from {count} turns")
    words = [t.split() for t in unique]
    order = np.random.default_rng(seed).permutation(count)
    out: list[str] = []
    seen: set[str] = set()
    i = 0
    while len(out) < n:
        head = int(order[i % count])
        lap = i // count  # lap r joins the turn at position j with the one at j + r
        i += 1
        if lap == 0:
            text = unique[head]
        else:
            a, b = words[head], words[int(order[(i - 1 + lap) % count])]
            text = " ".join(a[: (len(a) + 1) // 2] + b[len(b) // 2 :])
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def sentences(n: int, seed: int) -> list[str]:
    """``n`` memory texts (deterministic for a seed): LoCoMo turns, or templates."""
    if _CORPUS:
        return _distinct_turn_texts(_CORPUS[0], n, seed)
    rng = np.random.default_rng(seed)

    def pick(items: Sequence[str]) -> str:
        return str(items[int(rng.integers(len(items)))])

    return [
        pick(TEMPLATES).format(
            p=pick(PEOPLE),
            a=pick(ACTIVITIES),
            pl=pick(PLACES),
            t=pick(TIMES),
            f=pick(FEELINGS),
            pr=pick(PREFS),
        )
        for _ in range(n)
    ]


def questions(n: int) -> list[str]:
    """``n`` distinct questions (LoCoMo's, or from templates)."""
    if _CORPUS:
        asked = list(dict.fromkeys(_CORPUS[1]))
        return [asked[i % len(asked)] for i in range(n)]
    rng = np.random.default_rng(99)
    out: dict[str, None] = {}

    def pick(items: Sequence[str]) -> str:
        return str(items[int(rng.integers(len(items)))])

    while len(out) < n:
        act = pick(ACTIVITIES)
        text = pick(QUESTIONS).format(
            p=pick(PEOPLE),
            pl=pick(PLACES),
            pr=pick(PREFS),
            t=pick(TIMES),
            a=act,
            a2=act.replace("went", "go").replace("ran", "run"),
        )
        out[text] = None
    return list(out)


def pool_vectors(local: Embedder, pool: list[str]) -> np.ndarray:
    """Embeddings of the pool, cached under bench/results/ by content digest."""
    digest = hashlib.sha256("\n".join(pool).encode()).hexdigest()[:16]
    cache = RESULTS / f"scale_pool_{local.model_id}_{len(pool)}_{digest}.npy"
    if cache.is_file():
        cached: np.ndarray = np.load(cache)
        return cached
    print(f"embedding a pool of {len(pool)} sentences once (cached in {cache.name})")
    starts = counted(range(0, len(pool), 256), "embedding the pool", "batches")
    vectors = np.vstack([local.embed(pool[i : i + 256]) for i in starts])
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, vectors)
    return vectors


class PoolEmbedder:
    """Stored rows: pool vectors plus small noise; queries: the real embedder."""

    def __init__(self, local: Embedder, texts: list[str], pool: np.ndarray) -> None:
        self.model_id = local.model_id
        self.dims = local.dims
        self.local = local
        self._pool = pool
        self._row = {t: i for i, t in enumerate(texts)}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.vectors_of([_bare(t) for t in texts])

    def vectors_of(self, values: Sequence[str]) -> np.ndarray:
        """The vectors stored for memories with these values."""
        rows = [self._row.get(v, 0) for v in values]
        out = self._pool[[r % len(self._pool) for r in rows]].copy()
        for k, r in enumerate(rows):
            if r >= len(self._pool):
                noise = np.random.default_rng(r).standard_normal(self.dims).astype(np.float32)
                out[k] += 0.03 * noise
        return l2_normalise(out)

    def embed_one(self, text: str) -> np.ndarray:
        return self.local.embed_one(text)


def _bare(indexed: str) -> str:
    """The value inside the indexed text ``(date) value``."""
    return indexed.split(") ", 1)[1] if indexed.startswith("(") else indexed


RUN = 20
"""Rows of one ``run_id`` (a session), so adjacency edges and the run context exist."""


def stored_vectors(raw: np.ndarray, weight: float) -> np.ndarray:
    """The vectors the indexer stores for rows written in runs of ``RUN`` in order: each
    in the context of the one before it in its run (``CONFIDE_RUN_CONTEXT``)."""
    out = np.array(raw, dtype=np.float32)
    if weight:
        for i in range(len(out)):
            if i % RUN:
                out[i] = in_context(out[i], out[i - 1], weight)
    return out


def ann_recall(
    storage: Storage,
    local: Embedder,
    asked: list[str],
    ids: list[str],
    vectors: np.ndarray,
    k: int = 10,
) -> float:
    """Mean share of the vector index's top ``k`` whose exact cosine reaches the exact k-th.

    ``ids[i]`` is the queried user's memory whose stored vector is ``vectors[i]``. Ties and
    near-duplicates count as found, whichever copy the index returns.
    """
    row_of = {memory_id: i for i, memory_id in enumerate(ids)}
    flt = MemoryFilter(account_id=ACCOUNT, user_id=USER)
    shares: list[float] = []
    for question in counted(asked, "ANN recall", "queries"):
        q = local.embed_one(question)
        exact = vectors @ q
        kth = float(np.partition(exact, -k)[-k])
        hits = storage.vector_search(flt, q, k)
        found = sum(1 for h in hits if float(exact[row_of[h.memory_id]]) >= kth - 1e-6)
        shares.append(found / k)
    return round(float(np.mean(shares)), 4)


SEARCH_K = 40
"""Candidates ``memory_query`` asks the vector index for at ``top_k`` 3."""


def search_timings(storage: Storage, local: Embedder, asked: list[str]) -> tuple[float, float]:
    """Median milliseconds of the queried user's vector search: sent back to back, and sent
    right after embedding the question (as in a query, where the database has sat idle
    while the question was embedded).

    The gap between the two is what the machine charges for waking an idle server, not what
    the search itself costs; the retrieval overhead pays it once per query.
    """
    flt = MemoryFilter(account_id=ACCOUNT, user_id=USER)
    vectors = [local.embed_one(q) for q in counted(asked, "embedding", "queries")]
    back_to_back: list[float] = []
    for vector in counted(vectors, "searches", "searches"):
        t0 = time.perf_counter()
        storage.vector_search(flt, vector, SEARCH_K)
        back_to_back.append((time.perf_counter() - t0) * 1000)
    after_embedding: list[float] = []
    for question in counted(asked, "searches after embedding", "searches"):
        vector = local.embed_one(question)
        t0 = time.perf_counter()
        storage.vector_search(flt, vector, SEARCH_K)
        after_embedding.append((time.perf_counter() - t0) * 1000)
    return (
        round(statistics.median(back_to_back), 2),
        round(statistics.median(after_embedding), 2),
    )


def _request(top_k: int) -> Callable[[str], dict[str, Any]]:
    """The ``memory_query`` request of the bench's user for a question."""

    def request(question: str) -> dict[str, Any]:
        return {
            "agent": "default",
            "account_id": ACCOUNT,
            "user_id": USER,
            "query": question,
            "top_k": top_k,
        }

    return request


def fresh_questions(n: int) -> list[str]:
    """``n`` questions after the warm-up's and the timed ones (fresh while the corpus
    lasts), so a later pass does not find its term counts cached by the timed pass."""
    return questions(20 + 2 * n)[20 + n :]


def _time_queries(app: Confide, asked: Iterable[str], top_k: int) -> list[float]:
    """Milliseconds of ``memory_query`` for each question (query embedding included)."""
    totals: list[float] = []
    ask = _request(top_k)
    for q in asked:
        request = ask(q)
        t0 = time.perf_counter()
        found = app.query(request)
        totals.append((time.perf_counter() - t0) * 1000)
        assert found.results, "a query found nothing"
    return totals


class ReplayEmbedder:
    """The real embedder, remembering each vector it made, so a second pass over the same
    questions spends nothing on embedding them."""

    def __init__(self, inner: Embedder) -> None:
        self.model_id = inner.model_id
        self.dims = inner.dims
        self._inner = inner
        self._seen: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._inner.embed(texts)

    def embed_one(self, text: str) -> np.ndarray:
        vector = self._seen.get(text)
        if vector is None:
            vector = self._seen[text] = self._inner.embed_one(text)
        return vector


class _ProfiledPool(ThreadPoolExecutor):
    """Worker threads that profile the tasks they run (not their idle waits), one profiler
    per thread."""

    def __init__(self) -> None:
        super().__init__(4, thread_name_prefix="confide-query")
        self.profiles: list[cProfile.Profile] = []
        self._mine = threading.local()

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        def profiled() -> T:
            profile: cProfile.Profile | None = getattr(self._mine, "profile", None)
            if profile is None:
                profile = self._mine.profile = cProfile.Profile()
                self.profiles.append(profile)
            profile.enable()
            try:
                return fn(*args, **kwargs)
            finally:
                profile.disable()

        return super().submit(profiled)


def profile_queries(app: Confide, asked: list[str], top_k: int, out: Path) -> None:
    """Profile ``memory_query`` over ``asked`` (embeddings replayed) into ``out``; print the
    top 25 by cumulative and by own time."""
    service = app.memory_query
    real = service.embedder
    assert real is not None
    service.embedder = ReplayEmbedder(real)
    _time_queries(app, asked, top_k)  # embeds each question once, for the replay
    pool = _ProfiledPool()
    shared, query_path._executor = query_path._executor, pool
    main = cProfile.Profile()
    try:
        main.enable()
        _time_queries(app, asked, top_k)
        main.disable()
    finally:
        query_path._executor = shared
        service.embedder = real
        pool.shutdown(wait=True)
    stats = pstats.Stats(main, *pool.profiles)
    out.parent.mkdir(parents=True, exist_ok=True)
    stats.dump_stats(out)
    print(f"profile of {len(asked)} queries (embedding excluded) written to {out}")
    for key in ("cumulative", "tottime"):
        stats.sort_stats(key).print_stats(25)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def settle_index(storage: Storage) -> None:
    """SQLite: write the index snapshot the warm-up's first load started, then fold the WAL.

    The first query after a bulk load opens every row of the user and hands the index to the
    background snapshot writer (tens of MB sealed and written, then checkpointed): a one-off
    after an import, like the load's own WAL, so it is settled before the timed queries."""
    index = getattr(storage, "vector_index", None)
    if index is not None:
        index.flush()
        settle(storage)


def index_footprint(storage: Storage) -> dict[str, Any]:
    """The vector index's rows and bytes: SQLite's in-process index as held in memory now,
    PostgreSQL's HNSW index as stored (``pg_relation_size``)."""
    from confide.storage.postgres import PostgresStorage

    index = getattr(storage, "vector_index", None)
    if index is not None:
        rows, size = index.footprint()
        where = "in process"
    elif isinstance(storage, PostgresStorage):
        import psycopg

        with psycopg.connect(storage.conninfo, autocommit=True) as conn:
            found = conn.execute(
                "SELECT pg_relation_size('embeddings_hnsw'), (SELECT count(*) FROM embeddings)"
            ).fetchone()
        size, rows = (int(found[0]), int(found[1])) if found else (0, 0)
        where = "hnsw on disk"
    else:
        return {}
    return {
        "index_rows": rows,
        "index_bytes": size,
        "index_where": where,
        "index_bytes_per_memory": round(size / rows) if rows else None,
    }


def cold_first_query(app: Confide, question: str, top_k: int) -> dict[str, Any]:
    """Milliseconds of one query after dropping what the process caches of the user: from
    the index snapshot, then (SQLite) from the rows alone, the snapshot deleted; and what a
    rewrite of the snapshot costs per new memory (its sealed size over the rows between two
    rewrites at this size)."""
    storage = app.engine.storage
    index = getattr(storage, "vector_index", None)
    if index is not None:
        index.flush()
        index.clear()
    app.engine.keys.clear()
    cold = round(_time_queries(app, [question], top_k)[0], 2)
    if index is None:
        return {"cold_first_query_ms": cold, "cold_from_rows_ms": None}
    with storage.reader(ACCOUNT) as db:  # type: ignore[attr-defined]
        row = db.run(
            "SELECT length(snapshot), max_seq FROM vector_snapshots "
            "WHERE account_id = ? AND user_id = ?",
            [ACCOUNT, USER],
        ).fetchone()
    snapshot_bytes = int(row[0]) if row else 0
    every = index.snapshot_threshold(int(row[1])) if row else 0
    with storage.transaction() as tx:
        tx.run("DELETE FROM vector_snapshots")
    index.clear()
    app.engine.keys.clear()
    return {
        "cold_first_query_ms": cold,
        "cold_from_rows_ms": round(_time_queries(app, [question], top_k)[0], 2),
        "snapshot_bytes": snapshot_bytes,
        "snapshot_every_rows": every,
        "snapshot_bytes_per_new_memory": round(snapshot_bytes / every) if every else None,
    }


def run(backend: str, size: int, local: Embedder, args: argparse.Namespace) -> dict[str, Any]:
    """Fill one fresh store and time ``memory_query`` on it."""
    others = size // 10
    texts = sentences(size + others, seed=size)
    pool = pool_vectors(local, sentences(args.pool, seed=1))
    # Rows below the pool size get the pool's exact vectors *and* its texts.
    texts[: min(args.pool, len(texts))] = sentences(args.pool, seed=1)[: len(texts)]
    embedder = PoolEmbedder(local, texts, pool)
    with tempfile.TemporaryDirectory(prefix=f"confide-scale-{backend}-") as tmp:
        storage, server = open_storage(backend, Path(tmp))
        key = os.urandom(32)
        settings = Settings(home=Path(tmp) / "home", encryption_key=key.hex(), link_top_k=0)
        engine = MemoryEngine(storage, KeyRing(primary=key), settings=settings)
        app = Confide(engine, embedder=embedder, settings=settings)
        try:
            deferred = backend == "postgres" and args.defer_hnsw
            if deferred:
                drop_hnsw(storage)
            start = time.perf_counter()
            user_ids: list[str] = []
            with progress_bar(f"{backend} {size}: storing", "rows") as progress:
                for lo in range(0, len(texts), 1000):
                    stored = app.engine.store_many(
                        [
                            {
                                "account_id": ACCOUNT,
                                "user_id": USER if i < size else f"other{i % 20}",
                                "key": "note",
                                "value": texts[i],
                                "run_id": f"s{i // RUN}",
                            }
                            for i in range(lo, min(lo + 1000, len(texts)))
                        ]
                    )
                    user_ids += [m.id for m in stored if m.user_id == USER]
                    progress(min(lo + 1000, len(texts)), len(texts))
            fill_s = time.perf_counter() - start
            build_s = build_hnsw(storage) if deferred else None
            # A progress line (stderr): a large size takes a while to fill, and the timed
            # part that follows wants the machine to itself.
            print(
                f"{backend} {size}: {len(texts)} rows stored in {fill_s:.0f} s; timing queries",
                file=sys.stderr,
                flush=True,
            )
            settle(storage)
            asked = questions(args.queries + 20)
            warm, timed = asked[:20], asked[20:]
            for q in counted(warm, "warm-up", "queries"):
                app.query({"agent": "default", "account_id": ACCOUNT, "user_id": USER, "query": q})
            settle_index(storage)
            totals = _time_queries(app, counted(timed, "queries", "queries"), args.top_k)
            wide = (
                _time_queries(app, counted(timed, "queries, top 10", "queries"), 10)
                if args.top_k != 10
                else totals
            )
            footprint = index_footprint(storage)
            target = (
                str(Path(tmp) / "confide.db")
                if backend == "sqlite"
                else str(getattr(storage, "conninfo", ""))
            )
            serving = measure_resident(
                backend,
                target,
                key,
                settings.home,
                (ACCOUNT, USER),
                [*warm, *timed],
                warm=len(warm),
                top_k=args.top_k,
            )
            if args.profile is not None:
                profile_queries(app, timed, args.top_k, _profile_path(args, backend, size))
            phases = (
                query_phases(app, fresh_questions(args.queries), _request(args.top_k))
                if args.phases
                else None
            )
            comparisons = [
                compare(app, setting, fresh_questions(args.queries), _request(args.top_k))
                for setting in args.compare
            ]
            embeds: list[float] = []
            for q in counted(timed, "bare embedding", "queries"):
                t0 = time.perf_counter()
                local.embed_one(q)
                embeds.append((time.perf_counter() - t0) * 1000)
            user_vectors = stored_vectors(embedder.vectors_of(texts[:size]), settings.run_context)
            recall = ann_recall(
                storage, local, timed[: args.recall_queries], user_ids, user_vectors
            )
            search, search_after_embedding = search_timings(storage, local, timed)
            by_ef = {
                str(ef): time_ef_search(
                    storage, ef, app, local, timed, args, (user_ids, user_vectors), embeds
                )
                for ef in (args.ef_search if backend == "postgres" else ())
            }
            cold = cold_first_query(app, timed[0], args.top_k)
        finally:
            app.close()
            if server is not None:
                server.stop()
    p50, p95 = p50_p95(totals)
    e50, e95 = p50_p95(embeds)
    w50, w95 = p50_p95(wide)
    return {
        "top_k": args.top_k,
        "p50_ms": p50,
        "p95_ms": p95,
        "top10_p50_ms": w50,
        "top10_p95_ms": w95,
        "embed_p50_ms": e50,
        "embed_p95_ms": e95,
        "overhead_p95_ms": round(p95 - e95, 2),
        "ann_recall@10": recall,
        "search_p50_ms": search,
        "search_after_embed_p50_ms": search_after_embedding,
        "rows_total": len(texts),
        "rows_user": size,
        "fill_rows_per_s": round(len(texts) / fill_s, 1),
        **({"hnsw_build_s": round(build_s, 1)} if build_s is not None else {}),
        "serving_p50_ms": serving.pop("p50_ms"),
        "serving_p95_ms": serving.pop("p95_ms"),
        "serving_resident_mb": serving,
        **footprint,
        **cold,
        **({"by_ef_search": by_ef} if by_ef else {}),
        **({"phases": phases} if phases is not None else {}),
        **({"comparisons": comparisons} if comparisons else {}),
    }


def _admin(storage: Storage) -> Any:
    """An autocommit connection to a PostgreSQL store's database (DDL outside the pool)."""
    import psycopg

    from confide.storage.postgres import PostgresStorage

    assert isinstance(storage, PostgresStorage)
    return psycopg.connect(storage.conninfo, autocommit=True)


def drop_hnsw(storage: Storage) -> None:
    """PostgreSQL: drop the HNSW index before a bulk load (``--defer-hnsw``)."""
    with _admin(storage) as conn:
        conn.execute("DROP INDEX IF EXISTS embeddings_hnsw")


def build_hnsw(storage: Storage) -> float:
    """PostgreSQL: build the HNSW index the migrations make, over the loaded rows, as a
    bulk import would (the graph built in memory, one parallel worker beside the leader);
    returns the seconds it took."""
    print("building the HNSW index", file=sys.stderr, flush=True)
    with _admin(storage) as conn:
        conn.execute(f"SET maintenance_work_mem = '{HNSW_BUILD_MEMORY}'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        start = time.perf_counter()
        conn.execute(POSTGRES_HNSW_INDEX)
        return time.perf_counter() - start


def _profile_path(args: argparse.Namespace, backend: str, size: int) -> Path:
    """``--profile``'s file, named after the backend and size when the run has several."""
    out: Path = args.profile
    several = len(args.backends.split(",")) * len(args.sizes.split(",")) > 1
    return out.with_name(f"{out.stem}-{backend}-{size}{out.suffix}") if several else out


def time_ef_search(
    storage: Storage,
    ef_search: int,
    app: Confide,
    local: Embedder,
    timed: list[str],
    args: argparse.Namespace,
    user: tuple[list[str], Any],
    embeds: list[float],
) -> dict[str, Any]:
    """The timed queries, ANN recall and searches again on the same filled PostgreSQL store,
    through a second pool whose connections search with ``hnsw.ef_search = ef_search``."""
    from confide.storage.postgres import PostgresStorage

    assert isinstance(storage, PostgresStorage)
    other = PostgresStorage(storage.conninfo, max_size=8, ef_search=ef_search, features=FEATURES)
    # Its own key store connection (the same tables): closing the twin leaves the app's open.
    engine = MemoryEngine(other, app.engine.keyring, settings=app.settings)
    twin = Confide(engine, embedder=app.embedder, settings=app.settings)
    try:
        for q in timed[:20]:
            twin.query({"agent": "default", "account_id": ACCOUNT, "user_id": USER, "query": q})
        totals = _time_queries(
            twin, counted(timed, f"ef_search {ef_search}", "queries"), args.top_k
        )
        user_ids, user_vectors = user
        recall = ann_recall(other, local, timed[: args.recall_queries], user_ids, user_vectors)
        search, search_after_embedding = search_timings(other, local, timed)
    finally:
        twin.close()
    p50, p95 = p50_p95(totals)
    return {
        "p50_ms": p50,
        "p95_ms": p95,
        "overhead_p95_ms": round(p95 - p50_p95(embeds)[1], 2),
        "ann_recall@10": recall,
        "search_p50_ms": search,
        "search_after_embed_p50_ms": search_after_embedding,
    }


def ingestion_ratio(
    backend: str, local: Embedder, texts: Sequence[str], batch: int
) -> dict[str, Any]:
    """Ingestion through the engine's write path against the bare embedder, same batches.

    ``texts`` are stored with the real embedder (no pool vectors), ``batch`` a
    ``store_many`` call, with the default settings (store-time linking included). Each batch
    is embedded bare right before it is stored, so both sides of the ratio see the same
    machine load: a machine whose speed drifts by a tenth over a minute moved a ratio taken
    from two consecutive passes by as much.
    """
    batches = [list(texts[i : i + batch]) for i in range(0, len(texts), batch)]
    bare_s = store_s = 0.0
    with tempfile.TemporaryDirectory(prefix=f"confide-ingest-{backend}-") as tmp:
        storage, server = open_storage(backend, Path(tmp))
        key = os.urandom(32)
        settings = Settings(home=Path(tmp) / "home", encryption_key=key.hex())
        engine = MemoryEngine(storage, KeyRing(primary=key), settings=settings)
        app = Confide(engine, embedder=local, settings=settings)
        try:
            for n, b in enumerate(counted(batches, f"{backend} ingest", "batches")):
                start = time.perf_counter()
                local.embed(b)
                bare_s += time.perf_counter() - start
                start = time.perf_counter()
                app.engine.store_many(
                    [
                        {
                            "account_id": ACCOUNT,
                            "user_id": USER,
                            "key": "note",
                            "value": text,
                            "run_id": f"s{n}",
                        }
                        for text in b
                    ]
                )
                store_s += time.perf_counter() - start
        finally:
            app.close()
            if server is not None:
                server.stop()
    bare, stored = len(texts) / bare_s, len(texts) / store_s
    return {
        "texts": len(texts),
        "batch": batch,
        "embedder_per_s": round(bare, 1),
        "ingest_per_s": round(stored, 1),
        "ingest_vs_embedder": round(stored / bare, 3),
    }


def _setting(text: str) -> str:
    """``--compare``'s value, checked (argparse reports the ``ValueError``'s message)."""
    try:
        parse_setting(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Run and print the table (and write ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--queries", type=int, default=500, help="timed questions per size (p95 is the 25th worst)"
    )
    parser.add_argument(
        "--top-k", type=int, default=3, help="memory_query top_k (3 is the API default)"
    )
    parser.add_argument("--pool", type=int, default=5000)
    parser.add_argument(
        "--precision",
        choices=sorted(PRECISIONS),
        default="int8",
        help="the local MiniLM graph (CONFIDE_EMBEDDER_PRECISION; int8 is the default)",
    )
    parser.add_argument(
        "--recall-queries", type=int, default=100, help="questions for the ANN recall check"
    )
    parser.add_argument("--json", type=Path, default=None, dest="json_out")
    parser.add_argument(
        "--text",
        choices=("locomo", "templates"),
        default="locomo",
        help="memory texts: real conversation turns (default) or template sentences",
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo-format file")
    parser.add_argument(
        "--ingest",
        type=int,
        default=2000,
        help="texts stored with the real embedder to compare ingestion with the bare "
        "embedder's batch throughput (0: skip)",
    )
    parser.add_argument("--ingest-batch", type=int, default=32, help="texts per store_many")
    parser.add_argument(
        "--kernels",
        choices=("numba", "numpy"),
        default="numba",
        help="SQLite vector index loops: numba when installed (the default), or NumPy's",
    )
    parser.add_argument(
        "--ef-search",
        default="",
        help="PostgreSQL: hnsw.ef_search values timed again on the same filled store, each "
        "through its own pool (comma-separated; the main row uses CONFIDE_POSTGRES_EF_SEARCH)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="OUT",
        help="profile the timed queries (their embedding excluded) with cProfile: pstats "
        "file OUT, and the top 25 by cumulative and by own time printed",
    )
    parser.add_argument(
        "--defer-hnsw",
        action="store_true",
        help="PostgreSQL: load without the HNSW index and build it after the load, as a bulk "
        "import would (each insert into the graph otherwise costs more than the rest of a "
        "store; the build's seconds are reported)",
    )
    parser.add_argument(
        "--phases",
        action="store_true",
        help="answer as many fresh questions again with the query path's steps timed on "
        "the caller's thread and the workers (_phases.py) and print where the time goes",
    )
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        type=_setting,
        metavar="NAME=VALUE",
        help="answer as many fresh questions twice each, as configured and with this query "
        "path setting, alternately, and print the paired difference (_compare.py lists the "
        "settings; repeatable)",
    )
    args = parser.parse_args(argv)
    args.ef_search = [int(v) for v in args.ef_search.split(",") if v]
    vector_kernels.use_numba(args.kernels == "numba")
    if args.kernels == "numba" and not vector_kernels.numba_available():
        print("numba is not installed (the `fast` extra): the SQLite index uses NumPy")
    if args.text == "locomo":
        use_locomo_text(args.data)
    local = LocalMiniLMEmbedder(precision=args.precision)
    local.embed_one("warm up")
    out: dict[str, dict[str, Any]] = {}
    if args.ingest:
        texts = sentences(args.ingest, seed=7)
        print(f"{'backend':<9} {'texts':>6} {'batch':>5} {'embedder/s':>10} {'ingest/s':>9} ratio")
        for backend in args.backends.split(","):
            m = ingestion_ratio(backend, local, texts, args.ingest_batch)
            out.setdefault(backend, {})["ingestion"] = m
            print(
                f"{backend:<9} {m['texts']:>6} {m['batch']:>5} {m['embedder_per_s']:>10.1f} "
                f"{m['ingest_per_s']:>9.1f} {m['ingest_vs_embedder']:.3f}",
                flush=True,
            )
    print(
        f"{'backend':<9} {'size':>7} {'p50':>7} {'p95':>7} {'emb p95':>8} {'overhead':>8} "
        f"{'k10 p95':>8} {'ANN r@10':>8} {'search':>7} {'s/embed':>7} {'cold':>7} "
        f"{'cold rows':>9} fill/s"
    )
    for backend in args.backends.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            m = run(backend, size, local, args)
            out.setdefault(backend, {})[str(size)] = m
            print(
                f"{backend:<9} {size:>7} {m['p50_ms']:>7.2f} {m['p95_ms']:>7.2f} "
                f"{m['embed_p95_ms']:>8.2f} {m['overhead_p95_ms']:>8.2f} "
                f"{m['top10_p95_ms']:>8.2f} {m['ann_recall@10']:>8.3f} "
                f"{m['search_p50_ms']:>7.2f} {m['search_after_embed_p50_ms']:>7.2f} "
                f"{m['cold_first_query_ms']:>7.2f} "
                f"{_ms(m['cold_from_rows_ms']):>9} "
                f"{m['fill_rows_per_s']}",
                flush=True,
            )
            for ef, e in m.get("by_ef_search", {}).items():
                print(
                    f"{'':<9} ef_search {ef}: p50 {e['p50_ms']:.2f} p95 {e['p95_ms']:.2f} "
                    f"overhead {e['overhead_p95_ms']:.2f} ANN r@10 {e['ann_recall@10']:.3f} "
                    f"search {e['search_p50_ms']:.2f} s/embed {e['search_after_embed_p50_ms']:.2f}",
                    flush=True,
                )
            if m.get("index_bytes_per_memory") is not None:
                rss = m["serving_resident_mb"]
                print(
                    f"{'':<9} serving process: p50 {m['serving_p50_ms']:.2f} p95 "
                    f"{m['serving_p95_ms']:.2f}; resident {rss.get('VmRSS')} MB (own "
                    f"{rss.get('RssAnon')}, file-backed {rss.get('RssFile')}); vector index "
                    f"({m['index_where']}) {m['index_bytes'] / 1e6:.1f} MB for "
                    f"{m['index_rows']} rows: {m['index_bytes_per_memory']} bytes per memory",
                    flush=True,
                )
            if m.get("hnsw_build_s") is not None:
                print(f"{'':<9} HNSW index built after the load in {m['hnsw_build_s']:.0f} s")
            if m.get("phases"):
                print_phases(m["phases"])
            for found in m.get("comparisons", []):
                print_comparison(found)
            if m.get("snapshot_every_rows"):
                print(
                    f"{'':<9} index snapshot {m['snapshot_bytes'] / 1e6:.1f} MB sealed, "
                    f"rewritten every {m['snapshot_every_rows']} new memories: "
                    f"{m['snapshot_bytes_per_new_memory'] / 1e3:.1f} KB per new memory",
                    flush=True,
                )
    if args.json_out is not None:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
