"""An erasure is finished only when verified: a reader holding SQLite's WAL leaves it pending,
the worker (or the command line, waiting) finishes it once the reader is gone, and
``confide verify-erasure`` reports what the files still hold."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from confide.cli import main
from confide.config import Settings
from confide.engine import MemoryEngine
from confide.engine.residue import markers_of, scan_files
from confide.storage.jobs import SqlJobTables
from confide.storage.scrubs import SqlScrubTables
from confide.workers.registry import standard_worker

ACCOUNT = "acme"
VALUES = ("ultramarine-okapi-1", "ultramarine-okapi-2")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MEMORY_ENCRYPTION_KEY", raising=False)
    monkeypatch.delenv("CONFIDE_STORAGE_URL", raising=False)
    monkeypatch.setenv("CONFIDE_EMBEDDER", "none")
    monkeypatch.setenv("CONFIDE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def engine(home: Path) -> Iterator[MemoryEngine]:
    with MemoryEngine.open(Settings(home=home)) as opened:
        for index, value in enumerate(VALUES):
            opened.store(
                {"account_id": ACCOUNT, "user_id": "u-1", "key": f"k{index}", "value": value}
            )
        opened.store({"account_id": ACCOUNT, "user_id": "u-2", "key": "k", "value": "bystander"})
        yield opened


class Reader:
    """Another process with a read open on the key store (a backup, a long query)."""

    def __init__(self, path: Path) -> None:
        script = (
            "import sqlite3, sys\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('BEGIN')\n"
            "print(c.execute('SELECT count(*) FROM user_keys').fetchone()[0], flush=True)\n"
            "sys.stdin.readline()\n"
            "c.close()\n"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", script, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.keys_seen = int(self.process.stdout.readline())

    def release(self) -> None:
        """End the read (the process closes its connection and exits)."""
        if self.process.returncode is None:
            self.process.communicate("\n", timeout=60)


@pytest.fixture
def reader(engine: MemoryEngine, home: Path) -> Iterator[Reader]:
    held = Reader(home / "keys.db")
    assert held.keys_seen >= 2
    yield held
    held.release()


@pytest.mark.erasure_may_pend
def test_a_reader_on_the_key_store_leaves_the_erasure_pending_until_the_worker_settles_it(
    engine: MemoryEngine, reader: Reader
) -> None:
    receipt = engine.erase_user(account_id=ACCOUNT, user_id="u-1", settle_seconds=0)

    assert receipt.status == "pending"
    assert (
        receipt.blocked_by is not None and "a reader holds the WAL of keys.db" in receipt.blocked_by
    )
    files = engine.residue_files()
    assert files is not None
    held = scan_files(files, receipt.markers)
    assert {f.file.rsplit("/", 1)[-1] for f in held.found} == {"keys.db-wal"}
    assert any(f.marker.startswith("key id") for f in held.found)
    assert [j.kind for j in SqlJobTables(engine.storage.database).jobs(kind="scrub")] == ["scrub"]

    reader.release()
    later = SqlJobTables(engine.storage.database).jobs(kind="scrub")[0].run_at + 1
    run = standard_worker(engine, engine.settings, clock=lambda: later).run_once()

    assert run.kinds.get("scrub") == 1 and run.failed == 0
    report = engine.scrub_report(receipt.id)
    assert report is not None and report.status == "verified" and report.attempts == 2
    assert scan_files(engine.residue_files() or [], receipt.markers).clean


@pytest.mark.erasure_may_pend
def test_the_hourly_purge_settles_pending_scrubs_too(engine: MemoryEngine, reader: Reader) -> None:
    receipt = engine.erase_user(account_id=ACCOUNT, user_id="u-1", settle_seconds=0)
    assert receipt.status == "pending"
    reader.release()
    assert [r.status for r in engine.retry_scrubs()] == ["verified"]
    assert SqlScrubTables(engine.storage.database).pending() == []


@pytest.mark.erasure_may_pend
def test_waiting_for_a_scrub_retries_until_the_reader_is_gone(
    engine: MemoryEngine, reader: Reader
) -> None:
    receipt = engine.erase_user(account_id=ACCOUNT, user_id="u-1", settle_seconds=0)
    heard: list[str] = []
    ticks = iter(range(100))

    report = engine.wait_for_scrub(
        receipt.id,
        timeout=30,
        on_pending=lambda r: heard.append(r.detail),
        sleep=lambda _: reader.release(),
        clock=lambda: float(next(ticks)),
    )

    assert report.status == "verified"
    assert len(heard) == 1 and "a reader holds the WAL" in heard[0]


@pytest.mark.erasure_may_pend
def test_the_command_line_names_what_blocks_the_erasure_and_exits_non_zero(
    engine: MemoryEngine, reader: Reader, tmp_path: Path
) -> None:
    runner = CliRunner()
    erased = runner.invoke(
        main, ["erase-user", "--account", ACCOUNT, "--user", "u-1", "--yes", "--wait", "0"]
    )
    assert erased.exit_code == 1
    assert "a reader holds the WAL of keys.db" in erased.output
    assert "not finished after 0 s" in erased.output and "Traceback" not in erased.output
    receipt_text = erased.output[erased.output.index("{") : erased.output.rindex("}") + 1]
    receipt = json.loads(receipt_text)
    assert receipt["status"] == "pending"
    saved = tmp_path / "receipt.json"
    saved.write_text(receipt_text)

    found = runner.invoke(main, ["verify-erasure", str(saved)])
    assert found.exit_code == 1
    assert "found key id" in found.output and "keys.db-wal" in found.output

    reader.release()
    assert [r.status for r in engine.retry_scrubs()] == ["verified"]
    clean = runner.invoke(main, ["verify-erasure", str(saved)])
    assert clean.exit_code == 0, clean.output
    assert "0 occurrences of 1 key ids" in clean.output


def test_verify_erasure_refuses_a_file_that_is_not_a_receipt(home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"nope": 1}')
    result = CliRunner().invoke(main, ["verify-erasure", str(bad)])
    assert result.exit_code == 1 and "not an erasure receipt" in result.output
    assert "Traceback" not in result.output


def _leave_a_copy_in_free_space(database: Path, blob: bytes) -> None:
    """Write ``blob`` into a page of ``database`` and delete it without ``secure_delete``, in
    another process: the bytes stay in the page's free space, as the stale copy a B-tree
    balance leaves of a cell it moved (which no delete zeroes)."""
    script = (
        "import sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('PRAGMA secure_delete = OFF')\n"
        "c.execute('CREATE TABLE stale_copy (b BLOB)')\n"
        "c.execute('INSERT INTO stale_copy VALUES (?)', [bytes.fromhex(sys.argv[2])])\n"
        "c.execute('DELETE FROM stale_copy')\n"
        "c.execute('PRAGMA wal_checkpoint(TRUNCATE)')\n"
    )
    subprocess.run([sys.executable, "-c", script, str(database), blob.hex()], check=True)


def test_residue_the_ordinary_scrub_leaves_is_rewritten_away(
    engine: MemoryEngine, home: Path
) -> None:
    """A copy of an erased ciphertext in a page's free space survives ``secure_delete`` and
    the checkpoint; the erasure's scan finds it, and the database is rewritten whole."""
    ciphertext = next(iter(engine.storage.iter_owner(ACCOUNT, "u-1"))).ciphertext
    head_and_tail = markers_of([], [ciphertext])
    files = engine.residue_files()
    assert files is not None
    engine.storage.scrub()
    assert scan_files(files, head_and_tail).occurrences == 2  # the live row
    _leave_a_copy_in_free_space(home / "confide.db", ciphertext)
    assert scan_files(files, head_and_tail).occurrences == 4  # and its copy

    receipt = engine.erase_user(account_id=ACCOUNT, user_id="u-1")

    assert receipt.status == "verified", receipt.blocked_by
    assert "VACUUM" in receipt.scrubbed["data"]
    assert scan_files(engine.residue_files() or [], head_and_tail).clean


def test_an_erasure_without_residue_rewrites_nothing(engine: MemoryEngine) -> None:
    receipt = engine.erase_user(account_id=ACCOUNT, user_id="u-1")

    assert receipt.status == "verified", receipt.blocked_by
    assert "VACUUM" not in receipt.scrubbed["data"]
