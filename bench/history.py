"""Chat history benchmark: ``retrieve`` latency, rolling summaries and long-range recall.

Usage: python bench/history.py [--backend sqlite|postgres|both] [--messages 300]
                               [--retrieves 100] [--json OUT]

For each backend, one generated conversation of ``--messages`` messages (user and
assistant alternating) is saved through :class:`confide.chat.ChatMemory` with the local
MiniLM embedder and the offline summariser; after every message the summary check runs as
the service runs it after each POST. Eighteen facts are stated only in the first 40 messages
(twelve phrased as the offline rules recognise them, six phrased as they do not, reported
apart as ``recall_free_phrased``); the rest is small talk. After the last message:

* ``retrieve`` p50/p95 over ``--retrieves`` calls with distinct inputs, so each embeds
  its input (the embedder's query cache never hits; goal: p95 <= 30 ms);
* the summaries made and their ranges;
* recall: the share of the facts whose answer word appears in what ``retrieve``
  returns (messages or context messages) when asked about it (goal >= 0.8). The stated
  facts left the 20-message window long before, so only the memory tiers can bring them.

The conversation has no subject, so no fact reaches the history through the subject's
facts section: recall measures the search tiers alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from _engine_side import bench_storage, pct_ms
from _progress import counted
from confide.chat import ChatMemory
from confide.chat.summaries import OfflineSummariser
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.embedders import build_embedder
from confide.engine import MemoryEngine
from confide.index.vectors import VectorIndexer
from confide.storage.chat import SqlMessageTables

ACCOUNT = "bench-acct"
USER = "user-1"
CONVERSATION = "conv-bench"
KEK = bytes(range(32))

# (statement, question asked after the last message, answer word that shows it surfaced)
FACTS = (
    ("My dog is called Biscuit.", "What is my dog called again?", "Biscuit"),
    ("My daughter Imogen lives in Leeds.", "Where does my daughter live?", "Leeds"),
    ("I love painting watercolours.", "What do I love painting?", "watercolours"),
    ("My favourite food is lasagne.", "What is my favourite food?", "lasagne"),
    ("I grew up in Aberdeen.", "Do you remember where I grew up?", "Aberdeen"),
    ("My cat is named Pepper.", "What is my cat named?", "Pepper"),
    ("My husband Gerald passed away in 2019.", "When did my husband pass away?", "2019"),
    ("My son Felix is a pilot.", "What does my son Felix do for a living?", "pilot"),
    ("I am allergic to penicillin.", "What am I allergic to?", "penicillin"),
    ("My best friend is called Marjorie.", "Who is my best friend?", "Marjorie"),
    ("I used to teach geography.", "What subject did I used to teach?", "geography"),
    ("I work as a nurse at the hospital.", "Where do I work?", "nurse"),
)
# Facts phrased as the offline rules do not know them: what recall is on someone else's
# conversation depends on these, not on the phrasings above.
FREE_FACTS = (
    ("I keep bees on my allotment.", "What do I keep on my allotment?", "bees"),
    ("Our caravan is parked in Whitby every summer.", "Where is our caravan in summer?", "Whitby"),
    ("My granddaughter Zoe is studying law in Bristol.", "What is Zoe studying?", "law"),
    ("I drive a red Honda Jazz these days.", "What car do I drive?", "Honda"),
    ("Every Thursday I volunteer at the food bank.", "Where do I volunteer?", "food bank"),
    ("My late mother was born in Cork.", "Where was my mother born?", "Cork"),
)
STATED = FACTS + FREE_FACTS
_USER_SMALL_TALK = (
    "The weather was grey this morning.",
    "I had toast for breakfast today.",
    "We watched the birds in the garden.",
    "The radio played some old songs.",
    "It was quiet on the street earlier.",
    "I tidied the kitchen after lunch.",
    "The post came late again.",
    "I read a few pages of a novel.",
)
_ASSISTANT = (
    "That sounds pleasant.",
    "Tell me more about it.",
    "How did that make you feel?",
    "I am glad to hear that.",
    "What else happened today?",
)


def conversation(n: int, seed: int = 11) -> list[tuple[str, str]]:
    """``n`` messages ``(role, text)``: the facts among the first 40, then small talk."""
    rng = random.Random(seed)
    user_turns = [rng.choice(_USER_SMALL_TALK) for _ in range(max(n, 40))]
    slots = sorted(rng.sample(range(20), len(STATED)))  # user turns 0..19 = messages 0..38
    stated = list(STATED)
    rng.shuffle(stated)
    for slot, (statement, _, _) in zip(slots, stated, strict=True):
        user_turns[slot] = statement
    out = []
    for i in range(n):
        if i % 2 == 0:
            out.append(("user", user_turns[i // 2]))
        else:
            out.append(("assistant", rng.choice(_ASSISTANT)))
    return out


def run(kind: str, messages: int, retrieves: int, workdir: Path) -> dict[str, Any]:
    """Measure one backend."""
    settings = Settings(home=workdir / "home")
    embedder = build_embedder("local:all-MiniLM-L6-v2")
    assert embedder is not None
    with bench_storage(kind, workdir) as storage:
        engine = MemoryEngine(storage, KeyRing(primary=KEK), settings=settings)
        # As Confide.open wires it: relation edges to the closest memories on every write.
        engine.add_indexer(
            VectorIndexer(
                storage, embedder, link_top_k=settings.link_top_k, link_min=settings.link_min
            )
        )
        chat = ChatMemory(engine, embedder=embedder, summariser=OfflineSummariser())
        save: list[float] = []
        summarise: list[float] = []
        for role, text in counted(conversation(messages), f"{kind} messages", "messages"):
            started = time.perf_counter()
            chat.add_message(
                {
                    "account_id": ACCOUNT,
                    "user_id": USER,
                    "conversation_id": CONVERSATION,
                    "role": role,
                    "content": text,
                }
            )
            save.append(time.perf_counter() - started)
            started = time.perf_counter()
            outcome = asyncio.run(
                chat.summarise_if_due(account_id=ACCOUNT, conversation_id=CONVERSATION)
            )
            if outcome is not None:
                summarise.append(time.perf_counter() - started)
        ranges = [
            (s.range_start, s.range_end)
            for s in SqlMessageTables(engine.storage).summaries(ACCOUNT, CONVERSATION)
        ]

        def ask(question: str) -> str:
            history = chat.retrieve(
                question, account_id=ACCOUNT, user_id=USER, conversation_id=CONVERSATION
            )
            parts = [m["content"] for m in history.messages]
            parts += [c.content for c in history.context_messages]
            return "\n".join(parts)

        surfaced = [answer in ask(question) for _, question, answer in STATED]
        free = surfaced[len(FACTS) :]
        # Every input distinct, so each call embeds (the embedder's query cache never hits).
        inputs = [f"{text} ({i})" for i, (_, text) in enumerate(conversation(retrieves + 1, 5))]
        ask(inputs.pop())  # warm up (first embedding, connections)
        latencies = []
        for text in counted(inputs[:retrieves], f"{kind} retrieve", "calls"):
            started = time.perf_counter()
            ask(text)
            latencies.append(time.perf_counter() - started)
    return {
        "backend": kind,
        "messages": messages,
        "save_p50_ms": round(pct_ms(save, 0.5), 2),
        "save_p95_ms": round(pct_ms(save, 0.95), 2),
        "summaries": len(ranges),
        "ranges": ranges,
        "summary_p50_ms": round(pct_ms(summarise, 0.5), 2) if summarise else None,
        "retrieve_calls": len(latencies),
        "retrieve_p50_ms": round(pct_ms(latencies, 0.5), 2),
        "retrieve_p95_ms": round(pct_ms(latencies, 0.95), 2),
        "facts": len(STATED),
        "recalled": sum(surfaced),
        "recall": round(sum(surfaced) / len(STATED), 3),
        "recall_free_phrased": round(sum(free) / len(FREE_FACTS), 3),
        "missed": [answer for (_, _, answer), ok in zip(STATED, surfaced, strict=True) if not ok],
    }


def main() -> None:
    """Run the benchmark and print its figures (and JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--retrieves", type=int, default=100)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    kinds = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    results = []
    for kind in kinds:
        with tempfile.TemporaryDirectory(prefix="confide-history-") as tmp:
            result = run(kind, args.messages, args.retrieves, Path(tmp))
        results.append(result)
        print(
            f"{kind:8} retrieve p50 {result['retrieve_p50_ms']:.1f} ms, "
            f"p95 {result['retrieve_p95_ms']:.1f} ms (goal p95 <= 30 ms, embedding included); "
            f"save p50 {result['save_p50_ms']:.1f} ms; "
            f"summaries {result['summaries']} {result['ranges']}; "
            f"recall {result['recalled']}/{result['facts']} = {result['recall']:.2f} "
            f"(goal >= 0.8; phrasings the offline rules do not know: "
            f"{result['recall_free_phrased']:.2f}) missed {result['missed']}"
        )
    payload = json.dumps({"bench": "history", "results": results}, indent=2)
    print(payload)
    if args.json is not None:
        args.json.write_text(payload + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
