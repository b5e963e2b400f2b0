"""Hostile requests from the OpenAPI schema (schemathesis), against every route of the app.

:func:`fuzz_app` loads the app's own ``/openapi.json``, draws cases for every operation, valid
ones (``positive``) and ones that break the schema (``negative``: wrong types, missing
fields, out-of-range numbers, unknown fields), sends each with an admin key through the
in-process client (so every route is reached past authentication) and checks the answer:

- never a 5xx;
- every 4xx a JSON object whose ``error`` names the problem (not an empty string, not a
  bare reason phrase such as ``Bad Request``).

The service must answer after all of it (``/healthz``). Needs schemathesis (the ``test``
extra); ``bench/fuzz.py`` runs it at full size.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisDeprecationWarning, Unsatisfiable

from confide.testing.isolation import IsolationService

__all__ = ["FuzzReport", "answer_problem", "fuzz_app"]

_BARE = frozenset({"", "bad request", "unprocessable entity", "error", "invalid", "internal error"})


@dataclass
class FuzzReport:
    """Cases sent, answers by status, and every bad answer (route, status, what was wrong)."""

    cases: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    operations: int = 0
    problems: list[str] = field(default_factory=list)


def answer_problem(status: int, body: bytes) -> str | None:
    """What is wrong with an answer, or ``None``: a 5xx, or a 4xx that is not a JSON error
    naming its problem."""
    if status >= 500:
        return f"answered {status}"
    if status < 400:
        return None
    try:
        payload = json.loads(body)
    except ValueError:
        return f"{status} without a JSON body"
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, str):
        return f"{status} without an error message"
    if error.strip().lower() in _BARE:
        return f"{status} with an error that names nothing ({error!r})"
    return None


def fuzz_app(
    service: IsolationService,
    token: str,
    *,
    cases_per_operation: int,
    modes: tuple[str, ...] = ("positive", "negative"),
    progress: Callable[[FuzzReport], None] | None = None,
) -> FuzzReport:
    """Send ``cases_per_operation`` drawn cases per operation and mode to the service.

    Args:
        service: the app and the client that reaches it in process (its ``/openapi.json``
            must be served).
        token: an admin API key of the app, sent with every case.
        cases_per_operation: Hypothesis examples per operation and mode.
        modes: ``positive`` (valid by the schema) and/or ``negative`` (invalid).
        progress: called after each operation with the report so far.
    """
    import schemathesis

    schema = schemathesis.openapi.from_asgi("/openapi.json", service.app)
    report = FuzzReport()
    with warnings.catch_warnings():
        # schemathesis's negative generation draws with the ``random`` module inside its
        # strategies now and then; Hypothesis warns about it, and under the suite's
        # warnings-as-errors the warning (in that library, not in Confide) failed a case.
        warnings.filterwarnings(
            "ignore",
            message="Do not use the `random` module inside strategies",
            category=HypothesisDeprecationWarning,
        )
        _run_operations(service, schema, token, report, modes, cases_per_operation, progress)
    service.join()
    health = service.run(service.client.get("/healthz")).status_code
    if health != 200:
        report.problems.append(f"/healthz answered {health} after the cases")
    return report


def _run_operations(
    service: IsolationService,
    schema: Any,
    token: str,
    report: FuzzReport,
    modes: tuple[str, ...],
    cases_per_operation: int,
    progress: Callable[[FuzzReport], None] | None,
) -> None:
    from schemathesis import GenerationMode

    for result in schema.get_all_operations():
        operation = result.ok()  # an invalid schema raises here
        report.operations += 1
        for mode in modes:
            strategy = operation.as_strategy(GenerationMode(mode))
            _run_operation(service, strategy, token, report, operation.label, cases_per_operation)
        if progress is not None:
            progress(report)


def _run_operation(
    service: IsolationService,
    strategy: st.SearchStrategy[Any],
    token: str,
    report: FuzzReport,
    label: str,
    examples: int,
) -> None:
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def send(case: Any) -> None:
        request = case.as_transport_kwargs(base_url=str(service.client.base_url))
        headers = {**request.get("headers", {}), "Authorization": f"Bearer {token}"}
        extra: dict[str, Any] = {}
        if "json" in request:
            extra["json"] = request["json"]
        elif request.get("data") is not None:
            data = request["data"]
            extra["content" if isinstance(data, bytes | str) else "data"] = data
        response = service.run(
            service.client.request(
                request["method"],
                request["url"],
                params=request.get("params") or None,
                headers=headers,
                **extra,
            )
        )
        report.cases += 1
        report.statuses[response.status_code] += 1
        problem = answer_problem(response.status_code, response.content)
        if problem is not None:
            report.problems.append(f"{label}: {problem}")

    # Unsatisfiable: no invalid request exists for this operation (no parameters, no body).
    with contextlib.suppress(Unsatisfiable):
        send()
