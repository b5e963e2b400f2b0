"""``confide reindex`` through click's runner: re-embeds live versions with the new embedder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from confide.cli import main
from confide.client import Confide
from confide.config import Settings
from confide.embedders import build_embedder
from confide.engine import MemoryEngine
from confide.errors import EmbedderMismatchError, TokenizerMismatchError
from confide.index.lexical import TOKENIZER_META
from confide.index.memory_text import indexed_text
from confide.testing.embedders import HashingEmbedder
from confide.types import MemoryFilter, MemoryState

ACCOUNT = "acct-r"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MEMORY_ENCRYPTION_KEY", raising=False)
    monkeypatch.delenv("CONFIDE_STORAGE_URL", raising=False)
    monkeypatch.delenv("CONFIDE_EMBEDDER", raising=False)
    monkeypatch.setenv("CONFIDE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_reindex_has_help_text() -> None:
    result = CliRunner().invoke(main, ["reindex", "--help"])
    assert result.exit_code == 0
    assert "Re-embed every memory with the configured embedder" in result.output
    assert "--batch-size" in result.output


def test_reindex_re_writes_search_terms_of_another_tokenizer(home: Path) -> None:
    settings = Settings(embedder="none")
    with Confide.open(settings) as app:
        memory = app.engine.store(
            {"account_id": ACCOUNT, "user_id": "u1", "key": "dog", "value": "Our dog is Rex."}
        )
        with app.engine.storage.transaction() as tx:
            tx.put_tokens(memory.id, ACCOUNT, "u1", {1: 1})  # terms another tokenizer made
            tx.set_meta(TOKENIZER_META, "0")
    with pytest.raises(TokenizerMismatchError, match="confide reindex"):
        Confide.open(settings)
    refused = CliRunner().invoke(
        main, ["list", "--account", ACCOUNT, "--user", "u1"], env={"CONFIDE_EMBEDDER": "none"}
    )
    assert refused.exit_code == 1
    assert "run 'confide reindex'" in refused.output

    result = CliRunner().invoke(
        main, ["reindex", "--yes"], env={"CONFIDE_EMBEDDER": "none"}, catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert "re-indexed 1 memory versions without an embedder" in result.output
    with Confide.open(settings) as app:
        found = app.query(
            {"agent": "default", "account_id": ACCOUNT, "user_id": "u1", "query": "dog"}
        )
        assert [r["id"] for r in found.results] == [memory.id]


@pytest.mark.slow
def test_reindex_re_embeds_live_versions_with_the_configured_embedder(home: Path) -> None:
    settings = Settings()
    with Confide(MemoryEngine.open(settings), embedder=HashingEmbedder()) as app:
        kept, forgotten, changed = app.engine.store_many(
            [
                {"account_id": ACCOUNT, "user_id": "u1", "key": "dog", "value": "Our dog is Rex."},
                {"account_id": ACCOUNT, "user_id": "u1", "key": "tax", "value": "Taxes due."},
                {"account_id": ACCOUNT, "user_id": "u2", "key": "car", "value": "A red car."},
            ]
        )
        app.engine.forget(forgotten.id, account_id=ACCOUNT)
        newer = app.engine.update(changed.id, {"value": "A blue car."}, account_id=ACCOUNT)
        assert app.engine.storage.embedder_spec() == "hashing:64"

    result = CliRunner().invoke(
        main,
        ["reindex", "--yes", "--batch-size", "2"],
        env={"CONFIDE_EMBEDDER": "local:all-MiniLM-L6-v2"},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "re-embedded 3 memory versions with all-MiniLM-L6-v2:384" in result.output

    embedder = build_embedder("local:all-MiniLM-L6-v2", home=settings.home)
    assert embedder is not None
    with Confide(MemoryEngine.open(settings), embedder=embedder) as app:
        storage = app.engine.storage
        assert storage.embedder_spec() == "all-MiniLM-L6-v2:384"
        vectors = storage.vectors(ACCOUNT, [kept.id, forgotten.id, changed.id, newer.id])
        assert set(vectors) == {kept.id, forgotten.id, newer.id}  # not the superseded one
        assert all(v.shape == (384,) for v in vectors.values())
        expected = embedder.embed([indexed_text(kept)])[0]  # stored: the batch graph
        assert float(np.dot(vectors[kept.id], expected)) > 0.999
        flt = MemoryFilter(account_id=ACCOUNT, user_id="u1", states=(MemoryState.ACTIVE,))
        hits = storage.vector_search(flt, embedder.embed_one("pet"), 5)
        assert [h.memory_id for h in hits] == [kept.id]
        found = app.query(
            {"agent": "default", "account_id": ACCOUNT, "user_id": "u1", "query": "pet puppy"}
        )
        assert [r["id"] for r in found.results][:1] == [kept.id]
    with pytest.raises(EmbedderMismatchError):
        Confide(MemoryEngine.open(settings), embedder=HashingEmbedder())
