"""Versioned schema migrations, one ordered list per dialect.

Each migration is applied once, inside a transaction, and recorded in ``schema_migrations``.
Statements use ``IF NOT EXISTS`` so a half-recorded run can be repeated safely; SQLite lacks
``ADD COLUMN IF NOT EXISTS``, and its backend skips such a statement when the column exists.
"""

from __future__ import annotations

from dataclasses import dataclass

from confide.storage.checkpoints import checkpoint_ddl, checkpoint_owner_ddl
from confide.storage.derived import memory_sources_ddl
from confide.storage.jobs import jobs_ddl


@dataclass(frozen=True, slots=True)
class Migration:
    """One named schema step with its statements for each dialect."""

    version: int
    name: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]


def _memories(blob: str, real: str, boolean: str) -> str:
    return f"""
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    agent_id TEXT, run_id TEXT, actor_id TEXT, role TEXT, subject_id TEXT,
    type TEXT NOT NULL,
    category TEXT,
    key TEXT NOT NULL,
    key_lc TEXT NOT NULL,
    confidence {real} NOT NULL,
    importance INTEGER NOT NULL,
    source TEXT NOT NULL,
    visibility TEXT NOT NULL,
    pinned {boolean} NOT NULL,
    state TEXT NOT NULL,
    version INTEGER NOT NULL,
    supersedes_id TEXT,
    lineage_id TEXT NOT NULL,
    created_at {real} NOT NULL,
    updated_at {real} NOT NULL,
    last_accessed_at {real},
    purge_at {real},
    expires_at {real},
    key_id TEXT NOT NULL,
    ciphertext {blob} NOT NULL,
    wrapped_key {blob} NOT NULL
)"""


_COMMON_INDEXES = (
    "CREATE INDEX IF NOT EXISTS memories_owner "
    "ON memories (account_id, user_id, state, updated_at)",
    "CREATE INDEX IF NOT EXISTS memories_key ON memories (account_id, user_id, key_lc, state)",
    "CREATE INDEX IF NOT EXISTS memories_category "
    "ON memories (account_id, user_id, category, state, updated_at)",
    "CREATE INDEX IF NOT EXISTS memories_lineage ON memories (account_id, lineage_id, version)",
    # Shared memories are few: a partial index finds them without walking private ones.
    "CREATE INDEX IF NOT EXISTS memories_shared ON memories (account_id, subject_id, state) "
    "WHERE visibility = 'shared'",
    "CREATE INDEX IF NOT EXISTS memories_purge ON memories (state, purge_at)",
    "CREATE INDEX IF NOT EXISTS history_lineage ON history (account_id, lineage_id)",
    "CREATE INDEX IF NOT EXISTS history_owner ON history (account_id, user_id)",
    "CREATE INDEX IF NOT EXISTS changes_memory ON changes (memory_id)",
    "CREATE INDEX IF NOT EXISTS relations_to ON relations (to_id)",
    "CREATE INDEX IF NOT EXISTS ops_ts ON ops_events (ts)",
    "CREATE INDEX IF NOT EXISTS ops_owner ON ops_events (account_id, user_id)",
)


