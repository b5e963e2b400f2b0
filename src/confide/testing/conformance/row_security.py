"""Row-level security: the database itself keeps each account's rows from the others.

Superusers (and roles with ``BYPASSRLS``) are never confined by PostgreSQL, so these tests
make an ordinary role, give it the tables the way a deployment's service role has them (it
owns them: the policies are ``FORCE``d), and read through it with a raw SQL connection.

The ``confined`` store goes further: its policies have no bypass, so a statement that runs
across accounts (``confide.all_accounts``) sees no row and may write none. Every read and
write of one account's apps, checkpoints, call sessions, proposals, threads, messages and
consolidation pairs must still work there, which it does only when it runs as its account.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.errors import NotFoundError, StorageError
from confide.index.vectors import VectorIndexer
from confide.storage import FEATURES
from confide.storage.apps import DeferredRow, SqlAppTables, UsageRow
from confide.storage.base import Capability, Storage
from confide.storage.chat import MessageRow, SqlMessageTables, SummaryRange
from confide.storage.checkpoints import (
    BlobRow,
    CheckpointRow,
    SqlCheckpointTables,
    ThreadOwner,
    WriteRow,
)
from confide.storage.consolidation import SqlConsolidationTables
from confide.storage.keystore import KeyStore
from confide.storage.service import ApiKeyRow, CallSessionRow, ProposalRow
from confide.storage.service.sessions import SqlServiceTables
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import TEST_KEK, StorageHarness
from confide.testing.embedders import HashingEmbedder
from confide.types import MemoryFilter, MemoryState

if TYPE_CHECKING:
    from confide.storage.postgres import PostgresStorage

OTHER = "acct-2"


def _connect(conninfo: str, **overrides: Any) -> Any:
    import psycopg
    from psycopg.conninfo import make_conninfo

    return psycopg.connect(make_conninfo(conninfo, **overrides), autocommit=True)


def _count(conn: Any, table: str, account_id: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM {table} WHERE account_id = %s", [account_id])
    return int(row.fetchone()[0])


def _account_tables(conn: Any) -> list[str]:
    """The tables of the current schema with an ``account_id`` column."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "JOIN information_schema.columns i "
        "ON i.table_schema = n.nspname AND i.table_name = c.relname "
        "WHERE n.nspname = current_schema() AND c.relkind = 'r' AND i.column_name = 'account_id'"
    ).fetchall()
    return sorted(str(r[0]) for r in rows)


