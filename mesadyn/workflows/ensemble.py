"""Many full-flow trajectories at once (``mesadyn ensemble``, issue 15).

Starts: the Gaussian init (every entry ``N(0, σ_w²)``, seeds ``seed .. seed+n−1``), Assumption
3.1's diagonal init on a grid of ``(a0, b0)`` (optionally perturbed by ``N(0, perturb²)`` on
every active entry), or the rows of a ``.npy`` file.  All rows are integrated in one batched
solve (:func:`mesadyn.flow.integrate_batch`: per-row error control and stopping at
``max|∇L| < steady_tol``); each end point is classified onto Theorems 4.1/4.3's fixed-point
sets (:mod:`mesadyn.analysis.ensemble`), with 95% Wilson intervals for the fractions; the
saddle-escape time (``mean_k a_k b_k = ab*/2``) is measured and, for the Gaussian init, predicted
from the linearisation at θ = 0 plus the reduced flow.  The run file (netCDF, ``out``) holds every
trajectory's summary and, with ``n_save > 0``, every trajectory thinned to the common save grid
:func:`save_grid` (``traj_t``, ``traj_theta``; each row's end point recorded after the grid
points before it, NaN past it).  The starts are integrated in chunks of ``chunk`` rows and the
run file is rewritten (atomically) after each chunk, so a run that stops — interrupted, or
failing — keeps the chunks it finished, and the same configuration run again continues from
the first missing row, with the same numbers an uninterrupted run gives (bit for bit).
:func:`sweep_sigma` runs one ensemble per σ_w (the outcome fractions against σ_w).

Example:
    >>> from mesadyn.workflows import ensemble
    >>> res = ensemble.run(ensemble.Config(d=2, T=6, n=4, sigma_w=1e-3))  # doctest: +SKIP
    >>> sw = ensemble.sweep_sigma(ensemble.Config(d=2, T=6, n=4), "1e-2,1e-4")  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from ..errors import MesadynError, check_int, check_positive
from ..progress import ProgressCallback
from ._common import ProcessOptions, choice, optional_path, set_fields

if TYPE_CHECKING:
    import numpy as np
    import xarray as xr

__all__ = ["DEFAULT_CHUNK", "SAVE_DECADES", "Config", "EnsembleInit", "Result", "SigmaSweep",
           "n_starts", "run", "save_grid", "sigma_out", "sigma_values", "sweep_sigma",
           "thinned_rows"]

KIND = "ensemble"
#: Version of the run file's rows; a file written with another is recomputed, not reused
#: (3: ``off_structure`` leaves the inert entries out, ``off_inert`` holds them; the flat check's
#: ``projected_grad_max`` and ``loss_gap``; chunks).
ROWS_FORMAT = 3
#: Rows per chunk: about 25 CPU-seconds at d = 3, T = 20 from σ_w = 1e-2 (≈ 0.12 s per row,
#: the Dormand–Prince stepper's ≈ 1100 steps), so a checkpoint is written every half minute or
#: so, while the batch stays large enough that Python's per-step overhead is shared out.
DEFAULT_CHUNK = 200
#: Decades of τ the save grid spans below the horizon: from ``t_end·10^−6`` (≈ 1e-3/c2 with the
#: automatic horizon, below the stiff end points' fastest relaxation) to ``t_end``.
SAVE_DECADES = 6.0


class EnsembleInit(StrEnum):
    """Where the starts come from."""

    gaussian = "gaussian"
    grid = "grid"
    file = "file"


def _floats(name: str, values: object) -> tuple[float, ...]:
    if isinstance(values, str):
        parts = [p for p in values.replace(" ", "").split(",") if p]
    elif isinstance(values, (list, tuple)):
        parts = list(values)
    else:
        raise MesadynError(f"{name} must be a list of numbers, got {values!r}")
    out = []
    for p in parts:
        try:
            v = float(p)
        except (TypeError, ValueError):
            raise MesadynError(f"{name} must be numbers, got {p!r}") from None
        if not math.isfinite(v):
            raise MesadynError(f"{name} must be finite, got {p!r}")
        out.append(v)
    return tuple(out)


@dataclass(frozen=True)
class Config(ProcessOptions):
    """An ensemble run (validated on construction; a bad value names itself).

    - `n`: trajectories (Gaussian init); `sigma_w`: their σ_w;
    - `grid_a`, `grid_b`: the (a0, b0) grid (init ``grid``; every pair), `perturb`: σ of a
      random perturbation of every active entry (0: none);
    - `init_file`: a ``.npy`` of shape (N, 18d²) (init ``file``);
    - `t_end`: the horizon (``None``: ``1000/c2 · max(1, ln(1/σ_w)/ln 100)``);
    - `rtol`, `atol`, `steady_tol`, `max_steps`: the batched solver's; `atol` is scaled by
      min(1, σ_w) for the Gaussian init so that tiny starts keep their relative accuracy;
    - `method`: the batched stepper (:class:`mesadyn.flow.BatchMethod`): ``dopri5`` (explicit
      Dormand–Prince, :func:`~mesadyn.flow.integrate_batch`'s default) or ``rodas4`` (the
      linearly implicit Rosenbrock RODAS4 with the exact Hessian; it pays at loose tolerances);
    - `chunk`: rows integrated per batched solve; the run file is written after each, and a
      rerun continues from the first missing row.  It is part of the configuration (a row's
      last bits can depend on which rows share its batch), so a different `chunk` recomputes;
    - `device`: the torch device of the exact field (``"cpu"``, ``"cuda"``, ``"cuda:0"``;
      validated like :class:`~mesadyn.field.FieldSpec`'s), or ``"auto"`` (CUDA if torch sees
      it, else the CPU; stored resolved).  A device this machine lacks is refused when the
      field is built, before any work.  Off the CPU the batched gradient is evaluated row by
      row (:func:`mesadyn.field.batched.batched_loss_and_grad`);
    - `n_save`: store every trajectory thinned to the ``n_save`` times of :func:`save_grid`
      (0: none, the default; else >= 2).  Part of the configuration when > 0, so a stored run
      without trajectories is not reused for one that asks for them;
    - `out`: the run file (.nc); `force`: recompute even if it holds this configuration.
    """

    d: int = 3
    T: int = 20
    init: str = "gaussian"
    n: int = 100
    sigma_w: float = 1e-2
    grid_a: tuple[float, ...] | str = ()
    grid_b: tuple[float, ...] | str = ()
    perturb: float = 0.0
    init_file: str | None = None
    t_end: float | None = None
    rtol: float = 1e-10
    atol: float = 1e-12
    steady_tol: float = 1e-8
    max_steps: int = 100_000
    method: str = "dopri5"
    chunk: int = DEFAULT_CHUNK
    device: str = "cpu"
    n_save: int = 0
    out: str | None = None
    force: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        init = choice("init", self.init, EnsembleInit)
        n = check_int("n", self.n, 1)
        sigma_w = check_positive("sigma_w", self.sigma_w)
        grid_a, grid_b = _floats("grid_a", self.grid_a), _floats("grid_b", self.grid_b)
        if init is EnsembleInit.grid and (not grid_a or not grid_b):
            raise MesadynError("the grid has no points: give grid_a and grid_b "
                               f"(got grid_a={self.grid_a!r}, grid_b={self.grid_b!r})")
        perturb = float(self.perturb)
        if not math.isfinite(perturb) or perturb < 0:
            raise MesadynError(f"perturb must be >= 0, got perturb={self.perturb!r}")
        init_file = optional_path("init_file", self.init_file)
        if init is EnsembleInit.file and init_file is None:
            raise MesadynError("init file: give init_file (a .npy of shape (N, 18d²))")
        n_save = check_int("n_save", self.n_save, 0)
        if n_save == 1:
            raise MesadynError(f"n_save must be 0 (none) or >= 2, got n_save={self.n_save!r}")
        steady = float(self.steady_tol)
        if not math.isfinite(steady) or steady < 0:
            raise MesadynError(f"steady_tol must be >= 0, got steady_tol={self.steady_tol!r}")
        self.check_diagonal("ensemble (it integrates the exact field)")
        from ..field import FieldSpec
        from ..flow import BatchMethod

        method = choice("method", self.method, BatchMethod)

        device = str(self.device)
        if device == "auto":  # as the other commands' --device auto: CUDA if torch sees it
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        FieldSpec("exact", self.family(), check_int("T", self.T, 3), device=device,
                  radius=self.radius)  # checks it
        set_fields(self, init=init, n=n, sigma_w=sigma_w, grid_a=grid_a, grid_b=grid_b,
                   perturb=perturb, init_file=init_file, steady_tol=steady,
                   t_end=None if self.t_end is None else check_positive("t_end", self.t_end),
                   rtol=check_positive("rtol", self.rtol), atol=check_positive("atol", self.atol),
                   max_steps=check_int("max_steps", self.max_steps, 1),
                   chunk=check_int("chunk", self.chunk, 1), device=device, method=method,
                   n_save=n_save,
                   out=optional_path("out", self.out), force=bool(self.force))
        if self.out is not None and not self.out.endswith((".nc", ".nc4")):
            raise MesadynError(f"run files are netCDF: give a path ending in .nc, got {self.out!r}")

    def run_config(self) -> dict[str, object]:
        """What the run file records (and what makes a stored run reusable).  ``n_save`` is
        recorded only when > 0, so the run files written before it existed stay reusable."""
        keys = ("x1", "sigma", "scale", "d", "T", "seed", "mu", "moments", "mixture", "radius",
                "init", "n", "sigma_w", "grid_a",
                "grid_b", "perturb", "init_file", "t_end", "rtol", "atol", "steady_tol",
                "max_steps", "method", "chunk", "device")
        return {"command": "ensemble", "rows_format": ROWS_FORMAT,
                **{k: (list(v) if isinstance(v, tuple) else str(v) if isinstance(v, StrEnum)
                       else v) for k in keys for v in [getattr(self, k)]},
                **({"n_save": self.n_save} if self.n_save else {})}


@dataclass(frozen=True)
class Result:
    """An ensemble's summary (``to_dict()`` is ``mesadyn ensemble --json``) and its rows.

    `reused`: every row came from the run file; `rows_reused`: how many did (a resumed run:
    ``0 < rows_reused < n``).  `n_inert`: entries the loss does not depend on
    (:func:`mesadyn.analysis.ensemble.inert_mask`), left out of the off-structure test;
    `off_inert_max`: the largest of them over all rows (their initial size: the flow never
    moves them).  `n_flat`: rows on a branch although their (reachable) off-structure exceeds
    the classifier's 1e-6, because their diagonal projection is a fixed point with the same
    loss (:func:`mesadyn.analysis.ensemble.flat_check`: a flat valley of the fixed-point set).
    """

    family: str
    d: int
    T: int
    n: int
    init: str
    sigma_w: float | None
    ab_star: float | None
    t_end: float
    fractions: dict[str, dict[str, float | int]]
    statuses: dict[str, int]
    lambda_top: float
    top_mode: dict[str, object]
    escape: dict[str, float | int | None]
    off_structure_max_converged: float | None
    ab_max_error_converged: float | None
    n_inert: int
    off_inert_max: float
    n_flat: int
    solver: dict[str, object]
    reused: bool
    rows_reused: int
    out: str | None
    rows: xr.Dataset = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, object]:
        return {"family": self.family, "d": self.d, "T": self.T, "n": self.n,
                "init": self.init, "sigma_w": self.sigma_w, "ab_star": self.ab_star,
                "t_end": self.t_end, "fractions": self.fractions, "statuses": self.statuses,
                "lambda_top": self.lambda_top, "top_mode": self.top_mode,
                "escape": self.escape,
                "off_structure_max_converged": self.off_structure_max_converged,
                "ab_max_error_converged": self.ab_max_error_converged,
                "n_inert": self.n_inert, "off_inert_max": self.off_inert_max,
                "n_flat": self.n_flat,
                "solver": self.solver, "reused": self.reused, "rows_reused": self.rows_reused,
                "out": self.out}


def n_starts(config: Config) -> int:
    """How many rows the configuration integrates (reads the shape of an init file)."""
    if config.init is EnsembleInit.gaussian:
        return config.n
    if config.init is EnsembleInit.grid:
        return len(config.grid_a) * len(config.grid_b)
    return int(initial_points(config).shape[0])


def initial_points(config: Config) -> np.ndarray:
    """The (N, 18d²) starts the configuration names."""
    import numpy as np
    import torch

    from ..model import active_mask, diagonal_init, gaussian_init, n_params

    d = config.d
    if config.init is EnsembleInit.gaussian:
        return torch.stack([gaussian_init(d, config.sigma_w, config.seed + k)
                            for k in range(config.n)]).numpy()
    if config.init is EnsembleInit.file:
        from ..io import load_npy

        assert config.init_file is not None
        try:
            arr = np.asarray(load_npy(config.init_file), dtype=np.float64)
        except (OSError, ValueError) as exc:
            raise MesadynError(f"cannot read init file {config.init_file!r}: {exc}") from None
        if arr.ndim != 2 or arr.shape[1] != n_params(d) or arr.shape[0] < 1:
            raise MesadynError(f"init file {config.init_file!r} must hold an array of shape "
                               f"(N >= 1, {n_params(d)}), got {arr.shape}")
        if not np.isfinite(arr).all():
            raise MesadynError(f"init file {config.init_file!r} has non-finite entries")
        return arr
    pts = np.stack([diagonal_init(d, a, b).numpy() for a in _floats("grid_a", config.grid_a)
                    for b in _floats("grid_b", config.grid_b)])
    if config.perturb > 0:
        rng = np.random.default_rng(config.seed)
        act = active_mask(d)
        pts[:, act] += config.perturb * rng.standard_normal((pts.shape[0], int(act.sum())))
    return pts


def _horizon(config: Config, c2: float) -> float:
    if config.t_end is not None:
        return config.t_end
    return 1000.0 / c2 * max(1.0, math.log(1.0 / config.sigma_w) / math.log(100.0))


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

    # Arguments
    - `grid`: (S,) increasing save times with ``grid[-1] >= t.max()`` (:func:`save_grid`).
    - `t`, `theta`: the rows' end times (M,) and end points (M, P).
    - `theta_saved`: (M, S, P), the rows at the grid times
      (:attr:`mesadyn.flow.BatchFlowResult.theta_saved`).

    # Returns
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


def _stored_rows(config: Config, want: dict[str, object], th0: np.ndarray) -> xr.Dataset | None:
    """The rows of ``config.out`` that this run can keep: its configuration and its starts
    must be this run's (an init file rewritten since is recomputed); ``None`` otherwise."""
    import numpy as np

    from ..io import load_run, run_config

    if config.out is None or config.force:
        return None
    from pathlib import Path

    if not Path(config.out).is_file():
        return None
    try:
        old = load_run(config.out, kind=KIND)
        if run_config(old) != want:
            return None
        done = int(old.sizes.get("traj", 0))
        if done > th0.shape[0] or not np.array_equal(old["theta0"].values, th0[:done]):
            return None
    except (MesadynError, KeyError, ValueError):
        return None
    return old


