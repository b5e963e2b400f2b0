"""Index rows a store cannot trust are refused: stale search terms, writes without vectors."""

from __future__ import annotations

from typing import Any

import pytest

from confide.client import Confide
from confide.engine import MemoryEngine
from confide.engine.reindex import reindex
from confide.errors import IndexerMissingError, TokenizerMismatchError
from confide.index import lexical
from confide.index.lexical import TOKENIZER_META, LexicalIndexer
from confide.index.tokenize import TOKENIZER_VERSION
from confide.storage.base import Storage
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import StorageHarness
from confide.testing.embedders import HashingEmbedder
from confide.types import MemoryFilter

USER = "user-1"
FLT = MemoryFilter(account_id=ACCOUNT, user_id=USER)


def _reopen(engine: MemoryEngine, **kwargs: Any) -> MemoryEngine:
    """Another engine on the same store and keys, as a new process would open it."""
    return MemoryEngine(
        engine.storage,
        engine.keyring,
        settings=engine.settings,
        key_store=engine.key_store,
        **kwargs,
    )


def _found(engine: MemoryEngine, words: str) -> list[str]:
    tokens = list(engine.lexical.hashed_terms(ACCOUNT, words))
    hits = engine.storage.lexical_search(FLT, tokens, 5, k1=1.2, b=0.75)
    return [h.memory_id for h in hits]


def _forget_version(storage: Storage) -> None:
    """Delete the recorded tokenizer version, as a store written before it was recorded."""
    with storage.database.transaction() as tx:
        tx.run("DELETE FROM store_meta WHERE key = ?", [TOKENIZER_META])


class IndexVersionsConformance(StorageHarness):
    """Index rows the store cannot trust are refused."""

    def test_a_fresh_store_records_the_current_tokenizer(self, engine: MemoryEngine) -> None:
        assert engine.storage.meta_value(TOKENIZER_META) == str(TOKENIZER_VERSION)

    def test_terms_of_another_tokenizer_are_refused_until_reindexed(
        self, engine: MemoryEngine
    ) -> None:
        memory = add(engine, key="hobby", value="She loves gardening")
        # As another tokenizer version left the store: other terms, its version recorded.
        older = LexicalIndexer(engine.keys, tokenize=lambda text: text.upper().split())
        with engine.storage.transaction() as tx:
            older.write(tx, memory, older.prepare([memory])[0])
            tx.set_meta(TOKENIZER_META, "0")
        assert _found(engine, "gardening") == []  # what an unchecked store would silently give
        with pytest.raises(TokenizerMismatchError, match="confide reindex") as refused:
            _reopen(engine)
        assert f"version 0, not {TOKENIZER_VERSION}" in str(refused.value)

        assert reindex(_reopen(engine, reindexing=True), None) == 1
        assert engine.storage.meta_value(TOKENIZER_META) == str(TOKENIZER_VERSION)
        assert _found(_reopen(engine), "gardening") == [memory.id]

    def test_a_store_without_a_recorded_tokenizer_opens_and_records_it(
        self,
        engine: MemoryEngine,
    ) -> None:
        memory = add(engine, key="hobby", value="She loves gardening")
        _forget_version(engine.storage)
        reopened = _reopen(engine)
        assert engine.storage.meta_value(TOKENIZER_META) == "1"
        assert _found(reopened, "gardening") == [memory.id]
        assert add(reopened, key="pet", value="A cat named Tom").version == 1

    def test_an_unrecorded_store_with_data_counts_as_the_first_tokenizer(
        self, engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Once the tokenizer has moved on, a store that never recorded its version was written
        # with the first one: refused. One without data takes the current version.
        monkeypatch.setattr(lexical, "TOKENIZER_VERSION", 2)
        _forget_version(engine.storage)
        _reopen(engine)
        assert engine.storage.meta_value(TOKENIZER_META) == "2"
        add(engine)
        _forget_version(engine.storage)
        with pytest.raises(TokenizerMismatchError, match="version 1, not 2"):
            _reopen(engine)
        assert engine.storage.meta_value(TOKENIZER_META) == "1"

    def test_a_bare_engine_refuses_writes_to_a_store_with_vectors(
        self, engine: MemoryEngine
    ) -> None:
        kept = add(engine, key="tea", value="green tea")
        embedder = HashingEmbedder()
        engine.storage.bind_embedder(embedder.model_id, embedder.dims)
        with pytest.raises(IndexerMissingError, match=r"Confide\.open.*confide reindex"):
            add(engine, key="pet", value="A cat named Tom")
        with pytest.raises(IndexerMissingError):
            engine.update(kept.id, {"value": "black tea"}, account_id=ACCOUNT)
        with pytest.raises(IndexerMissingError):
            engine.update_by_key(account_id=ACCOUNT, user_id=USER, key="tea", value="black tea")
        exported = engine.export_user(account_id=ACCOUNT, user_id=USER)
        with pytest.raises(IndexerMissingError):
            engine.import_user(exported, user_id="copy")
        # Nothing was written; reads still work.
        assert [m.id for m in engine.list_memories(FLT)] == [kept.id]
        assert engine.get(kept.id, account_id=ACCOUNT).value == "green tea"
        assert _found(engine, "tea") == [kept.id]

        app = Confide(engine, embedder=embedder)  # adds the vector indexer afterwards
        pet = add(app.engine, key="pet", value="A cat named Tom")
        newer = app.engine.update(kept.id, {"value": "black tea"}, account_id=ACCOUNT)
        assert set(engine.storage.vectors(ACCOUNT, [pet.id, newer.id])) == {pet.id, newer.id}