# Posting lists: an owner's rows for one term must be read without touching the table, so
# SQLite clusters them (WITHOUT ROWID) and PostgreSQL covers them with an INCLUDE index.
_SQLITE_TOKENS = (
    """CREATE TABLE IF NOT EXISTS memory_tokens (
    account_id TEXT NOT NULL, user_id TEXT NOT NULL, token INTEGER NOT NULL,
    memory_id TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    tf INTEGER NOT NULL, doc_len INTEGER NOT NULL,
    PRIMARY KEY (account_id, user_id, token, memory_id)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS tokens_memory ON memory_tokens (memory_id)",
)
_POSTGRES_TOKENS = (
    """CREATE TABLE IF NOT EXISTS memory_tokens (
    memory_id TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    account_id TEXT NOT NULL, user_id TEXT NOT NULL,
    token BIGINT NOT NULL, tf INTEGER NOT NULL, doc_len INTEGER NOT NULL,
    PRIMARY KEY (memory_id, token))""",
    "CREATE INDEX IF NOT EXISTS tokens_owner ON memory_tokens (account_id, user_id, token) "
    "INCLUDE (memory_id, tf, doc_len)",
)


def _core(
    blob: str, real: str, boolean: str, serial: str, tokens_ddl: tuple[str, ...]
) -> tuple[str, ...]:
    return (
        _memories(blob, real, boolean),
        f"""CREATE TABLE IF NOT EXISTS history (
            id {serial},
            account_id TEXT NOT NULL, user_id TEXT NOT NULL,
            memory_id TEXT NOT NULL, lineage_id TEXT NOT NULL,
            event TEXT NOT NULL, old_ref TEXT, new_ref TEXT, actor TEXT,
            meta TEXT NOT NULL, ts {real} NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS threads (
            thread_id TEXT PRIMARY KEY, account_id TEXT NOT NULL, rev INTEGER NOT NULL)""",
        f"""CREATE TABLE IF NOT EXISTS changes (
            thread_id TEXT NOT NULL, rev INTEGER NOT NULL, account_id TEXT NOT NULL,
            memory_id TEXT NOT NULL, event TEXT NOT NULL, meta TEXT NOT NULL,
            ts {real} NOT NULL, PRIMARY KEY (thread_id, rev))""",
        f"""CREATE TABLE IF NOT EXISTS data_keys (
            account_id TEXT NOT NULL, user_id TEXT NOT NULL, purpose TEXT NOT NULL,
            key_id TEXT NOT NULL, wrapped {blob} NOT NULL, kek_id TEXT NOT NULL,
            created_at {real} NOT NULL, PRIMARY KEY (account_id, user_id, purpose))""",
        *tokens_ddl,
        f"""CREATE TABLE IF NOT EXISTS relations (
            from_id TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
            to_id TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
            account_id TEXT NOT NULL, user_id TEXT NOT NULL,
            relation_type TEXT NOT NULL, strength {real} NOT NULL, created_at {real} NOT NULL,
            PRIMARY KEY (from_id, to_id))""",
        f"""CREATE TABLE IF NOT EXISTS ops_events (
            id {serial}, account_id TEXT, user_id TEXT, thread_id TEXT,
            node TEXT NOT NULL, op TEXT NOT NULL, status TEXT NOT NULL,
            memory_id TEXT, category TEXT, sim {real}, ts {real} NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
        *_COMMON_INDEXES,
    )


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        version=1,
        name="core",
        sqlite=_core(
            "BLOB", "REAL", "INTEGER", "INTEGER PRIMARY KEY AUTOINCREMENT", _SQLITE_TOKENS
        ),
        postgres=_core(
            "BYTEA",
            "DOUBLE PRECISION",
            "BOOLEAN",
            "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
            _POSTGRES_TOKENS,
        ),
    ),
    Migration(
        version=2,
        name="embeddings",
        sqlite=(
            # seq orders vectors as they arrive, so an in-process index can load only the
            # rows it has not seen; vector_owners tells it when to look (see sqlite_vectors).
            """CREATE TABLE IF NOT EXISTS embeddings (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                memory_id TEXT NOT NULL UNIQUE REFERENCES memories (id) ON DELETE CASCADE,
                account_id TEXT NOT NULL, user_id TEXT NOT NULL,
                model_id TEXT NOT NULL, vector BLOB NOT NULL)""",
            "CREATE INDEX IF NOT EXISTS embeddings_owner ON embeddings (account_id, user_id, seq)",
            """CREATE TABLE IF NOT EXISTS vector_owners (
                account_id TEXT NOT NULL, user_id TEXT NOT NULL,
                max_seq INTEGER NOT NULL, deletions INTEGER NOT NULL,
                PRIMARY KEY (account_id, user_id))""",
            """CREATE TRIGGER IF NOT EXISTS embeddings_added AFTER INSERT ON embeddings BEGIN
                INSERT INTO vector_owners (account_id, user_id, max_seq, deletions)
                VALUES (NEW.account_id, NEW.user_id, NEW.seq, 0)
                ON CONFLICT (account_id, user_id) DO UPDATE SET max_seq = NEW.seq;
            END""",
            """CREATE TRIGGER IF NOT EXISTS embeddings_removed AFTER DELETE ON embeddings BEGIN
                UPDATE vector_owners SET deletions = deletions + 1
                WHERE account_id = OLD.account_id AND user_id = OLD.user_id;
            END""",
        ),
        postgres=("CREATE EXTENSION IF NOT EXISTS vector",),
    ),
)


