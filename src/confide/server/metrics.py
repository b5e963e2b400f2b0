"""Service metrics through ``prometheus-client``, one registry per app (no global state).

The counters and histograms of one service process are kept here and exposed by a custom
collector in a :class:`prometheus_client.CollectorRegistry` of the app's own, rendered with
``generate_latest``. Every metric name of the earlier hand-written exposition is kept
(``confide_memories_stored_total`` and so on); ``confide_http_request_duration_seconds`` adds a
latency histogram per route template (never the raw path), method and status. Labels carry
route templates, status codes, operations and app ids only: no account, no user, no memory id,
no value.

Per app (fed by :class:`~confide.apps.AppMemories` through its monitor, whichever door or
worker did the work): ``confide_app_memories_created_total``, the
``confide_app_cap_utilisation`` histogram (the share of its cap an app's scope holds after
each write and compaction) and ``confide_app_context_requests_total`` (by ``injected``:
whether the context carried any memory) with ``confide_app_context_memories_total``. The
``app`` label is bounded: the first ``app_labels`` app ids this process sees keep their own,
every later one is counted under :data:`OTHER_APPS`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from confide.apps import CompactionOutcome
    from confide.storage.apps import UsageRow

__all__ = ["DURATION_BUCKETS", "Histogram", "Metrics", "RouteTimer"]

DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
COUNT_BUCKETS = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
UNMATCHED = "unmatched"
"""The route label of a request no route matched (its path is not a label)."""
UTILISATION_BUCKETS = (0.25, 0.5, 0.75, 0.9, 1.0)
OTHER_APPS = "_other"
"""The ``app`` label of apps past the label bound (no app id starts with ``_``)."""
APP_LABELS = 100


class Histogram:
    """A cumulative histogram with fixed buckets (guarded by its owner's lock)."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * len(self.buckets)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Add one observation."""
        self.total += 1
        self.sum += value
        for index, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[index] += 1

    def samples(self) -> list[tuple[str, float]]:
        """``(le, cumulative count)`` pairs, ``+Inf`` last, as prometheus-client takes them."""
        pairs = [(f"{b:g}", float(c)) for b, c in zip(self.buckets, self.counts, strict=True)]
        return [*pairs, ("+Inf", float(self.total))]


class Metrics:
    """Counters and histograms of one service process (thread-safe).

    ``integrity_failures`` reads the engine's count of rows that failed authentication;
    ``sessions_evicted`` the session buffer's count of idle sessions it dropped;
    ``scrubs_pending`` the store's count of scrubs still pending (erasures not verified yet).
    ``app_labels``: how many app ids get a label of their own (later ones share
    :data:`OTHER_APPS`; ``0``: every app does, no app id is shown). ``registry`` is this process's
    prometheus-client registry; :meth:`render` its exposition.
    """

    def __init__(
        self,
        *,
        integrity_failures: Callable[[], int] | None = None,
        sessions_evicted: Callable[[], int] | None = None,
        scrubs_pending: Callable[[], int] | None = None,
        app_labels: int = APP_LABELS,
    ) -> None:
        self._integrity_failures = integrity_failures
        self._sessions_evicted = sessions_evicted
        self._scrubs_pending = scrubs_pending
        self._lock = threading.Lock()
        self.memories_stored = 0
        self.memories_updated = 0
        self.duplicates_skipped = 0
        self.refresh_failures = 0
        self.sessions_summarized = 0
        self.summarization_failures = 0
        self.summarization_seconds = Histogram(DURATION_BUCKETS)
        self.extracted_per_session = Histogram(COUNT_BUCKETS)
        self.requests: dict[tuple[str, str, str], Histogram] = {}
        self.llm_calls: dict[str, int] = {}
        self.llm_tokens: dict[tuple[str, str], int] = {}
        self.llm_cost_units: dict[str, float] = {}
        self.app_compactions: dict[tuple[str, str], int] = {}
        self.app_memory_failures = 0
        self.app_labels = app_labels
        self._labelled: set[str] = set()
        self.app_created: dict[str, int] = {}
        self.app_utilisation: dict[str, Histogram] = {}
        self.app_contexts: dict[tuple[str, str], int] = {}
        self.app_context_memories: dict[str, int] = {}
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_Collector(self))

    def llm_call(self, row: UsageRow) -> None:
        """Count an LLM call of the usage ledger, by operation."""
        with self._lock:
            op = row.operation
            self.llm_calls[op] = self.llm_calls.get(op, 0) + row.calls
            for kind, tokens in (
                ("prompt", row.prompt_tokens),
                ("completion", row.completion_tokens),
            ):
                self.llm_tokens[(op, kind)] = self.llm_tokens.get((op, kind), 0) + tokens
            self.llm_cost_units[op] = self.llm_cost_units.get(op, 0.0) + row.cost_units

    def app_compacted(self, outcome: CompactionOutcome) -> None:
        """Count the evictions and merges of one compaction, by action and decider."""
        with self._lock:
            for action, decided_by, _cause in outcome.changes:
                key = (action, decided_by)
                self.app_compactions[key] = self.app_compactions.get(key, 0) + 1

    def _app(self, app_id: str) -> str:
        """The ``app`` label of ``app_id``: its own while the bound allows (call under the
        lock)."""
        if app_id in self._labelled:
            return app_id
        if len(self._labelled) < self.app_labels:
            self._labelled.add(app_id)
            return app_id
        return OTHER_APPS

    def app_memory_created(self, app_id: str) -> None:
        """Count a memory written for an app (an :class:`~confide.apps.AppMonitor` call)."""
        with self._lock:
            label = self._app(app_id)
            self.app_created[label] = self.app_created.get(label, 0) + 1

    def app_cap_used(self, app_id: str, *, held: int, cap: int) -> None:
        """Observe the share of its cap an app's scope holds after a write."""
        with self._lock:
            label = self._app(app_id)
            histogram = self.app_utilisation.get(label)
            if histogram is None:
                histogram = self.app_utilisation[label] = Histogram(UTILISATION_BUCKETS)
            histogram.observe(held / cap if cap > 0 else 0.0)

    def app_context_served(self, app_id: str, *, memories: int) -> None:
        """Count an app context read, and the memories it injected."""
        with self._lock:
            label = self._app(app_id)
            key = (label, "true" if memories else "false")
            self.app_contexts[key] = self.app_contexts.get(key, 0) + 1
            self.app_context_memories[label] = self.app_context_memories.get(label, 0) + memories

    def app_memory_failed(self) -> None:
        """Count an app memory that could not be written."""
        with self._lock:
            self.app_memory_failures += 1

    def memory_written(self, action: str) -> None:
        """Count a tool or extraction write: ``created`` or ``updated``."""
        with self._lock:
            if action == "created":
                self.memories_stored += 1
            elif action == "updated":
                self.memories_updated += 1

    def refresh_failed(self) -> None:
        """Count a failed instruction refresh."""
        with self._lock:
            self.refresh_failures += 1

    def session_summarized(self, *, seconds: float, created: int, duplicates: int) -> None:
        """Record one finished summarisation."""
        with self._lock:
            self.sessions_summarized += 1
            self.memories_stored += created
            self.duplicates_skipped += duplicates
            self.summarization_seconds.observe(seconds)
            self.extracted_per_session.observe(float(created))

    def summarization_failed(self) -> None:
        """Count a summarisation that raised."""
        with self._lock:
            self.summarization_failures += 1

    def request_done(self, *, method: str, route: str, status: int, seconds: float) -> None:
        """Record one HTTP request's latency under its route template."""
        label = (method, route, str(status))
        with self._lock:
            histogram = self.requests.get(label)
            if histogram is None:
                histogram = self.requests[label] = Histogram(REQUEST_BUCKETS)
            histogram.observe(seconds)

    def render(self) -> str:
        """Every metric in the Prometheus text format (prometheus-client's exposition)."""
        return generate_latest(self.registry).decode()


