"""Confide for LangGraph: a checkpointer and a long-term store (the ``langgraph`` extra).

:class:`ConfideCheckpointSaver` keeps graph state sealed per thread owner with a retention
policy; :class:`ConfideStore` is a ``BaseStore`` over Confide's memories.
"""

from __future__ import annotations

from confide.langgraph.checkpoint import ConfideCheckpointSaver
from confide.langgraph.store import ConfideStore

__all__ = ["ConfideCheckpointSaver", "ConfideStore"]
