"""The engine's core: writes, reads and the transaction that carries every version.

The engine depends only on protocols (``Storage``, ``Indexer``) and the envelope; it owns
validation, versioning, encryption and the audit trail, so every backend gets them alike.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Self

from confide.config import Settings
from confide.crypto.aead import AesGcmCipher
from confide.crypto.envelope import Envelope, SealedValue, is_blinded
from confide.crypto.keyring import KeyRing
from confide.engine.ops import OpsLog, op_row
from confide.errors import (
    ConflictError,
    IntegrityError,
    KeyMismatchError,
    KeyUnavailableError,
    NotFoundError,
    PreconditionFailedError,
    TamperedRowError,
    ValidationError,
)
from confide.index.codec import Contents, MemoryCodec, from_ts, row_binding
from confide.index.lexical import Indexer, LexicalIndexer
from confide.index.vectors import (
    RELATED,
    VectorEntry,
    VectorIndexer,
    VectorSeal,
    require_vector_indexer,
)
from confide.keys.owner_keys import OwnerKey, OwnerKeys
from confide.storage.base import (
    ChangeRow,
    HistoryRow,
    MemoryRow,
    OpRow,
    Page,
    SearchIndex,
    Storage,
    Transaction,
)
from confide.storage.keystore import KeyStore, SqlKeyStore
from confide.types import (
    ChangeEvent,
    HistoryEvent,
    HistoryEventType,
    Memory,
    MemoryFilter,
    MemoryPatch,
    MemoryState,
    MemoryType,
    NewMemory,
    OpEvent,
    Source,
    Visibility,
    utcnow,
    validated,
)

log = logging.getLogger(__name__)

EXPORT_FORMAT = "confide.export/1"
_LIVE = (MemoryState.ACTIVE.value, MemoryState.SOFT_DELETED.value)
_CHANGED_CONCURRENTLY = "the memory changed concurrently; read it and retry"
_HEAD_RELOCKS = 8
"""How often an in-place transition re-reads a head that was superseded while it waited."""
# Columns a sealed value is bound to that an in-place change may touch (it must re-seal).
_BOUND_IN_PLACE = frozenset({"visibility", "type", "category", "subject_id", "key"})


def default_thread(account_id: str, user_id: str) -> str:
    """The change-log thread of a user's memory when the caller names none."""
    return f"{account_id}/{user_id}"


MAX_OFFSET = 1_000_000_000
"""The largest listing offset (databases take 64-bit integers; no listing is that long)."""


@dataclass(frozen=True, slots=True)
class _Write:
    """One memory version to write, with the audit facts that go with it."""

    memory: Memory
    event: HistoryEventType
    old_ref: str | None
    thread_id: str
    actor: str | None
    meta: dict[str, Any]


class _StaleKey(Exception):
    """A writer's cached user key belongs to a generation an erasure has ended."""


