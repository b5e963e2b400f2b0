"""One setting of the query path against the store as configured, question by question.

This machine's speed drifts by a fifth between runs (the bare embedder's p50 alone), more than
most single changes move a query, so two separate runs cannot tell a lever from the drift.
Here each question is answered twice in a row, once as configured and once with one setting
changed, the order swapped from one question to the next (AB, BA, AB...), so the drift and
the second answer's warmer caches fall on both arms alike. The median and mean of the paired
differences (changed minus configured) say what the setting moves; each arm's p50 and p95
are printed beside them.

Settings (``scale.py --compare NAME=VALUE``, repeatable):

- ``postings-budget``: postings one lexical search scores at most
  (:attr:`confide.storage.sql.LexicalTuning.postings_budget`);
- ``sample-over-budget``: ``off`` scores every posting of a term that alone exceeds the
  budget, as before such a term was scored on a fixed sample of the budget's size
  (:attr:`~confide.storage.sql.LexicalTuning.sample_over_budget`);
- ``one-term``: ``grouped`` adds up a one-term search's postings by memory as a search of
  more terms does, as before such a search scored each posting on its own
  (:class:`confide.storage.sql.Bm25Score`);
- ``common-min``: postings above which a term is left out of a lexical search when rarer
  ones exist (:attr:`~confide.storage.sql.LexicalTuning.common_min`);
- ``query-workers``: threads of the query path's pool; ``0`` runs its tasks on the caller's
  thread, one after the other;
- ``switch-interval``: the interpreter's thread switch interval in seconds
  (``sys.setswitchinterval``; 0.005 by default);
- ``dense-limit``, ``lexical-limit``, ``hydrate-top``: the query plan's ceilings
  (:class:`confide.retrieval.query.QueryPlan`; ``memory_query`` sizes each to the answer
  under its ceiling);
- ``early-expand``: the best lexical hits whose edges are read while the question is
  embedded (:attr:`confide.retrieval.query.QueryPlan.early_expand_top`; all the seeds the
  query follows by default), the other seeds' edges read after the embedding;
- ``lexical-hydrate``: the best lexical hits read in full on the worker while the question
  is embedded (:attr:`confide.retrieval.query.QueryPlan.lexical_hydrate_top`; as many as the
  plan reads in full by default), the others the fused order needs read by the caller;
- ``head-chunks``: chunks of the SQLite vector index's re-scored shortlist put in order
  before the filter is asked (:attr:`confide.storage.sqlite_vectors.SqliteVectorIndex.head_chunks`;
  ``0`` sorts all of it);
- ``partitions``: ``off`` has the SQLite vector index read every row's sign bits, as before
  a large owner's rows were partitioned into lists
  (:attr:`confide.storage.sqlite_vectors.SqliteVectorIndex.partitions`);
- ``delta-header``: ``caller`` asks whether a delta header is due on the caller's thread,
  after the answer, instead of on a worker while the question is embedded;
- ``common-names``: ``two-reads`` has the check for the owner's common names (before the
  question is embedded) read the owner's figures as lexical search does (the document count
  with its length sample), then the terms' counts, as before the check read a small owner's
  count and term counts together; only an owner below
  :attr:`~confide.storage.sql.LexicalTuning.stats_min_cached` memories, whose counts are not
  cached, takes either read on each question (``bench/scale.py --sizes 800``);
- ``side-reads``: when the ``context: all`` listing and the delta header's check start on
  workers, ``with-question`` or ``after-embedding``
  (:attr:`confide.retrieval.memory_query.MemoryQueryService.side_reads_after_embedding`;
  the wiring picks by store);
- ``free-read``: ``lexical-search`` or ``neighbourhood`` answers that storage read from a
  recording of the same call, made when every question is first answered before the timed
  ones: what a query would gain were the read free (an upper bound for making it faster);
  ``embedding`` does so for the question's vector, and several joined by ``+``
  (``lexical-search+neighbourhood``) are all free in the changed arm;
- ``waiting``: ``idle`` has a thread that needs a task it handed the workers wait for a
  worker to run it, as before; configured, it runs the task itself when no worker has
  started it yet (:class:`confide.retrieval.query.Handed`);
- ``index-loops``: ``before`` has the SQLite vector index re-score its shortlist one row at
  a time and pick the shortlist with NumPy (histogram, running sum, non-zero positions), as
  before the compiled loops read four rows at a time and pick it themselves (needs numba);
- ``plans``: ``before`` has PostgreSQL connections as before some statements reused one
  plan: psycopg prepares every statement after five runs and PostgreSQL plans each run
  afresh (``plan_cache_mode = force_custom_plan``), the statements of
  :meth:`confide.storage.sql.SqlExecutor.run_reusing_plan` included (each connection is
  switched when a read takes it);
- ``precision``: the local MiniLM graph that embeds the question (``int8`` or ``float32``,
  :attr:`confide.embedders.local.LocalMiniLMEmbedder.precision`); both graphs are loaded
  before the timed questions.

Bench code only: the settings are swapped on the live objects and restored afterwards.
"""

