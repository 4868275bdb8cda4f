"""Rerun a run file from its own configuration and compare the numbers (``mesadyn rerun``).

Every run file written by a workflow (:func:`~mesadyn.workflows._run.write_run`) holds its
``kind`` (the workflow's name in :data:`~mesadyn.workflows.REGISTRY`), its configuration
(every recorded option, :meth:`~mesadyn.workflows.RunOptions.run_config`) and its result (the
``--json`` object).  :func:`rerun` rebuilds the ``Config`` from the file alone
(:meth:`~mesadyn.workflows.RunOptions.from_run`), runs the workflow again and compares the new
``--json`` object with the stored one, number by number:

- results (every number not listed below) agree within ``rtol`` relative to the larger of the
  two values, or to the largest magnitude in the same list (eigenvalues at rounding level
  against their spectrum);
- solver-path counts (``nfev``, ``njev``, ``n_accepted``, ``n_rejected``, ``n_monitor``,
  ``n_calls``) and timings (``wall_s`` and every ``*_s``) are reported, never compared: on
  another CPU the arithmetic's rounding can change a solver's path without changing its result;
- output paths (``out``) and reuse flags differ by design and are skipped.
"""

from __future__ import annotations

import importlib
import math
import os
from dataclasses import dataclass
from typing import Any

from ..errors import MesadynError, check_positive
from ..outcome import Outcome
from ..record import hidden
from ..registry import REGISTRY
from ._run import RunResult, read_record

__all__ = ["PATH_KEYS", "RERUN_RTOL", "RerunResult", "compare", "rerun"]

#: Default relative tolerance of the comparison.
RERUN_RTOL = 1e-10
#: Counts of a solver's path: reported, not compared.
PATH_KEYS = frozenset({"nfev", "njev", "n_accepted", "n_rejected", "n_monitor", "n_calls",
                       "n_accepted_total", "n_rejected_total"})
#: Keys that differ by design between a run and its rerun.
SKIPPED_KEYS = frozenset({"out", "format", "plot", "reused", "rows_reused", "resumed",
                          "computed", "cleaned",
                          "repaired"})


def _skipped(key: str) -> bool:
    return key in SKIPPED_KEYS or key in PATH_KEYS or key == "wall_s" or key.endswith("_s")


def compare(stored: Any, new: Any, rtol: float = RERUN_RTOL, where: str = "") -> list[str]:
    """Every difference between two ``--json`` objects beyond ``rtol`` (module docstring),
    as ``"path: stored → new"``."""
    if isinstance(stored, dict) and isinstance(new, dict):
        out = [f"{where}.{k}: missing in the rerun" for k in stored
               if k not in new and not _skipped(k)]
        out += [f"{where}.{k}: not in the stored result" for k in new
                if k not in stored and not _skipped(k)]
        for k in stored:
            if k in new and not _skipped(k):
                out += compare(stored[k], new[k], rtol, f"{where}.{k}")
        return out
    if isinstance(stored, list) and isinstance(new, list):
        if len(stored) != len(new):
            return [f"{where}: {len(stored)} entries → {len(new)}"]
        scale = _scale(stored)
        return [d for i, (a, b) in enumerate(zip(stored, new, strict=True))
                for d in _entry(a, b, rtol, f"{where}[{i}]", scale)]
    return _entry(stored, new, rtol, where, 0.0)


def _scale(values: list[Any]) -> float:
    nums = [abs(float(v)) for v in values
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]
    return max(nums, default=0.0)


def _entry(a: Any, b: Any, rtol: float, where: str, scale: float) -> list[str]:
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return compare(a, b, rtol, where)
    number = (int, float)
    if isinstance(a, number) and isinstance(b, number) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        fa, fb = float(a), float(b)
        if math.isnan(fa) and math.isnan(fb):
            return []
        if abs(fa - fb) <= rtol * max(abs(fa), abs(fb), scale):
            return []
        return [f"{where}: {a!r} → {b!r}"]
    return [] if a == b else [f"{where}: {a!r} → {b!r}"]


@dataclass(frozen=True)
class RerunResult(RunResult):
    """What :func:`rerun` found: ``status`` is ``ok`` when the numbers agree within ``rtol``,
    ``failed`` otherwise (``differences`` lists them); ``rerun`` is the new result."""

    path: str
    kind: str
    rtol: float
    differences: tuple[str, ...]
    stored: dict[str, Any] = hidden()
    rerun: RunResult | None = hidden()


def rerun(path: str | os.PathLike[str], *, out: str | None = None,
          rtol: float = RERUN_RTOL, device: str | None = None) -> RerunResult:
    """Rebuild the ``Config`` of the run file ``path``, run it again (writing ``out`` when
    given; on ``device`` when given, e.g. the CPU for a run file written on CUDA) and compare
    its ``--json`` object with the stored one (module docstring).

    ## Raises
    `MesadynError`: an unreadable or foreign file, a file written before run files recorded
    every option, or a kind that is not a workflow.
    """
    rtol = check_positive("rtol", rtol)
    record = read_record(path)
    if record.kind not in REGISTRY:
        raise MesadynError(f"{os.fspath(path)!r} holds a {record.kind!r} run, which no workflow "
                           f"wrote (the workflows: {', '.join(REGISTRY)})")
    if record.result is None:
        raise MesadynError(f"{os.fspath(path)!r} has no stored result to compare with: it was "
                           "written before run files held their result")
    module = importlib.import_module(REGISTRY[record.kind].module)
    changes: dict[str, Any] = {"out": out}
    if device is not None:
        if "device" not in record.config:
            raise MesadynError(f"the {record.kind} workflow takes no device")
        changes["device"] = device
    config = module.Config.from_config(record.config, **changes)
    new = module.run(config)
    stored = record.result
    kind = record.kind
    from ..io import jsonable

    diffs = tuple(compare(stored, jsonable(new.to_dict()), rtol))
    status = Outcome.OK if not diffs else Outcome.FAILED
    message = (f"the rerun reproduces the stored numbers within rtol={rtol:g}" if not diffs
               else f"{len(diffs)} number(s) differ beyond rtol={rtol:g}: " + "; ".join(diffs[:5]))
    return RerunResult(path=os.fspath(path), kind=kind, rtol=rtol, differences=diffs,
                       stored=stored, rerun=new, status=status, message=message)
