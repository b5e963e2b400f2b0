"""Service benchmark: tool-call round trips over HTTP, session end, extraction throughput.

Usage: python bench/session.py [--calls 300] [--embedder local:all-MiniLM-L6-v2|none]
                               [--sessions 40] [--json OUT]

* ``store_memory`` and ``update_memory`` p50/p95 through the HTTP service: uvicorn on a
  loopback socket, SQLite in a temporary home, httpx as the client (target: store p95
  <= 50 ms). With ``--embedder`` the write path embeds with the local MiniLM model for the
  de-duplication policy's cosine test (the retrieval layer has no vector indexer to write
  with yet, so that is the embedding work on this path).
* ``POST /sessions/{id}/end`` p50/p95 for sessions that schedule an extraction (target
  <= 5 ms: the answer never waits for it).
* Extraction throughput: sessions summarised per second with the LLM extractor against
  the scripted OpenAI-compatible server on loopback.
* The offline extractor's precision and recall (``bench/extractor.py``'s scorer).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from confide.config import Settings
from confide.conversation.buffer import SessionBuffer
from confide.conversation.extraction import LLMExtractor
from confide.conversation.summarizer import SessionSummarizer
from confide.engine import MemoryEngine
from confide.llm.openai_compat import OpenAICompatibleLLM
from confide.server import create_app
from confide.testing.loopback import serve_on_loopback
from confide.testing.scripted_llm import ScriptedLLMServer

sys.path.insert(0, str(Path(__file__).parent))
from _progress import counted
from extractor import DEFAULT_LABELS, score

ACCOUNT = "bench-acct"
KEY = "aa" * 32


def pct(samples: list[float], q: float) -> float:
    """The q-quantile of ``samples`` in milliseconds."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, round(q * (len(ordered) - 1)))
    return ordered[index] * 1000


@contextmanager
def serve(settings: Settings, embedder: Any) -> Iterator[tuple[str, str]]:
    """The service on a loopback socket; yields its base URL and an API key."""
    app = create_app(settings, embedder=embedder)
    token = app.state.services.keys.create(ACCOUNT)
    with serve_on_loopback(app) as base:
        yield base, token


_PEOPLE = ("my daughter", "my neighbour Rosa", "the nurse", "my grandson", "my brother Tom")
_DOINGS = ("visits", "phones", "cooks for", "drives", "writes to", "walks with", "reads to")
_WHEN = ("on Mondays", "every other Friday", "after lunch", "before church", "in the evening")
_EXTRAS = ("and brings soup", "when it is sunny", "since last spring", "if the knee allows",
           "with the dog", "and stays for tea", "unless it rains")  # fmt: skip


def distinct_sentences(n: int) -> list[str]:
    """``n`` different, realistic facts.

    Some differ only in a number, so the de-duplication policy skips a share of them; the
    bench prints how many calls really wrote a memory.
    """
    rng = random.Random(11)
    seen: set[str] = set()
    while len(seen) < n:
        seen.add(
            f"{rng.choice(_PEOPLE).capitalize()} {rng.choice(_DOINGS)} me "
            f"{rng.choice(_WHEN)} {rng.choice(_EXTRAS)}, {rng.randint(2, 9999)} times so far."
        )
    return sorted(seen)


def timed(client: httpx.Client, path: str, body: dict[str, Any]) -> float:
    start = time.perf_counter()
    response = client.post(path, json=body)
    elapsed = time.perf_counter() - start
    response.raise_for_status()
    return elapsed


