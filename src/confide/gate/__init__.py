"""The gate beneath every door: principals, and the rules their calls pass once.

See :mod:`confide.gate.gate` for the rules and :mod:`confide.gate.principal` for who a call
acts for.
"""

from confide.gate.aio import AsyncGate
from confide.gate.gate import WRITE_TOOLS, Gate, require_admin, require_write
from confide.gate.principal import DEFAULT_AGENT, Principal, Scope

__all__ = [
    "DEFAULT_AGENT",
    "WRITE_TOOLS",
    "AsyncGate",
    "Gate",
    "Principal",
    "Scope",
    "require_admin",
    "require_write",
]