def _service(blob: str, real: str, serial: str) -> tuple[str, ...]:
    # Call sessions, their events, API keys and proposed changes. None holds conversation
    # text: events carry tool names, ids, keys and types; proposal values are sealed.
    return (
        f"""CREATE TABLE IF NOT EXISTS call_sessions (
            id TEXT PRIMARY KEY, account_id TEXT NOT NULL, user_id TEXT NOT NULL,
            is_reminder INTEGER NOT NULL, created_at {real} NOT NULL,
            connected_at {real}, ended_at {real},
            tool_calls INTEGER NOT NULL, memories_extracted INTEGER NOT NULL,
            summarization TEXT)""",
        "CREATE INDEX IF NOT EXISTS call_sessions_owner ON call_sessions (account_id, user_id)",
        f"""CREATE TABLE IF NOT EXISTS session_events (
            id {serial}, session_id TEXT NOT NULL, account_id TEXT NOT NULL,
            user_id TEXT NOT NULL, kind TEXT NOT NULL, tool TEXT, memory_id TEXT,
            key TEXT, memory_type TEXT, ts {real} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS session_events_session ON session_events (session_id)",
        f"""CREATE TABLE IF NOT EXISTS api_keys (
            id TEXT PRIMARY KEY, account_id TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE,
            created_at {real} NOT NULL, revoked_at {real})""",
        f"""CREATE TABLE IF NOT EXISTS proposals (
            id TEXT PRIMARY KEY, account_id TEXT NOT NULL, user_id TEXT NOT NULL,
            key TEXT NOT NULL, key_lc TEXT NOT NULL, type TEXT NOT NULL,
            confidence {real} NOT NULL, session_id TEXT, status TEXT NOT NULL,
            created_at {real} NOT NULL, expires_at {real} NOT NULL, decided_at {real},
            key_id TEXT NOT NULL, ciphertext {blob} NOT NULL, wrapped_key {blob} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS proposals_owner "
        "ON proposals (account_id, user_id, key_lc, status)",
    )


HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
"""pgvector's HNSW build settings. A graph built with a wider candidate list (pgvector's
default is 64) reaches the same recall with a smaller ``hnsw.ef_search``, so every query
walks fewer graph nodes; building costs more per inserted vector."""

HNSW_EF_SEARCH = 128
"""The default ``hnsw.ef_search`` (``CONFIDE_POSTGRES_EF_SEARCH``). With each turn's vector
in the context of the one before it (``CONFIDE_RUN_CONTEXT``), 64 found 0.87 of the true top
10 at 100k memories and 128 finds 0.92, for 0.3 ms more per search (``bench/scale.py
--ef-search``; docs/retrieval.md)."""

POSTGRES_HNSW_INDEX = (
    "CREATE INDEX IF NOT EXISTS embeddings_hnsw ON embeddings USING hnsw "
    f"(embedding vector_cosine_ops) WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
)

MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=3,
        name="service",
        sqlite=_service("BLOB", "REAL", "INTEGER PRIMARY KEY AUTOINCREMENT"),
        postgres=_service(
            "BYTEA", "DOUBLE PRECISION", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
        ),
    ),
    Migration(
        version=4,
        name="hnsw-graph",
        sqlite=(),
        # An existing graph takes the new build settings for every insert from now on. It is
        # not rebuilt here: that would hold every starting worker (and all writes) for
        # minutes on a large store; ``REINDEX INDEX CONCURRENTLY embeddings_hnsw`` rebuilds
        # it online when convenient (docs/retrieval.md).
        postgres=(
            f"""DO $$ BEGIN
                IF to_regclass('embeddings_hnsw') IS NOT NULL THEN
                    ALTER INDEX embeddings_hnsw SET (ef_construction = {HNSW_EF_CONSTRUCTION});
                END IF;
            END $$""",
        ),
    ),
)


