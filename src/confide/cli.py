"""The ``confide`` command line: serve, worker, demo, keys, export/import, purge, erasure,
reindex."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import click

from confide.config import Settings, parse_hex_key
from confide.crypto.keyring import (
    KeyRing,
    begin_file_rotation,
    finish_file_rotation,
    kek_id,
)
from confide.errors import ConfideError
from confide.types import DEFAULT_ACCOUNT, ErasureReceipt, MemoryFilter, Progress, ScrubReport

_F = TypeVar("_F", bound=Callable[..., Any])

if TYPE_CHECKING:
    from confide.client import Confide
    from confide.engine import MemoryEngine
    from confide.server.auth import ApiKeys


def _confide(ctx: click.Context) -> Confide:
    """The engine and retrieval as configured, closed with the command."""
    from confide.client import Confide

    settings: Settings = ctx.obj["settings"]
    confide = Confide.open(settings)
    ctx.call_on_close(confide.close)
    return confide


def _engine(ctx: click.Context) -> MemoryEngine:
    """The engine with retrieval wired in, so what a command writes is indexed as usual."""
    return _confide(ctx).engine


class _Group(click.Group):
    """Turns Confide's errors into a one-line message and exit code 1 (no stack trace)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ConfideError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(1)


_PORT = click.IntRange(0, 65535)
"""A TCP port (0: one the system picks), checked before a command loads anything."""


def _terminal() -> TextIO | None:
    """Standard error when it is a terminal: where progress bars go (else none is drawn)."""
    return sys.stderr if sys.stderr.isatty() else None


@contextmanager
def progress_bar(label: str, unit: str) -> Iterator[Progress]:
    """A :data:`~confide.types.Progress` drawn as a bar with counts and rate on standard
    error when it is a terminal; silent otherwise (pipes, logs and tests see nothing).

    The bar is tqdm's, closed (and left on screen) when the block ends.
    """
    stream = _terminal()
    if stream is None:
        yield lambda done, total: None
        return
    from tqdm import tqdm

    with tqdm(desc=label, unit=f" {unit}", file=stream, dynamic_ncols=True) as bar:

        def show(done: int, total: int | None) -> None:
            if total != bar.total:
                bar.total = total
                bar.refresh()
            bar.update(done - bar.n)

        yield show


def _account(help_text: str) -> Callable[[_F], _F]:
    """``--account``, defaulting to the account the SDK writes to (``default``)."""
    return click.option("--account", default=DEFAULT_ACCOUNT, show_default=True, help=help_text)


@click.group(cls=_Group)
@click.version_option(package_name="confide", prog_name="confide")
@click.option("--verbose", "-v", is_flag=True, help="Log more (never memory text).")
@click.pass_context
def main(ctx: click.Context, verbose: bool) -> None:
    """Confide: long-term memory for LLM agents.

    Data lives in CONFIDE_HOME (default ~/.confide); CONFIDE_STORAGE_URL selects PostgreSQL.
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    ctx.ensure_object(dict)
    try:
        ctx.obj["settings"] = Settings()
    except ConfideError as exc:
        raise click.ClickException(str(exc)) from None


@main.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Store, update, forget, restore and list memories for two users; print their history."""
    from confide.demo import run_demo

    settings: Settings = ctx.obj["settings"]
    click.echo(
        f"Confide demo on {settings.resolved_storage_url().split('://')[0]} "
        f"(data folder: {settings.home})\n"
    )
    confide = _confide(ctx)
    run_demo(confide.engine, click.echo, query=confide.query)


@main.group()
def keys() -> None:
    """Manage encryption keys and the HTTP service's API keys."""


