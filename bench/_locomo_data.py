"""Load LoCoMo conversations and questions for the retrieval benchmark.

Only the dialogue turns and the questions are read; the generated observations and
summaries are ignored (they leak where the answers are).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "bench" / "locomo_dev.json"
SCORED_CATEGORIES = (1, 2, 3, 4)

_SESSION = re.compile(r"^session_(\d+)$")
_EVIDENCE = re.compile(r"^D:?(\d+):0*(\d+)$")


@dataclass(frozen=True)
class Turn:
    """One dialogue turn; ``position`` is its index in the whole conversation."""

    conv_id: str
    dia_id: str
    session: int
    position: int
    speaker: str
    text: str
    caption: str | None
    date: datetime
    date_text: str


@dataclass(frozen=True)
class Question:
    """A scored question with its normalised evidence turn ids."""

    conv_id: str
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    """The turns of one conversation, in order."""

    conv_id: str
    speakers: tuple[str, str]
    turns: list[Turn]


@dataclass
class Dataset:
    """Conversations, scored questions and how many evidence ids needed repair."""

    conversations: list[Conversation]
    questions: list[Question]
    evidence_normalised: int = 0
    evidence_skipped: int = 0
    questions_without_evidence: int = 0
    skipped_examples: list[str] = field(default_factory=list)


class DataFormatError(ValueError):
    """The data file breaks LoCoMo's format; the message names the place."""


# Tried in order after ISO 8601 (``2023-05-08``, ``2023-05-08T13:56:00``); month names full
# or abbreviated, with or without a comma before the year, times with or without "on".
_DATE_FORMATS = (
    *(
        fmt.replace("%B", month)
        for month in ("%B", "%b")
        for fmt in (
            "%I:%M %p on %d %B, %Y",
            "%I:%M %p on %d %B %Y",
            "%I:%M %p on %B %d, %Y",
            "%I:%M %p, %d %B, %Y",
            "%I:%M %p %d %B %Y",
            "%H:%M on %d %B, %Y",
            "%d %B, %Y",
            "%d %B %Y",
            "%B %d, %Y",
            "%B %d %Y",
        )
    ),
    "%Y/%m/%d",
    "%Y/%m/%d %H:%M",
    "%Y/%m/%d %H:%M:%S",
)


def parse_session_date(text: str) -> datetime:
    """Parse a session date: LoCoMo's ``1:56 pm on 8 May, 2023``, ISO 8601 (``2023-05-08``,
    ``2023-05-08T13:56:00``), ``May 8, 2023`` or ``8 May 2023`` and their near variants.

    Raises ``ValueError`` when none fits. A zone, when given, is dropped (session dates are
    compared with each other only).
    """
    cleaned = " ".join(text.strip().split())
    try:
        return datetime.fromisoformat(cleaned).replace(tzinfo=None)
    except ValueError:
        pass
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt)
        except ValueError:
            continue
    raise ValueError(f"unrecognised date {text!r}")


def _normalise(raw: str, known: set[str]) -> tuple[list[str], bool]:
    """Split and repair one evidence entry; return the ids and whether it was changed."""
    ids: list[str] = []
    changed = False
    for part in re.split(r"[;,\s]+", raw.strip()):
        if not part:
            continue
        match = _EVIDENCE.match(part)
        if match is None:
            continue
        fixed = f"D{int(match.group(1))}:{int(match.group(2))}"
        changed = changed or fixed != part
        ids.append(fixed)
    changed = changed or len(ids) != 1
    return [i for i in ids if i in known], changed


def load_conversations(path: str | Path) -> Dataset:
    """Read the LoCoMo JSON file; evidence of categories 1-4 is normalised and checked."""
    samples = json.loads(Path(path).read_text(encoding="utf-8"))
    data = Dataset(conversations=[], questions=[])
    for sample in samples:
        conv_id = str(sample["sample_id"])
        raw = sample["conversation"]
        sessions = sorted(int(m.group(1)) for k in raw if (m := _SESSION.match(k)))
        turns: list[Turn] = []
        for number in sessions:
            key = f"session_{number}_date_time"
            if key not in raw:
                raise DataFormatError(f"{path}: {conv_id} session_{number} has no {key}")
            date_text = str(raw[key])
            try:
                date = parse_session_date(date_text)
            except ValueError as exc:
                raise DataFormatError(f"{path}: {conv_id} {key}: {exc}") from None
            for turn in raw[f"session_{number}"]:
                turns.append(
                    Turn(
                        conv_id=conv_id,
                        dia_id=str(turn["dia_id"]),
                        session=number,
                        position=len(turns),
                        speaker=str(turn["speaker"]),
                        text=str(turn["text"]),
                        caption=turn.get("blip_caption"),
                        date=date,
                        date_text=date_text,
                    )
                )
        data.conversations.append(
            Conversation(conv_id, (str(raw["speaker_a"]), str(raw["speaker_b"])), turns)
        )
        known = {t.dia_id for t in turns}
        for qa in sample["qa"]:
            category = int(qa["category"])
            if category not in SCORED_CATEGORIES:
                continue
            evidence: list[str] = []
            for entry in qa.get("evidence", []):
                ids, changed = _normalise(str(entry), known)
                if not ids:
                    data.evidence_skipped += 1
                    data.skipped_examples.append(f"{conv_id}:{entry}")
                elif changed:
                    data.evidence_normalised += 1
                evidence.extend(i for i in ids if i not in evidence)
            if not evidence:
                data.questions_without_evidence += 1
                continue
            data.questions.append(Question(conv_id, str(qa["question"]), category, tuple(evidence)))
    return data