from __future__ import annotations

import statistics
import sys
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, ParamSpec, TypeVar

import numpy as np

from confide.client import Confide
from confide.embedders.local import PRECISIONS, LocalMiniLMEmbedder, Precision
from confide.retrieval import query as query_path
from confide.retrieval.ports import DeltaFeed
from confide.storage import vector_kernels
from confide.storage.sql import Bm25Score, SqlExecutor, SqlStorage
from confide.storage.sqlite import SqliteStorage

P = ParamSpec("P")
T = TypeVar("T")

Switch = Callable[[bool], None]
"""Turns the changed setting on (``True``) or back to the configured one (``False``)."""


class InlinePool:
    """A stand-in for the query path's pool that runs each task at once on the caller's
    thread (``query-workers=0``)."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Run ``fn`` now; its result (or exception) in a finished future."""
        done: Future[T] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the caller through the future, as a pool does
            done.set_exception(exc)
        return done

    def shutdown(self, wait: bool = True) -> None:
        """Nothing to stop."""


def _lexical(app: Confide, field: str, value: str) -> tuple[Switch, Callable[[], None]]:
    storage = app.engine.storage
    if not isinstance(storage, SqlStorage):
        raise ValueError(f"{field} needs a SQL store")
    configured = storage.lexical
    typed: dict[str, Any] = {}  # (replace cannot type-check one field named at run time)
    if not isinstance(getattr(configured, field), bool):
        typed[field] = int(value)
    elif value in ("on", "off"):
        typed[field] = value == "on"
    else:
        raise ValueError(f"{field} is on or off")
    changed = replace(configured, **typed)

    def switch(on: bool) -> None:
        storage.lexical = changed if on else configured

    return switch, lambda: None


def _one_term(app: Confide, value: str) -> tuple[Switch, Callable[[], None]]:
    if value != "grouped":
        raise ValueError("one-term must be grouped")
    storage = app.engine.storage
    if not isinstance(storage, SqlStorage):
        raise ValueError("one-term needs a SQL store")
    configured = SqlStorage._bm25_expression

    def grouped(idf: dict[int, float], *, k1: float, b: float, avg_len: float) -> Bm25Score:
        score = configured(idf, k1=k1, b=b, avg_len=avg_len)
        if score.group_by:
            return score
        return Bm25Score(f"SUM({score.sql})", score.params, "GROUP BY t.memory_id")

    def switch(on: bool) -> None:
        # An instance attribute shadows the static method for this store only.
        if on:
            vars(storage)["_bm25_expression"] = grouped
        else:
            vars(storage).pop("_bm25_expression", None)

    return switch, lambda: switch(False)


def _workers(app: Confide, value: str) -> tuple[Switch, Callable[[], None]]:
    count = int(value)
    if count < 0:
        raise ValueError("query-workers must be 0 or more")
    configured = query_path.workers()
    pool: ThreadPoolExecutor | InlinePool = (
        InlinePool() if count == 0 else ThreadPoolExecutor(count, thread_name_prefix="compare")
    )

    def switch(on: bool) -> None:
        query_path._executor = pool if on else configured  # type: ignore[assignment]

    return switch, lambda: pool.shutdown(wait=True)


def _switch_interval(app: Confide, value: str) -> tuple[Switch, Callable[[], None]]:
    configured, changed = sys.getswitchinterval(), float(value)
    if changed <= 0:
        raise ValueError("switch-interval must be positive")

    def switch(on: bool) -> None:
        sys.setswitchinterval(changed if on else configured)

    return switch, lambda: None


