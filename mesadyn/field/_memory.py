"""How much memory a build may still use: :func:`mesadyn.budget.memory_budget`, the tightest of
the machine, ``ulimit -v`` and cgroups (the one size guard, :mod:`mesadyn.budget`).

The fields read it under this name; each call looks the budget up in :mod:`mesadyn.budget`, so
a test that patches ``mesadyn.budget.memory_budget`` patches every field's budget.
"""

from __future__ import annotations

from ..budget import MemoryBudget, current_budget

__all__ = ["MemoryBudget", "available_bytes", "memory_budget"]


def memory_budget() -> MemoryBudget:
    """:func:`mesadyn.budget.memory_budget`."""
    return current_budget()


def available_bytes() -> int:
    """Bytes a build may use: :func:`memory_budget`'s ``bytes``."""
    return memory_budget().bytes
