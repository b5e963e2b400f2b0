"""Confide for LangGraph: a checkpointer and a long-term store (the ``langgraph`` extra).

:class:`ConfideCheckpointSaver` keeps graph state sealed per thread owner with a retention
policy; :class:`ConfideStore` is a ``BaseStore`` over Confide's memories.
"""

from __future__ import annotations

from confide.errors import MissingDependencyError

try:
    from confide.langgraph.checkpoint import ConfideCheckpointSaver
    from confide.langgraph.store import ConfideStore
except ModuleNotFoundError as exc:  # the extra's packages, not a bug of ours
    if exc.name is None or exc.name.split(".")[0] not in ("langgraph", "langchain_core"):
        raise
    raise MissingDependencyError(exc.name.split(".")[0], "langgraph") from None

__all__ = ["ConfideCheckpointSaver", "ConfideStore"]
