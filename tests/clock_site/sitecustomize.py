"""Starts the suite's clock in every Python process a test starts (see ``tests/conftest.py``).

The suite puts this folder first on ``PYTHONPATH`` only when ``TEST_CLOCK`` is set, with
``TEST_CLOCK_SHIFT_SECONDS`` (the fixed clock minus the real one), so a ``confide serve`` or
``confide worker`` under test reads the same wall clock as the test that started it.
"""

from __future__ import annotations

import os
import time

_shift = os.environ.get("TEST_CLOCK_SHIFT_SECONDS")
if _shift:
    try:
        import time_machine
    except ImportError:  # a fresh virtualenv without the test extra keeps the real clock
        pass
    else:
        _travel = time_machine.travel(time.time() + float(_shift), tick=True).start()
        # Between reading the real clock and starting, a loaded machine may pause this
        # process: correct that gap so that every process reads the same clock.
        _travel.shift(float(_shift) - (time.time() - time_machine.escape_hatch.time.time()))
