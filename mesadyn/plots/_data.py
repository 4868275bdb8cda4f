"""Read what a figure needs from live objects or saved runs (``.nc`` via ``mesadyn.io.load_run``).

A *source* is any of: a path to a run file; an ``xarray.Dataset``; an object with the needed
attributes (``FlowResult``, ``TrainResult``) or a ``to_dataset()`` method; a mapping of arrays.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MesadynError

Source = Any


def is_path(obj: object) -> bool:
    """True for ``str`` and ``os.PathLike`` (a run file to load)."""
    return isinstance(obj, (str, os.PathLike))


def load(obj: Source) -> Any:
    """A path becomes the loaded Dataset (errors are MesadynError); anything else is returned."""
    if is_path(obj):
        from ..io import load_run

        return load_run(Path(obj))
    return obj


def get(obj: Source, *names: str, required: bool = True) -> np.ndarray | None:
    """The first of ``names`` found on ``obj`` (attribute, Dataset variable or mapping key)."""
    obj = load(obj)
    for name in names:
        value = None
        if isinstance(obj, Mapping) and name in obj:
            value = obj[name]
        elif hasattr(obj, "data_vars") and (name in obj.variables):
            value = obj[name].values
        elif not isinstance(obj, Mapping) and hasattr(obj, name):
            value = getattr(obj, name)
        if value is not None:
            if hasattr(value, "detach"):
                value = value.detach().cpu().numpy()
            return np.asarray(value)
    if hasattr(obj, "to_dataset") and not hasattr(obj, "data_vars"):
        return get(obj.to_dataset(), *names, required=required)
    if required:
        raise MesadynError(
            f"{_describe(obj)} has none of the fields {', '.join(names)} needed for this figure"
        )
    return None


def _describe(obj: object) -> str:
    if hasattr(obj, "attrs") and hasattr(obj, "data_vars"):
        return f"run of kind {obj.attrs.get('kind', '?')!r}"
    return type(obj).__name__


def project_theta(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(mean diag W^KQ_32, mean diag W^PV_12, mean diag-product ab)`` of θ of shape (..., 18d²).

    The projection of a full-flow trajectory onto the reduced plane (Assumption 3.1 coordinates).
    """
    from ..model import dim_of

    theta = np.asarray(theta, dtype=np.float64)
    if theta.ndim == 1:
        theta = theta[None, :]
    d = dim_of(theta)
    n = 9 * d * d
    W_KQ = theta[:, :n].reshape(-1, 3 * d, 3 * d)
    W_PV = theta[:, n:].reshape(-1, 3 * d, 3 * d)
    kq = np.diagonal(W_KQ[:, 2 * d : 3 * d, d : 2 * d], axis1=1, axis2=2)
    pv = np.diagonal(W_PV[:, 0:d, d : 2 * d], axis1=1, axis2=2)
    return kq.mean(axis=1), pv.mean(axis=1), (kq * pv).mean(axis=1)


def ab_path(obj: Source) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(a, b, t)`` of a trajectory: from θ (projected), or stored ``a``/``b`` arrays.

    ``obj`` may also be a tuple ``(a, b)`` or ``(a, b, t)`` of arrays.
    """
    if isinstance(obj, tuple) and len(obj) in (2, 3):
        a, b = np.asarray(obj[0], float), np.asarray(obj[1], float)
        t = np.asarray(obj[2], float) if len(obj) == 3 else None
        return _checked(a, b, t)
    obj = load(obj)
    t = get(obj, "t", "tau", "step", required=False)
    theta = get(obj, "theta", required=False)
    if theta is not None and theta.ndim == 2:
        a, b, _ = project_theta(theta)
    else:
        a = get(obj, "a", "a_mean")
        b = get(obj, "b", "b_mean")
    return _checked(a, b, t)


def _checked(a: Any, b: Any, t: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    a, b = np.asarray(a, float).ravel(), np.asarray(b, float).ravel()
    if a.shape != b.shape or a.size == 0:
        raise MesadynError(f"trajectory has mismatched or empty a, b (sizes {a.size}, {b.size})")
    if t is not None:
        t = np.asarray(t, float).ravel()
        if t.shape != a.shape:
            t = None
    return a, b, t
