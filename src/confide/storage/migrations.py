"""The memory store's schema: its migrations, and the record of a store made before features
kept their own.

The memory store (memories, their history and change log, the search index, keys and erasure
bookkeeping) is the first :class:`~confide.storage.schema.Feature` a backend migrates, named
:data:`MEMORY_STORE`; every other feature's tables and migrations live beside that feature's
SQL (see :mod:`confide.storage.schema`). Each step is applied once, inside a transaction, and
recorded in ``feature_migrations`` as ``(feature, version)``. A store made when all steps
shared one numbered list (``schema_migrations``) is mapped once onto the features' steps by
:data:`LEGACY_VERSIONS`.
"""

from __future__ import annotations

from confide.storage.schema import (
    Feature,
    Migration,
    account_policies,
    account_policy,
    no_statistics,
)

__all__ = [
    "HNSW_EF_CONSTRUCTION",
    "HNSW_EF_SEARCH",
    "HNSW_M",
    "LEGACY_VERSIONS",
    "MEMORY_STORE",
    "POSTGRES_HNSW_INDEX",
    "Migration",
    "key_tables",
]


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


_CREATE = (
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
    # holding a destroyed key in its cache can never write under it.
    return (
        """CREATE TABLE IF NOT EXISTS key_generations (
            account_id TEXT NOT NULL, user_id TEXT NOT NULL, generation INTEGER NOT NULL,
            PRIMARY KEY (account_id, user_id))""",
        *key_tables(blob, real),
    )


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
_KEYS_BLINDED = (
    "INSERT INTO store_meta (key, value) SELECT 'keys_blinded', 'pending' "
    "WHERE EXISTS (SELECT 1 FROM memories) ON CONFLICT (key) DO NOTHING",
    "INSERT INTO store_meta (key, value) SELECT 'keys_blinded', 'done' "
    "WHERE NOT EXISTS (SELECT 1 FROM memories) ON CONFLICT (key) DO NOTHING",
)

# A memory in an app's curated scope names the app (``app_id``; NULL for a user's own
# memory), and the partial index finds a scope's memories without walking users'.
_APP_SCOPE = (
    "ALTER TABLE memories ADD COLUMN IF NOT EXISTS app_id TEXT",
    "CREATE INDEX IF NOT EXISTS memories_app ON memories "
    "(account_id, app_id, state, created_at) WHERE app_id IS NOT NULL",
)

# The hourly TTL scan: idle heads by age, and heads with an expiry.
_TTL_SCAN = (
    "CREATE INDEX IF NOT EXISTS memories_idle ON memories (state, updated_at)",
    "CREATE INDEX IF NOT EXISTS memories_expiry ON memories (state, expires_at) "
    "WHERE expires_at IS NOT NULL",
)

# ``access_count`` counts the retrievals of a memory version, for consolidation's "most
# retrieved" candidates; the partial index finds a user's retrieved memories without walking
# the rest.
_ACCESS_COUNT = (
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


MEMORY_STORE = Feature(
    name="memories",
    migrations=(
        *_CREATE,
        Migration(
            version=3,
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
        Migration(
            version=4,
            name="erasure",
            sqlite=_erasure("BLOB", "REAL"),
            postgres=(
                *_erasure("BYTEA", "DOUBLE PRECISION"),
                *no_statistics("memories"),
                *no_statistics("data_keys", ("wrapped", "key_id")),
                *no_statistics("user_keys", ("wrapped", "key_id")),
            ),
        ),
        Migration(version=5, name="row-version", sqlite=_ROW_VERSION, postgres=_ROW_VERSION),
        Migration(version=6, name="blind-keys", sqlite=_KEYS_BLINDED, postgres=_KEYS_BLINDED),
        Migration(version=7, name="app-scope", sqlite=_APP_SCOPE, postgres=_APP_SCOPE),
        Migration(version=8, name="ttl-scan", sqlite=_TTL_SCAN, postgres=_TTL_SCAN),
        Migration(version=9, name="access-count", sqlite=_ACCESS_COUNT, postgres=_ACCESS_COUNT),
        Migration(
            version=10,
            name="row-level-security",
            sqlite=(),
            postgres=(
                *account_policies(
                    "memories",
                    "history",
                    "threads",
                    "changes",
                    "data_keys",
                    "memory_tokens",
                    "relations",
                    "key_generations",
                    "user_keys",
                    "embeddings",
                ),
                *account_policy("ops_events", rows_without_account=True),
            ),
        ),
        Migration(
            version=11,
            name="thread-reads",
            sqlite=_thread_reads(),
            postgres=(*_thread_reads(), *account_policy("thread_reads")),
        ),
        Migration(
            version=12,
            name="sealed-vectors",
            # SQLite searches vectors in process, so they are stored sealed under the owner's
            # key; ``key_id`` names it (NULL: a vector written before, in clear until the first
            # open with an embedder seals it). PostgreSQL searches them in the database and
            # keeps pgvector's clear vectors.
            sqlite=(
                "ALTER TABLE embeddings ADD COLUMN IF NOT EXISTS key_id TEXT",
                # Finds the clear vectors left to seal without reading every row's vector (the
                # key id is stored after it); empty once the store is upgraded.
                "CREATE INDEX IF NOT EXISTS embeddings_clear "
                "ON embeddings (seq) WHERE key_id IS NULL",
            ),
            postgres=(),
        ),
        Migration(
            version=13,
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
        Migration(
            version=14,
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
        Migration(
            version=15,
            name="erasure-times",
            # When each user was last erased: a process writes the operational events it
            # queued in batches, and those about a user erased since they were queued are
            # dropped instead of naming the user again after the erasure deleted their rows.
            sqlite=("ALTER TABLE key_generations ADD COLUMN IF NOT EXISTS erased_at REAL",),
            postgres=(
                "ALTER TABLE key_generations ADD COLUMN IF NOT EXISTS erased_at DOUBLE PRECISION",
            ),
        ),
    ),
)
"""The memory store's own tables: the first feature every backend migrates."""


LEGACY_VERSIONS: dict[int, tuple[tuple[str, int], ...]] = {
    1: (("memories", 1),),
    2: (("memories", 2),),
    3: (("service", 1),),
    4: (("memories", 3),),
    5: (("memories", 4), ("service", 2)),
    6: (("memories", 5),),
    7: (("service", 3),),
    8: (("memories", 6), ("service", 4)),
    9: (("chat", 1),),
    10: (("memories", 7), ("apps", 1)),
    11: (("checkpoints", 1),),
    12: (("memories", 8), ("jobs", 1)),
    13: (("memories", 9), ("consolidation", 1)),
    14: (("service", 5),),
    15: (
        ("memories", 10),
        ("service", 6),
        ("chat", 2),
        ("apps", 2),
        ("checkpoints", 2),
        ("jobs", 2),
        ("consolidation", 2),
    ),
    16: (("memories", 11),),
    18: (("memories", 12),),
    19: (("memories", 13),),
    20: (("memories", 14),),
    21: (("checkpoints", 3),),
    22: (("memories", 15),),
    23: (("scrubs", 1),),
    24: (("derived", 1),),
}
"""The steps of a store made when every migration shared one numbered list
(``schema_migrations``): each old version, as the ``(feature, version)`` steps it made. A
store that has it is mapped onto ``feature_migrations`` once, on its next migration, and the
old list is dropped."""
