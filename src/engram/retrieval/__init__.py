"""Retrieval: embedders, lexical terms and BM25, ranking, token budgets, categories.

Importing this package never imports onnxruntime or tokenizers; the local embedder loads them
on first use.
"""

from engram.embedders import Embedder, build_embedder, embedder_signature
from engram.index.tokenize import terms
from engram.retrieval.bm25 import BM25Params, bm25_score
from engram.retrieval.budget import count_tokens, trim_to_budget
from engram.retrieval.categories import CategoriesConfig, load_categories
from engram.retrieval.query import CandidateSource, QueryPlan, retrieve
from engram.retrieval.ranking import Candidate, Edge, EdgeKind, RankingWeights, rank

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
