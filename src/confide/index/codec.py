"""Conversion between decrypted :class:`Memory` objects and encrypted storage rows.

A row holds its key only blinded (see :func:`confide.crypto.envelope.blind_key`); the key itself
is sealed with the value, tags and metadata. The sealed payload is bound to the row's owner, id
and to the columns that decide who sees it and how it is found (blinded key, visibility, type,
category, subject), so changing any of them in the database makes the row fail to open with
:class:`TamperedRowError` instead of leaking or misfiling it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from confide.crypto.envelope import Envelope, SealedValue, is_blinded
from confide.errors import IntegrityError, TamperedRowError
from confide.storage.base import MemoryRow
from confide.types import Memory, MemoryState, MemoryType, Source, Visibility


def to_ts(when: datetime | None) -> float | None:
    """A datetime as epoch seconds (``None`` stays ``None``)."""
    return None if when is None else when.timestamp()


def from_ts(ts: float | None) -> datetime | None:
    """Epoch seconds as an aware UTC datetime."""
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def _required_ts(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


@dataclass(frozen=True, slots=True)
class Contents:
    """The private part of a memory, decrypted: value, tags, metadata and its clear key."""

    value: str
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    key: str


def binding(
    stored_key: str, visibility: str, type: str, category: str | None, subject_id: str | None
) -> str:
    """The row columns a sealed value is bound to, as the text that goes into its AAD."""
    # Each column with its length, so no value can shift a boundary between two columns, and
    # None ("~") differs from "" ("0:"). Read for every row a query opens: kept cheap.
    parts = (stored_key, visibility, type, category, subject_id)
    return "row/1\x1f" + "\x1f".join("~" if p is None else f"{len(p)}:{p}" for p in parts)


def row_binding(row: MemoryRow) -> str:
    """The binding of a stored row (see :func:`binding`)."""
    return binding(row.key, row.visibility, row.type, row.category, row.subject_id)


class MemoryCodec:
    """Seals a memory's private payload (key, value, tags, metadata) and opens it again.

    ``legacy`` lets rows of a store written before keys were blinded (clear key column,
    unbound payload) still open; the engine turns it off once its upgrade has re-sealed them,
    so an old unbound ciphertext put back into the table is refused from then on.
    """

    def __init__(self, envelope: Envelope, *, legacy: bool = False) -> None:
        self._envelope = envelope
        self.legacy = legacy

    def seal(self, memory: Memory, user_key: bytes, stored_key: str) -> SealedValue:
        """Encrypt the private payload of ``memory`` bound to its owner, id and row columns.

        ``stored_key`` is the memory's blinded key (what the row's key column holds).
        """
        return self.seal_contents(
            Contents(memory.value, memory.tags, memory.metadata, memory.key),
            user_key,
            account_id=memory.account_id,
            user_id=memory.user_id,
            record_id=memory.id,
            bound=binding(
                stored_key,
                memory.visibility.value,
                memory.type.value,
                memory.category,
                memory.subject_id,
            ),
        )

    def seal_contents(
        self,
        contents: Contents,
        user_key: bytes,
        *,
        account_id: str,
        user_id: str,
        record_id: str,
        bound: str,
    ) -> SealedValue:
        """Encrypt decrypted contents again, bound to ``bound`` (see :func:`binding`)."""
        payload = json.dumps(
            {
                "k": contents.key,
                "v": contents.value,
                "t": list(contents.tags),
                "m": contents.metadata,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()
        return self._envelope.seal(user_key, payload, account_id, user_id, record_id, binding=bound)

    def to_row(self, memory: Memory, key_id: str, user_key: bytes, stored_key: str) -> MemoryRow:
        """The storage row of ``memory``: key blinded (``stored_key``), the rest sealed."""
        sealed = self.seal(memory, user_key, stored_key)
        return MemoryRow(
            id=memory.id,
            account_id=memory.account_id,
            user_id=memory.user_id,
            agent_id=memory.agent_id,
            run_id=memory.run_id,
            actor_id=memory.actor_id,
            role=memory.role,
            subject_id=memory.subject_id,
            type=memory.type.value,
            category=memory.category,
            key=stored_key,
            confidence=memory.confidence,
            importance=memory.importance,
            source=memory.source.value,
            visibility=memory.visibility.value,
            pinned=memory.pinned,
            state=memory.state.value,
            version=memory.version,
            row_version=memory.row_version,
            supersedes_id=memory.supersedes_id,
            lineage_id=memory.lineage_id,
            created_at=memory.created_at.timestamp(),
            updated_at=memory.updated_at.timestamp(),
            last_accessed_at=to_ts(memory.last_accessed_at),
            purge_at=to_ts(memory.purge_at),
            expires_at=to_ts(memory.expires_at),
            app_id=memory.app_id,
            key_id=key_id,
            ciphertext=sealed.ciphertext,
            wrapped_key=sealed.wrapped_key,
        )

    def open(self, row: MemoryRow, user_key: bytes) -> Memory:
        """Decrypt a row; :class:`TamperedRowError` if its ciphertext or a bound column was
        changed."""
        return self.memory(row, self.contents(row, user_key))

    def contents(self, row: MemoryRow, user_key: bytes) -> Contents:
        """Decrypt only the private part of a row (what ranking reads); see :meth:`open`."""
        if row.state == MemoryState.PURGED.value:
            # A tombstone keeps no ciphertext: its clear key is gone with its value.
            return Contents("", (), {}, row.key)
        blinded = is_blinded(row.key)
        if not blinded and not self.legacy:
            raise TamperedRowError(f"memory {row.id} has a clear key in an upgraded store")
        try:
            raw = self._envelope.open(
                user_key,
                SealedValue(row.ciphertext, row.wrapped_key),
                row.account_id,
                row.user_id,
                row.id,
                binding=row_binding(row) if blinded else None,
            )
        except IntegrityError as exc:
            raise TamperedRowError(f"memory {row.id} failed authentication") from exc
        try:
            payload = json.loads(raw)
            key = str(payload["k"]) if blinded else row.key
            return Contents(str(payload["v"]), tuple(payload["t"]), dict(payload["m"]), key)
        except (ValueError, KeyError, TypeError):
            raise TamperedRowError(f"memory {row.id} holds no valid payload") from None

    @staticmethod
    def memory(row: MemoryRow, contents: Contents) -> Memory:
        """The :class:`Memory` of a row whose contents were decrypted with :meth:`contents`."""
        return Memory.model_construct(
            id=row.id,
            account_id=row.account_id,
            user_id=row.user_id,
            agent_id=row.agent_id,
            run_id=row.run_id,
            actor_id=row.actor_id,
            role=row.role,
            subject_id=row.subject_id,
            type=MemoryType(row.type),
            category=row.category,
            key=contents.key,
            value=contents.value,
            confidence=row.confidence,
            importance=row.importance,
            source=Source(row.source),
            visibility=Visibility(row.visibility),
            pinned=row.pinned,
            state=MemoryState(row.state),
            version=row.version,
            row_version=row.row_version,
            supersedes_id=row.supersedes_id,
            lineage_id=row.lineage_id,
            tags=contents.tags,
            metadata=contents.metadata,
            created_at=_required_ts(row.created_at),
            updated_at=_required_ts(row.updated_at),
            last_accessed_at=from_ts(row.last_accessed_at),
            purge_at=from_ts(row.purge_at),
            expires_at=from_ts(row.expires_at),
            app_id=row.app_id,
        )
