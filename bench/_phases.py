"""Where a ``memory_query``'s wall time goes: phases timed on the caller's thread and the
query path's workers.

cProfile (``scale.py --profile``) counts work; it cannot tell what a query waited for, and
its own overhead hides the embedding. This times named steps of the real query path with
``time.perf_counter`` while the questions are answered as in the timed pass (embedding
included): each step's wall time per query, summed over its calls, split by thread (the
caller's, which a user waits on, or a worker's, which overlaps it). ``wait`` is the caller
blocked on a worker's result (the lexical side, the edges, the ``context: all`` listing).

Beside each step's wall time, the CPU time its thread spent in it (``time.thread_time``): a
step whose CPU time is close to its wall time was slowed, if at all, by running slower (the
other core busy with the workers and the database), one whose CPU time is far below it
waited (for a core, the interpreter lock or a worker).

The interpreter's garbage collections during the pass are timed too (``gc.callbacks``), as
``gc (generation N)`` on the thread that ran them: a collection holds the interpreter lock, so
while it runs no other Python thread of the process moves either. Its time also counts in
the step it interrupted.

The steps are wrapped by replacing the attributes for the pass and restoring them after; the
wrappers cost about a microsecond a call, so the phases add up to a little less than the
total. Bench code only: the product has no timing hooks.
"""

from __future__ import annotations

import functools
import gc
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

from confide.client import Confide
from confide.engine.delta import EngineDeltas
from confide.retrieval import access, memory_query, query, source

Phase = tuple[object, str, str]
"""(owner of the attribute, attribute name, phase name)."""

PHASES: tuple[Phase, ...] = (
    (query, "embedded_question", "question (common names)"),
    (source.StorageCandidateSource, "lexical_candidates", "lexical search"),
    (source.StorageCandidateSource, "dense_candidates", "vector search"),
    (source.StorageCandidateSource, "hydrate", "read + decrypt"),
    (source.StorageCandidateSource, "neighbours", "edges"),
    (source.StorageCandidateSource, "with_dense", "neighbours' cosine"),
    (query, "rank", "rank"),
    (memory_query.MemoryQueryService, "_context_all", "context: all listing"),
    (memory_query.MemoryQueryService, "_related", "related"),
    (memory_query.MemoryQueryService, "_render", "render"),
    (EngineDeltas, "has_unseen_delta", "delta header due?"),
    (memory_query.MemoryQueryService, "_header", "delta header"),
    (Future, "result", "wait"),
    (memory_query, "validated", "request checked"),
    (memory_query.MemoryQueryService, "_scope", "scope"),
    (query, "hand", "tasks handed"),
    (memory_query, "hand", "tasks handed"),
    (query, "query_features", "question features"),
    (query, "base_scores", "fused scores"),
    (memory_query.MemoryQueryService, "_searched", "search event"),
    (access.AccessTracker, "record", "access noted"),
    (memory_query, "MemoryQueryResult", "answer built"),
)
OUTSIDE = "caller: outside the steps"
"""A query's total less its caller steps: what no step above timed on the caller's thread."""


class _Clock:
    def __init__(self) -> None:
        self.query = -1
        self.spent: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.cpu: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._lock = threading.Lock()

    def add(self, name: str, seconds: float, cpu_seconds: float) -> None:
        if self.query < 0:
            return
        side = "caller" if threading.current_thread() is threading.main_thread() else "worker"
        with self._lock:
            self.spent[self.query][f"{side}: {name}"] += seconds * 1000
            self.cpu[self.query][f"{side}: {name}"] += cpu_seconds * 1000


def _timed(fn: Callable[..., Any], name: str, clock: _Clock) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            clock.add(name, time.perf_counter() - t0, time.thread_time() - c0)

    return timed


class _TimedEmbedder:
    """The service's embedder, its ``embed_one`` timed as the ``embedding`` phase."""

    def __init__(self, inner: Any, clock: _Clock) -> None:
        self.model_id = inner.model_id
        self.dims = inner.dims
        self.embed = inner.embed
        self.embed_one = _timed(inner.embed_one, "embedding", clock)


