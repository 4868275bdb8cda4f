"""Point records on disk: ``DIR/points/<hash>.json``, one per finished point, written
atomically by the runner; here they are read, checked (:func:`record_problem`) and, when they
are not records, moved aside (:func:`quarantine`) so that their points are recomputed.

A record's ``status`` is an :class:`~mesadyn.outcome.Outcome` value (``ok``, ``failed``, or a
workflow's failing outcome such as ``max_steps``); records written before outcomes had more
members hold ``ok`` or ``failed`` and read the same.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from ..errors import MesadynError
from ..outcome import Outcome

__all__ = ["MISSING", "POINTS", "outcome_of", "point_path", "quarantine", "read_records",
           "record_problem", "scan_records"]

#: The folder of the point records in a sweep's output folder.
POINTS = "points"
#: ``point_status`` of a point with no record (not an outcome: the point has not run).
MISSING = "missing"
#: A corrupt record is moved aside to ``<name>.corrupt``, else ``<name>.corrupt-<k>`` for the
#: first free ``k`` below this.
QUARANTINE_TRIES = 1000
_OUTCOMES = {o.value: o for o in Outcome}


def outcome_of(status: object) -> Outcome:
    """The :class:`~mesadyn.outcome.Outcome` a record's ``status`` names.

    ## Raises
    `ValueError`: a word that is no outcome.
    """
    if not isinstance(status, str) or status not in _OUTCOMES:
        raise ValueError(f"unknown status {status!r}")
    return _OUTCOMES[status]


def point_path(out: Path, point_hash: str) -> Path:
    """Where a point's record lives."""
    return out / POINTS / f"{point_hash}.json"


def read_records(out: Path) -> dict[str, dict[str, Any]]:
    """Every well-formed stored point record in ``out`` (see :func:`scan_records`)."""
    return scan_records(out)[0]


def record_problem(rec: object, stem: str) -> str | None:
    """Why ``rec`` (a parsed point file named ``<stem>.json``) is not a point record."""
    if not isinstance(rec, dict):
        return f"not a JSON object ({type(rec).__name__})"
    if rec.get("hash") != stem:
        return f"hash {rec.get('hash')!r} does not match the file name"
    if not isinstance(rec.get("options"), dict):
        return "no options"
    try:
        outcome = outcome_of(rec.get("status"))
    except ValueError:
        return f"unknown status {rec.get('status')!r}"
    if outcome.ok and not isinstance(rec.get("result"), dict):
        return f"status {outcome} without a result object"
    if not outcome.ok and not isinstance(rec.get("error", ""), str):
        return "error is not a string"
    if not isinstance(rec.get("result", {}), dict):
        return "result is not an object"
    wall = rec.get("wall_s", 0.0)
    if wall is not None and (isinstance(wall, bool) or not isinstance(wall, (int, float))):
        return "wall_s is not a number"
    return None


def scan_records(out: Path) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """``(records, corrupt)``: the stored point records, and the files that are not records.

    A corrupt file (unreadable, not JSON, malformed, not a regular file) is moved aside
    (:func:`quarantine`) so that it is reported once and its point is recomputed.

    ## Raises
    `MesadynError`: a corrupt file that cannot be moved aside (it would block its point).
    """
    records: dict[str, dict[str, Any]] = {}
    corrupt: list[dict[str, Any]] = []
    folder = out / POINTS
    if not folder.is_dir():
        return records, corrupt
    for path in sorted(folder.glob("*.json")):
        problem: str | None
        try:
            mode = path.lstat().st_mode
            if not stat.S_ISREG(mode):
                raise ValueError("not a regular file")
            rec = json.loads(path.read_text(encoding="utf-8"))
            problem = record_problem(rec, path.stem)
        except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError too
            problem = f"unreadable ({type(exc).__name__}: {' '.join(str(exc).split())[:80]})"
        if problem is None:
            records[path.stem] = rec
            continue
        corrupt.append({"file": str(path.relative_to(out)), "reason": problem})
        quarantine(path)
    return records, corrupt


def quarantine(path: Path) -> Path:
    """Move ``path`` (a file, or whatever sits where a record should be) aside to the first
    free name of ``<name>.corrupt``, ``<name>.corrupt-1``, …, never over an earlier one.

    ## Raises
    `MesadynError`: no free name, or the move fails (naming the path and why).
    """
    for k in range(QUARANTINE_TRIES):
        target = path.with_name(f"{path.name}.corrupt" + (f"-{k}" if k else ""))
        if os.path.lexists(target):
            continue
        try:
            os.rename(path, target)
        except FileNotFoundError:
            if not os.path.lexists(path):  # gone meanwhile: nothing blocks the point
                return path
            continue  # the target appeared meanwhile
        except OSError as exc:
            raise MesadynError(f"cannot move the corrupt point record {str(path)!r} aside "
                               f"({exc.strerror or exc}); remove it and run again") from None
        return target
    raise MesadynError(f"cannot move the corrupt point record {str(path)!r} aside: "
                       f"{QUARANTINE_TRIES} earlier copies exist; remove them and run again")