def run(config: Config, progress: ProgressCallback | None = None) -> Result:
    """Integrate the ensemble chunk by chunk (or continue / reuse its run file), classify and
    summarise it.

    `progress` is called with the number of rows done (fractional within a chunk).

    # Raises
    `MesadynError` for bad input, and for a chunk that fails: the message says at which row and
    why, and the run file keeps the chunks finished before it (run again to continue).
    `KeyboardInterrupt` is passed on, the finished chunks likewise kept.
    """
    import numpy as np
    import xarray as xr

    from ..analysis.ensemble import (
        classify,
        escape_time_prediction,
        flat_check,
        inert_mask,
        inert_size,
        off_structure,
        saddle_modes,
    )
    from ..field import FieldSpec, make_field
    from ..flow import integrate_batch
    from ..io import check_writable, save_run
    from ..model import diagonal_entries, invariant
    from ..process import NoReducedSystem
    from ..reduced import ReducedSystem

    if config.out is not None:
        check_writable(config.out, suffixes=(".nc", ".nc4"))
    fam = config.family()
    try:
        c = config.constants()
        system: ReducedSystem | None = ReducedSystem(c.c1, c.c2)
    except (NoReducedSystem, MesadynError):
        system = None
    field_ = make_field(FieldSpec("exact", fam, config.T, device=config.device,
                                  radius=config.radius))
    modes = saddle_modes(field_)
    inert = inert_mask(field_)
    c2 = system.c2 if system is not None else modes.lambda_top
    t_end = _horizon(config, c2)
    want = config.run_config()
    th0_all = initial_points(config)
    N = th0_all.shape[0]
    old = _stored_rows(config, want, th0_all)
    parts: list[xr.Dataset] = [] if old is None else [old]
    done = 0 if old is None else int(old.sizes["traj"])
    rows_reused = done
    totals = {"wall_s": 0.0, "nfev": 0, "n_calls": 0}
    if old is not None:
        totals = {k: type(v)(old.attrs.get(k, v)) for k, v in totals.items()}
    p = None if system is None else system.ab_star

    def half(th: np.ndarray) -> np.ndarray:
        a, b = diagonal_entries(th)
        out: np.ndarray = np.mean(a * b, axis=1) - (p if p is not None else np.inf) / 2
        return out

    def attrs() -> dict[str, object]:
        return {"t_end": t_end, "n_rows": N, **totals}

    scale = min(1.0, config.sigma_w) if config.init is EnsembleInit.gaussian else 1.0
    grid = save_grid(t_end, config.n_save) if config.n_save else None
    if progress is not None and done:
        progress(float(done))
    for start in range(done, N, config.chunk):
        stop = min(N, start + config.chunk)
        th0 = th0_all[start:stop]
        bar = None if progress is None else _shifted(progress, start, stop - start)
        try:
            res = integrate_batch(field_, th0, t_end=t_end, rtol=config.rtol,
                                  atol=config.atol * scale, steady_tol=config.steady_tol,
                                  max_steps=config.max_steps, event=half if p else None,
                                  progress=bar, method=config.method, t_save=grid)
        except Exception as exc:  # noqa: BLE001 - any failure: say where, keep the rows done
            if isinstance(exc, MesadynError) and start == done:
                raise  # bad input, refused before any work of this run
            kept = (f"{config.out!r} keeps rows 0..{start - 1}; run again to continue"
                    if config.out is not None and start else "no rows were kept")
            raise MesadynError(f"ensemble stopped at row {start} of {N} "
                               f"({type(exc).__name__}: {exc}); {kept}") from exc
        pred = (escape_time_prediction(modes, system, th0)
                if system is not None and config.init is EnsembleInit.gaussian
                else np.full(len(th0), np.nan))
        flat = flat_check(field_, res.theta, config.steady_tol or 1e-8)
        outcome = classify(res.theta, res.converged, p, inert=inert, flat=flat.flat)
        a, b = diagonal_entries(res.theta)
        traj: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}
        if grid is not None:
            assert res.theta_saved is not None
            tt, tth = thinned_rows(grid, res.t, res.theta, res.theta_saved)
            traj = {"traj_t": (("traj", "save"), tt),
                    "traj_theta": (("traj", "save", "param"), tth)}
        parts.append(xr.Dataset(
            {"theta0": (("traj", "param"), th0), "theta": (("traj", "param"), res.theta),
             "t": ("traj", res.t), "loss": ("traj", res.loss),
             "grad_max": ("traj", res.grad_max), "status": ("traj", res.status.astype(str)),
             "outcome": ("traj", outcome.astype(str)), "ab": (("traj", "coord"), a * b),
             "off_structure": ("traj", off_structure(res.theta, inert)),
             "off_inert": ("traj", inert_size(res.theta, inert)),
             "projected_grad_max": ("traj", flat.projected_grad_max),
             "loss_gap": ("traj", flat.loss_gap),
             "invariant": ("traj", invariant(res.theta)),
             "invariant0": ("traj", invariant(th0)),
             "escape_time": ("traj", res.event_t), "escape_predicted": ("traj", pred),
             "n_accepted": ("traj", res.n_accepted), "n_rejected": ("traj", res.n_rejected),
             **traj}))
        totals["wall_s"] += res.wall_s
        totals["nfev"] += res.nfev
        totals["n_calls"] += res.n_calls
        if config.out is not None:
            save_run(_joined(parts, attrs()), config.out, kind=KIND, config=want,
                     seed=config.seed)
    ds = _joined(parts, attrs())
    return _summarise(config, fam.name, system, modes, int(inert.sum()), t_end, ds,
                      rows_reused)