@keys.command("rotate")
@click.option(
    "--new-key",
    envvar="CONFIDE_NEW_ENCRYPTION_KEY",
    help="The new key-encryption key (64 hex); with a key file, one is generated.",
)
@click.pass_context
def keys_rotate(ctx: click.Context, new_key: str | None) -> None:
    """Re-wrap every data key under a new key-encryption key (values are not re-encrypted).

    Safe to re-run after an interruption.
    """
    settings: Settings = ctx.obj["settings"]
    # The engine first: it refuses a missing key file beside stored keys, where loading the
    # ring on its own would make a new key-encryption key.
    engine = _engine(ctx)
    ring = engine.keyring
    former = {ring.primary_id: ring.primary, **ring.former}
    if new_key is not None:
        target = parse_hex_key(new_key, name="--new-key")
    elif ring.key_file is not None:
        target = begin_file_rotation(ring)
    else:
        target = ring.primary  # finish a rotation whose former keys are listed as old keys
    new_ring = KeyRing(primary=target, former=former, key_file=ring.key_file)
    count = engine.rotate_kek(new_ring)
    if ring.key_file is not None and new_key is None:
        finish_file_rotation(ring)
        click.echo(
            f"the former key is kept in {ring.key_file.name}.old for processes still using "
            "it; 'confide keys retire' removes it once no stored key needs it",
            err=True,
        )
    click.echo(f"re-wrapped {count} keys under key-encryption key {kek_id(target)}")
    if engine.rotation_scrub is not None:
        scrub = engine.rotation_scrub
        click.echo(f"the keys as wrapped before: {scrub.status} ({scrub.detail})", err=True)
    if settings.encryption_key is not None and new_key is not None:
        click.echo("now set MEMORY_ENCRYPTION_KEY to the new key", err=True)


def _api_keys(ctx: click.Context) -> ApiKeys:
    """The API keys of the configured storage (no encryption key or embedder needed)."""
    from confide.server.auth import ApiKeys
    from confide.storage import storage_from_settings

    settings: Settings = ctx.obj["settings"]
    storage = storage_from_settings(settings)
    ctx.call_on_close(storage.close)
    return ApiKeys.over(storage)


@keys.command("retire")
@click.pass_context
def keys_retire(ctx: click.Context) -> None:
    """Forget former key-encryption keys (master.key.old) once no stored key uses them.

    Refuses, naming the keys still in use, until a rotation has re-wrapped every key.
    """
    settings: Settings = ctx.obj["settings"]
    retired = _engine(ctx).retire_former_keks()
    if not retired:
        click.echo("no former key-encryption keys to retire")
        return
    click.echo(f"retired {len(retired)} former key-encryption keys: {', '.join(retired)}")
    if settings.old_encryption_keys is not None:
        click.echo("now remove CONFIDE_OLD_ENCRYPTION_KEYS from the environment", err=True)


@keys.command("create")
@_account("The account (tenant) the key may act for.")
@click.option(
    "--agent",
    "agents",
    multiple=True,
    help="An agent the key may act as (repeatable; the first is used when a request "
    "names none). Without it the key acts as agent 'default' only.",
)
@click.option("--admin", is_flag=True, help="Also allow operator routes (same as --scope admin).")
@click.option(
    "--scope",
    type=click.Choice(["admin", "service", "read"]),
    default=None,
    help="service (default): agent routes; read: only routes that change nothing; "
    "admin: service plus operator routes (erasure, the app admin API).",
)
@click.pass_context
def keys_create(
    ctx: click.Context, account: str, agents: tuple[str, ...], admin: bool, scope: str | None
) -> None:
    """Create an API key for the HTTP service and print it (alone) on standard output.

    Only its SHA-256 hash is stored: keep the printed key, it cannot be shown again.
    """
    try:
        token = _api_keys(ctx).create(account, agents=agents, admin=admin, scope=scope)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(token)


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@keys.command("list")
@_account("The account (tenant) whose keys to list.")
@click.pass_context
def keys_list(ctx: click.Context, account: str) -> None:
    """List an account's API keys, one a line: id, created, scope, active or revoked, agents.

    Tokens cannot be shown: only their hashes are stored, and those are not printed.
    """
    from confide.server.auth import scope_of

    rows = _api_keys(ctx).of_account(account)
    if not rows:
        click.echo(f"no API keys for account {account}", err=True)
    for row in rows:
        state = "active" if row.revoked_at is None else f"revoked {_when(row.revoked_at)}"
        agents = ",".join(row.agents) if row.agents else "default (unbound)"
        click.echo(
            f"{row.id}  created {_when(row.created_at)}  scope {scope_of(row.scopes)}  "
            f"{state}  agents {agents}"
        )


@main.group(cls=_Group)
def apps() -> None:
    """Manage apps and their memories."""


