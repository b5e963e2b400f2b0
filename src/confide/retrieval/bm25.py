"""Okapi BM25 scoring as pure functions over term statistics.

Storage keeps postings (term → document → frequency), document lengths and document
frequencies; these functions only do the arithmetic, so every backend ranks the same way.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BM25Params", "bm25_idf", "bm25_score", "bm25_term_weight", "query_term_counts"]


class BM25Params(BaseModel):
    """BM25's saturation ``k1`` and length normalisation ``b``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    k1: float = Field(default=1.2, ge=0.0)
    b: float = Field(default=0.75, ge=0.0, le=1.0)


def bm25_idf(doc_freq: int, n_docs: int) -> float:
    """Inverse document frequency (the non-negative Lucene variant)."""
    return math.log(1.0 + (n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def bm25_term_weight(
    tf: int, doc_len: int, avg_doc_len: float, idf: float, params: BM25Params
) -> float:
    """The contribution of one term occurring ``tf`` times in a document."""
    if tf <= 0:
        return 0.0
    norm = 1.0 - params.b + params.b * (doc_len / avg_doc_len if avg_doc_len > 0 else 1.0)
    return idf * tf * (params.k1 + 1.0) / (tf + params.k1 * norm)


def query_term_counts(query_terms: Iterable[str]) -> Counter[str]:
    """Count query terms (a term repeated in the query weighs more)."""
    return Counter(query_terms)


def bm25_score(
    query_terms: Mapping[str, int],
    term_freqs: Mapping[str, int],
    *,
    doc_len: int,
    doc_freqs: Mapping[str, int],
    n_docs: int,
    avg_doc_len: float,
    params: BM25Params | None = None,
) -> float:
    """BM25 score of one document for a query.

    ``query_terms`` maps each query term to its count in the query, ``term_freqs`` the
    document's term counts, ``doc_freqs`` the number of documents holding each term.
    Terms missing from ``doc_freqs`` count as unseen (document frequency 0).
    """
    p = params or BM25Params()
    total = 0.0
    for term, q_count in query_terms.items():
        tf = term_freqs.get(term, 0)
        if tf:
            idf = bm25_idf(doc_freqs.get(term, 0), n_docs)
            total += q_count * bm25_term_weight(tf, doc_len, avg_doc_len, idf, p)
    return total
