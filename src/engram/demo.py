"""``engram demo``: a short tour of the store on the configured (default: embedded) backend."""

from __future__ import annotations

from collections.abc import Callable

from engram.engine import MemoryEngine, default_thread
from engram.types import MemoryFilter, MemoryType

ACCOUNT = "demo-account"


def run_demo(engine: MemoryEngine, echo: Callable[[str], None] = print) -> None:
    """Store, update, forget, restore and list memories for two users; print their history."""
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
        first_key = items[0][0]
        updated, _ = engine.update_by_key(
            account_id=ACCOUNT,
            user_id=user,
            key=first_key.upper(),  # key look-up is case-insensitive
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
        echo("active memories:")
        for memory in engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id=user)):
            echo(f"  - [{memory.type.value}] {memory.key}: {memory.value} (v{memory.version})")
        echo(f"history of {first_key} (newest first):")
        for event in engine.history(updated.id, account_id=ACCOUNT):
            echo(
                f"  {event.ts:%H:%M:%S} {event.event.value:<8} "
                f"old={_short(event.old_ref)} new={_short(event.new_ref)} by {event.actor}"
            )
        thread = default_thread(ACCOUNT, user)
        echo(engine.delta_since(thread, max(0, engine.current_rev(thread) - 3)))
        echo("")


def _short(ref: str | None) -> str:
    return "-" if ref is None else ref[:8]
