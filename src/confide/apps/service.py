"""``AppMemories``: a small curated memory per app, as the SDK and the service use it.

An app scope ``(account_id, app_id)`` keeps at most its cap of short memories (the
``app_memory_cap`` setting, overridable per app). Ending a conversation writes one memory
(an LLM call, or the offline paragraph without an LLM) and compacts the scope back to its
cap (:mod:`confide.apps.compaction`). The messages are read once and not stored, except
sealed while the account's LLM budget defers the work.

The memories are ordinary encrypted memories (versions, history, erasure) stored under the
owner ``app:<app_id>`` with ``app_id`` set, so every read filters the scope in the database.
An end that names its user records, beside the memory, a keyed pseudonym of that user (see
:mod:`confide.storage.derived`): erasing the user deletes the app memories written from
their words, and every memory they were merged into.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from confide.apps.compaction import CompactionOutcome, Compactor
from confide.apps.context import render_context
from confide.apps.scope import APP_CATEGORY, AppMessage, AppScope
from confide.apps.writer import LLMMemoryWriter, MemoryWriter, offline_paragraph
from confide.config import Settings
from confide.crypto.envelope import SealedValue
from confide.engine import MemoryEngine
from confide.errors import ConflictError, NotFoundError, ProviderError, ValidationError
from confide.llm.base import LLM
from confide.llm.usage import UsageLedger, metered
from confide.storage.apps import DeferredRow, SqlAppTables
from confide.storage.base import Transaction
from confide.storage.derived import add_memory_sources
from confide.types import ErasureReceipt, Memory, MemoryState, MemoryType, NewMemory, Source

__all__ = ["AppMemories", "AppMonitor", "AppSettings", "EndOutcome"]

log = logging.getLogger(__name__)

_MAX_MESSAGES = 1000
_MAX_NAME = 100
_MESSAGES = TypeAdapter(list[AppMessage])
_END_OPERATION = "app_memory"


class AppMonitor(Protocol):
    """Told of each app's activity by app id alone (never an account, a user or a text):
    what the service's per-app metrics count."""

    def app_memory_created(self, app_id: str) -> None:
        """A conversation's memory was written for the app."""

    def app_cap_used(self, app_id: str, *, held: int, cap: int) -> None:
        """After a write and its compaction, the app's scope holds ``held`` of ``cap``."""

    def app_context_served(self, app_id: str, *, memories: int) -> None:
        """The app's context was read, carrying ``memories`` memories (``0``: empty)."""


@dataclass(frozen=True, slots=True)
class AppSettings:
    """An app's display name (its id unless set) and cap."""

    app_id: str
    name: str
    memory_cap: int
    uninstalled: bool = False


@dataclass(frozen=True, slots=True)
class EndOutcome:
    """What ending a conversation did: the memory written (``None`` when deferred), who
    wrote it (``llm`` or ``offline``) and the compaction that followed."""

    memory: Memory | None
    written_by: str | None
    compaction: CompactionOutcome | None
    deferred: bool = False


def parse_messages(messages: Sequence[AppMessage | dict[str, Any]]) -> list[AppMessage]:
    """Validated messages; :class:`ValidationError` for an empty, oversized or bad list."""
    if not messages:
        raise ValidationError("messages must not be empty")
    if len(messages) > _MAX_MESSAGES:
        raise ValidationError(f"at most {_MAX_MESSAGES} messages")
    try:
        return _MESSAGES.validate_python(
            [m.model_dump() if isinstance(m, AppMessage) else m for m in messages]
        )
    except PydanticValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
            for err in exc.errors(include_input=False, include_url=False)
        )
        raise ValidationError(f"invalid messages: {problems}") from None


