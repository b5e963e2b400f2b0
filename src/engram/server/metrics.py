"""Service metrics in the Prometheus text exposition format, written by hand (no extra)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engram.apps import CompactionOutcome
    from engram.storage.apps import UsageRow

__all__ = ["Histogram", "Metrics"]

DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
COUNT_BUCKETS = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)


class Histogram:
    """A cumulative histogram with fixed buckets."""

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

    def render(self, name: str, help_text: str) -> list[str]:
        """The exposition lines of this histogram."""
        lines = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
        for bound, count in zip(self.buckets, self.counts, strict=True):
            lines.append(f'{name}_bucket{{le="{bound:g}"}} {count}')
        lines.append(f'{name}_bucket{{le="+Inf"}} {self.total}')
        lines.append(f"{name}_sum {self.sum:.6f}")
        lines.append(f"{name}_count {self.total}")
        return lines


class Metrics:
    """Counters and histograms of one service process (thread-safe)."""

    def __init__(
        self,
        *,
        integrity_failures: Callable[[], int] | None = None,
        sessions_evicted: Callable[[], int] | None = None,
    ) -> None:
        """``integrity_failures`` reads the engine's count of rows that failed authentication;
        ``sessions_evicted`` the session buffer's count of idle sessions it dropped."""
        self._integrity_failures = integrity_failures
        self._sessions_evicted = sessions_evicted
        self._lock = threading.Lock()
        self.memories_stored = 0
        self.memories_updated = 0
        self.duplicates_skipped = 0
        self.refresh_failures = 0
        self.sessions_summarized = 0
        self.summarization_failures = 0
        self.summarization_seconds = Histogram(DURATION_BUCKETS)
        self.extracted_per_session = Histogram(COUNT_BUCKETS)
        self.llm_calls: dict[str, int] = {}
        self.llm_tokens: dict[tuple[str, str], int] = {}
        self.llm_cost_units: dict[str, float] = {}
        self.app_compactions: dict[tuple[str, str], int] = {}
        self.app_memory_failures = 0

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

    def _labelled(self) -> list[str]:
        """The counters with labels (operation, decider); call with the lock held."""
        lines = ["# HELP engram_llm_calls_total LLM calls Engram made, by operation.",
                 "# TYPE engram_llm_calls_total counter"]  # fmt: skip
        lines += [
            f'engram_llm_calls_total{{operation="{op}"}} {n}'
            for op, n in sorted(self.llm_calls.items())
        ]
        lines += ["# HELP engram_llm_tokens_total LLM tokens, by operation and kind.",
                  "# TYPE engram_llm_tokens_total counter"]  # fmt: skip
        lines += [
            f'engram_llm_tokens_total{{operation="{op}",kind="{kind}"}} {n}'
            for (op, kind), n in sorted(self.llm_tokens.items())
        ]
        lines += ["# HELP engram_llm_cost_units_total LLM cost units, by operation.",
                  "# TYPE engram_llm_cost_units_total counter"]  # fmt: skip
        lines += [
            f'engram_llm_cost_units_total{{operation="{op}"}} {units:g}'
            for op, units in sorted(self.llm_cost_units.items())
        ]
        lines += ["# HELP engram_app_compactions_total App memories evicted or merged.",
                  "# TYPE engram_app_compactions_total counter"]  # fmt: skip
        lines += [
            f'engram_app_compactions_total{{action="{a}",decided_by="{d}"}} {n}'
            for (a, d), n in sorted(self.app_compactions.items())
        ]
        lines += ["# HELP engram_app_memory_failures_total App memories that failed.",
                  "# TYPE engram_app_memory_failures_total counter",
                  f"engram_app_memory_failures_total {self.app_memory_failures}"]  # fmt: skip
        return lines

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

    def render(self) -> str:
        """Every metric in the Prometheus text format."""
        counters = (
            ("engram_memories_stored_total", "Memories created.", self.memories_stored),
            ("engram_memories_updated_total", "Memories updated.", self.memories_updated),
            (
                "engram_duplicates_skipped_total",
                "Extracted memories skipped as duplicates.",
                self.duplicates_skipped,
            ),
            (
                "engram_refresh_failures_total",
                "Failed instruction refreshes.",
                self.refresh_failures,
            ),
            (
                "engram_sessions_summarized_total",
                "Sessions summarised.",
                self.sessions_summarized,
            ),
            (
                "engram_summarization_failures_total",
                "Summarisations that failed.",
                self.summarization_failures,
            ),
            (
                "engram_integrity_failures_total",
                "Stored rows that failed authentication (tampered) and were left out.",
                0 if self._integrity_failures is None else self._integrity_failures(),
            ),
            (
                "engram_sessions_evicted_total",
                "Call sessions dropped from process memory after 30 idle minutes (never ended).",
                0 if self._sessions_evicted is None else self._sessions_evicted(),
            ),
        )
        with self._lock:
            lines: list[str] = []
            for name, help_text, value in counters:
                lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter", f"{name} {value}"]
            lines += self.summarization_seconds.render(
                "engram_summarization_duration_seconds", "Time to summarise a session."
            )
            lines += self.extracted_per_session.render(
                "engram_memories_extracted_per_session", "Memories extracted per session."
            )
            lines += self._labelled()
        return "\n".join(lines) + "\n"
