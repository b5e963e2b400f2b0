"""The suite's clock, for tests that start Python processes (see ``tests/conftest.py``).

A process started with :func:`clock_env` runs ``tests/clock_site/sitecustomize.py`` first,
which sets its wall clock (``time_machine``, ticking) to the given instant.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from time_machine import escape_hatch

CLOCK_SITE = Path(__file__).parent / "clock_site"


def _real_time() -> float:
    """The machine's wall clock, even while this process travels."""
    return escape_hatch.time.time() if escape_hatch.is_travelling() else time.time()


def clock_env(env: Mapping[str, str], instant: datetime) -> dict[str, str]:
    """``env`` for a Python subprocess whose wall clock reads ``instant`` when it starts."""
    paths = [str(CLOCK_SITE), *filter(None, [env.get("PYTHONPATH")])]
    return {
        **env,
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)),
        # The child shifts its real clock: measured against the real one here too, even while
        # this process travels.
        "TEST_CLOCK_SHIFT_SECONDS": repr(instant.timestamp() - _real_time()),
    }
