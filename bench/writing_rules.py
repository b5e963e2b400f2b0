"""First-pass rate of the writing rules: the share of memories accepted exactly as written.

Usage: python bench/writing_rules.py [--labels FILE ...]

Three sources, each through the guard its memories pass (``confide.conversation.writing``):

* the offline extractor on the development sentences (``bench/data/extractor_*.jsonl``),
  each value checked as the value of its key (``check_semantic(keyed=True)``, as the
  extraction pipeline checks a model's candidates) and, for comparison, as a free-standing
  sentence (how an insight is checked);
* the offline summariser on the same sentences, five user messages a range, through the
  episodic guard (the offline paths are not guarded in production: they write no model
  text; the figure says how far their output is from the rules);
* the offline app memory paragraph on the same sentences, five user messages a
  conversation, through the app memory guard (``check_app_memory``: semantic, at most 4
  sentences and 200 characters; again not guarded in production);
* the texts the scripted model writes in the insight and multi-fact conformance tests.

Prints accepted / trimmed / rejected counts, the first-pass rate and the reasons.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

from confide.apps.scope import AppMessage
from confide.apps.writer import check_app_memory, offline_paragraph
from confide.chat.summaries import OfflineSummariser
from confide.chat.types import ChatMessage
from confide.conversation.writing import (
    Outcome,
    Verdict,
    WritingTally,
    check_episodic,
    check_semantic,
)
from confide.llm.offline import OfflineExtractor
from confide.testing.conformance.insights import SCRIPTED_INSIGHTS
from confide.testing.conformance.multifact import SCRIPTED_FACTS

DATA = Path(__file__).parent / "data"
DEFAULT_LABELS = [
    DATA / "extractor_labels.jsonl",
    DATA / "extractor_heldout.jsonl",
    DATA / "extractor_heldout2.jsonl",
]
RANGE = 5


def tally(texts: Iterable[str], check: Callable[[str], Verdict]) -> WritingTally:
    """Every text through ``check``, counted."""
    out = WritingTally()
    for text in texts:
        out.add(check(text))
    return out


def show(label: str, counts: WritingTally) -> None:
    """One line of counts and rate, then the reasons."""
    rate = counts.first_pass_rate
    shown = "n/a" if rate is None else f"{rate:.3f}"
    c = counts.counts
    print(
        f"  {label:<44} n={counts.total:<4} accepted {c[Outcome.ACCEPTED]:<4} "
        f"trimmed {c[Outcome.TRIMMED]:<4} rejected {c[Outcome.REJECTED]:<4} "
        f"first-pass {shown}"
    )
    if counts.reasons:
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(counts.reasons.items()))
        print(f"  {'':<44} reasons: {reasons}")


def summaries(sentences: list[str]) -> list[str]:
    """The offline summariser's summary of each run of five sentences said by a user."""
    summariser = OfflineSummariser()
    when = datetime(2026, 1, 1, tzinfo=UTC)
    out = []
    for start in range(0, len(sentences), RANGE):
        messages = [
            ChatMessage(id=str(i), index=i, role="user", content=text, timestamp=when)
            for i, text in enumerate(sentences[start : start + RANGE])
        ]
        out.append(asyncio.run(summariser.summarise(messages)).summary)
    return out


def app_paragraphs(sentences: list[str]) -> list[str]:
    """The offline app memory of each run of ``RANGE`` sentences said by the user."""
    return [
        offline_paragraph(
            [AppMessage(role="user", content=s) for s in sentences[start : start + RANGE]]
        )
        for start in range(0, len(sentences), RANGE)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, nargs="+", default=DEFAULT_LABELS)
    args = parser.parse_args()
    extractor = OfflineExtractor()
    print("writing rules: first-pass rate = accepted unchanged / all checked")
    for path in args.labels:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        sentences = [str(r["sentence"]) for r in rows]
        values = [c.value for s in sentences for c in extractor.extract_text(s)]
        print(f"{path.name}: {len(sentences)} sentences")
        show("offline extractor, semantic (keyed)", tally(values, _keyed))
        show("offline extractor, semantic (as sentences)", tally(values, check_semantic))
        show("offline summariser, episodic", tally(summaries(sentences), check_episodic))
        show(
            "offline app paragraph, app memory", tally(app_paragraphs(sentences), check_app_memory)
        )
    print("scripted model outputs of the conformance tests")
    show("insights, semantic", tally(SCRIPTED_INSIGHTS, check_semantic))
    show("multi-fact candidates, semantic (keyed)", tally(SCRIPTED_FACTS, _keyed))


def _keyed(text: str) -> Verdict:
    return check_semantic(text, keyed=True)


if __name__ == "__main__":
    main()