@apps.command("uninstall")
@click.argument("app_id")
@_account("The app's account.")
@click.option(
    "--purge",
    is_flag=True,
    help="Also crypto-shred the app's memories (deleted with their keys; cannot be undone).",
)
@click.pass_context
def apps_uninstall(ctx: click.Context, app_id: str, account: str, purge: bool) -> None:
    """Uninstall APP_ID. Its memories are kept (reinstalling finds them) unless --purge."""
    deleted = _confide(ctx).apps.uninstall(account, app_id, purge=purge)
    if purge:
        click.echo(f"uninstalled app {app_id}; purged {deleted} memory rows and its keys")
    else:
        click.echo(f"uninstalled app {app_id}; its memories are kept")


@keys.command("revoke")
@click.argument("key_id")
@click.pass_context
def keys_revoke(ctx: click.Context, key_id: str) -> None:
    """Revoke the API key KEY_ID (the id shown by 'keys list', the part of the token after
    'cfk_'). Running servers refuse it from its next request on.
    """
    row = _api_keys(ctx).revoke(key_id)
    click.echo(f"revoked API key {row.id} of account {row.account_id}")


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8000, show_default=True, type=_PORT, help="TCP port.")
@click.option(
    "--json-logs", is_flag=True, help="Structured JSON log lines (route templates, no paths)."
)
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, json_logs: bool) -> None:
    """Run the HTTP service (tools, call sessions, /v1/memories, /metrics) with uvicorn.

    The embedder and the search's compiled loops load before the port opens, so the first
    tool call is as fast as the next ones.

    Needs the 'server' extra: pip install 'confide[server]'.
    """
    try:
        import uvicorn

        from confide.server import create_app
    except ImportError:
        raise click.ClickException(
            "the HTTP service needs the 'server' extra: pip install 'confide[server]'"
        ) from None
    settings: Settings = ctx.obj["settings"]
    app = create_app(
        settings, progress=lambda line: click.echo(f"confide: {line}", err=True), bind_host=host
    )
    if json_logs:
        from confide.server.logs import JsonFormatter

        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        logging.getLogger().handlers[:] = [handler]
        logging.getLogger().setLevel(logging.INFO)
        # Confide's own access line (confide.access) replaces uvicorn's, which names raw paths.
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            timeout_keep_alive=settings.keep_alive_seconds,
        )
        return
    from confide.server.logs import text_access_log

    text_access_log()  # route templates in place of uvicorn's access lines (raw paths, queries)
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="info",
        access_log=False,
        timeout_keep_alive=settings.keep_alive_seconds,
    )


@main.command("worker")
@click.option("--once", is_flag=True, help="Run the jobs due now, then exit.")
@click.pass_context
def worker_cmd(ctx: click.Context, once: bool) -> None:
    """Run background jobs (TTL, purge, memory and conversation jobs) from the store's queue.

    Enqueues the schedules that are due (TTL and purge hourly, consolidation daily per
    account), then runs due jobs. Several workers may share a PostgreSQL store; on SQLite
    run one (or leave it to 'confide serve', which runs one by default there). With --once
    it exits when no due job is left; otherwise it polls every CONFIDE_WORKER_POLL_SECONDS
    until interrupted.
    """
    import threading

    worker = _confide(ctx).components.worker()
    if once:
        with progress_bar("running jobs", "jobs") as progress:
            report = worker.run_once(progress=progress)
        click.echo(
            f"ran {report.ran} jobs: {report.done} done, {report.retried} to retry, "
            f"{report.failed} failed, {report.deferred} deferred (budget)"
        )
        return
    stop = threading.Event()
    click.echo(f"confide: worker {worker.worker_id} running (Ctrl-C stops it)", err=True)
    with progress_bar("jobs run", "jobs") as progress:
        try:
            worker.run_forever(stop, progress=progress)
        except KeyboardInterrupt:
            stop.set()