def _policies_without_bypass(conn: Any) -> None:
    """Replace each account policy by one that ignores ``confide.all_accounts``.

    The job queue and the owed scrubs keep theirs: claiming jobs and retrying every pending
    scrub span accounts by nature.
    """
    for table in _account_tables(conn):
        if table in ("jobs", "scrubs"):
            continue
        allowed = "account_id = current_setting('confide.account_id', true)"
        if table == "ops_events":
            allowed = f"account_id IS NULL OR {allowed}"
        conn.execute(f"DROP POLICY IF EXISTS confide_account ON {table}")
        conn.execute(
            f"CREATE POLICY confide_account ON {table} USING ({allowed}) WITH CHECK ({allowed})"
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


def _message(account_id: str, message_id: str) -> MessageRow:
    return MessageRow(
        id=message_id,
        account_id=account_id,
        user_id="user-1",
        conversation_id="conversation-1",
        index=0,
        role="user",
        channel=None,
        subject_id=None,
        created_at=1.0,
        summarised_at=None,
        key_id="key-1",
        ciphertext=b"sealed",
        wrapped_key=b"wrapped",
    )


class RowSecurityConformance(StorageHarness):
    """Another account's rows are invisible to a connection confined to one account."""

    @pytest.fixture
    def app_role(self, storage: Storage) -> Iterator[str]:
        """An ordinary role that owns this store's tables, as a deployment's service role."""
        conninfo = str(getattr(storage, "conninfo"))  # noqa: B009 - PostgreSQL only
        role = f"confide_app_{uuid.uuid4().hex[:10]}"
        with _connect(conninfo) as admin:
            admin.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS")
            admin.execute(f"GRANT ALL ON SCHEMA public TO {role}")
            tables = admin.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
            for (table,) in tables:
                admin.execute(f"ALTER TABLE {table} OWNER TO {role}")
            admin.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}")
            # What docs/security.md asks for, so that erasure scrubs the files completely.
            admin.execute(f"GRANT pg_checkpoint TO {role}")
            admin.execute(f"GRANT EXECUTE ON FUNCTION pg_switch_wal() TO {role}")
        try:
            yield role
        finally:
            with _connect(conninfo) as admin:
                admin.execute(f"REASSIGN OWNED BY {role} TO CURRENT_USER")
                admin.execute(f"DROP OWNED BY {role}")
                admin.execute(f"DROP ROLE {role}")

    @pytest.fixture
    def confined(self, storage: Storage, app_role: str) -> Iterator[PostgresStorage]:
        """The store as the service role, under account policies without the bypass."""
        from psycopg.conninfo import make_conninfo

        from confide.storage.postgres import PostgresStorage

        conninfo = str(getattr(storage, "conninfo"))  # noqa: B009
        with _connect(conninfo) as admin:
            _policies_without_bypass(admin)
        store = PostgresStorage(
            make_conninfo(conninfo, user=app_role), max_size=2, features=FEATURES
        )
        try:
            yield store
        finally:
            store.close()

    @pytest.fixture
    def confined_engine(
        self, confined: PostgresStorage, engine: MemoryEngine, key_store: KeyStore
    ) -> MemoryEngine:
        """An engine over the ``confined`` store."""
        return MemoryEngine(
            confined, KeyRing(primary=TEST_KEK), settings=engine.settings, key_store=key_store
        )

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_a_transaction_stays_with_one_account(self, storage: Storage) -> None:
        with pytest.raises(StorageError), storage.transaction() as tx:
            tx.next_rev("acct-1", "thread-1")
            tx.next_rev(OTHER, "thread-2")
        assert storage.current_rev("thread-1", account_id=None) == 0  # rolled back

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_every_account_table_is_forced(self, storage: Storage) -> None:
        """Every table with an ``account_id`` column, including tables added later: a new
        one must join ``ACCOUNT_TABLES`` (migrations) to be confined."""
        storage.bind_embedder("test-model", 8)  # the embeddings table appears with it
        with _connect(str(getattr(storage, "conninfo"))) as conn:  # noqa: B009
            rows = conn.execute(
                "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "JOIN information_schema.columns i "
                "ON i.table_schema = n.nspname AND i.table_name = c.relname "
                "WHERE n.nspname = current_schema() AND c.relkind = 'r' "
                "AND i.column_name = 'account_id'"
            ).fetchall()
        found = {str(r[0]): (bool(r[1]), bool(r[2])) for r in rows}
        assert {"memories", "history", "embeddings"} <= set(found)
        assert {t: v for t, v in found.items() if v != (True, True)} == {}

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_raw_connection_sees_only_its_own_account(
        self, engine: MemoryEngine, storage: Storage, app_role: str
    ) -> None:
        add(engine, value="first account's value")
        add(engine, value="second account's value", account_id=OTHER)
        conninfo = str(getattr(storage, "conninfo"))  # noqa: B009
        with _connect(conninfo, user=app_role) as raw:
            # No account named: nothing at all.
            assert raw.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
            assert raw.execute("SELECT count(*) FROM history").fetchone()[0] == 0
            raw.execute("SELECT set_config('confide.account_id', %s, false)", ["acct-1"])
            for table in ("memories", "history", "memory_tokens", "changes", "threads"):
                assert _count(raw, table, OTHER) == 0, table
            assert _count(raw, "memories", "acct-1") == 1
            # Not even a query that asks for every row reaches the other account.
            owners = {r[0] for r in raw.execute("SELECT account_id FROM memories").fetchall()}
            assert owners == {"acct-1"}
            # Nor may it write into the other account.
            import psycopg

            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                raw.execute(
                    "INSERT INTO threads (thread_id, account_id, rev) VALUES ('t', %s, 1)",
                    [OTHER],
                )
            # An update of every row changes only its own account's.
            changed = raw.execute("UPDATE memories SET last_accessed_at = 1").rowcount
            assert changed == 1

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_service_works_as_the_confined_role(
        self, engine: MemoryEngine, storage: Storage, key_store: KeyStore, app_role: str
    ) -> None:
        from psycopg.conninfo import make_conninfo

        from confide.storage.postgres import PostgresStorage

        conninfo = str(getattr(storage, "conninfo"))  # noqa: B009
        confined = PostgresStorage(
            make_conninfo(conninfo, user=app_role), max_size=2, features=FEATURES
        )
        try:
            app = MemoryEngine(
                confined, KeyRing(primary=TEST_KEK), settings=engine.settings, key_store=key_store
            )
            embedder = HashingEmbedder()
            app.add_indexer(VectorIndexer(confined, embedder, link_top_k=2, link_min=0.0))
            mine = add(app, value="tea with lemon")
            theirs = add(app, value="coffee, black", account_id=OTHER)
            near = confined.vector_search(
                MemoryFilter(account_id=OTHER, user_id="user-1"), embedder.embed_one("coffee"), 5
            )
            assert [h.memory_id for h in near] == [theirs.id]
            updated = app.update(mine.id, {"value": "tea with honey"}, account_id="acct-1")
            assert app.get(updated.id, account_id="acct-1").value == "tea with honey"
            listed = app.list_memories(MemoryFilter(account_id=OTHER, user_id="user-1"))
            assert [m.id for m in listed] == [theirs.id]
            with pytest.raises(NotFoundError):
                app.get(theirs.id, account_id="acct-1")
            assert len(app.history(updated.id, account_id="acct-1")) >= 2
            app.erase_user(account_id="acct-1", user_id="user-1")
            assert app.list_memories(MemoryFilter(account_id="acct-1", user_id="user-1")) == []
            assert app.get(theirs.id, account_id=OTHER).value == "coffee, black"
        finally:
            confined.close()

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_work_across_accounts_sees_nothing_without_the_bypass(
        self, confined: PostgresStorage
    ) -> None:
        """What makes the tests below worth having: under the ``confined`` policies a read
        across accounts finds no row, so their reads find rows only as their account."""
        apps = SqlAppTables(confined)
        apps.put_app(ACCOUNT, "app-1", name=None, memory_cap=None, ts=1.0)
        assert apps.get_app(ACCOUNT, "app-1") is not None
        with confined.reader_across_accounts() as db:
            assert db.run("SELECT count(*) FROM apps").fetchone()[0] == 0

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_app_tables_work_as_their_account(self, confined: PostgresStorage) -> None:
        apps = SqlAppTables(confined)
        for account in (ACCOUNT, OTHER):
            apps.put_app(account, "app-1", name=f"{account} app", memory_cap=5, ts=1.0)
            apps.record_usage(UsageRow(account, "chat", "app-1", 10, 5, 1, 2.0, 100.0))
            apps.defer(
                DeferredRow(f"work-{account}", account, "end", "app-1", 3.0, "k", b"c", b"w")
            )
        found = apps.get_app(ACCOUNT, "app-1")
        assert found is not None and found.name == f"{ACCOUNT} app"
        assert apps.mark_uninstalled(ACCOUNT, "app-1", 4.0).uninstalled_at == 4.0
        assert [(t.operation, t.calls) for t in apps.usage_totals(ACCOUNT, since=None)] == [
            ("chat", 1)
        ]
        assert apps.spent_units(ACCOUNT, 0.0) == 2.0
        assert apps.swap_poll(ACCOUNT, "poller", 5.0) is None
        assert apps.swap_poll(ACCOUNT, "poller", 6.0) == 5.0
        assert [d.id for d in apps.deferred(ACCOUNT, 10)] == [f"work-{ACCOUNT}"]
        assert apps.drop_deferred(ACCOUNT, f"work-{ACCOUNT}")
        assert not apps.drop_deferred(ACCOUNT, f"work-{OTHER}")
        assert apps.deferred(ACCOUNT, 10) == []
        with confined.transaction() as tx:
            apps.lock_app_scope(tx, ACCOUNT, "app-1")
            assert apps.count_app_memories(tx, ACCOUNT, "app-1") == 0
        other = apps.get_app(OTHER, "app-1")
        assert other is not None and other.uninstalled_at is None

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

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_thread_reads_work_as_their_account(
        self, confined: PostgresStorage, confined_engine: MemoryEngine
    ) -> None:
        add(confined_engine, value="tea")
        add(confined_engine, value="coffee", account_id=OTHER)
        thread = f"{ACCOUNT}/user-1"
        assert confined.current_rev(thread, account_id=ACCOUNT) == 1
        changes = confined.changes_since(thread, 0, 10, account_id=ACCOUNT)
        assert [(c.rev, c.account_id) for c in changes] == [(1, ACCOUNT)]
        assert confined.unseen(ACCOUNT, thread, "agent")
        header = confined_engine.deliver_delta(account_id=ACCOUNT, user_id="user-1", reader="agent")
        assert "Favorite color is tea" in header
        assert not confined.unseen(ACCOUNT, thread, "agent")
        assert confined.current_rev(f"{OTHER}/user-1", account_id=ACCOUNT) == 0

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_messages_and_consolidation_pairs_work_as_their_account(
        self, confined: PostgresStorage, confined_engine: MemoryEngine
    ) -> None:
        memory = add(confined_engine, value="tea")
        messages = SqlMessageTables(confined)
        for account in (ACCOUNT, OTHER):
            generation = confined.key_generation(account, "user-1")
            row = _message(account, f"m-{account}")
            assert messages.next_index_and_insert(row, key_generation=generation) == 0
        with confined.transaction() as tx:
            messages.lock_conversation(tx, ACCOUNT, "conversation-1")
            summary = SummaryRange(ACCOUNT, "user-1", "conversation-1", 0, 1, memory.id, 2.0)
            assert messages.record_summary(tx, summary)
            assert messages.mark_summarised(tx, summary) == 1
        assert [m.id for m in messages.messages(ACCOUNT, "conversation-1", after=-1, limit=5)] == [
            f"m-{ACCOUNT}"
        ]
        assert messages.unsummarised(ACCOUNT, "conversation-1") == []
        assert [s.memory_id for s in messages.summaries(ACCOUNT, "conversation-1")] == [memory.id]
        assert len(messages.unsummarised(OTHER, "conversation-1")) == 1

        pairs = SqlConsolidationTables(confined.database)
        for account in (ACCOUNT, OTHER):
            pairs.record_judged(account, "user-1", [("fp-1", "same"), ("fp-2", "distinct")], 5.0)
        assert pairs.judged(ACCOUNT, "user-1", ["fp-1", "fp-3"]) == {"fp-1": 5.0}
        assert pairs.judged_since(ACCOUNT, "user-1", 5.0) == 2
        assert pairs.forget_judged(ACCOUNT, "user-1", 6.0) == 2
        assert pairs.judged_since(OTHER, "user-1", 0.0) == 2
        confined.touch(ACCOUNT, [memory.id], 7.0)
        assert pairs.most_retrieved(ACCOUNT, "user-1", 5) == [memory.id]

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_memory_work_of_one_account_runs_as_that_account(
        self, confined: PostgresStorage, confined_engine: MemoryEngine
    ) -> None:
        embedder = HashingEmbedder()
        confined_engine.add_indexer(VectorIndexer(confined, embedder, link_top_k=2, link_min=0.0))
        mine = add(confined_engine, value="tea with lemon")
        theirs = add(confined_engine, value="coffee, black", account_id=OTHER)
        near = confined.vector_search(
            MemoryFilter(account_id=ACCOUNT, user_id="user-1"), embedder.embed_one("tea"), 5
        )
        assert [h.memory_id for h in near] == [mine.id]
        updated = confined_engine.update(mine.id, {"value": "tea with honey"}, account_id=ACCOUNT)
        assert confined_engine.get(updated.id, account_id=ACCOUNT).value == "tea with honey"
        assert len(confined_engine.history(updated.id, account_id=ACCOUNT)) >= 2
        confined_engine.forget(updated.id, account_id=ACCOUNT)
        restored = confined_engine.restore(updated.id, account_id=ACCOUNT)
        assert restored.value == "tea with honey"
        exported = confined_engine.export_user(account_id=ACCOUNT, user_id="user-1")
        assert {m["value"] for m in exported["memories"]} == {"tea with lemon", "tea with honey"}
        confined_engine.erase_user(account_id=ACCOUNT, user_id="user-1")
        assert (
            confined_engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1")) == []
        )
        assert confined_engine.get(theirs.id, account_id=OTHER).value == "coffee, black"

    def test_the_ttl_sweep_retires_memories_of_several_accounts_in_one_run(
        self, engine: MemoryEngine
    ) -> None:
        past = datetime.now(UTC) - timedelta(days=1)
        mine = add(engine, key="trip", value="in Rome", expires_at=past)
        theirs = add(engine, key="trip", value="in Oslo", expires_at=past, account_id=OTHER)
        assert engine.expire_idle(idle_days=60, importance_below=0) == 2
        for memory_id, account_id in ((mine.id, ACCOUNT), (theirs.id, OTHER)):
            assert engine.get(memory_id, account_id=account_id).state == MemoryState.SOFT_DELETED
