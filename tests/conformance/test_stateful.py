"""Random operation sequences against each backend, checked against a simple model."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from engram.engine import MemoryEngine
from engram.errors import ConflictError
from engram.types import MemoryFilter, MemoryState

USERS = ("u1", "u2")
VALUES = st.text(alphabet="abcdefgh ", min_size=1, max_size=12).filter(lambda s: s.strip())


def run_machine(engine: MemoryEngine) -> None:
    class Memories(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.account = f"acct-{id(self)}"
            # lineage id -> (user, value, state, version)
            self.model: dict[str, tuple[str, str, str, int]] = {}

        @rule(user=st.sampled_from(USERS), value=VALUES)
        def store(self, user: str, value: str) -> None:
            m = engine.store(
                {"account_id": self.account, "user_id": user, "key": "k", "value": value}
            )
            self.model[m.lineage_id] = (user, value, "active", 1)

        @precondition(lambda self: self.model)
        @rule(data=st.data(), value=VALUES)
        def update(self, data: st.DataObject, value: str) -> None:
            lineage = data.draw(st.sampled_from(sorted(self.model)))
            user, _, state, version = self.model[lineage]
            if state != "active":
                with pytest.raises(ConflictError):
                    engine.update(lineage, {"value": value}, account_id=self.account)
                return
            m = engine.update(lineage, {"value": value}, account_id=self.account)
            assert m.version == version + 1
            self.model[lineage] = (user, value, "active", version + 1)

        @precondition(lambda self: self.model)
        @rule(data=st.data())
        def forget_or_restore(self, data: st.DataObject) -> None:
            lineage = data.draw(st.sampled_from(sorted(self.model)))
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


def test_random_operation_sequences(engine: MemoryEngine) -> None:
    run_machine(engine)
