"""Saving, listing and purging a conversation's messages, sealed under the owner's key.

Messages are kept for good by default, beside the summaries made of them, so a chat's
history stays readable to its user; purging summarised ones is the operator's choice
(``CONFIDE_MESSAGE_RETENTION_DAYS``).

A message's content is sealed with the engine's ``seal_value`` (the user's key, bound to
owner and message id), so storage holds only its place and role in clear. A conversation
belongs to the user who wrote its first message: another user of the account gets
:class:`NotFoundError`, as for an id that does not exist. Nothing here logs content.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from confide.chat.types import ChatMessage, MessagePage, NewMessage, SavedMessage
from confide.crypto.envelope import SealedValue
from confide.engine import MemoryEngine
from confide.errors import ConflictError, NotFoundError, StaleKeyError, ValidationError
from confide.storage.chat import MessageRow, SqlMessageTables
from confide.types import validated

__all__ = ["MessageStore"]

log = logging.getLogger(__name__)
MAX_PAGE = 200


class MessageStore:
    """A conversation's messages over one engine (its key ring and message tables)."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine
        self.tables = SqlMessageTables(engine.storage)

    def add(
        self, message: NewMessage | dict[str, Any], *, now: float | None = None
    ) -> SavedMessage:
        """Seal and save a message at the conversation's next index.

        Raises :class:`ValidationError` for a bad field and :class:`NotFoundError` when the
        conversation is another user's.
        """
        new = validated(NewMessage, message)
        message_id = str(uuid.uuid4())
        payload = json.dumps({"c": new.content}).encode()
        try:
            return self._insert(new, message_id, payload, now)
        except StaleKeyError:
            # Another process erased the user since this one cached their key: seal again
            # under the user's new key (never write under a destroyed one).
            self.engine.forget_user_key(new.account_id, new.user_id)
            try:
                return self._insert(new, message_id, payload, now)
            except StaleKeyError:
                raise ConflictError("the user was erased concurrently; retry") from None

    def _insert(
        self, new: NewMessage, message_id: str, payload: bytes, now: float | None
    ) -> SavedMessage:
        key_id, generation, sealed = self.engine.seal_for_write(
            payload, account_id=new.account_id, user_id=new.user_id, record_id=message_id
        )
        row = MessageRow(
            id=message_id,
            account_id=new.account_id,
            user_id=new.user_id,
            conversation_id=new.conversation_id,
            index=-1,
            role=new.role,
            channel=new.channel,
            subject_id=new.subject_id,
            created_at=time.time() if now is None else now,
            summarised_at=None,
            key_id=key_id,
            ciphertext=sealed.ciphertext,
            wrapped_key=sealed.wrapped_key,
        )
        index = self.tables.next_index_and_insert(row, key_generation=generation)
        return SavedMessage(id=message_id, index=index)

    def check_owner(self, *, account_id: str, user_id: str, conversation_id: str) -> bool:
        """Whether the conversation holds messages; :class:`NotFoundError` if another user's."""
        owner = self.tables.owner(account_id, conversation_id)
        if owner is not None and owner != user_id:
            raise NotFoundError("conversation not found")
        return owner is not None

    def page(
        self,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        cursor: int | None = None,
        limit: int = 50,
    ) -> MessagePage:
        """Messages after index ``cursor``, oldest first (an unknown conversation is empty).

        ``next_cursor`` is the index to pass on for the next page, ``None`` at the end.
        """
        if not 1 <= limit <= MAX_PAGE:
            raise ValidationError(f"limit must be 1..{MAX_PAGE}")
        if cursor is not None and cursor < -1:
            raise ValidationError("cursor must be a message index")
        self.check_owner(account_id=account_id, user_id=user_id, conversation_id=conversation_id)
        rows = self.tables.messages(
            account_id, conversation_id, after=-1 if cursor is None else cursor, limit=limit + 1
        )
        more = len(rows) > limit
        rows = rows[:limit]
        return MessagePage(
            messages=self.open(rows), next_cursor=rows[-1].index if more and rows else None
        )

    def recent(
        self,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        limit: int,
        channel: str | None = None,
    ) -> list[ChatMessage]:
        """The newest ``limit`` messages, oldest first: of every channel, or given a
        ``channel`` that channel's and those saved without one."""
        self.check_owner(account_id=account_id, user_id=user_id, conversation_id=conversation_id)
        rows = self.tables.recent(account_id, conversation_id, limit=limit, channel=channel)
        return self.open(rows)

    def open(self, rows: Sequence[MessageRow]) -> list[ChatMessage]:
        """Open sealed rows; a row that fails authentication is left out (its id logged)."""
        out = []
        for row in rows:
            content = self.content(row)
            if content is None:
                continue
            out.append(
                ChatMessage(
                    id=row.id,
                    index=row.index,
                    role="assistant" if row.role == "assistant" else "user",
                    content=content,
                    timestamp=datetime.fromtimestamp(row.created_at, UTC),
                    subject_id=row.subject_id,
                    channel=row.channel,
                )
            )
        return out

    def content(self, row: MessageRow) -> str | None:
        """A row's content, or ``None`` when it does not open."""
        try:
            raw = self.engine.open_value(
                SealedValue(row.ciphertext, row.wrapped_key),
                account_id=row.account_id,
                user_id=row.user_id,
                record_id=row.id,
                key_id=row.key_id,
            )
            return str(json.loads(raw)["c"])
        except Exception:  # an integrity failure or an erased key: never the content
            log.warning("message %s failed to open; left out", row.id)
            return None

    def purge(
        self, *, retention_days: float | None, now: float | None = None, batch: int = 500
    ) -> int:
        """Delete messages summarised more than ``retention_days`` ago; how many.

        ``None`` (no retention configured) keeps every message and deletes nothing.
        """
        if retention_days is None:
            return 0
        before = (time.time() if now is None else now) - retention_days * 86400
        total = 0
        while True:
            deleted = self.tables.purge_summarised(before, batch)
            total += deleted
            if deleted < batch:
                break
        if total:
            self.engine.storage.scrub()  # the deleted rows' bytes, too
            log.info("purged %d summarised messages", total)
        return total
