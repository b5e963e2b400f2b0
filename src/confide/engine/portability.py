"""The engine's portability jobs: a user's memories exported as JSON and imported again."""

from __future__ import annotations

import uuid
from typing import Any

from confide.engine.core import EngineCore, _Write, default_thread
from confide.errors import ValidationError
from confide.types import (
    HistoryEventType,
    ImportReport,
    Memory,
    MemoryState,
    Progress,
    utcnow,
    validated,
)

EXPORT_FORMAT = "confide.export/1"
# Ids of copies are derived from the target owner and the source id (uuid5 in this
# namespace), so importing the same document into the same owner twice skips the second time.
_COPY_NAMESPACE = uuid.UUID("2c4916c3-a82d-4282-b519-a019e0afe7ab")
# Versions decrypted between two progress reports of an export.
_STEP = 200


class EnginePortability(EngineCore):
    """Export and import of one user's memories (see :class:`MemoryEngine`)."""

    def export_user(
        self, *, account_id: str, user_id: str, progress: Progress | None = None
    ) -> dict[str, Any]:
        """Everything one user owns, decrypted, as a JSON-ready document.

        ``memories`` holds every version that is not purged, oldest first; ``audit`` every
        audit event of the user's memories, oldest first, as :meth:`history` shows them
        (ids, actors, events and their meta with the key in clear; never a value). A purged
        memory's events stay in ``audit`` with its key blinded. ``progress`` is told the
        versions decrypted so far, of how many.
        """
        owned = list(self.storage.iter_owner(account_id, user_id))
        rows = [r for r in owned if r.state != MemoryState.PURGED.value]
        memories: list[dict[str, Any]] = []
        for start in range(0, len(rows), _STEP):
            if progress is not None:
                progress(start, len(rows))
            opened = self.open_rows(rows[start : start + _STEP])
            memories.extend(m.model_dump(mode="json") for m in opened)
        if progress is not None:
            progress(len(rows), len(rows))
        audit = self._history_events(
            self.storage.owner_history(account_id, user_id), self._clear_keys(rows)
        )
        return {
            "format": EXPORT_FORMAT,
            "account_id": account_id,
            "user_id": user_id,
            "exported_at": utcnow().isoformat(),
            "memories": memories,
            "audit": [event.model_dump(mode="json") for event in audit],
        }

    def import_user(
        self,
        document: dict[str, Any],
        *,
        account_id: str | None = None,
        user_id: str | None = None,
        actor: str | None = "import",
        progress: Progress | None = None,
    ) -> ImportReport:
        """Import an :meth:`export_user` document, optionally into another owner.

        Into the same owner, versions keep their ids, order and states, and ids that already
        exist are skipped; a copy into another owner gets new ids derived from the owner and
        the original ids, so importing it there again skips what the first import wrote.

        The document's ``audit`` events (exports made before they were added have none) are
        accepted and not replayed: each imported version is audited here as an ``ADD`` with
        meta ``import``, by ``actor``. An audit trail is evidence of what this store did; a
        document anyone can edit must not be able to write events, actors or times into it.
        The exported events stay in the document as the source store's record.

        The new versions are written in one transaction (the import lands whole or not at
        all); ``progress`` is told before and after it.
        """
        if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
            raise ValidationError(f"not an Confide export (expected format {EXPORT_FORMAT})")
        items = document.get("memories")
        if not isinstance(items, list):
            raise ValidationError("export document has no 'memories' list")
        if not isinstance(document.get("audit", []), list):
            raise ValidationError("export document's 'audit' must be a list of events")
        target_account = account_id or str(document.get("account_id"))
        target_user = user_id or str(document.get("user_id"))
        same_owner = (target_account, target_user) == (
            document.get("account_id"),
            document.get("user_id"),
        )
        memories = [
            validated(Memory, {**m, "account_id": target_account, "user_id": target_user})
            for m in items
            if isinstance(m, dict)
        ]
        if not same_owner:
            # A copy to another owner gets new ids; the AAD binds values to the new ids.
            owner = f"{target_account}/{target_user}/"
            fresh_ids = {m.id: str(uuid.uuid5(_COPY_NAMESPACE, owner + m.id)) for m in memories}
            memories = [
                m.model_copy(
                    update={
                        "id": fresh_ids[m.id],
                        "lineage_id": fresh_ids.get(m.lineage_id, m.lineage_id),
                        "supersedes_id": fresh_ids.get(m.supersedes_id or "", m.supersedes_id),
                    }
                )
                for m in memories
            ]
        existing = {
            r.id for r in self.storage.get_memories(target_account, [m.id for m in memories])
        }
        fresh = [m for m in memories if m.id not in existing]
        writes = [
            _Write(
                m,
                HistoryEventType.ADD,
                None,
                default_thread(m.account_id, m.user_id),
                actor,
                {"key": m.key, "import": True},
            )
            for m in fresh
        ]
        # One transaction: an import lands whole or not at all.
        if progress is not None:
            progress(0, len(writes))
        self._commit_versions(writes, log_changes=False)
        if progress is not None:
            progress(len(writes), len(writes))
        return ImportReport(imported=len(fresh), skipped=len(memories) - len(fresh))
