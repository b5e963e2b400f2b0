"""The LoCoMo loader of ``bench/``: session dates in several formats, clear errors."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _locomo_data import DataFormatError, load_conversations, parse_session_date


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("10:04 AM on 19 January, 2024", datetime(2024, 1, 19, 10, 4)),
        ("2023-05-08", datetime(2023, 5, 8)),
        ("2023-05-08T13:56:00", datetime(2023, 5, 8, 13, 56)),
        ("2023-05-08T13:56:00+02:00", datetime(2023, 5, 8, 13, 56)),
        ("May 8, 2023", datetime(2023, 5, 8)),
        ("8 May 2023", datetime(2023, 5, 8)),
        ("8 May, 2023", datetime(2023, 5, 8)),
        ("  8 Sep  2023 ", datetime(2023, 9, 8)),
    ],
)
def test_session_dates_in_other_formats(text: str, expected: datetime) -> None:
    assert parse_session_date(text) == expected


def _sample(conv_id: str, date: str) -> dict[str, Any]:
    return {
        "sample_id": conv_id,
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat."}],
            "session_2_date_time": date,
            "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "How is the cat?"}],
        },
        "qa": [{"question": "What did Ann adopt?", "evidence": ["D1:1"], "category": 4}],
    }


def test_a_file_mixing_formats_loads(tmp_path: Path) -> None:
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps([_sample("c1", "2023-06-01"), _sample("c2", "June 2, 2023")]))
    data = load_conversations(path)
    assert [t.date for t in data.conversations[0].turns] == [
        datetime(2023, 5, 8, 13, 56),
        datetime(2023, 6, 1),
    ]
    assert data.conversations[1].turns[1].date == datetime(2023, 6, 2)
    assert data.conversations[1].turns[1].date_text == "June 2, 2023"


def test_an_unparseable_date_names_the_session(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([_sample("c1", "2023-06-01"), _sample("c2", "the next Tuesday")]))
    with pytest.raises(DataFormatError, match=r"c2 session_2_date_time: .*'the next Tuesday'"):
        load_conversations(path)


def test_the_benchmark_stops_with_the_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import locomo

    path = tmp_path / "bad.json"
    path.write_text(json.dumps([_sample("c7", "sometime")]))
    with pytest.raises(SystemExit) as stopped:
        locomo.main(["--data", str(path), "--no-mem0"])
    assert stopped.value.code == 2
    assert "c7 session_2_date_time: unrecognised date 'sometime'" in capsys.readouterr().err
