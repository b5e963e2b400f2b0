"""Conversion between decrypted :class:`Memory` objects and encrypted storage rows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engram.crypto.envelope import Envelope, SealedValue
from engram.errors import IntegrityError
from engram.storage.base import MemoryRow
from engram.types import Memory, MemoryState, MemoryType, Source, Visibility


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
    """The private part of a memory, decrypted: value, tags and metadata."""

    value: str
    tags: tuple[str, ...]
    metadata: dict[str, Any]


class MemoryCodec:
    """Seals a memory's private payload (value, tags, metadata) and opens it again."""

    def __init__(self, envelope: Envelope) -> None:
        self._envelope = envelope

    def seal(self, memory: Memory, user_key: bytes) -> SealedValue:
        """Encrypt the private payload of ``memory`` bound to its owner and id."""
        payload = json.dumps(
            {"v": memory.value, "t": list(memory.tags), "m": memory.metadata},
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()
        return self._envelope.seal(user_key, payload, memory.account_id, memory.user_id, memory.id)

    def to_row(self, memory: Memory, key_id: str, user_key: bytes) -> MemoryRow:
        """The storage row of ``memory``, value encrypted."""
        sealed = self.seal(memory, user_key)
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
            key=memory.key,
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
            key_id=key_id,
            ciphertext=sealed.ciphertext,
            wrapped_key=sealed.wrapped_key,
        )

    def open(self, row: MemoryRow, user_key: bytes) -> Memory:
        """Decrypt a row; :class:`IntegrityError` if its ciphertext was tampered with."""
        return self.memory(row, self.contents(row, user_key))

    def contents(self, row: MemoryRow, user_key: bytes) -> Contents:
        """Decrypt only the private part of a row (what ranking reads); see :meth:`open`."""
        if row.state == MemoryState.PURGED.value:
            return Contents("", (), {})
        raw = self._envelope.open(
            user_key,
            SealedValue(row.ciphertext, row.wrapped_key),
            row.account_id,
            row.user_id,
            row.id,
        )
        try:
            payload = json.loads(raw)
            return Contents(str(payload["v"]), tuple(payload["t"]), dict(payload["m"]))
        except (ValueError, KeyError, TypeError):
            raise IntegrityError("decrypted payload is not valid") from None

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
            key=row.key,
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
        )
