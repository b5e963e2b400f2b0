"""The async gate is complete: every operation of the gate has an awaitable twin with the
same parameters, so an async door never needs to off-load a gate call itself."""

from __future__ import annotations

import inspect

from confide.gate import AsyncGate, Gate


def _operations(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, callable)
        if not name.startswith("_")
    }


def test_every_gate_operation_has_an_awaitable_twin() -> None:
    sync, awaitable = _operations(Gate), _operations(AsyncGate)
    assert sorted(sync) == sorted(awaitable)
    for name, signature in sync.items():
        assert inspect.iscoroutinefunction(getattr(AsyncGate, name)), name
        expected = [p for p in signature.parameters if p != "self"]
        assert [p for p in awaitable[name].parameters if p != "self"] == expected, name
