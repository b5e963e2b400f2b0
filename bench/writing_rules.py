"""First-pass rate of the writing rules: the share of memories accepted exactly as written.

Usage: python bench/writing_rules.py [--labels FILE ...] [--data LOCOMO_JSON] [--show N]

Each producer's texts go through the guard their memories pass
(``confide.conversation.writing``):

* the offline extractor: each value checked as the value of its key
  (``check_semantic(keyed=True)``, as the extraction pipeline and the memory tools check
  one) and, for comparison, as a free-standing sentence (how an insight is checked);
* the offline summariser: the summary through the episodic guard, each fact through the
  semantic one (as a model's summary is checked), and whether the summary carries the date
  of the messages it tells (``dated``);
* the offline app memory paragraph, through the app memory guard (``check_app_memory``:
  semantic, at most 4 sentences and 200 characters);
* the texts the scripted model writes in the insight and multi-fact conformance tests.

Two kinds of input:

* the labelled sentences (``bench/data/extractor_*.jsonl``), said by a user: the summariser
  reads runs of five, the app memory writer conversations of five;
* LoCoMo's conversations (``--data``, the development file of ``bench/locomo.py``), each
  read from both speakers' sides (one is the user, the other the assistant): the extractor
  reads every turn, the summariser the batches of 20 messages the rolling summaries take
  (each message dated by its session), the app memory writer each session.

The rewriting of the offline paths was developed on ``extractor_labels.jsonl`` and
conversation conv-26 only ("dev"); every other set ("held-out") was not read while writing
it, and nothing in it is tuned, so there is nothing to choose per fold: the held-out figure
is the pooled rate over the held-out sets (and, for LoCoMo, one figure per conversation,
which is what leaving each conversation out shows).

Prints accepted / trimmed / rejected counts, the first-pass rate and the reasons, then a
table of first-pass rates per producer, dev and held-out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from _locomo_data import DEFAULT_DATA, Conversation, load_conversations
from confide.apps.scope import AppMessage
from confide.apps.writer import check_app_memory, offline_paragraph
from confide.chat.summaries import OfflineSummariser, Summary
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
DEV = frozenset({"extractor_labels.jsonl", "conv-26"})
"""The sets the offline rewriting was written on; every other set is held out."""
RANGE = 5
BATCH = 20
"""Messages a rolling summary takes (``CONFIDE_SUMMARY_BATCH``)."""
PRODUCERS = (
    "offline extractor, semantic (keyed)",
    "offline extractor, semantic (as sentences)",
    "offline summariser, episodic",
    "offline summariser facts, semantic",
    "offline app paragraph, app memory",
)


@dataclass
class Pool:
    """Tallies per producer over the sets of one role (dev or held-out)."""

    tallies: dict[str, WritingTally] = field(
        default_factory=lambda: {p: WritingTally() for p in PRODUCERS}
    )
    dated: list[int] = field(default_factory=lambda: [0, 0])


def tally(texts: Iterable[str], check: Callable[[str], Verdict]) -> WritingTally:
    """Every text through ``check``, counted."""
    out = WritingTally()
    for text in texts:
        out.add(check(text))
    return out


def show(label: str, counts: WritingTally, extra: str = "") -> None:
    """One line of counts and rate, then the reasons."""
    rate = counts.first_pass_rate
    shown = "n/a" if rate is None else f"{rate:.3f}"
    c = counts.counts
    print(
        f"  {label:<44} n={counts.total:<5} accepted {c[Outcome.ACCEPTED]:<5} "
        f"trimmed {c[Outcome.TRIMMED]:<4} rejected {c[Outcome.REJECTED]:<4} "
        f"first-pass {shown}{extra}"
    )
    if counts.reasons:
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(counts.reasons.items()))
        print(f"  {'':<44} reasons: {reasons}")


def summarise(batches: Iterable[Sequence[ChatMessage]]) -> list[Summary]:
    """The offline summariser's summary of each batch."""
    summariser = OfflineSummariser()
    return [asyncio.run(summariser.summarise(batch)) for batch in batches]


def sentence_batches(sentences: list[str]) -> list[list[ChatMessage]]:
    """Runs of ``RANGE`` sentences said by a user, on one day."""
    when = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        [
            ChatMessage(id=str(i), index=i, role="user", content=text, timestamp=when)
            for i, text in enumerate(sentences[start : start + RANGE])
        ]
        for start in range(0, len(sentences), RANGE)
    ]


def conversation_batches(conv: Conversation) -> list[list[ChatMessage]]:
    """The conversation from each speaker's side, in batches of ``BATCH`` messages."""
    out = []
    for side in conv.speakers:
        messages = [
            ChatMessage(
                id=t.dia_id,
                index=t.position,
                role="user" if t.speaker == side else "assistant",
                content=t.text,
                timestamp=t.date.replace(tzinfo=UTC),
            )
            for t in conv.turns
        ]
        out += [messages[i : i + BATCH] for i in range(0, len(messages), BATCH)]
    return out


