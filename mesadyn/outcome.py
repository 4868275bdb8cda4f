"""The one outcome vocabulary of mesadyn: how every run, flow, branch and claim ended.

In the manner of diffrax's ``RESULTS``: each member carries its message and whether it is a
success (:attr:`Outcome.ok`), its exit code follows from that (:attr:`Outcome.exit_code`), and
one rule combines the outcomes of the parts of a run (:meth:`Outcome.combine`).  Members are
strings (a :class:`~enum.StrEnum`), so JSON and netCDF keep the same words.

| outcome | ok | what it says |
|---|---|---|
| ``ok`` | yes | the run completed (closed forms, GD, figures, a claim that passed) |
| ``converged`` | yes | the steady-state test held at a minimum (no negative curvature) |
| ``fixed_point`` | yes | the analysed point passed the fixed-point test |
| ``reached_end`` | yes | a continuation reached the end of its range |
| ``t_end`` | yes | a flow reached its horizon before the steady-state test held |
| ``left_range`` | yes | a branch turned at a fold and left its range on the other side |
| ``max_steps`` | no | the step budget ran out (the partial run is kept) |
| ``saddle`` | no | the run stopped at a stationary point with negative curvature |
| ``diverged`` | no | the iterates left every bound (GD at too large a step) |
| ``step_failed`` | no | a continuation corrector failed at the smallest step |
| ``singular`` | no | a continuation's bordered Jacobian is singular at its start |
| ``no_branch`` | no | branch switching found no second branch |
| ``failed`` | no | the run could not go on or its result failed its test |
| ``error`` | no | the quantity could not be computed at all |

Library code returns outcomes as data; only the CLI turns a failing one into exit code 1
(:class:`~mesadyn.errors.RunFailed`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from .errors import ExitCode

__all__ = ["Outcome"]


class Outcome(enum.StrEnum):
    """How a run ended: a string (JSON keeps the word) with :attr:`ok`, :attr:`severity`,
    :attr:`description` and :attr:`exit_code`; :meth:`combine` is the one rule for a run made
    of parts."""

    OK = "ok"
    CONVERGED = "converged"
    FIXED_POINT = "fixed_point"
    REACHED_END = "reached_end"
    T_END = "t_end"
    LEFT_RANGE = "left_range"
    MAX_STEPS = "max_steps"
    SADDLE = "saddle"
    DIVERGED = "diverged"
    STEP_FAILED = "step_failed"
    SINGULAR = "singular"
    NO_BRANCH = "no_branch"
    FAILED = "failed"
    ERROR = "error"

    @property
    def ok(self) -> bool:
        """Whether the run succeeded."""
        return _MEANING[self.value][0]

    @property
    def severity(self) -> int:
        """The rank :meth:`combine` uses: 0 a definitive success, 1 a success without a
        verdict (``t_end``, ``left_range``), 10 and above a failure."""
        return _MEANING[self.value][1]

    @property
    def description(self) -> str:
        """What the outcome says, in words."""
        return _MEANING[self.value][2]

    @property
    def exit_code(self) -> ExitCode:
        """``ExitCode.OK`` (0) for a success, ``ExitCode.FAILED`` (1) otherwise."""
        return ExitCode.OK if self.ok else ExitCode.FAILED

    @classmethod
    def combine(cls, outcomes: Iterable[Outcome | str]) -> Outcome:
        """The outcome of a run made of parts: the most severe part's (the first of equal
        severity); ``ok`` for no parts.  A single failure makes the whole a failure; among
        successes, ``t_end`` and ``left_range`` (ended without a definitive verdict) outrank
        ``converged``; parts that all agree give their own outcome."""
        worst: Outcome | None = None
        for o in outcomes:
            member = cls(o)
            if worst is None or member.severity > worst.severity:
                worst = member
        return cls.OK if worst is None else worst

    @classmethod
    def counts(cls, outcomes: Iterable[Outcome | str]) -> dict[str, int]:
        """How many parts ended with each outcome, in the enum's order (absent ones left out)."""
        seen: dict[Outcome, int] = {}
        for o in outcomes:
            member = cls(o)
            seen[member] = seen.get(member, 0) + 1
        return {m.value: seen[m] for m in cls if m in seen}


#: ``value -> (ok, severity, description)`` of every outcome (the table of the docstring).
_MEANING: dict[str, tuple[bool, int, str]] = {
    "ok": (True, 0, "the run completed"),
    "converged": (True, 0, "the steady-state test held at a minimum"),
    "fixed_point": (True, 0, "the point passed the fixed-point test"),
    "reached_end": (True, 0, "the branch reached the end of its range"),
    "t_end": (True, 1, "the flow reached its horizon"),
    "left_range": (True, 1, "the branch turned and left its range"),
    "max_steps": (False, 10, "the step budget ran out"),
    "saddle": (False, 11, "the run stopped at a saddle (negative curvature)"),
    "diverged": (False, 12, "the iterates diverged"),
    "step_failed": (False, 13, "the corrector failed at the smallest step"),
    "singular": (False, 14, "the bordered Jacobian is singular at the start"),
    "no_branch": (False, 15, "branch switching found no second branch"),
    "failed": (False, 16, "the run failed"),
    "error": (False, 17, "the quantity could not be computed"),
}
