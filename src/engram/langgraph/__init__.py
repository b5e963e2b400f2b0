"""Engram for LangGraph: a checkpointer and a long-term store (the ``langgraph`` extra).

:class:`EngramCheckpointSaver` keeps graph state sealed per thread owner with a retention
policy; :class:`EngramStore` is a ``BaseStore`` over Engram's memories.
"""

from __future__ import annotations

from engram.langgraph.checkpoint import EngramCheckpointSaver
from engram.langgraph.store import EngramStore

__all__ = ["EngramCheckpointSaver", "EngramStore"]
