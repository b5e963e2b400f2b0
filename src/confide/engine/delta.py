"""The delta header: what changed in a user's memory since an agent last looked.

``Memory updates since rev {X}:`` then at most ``thread_header_bullets`` (3) bullets, newest
first, one per memory, e.g. ``- +created: [Preference] Preferred name is Ana (imp=2)``. A
bullet is built from the memory's opened value, and only from memories the reader may see:
the reader's own user in the reader's account (a thread named by a caller may hold other
users' changes; they are never shown), in the categories the reader is allowed.

:meth:`EngineDeltas.deliver_delta` is what an agent gets: it moves the reader's seen revision
of the thread to the current one in the same step that picks the changes (a compare-and-set,
so of two racing deliveries exactly one shows a change), so each change shows once.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from confide.engine.core import EngineCore, default_thread
from confide.storage.base import ChangeRow, MemoryRow
from confide.types import HistoryEventType, MemoryState

__all__ = ["DELTA_SYMBOLS", "EngineDeltas", "category_label"]

DELTA_SYMBOLS: dict[HistoryEventType, str] = {
    HistoryEventType.ADD: "+created",
    HistoryEventType.UPDATE: "↑updated",
    HistoryEventType.MERGE: "↔merged",
    HistoryEventType.DELETE: "−deleted",
    HistoryEventType.TTL: "⌛expired",
    HistoryEventType.RESTORE: "⤺restored",
}
"""The change-log events the header shows, and their symbols (others, like a visibility
change, are not news to the agent)."""

_SCAN = 50
"""Change-log entries read to find the newest bullets (others' changes are skipped)."""
_MAX_TEXT = 160
_SHORT_VALUE_WORDS = 2


def category_label(category: str | None, memory_type: str) -> str:
    """``"follow_up"`` -> ``"Follow up"``: a memory's category (else its type) as a label."""
    name = (category or memory_type).replace("_", " ").replace("-", " ").strip()
    return name[:1].upper() + name[1:]


def _phrase(key: str, value: str) -> str:
    """The memory as a short statement: a one- or two-word value reads with its key
    (``preferred_name`` = ``Ana`` -> ``Preferred name is Ana``); a longer one as it is."""
    text = " ".join(value.split())
    words = key.split(".")[0].replace("_", " ").replace("-", " ").strip()
    if len(text.split()) <= _SHORT_VALUE_WORDS and words and words.lower() not in text.lower():
        text = f"{words[:1].upper()}{words[1:]} is {text}"
    if len(text) > _MAX_TEXT:
        text = text[: _MAX_TEXT - 1].rstrip() + "…"
    return text


class EngineDeltas(EngineCore):
    """The delta header over the change log (see the module docstring)."""

    def delta_since(
        self,
        thread_id: str,
        rev: int,
        *,
        account_id: str,
        user_id: str,
        categories: Collection[str] | None = None,
        upto: int | None = None,
    ) -> str:
        """The header for changes after ``rev`` (up to ``upto``), or ``""`` when none of
        them is the reader's to see.

        Only memories of ``user_id`` in ``account_id`` count, and with ``categories`` only
        those whose category (else type) is listed. Each memory gets one bullet: its newest
        change, shown as ``+created`` when the memory was also created in the range.
        """
        changes = self.storage.changes_since(
            thread_id, rev, _SCAN, account_id=account_id, upto=upto
        )
        changes = [c for c in changes if c.event in _SYMBOL_OF_VALUE]
        if not changes:
            return ""
        rows = {
            r.id: r for r in self.storage.get_memories(account_id, [c.memory_id for c in changes])
        }
        picked = self._newest_per_memory(changes, rows, user_id, categories)
        drafted = [self._bullet(change, row) for change, row in picked]
        bullets = [b for b in drafted if b is not None][: self.settings.thread_header_bullets]
        if not bullets:
            return ""
        return "\n".join([f"Memory updates since rev {rev}:", *bullets])

    def has_unseen_delta(
        self, *, account_id: str, user_id: str, reader: str, thread_id: str | None = None
    ) -> bool:
        """Whether the thread changed since ``reader``'s last delivery (one read; nothing is
        marked seen). ``thread_id`` defaults to the user's own thread. The changes may still
        all be outside what the reader may see: :meth:`deliver_delta` decides that."""
        thread = thread_id or default_thread(account_id, user_id)
        return self.storage.unseen(account_id, thread, reader)

    def deliver_delta(
        self,
        *,
        account_id: str,
        user_id: str,
        reader: str,
        categories: Collection[str] | None = None,
        thread_id: str | None = None,
    ) -> str:
        """The header of the changes ``reader`` has not seen yet, marking them seen.

        ``thread_id`` defaults to the user's own thread (:func:`default_thread`). Returns
        ``""`` when nothing changed since the reader's last delivery, or nothing it may see.
        """
        thread = thread_id or default_thread(account_id, user_id)
        if not self.has_unseen_delta(
            account_id=account_id, user_id=user_id, reader=reader, thread_id=thread
        ):
            return ""  # the usual answer, from one read: no write lock on the query path
        with self.storage.transaction() as tx:
            claimed = tx.advance_read(account_id, thread, reader)
        if claimed is None:
            return ""
        seen, current = claimed
        return self.delta_since(
            thread,
            seen,
            account_id=account_id,
            user_id=user_id,
            categories=categories,
            upto=current,
        )

    def _newest_per_memory(
        self,
        changes: Sequence[ChangeRow],
        rows: dict[str, MemoryRow],
        user_id: str,
        categories: Collection[str] | None,
    ) -> list[tuple[ChangeRow, MemoryRow]]:
        wanted = None if categories is None else set(categories)
        newest: dict[str, tuple[ChangeRow, MemoryRow]] = {}
        created: set[str] = set()
        for change in changes:  # newest first
            row = rows.get(change.memory_id)
            if row is None or row.user_id != user_id:
                continue  # erased, or another user's: never shown
            if wanted is not None and (row.category or row.type) not in wanted:
                continue
            newest.setdefault(row.lineage_id, (change, row))
            if change.event == HistoryEventType.ADD.value:
                created.add(row.lineage_id)
        out: list[tuple[ChangeRow, MemoryRow]] = []
        for lineage, (change, row) in newest.items():
            if lineage in created and change.event in _REVISIONS:
                # Created and then revised since the reader looked: news of a new memory.
                change = ChangeRow(
                    change.thread_id, change.rev, change.memory_id, "ADD", change.meta, change.ts
                )
            out.append((change, row))
        return out

    def _bullet(self, change: ChangeRow, row: MemoryRow) -> str | None:
        symbol = _SYMBOL_OF_VALUE[change.event]
        label = category_label(row.category, row.type)
        if row.state == MemoryState.PURGED.value:
            return f"- {symbol}: [{label}] (removed)"
        contents = self.try_open_contents(row)
        if contents is None:
            return None  # failed authentication: counted, never shown
        if change.event in _GONE or row.state == MemoryState.SOFT_DELETED.value:
            # A forgotten or expired memory is named by its key: its value is out of every
            # answer from then on, the header included.
            named = contents.key.split(".")[0].replace("_", " ")
            return f"- {symbol}: [{label}] {named} (imp={row.importance})"
        return (
            f"- {symbol}: [{label}] {_phrase(contents.key, contents.value)} (imp={row.importance})"
        )


_SYMBOL_OF_VALUE = {event.value: symbol for event, symbol in DELTA_SYMBOLS.items()}
_REVISIONS = {HistoryEventType.UPDATE.value, HistoryEventType.MERGE.value}
_GONE = {HistoryEventType.DELETE.value, HistoryEventType.TTL.value}
