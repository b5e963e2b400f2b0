"""App memories: a small, curated memory per app, kept within a cap.

An app scope ``(account_id, app_id)`` holds at most its cap of short memories, each
written by one LLM call (or offline) when a conversation with the app ends, and kept within
the cap by an LLM's merge-or-drop decision with a FIFO fallback. Built on the engine's
public operations (memories with ``app_id``, ``commit_batch`` with the scope lock) and the
LLM usage ledger; the SDK and the service reach it through :class:`AppMemories`.
"""

from confide.apps.compaction import CompactionOutcome, Decision, parse_decision, reason_of
from confide.apps.context import render_context
from confide.apps.scope import AppMessage, AppScope
from confide.apps.service import AppMemories, AppMonitor, AppSettings, EndOutcome
from confide.apps.writer import offline_paragraph

__all__ = [
    "AppMemories",
    "AppMessage",
    "AppMonitor",
    "AppScope",
    "AppSettings",
    "CompactionOutcome",
    "Decision",
    "EndOutcome",
    "offline_paragraph",
    "parse_decision",
    "reason_of",
    "render_context",
]
