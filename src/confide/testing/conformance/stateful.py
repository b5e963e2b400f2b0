"""Random operation sequences against each backend, checked against a simple model."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from confide.engine import MemoryEngine
from confide.errors import ConflictError
from confide.testing.conformance.harness import StorageHarness
from confide.types import MemoryFilter, MemoryState

USERS = ("u1", "u2")
VALUES = st.text(alphabet="abcdefgh ", min_size=1, max_size=12).filter(lambda s: s.strip())


def run_machine(engine: MemoryEngine) -> None:
    """Drive random stores, updates, forgets and restores through ``engine``; check each step."""

    class Memories(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.account = f"acct-{uuid.uuid4().hex}"
            # lineage id -> (user, value, state, version)
            self.model: dict[str, tuple[str, str, str, int]] = {}

        @rule(user=st.sampled_from(USERS), value=VALUES)
        def store(self, user: str, value: str) -> None:
            m = engine.store(
                {"account_id": self.account, "user_id": user, "key": "k", "value": value}
            )
            self.model[m.lineage_id] = (user, value, "active", 1)

        def pick(self, index: int) -> str:
            # Ids are random per run, so draw a position, not an id (replays stay stable).
            lineages = list(self.model)
            return lineages[index % len(lineages)]

        @precondition(lambda self: self.model)
        @rule(index=st.integers(min_value=0, max_value=1000), value=VALUES)
        def update(self, index: int, value: str) -> None:
            lineage = self.pick(index)
            user, _, state, version = self.model[lineage]
            if state != "active":
                with pytest.raises(ConflictError):
                    engine.update(lineage, {"value": value}, account_id=self.account)
                return
            m = engine.update(lineage, {"value": value}, account_id=self.account)
            assert m.version == version + 1
            self.model[lineage] = (user, value, "active", version + 1)

        @precondition(lambda self: self.model)
        @rule(index=st.integers(min_value=0, max_value=1000))
        def forget_or_restore(self, index: int) -> None:
            lineage = self.pick(index)
            user, value, state, version = self.model[lineage]
            if state == "active":
                engine.forget(lineage, account_id=self.account)
                self.model[lineage] = (user, value, "soft_deleted", version)
            else:
                engine.restore(lineage, account_id=self.account)
                self.model[lineage] = (user, value, "active", version)

        @invariant()
        def listing_matches_model(self) -> None:
            for user in USERS:
                listed = engine.list_memories(
                    MemoryFilter(account_id=self.account, user_id=user), limit=1000
                )
                expected = {
                    lin: (v, ver)
                    for lin, (u, v, s, ver) in self.model.items()
                    if u == user and s == "active"
                }
                assert {m.lineage_id: (m.value, m.version) for m in listed} == expected
                assert all(m.state is MemoryState.ACTIVE and m.user_id == user for m in listed)

    Memories.TestCase.settings = settings(
        max_examples=15,
        stateful_step_count=12,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    Memories.TestCase().runTest()


class StatefulConformance(StorageHarness):
    """Random operation sequences checked against a simple model."""

    def test_random_operation_sequences(self, engine: MemoryEngine) -> None:
        run_machine(engine)