class EngineCore:
    """Writes and reads of encrypted, versioned memories; see :class:`MemoryEngine`."""

    def __init__(
        self,
        storage: Storage,
        keyring: KeyRing,
        *,
        settings: Settings | None = None,
        indexers: Sequence[Indexer] = (),
        key_store: KeyStore | None = None,
    ) -> None:
        # Defaults, not the environment: only entry points (``open``) read the environment.
        self.settings = settings or Settings.defaults()
        self.storage = storage
        self.keyring = keyring
        # Without a key store of its own the engine keeps keys in the data database: fine
        # for tests and benchmarks, but a backup of the data then carries the keys.
        self.key_store: KeyStore = key_store or SqlKeyStore.colocated(storage)  # type: ignore[arg-type]
        self.envelope = Envelope(AesGcmCipher(), keyring)
        self.keys = OwnerKeys(
            storage, self.key_store, self.envelope, cache_size=self.settings.user_key_cache_size
        )
        self.codec = MemoryCodec(self.envelope)
        self.ops = OpsLog(storage)
        self.lexical = LexicalIndexer(self.keys)
        self.vector_seal = VectorSeal(self.keys, self.envelope.cipher)
        """Seals stored vectors under their owner's key where the store keeps them sealed."""
        self.indexers: list[Indexer] = [self.lexical]
        for indexer in indexers:
            self.add_indexer(indexer)
        self._integrity_lock = threading.Lock()
        self._integrity_failures = 0

    def close(self) -> None:
        """Release the storage's and the key store's connections."""
        self.ops.close()
        self.key_store.close()
        self.storage.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def integrity_failures(self) -> int:
        """How many stored rows failed authentication since this engine started."""
        with self._integrity_lock:
            return self._integrity_failures + self.vector_seal.failures

    def blind_key(self, account_id: str, key: str) -> str:
        """The stored (blinded) form of a memory key in this account; case-insensitive."""
        return self.keys.blind_key(account_id, key)

    def pseudonym(self, account_id: str, user_id: str) -> str:
        """The keyed pseudonym of a user id in this account: what a row stores to name the
        user without holding the id in clear (the provenance of an app memory, say)."""
        return self.keys.pseudonym(account_id, user_id)

    def seal_value(
        self,
        payload: bytes,
        *,
        account_id: str,
        user_id: str,
        record_id: str,
        key_id: str | None = None,
    ) -> tuple[str, SealedValue]:
        """Seal a payload that belongs to a user (a proposal, say) as memory values are.

        Under the user's current key, or the key ``key_id`` names when re-sealing a record;
        bound to owner and ``record_id``. Returns the key id and the sealed value.
        """
        if key_id is None:
            key_id, user_key = self.keys.user_key(account_id, user_id)
        else:
            user_key = self.keys.by_id(account_id, user_id, key_id)
        return key_id, self.envelope.seal(user_key, payload, account_id, user_id, record_id)

    def seal_for_write(
        self, payload: bytes, *, account_id: str, user_id: str, record_id: str
    ) -> tuple[str, int, SealedValue]:
        """Seal new data of a user as :meth:`seal_value` does, with the key's generation.

        The caller's write transaction must check the generation (``tx.key_generation``)
        and raise :class:`StaleKeyError` when it moved; :meth:`forget_user_key` then lets
        the next seal use the user's new key.
        """
        key = self.keys.current(account_id, user_id)
        sealed = self.envelope.seal(key.raw, payload, account_id, user_id, record_id)
        return key.key_id, key.generation, sealed

    def erased_since(
        self, account_id: str, user_id: str, since: float, *, tx: Transaction | None = None
    ) -> bool:
        """Whether the user was erased at or after ``since`` (wall-clock seconds).

        Work on data the user gave before an erasure (a call's extraction, say) asks this
        before it writes: inside its write transaction (``tx``) the answer holds until
        commit, as an erasure under way is waited for.
        """
        if tx is not None:
            erased = tx.erased_at(account_id, user_id)
        else:
            with self.storage.transaction() as own:
                erased = own.erased_at(account_id, user_id)
        return erased is not None and erased >= since

    def forget_user_key(self, account_id: str, user_id: str) -> None:
        """Drop this process's cached keys of a user (they were found destroyed)."""
        self.keys.forget(account_id, user_id)

    def open_value(
        self, sealed: SealedValue, *, account_id: str, user_id: str, record_id: str, key_id: str
    ) -> bytes:
        """Open what :meth:`seal_value` sealed; :class:`IntegrityError` if it does not open."""
        user_key = self.keys.by_id(account_id, user_id, key_id)
        return self.envelope.open(user_key, sealed, account_id, user_id, record_id)

    def add_indexer(self, indexer: Indexer) -> None:
        """Write ``indexer``'s rows with every future memory version.

        A :class:`VectorIndexer` gets this engine's keys to seal vectors with (and seals
        those an older version stored in clear; see :func:`seal_clear_vectors`).
        """
        if isinstance(indexer, VectorIndexer):
            indexer.seal_with(self.vector_seal)
        self.indexers.append(indexer)

    # ---- writes ----------------------------------------------------------------------------
    def store(
        self,
        new: NewMemory | Mapping[str, Any],
        *,
        actor: str | None = None,
        thread_id: str | None = None,
    ) -> Memory:
        """Store a new memory (version 1) and return it.

        Raises :class:`ValidationError` when a field is missing or out of range.
        """
        return self.store_many([new], actor=actor, thread_id=thread_id)[0]

    def store_many(
        self,
        items: Sequence[NewMemory | Mapping[str, Any]],
        *,
        actor: str | None = None,
        thread_id: str | None = None,
    ) -> list[Memory]:
        """Store several memories in one transaction (batch ingestion)."""
        writes = self._new_writes(items, utcnow(), actor, thread_id)
        self._commit_versions(writes)
        return [w.memory for w in writes]

    def commit_batch(
        self,
        *,
        new: Sequence[NewMemory | Mapping[str, Any]] = (),
        revisions: Sequence[tuple[Memory, MemoryPatch | Mapping[str, Any]]] = (),
        within: Callable[[Transaction, Sequence[Memory]], None] | None = None,
        actor: str | None = None,
        thread_id: str | None = None,
        forget: Sequence[Memory] = (),
        event: HistoryEventType = HistoryEventType.UPDATE,
        meta: Mapping[str, Any] | None = None,
        forget_event: HistoryEventType = HistoryEventType.DELETE,
    ) -> list[Memory]:
        """Store new memories and new versions of others, with ``within``'s writes, atomically.

        Everything (the memories, their index rows and audit, each revised head superseded,
        each memory of ``forget`` soft-deleted, and whatever ``within`` writes on the same
        transaction, called last with the transaction and the new versions) commits together
        or not at all: an embedder error, a failed ``within`` or a database failure stores
        nothing. Each revision and each forget is a compare-and-set on the head as the caller
        read it (:class:`ConflictError` when it moved). Revisions are audited as ``event``;
        ``meta`` (ids and codes, never memory text) is added to the audit of every revision
        and forget. Each forget is audited as ``forget_event``: ``DELETE`` (with a change-log
        entry), or ``MERGE`` for a memory merged into a revision of this batch (whose own
        change-log entry tells the thread; the merged memory stays restorable). Returns the
        new versions, new memories first.
        """
        now = utcnow()
        extra = dict(meta or {})
        writes = self._new_writes(new, now, actor, thread_id)
        heads = []
        for head in [*(h for h, _ in revisions), *forget]:
            if head.state != MemoryState.ACTIVE:
                raise ConflictError(f"memory {head.id} is {head.state.value}; restore it first")
        for head, patch in revisions:
            write = self._revision_write(head, patch, now, actor, thread_id, event)
            write.meta.update(extra)
            writes.append(write)
            heads.append(head)
        if forget:
            within = self._forgetting(
                forget, now, actor, thread_id, extra, within, event=forget_event
            )
        if not writes and within is not None:
            with self.storage.transaction() as tx:
                within(tx, [])
            return []
        self._commit_versions(writes, expected_heads=heads, within=within)
        return [w.memory for w in writes]

    def _forgetting(
        self,
        memories: Sequence[Memory],
        now: datetime,
        actor: str | None,
        thread_id: str | None,
        meta: dict[str, Any],
        then: Callable[[Transaction, Sequence[Memory]], None] | None,
        *,
        event: HistoryEventType = HistoryEventType.DELETE,
    ) -> Callable[[Transaction, Sequence[Memory]], None]:
        """A ``within`` that soft-deletes ``memories`` (compare-and-set), then runs ``then``."""
        purge_at = (now + timedelta(days=self.settings.soft_delete_retention_days)).timestamp()

        def forget_all(tx: Transaction, written: Sequence[Memory]) -> None:
            for memory in memories:
                head = self._lock_head(tx, memory.account_id, memory.lineage_id)
                read = (memory.id, memory.row_version, memory.state.value)
                if head is None or (head.id, head.row_version, head.state) != read:
                    raise ConflictError(_CHANGED_CONCURRENTLY)
                fields = {
                    "state": MemoryState.SOFT_DELETED.value,
                    "purge_at": purge_at,
                    "updated_at": now.timestamp(),
                }
                tx.update_memory(head.id, fields)
                audit = {"key": head.key, **meta}
                self._history(tx, head, event, head.id, head.id, actor, audit)
                if event == HistoryEventType.DELETE:
                    thread = thread_id or default_thread(head.account_id, head.user_id)
                    self._change(tx, head, thread, event, audit)
            if then is not None:
                then(tx, written)

        return forget_all

    def _new_writes(
        self,
        items: Sequence[NewMemory | Mapping[str, Any]],
        now: datetime,
        actor: str | None,
        thread_id: str | None,
    ) -> list[_Write]:
        """The writes of new memories stored together, a microsecond apart in their order.

        Distinct times keep a batch's order in the store: "oldest first" (a reindex) and the
        newest memory of a run (the predecessor of a turn stored later, for its ``adjacent``
        edge and run context) would otherwise be a tie broken by random ids.
        """
        return [
            self._new_write(item, now + timedelta(microseconds=position), actor, thread_id)
            for position, item in enumerate(items)
        ]

    def _new_write(
        self,
        item: NewMemory | Mapping[str, Any],
        now: datetime,
        actor: str | None,
        thread_id: str | None,
    ) -> _Write:
        new = validated(NewMemory, item)
        memory_id = str(uuid.uuid4())
        fields = new.model_dump()
        fields["category"] = new.category or new.type.value
        memory = Memory(
            **fields,
            id=memory_id,
            lineage_id=memory_id,
            version=1,
            state=MemoryState.ACTIVE,
            created_at=now,
            updated_at=now,
        )
        return _Write(
            memory,
            HistoryEventType.ADD,
            None,
            thread_id or default_thread(new.account_id, new.user_id),
            actor or new.actor_id,
            {"key": new.key, "type": new.type.value},
        )

    def _revision_write(
        self,
        head: Memory,
        patch: MemoryPatch | Mapping[str, Any],
        now: datetime,
        actor: str | None,
        thread_id: str | None,
        event: HistoryEventType = HistoryEventType.UPDATE,
    ) -> _Write:
        changes = validated(MemoryPatch, patch).model_dump(exclude_none=True)
        new_id = str(uuid.uuid4())
        memory = head.model_copy(
            update={
                **changes,
                "id": new_id,
                "version": head.version + 1,
                "row_version": 1,
                "supersedes_id": head.id,
                "updated_at": now,
                "actor_id": actor or head.actor_id,
            }
        )
        memory = validated(Memory, memory.model_dump())
        return _Write(
            memory,
            event,
            head.id,
            thread_id or default_thread(head.account_id, head.user_id),
            actor,
            {"key": head.key, "fields": sorted(changes)},
        )

    def update(
        self,
        memory_id: str,
        patch: MemoryPatch | Mapping[str, Any],
        *,
        account_id: str,
        actor: str | None = None,
        thread_id: str | None = None,
        event: HistoryEventType = HistoryEventType.UPDATE,
        expected_row_version: int | None = None,
    ) -> Memory:
        """Write a new version of the memory with ``patch`` applied; the old one is superseded.

        The write is a compare-and-set on the current version as this call read it: if
        another writer changes the memory in between (forgets it, changes its visibility,
        updates it), nothing is written and :class:`ConflictError` says to read and retry.
        With ``expected_row_version`` the caller's own earlier read is the one compared: the
        update applies only while ``memory_id`` is the current version at that row version,
        else :class:`PreconditionFailedError` (a :class:`ConflictError`).

        Raises :class:`NotFoundError` for an unknown id and :class:`ConflictError` when the
        memory is forgotten (restore it first).
        """
        head = self._head(account_id, memory_id)
        precondition = expected_row_version is not None
        if precondition and (head.id, head.row_version) != (memory_id, expected_row_version):
            raise PreconditionFailedError(
                f"memory {memory_id} is not the current version at row version "
                f"{expected_row_version}; read it and retry"
            )
        if head.state != MemoryState.ACTIVE:
            raise ConflictError(f"memory {memory_id} is {head.state.value}; restore it first")
        write = self._revision_write(head, patch, utcnow(), actor, thread_id, event)
        self._commit_versions([write], expected_heads=[head], precondition=precondition)
        return write.memory

    def update_by_key(
        self,
        *,
        account_id: str,
        user_id: str,
        key: str,
        value: str,
        type: MemoryType | None = None,
        confidence: float | None = None,
        source: Source = Source.API,
        actor: str | None = None,
        thread_id: str | None = None,
        **fields: Any,
    ) -> tuple[Memory, str]:
        """Update the active memory with this key (case-insensitive), or create it.

        Returns the memory and ``"updated"`` or ``"created"``. A stored row with this key that
        fails authentication counts as absent (a new memory takes the key over).
        """
        row = self.storage.find_by_key(
            account_id, user_id, self.blind_key(account_id, key), (MemoryState.ACTIVE.value,)
        )
        if row is not None and self.try_open_contents(row) is None:
            row = None
        if row is None:
            new = validated(
                NewMemory,
                {
                    "account_id": account_id,
                    "user_id": user_id,
                    "key": key,
                    "value": value,
                    "type": type or MemoryType.FACT,
                    "confidence": 1.0 if confidence is None else confidence,
                    "source": source,
                    **fields,
                },
            )
            return self.store(new, actor=actor, thread_id=thread_id), "created"
        patch = validated(
            MemoryPatch,
            {"value": value, "type": type, "confidence": confidence, "source": source},
        )
        updated = self.update(
            row.id, patch, account_id=account_id, actor=actor, thread_id=thread_id
        )
        return updated, "updated"

    def forget(
        self,
        memory_id: str,
        *,
        account_id: str,
        actor: str | None = None,
        thread_id: str | None = None,
    ) -> Memory:
        """Soft-delete a memory; it stays restorable until its ``purge_at``."""
        retention = timedelta(days=self.settings.soft_delete_retention_days)
        now = utcnow()
        return self._transition(
            memory_id,
            account_id=account_id,
            require=MemoryState.ACTIVE,
            fields={
                "state": MemoryState.SOFT_DELETED,
                "purge_at": now + retention,
                "updated_at": now,
            },
            event=HistoryEventType.DELETE,
            actor=actor,
            thread_id=thread_id,
        )

    def restore(
        self,
        memory_id: str,
        *,
        account_id: str,
        actor: str | None = None,
        thread_id: str | None = None,
    ) -> Memory:
        """Bring a forgotten memory back (one the TTL retired too, until its ``purge_at``).

        A memory retired because its ``expires_at`` passed comes back without that date, or
        the next TTL run would retire it again.
        """
        now = utcnow()
        fields: dict[str, Any] = {"state": MemoryState.ACTIVE, "purge_at": None, "updated_at": now}
        expires = self._row(account_id, memory_id).expires_at
        if expires is not None and expires <= now.timestamp():
            fields["expires_at"] = None
        return self._transition(
            memory_id,
            account_id=account_id,
            require=MemoryState.SOFT_DELETED,
            fields=fields,
            event=HistoryEventType.RESTORE,
            actor=actor,
            thread_id=thread_id,
        )

    def set_visibility(
        self,
        memory_id: str,
        visibility: Visibility,
        *,
        account_id: str,
        actor: str | None = None,
    ) -> Memory:
        """Mark a memory private or shared (in place: visibility is not a new version)."""
        return self._transition(
            memory_id,
            account_id=account_id,
            require=None,
            fields={"visibility": Visibility(visibility), "updated_at": utcnow()},
            event=HistoryEventType.PRIVACY,
            actor=actor,
            thread_id=None,
            log_change=False,
        )

    def mark_private(self, memory_id: str, *, account_id: str, actor: str | None = None) -> Memory:
        """Make a memory visible to its owner only."""
        return self.set_visibility(
            memory_id, Visibility.PRIVATE, account_id=account_id, actor=actor
        )

    def mark_shared(self, memory_id: str, *, account_id: str, actor: str | None = None) -> Memory:
        """Share a memory with everyone who reads its subject."""
        return self.set_visibility(memory_id, Visibility.SHARED, account_id=account_id, actor=actor)

    def note(
        self,
        memory_id: str,
        event: HistoryEventType,
        *,
        account_id: str,
        actor: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Record an audit event about a memory without changing it (meta holds no values)."""
        row = self._row(account_id, memory_id)
        with self.storage.transaction() as tx:
            self._history(tx, row, event, row.id, row.id, actor, dict(meta or {}))

    # ---- reads -----------------------------------------------------------------------------
    def get(self, memory_id: str, *, account_id: str) -> Memory:
        """One memory version by id; :class:`NotFoundError` if not in this account."""
        row = self.storage.get_memory(account_id, memory_id)
        if row is None:
            raise NotFoundError(f"memory {memory_id} not found")
        return self._open(row)

    def current(self, memory_id: str, *, account_id: str) -> Memory:
        """The current version of the memory ``memory_id`` names: the id of any of its
        versions (an update supersedes the old one) leads to its newest, whatever its state.

        Raises :class:`NotFoundError` if no version has this id in the account.
        """
        return self._head(account_id, memory_id)

    def get_by_key(
        self, *, account_id: str, user_id: str, key: str, include_forgotten: bool = False
    ) -> Memory | None:
        """The active memory with this key (case-insensitive), if any.

        A row with this key that fails authentication is not an answer (it is counted).
        """
        states = _LIVE if include_forgotten else (MemoryState.ACTIVE.value,)
        row = self.storage.find_by_key(account_id, user_id, self.blind_key(account_id, key), states)
        return None if row is None else next(iter(self.open_rows([row])), None)

    def list_memories(
        self, flt: MemoryFilter, *, limit: int = 100, offset: int = 0
    ) -> list[Memory]:
        """Memories matching every filter, newest first."""
        if not 1 <= limit <= 10_000 or not 0 <= offset <= MAX_OFFSET:
            raise ValidationError(f"limit must be 1..10000 and offset 0..{MAX_OFFSET}")
        rows = self.storage.list_memories(
            self.storage_filter(flt), Page(limit=limit, offset=offset)
        )
        return self.open_rows(rows)

    def storage_filter(self, flt: MemoryFilter) -> MemoryFilter:
        """``flt`` as the database can apply it: its keys blinded."""
        if not flt.keys:
            return flt
        blinded = tuple(self.blind_key(flt.account_id, k) for k in flt.keys)
        return flt.model_copy(update={"keys": blinded})

    def versions(self, memory_id: str, *, account_id: str) -> list[Memory]:
        """Every version of the memory ``memory_id`` belongs to, oldest first."""
        row = self._row(account_id, memory_id)
        return self.open_rows(self.storage.lineage(account_id, row.lineage_id))

    def history(self, memory_id: str, *, account_id: str) -> list[HistoryEvent]:
        """Audit events of every version of the memory, newest first.

        The stored events carry the key blinded; the clear key is put back from the memory.
        """
        row = self._row(account_id, memory_id)
        clear = self._clear_keys(self.storage.lineage(account_id, row.lineage_id))
        return self._history_events(self.storage.history(account_id, row.lineage_id), clear)

    @staticmethod
    def _history_events(rows: Sequence[HistoryRow], clear: Mapping[str, str]) -> list[HistoryEvent]:
        """Stored audit rows as events, their blinded keys read back through ``clear``."""
        return [
            HistoryEvent(
                id=h.id,
                memory_id=h.memory_id,
                lineage_id=h.lineage_id,
                event=HistoryEventType(h.event),
                old_ref=h.old_ref,
                new_ref=h.new_ref,
                actor=h.actor,
                meta=_readable(json.loads(h.meta), clear),
                ts=from_ts(h.ts) or utcnow(),
            )
            for h in rows
        ]

    def current_rev(self, thread_id: str) -> int:
        """The thread's revision counter."""
        # A thread is named by its id alone: this inspection reads across accounts.
        return self.storage.current_rev(thread_id, account_id=None)

    def changes_since(self, thread_id: str, rev: int, *, limit: int = 100) -> list[ChangeEvent]:
        """Change-log entries after ``rev``, newest first.

        The stored entries carry the key blinded; the clear key is read back from the memory
        version each entry refers to (a purged one keeps only the blinded form).
        """
        changes = self.storage.changes_since(thread_id, rev, limit, account_id=None)
        by_account: dict[str, list[str]] = {}
        for c in changes:
            by_account.setdefault(c.account_id, []).append(c.memory_id)
        clear: dict[str, str] = {}
        for account_id, ids in by_account.items():
            clear.update(self._clear_keys(self.storage.get_memories(account_id, ids)))
        return [
            ChangeEvent(
                thread_id=c.thread_id,
                rev=c.rev,
                memory_id=c.memory_id,
                event=HistoryEventType(c.event),
                meta=_readable(json.loads(c.meta), clear),
                ts=from_ts(c.ts) or utcnow(),
            )
            for c in changes
        ]

    # ---- operational events ----------------------------------------------------------------
    def record_op(self, event: OpEvent, *, account_id: str | None = None) -> None:
        """Record what a node of the system did."""
        with self.storage.transaction() as tx:
            tx.record_op(
                OpRow(
                    account_id,
                    event.user_id,
                    event.thread_id,
                    event.node,
                    event.op,
                    event.status,
                    event.memory_id,
                    event.category,
                    event.sim,
                    (event.ts or utcnow()).timestamp(),
                )
            )

    def emit_op(
        self,
        node: str,
        op: str,
        *,
        account_id: str | None,
        user_id: str | None = None,
        thread_id: str | None = None,
        status: str = "ok",
        memory_id: str | None = None,
        category: str | None = None,
        sim: float | None = None,
    ) -> None:
        """Record what a node did, off the caller's path: the one helper every path calls.

        The event is queued and written in a batch (see :class:`~confide.engine.ops.OpsLog`);
        it never raises and never waits for the database. Pass ids, categories and scores
        only: never a value, a clear key or a transcript.
        """
        self.ops.emit(
            op_row(
                node,
                op,
                account_id=account_id,
                user_id=user_id,
                thread_id=thread_id,
                status=status,
                memory_id=memory_id,
                category=category,
                sim=sim,
            )
        )

    def emit_memory_op(
        self,
        node: str,
        op: str,
        memory: Memory,
        *,
        status: str = "ok",
        sim: float | None = None,
    ) -> None:
        """:meth:`emit_op` for what a node did to ``memory`` (its owner, id and category)."""
        self.emit_op(
            node,
            op,
            account_id=memory.account_id,
            user_id=memory.user_id,
            status=status,
            memory_id=memory.id,
            category=memory.category or memory.type.value,
            sim=sim,
        )

    def op_counts(
        self,
        *,
        by: str = "op",
        since: float | None = None,
        until: float | None = None,
        account_id: str | None = None,
    ) -> dict[str, int]:
        """Operational events counted by ``op``, ``node`` or ``status`` (of one account when
        ``account_id`` is given); events this process queued are written first."""
        self.ops.flush()
        return self.storage.op_counts(by=by, since=since, until=until, account_id=account_id)

    def op_events(
        self,
        *,
        account_id: str,
        since: float | None = None,
        node: str | None = None,
        op: str | None = None,
        limit: int = 1000,
    ) -> list[OpEvent]:
        """One account's operational events, oldest first (of ``node`` and ``op`` when given,
        at most ``limit``); events this process queued are written first."""
        self.ops.flush()
        rows = self.storage.op_events(account_id, since=since, node=node, op=op, limit=limit)
        return [
            OpEvent(
                user_id=r.user_id,
                thread_id=r.thread_id,
                node=r.node,
                op=r.op,
                status=r.status,
                memory_id=r.memory_id,
                category=r.category,
                sim=r.sim,
                ts=from_ts(r.ts),
            )
            for r in rows
        ]

    # ---- internals -------------------------------------------------------------------------
    def _row(self, account_id: str, memory_id: str) -> MemoryRow:
        row = self.storage.get_memory(account_id, memory_id)
        if row is None:
            raise NotFoundError(f"memory {memory_id} not found")
        return row

    def _head(self, account_id: str, memory_id: str) -> Memory:
        row = self._row(account_id, memory_id)
        versions = self.storage.lineage(account_id, row.lineage_id)
        return self._open(versions[-1])

    def open_row(self, row: MemoryRow) -> Memory:
        """Decrypt a storage row (for layers that query storage directly, like retrieval).

        Raises :class:`TamperedRowError` (and counts it) when the row fails authentication.
        """
        return self._open(row)

    def open_rows(self, rows: Sequence[MemoryRow]) -> list[Memory]:
        """Decrypt rows, leaving out (and counting) any that fail authentication."""
        out = []
        for row in rows:
            try:
                out.append(self._open(row))
            except TamperedRowError:
                continue
        return out

    def try_open_contents(self, row: MemoryRow) -> Contents | None:
        """:meth:`open_contents`, or ``None`` (counted) when the row fails authentication."""
        try:
            return self.open_contents(row)
        except TamperedRowError:
            return None

    def open_contents(self, row: MemoryRow) -> Contents:
        """Decrypt only a row's value, tags and metadata (retrieval's hot path).

        :meth:`MemoryCodec.memory` turns the row and its contents into a :class:`Memory`
        when one is needed.
        """
        if row.state == MemoryState.PURGED.value:
            return self.codec.contents(row, b"")
        try:
            try:
                key = self.keys.by_id(row.account_id, row.user_id, row.key_id)
            except (KeyUnavailableError, KeyMismatchError):
                raise  # a KEK this process lacks, or a wrong one: not the row's fault
            except IntegrityError as exc:
                # No key for the row's owner: the owner column was changed (or never had one).
                raise TamperedRowError(f"memory {row.id} has no owner key") from exc
            return self.codec.contents(row, key)
        except TamperedRowError:
            self._tampered(row)
            raise

    # ---- reads for the layers above (retrieval, conversation) ------------------------------
    @property
    def search_index(self) -> SearchIndex:
        """The store's search index: filtered vector, lexical and edge reads, no plaintext."""
        return self.storage

    def rows_in_filter(self, flt: MemoryFilter, memory_ids: Sequence[str]) -> list[MemoryRow]:
        """The (still sealed) rows among ``memory_ids`` that match ``flt``."""
        return self.storage.filter_memories(flt, memory_ids)

    def has_others_shared(self, flt: MemoryFilter) -> bool:
        """Whether ``flt``'s shared half reaches any memory of another user."""
        return self.storage.has_others_shared(flt)

    def memory_of(self, row: MemoryRow, contents: Contents) -> Memory:
        """The :class:`Memory` of a row and its contents from :meth:`open_contents`."""
        return self.codec.memory(row, contents)

    def blind_terms(self, account_id: str, query_terms: Sequence[str]) -> list[int]:
        """The account's blind lexical tokens of ``query_terms``, as the index stores them."""
        return self.lexical.hash_terms(account_id, query_terms)

    def meta_value(self, key: str) -> str | None:
        """A value the store keeps about itself (``store_meta``), or ``None``."""
        return self.storage.meta_value(key)

    def set_meta_value(self, key: str, value: str) -> None:
        """Record a value about the store (``store_meta``) in its own transaction."""
        with self.storage.transaction() as tx:
            tx.set_meta(key, value)

    def _open(self, row: MemoryRow) -> Memory:
        return self.codec.memory(row, self.open_contents(row))

    def _tampered(self, row: MemoryRow) -> None:
        with self._integrity_lock:
            self._integrity_failures += 1
        # The id only: the row's other columns are exactly what cannot be trusted.
        log.warning("memory row %s failed authentication; left out", row.id)

    def _clear_keys(self, rows: Sequence[MemoryRow]) -> dict[str, str]:
        """Blinded key -> clear key, from those of ``rows`` that open."""
        clear: dict[str, str] = {}
        for row in rows:
            if row.key in clear or row.state == MemoryState.PURGED.value:
                continue
            contents = self.try_open_contents(row)
            if contents is not None:
                clear[row.key] = contents.key
        return clear

    def _prepare(self, memories: Sequence[Memory]) -> list[list[Any]]:
        return [indexer.prepare(memories) for indexer in self.indexers]

    def _commit_versions(
        self,
        writes: Sequence[_Write],
        *,
        expected_heads: Sequence[Memory] = (),
        precondition: bool = False,
        log_changes: bool = True,
        within: Callable[[Transaction, Sequence[Memory]], None] | None = None,
    ) -> None:
        """Insert ``writes`` in one transaction, superseding each of ``expected_heads``.

        Each expected head is compared, under the lineage lock, with the head as it is now: id,
        row version and state must all be what the caller read (an in-place forget or
        visibility change keeps the id but moves the row version). On a mismatch nothing is
        written: :class:`ConflictError`, or :class:`PreconditionFailedError` when the
        caller stated the expectation (``precondition``).
        """
        if not writes:
            return
        require_vector_indexer(self.storage, self.indexers)
        memories = [w.memory for w in writes]
        prepared = self._prepare(memories)
        try:
            self._commit_sealed(writes, prepared, expected_heads, precondition, log_changes, within)
        except _StaleKey:
            # Another process erased one of these users since this one cached their key:
            # seal again under the user's new generation (a fresh key).
            for memory in memories:
                self.keys.forget(memory.account_id, memory.user_id)
            try:
                self._commit_sealed(
                    writes, prepared, expected_heads, precondition, log_changes, within
                )
            except _StaleKey:
                raise ConflictError("the user was erased concurrently; retry") from None

    def _commit_sealed(
        self,
        writes: Sequence[_Write],
        prepared: list[list[Any]],
        expected_heads: Sequence[Memory],
        precondition: bool,
        log_changes: bool,
        within: Callable[[Transaction, Sequence[Memory]], None] | None,
    ) -> None:
        owners: dict[tuple[str, str], OwnerKey] = {}
        rows = []
        for write in writes:
            memory = write.memory
            owner = (memory.account_id, memory.user_id)
            if owner not in owners:
                owners[owner] = self.keys.current(*owner)
            key = owners[owner]
            stored_key = self.blind_key(memory.account_id, memory.key)
            rows.append(self.codec.to_row(memory, key.key_id, key.raw, stored_key))
        with self.storage.transaction() as tx:
            for (account_id, user_id), key in owners.items():
                if tx.key_generation(account_id, user_id) != key.generation:
                    raise _StaleKey
            for expected_head in expected_heads:
                locked = tx.lock_lineage(expected_head.account_id, expected_head.lineage_id)
                read = (expected_head.id, expected_head.row_version, expected_head.state.value)
                if locked is None or (locked.id, locked.row_version, locked.state) != read:
                    stale = PreconditionFailedError if precondition else ConflictError
                    raise stale(_CHANGED_CONCURRENTLY)
                tx.update_memory(expected_head.id, {"state": MemoryState.SUPERSEDED.value})
                tx.delete_index([expected_head.id])
            prepared = _without_vanished_edges(tx, writes, prepared)
            linked: list[tuple[_Write, list[Link]]] = []
            revs = _reserved_revs(tx, writes, log_changes)
            # A batch is a few statements per memory: on a server, sent without waiting for
            # each one's answer (its errors still roll the whole batch back).
            with tx.pipelined():
                for index, (write, row, rev) in enumerate(zip(writes, rows, revs, strict=True)):
                    tx.insert_memory(row)
                    for indexer, data in zip(self.indexers, prepared, strict=True):
                        indexer.write(tx, write.memory, data[index])
                    self._history(
                        tx,
                        row,
                        write.event,
                        write.old_ref,
                        write.memory.id,
                        write.actor,
                        write.meta,
                    )
                    links = _links_of(write.memory.id, [data[index] for data in prepared])
                    self.audit_links(tx, write.memory, links, actor=write.actor)
                    if links:
                        linked.append((write, links))
                    if rev is not None:
                        self._change(tx, row, write.thread_id, write.event, write.meta, rev=rev)
            if within is not None:
                within(tx, [w.memory for w in writes])
        for write, links in linked:  # once committed: a rolled-back edge is no event
            for link in links:
                self.emit_link(write.memory, link, node="index", thread_id=write.thread_id)

    @staticmethod
    def audit_links(
        tx: Transaction, memory: Memory, links: Sequence[Link], *, actor: str | None
    ) -> None:
        """Write the ``LINK`` audit event of each relation edge from ``memory`` in ``links``,
        on ``tx`` (the transaction that writes the edges), in one write: ids, the relation
        and its strength; no value."""
        if not links:
            return
        now = time.time()
        tx.add_history_many(
            [
                HistoryRow(
                    0,
                    memory.account_id,
                    memory.user_id,
                    memory.id,
                    memory.lineage_id,
                    HistoryEventType.LINK.value,
                    memory.id,
                    memory.id,
                    actor,
                    json.dumps(link.meta()),
                    now,
                )
                for link in links
            ]
        )

    def emit_link(
        self, memory: Memory, link: Link, *, node: str, thread_id: str | None = None
    ) -> None:
        """Record the operational event of a relation edge from ``memory``: op ``link``,
        the relation as its status and, for a similarity link, the similarity as ``sim``."""
        self.emit_op(
            node,
            "link",
            account_id=memory.account_id,
            user_id=memory.user_id,
            thread_id=thread_id,
            status=link.relation,
            memory_id=memory.id,
            category=memory.category or memory.type.value,
            sim=link.strength if link.relation == RELATED else None,
        )

    def _transition(
        self,
        memory_id: str,
        *,
        account_id: str,
        require: MemoryState | None,
        fields: dict[str, Any],
        event: HistoryEventType,
        actor: str | None,
        thread_id: str | None,
        log_change: bool = True,
    ) -> Memory:
        # The state check runs on the head as locked, so it holds when the change commits; the
        # change bumps the row version, so an update that read the head before it loses.
        row = self._row(account_id, memory_id)
        # Unwrapped before the transaction: an in-place change of a bound column re-seals the
        # value under the key its row names.
        self.keys.by_id(row.account_id, row.user_id, row.key_id)
        with self.storage.transaction() as tx:
            head = self._lock_head(tx, account_id, row.lineage_id)
            if head is None:
                raise NotFoundError(f"memory {memory_id} not found")
            if head.state == MemoryState.SUPERSEDED.value:
                raise ConflictError(_CHANGED_CONCURRENTLY)
            if require is not None and head.state != require.value:
                raise ConflictError(f"memory {memory_id} is {head.state}, not {require.value}")
            if head.state == MemoryState.PURGED.value:
                raise ConflictError(f"memory {memory_id} is purged")
            stored = {
                name: (
                    value.timestamp()
                    if hasattr(value, "timestamp")
                    else value.value
                    if hasattr(value, "value")
                    else value
                )
                for name, value in fields.items()
            }
            if _BOUND_IN_PLACE & stored.keys() or not is_blinded(head.key):
                stored.update(self._resealed(head, stored))
                head = head._replace(key=stored["key"])
            tx.update_memory(head.id, stored)
            meta = {
                "key": head.key,
                **({"visibility": stored["visibility"]} if "visibility" in stored else {}),
            }
            self._history(tx, head, event, head.id, head.id, actor, meta)
            if log_change:
                thread = thread_id or default_thread(head.account_id, head.user_id)
                self._change(tx, head, thread, event, meta)
        # The version as this transition left it (a read now could see a later writer's).
        return self._open(head._replace(**stored, row_version=head.row_version + 1))

    @staticmethod
    def _lock_head(tx: Transaction, account_id: str, lineage_id: str) -> MemoryRow | None:
        # On PostgreSQL a writer that waited for the head's row lock while another writer
        # superseded it is handed that row, now superseded: its statement's snapshot predates
        # the new head. Reading again in the same transaction (a fresh snapshot) finds it.
        head = tx.lock_lineage(account_id, lineage_id)
        for _ in range(_HEAD_RELOCKS):
            if head is None or head.state != MemoryState.SUPERSEDED.value:
                break
            head = tx.lock_lineage(account_id, lineage_id)
        return head

    def _resealed(self, head: MemoryRow, changes: Mapping[str, Any]) -> dict[str, Any]:
        """The key and sealed columns of ``head`` after an in-place change of ``changes``.

        The value is bound to those columns, so changing one in place means sealing it again
        (raises :class:`TamperedRowError` if ``head`` itself does not open).
        """
        contents = self.open_contents(head)
        user_key = self.keys.by_id(head.account_id, head.user_id, head.key_id)
        stored_key = self.blind_key(head.account_id, contents.key)
        after = head._replace(**{**changes, "key": stored_key})
        sealed = self.codec.seal_contents(
            contents,
            user_key,
            account_id=head.account_id,
            user_id=head.user_id,
            record_id=head.id,
            bound=row_binding(after),
        )
        return {
            "key": stored_key,
            "ciphertext": sealed.ciphertext,
            "wrapped_key": sealed.wrapped_key,
        }

    @staticmethod
    def _history(
        tx: Transaction,
        row: MemoryRow,
        event: HistoryEventType,
        old_ref: str | None,
        new_ref: str | None,
        actor: str | None,
        meta: dict[str, Any],
    ) -> None:
        tx.add_history(
            HistoryRow(
                0,
                row.account_id,
                row.user_id,
                row.id,
                row.lineage_id,
                event.value,
                old_ref,
                new_ref,
                actor,
                json.dumps(_blinded(meta, row.key)),
                time.time(),
            )
        )

    @staticmethod
    def _change(
        tx: Transaction,
        row: MemoryRow,
        thread_id: str,
        event: HistoryEventType,
        meta: dict[str, Any],
        *,
        rev: int | None = None,
    ) -> None:
        """Append ``row``'s change to its thread's log, at ``rev`` when the caller reserved
        it (:meth:`Transaction.next_rev`), else at the thread's next revision."""
        if rev is None:
            rev = tx.next_rev(row.account_id, thread_id)
        tx.add_change(
            row.account_id,
            ChangeRow(
                thread_id,
                rev,
                row.id,
                event.value,
                json.dumps(_blinded(meta, row.key)),
                time.time(),
            ),
        )


def _reserved_revs(
    tx: Transaction, writes: Sequence[_Write], log_changes: bool
) -> list[int | None]:
    """The change-log revision of each write (``None``: not logged), each thread's revisions
    for the batch reserved in one statement, so writing the batch reads nothing back."""
    logged = [
        (w.memory.account_id, w.thread_id)
        if log_changes and w.memory.state == MemoryState.ACTIVE
        else None
        for w in writes
    ]
    counts = Counter(owner for owner in logged if owner is not None)
    taken = {owner: tx.next_rev(*owner, n) - n for owner, n in counts.items()}
    revs: list[int | None] = []
    for owner in logged:
        if owner is not None:
            taken[owner] += 1
        revs.append(None if owner is None else taken[owner])
    return revs


@dataclass(frozen=True, slots=True)
class Link:
    """A relation edge seen from one of its memories: the memory at the other end, the
    relation (``related_to``, ``adjacent``, ...) and its strength (a similarity link's
    cosine)."""

    related_id: str
    relation: str
    strength: float

    def meta(self) -> dict[str, Any]:
        """The ``LINK`` audit event's meta: ids, the relation and its strength; no value."""
        return {
            "related_id": self.related_id,
            "relation": self.relation,
            "strength": self.strength,
        }


def _without_vanished_edges(
    tx: Transaction, writes: Sequence[_Write], prepared: list[list[Any]]
) -> list[list[Any]]:
    """``prepared`` without the edges to memories deleted since their neighbours were
    searched (outside the transaction): an erasure or a purge committed in between would
    otherwise fail the write on the edge's foreign key."""
    batch = {w.memory.id for w in writes}
    outside: dict[str, set[str]] = {}
    for entries in prepared:
        for write, entry in zip(writes, entries, strict=True):
            if isinstance(entry, VectorEntry):
                ends = {e.from_id for e in entry.edges} | {e.to_id for e in entry.edges}
                outside.setdefault(write.memory.account_id, set()).update(ends - batch)
    if not any(outside.values()):
        return prepared
    existing = set(batch)
    for account_id, ids in outside.items():
        existing |= tx.existing_memory_ids(account_id, sorted(ids))
    return [
        [
            replace(
                entry,
                edges=[e for e in entry.edges if e.from_id in existing and e.to_id in existing],
            )
            if isinstance(entry, VectorEntry)
            else entry
            for entry in entries
        ]
        for entries in prepared
    ]


def _links_of(memory_id: str, prepared: Sequence[Any]) -> list[Link]:
    """The edges the indexers prepared for ``memory_id``, seen from it."""
    links = []
    for entry in prepared:
        if not isinstance(entry, VectorEntry):
            continue
        for edge in entry.edges:
            other = edge.to_id if edge.from_id == memory_id else edge.from_id
            if other != memory_id:
                links.append(Link(other, edge.relation_type, edge.strength))
    return links


def _blinded(meta: dict[str, Any], stored_key: str) -> dict[str, Any]:
    """Audit ``meta`` as stored: its ``key`` entry holds the row's blinded key, never the clear
    one."""
    return {**meta, "key": stored_key} if "key" in meta else meta


def _readable(meta: dict[str, Any], clear: Mapping[str, str]) -> dict[str, Any]:
    """Stored audit ``meta`` with its blinded ``key`` replaced by the clear key, when known."""
    key = meta.get("key")
    if isinstance(key, str) and key in clear:
        return {**meta, "key": clear[key]}
    return meta
