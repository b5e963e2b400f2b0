"""bench/lexical_scale.py: the other memories it adds, and a whole run on a tiny dataset."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _locomo_data import load_conversations
from confide.storage.sql import SqlStorage
from lexical_scale import main, other_memories

TURNS = {
    "c1": ["I adopted a cat named Miso.", "Miso sleeps on the piano all day."],
    "c2": ["We hiked the ridge above the lake.", "The trail was muddy after the rain."],
    "c3": ["My sister plays the cello in an orchestra.", "They toured Spain last spring."],
}


def _sample(conv_id: str) -> dict[str, Any]:
    first, second = TURNS[conv_id]
    return {
        "sample_id": conv_id,
        "conversation": {
            "speaker_a": f"Ann{conv_id}",
            "speaker_b": f"Bob{conv_id}",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": f"Ann{conv_id}", "dia_id": "D1:1", "text": first}],
            "session_2_date_time": "June 2, 2023",
            "session_2": [{"speaker": f"Bob{conv_id}", "dia_id": "D2:1", "text": second}],
        },
        "qa": [{"question": f"Q {first}", "evidence": ["D1:1"], "category": 4}],
    }


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([_sample(c) for c in TURNS]))
    return path


def test_other_memories_join_other_conversations_turns_in_this_ones_voices(
    data_file: Path,
) -> None:
    data = load_conversations(data_file)
    mine, *others = data.conversations
    made = other_memories(mine, others, 12, seed=0)
    values = [m["value"] for m in made]
    assert len(set(values)) == len(values) == 12
    own_words = {w for t in mine.turns for w in t.text.split()}
    assert all(not own_words & set(v.split()) - {"the", "a"} for v in values)
    assert {m["metadata"]["speaker"] for m in made} == set(mine.speakers)
    dates = {t.date.isoformat() for t in mine.turns}
    assert {m["metadata"]["occurred_at"] for m in made} <= dates
    assert all(m["user_id"] == mine.conv_id for m in made)
    with pytest.raises(SystemExit, match="at most 12"):
        other_memories(mine, others, 13, seed=0)


def test_a_run_reports_each_budgets_recall_per_conversation(
    data_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "lexical.json"
    main(["--data", str(data_file), "--others", "6", "--budgets", "10000,2", "--json", str(out)])
    found = json.loads(out.read_text())
    assert found["others"] == 6
    assert set(found["conversations"]) == set(TURNS)
    for row in found["conversations"].values():
        # Every question repeats its evidence turn, so the full search finds it first.
        assert row["10000"]["recall@40"] == 1.0
        assert set(row) == {"10000", "2"}
    assert {"ms_10000", "ms_2"} <= found.keys()


@pytest.mark.parametrize(("flags", "sampled"), [([], True), (["--whole-terms"], False)])
def test_whole_terms_scores_every_posting_of_a_term_over_the_budget(
    data_file: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], sampled: bool
) -> None:
    seen: set[bool] = set()
    real = SqlStorage.lexical_search

    def watched(self: SqlStorage, *args: Any, **kwargs: Any) -> Any:
        seen.add(self.lexical.sample_over_budget)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SqlStorage, "lexical_search", watched)
    main(["--data", str(data_file), "--others", "2", "--budgets", "2", *flags])
    assert seen == {sampled}
