"""A scripted OpenAI-compatible chat-completions server on loopback, for tests and benchmarks.

It speaks real HTTP and real JSON: each ``POST /v1/chat/completions`` takes the next
:class:`ScriptedReply` from the script (or asks a ``responder``), waits its ``delay``, and
answers with a chat-completions body, an error status, a raw malformed body, or a dropped
connection. Every request is recorded so tests can check what the client sent::

    with ScriptedLLMServer(["[]"]) as server:
        llm = OpenAICompatibleLLM(base_url=server.base_url, model="scripted")
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["RecordedRequest", "ScriptedLLMServer", "ScriptedReply", "completion_body"]


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 resets connections when many extractions start at once.
    request_queue_size = 128
    daemon_threads = True


@dataclass(frozen=True, kw_only=True)
class ScriptedReply:
    """One scripted answer.

    ``content`` is wrapped in a chat-completions body; ``body`` (raw bytes) replaces the
    whole body instead; ``drop`` closes the connection without answering; ``delay`` is
    seconds to wait first (released early when the server stops).
    """

    content: str = ""
    status: int = 200
    body: bytes | None = None
    delay: float = 0.0
    drop: bool = False
    content_type: str = "application/json"


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received: method, path, headers and the decoded JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    json: Any = field(default=None)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages sent, or an empty list."""
        if isinstance(self.json, dict) and isinstance(self.json.get("messages"), list):
            return list(self.json["messages"])
        return []


Responder = Callable[[RecordedRequest], ScriptedReply]


def completion_body(content: str, *, model: str = "scripted") -> bytes:
    """A minimal chat-completions response body carrying ``content``."""
    return json.dumps(
        {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
        }
    ).encode()


class ScriptedLLMServer:
    """A threaded HTTP server answering chat completions from a script.

    Replies are consumed in order; when the script is empty the ``responder`` (if any)
    answers, else the ``default`` reply, else HTTP 500. Use as a context manager or call
    :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        replies: Iterable[ScriptedReply | str] = (),
        *,
        default: ScriptedReply | str | None = None,
        responder: Responder | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self._script: deque[ScriptedReply] = deque(_reply(r) for r in replies)
        self._default = None if default is None else _reply(default)
        self._responder = responder
        self._host = host
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._requests: list[RecordedRequest] = []
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``http://127.0.0.1:<port>/v1``)."""
        if self._httpd is None:
            raise RuntimeError("server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the requests received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def enqueue(self, *replies: ScriptedReply | str) -> None:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(_reply(r) for r in replies)

    def start(self) -> ScriptedLLMServer:
        """Bind an ephemeral loopback port and serve in a daemon thread."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                server._handle(self)

            def do_GET(self) -> None:
                server._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                return  # keep test output clean; never print prompts

        self._httpd = _Server((self._host, 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="scripted-llm",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release delayed replies, stop serving and close the socket."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_reply(self, request: RecordedRequest) -> ScriptedReply:
        with self._lock:
            self._requests.append(request)
            if self._script:
                return self._script.popleft()
        if self._responder is not None:
            return self._responder(request)
        if self._default is not None:
            return self._default
        return ScriptedReply(status=500, body=b'{"error": {"message": "script exhausted"}}')

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            decoded: Any = json.loads(raw) if raw else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            decoded = None
        request = RecordedRequest(
            method=handler.command,
            path=handler.path,
            headers={k.lower(): v for k, v in handler.headers.items()},
            raw=raw,
            json=decoded,
        )
        if handler.command != "POST" or not handler.path.endswith("/chat/completions"):
            reply = ScriptedReply(status=404, body=b'{"error": {"message": "not found"}}')
        else:
            reply = self._next_reply(request)
        if reply.delay > 0 and self._stopping.wait(reply.delay):
            reply = ScriptedReply(drop=True)
        if reply.drop:
            handler.close_connection = True
            return
        body = reply.body if reply.body is not None else completion_body(reply.content)
        handler.send_response(reply.status)
        handler.send_header("Content-Type", reply.content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


def _reply(value: ScriptedReply | str) -> ScriptedReply:
    return ScriptedReply(content=value) if isinstance(value, str) else value
