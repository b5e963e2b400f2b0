"""``confide apps uninstall`` and ``confide keys create --scope``, through click's runner
against the test's database and key store, on both backends."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.apps.conftest import ACCOUNT, transcript
from tests.conftest import TEST_KEK

from confide.apps import AppMemories
from confide.cli import main
from confide.engine import MemoryEngine
from confide.server.auth import ApiKeys


@pytest.fixture
def cli(storage_url: str, key_store_url: str, tmp_path: Path) -> CliRunner:
    return CliRunner(
        env={
            "CONFIDE_STORAGE_URL": storage_url,
            "CONFIDE_KEYSTORE_URL": key_store_url,
            "CONFIDE_HOME": str(tmp_path / "cli-home"),
            "CONFIDE_EMBEDDER": "none",
            "MEMORY_ENCRYPTION_KEY": TEST_KEK.hex(),
        }
    )


def _fill(engine: MemoryEngine, app_id: str, count: int) -> AppMemories:
    apps = AppMemories(engine, llm=None)
    for n in range(count):
        asyncio.run(
            apps.end_conversation(
                account_id=ACCOUNT, app_id=app_id, conversation_id=f"c{n}", messages=transcript(n)
            )
        )
    return apps


def test_uninstall_keeps_memories_unless_purge(engine: MemoryEngine, cli: CliRunner) -> None:
    apps = _fill(engine, "notes", 3)
    _fill(engine, "mail", 1)
    kept = cli.invoke(main, ["apps", "uninstall", "notes", "--account", ACCOUNT])
    assert kept.exit_code == 0, kept.output
    assert "memories are kept" in kept.stdout
    assert apps.settings_of(ACCOUNT, "notes").uninstalled
    assert len(apps.memories(ACCOUNT, "notes")) == 3
    purged = cli.invoke(main, ["apps", "uninstall", "notes", "--account", ACCOUNT, "--purge"])
    assert purged.exit_code == 0, purged.output
    assert "purged 3 memory rows" in purged.stdout
    assert apps.memories(ACCOUNT, "notes") == []
    assert len(apps.memories(ACCOUNT, "mail")) == 1
    assert cli.invoke(main, ["apps", "uninstall", "--help"]).exit_code == 0


def test_keys_create_with_a_scope(engine: MemoryEngine, cli: CliRunner) -> None:
    keys = ApiKeys.over(engine.storage)
    tokens = {}
    for scope in ("admin", "service", "read"):
        result = cli.invoke(main, ["keys", "create", "--account", ACCOUNT, "--scope", scope])
        assert result.exit_code == 0, result.output
        tokens[scope] = result.stdout.strip()
    legacy = cli.invoke(main, ["keys", "create", "--account", ACCOUNT, "--admin"])
    plain = cli.invoke(main, ["keys", "create", "--account", ACCOUNT])
    verified = {s: keys.verify(t) for s, t in tokens.items()}
    assert {s: (k.scope, k.admin) for s, k in verified.items() if k} == {
        "admin": ("admin", True),
        "service": ("service", False),
        "read": ("read", False),
    }
    admin_key = keys.verify(legacy.stdout.strip())
    assert admin_key is not None and (admin_key.scope, admin_key.admin) == ("admin", True)
    plain_key = keys.verify(plain.stdout.strip())
    assert plain_key is not None and plain_key.scope == "service"
    clash = cli.invoke(main, ["keys", "create", "--account", ACCOUNT, "--admin", "--scope", "read"])
    assert clash.exit_code != 0 and tokens["read"] not in clash.output
    bad = cli.invoke(main, ["keys", "create", "--account", ACCOUNT, "--scope", "root"])
    assert bad.exit_code == 2
    listing = cli.invoke(main, ["keys", "list", "--account", ACCOUNT]).stdout.splitlines()
    assert [line.split("  scope ")[1].split()[0] for line in listing] == [
        "admin",
        "service",
        "read",
        "admin",
        "service",
    ]


def test_keys_made_before_scopes_are_service_keys(engine: MemoryEngine) -> None:
    keys = ApiKeys.over(engine.storage)
    token = keys.create(ACCOUNT)
    with engine.storage.transaction() as tx:
        tx.run("UPDATE api_keys SET scopes = NULL")
    key = keys.verify(token)
    assert key is not None and (key.scope, key.admin, key.read_only) == ("service", False, False)
