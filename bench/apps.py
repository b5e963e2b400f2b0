"""App memories benchmark: creation latency, context latency, and many apps at their cap.

Usage: python bench/apps.py [--backend sqlite|postgres|both] [--apps 200]
                            [--conversations 50] [--ends 50] [--llm-delay 0.0]
                            [--scale-llm] [--concurrency 8] [--json OUT]

For each backend (SQLite by default), with no embedder (app memories need none):

* ``creation``: ``--ends`` conversations end in one app already at its cap of 10, through
  :class:`confide.apps.AppMemories` with the LLM at the scripted OpenAI-compatible server on
  loopback (``--llm-delay`` seconds per answer): each end is one LLM call that writes the
  memory, its storage, one LLM call deciding the compaction and its commit. Reported:
  end-to-end p50/p95 (goal < 5 s; in practice milliseconds plus twice the LLM's time).
* ``context``: p50/p95 of building the app's context text (goal p95 < 10 ms).
* ``scale``: ``--apps`` apps x ``--conversations`` conversations each, ``--concurrency``
  ends at a time (different apps), offline (deterministic paragraph, FIFO) unless
  ``--scale-llm`` uses the scripted LLM with no delay. Then every scope is checked: exactly
  at its cap, its kept memories the newest conversations (FIFO) when offline, and every
  conversation's memory written exactly once (kept or evicted, never lost or duplicated).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _engine_side import bench_storage, pct_ms
from _progress import counted, progress_bar
from confide.apps import AppMemories
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.llm.openai_compat import OpenAICompatibleLLM
from confide.testing.scripted_llm import RecordedRequest, ScriptedLLMServer, ScriptedReply
from confide.types import MemoryFilter, MemoryState

ACCOUNT = "bench-acct"
KEK = bytes(range(32))
CAP = 10
_IDS = re.compile(r"\[([0-9a-f-]{36})\]")


def responder(delay: float) -> Any:
    """The scripted model: a memory paragraph, or a decision deleting the oldest listed."""

    def answer(request: RecordedRequest) -> ScriptedReply:
        prompt = request.messages[-1]["content"] if request.messages else ""
        if "New memory:" in prompt:
            body = {"action": "delete", "targetMemoryId": _IDS.findall(prompt)[0],
                    "reason": "oldest and least useful"}  # fmt: skip
            return ScriptedReply(content=json.dumps(body), delay=delay)
        return ScriptedReply(
            content="The user prefers short answers. The export bug was fixed; tests remain.",
            delay=delay,
        )

    return answer


def messages(app: int, n: int) -> list[dict[str, str]]:
    """A short conversation (about 300 characters)."""
    return [
        {"role": "user", "content": f"In app {app} I prefer plan {n} for the weekly report."},
        {"role": "assistant", "content": "Noted. Anything else?"},
        {"role": "user", "content": f"We fixed export bug {n} today. Next we need tests."},
        {"role": "assistant", "content": "Great, I will remember that."},
    ]


async def end(apps: AppMemories, app_id: str, n: int, app: int = 0) -> float:
    """End conversation ``n`` of ``app_id``; seconds it took."""
    start = time.perf_counter()
    await apps.end_conversation(
        account_id=ACCOUNT, app_id=app_id, conversation_id=f"c{n}", messages=messages(app, n)
    )
    return time.perf_counter() - start


async def creation(engine: MemoryEngine, ends: int, delay: float) -> dict[str, Any]:
    """End-to-end latency of an end that writes a memory and compacts a full scope."""
    with ScriptedLLMServer(responder=responder(delay)) as server:
        llm = OpenAICompatibleLLM(base_url=server.base_url, model="scripted")
        apps = AppMemories(engine, llm=llm)
        for n in range(CAP):
            await end(apps, "creation", n)
        samples = [
            await end(apps, "creation", CAP + n) for n in counted(range(ends), "creation", "ends")
        ]
        calls = len(server.requests)
    assert len(apps.memories(ACCOUNT, "creation")) == CAP
    return {
        "ends": ends,
        "llm_delay_s": delay,
        "llm_calls": calls,
        "p50_ms": round(pct_ms(samples, 0.5), 2),
        "p95_ms": round(pct_ms(samples, 0.95), 2),
        "mean_ms": round(statistics.fmean(samples) * 1000, 2),
    }


def context(engine: MemoryEngine, calls: int = 500) -> dict[str, Any]:
    """Latency of the context text of a full app."""
    apps = AppMemories(engine, llm=None)
    samples = []
    text = ""
    for _ in counted(range(calls), "context", "calls"):
        start = time.perf_counter()
        text = apps.context(ACCOUNT, "creation")
        samples.append(time.perf_counter() - start)
    return {
        "calls": calls,
        "chars": len(text),
        "p50_ms": round(pct_ms(samples, 0.5), 3),
        "p95_ms": round(pct_ms(samples, 0.95), 3),
    }


async def scale(
    engine: MemoryEngine, n_apps: int, conversations: int, concurrency: int, use_llm: bool
) -> dict[str, Any]:
    """Many apps, each ending many conversations, several apps at a time."""
    server = ScriptedLLMServer(responder=responder(0.0)).start() if use_llm else None
    try:
        llm = (
            None
            if server is None
            else OpenAICompatibleLLM(base_url=server.base_url, model="scripted")
        )
        apps = AppMemories(engine, llm=llm)
        gate = asyncio.Semaphore(concurrency)
        done = 0

        with progress_bar("scale", "ends") as progress:

            async def one_app(app: int) -> None:
                nonlocal done
                for n in range(conversations):
                    async with gate:
                        await end(apps, f"app-{app:04d}", n, app)
                    done += 1
                    progress(done, n_apps * conversations)

            start = time.perf_counter()
            await asyncio.gather(*(one_app(a) for a in range(n_apps)))
            seconds = time.perf_counter() - start
    finally:
        if server is not None:
            server.stop()
    problems = 0
    for app in range(n_apps):
        app_id = f"app-{app:04d}"
        kept = apps.memories(ACCOUNT, app_id)
        every = engine.list_memories(
            MemoryFilter(
                account_id=ACCOUNT,
                user_id=f"app:{app_id}",
                app_id=app_id,
                states=(MemoryState.ACTIVE, MemoryState.SOFT_DELETED),
            ),
            limit=10_000,
        )
        written = sorted(m.metadata["conversation_id"] for m in every)
        expected = sorted(f"c{n}" for n in range(conversations))
        newest = {f"c{n}" for n in range(conversations - CAP, conversations)}
        ok = len(kept) == min(CAP, conversations) and written == expected
        if not use_llm:
            ok = ok and {m.metadata["conversation_id"] for m in kept} == newest
        problems += not ok
    ends = n_apps * conversations
    return {
        "apps": n_apps,
        "conversations_per_app": conversations,
        "ends": ends,
        "llm": "scripted, no delay" if use_llm else "none (offline paragraph, FIFO)",
        "concurrency": concurrency,
        "seconds": round(seconds, 1),
        "ends_per_s": round(ends / seconds, 1),
        "scopes_at_cap_and_complete": n_apps - problems,
        "scopes_with_problems": problems,
    }


def run(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every part on one backend."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        bench_storage(kind, Path(tmp), pool_max=16) as storage,
    ):
        settings = Settings(home=Path(tmp) / "home", encryption_key=KEK.hex())
        engine = MemoryEngine(storage, KeyRing(primary=KEK), settings=settings)
        result: dict[str, Any] = {"backend": kind}
        result["creation"] = asyncio.run(creation(engine, args.ends, args.llm_delay))
        result["context"] = context(engine)
        result["scale"] = asyncio.run(
            scale(engine, args.apps, args.conversations, args.concurrency, args.scale_llm)
        )
        return result


def main() -> None:
    """Run the benchmark and print one JSON document per backend."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="sqlite")
    parser.add_argument("--apps", type=int, default=200)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--ends", type=int, default=50)
    parser.add_argument("--llm-delay", type=float, default=0.0)
    parser.add_argument("--scale-llm", action="store_true")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    kinds = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    results = []
    for kind in kinds:
        result = run(kind, args)
        print(json.dumps(result, indent=2))
        results.append(result)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