def conversation_sessions(conv: Conversation) -> list[list[AppMessage]]:
    """Each session from each speaker's side, as an ended app conversation."""
    out = []
    for side in conv.speakers:
        for session in sorted({t.session for t in conv.turns}):
            out.append(
                [
                    AppMessage(role="user" if t.speaker == side else "assistant", content=t.text)
                    for t in conv.turns
                    if t.session == session and t.text.strip()
                ]
            )
    return out


def _date_said(summary: str, batch: Sequence[ChatMessage]) -> bool:
    """Whether ``summary`` names the day of one of the messages it summarises."""
    days = {m.timestamp.astimezone(UTC) for m in batch}
    return any(f"{d.day} {d:%B %Y}" in summary for d in days)


def report(
    name: str,
    values: list[str],
    batches: list[list[ChatMessage]],
    sessions: list[list[AppMessage]],
    pool: Pool,
    shown: int,
) -> None:
    """Every producer's counts on one set, added to ``pool``."""
    summaries = summarise(batches)
    dated = sum(_date_said(s.summary, b) for s, b in zip(summaries, batches, strict=True))
    facts = [f.content for s in summaries for f in s.facts]
    paragraphs = [offline_paragraph(s) for s in sessions]
    results = {
        PRODUCERS[0]: tally(values, _keyed),
        PRODUCERS[1]: tally(values, check_semantic),
        PRODUCERS[2]: tally([s.summary for s in summaries], check_episodic),
        PRODUCERS[3]: tally(facts, check_semantic),
        PRODUCERS[4]: tally(paragraphs, check_app_memory),
    }
    for producer, counts in results.items():
        extra = f"  dated {dated}/{len(summaries)}" if producer == PRODUCERS[2] else ""
        show(producer, counts, extra)
        pool.tallies[producer].merge(counts)
    pool.dated[0] += dated
    pool.dated[1] += len(summaries)
    if shown:
        texts = {
            PRODUCERS[0]: (values, _keyed),
            PRODUCERS[2]: ([s.summary for s in summaries], check_episodic),
            PRODUCERS[3]: (facts, check_semantic),
            PRODUCERS[4]: (paragraphs, check_app_memory),
        }
        for producer, (items, check) in texts.items():
            for text in items[:shown]:
                print(f"    [{producer.split(',')[0]}] {check(text).outcome}: {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, nargs="+", default=DEFAULT_LABELS)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo-format file")
    parser.add_argument("--conversations", nargs="+", help="only these LoCoMo sample ids")
    parser.add_argument("--show", type=int, default=0, help="print the first N texts per set")
    args = parser.parse_args()
    extractor = OfflineExtractor()
    pools = {"dev": Pool(), "held-out": Pool()}
    print("writing rules: first-pass rate = accepted unchanged / all checked")
    for path in args.labels:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        sentences = [str(r["sentence"]) for r in rows]
        role = "dev" if path.name in DEV else "held-out"
        print(f"{path.name} ({role}): {len(sentences)} sentences")
        values = [c.value for s in sentences for c in extractor.extract_text(s)]
        sessions = [
            [AppMessage(role="user", content=s) for s in sentences[i : i + RANGE]]
            for i in range(0, len(sentences), RANGE)
        ]
        report(path.name, values, sentence_batches(sentences), sessions, pools[role], args.show)
    if args.data.exists():
        for conv in load_conversations(args.data).conversations:
            if args.conversations and conv.conv_id not in args.conversations:
                continue
            role = "dev" if conv.conv_id in DEV else "held-out"
            print(f"LoCoMo {conv.conv_id} ({role}): {len(conv.turns)} turns, both sides")
            values = [c.value for t in conv.turns for c in extractor.extract_text(t.text)]
            batches = conversation_batches(conv)
            sessions = conversation_sessions(conv)
            report(conv.conv_id, values, batches, sessions, pools[role], args.show)
    else:
        print(f"no LoCoMo file at {args.data} (--data): the labelled sentences only")
    print("scripted model outputs of the conformance tests")
    show("insights, semantic", tally(SCRIPTED_INSIGHTS, check_semantic))
    show("multi-fact candidates, semantic (keyed)", tally(SCRIPTED_FACTS, _keyed))
    print("first-pass rate per producer (pooled)")
    print(f"  {'producer':<44} {'dev':>14} {'held-out':>14}")
    for producer in PRODUCERS:
        cells = []
        for pool in pools.values():
            counts = pool.tallies[producer]
            rate = counts.first_pass_rate
            cells.append("n/a" if rate is None else f"{rate:.3f} ({counts.total})")
        print(f"  {producer:<44} {cells[0]:>14} {cells[1]:>14}")
    dated = [f"{p.dated[0]}/{p.dated[1]}" for p in pools.values()]
    print(f"  {'offline summaries dated':<44} {dated[0]:>14} {dated[1]:>14}")


def _keyed(text: str) -> Verdict:
    return check_semantic(text, keyed=True)


if __name__ == "__main__":
    main()
