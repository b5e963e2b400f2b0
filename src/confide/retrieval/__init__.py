"""Retrieval: embedders, lexical terms and BM25, ranking, token budgets, categories.

Importing this package never imports onnxruntime or tokenizers; the local embedder loads them
on first use.
"""

from confide.embedders import Embedder, build_embedder, embedder_signature
from confide.index.tokenize import terms
from confide.retrieval.bm25 import BM25Params, bm25_score
from confide.retrieval.budget import count_tokens, trim_to_budget
from confide.retrieval.categories import CategoriesConfig, load_categories
from confide.retrieval.query import CandidateSource, QueryPlan, retrieve
from confide.retrieval.ranking import Candidate, Edge, EdgeKind, RankingWeights, rank

__all__ = [
    "BM25Params",
    "Candidate",
    "CandidateSource",
    "CategoriesConfig",
    "Edge",
    "EdgeKind",
    "Embedder",
    "QueryPlan",
    "RankingWeights",
    "bm25_score",
    "build_embedder",
    "count_tokens",
    "embedder_signature",
    "load_categories",
    "rank",
    "retrieve",
    "terms",
    "trim_to_budget",
]
