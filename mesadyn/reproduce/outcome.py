"""The result of ``mesadyn reproduce``: :class:`Outcome`, with ``to_dict()`` its ``--json``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The columns of the claims table in the ``--json`` object.
CLAIM_COLUMNS = ("id", "label", "predicted", "measured", "error", "tolerance", "status")


@dataclass(frozen=True)
class Outcome:
    """What :func:`mesadyn.reproduce.run` did.

    ``claims`` are the claim rows (see :mod:`mesadyn.reproduce.claims`); ``computed`` the runs
    and claims computed now (the rest were reused from ``out``); ``failed`` the runs or figures
    that raised, with the error; ``repaired`` the files that could not be read and were
    recomputed, with the reason; ``cleaned`` the temporary files of dead writers removed.
    """

    out: Path
    claims: list[dict[str, Any]]
    figures: list[str]
    runs: int
    computed: list[str]
    wall_s: float
    failed: dict[str, str] = field(default_factory=dict)
    repaired: dict[str, str] = field(default_factory=dict)
    cleaned: list[str] = field(default_factory=list)

    @property
    def all_pass(self) -> bool:
        """Every claim row PASS and no run or figure failed (else the CLI exits 1)."""
        return all(c["status"] == "PASS" for c in self.claims) and not self.failed

    @property
    def not_passed(self) -> list[str]:
        """Ids of the claims with a row that is not PASS (each id once, in order)."""
        return list(dict.fromkeys(c["id"] for c in self.claims if c["status"] != "PASS"))

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` object: the claims table, paths, timing, failures and repairs."""
        return {
            "out": str(self.out), "all_pass": self.all_pass, "runs": self.runs,
            "computed": self.computed, "figures": self.figures, "wall_s": self.wall_s,
            "failed_runs": self.failed, "repaired": self.repaired, "cleaned": self.cleaned,
            "claims": [{k: c[k] for k in CLAIM_COLUMNS} for c in self.claims],
        }
