"""The result of ``mesadyn reproduce``: :class:`ReproduceResult`, whose ``to_dict()`` is its
``--json`` object."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..outcome import Outcome
from ..record import hidden, renamed
from ..workflows import RunResult
from .rows import ClaimStatus

#: The columns of the claims table in the ``--json`` object.
CLAIM_COLUMNS = ("id", "label", "predicted", "measured", "error", "tolerance", "status")


@dataclass(frozen=True, kw_only=True)
class ReproduceResult(RunResult):
    """What :func:`mesadyn.reproduce.run` did.

    ``claims`` is the claims table (:data:`CLAIM_COLUMNS` of every row) and ``rows`` the
    whole rows (see :mod:`mesadyn.reproduce.claims`); ``computed`` the runs and claims
    computed now (the rest were reused from ``out``); ``failed`` the runs or figures that
    raised, with the error; ``repaired`` the files that could not be read and were
    recomputed, with the reason; ``cleaned`` the temporary files of dead writers removed.
    ``status`` combines the rows' outcomes (:attr:`ClaimStatus.outcome`) and an ``error`` for
    each failed run or figure (:meth:`Outcome.combine`); build it with :meth:`of`.
    """

    DERIVED = ("all_pass",)

    out: Path
    runs: int
    computed: list[str]
    figures: list[str]
    wall_s: float
    failed: dict[str, str] = renamed("failed_runs")
    repaired: dict[str, str]
    cleaned: list[str]
    claims: list[dict[str, Any]]
    rows: list[dict[str, Any]] = hidden()

    @classmethod
    def of(cls, out: Path, rows: Sequence[Mapping[str, Any]], figures: list[str], runs: int,
           computed: list[str], wall_s: float, failed: Mapping[str, str],
           repaired: Mapping[str, str], cleaned: list[str]) -> ReproduceResult:
        """The result of these claim ``rows`` and failures, with its ``status`` and
        ``message``."""
        whole = [dict(r) for r in rows]
        statuses = [ClaimStatus(r["status"]) for r in whole]
        status = Outcome.combine([s.outcome for s in statuses]
                                 + [Outcome.ERROR] * len(failed))
        bad = list(dict.fromkeys(r["id"] for r, s in zip(whole, statuses, strict=True)
                                 if not s.ok))
        parts = [f"{sum(s.ok for s in statuses)}/{len(whole)} claim rows PASS"]
        if bad:
            parts.append(f"{len(bad)} claim(s) did not PASS: {', '.join(bad)}")
        if failed:
            parts.append(f"{len(failed)} run(s) or figure(s) failed")
        return cls(out=Path(out), runs=runs, computed=list(computed), figures=list(figures),
                   wall_s=float(wall_s), failed=dict(failed), repaired=dict(repaired),
                   cleaned=list(cleaned),
                   claims=[{k: r[k] for k in CLAIM_COLUMNS} for r in whole], rows=whole,
                   status=status, message="; ".join(parts))

    @property
    def all_pass(self) -> bool:
        """Every claim row PASS and no run or figure failed (``status.ok``; else the CLI exits
        1)."""
        return self.ok

    @property
    def not_passed(self) -> list[str]:
        """Ids of the claims with a row that is not PASS (each id once, in order)."""
        return list(dict.fromkeys(c["id"] for c in self.claims
                                  if not ClaimStatus(c["status"]).ok))
