"""Every call of the embedded client has an awaitable twin (:class:`AsyncConfide`) with the
same parameters and promise, and the remote clients offer the everyday surface alike."""

from __future__ import annotations

import inspect

from confide.client import AsyncConfide, Confide
from confide.remote import AsyncRemoteConfide, RemoteConfide

SURFACE = [
    "add", "search", "query", "get", "get_all", "update", "delete", "restore", "history",
    "export", "erase",
]  # fmt: skip


def _calls(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(cls).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def _parameters(signature: inspect.Signature) -> list[str]:
    return [p for p in signature.parameters if p != "self"]


def test_every_call_of_the_embedded_client_has_an_awaitable_twin() -> None:
    sync, awaitable = _calls(Confide), _calls(AsyncConfide)
    for name, signature in sync.items():
        assert name in awaitable, name
        assert inspect.iscoroutinefunction(getattr(AsyncConfide, name)), name
        assert _parameters(awaitable[name]) == _parameters(signature), name
        assert getattr(AsyncConfide, name).__doc__ == getattr(Confide, name).__doc__, name


def test_the_remote_clients_offer_the_same_surface() -> None:
    embedded, remote, aremote = _calls(Confide), _calls(RemoteConfide), _calls(AsyncRemoteConfide)
    for name in SURFACE:
        assert _parameters(remote[name]) == _parameters(embedded[name]), name
        assert _parameters(aremote[name]) == _parameters(embedded[name]), name
        assert inspect.iscoroutinefunction(getattr(AsyncRemoteConfide, name)), name
