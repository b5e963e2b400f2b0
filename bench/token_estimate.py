"""Measure how far the chars/4 token estimate is from cl100k on the LoCoMo turns.

Usage: python bench/token_estimate.py [--data FILE]
"""

from __future__ import annotations

import argparse
import statistics

from _locomo_data import DEFAULT_DATA, load_conversations
from confide.retrieval.budget import estimate_tokens, token_counter


def main() -> None:
    """Print the aggregate and per-item error of the estimate."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    args = parser.parse_args()
    count = token_counter()
    texts = [t.text for conv in load_conversations(args.data).conversations for t in conv.turns]
    exact = [count(t) for t in texts]
    est = [estimate_tokens(t) for t in texts]
    ratios = [e / x for e, x in zip(est, exact, strict=True) if x]
    print(f"turns: {len(texts)}  cl100k tokens: {sum(exact)}  estimate: {sum(est)}")
    print(f"aggregate ratio estimate/cl100k: {sum(est) / sum(exact):.3f}")
    q = statistics.quantiles(ratios, n=20)
    print(f"per-turn ratio: median {statistics.median(ratios):.3f}, p5 {q[0]:.3f}, p95 {q[-1]:.3f}")
    print(f"min {min(ratios):.3f}  max {max(ratios):.3f}")


if __name__ == "__main__":
    main()
