"""Precision and recall of the offline extractor on the labelled sentences.

Usage: python bench/extractor.py [--labels FILE ...] [--misses]

By default it scores three sets:

* ``extractor_labels.jsonl`` ("dev"): written before the extractor and used while writing it;
* ``extractor_heldout.jsonl`` ("dev2"): first a held-out set, then used to broaden the rules,
  so now a second development set (both are optimistic);
* ``extractor_heldout2.jsonl`` ("held-out"): written before the rules were broadened and never
  used to change them: the honest estimate.

A predicted memory matches an expected one when the types are equal and the expected value
fragment appears in the predicted value (case-insensitive), as written or retold in the third
person as the extractor writes values (a label's ``by myself`` is found in ``The user lives by
themselves``). "strict" also needs the key to
name the same kind of memory; "lenient" ignores the key (the fact is what counts).

Extracted keys come from a fixed vocabulary (``confide.llm.key_vocabulary``): the labels were
written with keys built from the user's words (``likes_gardening``, ``appointment_dentist``),
which the extractor no longer makes. "strict" therefore compares vocabulary families: the
label's key and the predicted key are both mapped by ``family`` (``likes_gardening`` and
``likes.2`` are both ``likes``; ``daughter_name`` stays ``daughter_name``). For many-valued
families that is coarser than the old exact comparison (``appointment_dentist`` and
``appointment_doctor`` are both ``appointment``); the value must still match.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from confide.llm.candidates import Candidate
from confide.llm.key_vocabulary import family
from confide.llm.offline import OfflineExtractor
from confide.llm.third_person import third_person

DATA = Path(__file__).parent / "data"
DEFAULT_LABELS = [
    DATA / "extractor_labels.jsonl",
    DATA / "extractor_heldout.jsonl",
    DATA / "extractor_heldout2.jsonl",
]
ROLES = {
    "extractor_labels.jsonl": "dev",
    "extractor_heldout.jsonl": "dev2",
    "extractor_heldout2.jsonl": "held-out",
}


def _matches(pred: Candidate, exp: dict[str, str], *, strict: bool) -> bool:
    if pred.type.value != exp["type"]:
        return False
    if strict and family(pred.key)[0] != family(exp["key"])[0]:
        return False
    told = pred.value.lower()
    return exp["value"].lower() in told or third_person(exp["value"], named=True).lower() in told


def score(
    rows: list[dict[str, object]], *, strict: bool, show: bool = False
) -> tuple[float, float]:
    """Return (precision, recall) over all rows."""
    extractor = OfflineExtractor()
    tp = n_pred = n_exp = 0
    for row in rows:
        sentence = str(row["sentence"])
        expected = list(row["expected"])  # type: ignore[call-overload]
        predicted = extractor.extract_text(sentence)
        n_pred += len(predicted)
        n_exp += len(expected)
        unmatched = list(expected)
        extra = []
        for pred in predicted:
            hit = next((e for e in unmatched if _matches(pred, e, strict=strict)), None)
            if hit is None:
                extra.append(pred)
            else:
                unmatched.remove(hit)
                tp += 1
        if show and (unmatched or extra):
            print(f"- {sentence}")
            for e in unmatched:
                print(f"    missed   {e['type']:<11} {e['key']} ~ {e['value']}")
            for p in extra:
                print(f"    extra    {p.type.value:<11} {p.key} = {p.value}")
    precision = tp / n_pred if n_pred else 1.0
    recall = tp / n_exp if n_exp else 1.0
    return precision, recall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, nargs="+", default=DEFAULT_LABELS)
    parser.add_argument("--misses", action="store_true", help="list misses and extras (strict)")
    args = parser.parse_args()
    for path in args.labels:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        n_exp = sum(len(r["expected"]) for r in rows)
        role = ROLES.get(path.name, "custom")
        print(f"{path.name} ({role}): {len(rows)} sentences, {n_exp} expected memories")
        for strict in (True, False):
            p, r = score(rows, strict=strict, show=args.misses and strict)
            f1 = 2 * p * r / (p + r) if p + r else 0.0
            label = "strict (type+family+value)" if strict else "lenient (type+value)     "
            print(f"  {label}  precision {p:.3f}  recall {r:.3f}  f1 {f1:.3f}")


if __name__ == "__main__":
    main()
