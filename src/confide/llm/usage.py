"""The LLM usage ledger ("energy"): every call Confide makes, its tokens and cost units.

:class:`MeteredLLM` wraps a model once; each call is recorded with the operation and scope
set around it by :func:`metered` (a context variable, so concurrent tasks keep their own),
its prompt and completion tokens (as the provider reports them, else estimated at four
characters a token) and cost units from the price table (``CONFIDE_LLM_PRICES``). A call
made outside :func:`metered` is recorded under the account ``-`` and operation ``other``.

:class:`UsageLedger` also answers the budget question: the share of an account's daily
budget (``CONFIDE_LLM_BUDGET_UNITS``, per UTC day) still left.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from confide.config import LLMPrice
from confide.llm.base import LLM, Message
from confide.storage.apps import AppTables, UsageRow, UsageTotals

__all__ = ["DEFER_BELOW", "MeteredLLM", "UsageLedger", "UsageReport", "metered"]

log = logging.getLogger(__name__)

_DAY = 86_400.0
DEFER_BELOW = 0.2
"""Background memory work waits while less than this share of the daily budget is left."""
_CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class _Context:
    account_id: str
    operation: str
    scope: str | None


_CURRENT: contextvars.ContextVar[_Context | None] = contextvars.ContextVar(
    "confide_llm_usage", default=None
)


@contextlib.contextmanager
def metered(account_id: str, operation: str, scope: str | None = None) -> Iterator[None]:
    """Record the LLM calls made inside this block under ``account_id`` and ``operation``."""
    token = _CURRENT.set(_Context(account_id, operation, scope))
    try:
        yield
    finally:
        _CURRENT.reset(token)


@dataclass(frozen=True, slots=True)
class UsageReport:
    """Ledger totals per operation over ``[since, until)`` (``since`` ``None``: from the
    start)."""

    since: float | None
    until: float
    operations: tuple[UsageTotals, ...]

    @property
    def calls(self) -> int:
        """Calls over every operation."""
        return sum(o.calls for o in self.operations)

    @property
    def cost_units(self) -> float:
        """Cost units over every operation."""
        return sum(o.cost_units for o in self.operations)


class UsageLedger:
    """Records LLM calls and answers totals and budget questions.

    Args:
        tables: where the ledger lives.
        prices: the price table by operation (``"*"`` for the rest; default prices else).
        budget_units: cost units an account may spend per UTC day (``None``: unlimited).
        clock: wall-clock seconds (injectable for tests).
        on_record: told of every recorded call (operation, tokens, units), e.g. metrics.
    """

    def __init__(
        self,
        tables: AppTables,
        *,
        prices: Mapping[str, LLMPrice] | None = None,
        budget_units: float | None = None,
        clock: Callable[[], float] = time.time,
        on_record: Callable[[UsageRow], None] | None = None,
    ) -> None:
        self.tables = tables
        self.prices = dict(prices or {})
        self.budget_units = budget_units
        self.clock = clock
        self.on_record = on_record

    def price(self, operation: str) -> LLMPrice:
        """The price row of ``operation``."""
        return self.prices.get(operation) or self.prices.get("*") or LLMPrice()

    def record(
        self,
        *,
        account_id: str,
        operation: str,
        scope: str | None,
        prompt_tokens: int,
        completion_tokens: int,
        calls: int = 1,
        ts: float | None = None,
    ) -> UsageRow:
        """Append a call to the ledger, priced, at ``ts`` (when the call began; default:
        now); returns the row written."""
        price = self.price(operation)
        units = (
            prompt_tokens * price.prompt_per_1k / 1000
            + completion_tokens * price.completion_per_1k / 1000
            + calls * price.per_call
        )
        row = UsageRow(
            account_id,
            operation,
            scope,
            prompt_tokens,
            completion_tokens,
            calls,
            round(units, 6),
            self.clock() if ts is None else ts,
        )
        self.tables.record_usage(row)
        if self.on_record is not None:
            self.on_record(row)
        return row

    def since_last_poll(self, account_id: str, caller: str = "default") -> UsageReport:
        """Totals since this caller's previous poll (since the start on the first one)."""
        now = self.clock()
        previous = self.tables.swap_poll(account_id, caller, now)
        return self.report(account_id, since=previous, until=now)

    def report(
        self, account_id: str, *, since: float | None, until: float | None = None
    ) -> UsageReport:
        """Totals per operation of ``[since, until)``."""
        end = self.clock() if until is None else until
        totals = self.tables.usage_totals(account_id, since=since, until=end)
        return UsageReport(since, end, tuple(totals))

    def day_start(self) -> float:
        """When the current UTC day (the budget's period) began."""
        now = self.clock()
        return now - now % _DAY

    def remaining_fraction(self, account_id: str) -> float | None:
        """The share of today's budget left (0..1), or ``None`` without a budget."""
        if self.budget_units is None:
            return None
        spent = self.tables.spent_units(account_id, self.day_start())
        return max(0.0, round(1.0 - spent / self.budget_units, 9))

    def must_defer(self, account_id: str) -> bool:
        """Whether background LLM work of the account waits (below 20% of today's budget)."""
        left = self.remaining_fraction(account_id)
        return left is not None and left < DEFER_BELOW


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` at four characters a token (at least one for a non-empty text)."""
    return math.ceil(len(text) / _CHARS_PER_TOKEN)


class MeteredLLM:
    """An :class:`LLM` whose every call is written to the ledger (see the module)."""

    def __init__(self, llm: LLM, ledger: UsageLedger) -> None:
        self.llm = llm
        self.ledger = ledger

    @property
    def model_id(self) -> str:
        """The wrapped model's name."""
        return self.llm.model_id

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float,
        timeout: float,
        max_tokens: int | None = None,
    ) -> str:
        """The wrapped model's answer; the call is recorded whether it succeeds or not."""
        context = _CURRENT.get() or _Context("-", "other", None)
        prompt_tokens = sum(estimate_tokens(m["content"]) for m in messages)
        began = self.ledger.clock()
        answer = ""
        try:
            answer = await self.llm.complete(
                messages, temperature=temperature, timeout=timeout, max_tokens=max_tokens
            )
            return answer
        finally:
            try:
                await asyncio.to_thread(
                    self.ledger.record,
                    account_id=context.account_id,
                    operation=context.operation,
                    scope=context.scope,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=estimate_tokens(answer),
                    ts=began,
                )
            except Exception as exc:  # the ledger must not fail the call it records
                log.error("LLM usage not recorded: %s", type(exc).__name__)
