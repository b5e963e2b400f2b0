"""An app scope: who owns an app's memories, and the limits its memories keep to."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from confide.errors import ValidationError
from confide.types import APP_OWNER_PREFIX

__all__ = [
    "APP_CATEGORY",
    "APP_OWNER_PREFIX",
    "MAX_CONTEXT_CHARS",
    "MAX_MEMORY_CHARS",
    "AppMessage",
    "AppScope",
    "clip",
]

APP_CATEGORY = "app_memory"
MAX_MEMORY_CHARS = 200
MAX_CONTEXT_CHARS = 2000
_APP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")


@dataclass(frozen=True, slots=True)
class AppScope:
    """``(account_id, app_id)``: one app's memories, isolated from every other scope."""

    account_id: str
    app_id: str

    def __post_init__(self) -> None:
        if not self.account_id.strip():
            raise ValidationError("account id must not be empty")
        if not _APP_ID.fullmatch(self.app_id):
            raise ValidationError(
                "app id must be 1-128 characters of letters, digits, '_', '.', ':' or '-', "
                "starting with a letter or digit"
            )

    @property
    def owner(self) -> str:
        """The user id the scope's memories are stored (and encrypted) under."""
        return APP_OWNER_PREFIX + self.app_id

    @property
    def label(self) -> str:
        """The scope as the usage ledger names it."""
        return f"app:{self.app_id}"


class AppMessage(BaseModel):
    """One message of an ended app conversation (read once, never stored)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["user", "assistant", "system", "tool"]
    content: str = Field(min_length=1, max_length=32_000)


def clip(text: str, limit: int = MAX_MEMORY_CHARS) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"