def _head_chunks(app: Confide, value: str) -> tuple[Switch, Callable[[], None]]:
    storage = app.engine.storage
    if not isinstance(storage, SqliteStorage):
        raise ValueError("head-chunks needs a SQLite store")
    index = storage.vector_index
    configured, changed = index.head_chunks, int(value)
    if changed < 0:
        raise ValueError("head-chunks must be 0 or more")

    def switch(on: bool) -> None:
        index.head_chunks = changed if on else configured

    return switch, lambda: None


def _partitions(app: Confide, value: str) -> tuple[Switch, Callable[[], None]]:
    if value != "off":
        raise ValueError("partitions must be off")
    storage = app.engine.storage
    if not isinstance(storage, SqliteStorage):
        raise ValueError("partitions needs a SQLite store")
    index = storage.vector_index
    configured = index.partitions

    def switch(on: bool) -> None:
        index.partitions = False if on else configured

    return switch, lambda: switch(False)


def _plan(app: Confide, field: str, value: str) -> tuple[Switch, Callable[[], None]]:
    service = app.memory_query
    configured, n = service.plan, int(value)
    changed = {
        "dense_limit": replace(configured, dense_limit=n),
        "lexical_limit": replace(configured, lexical_limit=n),
        "hydrate_top": replace(configured, hydrate_top=n),
        "early_expand_top": replace(configured, early_expand_top=n),
        "lexical_hydrate_top": replace(configured, lexical_hydrate_top=n),
    }[field]

    def switch(on: bool) -> None:
        service.plan = changed if on else configured

    return switch, lambda: None


class _DeltaOnCaller:
    """The delta feed as it was before the check moved to a worker: no early read, and the
    caller's delivery reads whether anything is due itself."""

    def __init__(self, inner: DeltaFeed) -> None:
        self.inner = inner

    def has_unseen_delta(self, *, account_id: str, user_id: str, reader: str) -> bool:
        return True

    def deliver_delta(self, **kwargs: Any) -> str:
        return self.inner.deliver_delta(**kwargs)


def _delta_header(app: Confide, value: str) -> tuple[Switch, Callable[[], None]]:
    service = app.memory_query
    if value != "caller":
        raise ValueError("delta-header must be caller")
    configured = service.deltas
    if configured is None:
        raise ValueError("delta-header needs a delta feed")
    changed = _DeltaOnCaller(configured)

    def switch(on: bool) -> None:
        service.deltas = changed if on else configured

    return switch, lambda: None


def _side_reads(app: Confide, value: str) -> tuple[Switch, Callable[[], None]]:
    service = app.memory_query
    starts = {"with-question": False, "after-embedding": True}
    if value not in starts:
        raise ValueError("side-reads must be with-question or after-embedding")
    configured, changed = service.side_reads_after_embedding, starts[value]

    def switch(on: bool) -> None:
        service.side_reads_after_embedding = changed if on else configured

    return switch, lambda: None


def _common_names(app: Confide, value: str) -> tuple[Switch, Callable[[], None]]:
    storage = app.engine.storage
    if not isinstance(storage, SqlStorage):
        raise ValueError("common-names needs a SQL store")
    if value != "two-reads":
        raise ValueError("common-names must be two-reads")

    def two_reads(
        account_id: str, user_id: str | None, tokens: Sequence[int], *, share: float, at_least: int
    ) -> set[int]:
        unique = list(dict.fromkeys(tokens))
        if not unique:
            return set()
        with storage._reader(account_id) as db:
            return storage._counted_common_tokens(
                db, account_id, user_id, unique, share=share, at_least=at_least
            )

    def switch(on: bool) -> None:
        if on:
            storage.common_tokens = two_reads  # type: ignore[method-assign]
        else:
            vars(storage).pop("common_tokens", None)

    return switch, lambda: None


def _precision(app: Confide, value: str) -> tuple[Switch, Callable[[], None]]:
    service = app.memory_query
    # The bench's embedder serves stored rows from a pool and questions from ``local``.
    local = getattr(service.embedder, "local", service.embedder)
    if not isinstance(local, LocalMiniLMEmbedder):
        raise ValueError("precision needs the local MiniLM embedder")
    known: dict[str, Precision] = {name: name for name in PRECISIONS}
    if value not in known:
        raise ValueError(f"precision must be one of {', '.join(sorted(known))}")
    configured, changed = local.precision, known[value]

    def switch(on: bool) -> None:
        local.precision = changed if on else configured

    return switch, lambda: None


