"""``ConfideCheckpointSaver``: LangGraph checkpoints in Confide's store, sealed per thread owner.

Every checkpoint, channel value and pending write is serialised by the saver's ``serde`` and
sealed under the thread owner's key (the engine's envelope encryption, bound to the row it is
stored in), so erasing a user crypto-shreds their graphs' state too. What stays in clear is
what places a row: account, owner, thread, namespace, checkpoint ids and the channel version
counters.

A thread is its owner's: the saver's account, the user ``config["configurable"]["user_id"]``
(else the saver's ``user_id``, else its principal's pinned user) and, when the saver is
configured with one, its ``agent``. Two users (or agents) naming the same ``thread_id`` keep
two threads; neither reads nor overwrites the other's. The saver acts for a
:class:`~confide.gate.Principal` (a ``service`` one of its account by default) and applies the
gate's rules: a pinned principal owns no other user's threads, a ``read`` principal saves and
deletes nothing, and an app's owner (``app:<id>``) is an ``admin``'s only.

``keep_last`` keeps the newest N checkpoints per thread namespace (LangGraph's own savers
never prune), pruned in the put's transaction; a graph with ``DeltaChannel`` state rebuilds
it from ancestors, so give it a ``keep_last`` of at least its snapshot frequency.
``supervisor_checkpoints`` keeps one row per owner and thread naming the latest root
checkpoint; :meth:`ConfideCheckpointSaver.latest` reads it, across restarts.

The store is synchronous; the async methods run the same code in a worker thread.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from confide.crypto.envelope import SealedValue
from confide.engine import MemoryEngine
from confide.errors import ValidationError
from confide.gate import Gate, Principal, require_write
from confide.langgraph._principal import door_principal
from confide.storage.checkpoints import (
    BlobRow,
    CheckpointRow,
    SqlCheckpointTables,
    ThreadOwner,
    WriteRow,
)

__all__ = ["ConfideCheckpointSaver"]

_SEP = b"\x00"


class ConfideCheckpointSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer over Confide's SQLite or PostgreSQL store.

    Args:
        engine: the memory engine (its storage keeps the rows, its keys seal them).
        account_id: the account every thread belongs to (optional with a ``principal``).
        user_id: the owner of threads whose config names none.
        keep_last: keep only the newest N checkpoints per thread namespace (``None``: all).
        serde: LangGraph's serializer (default: its JSON-plus serializer).
        agent: the agent whose threads these are (``None``: threads of no agent).
        principal: who the saver acts for (default: a ``service`` principal of
            ``account_id``, bound to ``agent``).

    Raises:
        ValidationError: ``keep_last`` below 1; no account; (on use) a thread with no owner.
        PermissionDeniedError: an ``agent`` or ``user_id`` the principal may not act as; (on
            use) a save or delete by a ``read`` principal, another user than the pinned one,
            an app's owner for a non-admin.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        account_id: str | None = None,
        user_id: str | None = None,
        keep_last: int | None = None,
        serde: SerializerProtocol | None = None,
        agent: str | None = None,
        principal: Principal | None = None,
    ) -> None:
        super().__init__(serde=serde)
        if keep_last is not None and keep_last < 1:
            raise ValidationError("keep_last must be at least 1")
        self.principal, agent = door_principal(account_id, principal, agent)
        self.engine = engine
        self.account_id = self.principal.account_id
        self.agent = agent
        self.user_id = None if user_id is None else Gate.user(self.principal, user_id)
        self.keep_last = keep_last
        self.tables = SqlCheckpointTables(engine.storage.database)

    # ---- owners ------------------------------------------------------------------------------
    def _owner(self, config: RunnableConfig | None, *, required: bool = True) -> ThreadOwner:
        """The owner of the thread ``config`` names; without a user anywhere, every user of
        the account (``required=False``) or a :class:`ValidationError`."""
        named = None if config is None else config.get("configurable", {}).get("user_id")
        requested = str(named) if named else self.user_id
        if requested is None and self.principal.user_id is None:
            if required:
                raise ValidationError("a checkpoint needs an owner: configurable user_id")
            return ThreadOwner(self.account_id, None, self.agent or "")
        return ThreadOwner(self.account_id, Gate.user(self.principal, requested), self.agent or "")

    def _writer(self, config: RunnableConfig | None, action: str) -> ThreadOwner:
        require_write(self.principal, action)
        return self._owner(config, required=config is not None)

    @staticmethod
    def _place(owner: ThreadOwner, thread_id: str, checkpoint_ns: str) -> str:
        """What a sealed value's record id names of its row (the agent, when there is one)."""
        place = f"{thread_id}:{checkpoint_ns}"
        return f"agent={owner.agent_id}:{place}" if owner.agent_id else place

    # ---- sealing -----------------------------------------------------------------------------
    def _seal(self, value: Any, *, user_id: str, record_id: str) -> tuple[str, SealedValue]:
        kind, data = self.serde.dumps_typed(value)
        return self.engine.seal_value(
            kind.encode() + _SEP + data,
            account_id=self.account_id,
            user_id=user_id,
            record_id=record_id,
        )

    def _open(
        self, key_id: str, ciphertext: bytes, wrapped: bytes, *, user_id: str, record_id: str
    ) -> Any:
        payload = self.engine.open_value(
            SealedValue(ciphertext, wrapped),
            account_id=self.account_id,
            user_id=user_id,
            record_id=record_id,
            key_id=key_id,
        )
        kind, _, data = payload.partition(_SEP)
        return self.serde.loads_typed((kind.decode(), data))

    # ---- reads -------------------------------------------------------------------------------
    def _tuple(self, row: CheckpointRow) -> CheckpointTuple:
        owner = row.owner
        place = self._place(owner, row.thread_id, row.checkpoint_ns)
        stored = self._open(
            row.key_id,
            row.ciphertext,
            row.wrapped_key,
            user_id=row.user_id,
            record_id=f"lg-cp:{place}:{row.checkpoint_id}",
        )
        versions = {k: str(v) for k, v in row.channel_versions.items()}
        values = {
            b.channel: self._open(
                b.key_id,
                b.ciphertext,
                b.wrapped_key,
                user_id=row.user_id,
                record_id=f"lg-blob:{place}:{b.channel}:{b.version}",
            )
            for b in self.tables.blobs(owner, row.thread_id, row.checkpoint_ns, versions)
            if b.key_id
        }
        writes = self.tables.writes(owner, row.thread_id, row.checkpoint_ns, row.checkpoint_id)
        pending = [
            (
                w.task_id,
                w.channel,
                self._open(
                    w.key_id,
                    w.ciphertext,
                    w.wrapped_key,
                    user_id=row.user_id,
                    record_id=f"lg-write:{place}:{w.checkpoint_id}:{w.task_id}:{w.idx}",
                ),
            )
            for w in writes
        ]

        def config(checkpoint_id: str) -> RunnableConfig:
            return {
                "configurable": {
                    "thread_id": row.thread_id,
                    "checkpoint_ns": row.checkpoint_ns,
                    "checkpoint_id": checkpoint_id,
                }
            }

        return CheckpointTuple(
            config=config(row.checkpoint_id),
            checkpoint=cast(Checkpoint, {**stored["checkpoint"], "channel_values": values}),
            metadata=stored["metadata"],
            parent_config=(config(row.parent_checkpoint_id) if row.parent_checkpoint_id else None),
            pending_writes=pending,
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the owner's thread namespace's newest one.

        Raises:
            ValidationError: no owner (``configurable.user_id``, the saver's user).
            PermissionDeniedError: an owner the principal may not act for.
        """
        configurable = config["configurable"]
        row = self.tables.get(
            self._owner(config),
            str(configurable["thread_id"]),
            str(configurable.get("checkpoint_ns", "")),
            get_checkpoint_id(config),
        )
        return None if row is None else self._tuple(row)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The owner's checkpoints newest first (every user's of the account when neither the
        config nor the saver names one); ``filter`` matches metadata (opened here, not in SQL).
        """
        configurable = {} if config is None else config.get("configurable", {})
        thread = configurable.get("thread_id")
        namespace = configurable.get("checkpoint_ns")
        rows = self.tables.list_checkpoints(
            self._owner(config, required=False),
            thread_id=None if thread is None else str(thread),
            checkpoint_ns=None if namespace is None else str(namespace),
            checkpoint_id=None if config is None else get_checkpoint_id(config),
            before=None if before is None else get_checkpoint_id(before),
        )
        remaining = limit
        for row in rows:
            if remaining is not None and remaining <= 0:
                return
            found = self._tuple(row)
            if filter and not all(found.metadata.get(k) == v for k, v in filter.items()):
                continue
            if remaining is not None:
                remaining -= 1
            yield found

    def latest(self, user_id: str, thread_id: str) -> CheckpointTuple | None:
        """The latest root checkpoint of a user's thread (``supervisor_checkpoints``)."""
        owner = self._owner({"configurable": {"user_id": user_id}})
        checkpoint_id = self.tables.latest(owner, thread_id)
        if checkpoint_id is None:
            return None
        return self.get_tuple(
            {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": "",
                    "checkpoint_id": checkpoint_id,
                    "user_id": user_id,
                }
            }
        )

    # ---- writes ------------------------------------------------------------------------------
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint (sealed) with its new channel values, in one transaction."""
        owner = self._writer(config, "saving a checkpoint")
        user_id = str(owner.user_id)
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        namespace = str(configurable.get("checkpoint_ns", ""))
        place = self._place(owner, thread_id, namespace)
        saved: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = saved.pop("channel_values", {})
        blobs = []
        for channel, version in new_versions.items():
            if channel in values:
                key_id, sealed = self._seal(
                    values[channel],
                    user_id=user_id,
                    record_id=f"lg-blob:{place}:{channel}:{version}",
                )
                blobs.append(
                    BlobRow(channel, str(version), key_id, sealed.ciphertext, sealed.wrapped_key)
                )
            else:
                blobs.append(BlobRow(channel, str(version), "", b"", b""))
        key_id, sealed = self._seal(
            {"checkpoint": saved, "metadata": get_checkpoint_metadata(config, metadata)},
            user_id=user_id,
            record_id=f"lg-cp:{place}:{checkpoint['id']}",
        )
        self.tables.put(
            CheckpointRow(
                account_id=self.account_id,
                user_id=user_id,
                thread_id=thread_id,
                checkpoint_ns=namespace,
                checkpoint_id=checkpoint["id"],
                parent_checkpoint_id=configurable.get("checkpoint_id"),
                channel_versions=dict(checkpoint["channel_versions"]),
                created_at=time.time(),
                key_id=key_id,
                ciphertext=sealed.ciphertext,
                wrapped_key=sealed.wrapped_key,
                agent_id=owner.agent_id,
            ),
            blobs,
            keep_last=self.keep_last,
        )
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes (sealed) for the checkpoint ``config`` names."""
        owner = self._writer(config, "saving a checkpoint")
        user_id = str(owner.user_id)
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        namespace = str(configurable.get("checkpoint_ns", ""))
        checkpoint_id = str(configurable["checkpoint_id"])
        place = self._place(owner, thread_id, namespace)
        rows = []
        for position, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, position)
            key_id, sealed = self._seal(
                value,
                user_id=user_id,
                record_id=f"lg-write:{place}:{checkpoint_id}:{task_id}:{idx}",
            )
            rows.append(
                WriteRow(
                    checkpoint_id,
                    task_id,
                    idx,
                    channel,
                    task_path,
                    key_id,
                    sealed.ciphertext,
                    sealed.wrapped_key,
                )
            )
        self.tables.put_writes(owner, thread_id=thread_id, checkpoint_ns=namespace, rows=rows)

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, value and write of the thread, and its latest-state row:
        the saver's owner's thread (the saver's ``user_id`` or its principal's pinned user),
        else that thread of every user of the account.

        Raises:
            PermissionDeniedError: a ``read`` principal.
        """
        owner = self._writer(None, "deleting a thread")
        self.tables.delete_thread(owner, str(thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keep each namespace's newest checkpoint; ``delete``: everything
        (of the threads :meth:`delete_thread` would delete).

        Raises:
            ValidationError: another strategy.
            PermissionDeniedError: a ``read`` principal.
        """
        if strategy not in ("keep_latest", "delete"):
            raise ValidationError("strategy must be 'keep_latest' or 'delete'")
        owner = self._writer(None, "pruning threads")
        for thread_id in thread_ids:
            if strategy == "delete":
                self.tables.delete_thread(owner, str(thread_id))
            else:
                self.tables.prune_thread(owner, str(thread_id), keep_last=1)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """A monotonically increasing, string-sortable version (LangGraph's own scheme)."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    # ---- async: the same code in a worker thread --------------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """See :meth:`get_tuple`."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """See :meth:`list`."""
        found = await asyncio.to_thread(
            lambda: [*self.list(config, filter=filter, before=before, limit=limit)]
        )
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """See :meth:`put`."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """See :meth:`put_writes`."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """See :meth:`delete_thread`."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """See :meth:`prune`."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    async def alatest(self, user_id: str, thread_id: str) -> CheckpointTuple | None:
        """See :meth:`latest`."""
        return await asyncio.to_thread(self.latest, user_id, thread_id)
