"""One error contract: the service's answers carry the error's class, fields and allowed values
as the engine raised them, and the remote SDK reads them back from the same table."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api

from confide.errors import (
    HTTP_STATUS,
    ConfideError,
    IntegrityError,
    MissingDependencyError,
    PreconditionFailedError,
    SessionHeldError,
    StorageError,
    TamperedRowError,
    ValidationError,
)
from confide.remote import error_for_status
from confide.types import MemoryType


@pytest.mark.asyncio
async def test_an_enum_error_names_the_field_and_its_values_not_a_class(api: Api) -> None:
    response = await api.post(
        "/v1/memories", {"user_id": "u1", "key": "city", "value": "Oslo", "type": "gossip"}
    )
    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "ValidationError"
    assert body["fields"] == ["type"]
    assert body["allowed"] == {"type": [t.value for t in MemoryType]}
    assert body["error"].startswith("invalid new memory: type: Input should be 'fact'")
    assert "NewMemory" not in body["error"]


def test_the_remote_sdk_raises_the_class_the_service_named() -> None:
    for kind, status in HTTP_STATUS:
        if kind in (SessionHeldError, MissingDependencyError):
            continue
        raised = error_for_status(status, "message", {"type": kind.__name__})
        assert type(raised) is kind, kind
    # A subclass the table does not list travels by its name too.
    tampered = error_for_status(409, "tampered", {"type": "TamperedRowError"})
    assert isinstance(tampered, TamperedRowError) and isinstance(tampered, IntegrityError)
    held = error_for_status(409, "held", {"type": "SessionHeldError", "worker": {"id": "w1"}})
    assert isinstance(held, SessionHeldError) and held.worker == {"id": "w1"}


def test_the_remote_sdk_keeps_fields_and_falls_back_to_the_status() -> None:
    invalid = error_for_status(
        400, "bad", {"type": "ValidationError", "fields": ["type"], "allowed": {"type": ["fact"]}}
    )
    assert isinstance(invalid, ValidationError)
    assert (invalid.fields, invalid.allowed) == (("type",), {"type": ("fact",)})
    # No type, an unknown one, or one the status contradicts: the status decides.
    assert type(error_for_status(412, "stale")) is PreconditionFailedError
    assert type(error_for_status(404, "x", {"type": "NoSuchError"})).__name__ == "NotFoundError"
    assert type(error_for_status(404, "x", {"type": "ValidationError"})).__name__ == (
        "NotFoundError"
    )
    # A 5xx carries no detail: a plain error of its kind, never a made-up integrity failure.
    assert type(error_for_status(500, "Internal error")) is ConfideError
    assert type(error_for_status(503, "Service unavailable")) is StorageError
