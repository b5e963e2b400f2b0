"""The scale-out deployment, proven under faults: several ``confide serve`` and ``confide
worker`` processes on one PostgreSQL, a bounded mixed load spread over the services, and a
user erased, the KEK rotated and a service and a worker killed (SIGKILL) while it runs.

:func:`run_scaleout` runs it and returns a :class:`ScaleoutReport` of what was sent,
acknowledged and read back, what ran twice, what the erased user left and every 5xx;
``bench/scaleout.py`` runs it at full size and ``tests/e2e/test_scaleout.py`` small.
"""

from confide.testing.scaleout.scenario import ScaleoutOptions, ScaleoutReport, run_scaleout

__all__ = ["ScaleoutOptions", "ScaleoutReport", "run_scaleout"]
