"""The HTTP service: ``create_app(settings)`` (needs the ``server`` extra)."""

from confide.server.app import create_app

__all__ = ["create_app"]