@contextmanager
def _collections_timed(clock: _Clock) -> Iterator[None]:
    """Each garbage collection in the block added to ``clock`` as ``gc (generation N)``."""
    started: dict[int, tuple[float, float]] = {}

    def timed(phase: str, info: dict[str, int]) -> None:
        thread = threading.get_ident()
        if phase == "start":
            started[thread] = (time.perf_counter(), time.thread_time())
            return
        begun = started.pop(thread, None)
        if begun is not None:
            clock.add(
                f"gc (generation {info['generation']})",
                time.perf_counter() - begun[0],
                time.thread_time() - begun[1],
            )

    gc.callbacks.append(timed)
    try:
        yield
    finally:
        gc.callbacks.remove(timed)


@contextmanager
def _wrapped(clock: _Clock) -> Iterator[None]:
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in PHASES]
    try:
        for (owner, attr, name), (_, _, fn) in zip(PHASES, saved, strict=True):
            setattr(owner, attr, _timed(fn, name, clock))
        yield
    finally:
        for owner, attr, fn in saved:
            setattr(owner, attr, fn)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def query_phases(
    app: Confide, asked: Iterable[str], request: Callable[[str], dict[str, Any]]
) -> dict[str, Any]:
    """Answer each question once with the phases timed.

    Returns the total's p50/p95 and, per phase (``caller: ...`` / ``worker: ...``), the
    median and p95 of its milliseconds per query (a query without the phase counts 0) and
    the median of its thread's CPU milliseconds, and, for the slowest twentieth of the
    queries, the median of each caller phase.
    """
    clock = _Clock()
    service = app.memory_query
    real = service.embedder
    totals: list[float] = []
    if real is not None:
        service.embedder = _TimedEmbedder(real, clock)
    try:
        with _wrapped(clock), _collections_timed(clock):
            for i, question in enumerate(asked):
                clock.query = i
                t0 = time.perf_counter()
                app.query(request(question))
                totals.append((time.perf_counter() - t0) * 1000)
                clock.query = -1
    finally:
        service.embedder = real
    for i, total in enumerate(totals):
        # Collections happen within steps: their time is in the step's already.
        timed = sum(
            v
            for n, v in clock.spent[i].items()
            if n.startswith("caller: ") and not n.startswith("caller: gc ")
        )
        clock.spent[i][OUTSIDE] = max(0.0, total - timed)
    names = sorted({name for spent in clock.spent.values() for name in spent})
    per = {n: [clock.spent[i].get(n, 0.0) for i in range(len(totals))] for n in names}
    cpu = {n: [clock.cpu[i].get(n, 0.0) for i in range(len(totals))] for n in names}
    slow = sorted(range(len(totals)), key=lambda i: -totals[i])[: max(1, len(totals) // 20)]
    return {
        "queries": len(totals),
        "p50_ms": round(statistics.median(totals), 2),
        "p95_ms": round(_pct(totals, 0.95), 2),
        "phases": {
            n: {
                "p50_ms": round(statistics.median(v), 2),
                "p95_ms": round(_pct(v, 0.95), 2),
                "cpu_p50_ms": round(statistics.median(cpu[n]), 2),
            }
            for n, v in sorted(per.items(), key=lambda kv: -statistics.median(kv[1]))
        },
        "slowest_twentieth": {
            "total_ms": round(statistics.median(totals[i] for i in slow), 2),
            **{
                n: round(statistics.median(per[n][i] for i in slow), 2)
                for n in names
                if n.startswith("caller: ")
            },
        },
    }


def print_phases(found: dict[str, Any]) -> None:
    """The phases as a small table (milliseconds per query)."""
    print(
        f"phases of {found['queries']} queries (total p50 {found['p50_ms']:.2f}, "
        f"p95 {found['p95_ms']:.2f} ms); per query, summed over calls:"
    )
    slow = found["slowest_twentieth"]
    print(
        f"  {'phase':<38} {'p50':>6} {'p95':>6} {'cpu p50':>8}"
        f"  slowest 5% (total {slow['total_ms']:.2f})"
    )
    for name, v in found["phases"].items():
        tail = f"{slow[name]:>6.2f}" if name in slow else ""
        print(
            f"  {name:<38} {v['p50_ms']:>6.2f} {v['p95_ms']:>6.2f} {v['cpu_p50_ms']:>8.2f}  {tail}"
        )