def _one_row_at_a_time(codes: Any, scales: Any, rows: Any, query: Any, out: Any) -> None:
    # The re-scoring loop as it was: one shortlisted row at a time.
    dims = codes.shape[1]
    for i in range(rows.shape[0]):
        r = rows[i]
        acc = np.float32(0.0)
        for j in range(dims):
            acc += np.float32(codes[r, j]) * query[j]
        out[i] = acc * scales[r]


def _index_loops(app: Confide, value: str) -> tuple[Switch, Callable[[], None]]:
    if value != "before":
        raise ValueError("index-loops must be before")
    if not isinstance(app.engine.storage, SqliteStorage):
        raise ValueError("index-loops needs a SQLite store")
    if not vector_kernels.numba_available():
        raise ValueError("index-loops needs numba (the `fast` extra)")
    import numba

    configured = vector_kernels._chosen()
    if configured is vector_kernels._NUMPY:
        raise ValueError("index-loops compares compiled loops: run without --kernels numpy")
    before = (
        configured[0],
        numba.njit(nogil=True, fastmath=True)(_one_row_at_a_time),
        vector_kernels._within_numpy,
        configured[3],
    )

    def switch(on: bool) -> None:
        vector_kernels._kernels = before if on else configured

    return switch, lambda: switch(False)


def _plans(app: Confide, value: str) -> tuple[Switch, Callable[[], None]]:
    if value != "before":
        raise ValueError("plans must be before")
    from confide.storage import postgres

    storage = app.engine.storage
    if not isinstance(storage, postgres.PostgresStorage):
        raise ValueError("plans needs a PostgreSQL store")
    reusing = postgres._BinaryRows.run_reusing_plan
    scope = storage._scope_session
    state = {"before": False}
    applied: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()

    def scope_and_plans(conn: Any, account_id: str | None) -> None:
        scope(conn, account_id)
        before = state["before"]
        if applied.get(conn, False) != before:
            conn.prepare_threshold = 5 if before else sys.maxsize
            mode = "force_custom_plan" if before else "auto"
            conn.execute(f"SET plan_cache_mode = {mode}")
            applied[conn] = before

    storage._scope_session = scope_and_plans  # type: ignore[method-assign]

    def switch(on: bool) -> None:
        state["before"] = on
        postgres._BinaryRows.run_reusing_plan = SqlExecutor.run if on else reusing  # type: ignore[method-assign,assignment]

    def close() -> None:
        switch(False)
        vars(storage).pop("_scope_session", None)

    return switch, close


_FREE_READS = ("lexical_search", "neighbourhood")
_UNSET = object()


