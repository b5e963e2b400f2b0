"""The command line, through click's runner, on a temporary CONFIDE_HOME."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from confide.cli import main
from confide.client import DEFAULT_ACCOUNT


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MEMORY_ENCRYPTION_KEY", raising=False)
    monkeypatch.delenv("CONFIDE_STORAGE_URL", raising=False)
    monkeypatch.setenv("CONFIDE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.output


def test_demo_uses_confide_home_and_creates_private_key_file(home: Path) -> None:
    code, out = run("demo")
    assert code == 0, out
    assert "updated  preferred_name  v2" in out and "== bob ==" in out
    assert "UPDATE" in out and "ADD" in out
    key_file = home / "master.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert (home / "confide.db").exists()
    code, listing = run("list", "--account", "demo-account", "--user", "alice")
    assert code == 0 and "dog_name" in listing and "doctor_visit" not in listing


def _all_versions(home: Path) -> int:
    from confide.config import Settings
    from confide.engine import MemoryEngine
    from confide.types import MemoryFilter, MemoryState

    with MemoryEngine.open(Settings(home=home)) as engine:
        return sum(
            len(
                engine.list_memories(
                    MemoryFilter(account_id="demo-account", user_id=user, states=tuple(MemoryState))
                )
            )
            for user in ("alice", "bob")
        )


def test_demo_is_repeatable_and_ends_with_a_ranked_memory_query(home: Path) -> None:
    code, first = run("demo")
    assert code == 0, first
    count = _all_versions(home)
    assert count == 7  # five memories and the versions two updates superseded
    code, second = run("demo")
    assert code == 0, second
    assert _all_versions(home) == count
    assert "stored   " in first and "stored   " not in second
    assert second.count("stored by an earlier run: nothing new stored") == 2
    for out in (first, second):
        assert "What is the name of Ali's dog?" in out
        tail = out.split("== memory_query")[1]
        assert "[fact] Ali has a dog named Biscuit.  <- score" in tail


def test_a_repeat_demo_shows_no_stale_changes_and_counts_the_same_answer_alike(
    home: Path,
) -> None:
    code, first = run("demo")
    assert code == 0, first
    code, second = run("demo")
    assert code == 0, second
    # The first run's tour made the changes it shows; the second made none, so shows none.
    assert first.count("Memory updates since rev 0:") == 3  # alice, bob, the answer's header
    assert "Memory updates since" not in second
    counted = [re.findall(r"\((\d+) tokens for the results", out) for out in (first, second)]
    assert len(counted[0]) == 1 and counted[0] == counted[1]
    assert re.search(r"; \d+ more for the header\)", first)
    assert "for the header" not in second


def test_demo_prints_nothing_from_the_model_runtimes(home: Path) -> None:
    """No progress bars or library chatter from ONNX Runtime or tokenizers, on either stream."""
    env = {**os.environ, "CONFIDE_HOME": str(home)}
    command = [sys.executable, "-c", "from confide.cli import main; main(['demo'])"]
    first = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    assert [line for line in first.stderr.splitlines() if "master.key" not in line] == []
    second = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    assert second.stderr == ""
    for out in (first.stdout, second.stdout):
        assert "score" in out
        assert not any(word in out.lower() for word in ("onnx", "tokenizer", "%|", "it/s"))


def test_import_into_another_user_twice_imports_once(home: Path, tmp_path: Path) -> None:
    assert run("demo")[0] == 0
    out = tmp_path / "alice.json"
    assert run("export", "--account", "demo-account", "--user", "alice", "--out", str(out))[0] == 0
    total = len(json.loads(out.read_text())["memories"])
    code, msg = run("import", str(out), "--user", "alice-copy")
    assert code == 0 and msg.strip() == f"imported {total}, skipped 0 existing"
    listing = run("list", "--account", "demo-account", "--user", "alice-copy")[1]
    code, msg = run("import", str(out), "--user", "alice-copy")
    assert code == 0 and msg.strip() == f"imported 0, skipped {total} existing"
    assert run("list", "--account", "demo-account", "--user", "alice-copy")[1] == listing
    assert listing.count("dog_name") == 1


def test_malformed_key_is_refused_with_clear_message(home: Path) -> None:
    result = CliRunner().invoke(main, ["demo"], env={"MEMORY_ENCRYPTION_KEY": "abc"})
    assert result.exit_code != 0
    assert "MEMORY_ENCRYPTION_KEY must be 64 hex characters" in result.output
    assert "Traceback" not in result.output


def test_export_import_and_erase(home: Path, tmp_path: Path) -> None:
    assert run("demo")[0] == 0
    out = tmp_path / "alice.json"
    code, _ = run("export", "--account", "demo-account", "--user", "alice", "--out", str(out))
    assert code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    document = json.loads(out.read_text())
    assert any(m["key"] == "dog_name" for m in document["memories"])
    code, receipt = run("erase-user", "--account", "demo-account", "--user", "alice", "--yes")
    assert code == 0 and json.loads(receipt)["deleted"]["memories"] == len(document["memories"])
    assert "keys.db" in json.loads(receipt)["key_store"] and (home / "keys.db").exists()
    assert "dog_name" not in run("list", "--account", "demo-account", "--user", "alice")[1]
    code, msg = run("import", str(out))
    assert code == 0 and f"imported {len(document['memories'])}" in msg
    assert "dog_name" in run("list", "--account", "demo-account", "--user", "alice")[1]


def test_key_file_rotation_keeps_memories_readable(home: Path) -> None:
    assert run("demo")[0] == 0
    before = (home / "master.key").read_text()
    code, out = run("keys", "rotate")
    assert code == 0 and "re-wrapped" in out
    assert (home / "master.key").read_text() != before
    assert (home / "master.key.old").read_text() == before
    assert not (home / "master.key.next").exists()
    assert "dog_name" in run("list", "--account", "demo-account", "--user", "alice")[1]
    assert run("keys", "rotate")[0] == 0  # re-running is harmless


def test_keys_retire_waits_for_a_rotation_then_drops_the_former_key(home: Path) -> None:
    assert run("demo")[0] == 0
    code, out = run("keys", "retire")
    assert code == 0 and "no former" in out
    assert run("keys", "rotate")[0] == 0
    code, out = run("keys", "retire")
    assert code == 0 and "retired 1" in out
    assert not (home / "master.key.old").exists()
    assert "dog_name" in run("list", "--account", "demo-account", "--user", "alice")[1]


def test_a_missing_key_file_stops_commands_instead_of_making_a_new_one(home: Path) -> None:
    assert run("demo")[0] == 0
    (home / "master.key").unlink()
    code, out = run("list", "--account", "demo-account", "--user", "alice")
    assert code == 1 and "missing" in out and "Traceback" not in out
    assert not (home / "master.key").exists()
    code, out = run("keys", "rotate")
    assert code == 1 and "missing" in out
    assert not (home / "master.key").exists() and not (home / "master.key.next").exists()


def test_errors_are_one_line_without_traceback(home: Path) -> None:
    result = CliRunner().invoke(main, ["history", "nope", "--account", "a"])
    assert result.exit_code == 1
    assert result.output.strip() == "error: memory nope not found"


def test_tools_prints_both_schema_forms() -> None:
    code, chat = run("tools")
    assert code == 0
    names = {t["function"]["name"] for t in json.loads(chat)}
    assert names == {
        "store_memory",
        "update_memory",
        "forget_memory",
        "mark_private",
        "memory_query",
    }
    code, realtime = run("tools", "--form", "realtime")
    assert code == 0
    assert {t["type"] for t in json.loads(realtime)} == {"function"}
    assert {t["name"] for t in json.loads(realtime)} == names


def test_every_command_has_help() -> None:
    for args in (
        ["--help"],
        ["demo", "--help"],
        ["keys", "rotate", "--help"],
        ["erase-user", "--help"],
        ["export", "--help"],
        ["import", "--help"],
        ["purge", "--help"],
        ["list", "--help"],
        ["history", "--help"],
    ):
        code, out = run(*args)
        assert code == 0 and "Usage" in out


def test_ops_counts_events_by_op_and_node(home: Path) -> None:
    from confide.config import Settings
    from confide.engine import MemoryEngine

    with MemoryEngine.open(Settings(home=home)) as engine:
        engine.emit_op("hotpath", "create", account_id="acct-a", user_id="u1")
        engine.emit_op("hotpath", "search", account_id="acct-a", user_id="u1")
        engine.emit_op("worker", "ttl", account_id="acct-b")
    code, out = run("ops", "--since", "1d", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["byOp"] == {"create": 1, "search": 1, "ttl": 1}
    assert report["byNode"] == {"hotpath": 2, "worker": 1} and report["total"] == 3
    code, out = run("ops", "--since", "12h", "--account", "acct-b")
    assert code == 0 and "operational events since" in out and ": 1" in out.splitlines()[0]
    assert "ttl" in out and "hotpath" not in out
    code, out = run("ops", "--since", "2 weeks")
    assert code == 1 and "30m" in out


def test_version_prints_the_installed_distributions_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"confide, version {importlib.metadata.version('confide')}\n"


def _store_in_default_account(home: Path, user: str) -> str:
    from confide.config import Settings
    from confide.engine import MemoryEngine

    with MemoryEngine.open(Settings(home=home)) as engine:
        memory = engine.store(
            {"account_id": DEFAULT_ACCOUNT, "user_id": user, "key": "desk", "value": "Desk 4."}
        )
    return memory.id


def test_commands_act_in_the_sdks_default_account_unless_told(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CONFIDE_EMBEDDER", "none")
    memory_id = _store_in_default_account(home, "line-42")
    code, listing = run("list", "--user", "line-42")
    assert code == 0 and f"{memory_id}  [fact] desk: Desk 4." in listing
    code, history = run("history", memory_id)
    assert code == 0 and "ADD" in history
    out = tmp_path / "line-42.json"
    assert run("export", "--user", "line-42", "--out", str(out))[0] == 0
    assert json.loads(out.read_text())["memories"][0]["account_id"] == DEFAULT_ACCOUNT
    code, token = run("keys", "create")
    assert code == 0 and token.startswith("cfk_")
    code, keys = run("keys", "list")
    assert code == 0 and token.strip().removeprefix("cfk_").split("_")[0] in keys
    code, receipt = run("erase-user", "--user", "line-42", "--yes")
    assert code == 0 and json.loads(receipt)["account_id"] == DEFAULT_ACCOUNT
    assert "desk" not in run("list", "--user", "line-42")[1]


@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["history"],
        ["export"],
        ["erase-user"],
        ["keys", "create"],
        ["keys", "list"],
        ["apps", "uninstall"],
    ],
)
def test_every_account_option_shows_the_default_account(command: list[str]) -> None:
    code, out = run(*command, "--help")
    assert code == 0
    account = " ".join(out.split("--account", 1)[1].split("--", 1)[0].split())
    assert account.endswith(f"[default: {DEFAULT_ACCOUNT}]"), account


def test_an_empty_listing_says_whether_the_account_or_the_user_has_nothing(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONFIDE_EMBEDDER", "none")
    _store_in_default_account(home, "line-42")
    result = CliRunner().invoke(main, ["list", "--account", "nosuch"], catch_exceptions=False)
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr == "account 'nosuch' has no active memories\n"
    result = CliRunner().invoke(main, ["list", "--user", "nobody"], catch_exceptions=False)
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr == "user 'nobody' has no active memories in account 'default'\n"
    result = CliRunner().invoke(main, ["list", "--account", "nosuch", "--user", "line-42"])
    assert result.stderr == "account 'nosuch' has no active memories\n"
