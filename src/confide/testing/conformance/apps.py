"""The apps feature's tables: app settings, the usage ledger and its polls, deferred work."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from confide.storage.base import Capability
from confide.testing.builders import ACCOUNT
from confide.testing.conformance.confined import OTHER, ConfinedRoleHarness

if TYPE_CHECKING:
    from confide.storage.postgres import PostgresStorage
from confide.storage.apps import DeferredRow, SqlAppTables, UsageRow


class AppsConformance(ConfinedRoleHarness):
    """App settings, usage and deferred work work for their account, and only for it."""

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_app_tables_work_as_their_account(self, confined: PostgresStorage) -> None:
        apps = SqlAppTables(confined)
        for account in (ACCOUNT, OTHER):
            apps.put_app(account, "app-1", name=f"{account} app", memory_cap=5, ts=1.0)
            apps.record_usage(UsageRow(account, "chat", "app-1", 10, 5, 1, 2.0, 100.0))
            apps.defer(
                DeferredRow(f"work-{account}", account, "end", "app-1", 3.0, "k", b"c", b"w")
            )
        found = apps.get_app(ACCOUNT, "app-1")
        assert found is not None and found.name == f"{ACCOUNT} app"
        assert apps.mark_uninstalled(ACCOUNT, "app-1", 4.0).uninstalled_at == 4.0
        assert [(t.operation, t.calls) for t in apps.usage_totals(ACCOUNT, since=None)] == [
            ("chat", 1)
        ]
        assert apps.spent_units(ACCOUNT, 0.0) == 2.0
        assert apps.swap_poll(ACCOUNT, "poller", 5.0) is None
        assert apps.swap_poll(ACCOUNT, "poller", 6.0) == 5.0
        assert [d.id for d in apps.deferred(ACCOUNT, 10)] == [f"work-{ACCOUNT}"]
        assert apps.drop_deferred(ACCOUNT, f"work-{ACCOUNT}")
        assert not apps.drop_deferred(ACCOUNT, f"work-{OTHER}")
        assert apps.deferred(ACCOUNT, 10) == []
        with confined.transaction() as tx:
            apps.lock_app_scope(tx, ACCOUNT, "app-1")
            assert apps.count_app_memories(tx, ACCOUNT, "app-1") == 0
        other = apps.get_app(OTHER, "app-1")
        assert other is not None and other.uninstalled_at is None