_SECRET_COLUMNS = {
    "memories": ("ciphertext", "wrapped_key", "key_id"),
    "proposals": ("ciphertext", "wrapped_key", "key_id"),
    "data_keys": ("wrapped", "key_id"),
    "user_keys": ("wrapped", "key_id"),
}


def no_statistics(*tables: str) -> tuple[str, ...]:
    """PostgreSQL: collect no planner statistics on columns holding ciphertexts or keys.

    ``ANALYZE`` copies sample values into ``pg_statistic``, a catalog whose dead rows no
    erasure can reach; the planner never needs these columns' distributions.
    """
    return tuple(
        f"ALTER TABLE {table} ALTER COLUMN {column} SET STATISTICS 0"
        for table in tables
        for column in _SECRET_COLUMNS[table]
    )


def key_tables(blob: str, real: str) -> tuple[str, ...]:
    """The tables of a key store: user keys by generation, and the store's own facts.

    A separate key store (its own SQLite file or PostgreSQL database) has these tables only;
    a store that keeps its keys beside the data (tests, benchmarks) has them in migration 5.
    """
    return (
        f"""CREATE TABLE IF NOT EXISTS user_keys (
            account_id TEXT NOT NULL, user_id TEXT NOT NULL, purpose TEXT NOT NULL,
            generation INTEGER NOT NULL, key_id TEXT NOT NULL, wrapped {blob} NOT NULL,
            kek_id TEXT NOT NULL, created_at {real} NOT NULL,
            PRIMARY KEY (account_id, user_id, purpose, generation))""",
        "CREATE INDEX IF NOT EXISTS user_keys_kek ON user_keys (kek_id)",
        """CREATE TABLE IF NOT EXISTS key_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    )


def _erasure(blob: str, real: str) -> tuple[str, ...]:
    # key_generations: one counter per user, bumped by erasure inside the data transaction
    # that deletes the user's rows, and checked by every write transaction, so a process
    # holding a destroyed key in its cache can never write under it. api_keys.scopes: an
    # admin scope for operator routes (erasure over HTTP).
    return (
        """CREATE TABLE IF NOT EXISTS key_generations (
            account_id TEXT NOT NULL, user_id TEXT NOT NULL, generation INTEGER NOT NULL,
            PRIMARY KEY (account_id, user_id))""",
        *key_tables(blob, real),
        "ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS scopes TEXT",
    )


_API_KEY_AGENTS = """CREATE TABLE IF NOT EXISTS api_key_agents (
    key_id TEXT NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    agent TEXT NOT NULL, position INTEGER NOT NULL,
    PRIMARY KEY (key_id, agent))"""

# A counter every in-place change of a memory row bumps (forget, restore, visibility,
# superseding): writers compare-and-set on it, so one that read an older state of the row
# loses instead of undoing the change. Existing rows start at 1; PostgreSQL adds a column with
# a constant default without rewriting the table.
_ROW_VERSION = (
    "ALTER TABLE memories ADD COLUMN IF NOT EXISTS row_version INTEGER NOT NULL DEFAULT 1",
)

# Memory keys are blinded by the engine (it holds the account keys SQL has not): a store that
# already has memories was written with clear keys and is marked for the engine's upgrade; an
# empty one never needs it. ``INSERT ... SELECT ... WHERE`` reads the same in both dialects.
_SERVICE_KEYS = (
    "EXISTS (SELECT 1 FROM proposals) OR EXISTS (SELECT 1 FROM session_events "
    "WHERE key IS NOT NULL)"
)
_KEYS_BLINDED = (
    "INSERT INTO store_meta (key, value) SELECT 'keys_blinded', 'pending' "
    "WHERE EXISTS (SELECT 1 FROM memories) ON CONFLICT (key) DO NOTHING",
    "INSERT INTO store_meta (key, value) SELECT 'keys_blinded', 'done' "
    "WHERE NOT EXISTS (SELECT 1 FROM memories) ON CONFLICT (key) DO NOTHING",
    # The service tables (proposals, session events) are upgraded by the service.
    "INSERT INTO store_meta (key, value) SELECT 'service_keys_blinded', 'pending' "
    f"WHERE {_SERVICE_KEYS} ON CONFLICT (key) DO NOTHING",
    "INSERT INTO store_meta (key, value) SELECT 'service_keys_blinded', 'done' "
    f"WHERE NOT ({_SERVICE_KEYS}) ON CONFLICT (key) DO NOTHING",
)

MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=5,
        name="erasure",
        sqlite=_erasure("BLOB", "REAL"),
        postgres=(
            *_erasure("BYTEA", "DOUBLE PRECISION"),
            *no_statistics("memories", "proposals", "data_keys", "user_keys"),
        ),
    ),
    Migration(version=6, name="row-version", sqlite=_ROW_VERSION, postgres=_ROW_VERSION),
    Migration(
        version=7,
        name="api-key-agents",
        # The agents an API key may act as, in the order given when it was made (the first
        # is the one a request naming no agent acts as). A key with no rows here acts as
        # agent ``default`` only.
        sqlite=(_API_KEY_AGENTS,),
        postgres=(_API_KEY_AGENTS,),
    ),
    Migration(version=8, name="blind-keys", sqlite=_KEYS_BLINDED, postgres=_KEYS_BLINDED),
)


def _chat(blob: str, real: str) -> tuple[str, ...]:
    # Chat messages (content sealed by the engine under the owner's key) and the ranges of
    # them summarised. A range is recorded once: the unique key makes a second commit of the
    # same range a no-op inside the transaction that would have stored its chunk twice.
    return (
        f"""CREATE TABLE IF NOT EXISTS messages (
            id TEXT PRIMARY KEY, account_id TEXT NOT NULL, user_id TEXT NOT NULL,
            conversation_id TEXT NOT NULL, idx INTEGER NOT NULL, role TEXT NOT NULL,
            channel TEXT, subject_id TEXT, created_at {real} NOT NULL, summarised_at {real},
            key_id TEXT NOT NULL, ciphertext {blob} NOT NULL, wrapped_key {blob} NOT NULL,
            UNIQUE (account_id, conversation_id, idx))""",
        "CREATE INDEX IF NOT EXISTS messages_owner ON messages (account_id, user_id)",
        "CREATE INDEX IF NOT EXISTS messages_summarised ON messages (summarised_at)",
        f"""CREATE TABLE IF NOT EXISTS conversation_summaries (
            account_id TEXT NOT NULL, user_id TEXT NOT NULL, conversation_id TEXT NOT NULL,
            range_start INTEGER NOT NULL, range_end INTEGER NOT NULL, memory_id TEXT NOT NULL,
            created_at {real} NOT NULL,
            PRIMARY KEY (account_id, conversation_id, range_start, range_end))""",
        "CREATE INDEX IF NOT EXISTS conversation_summaries_owner "
        "ON conversation_summaries (account_id, user_id)",
    )


_SECRET_COLUMNS["messages"] = ("ciphertext", "wrapped_key", "key_id")

MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=9,
        name="chat-messages",
        sqlite=_chat("BLOB", "REAL"),
        postgres=(*_chat("BYTEA", "DOUBLE PRECISION"), *no_statistics("messages")),
    ),
)


def _apps(blob: str, real: str, serial: str) -> tuple[str, ...]:
    # App memories: a memory in an app's curated scope names the app (``app_id``; NULL for a
    # user's own memory), and the partial index finds a scope's memories without walking
    # users'. ``apps`` holds each app's display name and cap override (never content).
    # ``llm_usage`` is the ledger of LLM calls (operation, scope, tokens, cost units) and
    # ``usage_polls`` each caller's last poll of it; ``deferred_work`` keeps background
    # memory work held back by the account's budget (its payload sealed by the caller).
    return (
        "ALTER TABLE memories ADD COLUMN IF NOT EXISTS app_id TEXT",
        "CREATE INDEX IF NOT EXISTS memories_app ON memories "
        "(account_id, app_id, state, created_at) WHERE app_id IS NOT NULL",
        f"""CREATE TABLE IF NOT EXISTS apps (
            account_id TEXT NOT NULL, app_id TEXT NOT NULL, name TEXT,
            memory_cap INTEGER, created_at {real} NOT NULL, uninstalled_at {real},
            PRIMARY KEY (account_id, app_id))""",
        f"""CREATE TABLE IF NOT EXISTS llm_usage (
            id {serial}, account_id TEXT NOT NULL, operation TEXT NOT NULL, scope TEXT,
            prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
            calls INTEGER NOT NULL, cost_units {real} NOT NULL, ts {real} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS llm_usage_account ON llm_usage (account_id, ts)",
        f"""CREATE TABLE IF NOT EXISTS usage_polls (
            account_id TEXT NOT NULL, caller TEXT NOT NULL, polled_at {real} NOT NULL,
            PRIMARY KEY (account_id, caller))""",
        f"""CREATE TABLE IF NOT EXISTS deferred_work (
            id TEXT PRIMARY KEY, account_id TEXT NOT NULL, operation TEXT NOT NULL,
            scope TEXT NOT NULL, created_at {real} NOT NULL,
            key_id TEXT NOT NULL, ciphertext {blob} NOT NULL, wrapped_key {blob} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS deferred_work_account "
        "ON deferred_work (account_id, created_at)",
    )


_SECRET_COLUMNS["deferred_work"] = ("ciphertext", "wrapped_key", "key_id")

_SECRET_COLUMNS["checkpoints"] = ("ciphertext", "wrapped_key", "key_id")
_SECRET_COLUMNS["checkpoint_blobs"] = ("ciphertext", "wrapped_key", "key_id")
_SECRET_COLUMNS["checkpoint_writes"] = ("ciphertext", "wrapped_key", "key_id")

MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=10,
        name="app-memories",
        sqlite=_apps("BLOB", "REAL", "INTEGER PRIMARY KEY AUTOINCREMENT"),
        postgres=(
            *_apps("BYTEA", "DOUBLE PRECISION", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
            *no_statistics("deferred_work"),
        ),
    ),
    Migration(
        version=11,
        name="langgraph-checkpoints",
        sqlite=checkpoint_ddl("BLOB", "REAL"),
        postgres=(
            *checkpoint_ddl("BYTEA", "DOUBLE PRECISION"),
            *no_statistics("checkpoints", "checkpoint_blobs", "checkpoint_writes"),
        ),
    ),
)


def _consolidation(real: str) -> tuple[str, ...]:
    # Pairs the consolidation job has judged, so it does not judge them again for a while:
    # one row per fingerprint, a digest of the two memory ids and their rounded similarity
    # (no memory text, not even the ids in clear). ``access_count`` counts the retrievals
    # of a memory version, for the job's "most retrieved" candidates; the partial index
    # finds a user's retrieved memories without walking the rest.
    return (
        f"""CREATE TABLE IF NOT EXISTS consolidation_pairs (
            account_id TEXT NOT NULL, user_id TEXT NOT NULL, fingerprint TEXT NOT NULL,
            verdict TEXT NOT NULL, checked_at {real} NOT NULL,
            PRIMARY KEY (account_id, user_id, fingerprint))""",
        "CREATE INDEX IF NOT EXISTS consolidation_pairs_checked "
        "ON consolidation_pairs (account_id, user_id, checked_at)",
        "ALTER TABLE memories ADD COLUMN IF NOT EXISTS access_count INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX IF NOT EXISTS memories_accessed "
        "ON memories (account_id, user_id, access_count) WHERE access_count > 0",
    )


def _thread_reads() -> tuple[str, ...]:
    # How far each reader (an agent) has seen a change-log thread: the delta header shows a
    # change once. ops_events gains an index for the per-account counts over a time window.
    return (
        """CREATE TABLE IF NOT EXISTS thread_reads (
            thread_id TEXT NOT NULL, reader TEXT NOT NULL, account_id TEXT NOT NULL,
            seen_rev INTEGER NOT NULL, PRIMARY KEY (thread_id, reader))""",
        "CREATE INDEX IF NOT EXISTS ops_account_ts ON ops_events (account_id, ts)",
    )


MIGRATIONS = (
    *MIGRATIONS,
    # The background job queue: ids and kinds only (see confide.storage.jobs).
    Migration(
        version=12,
        name="job-queue",
        sqlite=jobs_ddl("REAL"),
        postgres=jobs_ddl("DOUBLE PRECISION"),
    ),
)


MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=13,
        name="consolidation",
        sqlite=_consolidation("REAL"),
        postgres=_consolidation("DOUBLE PRECISION"),
    ),
)


# The service process holding a call's turns (they live in its memory, never in the
# database): another process reached by the call's /turns or /end refuses instead of
# summarising part of the call. The id is made at each start; host and pid are for people.
_SESSION_WORKER = (
    "ALTER TABLE call_sessions ADD COLUMN IF NOT EXISTS worker_id TEXT",
    "ALTER TABLE call_sessions ADD COLUMN IF NOT EXISTS worker_host TEXT",
    "ALTER TABLE call_sessions ADD COLUMN IF NOT EXISTS worker_pid INTEGER",
)

MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=14, name="call-session-worker", sqlite=_SESSION_WORKER, postgres=_SESSION_WORKER
    ),
)


ACCOUNT_TABLES: tuple[str, ...] = (
    "memories",
    "history",
    "threads",
    "changes",
    "data_keys",
    "memory_tokens",
    "relations",
    "ops_events",
    "call_sessions",
    "session_events",
    "api_keys",
    "proposals",
    "key_generations",
    "user_keys",
    "messages",
    "conversation_summaries",
    "apps",
    "llm_usage",
    "usage_polls",
    "deferred_work",
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "supervisor_checkpoints",
    "consolidation_pairs",
    "embeddings",
    "jobs",
)
"""PostgreSQL tables holding one account's rows, each confined by row-level security."""


def account_policy(table: str) -> tuple[str, ...]:
    """PostgreSQL: confine ``table`` to the account the transaction names.

    A row is visible (and may be written) only when its ``account_id`` equals the setting
    ``confide.account_id``, or when ``confide.all_accounts`` is ``on`` (the explicit bypass of
    maintenance across accounts). With neither set, nothing is visible. ``FORCE`` applies
    the policy to the table's owner too, which is the role the service connects as;
    superusers and roles with ``BYPASSRLS`` are never confined. Operational events and jobs
    may have no account (``NULL``, e.g. the hourly TTL across accounts): those stay
    visible, and so do owed scrubs of no account (a purge or a key rotation). Skipped (a
    ``DO`` block) while the table does not exist: ``embeddings`` appears with the first
    embedder and gets its policy then.
    """
    allowed = (
        "account_id = current_setting('confide.account_id', true) "
        "OR current_setting('confide.all_accounts', true) = 'on'"
    )
    if table in ("ops_events", "jobs", "scrubs"):
        allowed = f"account_id IS NULL OR {allowed}"
    return (
        f"""DO $$ BEGIN
        IF to_regclass('{table}') IS NOT NULL THEN
            ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
            ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
            DROP POLICY IF EXISTS confide_account ON {table};
            CREATE POLICY confide_account ON {table} USING ({allowed}) WITH CHECK ({allowed});
        END IF;
        END $$""",
    )


MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=15,
        name="row-level-security",
        sqlite=(),
        postgres=tuple(s for table in ACCOUNT_TABLES for s in account_policy(table)),
    ),
)


MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=16,
        name="thread-reads",
        sqlite=_thread_reads(),
        postgres=(*_thread_reads(), *account_policy("thread_reads")),
    ),
)


MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=18,
        name="sealed-vectors",
        # SQLite searches vectors in process, so they are stored sealed under the owner's
        # key; ``key_id`` names it (NULL: a vector written before, in clear until the first
        # open with an embedder seals it). PostgreSQL searches them in the database and
        # keeps pgvector's clear vectors.
        sqlite=(
            "ALTER TABLE embeddings ADD COLUMN IF NOT EXISTS key_id TEXT",
            # Finds the clear vectors left to seal without reading every row's vector (the
            # key id is stored after it); empty once the store is upgraded.
            "CREATE INDEX IF NOT EXISTS embeddings_clear ON embeddings (seq) WHERE key_id IS NULL",
        ),
        postgres=(),
    ),
)


MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=19,
        name="vector-index-snapshots",
        # SQLite: each user's in-process vector index as it was last built (sign bits,
        # int8 codes, ids), sealed under the user's key like the vectors, so a cold process
        # reads one blob plus the rows with a later ``seq`` instead of opening and
        # quantising every vector. A cache: dropping a row only makes the next load slower.
        sqlite=(
            """CREATE TABLE IF NOT EXISTS vector_snapshots (
                account_id TEXT NOT NULL, user_id TEXT NOT NULL,
                max_seq INTEGER NOT NULL, deletions INTEGER NOT NULL,
                key_id TEXT NOT NULL, snapshot BLOB NOT NULL,
                PRIMARY KEY (account_id, user_id))""",
        ),
        postgres=(),
    ),
)


MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=20,
        name="run-index",
        # The newest memory of a run (the previous turn a new one is linked to and stored in
        # the context of): without this index SQLite answered it with a scan of the whole
        # table, 115-130 ms at 461k memories and growing with them, for every stored turn
        # whose previous turn was not in its batch (0.01-0.05 ms with it; building it took
        # 1.2 s there). Only memories with a run are indexed. Building it holds writes to
        # the memories table while it runs (as every index of these migrations does).
        sqlite=(
            "CREATE INDEX IF NOT EXISTS memories_run "
            "ON memories (account_id, user_id, run_id, updated_at) WHERE run_id IS NOT NULL",
        ),
        postgres=(
            "CREATE INDEX IF NOT EXISTS memories_run "
            "ON memories (account_id, user_id, run_id, updated_at) WHERE run_id IS NOT NULL",
        ),
    ),
)


MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=21,
        name="checkpoint-owners",
        # A LangGraph thread is its owner's (account, user and agent): two users of one
        # account naming the same thread id kept one thread, where the later writer hid the
        # earlier one's state. Each checkpoint table's key now starts with the owner; the
        # rows already there keep their user and get the agent ``''`` (no agent).
        sqlite=checkpoint_owner_ddl("sqlite", "BLOB", "REAL"),
        postgres=checkpoint_owner_ddl("postgres", "BYTEA", "DOUBLE PRECISION"),
    ),
)


MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=22,
        name="erasure-times",
        # When each user was last erased: a process writes the operational events it
        # queued in batches, and those about a user erased since they were queued are
        # dropped instead of naming the user again after the erasure deleted their rows.
        sqlite=("ALTER TABLE key_generations ADD COLUMN IF NOT EXISTS erased_at REAL",),
        postgres=(
            "ALTER TABLE key_generations ADD COLUMN IF NOT EXISTS erased_at DOUBLE PRECISION",
        ),
    ),
)


def _scrubs(real: str) -> tuple[str, ...]:
    return (
        f"""CREATE TABLE IF NOT EXISTS scrubs (
            id TEXT PRIMARY KEY, kind TEXT NOT NULL, account_id TEXT, state TEXT NOT NULL,
            detail TEXT NOT NULL, attempts INTEGER NOT NULL, markers TEXT NOT NULL,
            created_at {real} NOT NULL, updated_at {real} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS scrubs_state ON scrubs (state, created_at)",
    )


MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=23,
        name="scrubs-owed",
        # What an erasure, a purge or a key rotation must still clear from the files, until
        # a scrub completes and a scan verifies it (see confide.storage.scrubs). Store-wide
        # maintenance with no user id, so it is not confined to an account.
        sqlite=_scrubs("REAL"),
        postgres=(*_scrubs("DOUBLE PRECISION"), *account_policy("scrubs")),
    ),
)


MIGRATIONS = (
    *MIGRATIONS,
    Migration(
        version=24,
        name="memory-sources",
        # Which users' words an app memory was written from, as keyed pseudonyms (never the
        # ids in clear), so that erasing a user deletes the app memories derived from them;
        # deferred app work records the same for the conversation it holds. See
        # confide.storage.derived.
        sqlite=memory_sources_ddl(),
        postgres=(*memory_sources_ddl(), *account_policy("memory_sources")),
    ),
)
