"""An adapter between the OpenAI/xAI Realtime event protocol and Confide's conversation layer.

It is transport-free: feed it each server event (a dict, or JSON text) and send back the
client events it returns. It records user transcripts and assistant replies in the session
buffer, runs tool calls through a :class:`Dispatcher`, answers them with a
``function_call_output`` item (a failed call's output is the answer every door gives,
:func:`confide.errors.error_answer`) and ``response.create``, and after a successful store or
update refreshes the session's instructions with the user's current memories. With a
:class:`DeltaSource`, instructions start with the delta header when the user's memory
changed since the agent was last shown it (each change once).
Nothing it logs carries a transcript, a tool argument or a memory value.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from confide.conversation.buffer import Session, SessionBuffer
from confide.conversation.prompts import build_system_prompt
from confide.conversation.tools import realtime_tools
from confide.errors import ConfideError, error_answer
from confide.types import Memory

__all__ = ["DeltaSource", "Dispatcher", "MemoryLoader", "RealtimeAdapter"]

log = logging.getLogger(__name__)

# The tools whose success refreshes the instructions, and their key argument (either spelling).
_REFRESHING_TOOLS = {"store_memory": ("key",), "update_memory": ("existingKey", "existing_key")}


class Dispatcher(Protocol):
    """Runs one tool call for a session and returns its JSON-able result.

    A result with an ``error`` entry is a failure; anything else is a success.
    """

    async def dispatch(self, name: str, arguments_json: str, session: Session) -> dict[str, Any]:
        """Run tool ``name`` with its raw JSON arguments."""
        ...


class MemoryLoader(Protocol):
    """Loads the memories that go into the agent's instructions."""

    async def load(
        self, *, account_id: str, user_id: str, categories: Sequence[str] | None = None
    ) -> Sequence[Memory]:
        """The user's active memories, most useful first (of ``categories`` only, when
        given)."""
        ...


class DeltaSource(Protocol):
    """The delta header a reader has not been shown yet (delivering marks it seen)."""

    async def deliver(
        self,
        *,
        account_id: str,
        user_id: str,
        reader: str,
        categories: Sequence[str] | None = None,
    ) -> str:
        """``Memory updates since rev {X}:`` and its bullets (of ``categories`` only, when
        given), or ``""``."""
        ...


