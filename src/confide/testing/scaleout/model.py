"""The scaled-out deployment's model: a scripted OpenAI-compatible server on loopback that
answers each of Confide's prompts in kind (call extraction, rolling summaries, app memories
and their compaction, insights), and counts the call extractions per call."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter

from confide.apps.compaction import COMPACTION_PROMPT
from confide.apps.writer import MEMORY_PROMPT
from confide.chat.summaries import SUMMARY_PROMPT
from confide.conversation.extraction import EXTRACTION_PROMPT
from confide.testing.scripted_llm import RecordedRequest, ScriptedReply
from confide.workers.insights import INSIGHT_PROMPT

__all__ = ["CALL_TAG", "ScaleoutModel"]

CALL_TAG = re.compile(r"\bcall-[0-9a-f]{12}\b")
"""The tag every turn of a call carries (``call-`` and 12 hex digits), one per call."""
_IDS = re.compile(r"\[([0-9a-f-]{36})\]")


def _opening(prompt: str) -> str:
    return prompt.split("{", 1)[0][:60]


class ScaleoutModel:
    """Answers chat completions by the system prompt they carry (a ``responder`` for
    :class:`~confide.testing.scripted_llm.ScriptedLLMServer`).

    :attr:`extractions` counts the extraction requests per call tag: a call extracted
    twice (two processes ending it) shows as a count above one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.extractions: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        """Requests by kind (``extraction``, ``summary``, ``app_memory``, ...)."""
        self._held: dict[str, threading.Event] = {}
        self._asked = threading.Condition(self._lock)

    def hold(self, tag: str) -> None:
        """Keep the answer to the extraction of the call tagged ``tag`` until
        :meth:`release` (the extraction is in flight meanwhile)."""
        with self._lock:
            self._held[tag] = threading.Event()

    def wait_asked(self, tag: str, timeout: float) -> bool:
        """Wait until the extraction of the call ``tag`` was asked for; whether it was."""
        with self._asked:
            return self._asked.wait_for(lambda: self.extractions[tag] > 0, timeout)

    def release(self, tag: str) -> None:
        """Let the held extraction of ``tag`` be answered."""
        with self._lock:
            held = self._held.pop(tag, None)
        if held is not None:
            held.set()

    def __call__(self, request: RecordedRequest) -> ScriptedReply:
        """The answer to one request."""
        messages = request.messages
        system = str(messages[0].get("content", "")) if messages else ""
        said = str(messages[-1].get("content", "")) if messages else ""
        kind, content = self._answer(system, said)
        tags = set(CALL_TAG.findall(said)) if kind == "extraction" else set()
        with self._asked:
            self.calls[kind] += 1
            for tag in tags:
                self.extractions[tag] += 1
            held = [self._held[t] for t in tags if t in self._held]
            self._asked.notify_all()
        for event in held:
            event.wait(120)
        return ScriptedReply(content=content)

    def _answer(self, system: str, said: str) -> tuple[str, str]:
        if system.startswith(_opening(EXTRACTION_PROMPT)):
            tags = sorted(set(CALL_TAG.findall(said)))
            found = [
                {
                    "type": "fact",
                    "key": f"visit_{tag.removeprefix('call-')}",
                    "value": f"The user walked to the harbour during {tag}.",
                    "confidence": 0.9,
                }
                for tag in tags[:1]
            ]
            return "extraction", json.dumps(found)
        if system.startswith(_opening(SUMMARY_PROMPT)):
            summary = {
                "summary": "The user talked about a walk. They planned the next one.",
                "facts": [{"category": "hobby", "content": "The user enjoys long walks"}],
            }
            return "summary", json.dumps(summary)
        if system.startswith(_opening(MEMORY_PROMPT)):
            return "app_memory", "The user prefers short answers. The export bug was fixed."
        if system.startswith(_opening(COMPACTION_PROMPT)):
            ids = _IDS.findall(said)
            decision = {
                "action": "delete",
                "targetMemoryId": ids[0] if ids else "",
                "reason": "old",
            }
            return "app_compaction", json.dumps(decision)
        if system.startswith(_opening(INSIGHT_PROMPT)):
            return "insight", json.dumps({"insights": []})
        return "other", "[]"
