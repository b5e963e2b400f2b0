"""``confide keys create`` and ``confide serve``, through click's runner."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from confide.cli import main
from confide.config import Settings
from confide.server.auth import ApiKeys
from confide.storage import open_storage


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MEMORY_ENCRYPTION_KEY", raising=False)
    monkeypatch.delenv("CONFIDE_STORAGE_URL", raising=False)
    monkeypatch.setenv("CONFIDE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_keys_create_prints_only_the_key_and_stores_its_hash(home: Path) -> None:
    result = CliRunner().invoke(main, ["keys", "create", "--account", "acct-9"])
    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert result.stdout == token + "\n" and token.startswith("cfk_")
    storage = open_storage(Settings().resolved_storage_url())
    try:
        assert ApiKeys.over(storage).account_of(token) == "acct-9"
        assert ApiKeys.over(storage).account_of(token + "x") is None
    finally:
        storage.close()
    assert token.encode() not in (home / "confide.db").read_bytes()


def test_every_new_command_has_help(home: Path) -> None:
    for args in (["serve", "--help"], ["keys", "create", "--help"], ["keys", "--help"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0 and len(result.output) > 80, args
    serve_help = CliRunner().invoke(main, ["serve", "--help"]).output
    assert "--host" in serve_help and "--port" in serve_help
    assert "create" in CliRunner().invoke(main, ["keys", "--help"]).output


def test_keys_create_without_an_account_makes_a_key_of_the_default_account(home: Path) -> None:
    result = CliRunner().invoke(main, ["keys", "create"])
    assert result.exit_code == 0, result.output
    storage = open_storage(Settings().resolved_storage_url())
    try:
        assert ApiKeys.over(storage).account_of(result.stdout.strip()) == "default"
    finally:
        storage.close()