class RealtimeAdapter:
    """Handles Realtime server events for one open session of a :class:`SessionBuffer`.

    Args:
        buffer: the session buffer; ``session_id`` must already be started in it.
        session_id: the session this adapter serves.
        dispatcher: runs tool calls.
        memories: loads memories for the refreshed instructions.
        instructions: the agent's own instructions, before the memory sections.
        deltas: the delta header source; without one instructions carry no header.
        reader: the agent the header is delivered to (its seen revision advances).
        categories: the memory categories the instructions may carry (the reader's
            allowlist); ``None``: every category.
    """

    def __init__(
        self,
        *,
        buffer: SessionBuffer,
        session_id: str,
        dispatcher: Dispatcher,
        memories: MemoryLoader,
        instructions: str,
        deltas: DeltaSource | None = None,
        reader: str = "default",
        categories: Sequence[str] | None = None,
    ) -> None:
        self._buffer = buffer
        self._categories = categories
        self._deltas = deltas
        self._reader = reader
        self._session_id = session_id
        self._dispatcher = dispatcher
        self._memories = memories
        self._instructions = instructions
        self._call_names: dict[str, str] = {}
        self._done_calls: set[str] = set()

    async def session_update(self, *, with_tools: bool = True) -> dict[str, Any]:
        """A ``session.update`` event carrying instructions built from current memories
        (and the memory tools, when ``with_tools``).

        Raises:
            ConfideError: the session is not open, or loading memories failed.
        """
        session = self._session()
        memories = await self._memories.load(
            account_id=session.account_id, user_id=session.user_id, categories=self._categories
        )
        instructions = build_system_prompt(self._instructions, memories)
        if self._deltas is not None:
            header = await self._deltas.deliver(
                account_id=session.account_id,
                user_id=session.user_id,
                reader=self._reader,
                categories=self._categories,
            )
            if header:
                instructions = f"{header}\n\n{instructions}"
        body: dict[str, Any] = {"instructions": instructions}
        if with_tools:
            body["tools"] = realtime_tools()
            body["tool_choice"] = "auto"
        return {"type": "session.update", "session": body}

    async def handle_json(self, text: str) -> list[str]:
        """Handle one server event given as JSON text; return client events as JSON text."""
        try:
            event = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            log.warning("realtime: ignored a server event that is not usable JSON")
            return []
        if not isinstance(event, dict):
            return []
        return [json.dumps(out) for out in await self.handle(event)]

    async def handle(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Handle one server event; return the client events to send, in order."""
        kind = event.get("type")
        if kind == "conversation.item.input_audio_transcription.completed":
            self._add_turn("user", event.get("transcript"))
        elif kind == "response.output_item.added":
            self._remember_call(event.get("item"))
        elif kind == "response.done":
            self._add_turn("assistant", _assistant_text(event.get("response")))
        elif kind == "response.function_call_arguments.done":
            return await self._function_call(event)
        return []

    def _session(self) -> Session:
        session = self._buffer.get(self._session_id)
        if session is None:
            raise ConfideError("realtime session is not open")
        return session

    def _add_turn(self, speaker: str, text: object) -> None:
        if not isinstance(text, str) or not text.strip():
            return
        try:
            self._buffer.add_turn(self._session_id, speaker, text)  # type: ignore[arg-type]
        except ConfideError:
            log.warning("realtime: dropped a %s turn: session is not open", speaker)

    def _remember_call(self, item: object) -> None:
        if isinstance(item, dict) and item.get("type") == "function_call":
            name = item.get("name")
            for ref in (item.get("call_id"), item.get("id")):
                if isinstance(ref, str) and isinstance(name, str):
                    self._call_names[ref] = name

    async def _function_call(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        call_id = event.get("call_id")
        if not isinstance(call_id, str) or call_id in self._done_calls:
            return []
        self._done_calls.add(call_id)
        name = event.get("name") or self._call_names.get(call_id)
        if not isinstance(name, str):
            name = self._call_names.get(str(event.get("item_id")), "")
        arguments = event.get("arguments")
        arguments = arguments if isinstance(arguments, str) else "{}"
        result = await self._dispatch(name, arguments)
        out: list[dict[str, Any]] = [
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "function_call_output",
                    "call_id": call_id,
                    "output": json.dumps(result),
                },
            }
        ]
        if name in _REFRESHING_TOOLS and "error" not in result:
            self._record_key(arguments, _REFRESHING_TOOLS[name])
            refresh = await self._refresh()
            if refresh is not None:
                out.append(refresh)
        out.append({"type": "response.create"})
        return out

    async def _dispatch(self, name: str, arguments: str) -> dict[str, Any]:
        try:
            return await self._dispatcher.dispatch(name, arguments, self._session())
        except ConfideError as exc:
            log.warning("realtime: tool %s failed: %s", name, type(exc).__name__)
            return error_answer(exc)
        except Exception as exc:  # the conversation must go on whatever a tool does
            log.error("realtime: tool %s crashed: %s", name, type(exc).__name__)
            return {"error": "internal error"}

    def _record_key(self, arguments: str, names: tuple[str, ...]) -> None:
        try:
            given = json.loads(arguments)
            key = next((given[n] for n in names if given.get(n)), None)
        except (json.JSONDecodeError, RecursionError, AttributeError):
            return
        if isinstance(key, str) and key:
            try:
                self._buffer.record_stored_key(self._session_id, key)
            except ConfideError:
                log.warning("realtime: could not record a stored key: session is not open")

    async def _refresh(self) -> dict[str, Any] | None:
        try:
            return await self.session_update(with_tools=False)
        except Exception as exc:  # a stale prompt is better than a dropped call
            log.warning("realtime: memory refresh failed: %s", type(exc).__name__)
            return None


def _assistant_text(response: object) -> str | None:
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        return None
    spoken: list[str] = []
    written: list[str] = []
    for item in response["output"]:
        if not isinstance(item, dict) or item.get("type") != "message":
            continue
        for part in item.get("content") or []:
            if not isinstance(part, dict):
                continue
            if part.get("type") in ("audio", "output_audio") and part.get("transcript"):
                spoken.append(str(part["transcript"]))
            elif part.get("type") in ("text", "output_text") and part.get("text"):
                written.append(str(part["text"]))
    return " ".join(spoken or written) or None
