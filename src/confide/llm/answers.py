"""Reading a model's answer: the text inside a code fence, and a JSON object in it.

Models wrap answers in Markdown fences (```json ... ```) often enough that every caller
expecting plain text or one JSON object unwraps them first; this is that one place.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["json_object", "unfenced"]

_FENCE = re.compile(r"^```(?:\w+)?\s*(.*?)\s*```$", re.DOTALL)


def unfenced(text: str) -> str:
    """``text`` stripped, without a code fence that wraps all of it."""
    body = text.strip()
    fenced = _FENCE.match(body)
    return fenced.group(1) if fenced else body


def json_object(text: str) -> dict[str, Any]:
    """The JSON object a (possibly fenced) answer holds.

    Raises:
        ValueError: ``"is not JSON"`` or ``"is not a JSON object"`` (for the caller to
            prefix with what the answer was meant to be).
    """
    try:
        data = json.loads(unfenced(text))
    except ValueError:
        raise ValueError("is not JSON") from None
    if not isinstance(data, dict):
        raise ValueError("is not a JSON object")
    return data