def _shifted(progress: ProgressCallback, start: int, size: int) -> ProgressCallback:
    """A chunk's fraction of rows done as the run's number of rows done."""
    def update(x: float) -> None:
        progress(start + x * size)
    return update


def _joined(parts: list[xr.Dataset], attrs: dict[str, object]) -> xr.Dataset:
    import xarray as xr

    ds = parts[0].copy() if len(parts) == 1 else xr.concat(parts, dim="traj")
    for name in ("status", "outcome"):
        ds[name] = ("traj", ds[name].values.astype(str))
    ds.attrs = dict(attrs)
    return ds


def sigma_out(out: str | None, sigma_w: float) -> str | None:
    """The run file of one σ_w in a sweep: ``ens.nc`` → ``ens-sigma_w0.01.nc``."""
    if out is None:
        return None
    from pathlib import Path

    p = Path(out)
    return str(p.with_name(f"{p.stem}-sigma_w{sigma_w:g}{p.suffix}"))


@dataclass(frozen=True)
class SigmaSweep:
    """One ensemble per σ_w (:func:`sweep_sigma`); ``to_dict()`` is the CLI's ``--json``."""

    sigma_w: tuple[float, ...]
    runs: tuple[Result, ...]

    def fractions(self) -> dict[str, list[dict[str, float | int]]]:
        """Each outcome's fraction (with its Wilson interval) per σ_w, in σ_w order."""
        return {k: [r.fractions[k] for r in self.runs] for k in self.runs[0].fractions}

    def to_dict(self) -> dict[str, object]:
        return {"sigma_w": list(self.sigma_w), "runs": [r.to_dict() for r in self.runs]}


