"""The ephemeral session buffer: what was said in a live conversation, in process memory only.

Nothing here is ever written to a database, a file or a log; ``repr`` of a turn or a session
shows counts, never what was said. Turns older than ``max_age`` and beyond ``max_turns`` are
pruned on every add, and :meth:`SessionBuffer.evict_idle` drops whole sessions that saw no
activity for ``max_age`` (a call that never ends must not stay in memory for ever; the
service runs it on a timer). All methods are thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from confide.conversation.analysis import Intent, Speaker, classify_intent, extract_entities
from confide.errors import ConflictError, NotFoundError, ValidationError
from confide.types import utcnow

__all__ = ["MAX_SUMMARY_CHARS", "Session", "SessionBuffer", "Turn"]

MAX_SUMMARY_CHARS = 500


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One utterance, reduced to at most 500 characters."""

    timestamp: datetime
    speaker: Speaker
    summary: str = field(repr=False)
    intent: Intent
    entities: tuple[str, ...] = field(default=(), repr=False)


@dataclass(frozen=True, kw_only=True)
class Session:
    """A snapshot of one session: who, since when, its turns and the keys stored so far.

    ``stored_keys`` are lower-cased keys the agent stored or updated during the session.
    """

    session_id: str
    account_id: str
    user_id: str
    start_time: datetime
    turns: tuple[Turn, ...] = field(default=(), repr=False)
    stored_keys: frozenset[str] = field(default=frozenset(), repr=False)

    def __repr__(self) -> str:
        return (
            f"Session(session_id={self.session_id!r}, account_id={self.account_id!r}, "
            f"user_id={self.user_id!r}, turns={len(self.turns)}, "
            f"stored_keys={len(self.stored_keys)})"
        )


@dataclass(kw_only=True)
class _Live:
    session_id: str
    account_id: str
    user_id: str
    start_time: datetime
    turns: list[Turn]
    stored_keys: set[str]
    last_active: datetime

    def snapshot(self) -> Session:
        return Session(
            session_id=self.session_id,
            account_id=self.account_id,
            user_id=self.user_id,
            start_time=self.start_time,
            turns=tuple(self.turns),
            stored_keys=frozenset(self.stored_keys),
        )


class SessionBuffer:
    """Live sessions keyed by session id.

    Args:
        max_turns: turns kept per session (oldest dropped first).
        max_age: turns older than this, by their timestamp, are dropped.
        clock: the time source (injectable for tests).
        on_turn: told ``(account_id, user_id, turn)`` after each turn is classified and
            kept (for operational events: the turn's intent, never its text).
    """

    def __init__(
        self,
        *,
        max_turns: int = 200,
        max_age: timedelta = timedelta(minutes=30),
        clock: Callable[[], datetime] = utcnow,
        on_turn: Callable[[str, str, Turn], None] | None = None,
    ) -> None:
        if max_turns < 1:
            raise ValidationError("max_turns must be at least 1")
        self._max_turns = max_turns
        self._max_age = max_age
        self._clock = clock
        self._on_turn = on_turn
        self._lock = threading.Lock()
        self._sessions: dict[str, _Live] = {}
        self._evicted = 0

    def start(
        self,
        session_id: str,
        *,
        account_id: str,
        user_id: str,
        start_time: datetime | None = None,
    ) -> Session:
        """Open a session, or return the open one with the same id and owner.

        Raises:
            ValidationError: an id is empty.
            ConflictError: the id is open for another account or user.
        """
        if not session_id or not account_id or not user_id:
            raise ValidationError("session_id, account_id and user_id must not be empty")
        with self._lock:
            live = self._sessions.get(session_id)
            if live is None:
                live = _Live(
                    session_id=session_id,
                    account_id=account_id,
                    user_id=user_id,
                    start_time=start_time or self._clock(),
                    turns=[],
                    stored_keys=set(),
                    last_active=self._clock(),
                )
                self._sessions[session_id] = live
            elif (live.account_id, live.user_id) != (account_id, user_id):
                raise ConflictError("session id is already open for another user")
            return live.snapshot()

    def add_turn(
        self, session_id: str, speaker: Speaker, text: str, *, timestamp: datetime | None = None
    ) -> Turn:
        """Record an utterance and prune old turns; return the stored turn.

        Raises:
            NotFoundError: no open session has this id.
            ValidationError: ``speaker`` is not ``user`` or ``assistant``.
        """
        if speaker not in ("user", "assistant"):
            raise ValidationError("speaker must be 'user' or 'assistant'")
        summary = " ".join(text.split())[:MAX_SUMMARY_CHARS]
        turn = Turn(
            timestamp=timestamp or self._clock(),
            speaker=speaker,
            summary=summary,
            intent=classify_intent(summary, speaker),
            entities=extract_entities(summary),
        )
        with self._lock:
            live = self._live(session_id)
            live.turns.append(turn)
            live.last_active = self._clock()
            self._prune(live)
            owner = (live.account_id, live.user_id)
        if self._on_turn is not None:
            self._on_turn(*owner, turn)
        return turn

    def record_stored_key(self, session_id: str, key: str) -> None:
        """Remember that ``key`` was stored or updated in this session (case-insensitive).

        Raises:
            NotFoundError: no open session has this id.
        """
        with self._lock:
            live = self._live(session_id)
            live.stored_keys.add(key.lower())
            live.last_active = self._clock()

    def get(self, session_id: str) -> Session | None:
        """A snapshot of the session, or ``None``."""
        with self._lock:
            live = self._sessions.get(session_id)
            return None if live is None else live.snapshot()

    def clear(self, session_id: str) -> Session | None:
        """Remove the session and return its final snapshot (``None`` if it was not open)."""
        with self._lock:
            live = self._sessions.pop(session_id, None)
            return None if live is None else live.snapshot()

    def evict_idle(self) -> int:
        """Drop the sessions with no activity (start, turn, stored key) for ``max_age``.

        Returns how many were dropped now; :attr:`evicted` counts them all.
        """
        cutoff = self._clock() - self._max_age
        with self._lock:
            idle = [i for i, live in self._sessions.items() if live.last_active < cutoff]
            for session_id in idle:
                del self._sessions[session_id]
            self._evicted += len(idle)
        return len(idle)

    @property
    def evicted(self) -> int:
        """How many idle sessions :meth:`evict_idle` has dropped since this buffer began."""
        with self._lock:
            return self._evicted

    def session_ids(self) -> tuple[str, ...]:
        """Ids of the open sessions."""
        with self._lock:
            return tuple(self._sessions)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def __repr__(self) -> str:
        return f"SessionBuffer(sessions={len(self)})"

    def _live(self, session_id: str) -> _Live:
        live = self._sessions.get(session_id)
        if live is None:
            raise NotFoundError("no open session with this id")
        return live

    def _prune(self, live: _Live) -> None:
        cutoff = self._clock() - self._max_age
        turns = [t for t in live.turns if t.timestamp >= cutoff]
        live.turns[:] = turns[-self._max_turns :]
