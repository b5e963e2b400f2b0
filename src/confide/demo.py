"""``confide demo``: a short tour of the store on the configured (default: embedded) backend.

The tour ends with ``memory_query``. It is repeatable: a user the demo has written before is
not written again, so a second run stores nothing and says so; it shows no changes then (it
made none), and the answer's header of changes the agent had not seen comes with the first
answer only, so the results' tokens are counted apart from it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confide.engine import MemoryEngine, default_thread
from confide.retrieval.memory_query import MemoryQueryResult, header_tokens
from confide.types import MemoryFilter, MemoryState, MemoryType

ACCOUNT = "demo-account"
QUESTION = "What is the name of Ali's dog?"


Query = Callable[[dict[str, Any]], MemoryQueryResult]
"""``memory_query`` (``Confide.query``): a request's fields in, the answer out."""


def run_demo(
    engine: MemoryEngine, echo: Callable[[str], None] = print, *, query: Query | None = None
) -> None:
    """Store, update, forget, restore and list memories for two users; print their history.

    Then, given ``query``, ask ``memory_query`` a question about the first user and print
    the ranked answer. Users stored by an earlier run are left as they are.
    """
    users = {
        "alice": [
            ("preferred_name", "Alice prefers to be called Ali.", MemoryType.PREFERENCE),
            ("dog_name", "Ali has a dog named Biscuit.", MemoryType.FACT),
            ("doctor_visit", "Ali sees her doctor on Thursday at 10am.", MemoryType.FOLLOW_UP),
        ],
        "bob": [
            ("hometown", "Bob grew up in Lisbon.", MemoryType.HISTORY),
            ("coffee", "Bob drinks his coffee black.", MemoryType.PREFERENCE),
        ],
    }
    for user, items in users.items():
        echo(f"== {user} ==")
        first_key = items[0][0]
        thread = default_thread(ACCOUNT, user)
        before = engine.current_rev(thread)
        written_before = _written_before(engine, user)
        if written_before:
            echo("stored by an earlier run: nothing new stored")
        else:
            _tour(engine, user, items, echo)
        echo("active memories:")
        for memory in engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id=user)):
            echo(f"  - [{memory.type.value}] {memory.key}: {memory.value} (v{memory.version})")
        first = engine.get_by_key(account_id=ACCOUNT, user_id=user, key=first_key)
        if first is not None:
            echo(f"history of {first_key} (newest first):")
            for event in engine.history(first.id, account_id=ACCOUNT):
                echo(
                    f"  {event.ts:%H:%M:%S} {event.event.value:<8} "
                    f"old={_short(event.old_ref)} new={_short(event.new_ref)} by {event.actor}"
                )
        if not written_before:
            # What an agent's next answer would be told changed: this run's changes only.
            echo(engine.delta_since(thread, before, account_id=ACCOUNT, user_id=user))
        echo("")
    if query is not None:
        _ask(query, echo)


def _written_before(engine: MemoryEngine, user: str) -> bool:
    everything = MemoryFilter(account_id=ACCOUNT, user_id=user, states=tuple(MemoryState))
    return bool(engine.list_memories(everything, limit=1))


def _tour(
    engine: MemoryEngine,
    user: str,
    items: list[tuple[str, str, MemoryType]],
    echo: Callable[[str], None],
) -> None:
    stored = {
        key: engine.store(
            {
                "account_id": ACCOUNT,
                "user_id": user,
                "key": key,
                "value": value,
                "type": kind,
                "source": "api",
            },
            actor="demo",
        )
        for key, value, kind in items
    }
    for memory in stored.values():
        echo(f"stored   {memory.key:<15} v{memory.version}  {memory.value}")
    updated, _ = engine.update_by_key(
        account_id=ACCOUNT,
        user_id=user,
        key=items[0][0].upper(),  # key look-up is case-insensitive
        value=items[0][1].replace(".", " (updated)."),
        actor="demo",
    )
    echo(f"updated  {updated.key:<15} v{updated.version}  {updated.value}")
    last = stored[items[-1][0]]
    engine.forget(last.id, account_id=ACCOUNT, actor="demo")
    echo(f"forgot   {last.key}")
    engine.restore(last.id, account_id=ACCOUNT, actor="demo")
    echo(f"restored {last.key}")
    engine.forget(last.id, account_id=ACCOUNT, actor="demo")
    echo(f"forgot   {last.key} again (restorable until it is purged)")


def _ask(query: Query, echo: Callable[[str], None]) -> None:
    """Ask ``memory_query`` about alice and print what an agent would get, ranked."""
    echo(f'== memory_query for alice: "{QUESTION}" ==')
    answer = query(
        {
            "agent": "default",
            "account_id": ACCOUNT,
            "user_id": "alice",
            "query": QUESTION,
            "top_k": 2,
            "return": "full",
        }
    )
    if answer.header:
        echo("  header: the changes this agent had not been shown yet (delivered once)")
        for line in answer.header.splitlines():
            echo(f"    {line}")
    for item in answer.results:
        category = item["category"] or item["type"]
        why = (
            "always included (context: all)"
            if item.get("context") == "all"
            else f"score {item['score']:.2f}"
        )
        echo(f"  [{category}] {item['value']}  <- {why}")
    header = header_tokens(answer.header)
    echo(
        f"({answer.tokens - header} tokens for the results: the ranked ones first, then the "
        "'context: all' categories" + (f"; {header} more for the header" if header else "") + ")"
    )


def _short(ref: str | None) -> str:
    return "-" if ref is None else ref[:8]
