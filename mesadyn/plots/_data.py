"""Read what a figure needs from live objects or saved runs (``.nc`` via ``mesadyn.io.load_run``).

A *source* is one of the types of :data:`Source`: a path to a run file; an ``xarray.Dataset``
(a loaded run, or a result's ``to_dataset()``); a ``TrainResult``, ``FlowResult``,
``ReducedFlowResult`` or ``ContextCurve``; or a mapping of arrays.  :func:`table` turns each
into a :class:`Table`, the one view every figure reads: arrays by name and the run's
configuration.  Anything else is a MesadynError naming its type.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union, cast, final

import numpy as np

from ..errors import MesadynError

if TYPE_CHECKING:
    import xarray as xr

    from ..analysis.incontext import ContextCurve
    from ..flow import FlowResult, ReducedFlowResult
    from ..train import TrainResult

#: What a figure can be drawn from (see the module docstring).
Source = Union[str, os.PathLike[str], "xr.Dataset", "TrainResult", "FlowResult",
               "ReducedFlowResult", "ContextCurve", Mapping[str, Any]]


@final
@dataclass(frozen=True)
class Table:
    """The arrays of one source by name, and the configuration recorded with it (``{}`` when
    none is); ``what`` names the source in error messages."""

    arrays: Mapping[str, Any]
    config: Mapping[str, Any]
    what: str

    def find(self, *names: str) -> np.ndarray | None:
        """The first of ``names`` present, as a numpy array; None if none is."""
        for name in names:
            value = self.arrays.get(name)
            if value is not None:
                return as_numpy(value)
        return None

    def get(self, *names: str) -> np.ndarray:
        """The first of ``names`` present, as a numpy array.

        Raises:
            MesadynError: none of ``names`` is present (naming them and the source).
        """
        value = self.find(*names)
        if value is None:
            raise MesadynError(
                f"{self.what} has none of the fields {', '.join(names)} needed for this figure"
            )
        return value


def is_tensor(value: object) -> bool:
    """Whether ``value`` is a torch tensor (no tensor exists unless torch is imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def as_numpy(value: Any) -> np.ndarray:
    """``value`` as a numpy array (a torch tensor is detached and moved to the CPU)."""
    if is_tensor(value):
        return np.asarray(value.detach().cpu().numpy())
    return np.asarray(value)


def _fields(obj: Any) -> dict[str, Any]:
    """A dataclass result's fields by name (its arrays and scalars)."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def table(obj: Source) -> Table:
    """The :class:`Table` of a source (module docstring); a path is loaded first.

    A type whose module is not imported yet cannot be the source's (no instance of it exists),
    so xarray, :mod:`mesadyn.train` and :mod:`mesadyn.analysis.incontext` (torch) are imported
    here only for a source that may be theirs.

    Raises:
        MesadynError: an unreadable run file, or an object of none of the source types.
    """
    if isinstance(obj, (str, os.PathLike)):
        from ..io import load_run

        obj = load_run(Path(obj))
    if "xarray" in sys.modules:
        import xarray as xr

        if isinstance(obj, xr.Dataset):
            config: Mapping[str, Any] = {}
            if "config" in obj.attrs:
                from ..io import run_config

                config = run_config(obj)
            arrays = {str(k): v.values for k, v in obj.variables.items()}
            return Table(arrays, config, f"run of kind {obj.attrs.get('kind', '?')!r}")
    if isinstance(obj, Mapping):
        return Table(cast(Mapping[str, Any], obj), {}, "mapping")
    from ..flow import FlowResult, ReducedFlowResult

    if isinstance(obj, FlowResult):
        return Table({**_fields(obj), "final_theta": obj.final}, {}, "FlowResult")
    if isinstance(obj, ReducedFlowResult):
        return Table({**_fields(obj), "ab": obj.ab}, {}, "ReducedFlowResult")
    if "mesadyn.analysis.incontext" in sys.modules:
        from ..analysis.incontext import ContextCurve

        if isinstance(obj, ContextCurve):
            return Table(_fields(obj), {}, "ContextCurve")
    if "mesadyn.train" in sys.modules:
        from ..train import TrainResult

        if isinstance(obj, TrainResult):
            arrays = {**_fields(obj), "ab_mean": obj.ab_mean, "kq_mean": obj.kq_mean,
                      "pv_mean": obj.pv_mean, "final_theta": obj.final_theta}
            return Table(arrays, obj.config, "TrainResult")
    raise MesadynError(
        f"cannot draw from a {type(obj).__name__}: give a run file, an xarray Dataset, a "
        "TrainResult, FlowResult, ReducedFlowResult, ContextCurve or a mapping of arrays"
    )


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


#: A trajectory in the (a, b) plane: a source, a θ array of shape (n, 18d²), or a tuple
#: ``(a, b)`` / ``(a, b, t)`` of arrays.
Path2D = Source | np.ndarray | tuple[Any, ...]


def ab_path(obj: Path2D) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(a, b, t)`` of a trajectory: from θ (projected), or stored ``a``/``b`` arrays.

    ``obj`` is a source (:func:`table`), a θ array of shape (n, 18d²), or a tuple ``(a, b)``
    or ``(a, b, t)`` of arrays.
    """
    if isinstance(obj, tuple):
        if len(obj) not in (2, 3):
            raise MesadynError(f"a trajectory tuple is (a, b) or (a, b, t), got {len(obj)} items")
        a, b = np.asarray(obj[0], float), np.asarray(obj[1], float)
        t = np.asarray(obj[2], float) if len(obj) == 3 else None
        return _checked(a, b, t)
    if isinstance(obj, np.ndarray):
        if obj.ndim != 2:
            raise MesadynError(f"a θ trajectory has shape (n, 18d²), got {obj.shape}")
        a, b, _ = project_theta(obj)
        return _checked(a, b, None)
    tab = table(obj)
    t = tab.find("t", "tau", "step")
    theta = tab.find("theta")
    if theta is not None and theta.ndim == 2:
        a, b, _ = project_theta(theta)
    else:
        a = tab.get("a", "a_mean", "kq_mean")
        b = tab.get("b", "b_mean", "pv_mean")
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
