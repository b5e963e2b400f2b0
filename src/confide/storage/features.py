"""The features whose tables Confide keeps beside the memory store, in migration order.

A backend migrates the memory store first, then these, each recorded by its own name and
versions (see :mod:`confide.storage.schema`). The order matters only where a feature's step
reads another's tables: the derived-row provenance indexes the apps' deferred work and the
job queue, so it comes after both.
"""

from __future__ import annotations

from confide.storage.apps import APPS_FEATURE
from confide.storage.chat import CHAT_FEATURE
from confide.storage.checkpoints import CHECKPOINTS_FEATURE
from confide.storage.consolidation import CONSOLIDATION_FEATURE
from confide.storage.derived import DERIVED_FEATURE
from confide.storage.jobs import JOBS_FEATURE
from confide.storage.schema import Feature
from confide.storage.scrubs import SCRUBS_FEATURE
from confide.storage.service.sessions import SERVICE_FEATURE

__all__ = ["FEATURES"]

FEATURES: tuple[Feature, ...] = (
    SERVICE_FEATURE,
    CHAT_FEATURE,
    APPS_FEATURE,
    CHECKPOINTS_FEATURE,
    JOBS_FEATURE,
    CONSOLIDATION_FEATURE,
    SCRUBS_FEATURE,
    DERIVED_FEATURE,
)
"""Every feature Confide ships, in the order a store migrates them."""