def sigma_values(sigma_ws: object) -> tuple[float, ...]:
    """σ_w values from a list or a comma-separated string: at least one, each > 0, distinct."""
    values = _floats("sigma_w", sigma_ws)
    if not values:
        raise MesadynError(f"sigma_w: give at least one value, got {sigma_ws!r}")
    for v in values:
        check_positive("sigma_w", v)
    if len(set(values)) != len(values):
        raise MesadynError(f"sigma_w values must differ, got {sigma_ws!r}")
    return values


def sweep_sigma(config: Config, sigma_ws: object,
                progress: ProgressCallback | None = None) -> SigmaSweep:
    """Run (or read, or continue) one Gaussian-init ensemble per σ_w in `sigma_ws` (a list or a
    comma-separated string): ``config`` with ``sigma_w`` replaced and the run file
    :func:`sigma_out` (``ens.nc`` → ``ens-sigma_w0.01.nc``).  `progress` gets the number of
    rows done over all of them.

    # Raises
    `MesadynError` for an empty or non-positive list, a repeated value, or an init other than
    ``gaussian``.
    """
    values = sigma_values(sigma_ws)
    if config.init is not EnsembleInit.gaussian:
        raise MesadynError(f"a sweep over sigma_w needs init='gaussian', got {config.init!r}")
    configs = [dataclasses.replace(config, sigma_w=v, out=sigma_out(config.out, v))
               for v in values]
    runs = []
    for k, cfg in enumerate(configs):
        bar = None if progress is None else _shifted(progress, k * cfg.n, 1)
        runs.append(run(cfg, progress=bar))
    return SigmaSweep(sigma_w=values, runs=tuple(runs))


