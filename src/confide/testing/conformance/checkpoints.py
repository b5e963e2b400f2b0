"""The checkpoints feature's tables: the LangGraph saver's checkpoints, blobs and writes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from confide.storage.base import Capability
from confide.testing.builders import ACCOUNT
from confide.testing.conformance.confined import OTHER, ConfinedRoleHarness

if TYPE_CHECKING:
    from confide.storage.postgres import PostgresStorage
from confide.storage.checkpoints import (
    BlobRow,
    CheckpointRow,
    SqlCheckpointTables,
    ThreadOwner,
    WriteRow,
)


def _checkpoint(account_id: str, checkpoint_id: str, version: str) -> CheckpointRow:
    return CheckpointRow(
        account_id=account_id,
        user_id="user-1",
        thread_id="thread-1",
        checkpoint_ns="",
        checkpoint_id=checkpoint_id,
        parent_checkpoint_id=None,
        channel_versions={"messages": version},
        created_at=1.0,
        key_id="key-1",
        ciphertext=b"sealed",
        wrapped_key=b"wrapped",
    )


class CheckpointsConformance(ConfinedRoleHarness):
    """Checkpoints work for their owner's account, and only for it."""

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_checkpoint_tables_work_as_their_account(self, confined: PostgresStorage) -> None:
        checkpoints = SqlCheckpointTables(confined.database)
        for account in (ACCOUNT, OTHER):
            for n in ("1", "2"):
                checkpoints.put(
                    _checkpoint(account, f"cp-{n}", n),
                    [BlobRow("messages", n, "key-1", b"sealed", b"wrapped")],
                    keep_last=None,
                )
            checkpoints.put_writes(
                ThreadOwner(account, "user-1"),
                thread_id="thread-1",
                checkpoint_ns="",
                rows=[WriteRow("cp-2", "task-1", 0, "messages", "", "key-1", b"s", b"w")],
            )

        mine, theirs = ThreadOwner(ACCOUNT, "user-1"), ThreadOwner(OTHER, "user-1")

        def listed(owner: ThreadOwner) -> list[str]:
            rows = checkpoints.list_checkpoints(
                owner,
                thread_id="thread-1",
                checkpoint_ns=None,
                checkpoint_id=None,
                before=None,
            )
            return [r.checkpoint_id for r in rows]

        newest = checkpoints.get(mine, "thread-1", "", None)
        assert newest is not None and newest.checkpoint_id == "cp-2"
        assert checkpoints.get(mine, "thread-1", "", "cp-1") is not None
        assert listed(mine) == ["cp-2", "cp-1"]
        blobs = checkpoints.blobs(mine, "thread-1", "", {"messages": "2"})
        assert [b.version for b in blobs] == ["2"]
        assert [w.task_id for w in checkpoints.writes(mine, "thread-1", "", "cp-2")] == ["task-1"]
        assert checkpoints.latest(mine, "thread-1") == "cp-2"
        checkpoints.prune_thread(mine, "thread-1", keep_last=1)
        assert listed(mine) == ["cp-2"]
        assert checkpoints.blobs(mine, "thread-1", "", {"messages": "1"}) == []
        checkpoints.delete_thread(mine, "thread-1")
        assert checkpoints.get(mine, "thread-1", "", None) is None
        assert checkpoints.latest(mine, "thread-1") is None
        assert listed(theirs) == ["cp-2", "cp-1"]
