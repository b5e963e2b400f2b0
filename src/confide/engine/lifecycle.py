"""The engine's lifecycle jobs: purge, erasure, KEK rotation and key upgrades."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from confide.crypto.envelope import Envelope
from confide.crypto.keyring import KeyRing
from confide.engine.core import default_thread
from confide.engine.residue import FRAGMENT_BYTES, MARKER_ROWS, key_markers, markers_of
from confide.engine.scrubbing import EngineScrubbing
from confide.errors import ConflictError, IntegrityError
from confide.index.codec import MemoryCodec, row_binding
from confide.keys.owner_keys import USER_KEY, OwnerKeys
from confide.keys.rotation import rotate_kek
from confide.storage.base import KEYS_BLINDED, MemoryRow, OpRow, Transaction
from confide.storage.derived import Derived
from confide.types import (
    ErasureReceipt,
    HistoryEventType,
    MemoryState,
    Progress,
    PurgeReport,
    ResidueMarkers,
    ScrubReport,
    utcnow,
)

log = logging.getLogger(__name__)

ERASURE_SETTLE_SECONDS = 5.0
"""How long an erasure retries a scrub something blocks before it returns ``pending``."""

_TTL_PER_TRANSACTION = 100


def _per_account_chunks(heads: Sequence[MemoryRow], size: int) -> Iterator[list[MemoryRow]]:
    """``heads`` in chunks of at most ``size``, each of one account (order kept within it)."""
    by_account: dict[str, list[MemoryRow]] = {}
    for head in heads:
        by_account.setdefault(head.account_id, []).append(head)
    for rows in by_account.values():
        for start in range(0, len(rows), size):
            yield rows[start : start + size]


class EngineLifecycle(EngineScrubbing):
    """Purge, erasure and key management over the core (see :class:`MemoryEngine`)."""

    def purge_expired(self, *, now: float | None = None, batch: int = 500) -> PurgeReport:
        """Hard-delete soft-deleted memories whose ``purge_at`` has passed (every one due, in
        batches of ``batch``).

        All versions of such a memory are deleted, with their index rows; a ``purged``
        tombstone (no ciphertext) remains so the audit history still resolves.
        """
        moment = time.time() if now is None else now
        purged = 0
        scrubbed = None
        while heads := self.storage.due_for_purge(moment, batch):
            before = purged
            for head in heads:
                with self.storage.transaction() as tx:
                    purged += self._purge_head(tx, head)
            if purged == before:
                break  # every head changed state meanwhile: nothing left for this run
        if purged:
            scrubbed = self._scrub_after_purge(None)
        return PurgeReport(purged=purged, scrubbed=scrubbed)

    def _scrub_after_purge(self, account_id: str | None) -> str:
        """Scrub the data store after a purge; a scrub it could not finish is owed."""
        outcome = self.storage.scrub()
        if outcome.complete:
            return outcome.detail
        report, _ = self.owe_scrub("purge", account_id, ResidueMarkers())
        return f"{outcome.detail}; {report.status}: {report.detail}"

    def expire_idle(
        self,
        *,
        idle_days: float,
        importance_below: int,
        now: float | None = None,
        batch: int = 500,
        should_stop: Callable[[], bool] | None = None,
    ) -> int:
        """Soft-delete memories the TTL retires; returns how many.

        A memory is retired when its ``expires_at`` has passed, or when it is idle (neither
        updated nor read for ``idle_days``: since the later of ``updated_at`` and
        ``last_accessed_at``), its importance is below ``importance_below`` and it is not
        pinned. Each one is soft-deleted with ``purge_at`` after the retention period, in
        one transaction with a ``TTL`` history event, a ``TTL`` change-log entry (the thread
        header shows it once) and an operational event (node ``worker``, op ``ttl``).
        The check runs again on the locked head, so a memory read or changed meanwhile is
        left alone; running twice retires nothing twice. ``restore`` brings one back until
        it is purged. ``should_stop`` is asked between memories (a bounded runtime).
        """
        moment = time.time() if now is None else now
        idle_before = moment - idle_days * 86_400.0
        purge_at = moment + self.settings.soft_delete_retention_days * 86_400.0
        expired = 0
        while True:
            retired = 0
            heads = self.storage.due_for_ttl(
                moment, idle_before=idle_before, importance_below=importance_below, limit=batch
            )
            # A hundred memories a transaction: one commit each would bound the run by fsyncs.
            # The sweep finds heads of every account; each transaction writes one account's
            # (on PostgreSQL a transaction is confined to one account).
            for chunk in _per_account_chunks(heads, _TTL_PER_TRANSACTION):
                if should_stop is not None and should_stop():
                    return expired + retired
                with self.storage.transaction() as tx:
                    for head in chunk:
                        retired += self._retire(
                            tx, head, moment, idle_before, importance_below, purge_at
                        )
            expired += retired
            if len(heads) < batch or retired == 0:
                return expired

    def _retire(
        self,
        tx: Transaction,
        head: MemoryRow,
        now: float,
        idle_before: float,
        importance_below: int,
        purge_at: float,
    ) -> int:
        locked = self._lock_head(tx, head.account_id, head.lineage_id)
        if locked is None or locked.id != head.id or locked.state != MemoryState.ACTIVE.value:
            return 0
        expired = locked.expires_at is not None and locked.expires_at <= now
        last_used = max(locked.updated_at, locked.last_accessed_at or 0.0)
        idle = (
            not locked.pinned and locked.importance < importance_below and last_used < idle_before
        )
        if not (expired or idle):
            return 0
        tx.update_memory(
            locked.id,
            {"state": MemoryState.SOFT_DELETED.value, "purge_at": purge_at, "updated_at": now},
        )
        meta = {"key": locked.key, "reason": "expired" if expired else "idle"}
        self._history(tx, locked, HistoryEventType.TTL, locked.id, locked.id, "ttl", meta)
        thread = default_thread(locked.account_id, locked.user_id)
        self._change(tx, locked, thread, HistoryEventType.TTL, meta)
        tx.record_op(
            OpRow(
                locked.account_id,
                locked.user_id,
                None,
                "worker",
                "ttl",
                "ok",
                locked.id,
                locked.category,
                None,
                now,
            )
        )
        return 1

    def _purge_head(self, tx: Transaction, head: MemoryRow) -> int:
        locked = tx.lock_lineage(head.account_id, head.lineage_id)
        if locked is None or locked.state != MemoryState.SOFT_DELETED.value:
            return 0
        # Read on the transaction's own connection: a second one may not exist.
        versions = tx.lineage_ids(head.account_id, head.lineage_id)
        older = [v for v in versions if v != locked.id]
        purged = tx.delete_memories(older) + 1
        tx.delete_index([locked.id])
        tx.update_memory(
            locked.id,
            {"state": MemoryState.PURGED.value, "ciphertext": b"", "wrapped_key": b""},
        )
        self._history(tx, locked, HistoryEventType.PURGE, locked.id, None, None, {})
        return purged

    def purge_scope(
        self, *, account_id: str, user_id: str | None = None, agent_id: str | None = None
    ) -> PurgeReport:
        """Admin purge: hard-delete every memory version in a scope and report the count."""
        ids = self.storage.scope_memory_ids(account_id, user_id, agent_id)
        with self.storage.transaction() as tx:
            tx.scope_to(account_id)
            count = tx.delete_memories(ids)
            tx.record_op(
                OpRow(
                    account_id,
                    user_id,
                    None,
                    "admin",
                    "purge_scope",
                    "ok",
                    None,
                    None,
                    None,
                    time.time(),
                )
            )
        log.info("admin purge removed %d memory versions", count)
        return PurgeReport(
            purged=count, scrubbed=self._scrub_after_purge(account_id) if count else None
        )

    def erase_user(
        self,
        *,
        account_id: str,
        user_id: str,
        progress: Progress | None = None,
        settle_seconds: float = ERASURE_SETTLE_SECONDS,
    ) -> ErasureReceipt:
        """Crypto-shred a user: delete every row derived from them and destroy their keys.

        One data transaction deletes the rows and starts a new key generation, so a process
        still caching the old key cannot write under it (its write fails the generation
        check and seals again under a fresh key). Then the user's keys are deleted from the
        key store, and both stores are scrubbed so that neither the deleted rows nor the
        keys can be carved from their files, and the files are scanned for markers of what
        was deleted where they are readable here. The receipt's ``status`` says whether that
        is verified; a scrub that was refused stays ``pending`` and is retried by the worker
        (:meth:`settle_scrub`). Re-running finishes an interrupted erasure. ``progress`` is
        told the steps done of four: the rows deleted, the keys destroyed, the stores
        scrubbed and scanned. A scrub something blocks is retried for ``settle_seconds``
        before the receipt says ``pending``.
        """
        step = progress or _no_progress
        step(0, 4)
        derived = self._derived_from(account_id, user_id)
        with self.storage.transaction() as tx:
            generation = tx.bump_key_generation(account_id, user_id)
            sealed = tx.sealed_values(account_id, user_id, limit=MARKER_ROWS)
            counts = tx.delete_owner(account_id, user_id, derived=derived)
        step(1, 4)
        # From the commit on, a writer seals under a key of the new generation (another
        # process may create it before the next line): that key protects data written
        # after the erasure and is kept.
        older = key_markers(self.key_store, account_id, user_id, USER_KEY, before=generation)
        markers = markers_of(older, sealed)
        destroyed = self.key_store.destroy(account_id, user_id, USER_KEY, before=generation)
        self.keys.forget(account_id, user_id)
        counts["user_keys"] = len(destroyed)
        step(2, 4)
        report, scrubbed = self.owe_scrub(
            "erasure", account_id, markers, scrubbed=lambda: step(3, 4)
        )
        if report.status == "pending" and settle_seconds > 0:
            # Most blocks pass in moments (a read in flight elsewhere): retry briefly before
            # leaving the rest to the worker.
            report = self.wait_for_scrub(report.id, timeout=settle_seconds)
        step(4, 4)
        return ErasureReceipt(
            id=report.id,
            account_id=account_id,
            user_id=user_id,
            key_id_destroyed=destroyed[0] if destroyed else None,
            key_ids_destroyed=destroyed,
            key_store=self.key_store.location,
            deleted=counts,
            scrubbed=scrubbed,
            status=report.status,
            blocked_by=report.detail if report.status == "pending" else None,
            markers=markers,
            scan=report.scan,
            erased_at=utcnow(),
        )

    def _derived_from(self, account_id: str, user_id: str) -> Derived:
        """What the store needs to find the rows derived from a user (see
        :mod:`confide.storage.derived`): the pseudonym their words are recorded under and
        their change-log thread. Operational events queued so far are written first, where
        the erasure finds them."""
        self.ops.flush()
        return Derived(
            sources=(self.pseudonym(account_id, user_id),),
            threads=(default_thread(account_id, user_id),),
        )

    def rotate_kek(self, new_ring: KeyRing) -> int:
        """Re-wrap every stored key under ``new_ring``'s primary KEK and switch to it.

        Values are not re-encrypted. Safe to re-run after an interruption; ``new_ring`` must
        still hold the former KEK(s) until every key is re-wrapped. The keys as they were
        wrapped before stay in the key store's files until a scrub clears them: the rotation
        owes one (see :meth:`rotation_scrub`).
        """
        before = self.key_store.rows(not_kek_id=new_ring.primary_id, limit=MARKER_ROWS)
        count = rotate_kek(self.key_store, self.envelope, new_ring)
        self.keyring = new_ring
        self.envelope = Envelope(self.envelope.cipher, new_ring)
        self.keys = OwnerKeys(
            self.storage,
            self.key_store,
            self.envelope,
            cache_size=self.settings.user_key_cache_size,
        )
        self.codec = MemoryCodec(self.envelope, legacy=self.codec.legacy)
        self.lexical.rebind(self.keys)
        self.vector_seal.rebind(self.keys)
        if before:
            # The tags of the keys as wrapped before: the key ids live on, re-wrapped.
            tags = [r.wrapped[-FRAGMENT_BYTES:].hex() for r in before]
            self.rotation_scrub = self.owe_scrub("rotation", None, ResidueMarkers(fragments=tags))[
                0
            ]
        return count

    rotation_scrub: ScrubReport | None = None
    """Where the scrub owed by this engine's last :meth:`rotate_kek` stands."""

    def retire_former_keks(self) -> list[str]:
        """Drop every former KEK from the key ring (and ``master.key.old``); their ids.

        Raises :class:`ConflictError` while any stored key is still wrapped under one of
        them (finish the rotation with ``confide keys rotate`` first).
        """
        usage = self.key_store.kek_usage()
        in_use = {kid: n for kid, n in usage.items() if kid != self.keyring.primary_id}
        if in_use:
            listed = ", ".join(f"{kid} ({n} keys)" for kid, n in sorted(in_use.items()))
            raise ConflictError(
                f"former key-encryption keys still wrap stored keys: {listed}; "
                "run 'confide keys rotate' to finish the rotation first"
            )
        retired = self.keyring.retire_former()
        for pending in self._scrub_tables().pending():
            if pending.kind == "rotation":
                self.settle_scrub(pending.id)
        return retired

    def upgrade_keys(self, *, batch: int = 500) -> int:
        """Blind the keys of memory rows an older version wrote in clear; return how many.

        Each such row has its key sealed into its payload, which is bound to its columns from
        then on, its key column replaced by the blinded key, and the ``key`` entries of its
        history and change-log rows blinded too. A row that does not open (tampered with) only
        loses its clear key. Runs when the engine opens a store marked ``pending`` by
        the ``blind-keys`` steps; safe to re-run and to interrupt. Afterwards rows with a
        clear key or an unbound payload are refused.
        """
        upgraded = 0
        while rows := self.storage.clear_key_rows(batch):
            updates = [(row, self._upgraded_columns(row)) for row in rows]
            with self.storage.transaction() as tx:
                tx.across_accounts()  # the upgrade of an older store covers every account
                for row, columns in updates:
                    tx.update_memory(row.id, columns)
                    tx.replace_audit_key(row.id, columns["key"])
            upgraded += len(rows)
        with self.storage.transaction() as tx:
            tx.set_meta(KEYS_BLINDED, "done")
        self.codec.legacy = False
        if upgraded:
            log.info("blinded the keys of %d memory versions", upgraded)
        return upgraded

    def _upgraded_columns(self, row: MemoryRow) -> dict[str, Any]:
        stored_key = self.blind_key(row.account_id, row.key)
        if row.state == MemoryState.PURGED.value:
            return {"key": stored_key}  # a tombstone has no payload to seal the key into
        try:
            user_key = self.keys.by_id(row.account_id, row.user_id, row.key_id)
            contents = self.open_contents(row)
        except IntegrityError:
            return {"key": stored_key}
        sealed = self.codec.seal_contents(
            contents,
            user_key,
            account_id=row.account_id,
            user_id=row.user_id,
            record_id=row.id,
            bound=row_binding(row._replace(key=stored_key)),
        )
        return {
            "key": stored_key,
            "ciphertext": sealed.ciphertext,
            "wrapped_key": sealed.wrapped_key,
        }

    def _adopt_legacy_keys(self) -> None:
        """Move keys that older versions kept in the data database into the key store."""
        legacy = self.storage.legacy_data_keys()
        if not legacy:
            return
        for row in legacy:
            self.key_store.add(row)
            if row.purpose == USER_KEY:
                self.storage.key_generation(row.account_id, row.user_id)
        self.storage.drop_legacy_data_keys()
        self._scrub_after_purge(None)
        log.info("moved %d keys from the data database into the key store", len(legacy))


def _no_progress(done: int, total: int | None) -> None:
    """A :data:`~confide.types.Progress` that tells no one."""