@main.command("mcp")
@click.option("--http", "use_http", is_flag=True, help="Serve streamable HTTP (else stdio).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface (with --http).")
@click.option(
    "--port",
    default=8765,
    show_default=True,
    type=_PORT,
    help="Port (with --http).",
)
@click.option(
    "--account",
    show_default=f"{DEFAULT_ACCOUNT} over stdio",
    help="The account to act for (with --http: refuse keys of other accounts).",
)
@click.option("--user", help="Pin every call to this user (else tools take user_id).")
@click.option("--agent", default="default", show_default=True, help="Agent (stdio).")
@click.pass_context
def mcp_cmd(
    ctx: click.Context,
    use_http: bool,
    host: str,
    port: int,
    account: str | None,
    user: str | None,
    agent: str,
) -> None:
    """Serve the memory tools over the Model Context Protocol (stdio, or HTTP with --http).

    Over stdio the scope comes from --account (the SDK's 'default' unless given; and --user,
    --agent). Over HTTP every request
    needs a bearer API key from `confide keys create`: its account and agents decide.
    Needs the 'mcp' extra: pip install 'confide[mcp]'.
    """
    try:
        import uvicorn

        from confide.mcp_server import McpScope, create_mcp_server, open_services
    except ImportError:
        raise click.ClickException(
            "confide mcp needs the 'mcp' extra: pip install 'confide[mcp]'"
        ) from None
    if not use_http and account is None:
        account = DEFAULT_ACCOUNT
    confide = _confide(ctx)
    services = open_services(confide)
    ctx.call_on_close(services.close)
    server = create_mcp_server(
        services,
        McpScope(account_id=account, user_id=user, agent=agent),
        http=use_http,
        url=f"http://{host}:{port}/mcp",
    )
    if use_http:
        app = server.streamable_http_app(host=host)
        uvicorn.run(app, host=host, port=port, log_level="warning")
    else:
        server.run("stdio")


@main.command("erase-user")
@_account("Account (tenant) id.")
@click.option("--user", required=True, help="User id.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--wait",
    "wait_seconds",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Seconds to keep retrying a scrub that something blocks (the worker goes on after).",
)
@click.pass_context
def erase_user(ctx: click.Context, account: str, user: str, yes: bool, wait_seconds: float) -> None:
    """Crypto-shred a user: destroy their key and delete everything derived from them.

    Prints the receipt. Exits non-zero when the scrub of the files is still pending after
    --wait seconds (naming what blocks it); the worker keeps retrying it.
    """
    if not yes:
        click.confirm(f"Erase every memory of user {user!r} in {account!r}?", abort=True)
    engine = _engine(ctx)
    with progress_bar("erasing", "steps") as progress:
        receipt = engine.erase_user(
            account_id=account, user_id=user, progress=progress, settle_seconds=0
        )
    if receipt.status == "pending":
        told: set[str] = set()

        def tell(report: ScrubReport) -> None:
            if report.detail not in told:
                told.add(report.detail)
                click.echo(f"waiting for the scrub: {report.detail}", err=True)

        report = engine.wait_for_scrub(receipt.id, timeout=wait_seconds, on_pending=tell)
        receipt = receipt.model_copy(
            update={
                "status": report.status,
                "blocked_by": report.detail if report.status == "pending" else None,
                "scan": report.scan or receipt.scan,
            }
        )
    click.echo(receipt.model_dump_json(indent=2))
    if receipt.status == "pending":
        raise click.ClickException(
            f"the erasure is not finished after {wait_seconds:g} s: {receipt.blocked_by}. "
            "The rows and keys are deleted; the worker retries the scrub until it is done "
            f"(confide verify-erasure on the receipt, or GET /v1/erasures/{receipt.id})"
        )


@main.command("verify-erasure")
@click.argument("receipt_file", metavar="RECEIPT", type=click.File("r"))
@click.option(
    "--path",
    "extra",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="Also scan this file or folder (a backup, a copied data directory). Repeatable.",
)
@click.pass_context
def verify_erasure(ctx: click.Context, receipt_file: TextIO, extra: tuple[Path, ...]) -> None:
    """Scan the store's files for what an erasure deleted (RECEIPT: its JSON, or -).

    Reads the data and key-store files of the configured stores as raw bytes (SQLite: the
    database, its WAL and journal; PostgreSQL: the relation files and pg_wal, where this
    host and user may read them) and reports every occurrence of the receipt's key ids,
    wrapped-key tags and ciphertext fragments. Exits 1 when something is found or a file
    could not be read, 0 when the files are clean.
    """
    from confide.engine.residue import files_under, scan_files

    try:
        receipt = ErasureReceipt.model_validate_json(receipt_file.read())
    except ValueError as exc:
        raise click.ClickException(f"not an erasure receipt: {exc}") from None
    engine = _engine(ctx)
    files = engine.residue_files()
    if files is None:
        click.echo(
            "the store's files are not readable from here: run this on the database's host "
            "as a user that may read them (or pass them with --path)",
            err=True,
        )
        files = []
    files = [*files, *files_under(*extra)]
    if not files:
        raise click.ClickException("no file to scan")
    scan = scan_files(files, receipt.markers)
    for finding in scan.found:
        click.echo(f"found {finding.marker} in {finding.file} at byte {finding.offset}")
    for name in scan.unreadable:
        click.echo(f"could not read {name}", err=True)
    click.echo(
        f"{scan.files_read} files read, {scan.occurrences} occurrences of "
        f"{len(receipt.markers.key_ids)} key ids and {len(receipt.markers.fragments)} fragments"
    )
    if not scan.clean:
        ctx.exit(1)


