"""Conformance: a call session records the one process holding its turns (the service's
``call-session-worker`` step).

The first process to claim a session holds it; a later claim, from any process, changes
nothing and reads the holder. A store made before the column existed upgrades in place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from confide.storage.base import Capability

if TYPE_CHECKING:
    from confide.storage.postgres import PostgresStorage

import threading
from concurrent.futures import ThreadPoolExecutor

from confide.storage import open_storage
from confide.storage.base import Storage
from confide.storage.service import ApiKeyRow, CallSessionRow, ProposalRow
from confide.storage.service.sessions import SqlServiceTables
from confide.testing.builders import ACCOUNT
from confide.testing.conformance.confined import OTHER, ConfinedRoleHarness
from confide.testing.conformance.harness import latest_versions, unrecord_steps


def _session(session_id: str) -> CallSessionRow:
    return CallSessionRow(
        id=session_id,
        account_id=ACCOUNT,
        user_id="line-1",
        is_reminder=False,
        created_at=1.0,
        connected_at=None,
        ended_at=None,
        tool_calls=0,
        memories_extracted=0,
        summarization=None,
    )


class CallSessionsConformance(ConfinedRoleHarness):
    """Which process holds a call session's turns."""

    def test_a_new_session_is_held_by_no_process(self, storage: Storage) -> None:
        tables = SqlServiceTables(storage.database)
        tables.insert_session(_session("s-new"))
        row = tables.get_session("s-new", account_id=ACCOUNT)
        assert row is not None
        assert (row.worker_id, row.worker_host, row.worker_pid) == (None, None, None)

    def test_the_first_claim_holds_and_later_claims_read_the_holder(self, storage: Storage) -> None:
        tables = SqlServiceTables(storage.database)
        tables.insert_session(_session("s-1"))
        first = tables.claim_session(
            "s-1", account_id=ACCOUNT, worker_id="w-a", host="host-a", pid=11
        )
        assert first is not None
        assert (first.worker_id, first.worker_host, first.worker_pid) == ("w-a", "host-a", 11)
        second = tables.claim_session(
            "s-1", account_id=ACCOUNT, worker_id="w-b", host="host-b", pid=22
        )
        assert second is not None and second.worker_id == "w-a" and second.worker_pid == 11
        again = tables.get_session("s-1", account_id=ACCOUNT)
        assert again is not None and again.worker_id == "w-a"
        assert (
            tables.claim_session(
                "no-such-session", account_id=ACCOUNT, worker_id="w-a", host="h", pid=1
            )
            is None
        )

    def test_a_session_is_found_and_changed_only_in_its_account(self, storage: Storage) -> None:
        tables = SqlServiceTables(storage.database)
        tables.insert_session(_session("s-mine"))
        assert tables.get_session("s-mine", account_id="acct-2") is None
        claimed = tables.claim_session(
            "s-mine", account_id="acct-2", worker_id="w", host="h", pid=1
        )
        assert claimed is None
        tables.mark_connected("s-mine", 5.0, account_id="acct-2")
        assert not tables.mark_ended("s-mine", 6.0, "skipped", account_id="acct-2")
        tables.add_event("s-mine", "connected", 5.0, account_id="acct-2")
        assert tables.events("s-mine", account_id="acct-2") == []
        row = tables.get_session("s-mine", account_id=ACCOUNT)
        assert row is not None
        assert (row.worker_id, row.connected_at, row.ended_at) == (None, None, None)
        assert tables.events("s-mine", account_id=ACCOUNT) == []

    def test_racing_claims_from_two_connections_agree_on_one_holder(
        self, storage: Storage, storage_url: str
    ) -> None:
        # Two stores on one database, as two processes would open it.
        other = open_storage(storage_url, pool_max=4)
        try:
            stores = [SqlServiceTables(storage.database), SqlServiceTables(other.database)]
            ids = [f"s-race-{i}" for i in range(20)]
            for session_id in ids:
                stores[0].insert_session(_session(session_id))
            start = threading.Barrier(2)

            def claim_all(n: int) -> list[str | None]:
                start.wait()
                seen = []
                for session_id in ids:
                    row = stores[n].claim_session(
                        session_id, account_id=ACCOUNT, worker_id=f"w-{n}", host="h", pid=n
                    )
                    seen.append(None if row is None else row.worker_id)
                return seen

            with ThreadPoolExecutor(2) as pool:
                results = list(pool.map(claim_all, (0, 1)))
            # Each session has one holder, and both claimants were told the same one.
            assert results[0] == results[1]
            for session_id, holder in zip(ids, results[0], strict=True):
                row = stores[0].get_session(session_id, account_id=ACCOUNT)
                assert row is not None and row.worker_id == holder
        finally:
            other.close()

    def test_a_store_made_before_the_holder_was_recorded_upgrades(self, storage: Storage) -> None:
        tables = SqlServiceTables(storage.database)
        tables.insert_session(_session("s-old"))
        # As a store made before the call-session-worker step left it: no holder columns.
        with storage.database.transaction() as tx:
            for column in ("worker_id", "worker_host", "worker_pid"):
                tx.run(f"ALTER TABLE call_sessions DROP COLUMN {column}")
        unrecord_steps(storage, "service", version=5)
        storage.migrate()
        assert storage.schema_versions() == latest_versions()
        row = tables.get_session("s-old", account_id=ACCOUNT)
        assert row is not None and row.worker_id is None and row.user_id == "line-1"
        claimed = tables.claim_session(
            "s-old", account_id=ACCOUNT, worker_id="w-a", host="h", pid=1
        )
        assert claimed is not None and claimed.worker_id == "w-a"

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_call_sessions_keys_and_proposals_work_as_their_account(
        self, confined: PostgresStorage
    ) -> None:
        tables = SqlServiceTables(confined.database)
        for account in (ACCOUNT, OTHER):
            tables.insert_session(
                CallSessionRow(
                    f"s-{account}", account, "user-1", False, 1.0, None, None, 0, 0, None
                )
            )
            tables.insert_api_key(
                ApiKeyRow(f"key-{account}", account, f"hash-{account}", 1.0, None, ("agent-a",))
            )
            tables.insert_proposal(
                ProposalRow(f"p-{account}", account, "user-1", "bk:old", "fact", 0.9,
                            f"s-{account}", "pending", 1.0, 1e12, None, "key-1", b"s", b"w")
            )  # fmt: skip
        mine = f"s-{ACCOUNT}"
        tables.add_event(mine, "created", 1.0, account_id=ACCOUNT)
        tables.mark_connected(mine, 2.0, account_id=ACCOUNT)
        held = tables.claim_session(mine, account_id=ACCOUNT, worker_id="w-1", host="h", pid=7)
        assert held is not None and (held.worker_id, held.connected_at) == ("w-1", 2.0)
        tables.add_tool_call(
            mine, account_id=ACCOUNT, tool="store_memory", memory_id=None, key="bk:old",
            memory_type="fact", ts=3.0,
        )  # fmt: skip
        assert tables.mark_ended(mine, 4.0, "scheduled", account_id=ACCOUNT)
        assert not tables.mark_ended(mine, 5.0, "scheduled", account_id=ACCOUNT)
        tables.set_extracted(mine, 2, "done", account_id=ACCOUNT)
        row = tables.get_session(mine, account_id=ACCOUNT)
        assert row is not None
        assert (row.tool_calls, row.memories_extracted, row.ended_at) == (1, 2, 4.0)
        events = tables.events(mine, account_id=ACCOUNT)
        assert [e.kind for e in events] == ["created", "tool_call", "ended"]
        tables.replace_event_keys(ACCOUNT, "bk:old", "bk:new")
        assert {e.key for e in tables.events(mine, account_id=ACCOUNT)} == {None, "bk:new"}
        # Another account's session is not found, nor changed, by its id.
        theirs = f"s-{OTHER}"
        assert tables.get_session(theirs, account_id=ACCOUNT) is None
        assert (
            tables.claim_session(theirs, account_id=ACCOUNT, worker_id="w", host="h", pid=1) is None
        )
        assert [k.id for k in tables.api_keys(ACCOUNT)] == [f"key-{ACCOUNT}"]
        assert tables.api_keys(ACCOUNT)[0].agents == ("agent-a",)
        assert tables.get_proposal(ACCOUNT, f"p-{ACCOUNT}") is not None
        pending = tables.pending_proposals(ACCOUNT, "user-1", key="bk:old", now=2.0)
        assert [p.id for p in pending] == [f"p-{ACCOUNT}"]
        assert tables.decide_proposal(f"p-{ACCOUNT}", "confirmed", 3.0, account_id=ACCOUNT)
        assert not tables.decide_proposal(f"p-{OTHER}", "confirmed", 3.0, account_id=ACCOUNT)
        assert tables.pending_proposals(ACCOUNT, "user-1", key=None, now=2.0) == []
        assert len(tables.pending_proposals(OTHER, "user-1", key=None, now=2.0)) == 1
