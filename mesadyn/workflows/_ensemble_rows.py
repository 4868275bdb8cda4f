"""The rows of an ensemble's run file: one chunk's rows from a batched solve
(:func:`chunk_rows`), the trajectories thinned to a common save grid (:func:`save_grid`,
:func:`thinned_rows`), the chunks joined (:func:`joined`), and which stored rows a run keeps
(:func:`stored_rows`: the one reuse rule, then the rows' own checks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import MesadynError, check_positive
from ..outcome import Outcome
from ._run import stored_run

if TYPE_CHECKING:
    import numpy as np
    import xarray as xr

    from ..analysis.ensemble import SaddleModes
    from ..field import Field
    from ..flow import BatchFlowResult
    from ..reduced import ReducedSystem
    from .ensemble import Config

__all__ = ["ROWS_FORMAT", "ROW_VARIABLES", "SAVE_DECADES", "TOTALS", "chunk_rows", "joined",
           "read_starts",
           "save_grid", "stored_rows", "thinned_rows"]

#: Version of the run file's rows (the ``rows_format`` attribute); a file written with another
#: is recomputed, not continued (3: ``off_structure`` leaves the inert entries out, ``off_inert``
#: holds them; the flat check's ``projected_grad_max`` and ``loss_gap``; chunks).
ROWS_FORMAT = 3
#: Decades of τ the save grid spans below the horizon: from ``t_end·10^−6`` (≈ 1e-3/c2 with the
#: automatic horizon, below the stiff end points' fastest relaxation) to ``t_end``.
SAVE_DECADES = 6.0
#: The per-row variables of a run file (``traj_t``, ``traj_theta`` too when ``n_save > 0``).
ROW_VARIABLES = ("theta0", "theta", "t", "loss", "grad_max", "status", "outcome", "ab",
                 "off_structure", "off_inert", "projected_grad_max", "loss_gap", "invariant",
                 "invariant0", "escape_time", "escape_predicted", "n_accepted", "n_rejected")
#: The solver's totals over every row, kept in the run file's attributes.
TOTALS = ("wall_s", "nfev", "njev", "n_calls")


def read_starts(path: str, n_params: int, what: str) -> np.ndarray:
    """The (N, ``n_params``) starts of an init file (``what`` names the layout in the message).

    ## Raises
    `MesadynError`: a file that cannot be read, holds anything but real numbers (a complex,
    boolean or string array is refused, never cast), has another shape or a non-finite entry.
    """
    import numpy as np

    from ..io import load_npy

    try:
        raw = load_npy(path)
    except (OSError, ValueError) as exc:
        raise MesadynError(f"cannot read init file {path!r}: {exc}") from None
    if raw.dtype.kind not in "fiu":
        raise MesadynError(f"init file {path!r} must hold real numbers (a float or integer "
                           f"array), got dtype {raw.dtype}")
    arr = np.asarray(raw, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != n_params or arr.shape[0] < 1:
        raise MesadynError(f"init file {path!r} must hold an array of shape "
                           f"(N >= 1, {n_params}){what}, got {arr.shape}")
    if not np.isfinite(arr).all():
        raise MesadynError(f"init file {path!r} has non-finite entries")
    return arr


def save_grid(t_end: float, n_save: int) -> np.ndarray:
    """The common save times of the thinned trajectories: τ = 0, then ``n_save − 1`` times
    log-spaced from ``t_end·10^−SAVE_DECADES`` to ``t_end`` (the last exactly ``t_end``).

    Log-spaced because the rows stop at very different times (a small start sits at the saddle
    for ``≈ ln(1/σ_w)/λ_top``, then relaxes on the fast scales of the end point's Hessian), so
    every row, whenever it stops, gets points on each decade it lived through; common, so the
    rows can be compared at equal τ.  A row's own end point is stored after its last grid point
    (:func:`thinned_rows`).
    """
    import numpy as np

    if n_save < 2:
        raise MesadynError(f"n_save must be >= 2 for a save grid, got n_save={n_save}")
    t_end = check_positive("t_end", t_end)
    logs = np.geomspace(t_end * 10.0 ** -SAVE_DECADES, t_end, n_save - 1) if n_save > 2 \
        else np.array([t_end])
    logs[-1] = t_end
    out: np.ndarray = np.concatenate([[0.0], logs])
    return out


def thinned_rows(grid: np.ndarray, t: np.ndarray, theta: np.ndarray,
                 theta_saved: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row thinned: its saves at the grid times strictly before its end ``t[k]``, then its
    end point ``(t[k], theta[k])``, then NaN (the rows stop at different times).

    ## Arguments
    - `grid`: (S,) increasing save times with ``grid[-1] >= t.max()`` (:func:`save_grid`).
    - `t`, `theta`: the rows' end times (M,) and end points (M, P).
    - `theta_saved`: (M, S, P), the rows at the grid times
      (:attr:`mesadyn.flow.BatchFlowResult.theta_saved`).

    ## Returns
    ``(traj_t, traj_theta)`` of shapes (M, S) and (M, S, P).
    """
    import numpy as np

    M, S = theta_saved.shape[:2]
    traj_t = np.full((M, S), np.nan)
    traj_theta = np.full(theta_saved.shape, np.nan)
    for k in range(M):
        m = int(np.searchsorted(grid, t[k], side="left"))  # grid points before the end
        traj_t[k, :m], traj_theta[k, :m] = grid[:m], theta_saved[k, :m]
        traj_t[k, m], traj_theta[k, m] = t[k], theta[k]
    return traj_t, traj_theta


def stored_rows(config: Config, th0: np.ndarray) -> xr.Dataset | None:
    """The rows of ``config.out`` this run keeps, or ``None`` (recompute and overwrite).

    Kept when :func:`~mesadyn.workflows.stored_run` holds it for this configuration (same
    command, version and run configuration) and the rows are whole: this rows format, every
    row variable along ``traj``, known outcomes and basins, the solver's totals, and the
    starts of this run (an init file rewritten since is recomputed).
    """
    import numpy as np

    from ..analysis.ensemble import Basin

    if config.out is None or config.recompute:
        return None
    try:
        old = stored_run(config.out, config)
    except ValueError:  # MesadynError: another run, version or file; or a config not JSON
        return None
    if old is None or old.attrs.get("rows_format") != ROWS_FORMAT:
        return None
    names = ROW_VARIABLES + (("traj_t", "traj_theta") if config.n_save else ())
    done = int(old.sizes.get("traj", 0))
    if (not 1 <= done <= th0.shape[0]
            or any(k not in old.data_vars or old[k].dims[:1] != ("traj",) for k in names)
            or old["theta0"].shape != (done, th0.shape[1])
            or not np.array_equal(old["theta0"].values, th0[:done])
            or not set(old["status"].values.astype(str)) <= {o.value for o in Outcome}
            or not set(old["outcome"].values.astype(str)) <= {b.value for b in Basin}
            or not all(isinstance(v, (int, float, np.integer, np.floating))
                       and not isinstance(v, (bool, np.bool_)) and 0 <= v < np.inf
                       for v in (old.attrs.get(k) for k in TOTALS))):
        return None
    return old


def chunk_rows(field_: Field, modes: SaddleModes, system: ReducedSystem | None,
               inert: np.ndarray, th0: np.ndarray, res: BatchFlowResult,
               grid: np.ndarray | None, *, steady_tol: float, predict: bool) -> xr.Dataset:
    """One chunk's rows: the batched solve ``res`` from the starts ``th0``, each end point
    classified (:func:`~mesadyn.analysis.ensemble.classify`, with the flat check at
    ``steady_tol``; a row held at a saddle is a critical point, so ``other``) and measured;
    the escape time predicted when ``predict`` (the Gaussian init with a reduced system); the
    trajectories thinned to ``grid`` when given."""
    import numpy as np
    import xarray as xr

    from ..analysis.ensemble import (
        classify,
        escape_time_prediction,
        flat_check,
        inert_size,
        off_structure,
    )
    from ..model import diagonal_entries, invariant

    p = None if system is None else system.ab_star
    pred = (escape_time_prediction(modes, system, th0)
            if system is not None and predict else np.full(len(th0), np.nan))
    with np.errstate(all="ignore"):  # a failed row's θ may overflow: its values are data
        flat = flat_check(field_, res.theta, steady_tol or 1e-8)
    # a row held at a saddle is a critical point too: its basin is where it is (``other``)
    stationary = res.converged | (res.status == Outcome.SADDLE.value)
    basin = classify(res.theta, stationary, p, inert=inert, flat=flat.flat)
    a, b = diagonal_entries(res.theta)
    traj: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}
    if grid is not None:
        assert res.theta_saved is not None
        tt, tth = thinned_rows(grid, res.t, res.theta, res.theta_saved)
        traj = {"traj_t": (("traj", "save"), tt),
                "traj_theta": (("traj", "save", "param"), tth)}
    return xr.Dataset(
        {"theta0": (("traj", "param"), th0), "theta": (("traj", "param"), res.theta),
         "t": ("traj", res.t), "loss": ("traj", res.loss),
         "grad_max": ("traj", res.grad_max), "status": ("traj", res.status.astype(str)),
         "outcome": ("traj", basin.astype(str)), "ab": (("traj", "coord"), a * b),
         "off_structure": ("traj", off_structure(res.theta, inert)),
         "off_inert": ("traj", inert_size(res.theta, inert)),
         "projected_grad_max": ("traj", flat.projected_grad_max),
         "loss_gap": ("traj", flat.loss_gap),
         "invariant": ("traj", invariant(res.theta)), "invariant0": ("traj", invariant(th0)),
         "escape_time": ("traj", res.event_t), "escape_predicted": ("traj", pred),
         "n_accepted": ("traj", res.n_accepted), "n_rejected": ("traj", res.n_rejected),
         **traj})


def joined(parts: list[xr.Dataset], attrs: dict[str, object],
           strings: tuple[str, ...] = ("status", "outcome")) -> xr.Dataset:
    """The chunks' rows as one Dataset along ``traj``, with the run's ``attrs`` (the
    ``strings`` variables stored as str)."""
    import xarray as xr

    ds = parts[0].copy() if len(parts) == 1 else xr.concat(parts, dim="traj")
    for name in strings:
        ds[name] = ("traj", ds[name].values.astype(str))
    ds.attrs = dict(attrs)
    return ds