class _Recorded:
    """One storage read recorded while the questions are first answered, then (switched on)
    answered from the recording: what a query would gain were that read free. Bench only."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.answers: dict[str, Any] = {}
        self.serving = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key = repr(
            [a.tobytes() if isinstance(a, np.ndarray) else a for a in args] + sorted(kwargs.items())
        )
        if self.serving and key in self.answers:
            return self.answers[key]
        found = self.real(*args, **kwargs)
        self.answers.setdefault(key, found)
        return found


def _free_read(app: Confide, value: str) -> tuple[Switch, Callable[[], None]]:
    storage = app.engine.storage
    if not isinstance(storage, SqlStorage):
        raise ValueError("free-read needs a SQL store")
    methods = [part.replace("-", "_") for part in value.split("+")]
    if any(m not in (*_FREE_READS, "embedding") for m in methods):
        raise ValueError(
            "free-read must be lexical-search, neighbourhood or embedding, or several joined by +"
        )
    patched: list[tuple[Any, str, _Recorded, Any]] = []
    for method in dict.fromkeys(methods):
        # The question's vector comes from the bench's embedder (stored rows' from its pool).
        owner: Any = storage
        if method == "embedding":
            owner = app.memory_query.embedder
            method = "embed_one"
        recorded = _Recorded(getattr(owner, method))
        patched.append((owner, method, recorded, vars(owner).get(method, _UNSET)))
        setattr(owner, method, recorded)

    def switch(on: bool) -> None:
        for _, _, recorded, _ in patched:
            recorded.serving = on

    def close() -> None:
        for owner, method, _, before in patched:
            if before is _UNSET:
                vars(owner).pop(method, None)
            else:
                setattr(owner, method, before)

    return switch, close


def _waiting(app: Confide, value: str) -> tuple[Switch, Callable[[], None]]:
    if value != "idle":
        raise ValueError("waiting must be idle")
    configured = query_path._run_unstarted

    def switch(on: bool) -> None:
        query_path._run_unstarted = False if on else configured

    return switch, lambda: None


RECORDED_FIRST = frozenset({"free-read"})
"""Settings whose changed arm answers from a recording: every question is answered once,
untimed, before the comparison."""

SETTINGS: dict[str, Callable[[Confide, str], tuple[Switch, Callable[[], None]]]] = {
    "postings-budget": lambda app, v: _lexical(app, "postings_budget", v),
    "common-min": lambda app, v: _lexical(app, "common_min", v),
    "sample-over-budget": lambda app, v: _lexical(app, "sample_over_budget", v),
    "one-term": _one_term,
    "query-workers": _workers,
    "switch-interval": _switch_interval,
    "dense-limit": lambda app, v: _plan(app, "dense_limit", v),
    "lexical-limit": lambda app, v: _plan(app, "lexical_limit", v),
    "hydrate-top": lambda app, v: _plan(app, "hydrate_top", v),
    "early-expand": lambda app, v: _plan(app, "early_expand_top", v),
    "lexical-hydrate": lambda app, v: _plan(app, "lexical_hydrate_top", v),
    "precision": _precision,
    "index-loops": _index_loops,
    "plans": _plans,
    "head-chunks": _head_chunks,
    "partitions": _partitions,
    "delta-header": _delta_header,
    "common-names": _common_names,
    "side-reads": _side_reads,
    "free-read": _free_read,
    "waiting": _waiting,
}


def parse_setting(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` checked against :data:`SETTINGS` (``ValueError`` names the known ones)."""
    name, sep, value = text.partition("=")
    if not sep or name not in SETTINGS or not value:
        raise ValueError(f"expected NAME=VALUE with NAME one of {', '.join(sorted(SETTINGS))}")
    return name, value


def p50_p95(values: Sequence[float]) -> tuple[float, float]:
    """The median and 95th percentile of ``values``, rounded to 0.01."""
    cuts = statistics.quantiles(values, n=100) if len(values) > 1 else [values[0]] * 99
    return round(cuts[49], 2), round(cuts[94], 2)


def compare(
    app: Confide,
    setting: str,
    asked: Sequence[str],
    request: Callable[[str], dict[str, Any]],
    *,
    warm: int = 10,
) -> dict[str, Any]:
    """Answer each of ``asked`` as configured and with ``setting`` (``NAME=VALUE``), in
    alternating order; the first ``warm`` questions are answered both ways untimed first."""
    name, value = parse_setting(setting)
    switch, close = SETTINGS[name](app, value)
    configured: list[float] = []
    changed: list[float] = []
    try:
        if name in RECORDED_FIRST:
            for q in asked:  # the recording the changed arm answers from
                app.query(request(q))
        for q in asked[:warm]:
            for on in (False, True):
                switch(on)
                app.query(request(q))
        for i, q in enumerate(asked):
            for on in (False, True) if i % 2 == 0 else (True, False):
                switch(on)
                start = time.perf_counter()
                app.query(request(q))
                (changed if on else configured).append((time.perf_counter() - start) * 1000)
    finally:
        switch(False)
        close()
    differences = [c - b for b, c in zip(configured, changed, strict=True)]
    base50, base95 = p50_p95(configured)
    new50, new95 = p50_p95(changed)
    return {
        "setting": f"{name}={value}",
        "questions": len(asked),
        "configured_p50_ms": base50,
        "configured_p95_ms": base95,
        "changed_p50_ms": new50,
        "changed_p95_ms": new95,
        "paired_difference_median_ms": round(statistics.median(differences), 3),
        "paired_difference_mean_ms": round(statistics.fmean(differences), 3),
    }


def print_comparison(found: dict[str, Any]) -> None:
    """One line per comparison, under the size's row."""
    print(
        f"{'':<9} {found['setting']} against as configured, {found['questions']} questions "
        f"each answered both ways: p50 {found['configured_p50_ms']:.2f} -> "
        f"{found['changed_p50_ms']:.2f}, p95 {found['configured_p95_ms']:.2f} -> "
        f"{found['changed_p95_ms']:.2f}; paired difference median "
        f"{found['paired_difference_median_ms']:+.3f} ms, mean "
        f"{found['paired_difference_mean_ms']:+.3f} ms",
        flush=True,
    )