def http_figures(calls: int, embedder_spec: str) -> dict[str, Any]:
    """Round trips of the tool routes and of session end."""
    with tempfile.TemporaryDirectory(prefix="confide-bench-") as home:
        # The app opens the embedded default itself: the same embedder indexes every write
        # (vector + relation edges) and backs the de-duplication check.
        settings = Settings(
            home=Path(home), encryption_key=KEY, min_session_seconds=0.0, embedder=embedder_spec
        )
        with serve(settings, None) as (base, token):
            headers = {"Authorization": f"Bearer {token}"}
            # Without TCP_NODELAY, a request written in two packets waits out the delayed ACK.
            nodelay = httpx.HTTPTransport(
                socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
            )
            with httpx.Client(
                base_url=base, headers=headers, timeout=60, transport=nodelay
            ) as client:

                def session(line: str) -> str:
                    sid = client.post(
                        "/sessions", json={"accountId": ACCOUNT, "lineId": line}
                    ).json()["callSessionId"]
                    client.post(f"/sessions/{sid}/connected")
                    return str(sid)

                sid = session("line-1")
                owner = {"callSessionId": sid, "lineId": "line-1", "accountId": ACCOUNT}
                for i in range(10):  # warm-up: connections, caches, the model
                    timed(client, "/tools/store_memory", {**owner, "memoryType": "fact",
                          "key": f"warm_{i}", "value": f"warm-up value {i}"})  # fmt: skip
                values = distinct_sentences(calls)
                stores = [
                    timed(
                        client,
                        "/tools/store_memory",
                        {**owner, "memoryType": "fact", "key": f"fact_{i}", "value": value},
                    )
                    for i, value in enumerate(counted(values, "store_memory", "calls"))
                ]
                listed = client.get(
                    "/v1/memories", params={"user_id": "line-1", "limit": 1000}
                ).json()
                stored = sum(1 for m in listed["memories"] if m["key"].startswith("fact_"))
                updates = [
                    timed(
                        client,
                        "/tools/update_memory",
                        {**owner, "existingKey": f"fact_{i}", "newValue": f"changed {i}"},
                    )
                    for i in counted(range(calls // 2), "update_memory", "calls")
                ]
                ends = []
                for i in counted(range(50), "session end", "sessions"):
                    line_sid = session(f"end-{i}")
                    client.post(
                        f"/sessions/{line_sid}/turns",
                        json={"speaker": "user", "text": "I live in Portland and I love tea."},
                    )
                    ends.append(timed(client, f"/sessions/{line_sid}/end", {}))
    return {
        "embedder": embedder_spec,
        "store_memory_ms": {"p50": pct(stores, 0.5), "p95": pct(stores, 0.95), "n": calls},
        "store_memory_written": stored,
        "update_memory_ms": {
            "p50": pct(updates, 0.5),
            "p95": pct(updates, 0.95),
            "n": len(updates),
        },
        "session_end_ms": {"p50": pct(ends, 0.5), "p95": pct(ends, 0.95), "n": len(ends)},
    }


async def extraction_figures(sessions: int) -> dict[str, Any]:
    """Sessions summarised per second with the LLM extractor on the scripted server."""
    answer = json.dumps(
        [
            {"type": "fact", "key": "city", "value": "Portland"},
            {"type": "preference", "key": "likes_tea", "value": "tea"},
        ]
    )
    with (
        tempfile.TemporaryDirectory(prefix="confide-bench-") as home,
        ScriptedLLMServer(default=answer) as llm_server,
    ):
        settings = Settings(home=Path(home), encryption_key=KEY)
        engine = MemoryEngine.open(settings)
        try:
            llm = OpenAICompatibleLLM(base_url=llm_server.base_url, model="scripted")
            summarizer = SessionSummarizer(
                engine, proposals=None, extractor=LLMExtractor(llm), settings=settings
            )
            buffer = SessionBuffer()
            snapshots = []
            for i in range(sessions):
                sid = f"s{i}"
                buffer.start(sid, account_id=ACCOUNT, user_id=f"user-{i}")
                buffer.add_turn(sid, "user", "I live in Portland and I love tea.")
                buffer.add_turn(sid, "assistant", "How nice.", timestamp=datetime.now(UTC))
                snapshots.append(buffer.clear(sid))
            start = time.perf_counter()
            outcomes = await asyncio.gather(*(summarizer.summarize(s) for s in snapshots if s))
            elapsed = time.perf_counter() - start
        finally:
            engine.close()
    created = sum(o.created for o in outcomes)
    failed = sum(1 for o in outcomes if o.report.error)
    return {
        "failed_sessions": failed,
        "sessions": sessions,
        "seconds": elapsed,
        "sessions_per_second": sessions / elapsed,
        "memories_created": created,
    }


def extractor_figures() -> dict[str, Any]:
    """The offline extractor's precision and recall on both label sets (lenient match)."""
    out: dict[str, Any] = {}
    for path in DEFAULT_LABELS:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        precision, recall = score(rows, strict=False)
        out[path.stem] = {"precision": precision, "recall": recall, "sentences": len(rows)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="store_memory calls to time")
    parser.add_argument("--embedder", default="local:all-MiniLM-L6-v2", help="or 'none'")
    parser.add_argument("--sessions", type=int, default=40, help="sessions to summarise")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args()
    figures = {
        "http": http_figures(args.calls, args.embedder),
        "extraction": asyncio.run(extraction_figures(args.sessions)),
        "offline_extractor": extractor_figures(),
    }
    http = figures["http"]
    print(f"HTTP service on SQLite, embedder={http['embedder']}")
    print(f"  store_memory wrote {http['store_memory_written']} of {http['store_memory_ms']['n']}")
    for name in ("store_memory_ms", "update_memory_ms", "session_end_ms"):
        row = http[name]
        print(
            f"  {name[:-3]:<14} p50 {row['p50']:6.2f} ms  p95 {row['p95']:6.2f} ms  (n={row['n']})"
        )
    ex = figures["extraction"]
    print(
        f"extraction (scripted LLM): {ex['sessions']} sessions in {ex['seconds']:.2f} s "
        f"= {ex['sessions_per_second']:.1f} sessions/s, {ex['memories_created']} memories, "
        f"{ex['failed_sessions']} failed"
    )
    for name, row in figures["offline_extractor"].items():
        print(
            f"offline extractor {name}: precision {row['precision']:.2f} "
            f"recall {row['recall']:.2f} ({row['sentences']} sentences)"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
