"""A claim's rows and their record: the verdict of a row (:class:`ClaimStatus`, mapped onto
:class:`~mesadyn.outcome.Outcome`), the row itself (:func:`row`), a claim and its check
(:class:`ClaimSpec`, :func:`run_claim`), and the hash that names its record.

Each claim yields one or more *rows* (dicts) with: ``id``, ``label``, ``paper`` (where it is
stated), ``predicted``, ``measured``, ``error`` (|measured − predicted|, or the relative error
where the row says so), ``tolerance`` and its justification ``tol_note``, ``status``
(PASS / FAIL / ERROR), the ``command`` that re-runs the claim alone, and ``details``.
"""

from __future__ import annotations

import enum
import hashlib
import math
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..io import to_json, version
from ..outcome import Outcome
from .context import Context
from .studies import FlowRun

__all__ = ["ERROR", "FAIL", "PASS", "SCHEMA", "ClaimSpec", "ClaimStatus", "claim_hash",
           "claim_hash_config", "command", "row", "run_claim"]


class ClaimStatus(enum.StrEnum):
    """The verdict of one claim row (strings in JSON and in the report); :attr:`outcome` is
    its :class:`~mesadyn.outcome.Outcome`."""

    PASS = "PASS"
    FAIL = "FAIL"
    ERROR = "ERROR"  # the check could not be computed (never a silent PASS)

    @property
    def outcome(self) -> Outcome:
        """``ok`` for PASS, ``failed`` for FAIL, ``error`` for ERROR."""
        return _OUTCOMES[self]

    @property
    def ok(self) -> bool:
        """Whether the row passed."""
        return self.outcome.ok


_OUTCOMES = {ClaimStatus.PASS: Outcome.OK, ClaimStatus.FAIL: Outcome.FAILED,
             ClaimStatus.ERROR: Outcome.ERROR}
#: Version of the on-disk layout; part of every claim record's hash.  3: the runs are the
#: integrate and train workflows' run files (2: full flows by LSODA instead of dopri5).
SCHEMA = 3


PASS, FAIL, ERROR = ClaimStatus.PASS, ClaimStatus.FAIL, ClaimStatus.ERROR


def command(cid: str) -> str:
    """The command that re-runs claim ``cid`` alone."""
    return f"mesadyn reproduce --only {cid} --out DIR"


def row(cid: str, label: str, paper: str, predicted: float, measured: float, error: float,
        tolerance: float, tol_note: str, ok: bool, details: dict[str, Any] | None = None,
        ) -> dict[str, Any]:
    """One row of claim ``cid``: PASS when ``ok`` and the error is finite, else FAIL."""
    return {
        "id": cid, "label": label, "paper": paper, "predicted": float(predicted),
        "measured": float(measured), "error": float(error), "tolerance": float(tolerance),
        "tol_note": tol_note, "status": PASS if ok and math.isfinite(error) else FAIL,
        "command": command(cid), "details": details or {},
    }


@dataclass(frozen=True)
class ClaimSpec:
    """One claim of the paper and how to check it."""

    id: str
    title: str
    paper: str
    statement: str
    runs: Callable[[bool], list[FlowRun]]
    check: Callable[[Context], list[dict[str, Any]]]
    beyond_paper: bool = False


def claim_hash_config(spec: ClaimSpec, ctx: Context) -> dict[str, Any]:
    """What a claim's cached result depends on: its id, quick, the seed and its runs' files
    (whose names carry their configurations' hashes)."""
    return {"claim": spec.id, "quick": ctx.quick, "seed": ctx.seed,
            "runs": sorted(ctx.run_path(r).name for r in spec.runs(ctx.quick))}


def claim_hash(config: dict[str, Any]) -> str:
    """16 hex digits of SHA-256 over a claim's inputs (:func:`claim_hash_config`), the package
    version and :data:`SCHEMA`: the name of its record ``claims/<id>-<hash>.json``."""
    key = to_json({"config": config, "version": version(), "schema": SCHEMA})
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def run_claim(spec: ClaimSpec, ctx: Context) -> list[dict[str, Any]]:
    """The claim's rows; a failure to compute is an ERROR row (never a silent PASS)."""
    try:
        rows = spec.check(ctx)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 - shown as an ERROR row, never a PASS
        msg = f"{type(exc).__name__}: {exc}"
        return [{"id": spec.id, "label": spec.title, "paper": spec.paper,
                 "predicted": math.nan, "measured": math.nan, "error": math.nan,
                 "tolerance": math.nan, "tol_note": "", "status": ERROR,
                 "command": command(spec.id),
                 "details": {"error": msg, "trace": traceback.format_exc(limit=3)}}]
    return rows