class AppMemories:
    """The app memories of one engine.

    Args:
        engine: the memory engine.
        settings: the cap, the LLM timeout (``engine.settings`` by default).
        llm: the model that writes and compacts (``None``: offline paragraph and FIFO).
        ledger: the LLM usage ledger (the budget defers work while below 20% left).
        writer: replaces the LLM writer.
        on_compaction: told of every compaction's outcome (metrics).
        on_defer: told the account whose work was just deferred (a service queues the job
            that resumes it once the budget allows).
        monitor: told of each memory written, the cap it leaves used and each context read
            (the service's per-app metrics).
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        settings: Settings | None = None,
        llm: LLM | None = None,
        ledger: UsageLedger | None = None,
        writer: MemoryWriter | None = None,
        on_compaction: Callable[[CompactionOutcome], None] | None = None,
        on_defer: Callable[[str], object] | None = None,
        monitor: AppMonitor | None = None,
    ) -> None:
        self.engine = engine
        self.settings = settings or engine.settings
        self.llm = llm
        self.ledger = ledger
        timeout = self.settings.app_llm_timeout
        self.writer = writer or (LLMMemoryWriter(llm, timeout=timeout) if llm else None)
        self.compactor = Compactor(engine, llm, timeout=timeout)
        self.tables = SqlAppTables(engine.storage)
        self.on_compaction = on_compaction
        self.on_defer = on_defer
        self.monitor = monitor

    # ---- settings ----------------------------------------------------------------------------
    def settings_of(self, account_id: str, app_id: str) -> AppSettings:
        """The app's name and cap (the defaults when it was never configured)."""
        scope = AppScope(account_id, app_id)
        row = self.tables.get_app(scope.account_id, scope.app_id)
        return AppSettings(
            app_id=app_id,
            name=(row.name if row and row.name else app_id),
            memory_cap=(row.memory_cap if row and row.memory_cap else self.settings.app_memory_cap),
            uninstalled=bool(row and row.uninstalled_at is not None),
        )

    def configure(
        self,
        account_id: str,
        app_id: str,
        *,
        name: str | None = None,
        memory_cap: int | None = None,
    ) -> AppSettings:
        """Set the app's display name and cap override (``None``: the default); installs it
        again if it was uninstalled. A lower cap applies from the next memory on.

        Raises:
            ValidationError: a bad app id, a cap outside 1..100 or a name over 100 characters.
        """
        scope = AppScope(account_id, app_id)
        if memory_cap is not None and not 1 <= memory_cap <= 100:
            raise ValidationError("memory cap must be 1..100")
        if name is not None and not 1 <= len(name.strip()) <= _MAX_NAME:
            raise ValidationError(f"app name must be 1-{_MAX_NAME} characters")
        self.tables.put_app(
            scope.account_id,
            scope.app_id,
            name=None if name is None else " ".join(name.split()),
            memory_cap=memory_cap,
            ts=time.time(),
        )
        return self.settings_of(account_id, app_id)

    # ---- ending a conversation ---------------------------------------------------------------
    async def end_conversation(
        self,
        *,
        account_id: str,
        app_id: str,
        conversation_id: str,
        messages: Sequence[AppMessage | dict[str, Any]],
        reason: str | None = None,
        user_id: str | None = None,
    ) -> EndOutcome:
        """Write the conversation's memory and bring the scope back to its cap.

        Deferred (the messages kept sealed until the budget refills) while the account has
        less than 20% of its daily LLM budget left. ``user_id``: the user the conversation
        was with; the memory records them (as a keyed pseudonym), so that erasing them
        deletes it.

        Raises:
            ValidationError: a bad app id or messages, an empty user id.
        """
        scope = AppScope(account_id, app_id)
        parsed = parse_messages(messages)
        if user_id is not None and not user_id.strip():
            raise ValidationError("user id must not be empty")
        source = None
        if user_id is not None:
            source = await asyncio.to_thread(self.engine.pseudonym, scope.account_id, user_id)
        if await asyncio.to_thread(self._must_defer, account_id):
            await asyncio.to_thread(self._defer, scope, conversation_id, parsed, reason, source)
            if self.on_defer is not None:
                await asyncio.to_thread(self.on_defer, scope.account_id)
            return EndOutcome(None, None, None, deferred=True)
        return await self._end(scope, conversation_id, parsed, reason, source)

    def _must_defer(self, account_id: str) -> bool:
        """Whether the account's budget is too low for this work now (reads the ledger: call
        it off the event loop)."""
        if self.llm is None or self.ledger is None:
            return False
        return self.ledger.must_defer(account_id)

    async def _end(
        self,
        scope: AppScope,
        conversation_id: str,
        messages: Sequence[AppMessage],
        reason: str | None,
        source: str | None,
    ) -> EndOutcome:
        written_by = "offline"
        paragraph = None
        with metered(scope.account_id, _END_OPERATION, scope.label):
            if self.writer is not None:
                try:
                    paragraph = await self.writer.write(messages)
                    written_by = "llm"
                except ProviderError as exc:
                    log.warning("app memory writer failed, offline paragraph: %s", exc)
            if paragraph is None:
                paragraph = offline_paragraph(messages)
            new = NewMemory(
                account_id=scope.account_id,
                user_id=scope.owner,
                app_id=scope.app_id,
                key="app_memory",
                value=paragraph,
                type=MemoryType.EPISODIC,
                category=APP_CATEGORY,
                source=Source.CONVERSATION,
                metadata={
                    "conversation_id": conversation_id,
                    "written_by": written_by,
                    **({"end_reason": reason} if reason else {}),
                },
            )
            memory = await asyncio.to_thread(self._write, new, source)
            if self.monitor is not None:
                self.monitor.app_memory_created(scope.app_id)
            app = await asyncio.to_thread(self.settings_of, scope.account_id, scope.app_id)
        self.engine.emit_op(
            "episodic",
            "create",
            account_id=scope.account_id,
            user_id=scope.owner,
            memory_id=memory.id,
            category=memory.category,
            status=written_by,
        )
        with metered(scope.account_id, "app_compaction", scope.label):
            outcome = await self.compactor.compact(scope, memory, app.memory_cap)
        for action, decided_by, _ in outcome.changes:
            # An edit folds the new memory into an older one: the scope's merge.
            self.engine.emit_op(
                "episodic",
                "merge" if action == "edit" else action,
                account_id=scope.account_id,
                user_id=scope.owner,
                category=APP_CATEGORY,
                status=decided_by,
            )
        if self.on_compaction is not None:
            self.on_compaction(outcome)
        if self.monitor is not None:
            self.monitor.app_cap_used(scope.app_id, held=outcome.count, cap=app.memory_cap)
        return EndOutcome(memory, written_by, outcome)

    def _write(self, new: NewMemory, source: str | None) -> Memory:
        """Store the app memory and, in its transaction, the user it was written from."""
        if source is None:
            return self.engine.store(new, actor="app-memory")

        def record(tx: Transaction, written: Sequence[Memory]) -> None:
            for memory in written:
                add_memory_sources(
                    tx, memory.account_id, memory.user_id, memory.lineage_id, [source]
                )

        return self.engine.commit_batch(new=[new], within=record, actor="app-memory")[0]

    def _defer(
        self,
        scope: AppScope,
        conversation_id: str,
        messages: Sequence[AppMessage],
        reason: str | None,
        source: str | None,
    ) -> None:
        work_id = str(uuid.uuid4())
        payload = json.dumps(
            {
                "app_id": scope.app_id,
                "conversation_id": conversation_id,
                "reason": reason,
                "messages": [m.model_dump() for m in messages],
            }
        ).encode()
        key_id, sealed = self.engine.seal_value(
            payload, account_id=scope.account_id, user_id=scope.owner, record_id=work_id
        )
        self.tables.defer(
            DeferredRow(
                id=work_id,
                account_id=scope.account_id,
                operation=_END_OPERATION,
                scope=scope.app_id,
                created_at=time.time(),
                key_id=key_id,
                ciphertext=sealed.ciphertext,
                wrapped_key=sealed.wrapped_key,
                source=source,
            )
        )

    def deferred_count(self, account_id: str | None = None) -> int:
        """How many ended conversations wait for the budget (of one account, or all)."""
        return len(self.tables.deferred(account_id, 100_000))

    async def resume_deferred(self, account_id: str | None = None, *, limit: int = 100) -> int:
        """Do deferred work, oldest first, while the budget allows; how many were done."""
        done = 0
        for row in await asyncio.to_thread(self.tables.deferred, account_id, limit):
            if await asyncio.to_thread(self._must_defer, row.account_id):
                continue
            scope = AppScope(row.account_id, row.scope)
            raw = await asyncio.to_thread(
                self.engine.open_value,
                SealedValue(row.ciphertext, row.wrapped_key),
                account_id=row.account_id,
                user_id=scope.owner,
                record_id=row.id,
                key_id=row.key_id,
            )
            if not await asyncio.to_thread(self.tables.drop_deferred, row.account_id, row.id):
                continue  # another worker took it
            work = json.loads(raw)
            try:
                await self._end(
                    scope,
                    str(work["conversation_id"]),
                    parse_messages(work["messages"]),
                    work.get("reason"),
                    row.source,
                )
            except Exception:
                # Deferred, never dropped: the work goes back for the next round.
                await asyncio.to_thread(self.tables.defer, row)
                raise
            done += 1
        return done

    # ---- reads and admin ---------------------------------------------------------------------
    def memories(self, account_id: str, app_id: str) -> list[Memory]:
        """The app's memories, newest first."""
        scope = AppScope(account_id, app_id)
        return list(reversed(self.compactor.scope_memories(scope)))

    def context(self, account_id: str, app_id: str) -> str:
        """The system message's text (see :func:`confide.apps.context.render_context`).

        At most the app's cap of memories, the newest ones, even while a compaction is under
        way; ``""`` when the app has none.
        """
        app = self.settings_of(account_id, app_id)
        shown = self.memories(account_id, app_id)[: app.memory_cap]
        if self.monitor is not None:
            self.monitor.app_context_served(app_id, memories=len(shown))
        return render_context(app.name, shown)

    def delete_all(self, account_id: str, app_id: str) -> int:
        """Forget every memory of the app in one transaction; how many."""
        scope = AppScope(account_id, app_id)
        for _ in range(5):
            memories = self.compactor.scope_memories(scope)
            if not memories:
                return 0
            try:
                self.engine.commit_batch(
                    forget=memories, meta={"admin": "delete_all"}, actor="app-admin"
                )
            except ConflictError:
                continue
            return len(memories)
        raise ConflictError("the app's memories changed concurrently; retry")

    def delete(self, account_id: str, app_id: str, memory_id: str) -> None:
        """Forget one memory of the app.

        Raises:
            NotFoundError: no active memory with this id in the app's scope.
        """
        scope = AppScope(account_id, app_id)
        try:
            memory = self.engine.get(memory_id, account_id=account_id)
        except NotFoundError:
            raise NotFoundError(f"memory {memory_id} not found in app {app_id}") from None
        if memory.app_id != scope.app_id or memory.state != MemoryState.ACTIVE:
            raise NotFoundError(f"memory {memory_id} not found in app {app_id}")
        self.engine.commit_batch(forget=[memory], meta={"admin": "delete"}, actor="app-admin")

    def uninstall(self, account_id: str, app_id: str, *, purge: bool = False) -> int:
        """Mark the app uninstalled; with ``purge`` crypto-shred its memories (their rows
        deleted and the scope's keys destroyed). Returns how many memory rows were deleted."""
        receipt = self.uninstall_with_receipt(account_id, app_id, purge=purge)
        return 0 if receipt is None else int(receipt.deleted.get("memories", 0))

    def uninstall_with_receipt(
        self, account_id: str, app_id: str, *, purge: bool = False
    ) -> ErasureReceipt | None:
        """:meth:`uninstall`, answering the erasure's receipt when ``purge`` shreds the
        memories (``None`` without ``purge``: they are kept, and found again when the app is
        configured again).

        Raises:
            ValidationError: a bad app id.
        """
        scope = AppScope(account_id, app_id)
        self.tables.mark_uninstalled(scope.account_id, scope.app_id, time.time())
        if not purge:
            return None
        return self.engine.erase_user(account_id=scope.account_id, user_id=scope.owner)