@main.command("export")
@_account("Account (tenant) id.")
@click.option("--user", required=True, help="User id.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="File to write.")
@click.pass_context
def export_cmd(ctx: click.Context, account: str, user: str, out: Path | None) -> None:
    """Export everything a user owns as JSON (decrypted: keep the file safe)."""
    engine = _engine(ctx)
    with progress_bar("exporting", "versions") as progress:
        document = engine.export_user(account_id=account, user_id=user, progress=progress)
    text = json.dumps(document, indent=2, ensure_ascii=False)
    if out is None:
        click.echo(text)
    else:
        out.write_text(text)
        out.chmod(0o600)
        click.echo(f"exported {len(document['memories'])} memory versions to {out}", err=True)


@main.command("import")
@click.argument("file", type=click.File("r"))
@click.option("--account", help="Import into this account instead of the document's.")
@click.option("--user", help="Import into this user instead of the document's.")
@click.pass_context
def import_cmd(ctx: click.Context, file: Any, account: str | None, user: str | None) -> None:
    """Import a JSON export."""
    try:
        document = json.load(file)
    except ValueError as exc:
        raise click.ClickException(f"not valid JSON: {exc}") from None
    engine = _engine(ctx)
    with progress_bar("importing", "versions") as progress:
        report = engine.import_user(document, account_id=account, user_id=user, progress=progress)
    click.echo(f"imported {report.imported}, skipped {report.skipped} existing")


@main.command("purge")
@click.option("--account", help="Admin purge: hard-delete this account's memories.")
@click.option("--user", help="Limit the admin purge to one user.")
@click.option("--agent", help="Limit the admin purge to one agent.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def purge(
    ctx: click.Context, account: str | None, user: str | None, agent: str | None, yes: bool
) -> None:
    """Purge forgotten memories past their purge date and, when
    CONFIDE_MESSAGE_RETENTION_DAYS is set, chat messages summarised longer ago, or (with
    --account) a whole scope."""
    engine = _engine(ctx)
    if account is None:
        if user or agent:
            raise click.UsageError("--user and --agent need --account")
        from confide.chat.messages import MessageStore

        click.echo(f"purged {engine.purge_expired().purged} memory versions")
        retention = engine.settings.message_retention_days
        if retention is None:
            click.echo("chat messages kept (CONFIDE_MESSAGE_RETENTION_DAYS is unset)")
            return
        messages = MessageStore(engine).purge(retention_days=retention)
        click.echo(f"purged {messages} summarised chat messages")
        return
    if not yes:
        click.confirm(f"Hard-delete every memory in this scope of {account!r}?", abort=True)
    report = engine.purge_scope(account_id=account, user_id=user, agent_id=agent)
    click.echo(f"purged {report.purged} memory versions")


@main.command("list")
@_account("Account (tenant) id.")
@click.option("--user", help="User id.")
@click.option("--limit", default=50, show_default=True, help="How many memories.")
@click.pass_context
def list_cmd(ctx: click.Context, account: str, user: str | None, limit: int) -> None:
    """List active memories, newest first.

    An empty listing says on standard error whether the account or the user has none.
    """
    engine = _engine(ctx)
    memories = engine.list_memories(MemoryFilter(account_id=account, user_id=user), limit=limit)
    for memory in memories:
        click.echo(f"{memory.id}  [{memory.type.value}] {memory.key}: {memory.value}")
    if memories:
        return
    if user is None or not engine.list_memories(MemoryFilter(account_id=account), limit=1):
        click.echo(f"account {account!r} has no active memories", err=True)
    else:
        click.echo(f"user {user!r} has no active memories in account {account!r}", err=True)


@main.command("reindex")
@click.option(
    "--batch-size",
    default=64,
    show_default=True,
    type=click.IntRange(1, 4096),
    help="Memories indexed per batch (one transaction each).",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def reindex_cmd(ctx: click.Context, batch_size: int, yes: bool) -> None:
    """Re-embed every memory with the configured embedder (CONFIDE_EMBEDDER).

    Drops every stored vector and the recorded embedder, binds the configured one and embeds
    every active and soft-deleted memory version again, with its relation edges; re-writes
    every version's search terms with the current tokenizer too. Run it after changing the
    embedder (with CONFIDE_EMBEDDER=none the store keeps no vectors), or when Confide says the
    search terms come from another tokenizer version; queries find nothing by similarity until
    it has finished.
    """
    from confide.embedders import embedder_from_settings
    from confide.engine.reindex import reindex

    settings: Settings = ctx.obj["settings"]
    embedder = embedder_from_settings(settings, cache_size=0)
    spec = "none" if embedder is None else f"{embedder.model_id}:{embedder.dims}"
    # Bare (the configured embedder is not bound yet), and open even if its terms are stale.
    from confide.engine import MemoryEngine

    engine = MemoryEngine.open(settings, reindexing=True)
    ctx.call_on_close(engine.close)
    previous = engine.search_index.embedder_spec()
    if not yes:
        click.confirm(
            f"Replace the vectors of embedder {previous or 'none'} with {spec}, "
            "and re-write every memory's search terms?",
            abort=True,
        )
    with progress_bar("re-indexing", "versions") as progress:
        done = reindex(
            engine,
            embedder,
            batch_size=batch_size,
            link_top_k=settings.link_top_k,
            link_min=settings.link_min,
            run_context=settings.run_context,
            progress=progress,
        )
    if embedder is None:
        click.echo(f"re-indexed {done} memory versions without an embedder")
    else:
        click.echo(f"re-embedded {done} memory versions with {spec}")


@main.command("tools")
@click.option(
    "--form",
    type=click.Choice(["chat", "realtime"]),
    default="chat",
    show_default=True,
    help="Chat-completions function tools, or the Realtime API's session tools.",
)
def tools_cmd(form: str) -> None:
    """Print the agent tools' JSON schemas (store_memory, update_memory, ...)."""
    from confide.conversation.tools import tools_json

    click.echo(tools_json("realtime" if form == "realtime" else "chat"))


@main.command("history")
@click.argument("memory_id")
@_account("Account (tenant) id.")
@click.pass_context
def history_cmd(ctx: click.Context, memory_id: str, account: str) -> None:
    """Print the audit history of a memory (all versions, newest first)."""
    for event in _engine(ctx).history(memory_id, account_id=account):
        click.echo(
            f"{event.ts.isoformat()} {event.event.value:<8} old={event.old_ref} "
            f"new={event.new_ref} actor={event.actor}"
        )


@main.command("ops")
@click.option(
    "--since", default="1d", show_default=True, help="Look-back window: 30m, 12h, 1d, 7d."
)
@click.option("--account", help="Only this account's events (default: every account).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_context
def ops_cmd(ctx: click.Context, since: str, account: str | None, as_json: bool) -> None:
    """Count operational events (what each node did) by operation and by node."""
    import time

    from confide.engine import MemoryEngine
    from confide.engine.ops import parse_window

    window = parse_window(since)
    engine = MemoryEngine.open(ctx.obj["settings"])
    ctx.call_on_close(engine.close)
    until = time.time()
    start = until - window.total_seconds()
    by_op = engine.op_counts(by="op", since=start, until=until, account_id=account)
    by_node = engine.op_counts(by="node", since=start, until=until, account_id=account)
    if as_json:
        document = {
            "since": datetime.fromtimestamp(start, UTC).isoformat(),
            "until": datetime.fromtimestamp(until, UTC).isoformat(),
            "total": sum(by_op.values()),
            "byOp": dict(sorted(by_op.items())),
            "byNode": dict(sorted(by_node.items())),
        }
        click.echo(json.dumps(document, indent=2))
        return
    click.echo(f"operational events since {_when(start)}: {sum(by_op.values())}")
    for title, counts in (("by op", by_op), ("by node", by_node)):
        click.echo(f"{title}:")
        for name, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
            click.echo(f"  {name:<24} {count:>8}")


if __name__ == "__main__":  # pragma: no cover
    main()