class _Collector(Collector):
    """Exposes :class:`Metrics` as metric families."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self._metrics
        integrity = 0 if m._integrity_failures is None else m._integrity_failures()
        evicted = 0 if m._sessions_evicted is None else m._sessions_evicted()
        pending = 0 if m._scrubs_pending is None else m._scrubs_pending()
        with m._lock:
            counters = (
                ("confide_memories_stored", "Memories created.", m.memories_stored),
                ("confide_memories_updated", "Memories updated.", m.memories_updated),
                (
                    "confide_duplicates_skipped",
                    "Extracted memories skipped as duplicates.",
                    m.duplicates_skipped,
                ),
                (
                    "confide_refresh_failures",
                    "Failed instruction refreshes.",
                    m.refresh_failures,
                ),
                ("confide_sessions_summarized", "Sessions summarised.", m.sessions_summarized),
                (
                    "confide_summarization_failures",
                    "Summarisations that failed.",
                    m.summarization_failures,
                ),
            )
            families: list[Metric] = [
                CounterMetricFamily(name, text, value=value) for name, text, value in counters
            ]
            families.append(
                CounterMetricFamily(
                    "confide_integrity_failures",
                    "Stored rows that failed authentication (tampered) and were left out.",
                    value=integrity,
                )
            )
            families.append(
                CounterMetricFamily(
                    "confide_sessions_evicted",
                    "Call sessions dropped from process memory after 30 idle minutes.",
                    value=evicted,
                )
            )
            families.append(
                GaugeMetricFamily(
                    "confide_scrubs_pending",
                    "Scrubs of erased, purged or re-wrapped data not finished and verified yet.",
                    value=pending,
                )
            )
            families += _labelled(m)
            families.append(_histogram(
                "confide_summarization_duration_seconds",
                "Time to summarise a session.",
                m.summarization_seconds,
            ))  # fmt: skip
            families.append(_histogram(
                "confide_memories_extracted_per_session",
                "Memories extracted per session.",
                m.extracted_per_session,
            ))  # fmt: skip
            requests = HistogramMetricFamily(
                "confide_http_request_duration_seconds",
                "HTTP request latency by route template, method and status.",
                labels=("method", "route", "status"),
            )
            for (method, route, status), histogram in sorted(m.requests.items()):
                requests.add_metric([method, route, status], histogram.samples(), histogram.sum)
            families.append(requests)
        yield from families


def _labelled(m: Metrics) -> list[Metric]:
    """The counters with labels (LLM use by operation, app compactions by decider)."""
    calls = CounterMetricFamily(
        "confide_llm_calls", "LLM calls Confide made, by operation.", labels=("operation",)
    )
    for op, n in sorted(m.llm_calls.items()):
        calls.add_metric([op], n)
    tokens = CounterMetricFamily(
        "confide_llm_tokens", "LLM tokens, by operation and kind.", labels=("operation", "kind")
    )
    for (op, kind), n in sorted(m.llm_tokens.items()):
        tokens.add_metric([op, kind], n)
    units = CounterMetricFamily(
        "confide_llm_cost_units", "LLM cost units, by operation.", labels=("operation",)
    )
    for op, value in sorted(m.llm_cost_units.items()):
        units.add_metric([op], value)
    compactions = CounterMetricFamily(
        "confide_app_compactions",
        "App memories evicted or merged.",
        labels=("action", "decided_by"),
    )
    for (action, decided_by), n in sorted(m.app_compactions.items()):
        compactions.add_metric([action, decided_by], n)
    failures = CounterMetricFamily(
        "confide_app_memory_failures", "App memories that failed.", value=m.app_memory_failures
    )
    return [calls, tokens, units, compactions, failures, *_per_app(m)]


def _per_app(m: Metrics) -> list[Metric]:
    """The per-app families, labelled by app id (bounded: see :class:`Metrics`)."""
    created = CounterMetricFamily(
        "confide_app_memories_created", "App memories written, by app.", labels=("app",)
    )
    for app, n in sorted(m.app_created.items()):
        created.add_metric([app], n)
    utilisation = HistogramMetricFamily(
        "confide_app_cap_utilisation",
        "Share of its cap an app's scope holds after each write and compaction, by app.",
        labels=("app",),
    )
    for app, histogram in sorted(m.app_utilisation.items()):
        utilisation.add_metric([app], histogram.samples(), histogram.sum)
    contexts = CounterMetricFamily(
        "confide_app_context_requests",
        "App contexts read, by app and whether they injected any memory.",
        labels=("app", "injected"),
    )
    for (app, carried), n in sorted(m.app_contexts.items()):
        contexts.add_metric([app, carried], n)
    injected = CounterMetricFamily(
        "confide_app_context_memories", "Memories injected by app contexts, by app.",
        labels=("app",),
    )  # fmt: skip
    for app, n in sorted(m.app_context_memories.items()):
        injected.add_metric([app], n)
    return [created, utilisation, contexts, injected]


def _histogram(name: str, text: str, histogram: Histogram) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, text, buckets=histogram.samples(), sum_value=histogram.sum)


class RouteTimer:
    """ASGI middleware: each HTTP request's latency, by route template, into ``metrics``.

    Also logs one structured line per request (``confide.access``: method, route template,
    status and milliseconds as record attributes); never a path, query or body.
    """

    def __init__(self, app: Any, metrics: Metrics, log: Callable[..., None] | None = None):
        self.app = app
        self.metrics = metrics
        self.log = log

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Time the request and record it once the response has gone (or failed)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def recording_send(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            seconds = time.perf_counter() - start
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            method = str(scope.get("method", "GET"))
            self.metrics.request_done(method=method, route=route, status=status, seconds=seconds)
            if self.log is not None:
                self.log(method=method, route=route, status=status, ms=seconds * 1000)