def _summarise(config: Config, family: str, system: object, modes: object, n_inert: int,
               t_end: float, ds: xr.Dataset, rows_reused: int) -> Result:
    import numpy as np

    from ..analysis.ensemble import OFF_TOL, SaddleModes, fractions
    from ..reduced import ReducedSystem

    assert isinstance(modes, SaddleModes)
    p = system.ab_star if isinstance(system, ReducedSystem) else None
    outcome = ds["outcome"].values.astype(str)
    status = ds["status"].values.astype(str)
    conv = status == "converged"
    esc, pred = ds["escape_time"].values, ds["escape_predicted"].values
    ok = np.isfinite(esc) & np.isfinite(pred)
    rel = np.abs(esc[ok] - pred[ok]) / pred[ok]
    escape: dict[str, float | int | None] = {
        "measured_median": float(np.median(esc[np.isfinite(esc)])) if np.isfinite(esc).any()
        else None,
        "predicted_median": float(np.median(pred[np.isfinite(pred)]))
        if np.isfinite(pred).any() else None,
        "median_relative_error": float(np.median(rel)) if rel.size else None,
        "max_relative_error": float(np.max(rel)) if rel.size else None,
        "n_escaped": int(np.isfinite(esc).sum())}
    ab = ds["ab"].values
    n = int(len(outcome))
    return Result(
        family=family, d=config.d, T=config.T, n=n, init=str(config.init),
        sigma_w=config.sigma_w if config.init is EnsembleInit.gaussian else None,
        ab_star=p, t_end=t_end,
        fractions={k: v.to_dict() for k, v in fractions(outcome).items()},
        statuses={str(s): int(np.sum(status == s)) for s in np.unique(status)},
        lambda_top=modes.lambda_top, top_mode=modes.to_dict(), escape=escape,
        off_structure_max_converged=float(ds["off_structure"].values[conv].max())
        if conv.any() else None,
        ab_max_error_converged=float(np.max(np.abs(ab[conv] - p))) if conv.any() and p
        else None,
        n_inert=n_inert, off_inert_max=float(ds["off_inert"].values.max()),
        n_flat=int(np.sum(np.char.startswith(outcome, "branch")
                          & (ds["off_structure"].values > OFF_TOL))),
        solver={"solver": f"batched:{config.method}", "method": str(config.method),
                "rtol": config.rtol, "atol": config.atol,
                "steady_tol": config.steady_tol, "chunk": config.chunk,
                "n_save": config.n_save,
                "device": config.device, "wall_s": float(ds.attrs["wall_s"]),
                "nfev": int(ds.attrs["nfev"]), "n_calls": int(ds.attrs["n_calls"])},
        reused=rows_reused == n, rows_reused=rows_reused, out=config.out, rows=ds)
