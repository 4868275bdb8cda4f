"""An ensemble of a model other than the paper's (``mesadyn ensemble --model ...``).

The starts are :class:`~mesadyn.models.Model`'s own: the Gaussian init (every entry
``N(0, σ_w²)``, seeds ``seed .. seed+n−1``, :meth:`~mesadyn.models.Model.gaussian_init`), the
layered diagonal init on a grid of ``(a0, b0)`` (:meth:`~mesadyn.models.Model.diagonal_init`,
optionally perturbed by ``N(0, perturb²)`` on the model's active entries) or the rows of a
``.npy`` file of shape ``(N, model.n_params(d))``.  Each row is integrated by the model flow
(:func:`._model_flow.model_flow`), the path ``mesadyn integrate --model ...`` takes, with the
same fixed-subspace basis (:func:`._model_runs.flow_basis`), so a row ends where that command
ends from the same start.  A row the steady-state test stops is judged by
:func:`mesadyn.analysis.model_ensemble.stop_verdict`; at a saddle it is continued from there
without the test to its horizon (as the paper's ensemble does) and judged again: a row still
at a saddle is ``saddle``, never ``converged``.  The end points are described in the model's
own terms and the converged ones grouped into distinct fixed points by their loss
(:mod:`mesadyn.analysis.model_ensemble`).

Rows are integrated one by one and the run file is written after every ``chunk`` rows; the
same configuration run again continues from the first missing row
(:func:`~mesadyn.workflows.stored_run`'s rule) with the numbers an uninterrupted run gives.
The run is priced before a start is drawn (:func:`check_model_cost`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import hidden
from ._ensemble_rows import joined
from ._run import RunResult, stored_run, write_run

if TYPE_CHECKING:
    import numpy as np
    import xarray as xr

    from ..analysis.model_ensemble import FixedPoint
    from ..field import Field, FieldSpec
    from ..models import Model
    from .ensemble import Config

__all__ = ["HESSIANS_PER_ROW", "MODEL_CHUNK", "MODEL_ROWS_FORMAT",
           "MODEL_ROW_VARIABLES", "ModelEnsembleResult", "check_model_cost", "model_horizon",
           "model_starts", "run_model"]

#: Rows per checkpoint of a model's ensemble (rows run one by one, each seconds or more).
MODEL_CHUNK = 10
#: Version of a model ensemble's rows (the run file's ``model_rows_format`` attribute); a file
#: written with another is recomputed, not continued.
MODEL_ROWS_FORMAT = 1
#: The per-row variables of a model ensemble's run file (``group`` is added at the end).
MODEL_ROW_VARIABLES = ("theta0", "theta", "t", "loss", "grad_max", "status", "message", "ab",
                       "invariants", "invariants0", "invariant_drift", "off_diagonal",
                       "off_inactive", "lambda_min", "n_negative", "t_saddle", "subspace",
                       "leak", "nfev", "njev", "wall_s")
#: The row variables kept as str in the run file.
ROW_STRINGS = ("status", "message")
#: The totals kept in the run file's attributes.
MODEL_TOTALS = ("wall_s", "nfev", "njev")
#: Hessians a row takes at least: one Jacobian of the implicit solver and the verdict's.
HESSIANS_PER_ROW = 2


def model_horizon(config: Config) -> float:
    """The horizon of every row: ``t_end``, or :data:`._model_runs.MODEL_T_END` (the model
    flow's, as ``integrate --model``) times ``max(1, ln(1/σ_w)/ln 100)`` for the Gaussian init
    (a start of size σ_w leaves the saddle at θ = 0 in a time ∝ ln(1/σ_w))."""
    from ._model_runs import MODEL_T_END

    if config.t_end is not None:
        return float(config.t_end)
    if str(config.init) == "gaussian":
        return MODEL_T_END * max(1.0, math.log(1.0 / config.sigma_w) / math.log(100.0))
    return MODEL_T_END


def _spec(config: Config) -> FieldSpec:
    spec: FieldSpec = config.sampled_spec(config.field, samples=config.samples, m=config.m)
    return spec


def check_model_cost(config: Config, n: int) -> None:
    """Refuse an ensemble of ``n`` rows of ``config.attention()`` that does not fit, or that is
    expected above :data:`~mesadyn.workflows._cost.COST_LIMIT_S` unless ``config.force``,
    before a start is drawn or a field built (:func:`mesadyn.budget.check`).

    A row costs at least :data:`~mesadyn.workflows._cost.MIN_FULL_FLOW_EVALS` gradients and
    :data:`HESSIANS_PER_ROW` Hessians (one Hessian-vector product per active entry), priced by
    the one rule of a model's fields (:func:`._cost.model_cost`).
    Memory: the rows kept (θ0 and θ and a few numbers each) and one Hessian.
    """
    from ..budget import Estimate, check
    from ._cost import COST_LIMIT_S, MIN_FULL_FLOW_EVALS, model_cost

    model = config.attention()
    d, P = config.d, model.n_params(config.d)
    cost = model_cost(_spec(config))
    row = (MIN_FULL_FLOW_EVALS * cost.gradient
           + HESSIANS_PER_ROW * cost.hessian(int(model.active_mask(d).sum())))
    rows = n * (2 * P + 2 * d + 4 * model.layers + 16) * 8
    check(Estimate(f"an ensemble of n={n} rows of the {model} model at d={d}, T={config.T} "
                   f"({config.field} field)", rows + 3 * P * P * 8, seconds=n * row,
                   advice="use fewer starts, a smaller d or T"),
          force=config.force, time_limit=COST_LIMIT_S)


def model_starts(config: Config) -> np.ndarray:
    """The (N, ``model.n_params(d)``) starts of ``config`` (module docstring), priced before
    any is drawn (an init file: once it is read).

    ## Raises
    `MesadynError`: starts that do not fit, an init file that cannot be read, holds anything
    but real numbers, has the wrong shape for the model or a non-finite entry.
    """
    import numpy as np

    from ._ensemble_rows import read_starts

    model = config.attention()
    d, P = config.d, model.n_params(config.d)
    init = str(config.init)
    if init == "gaussian":
        check_model_cost(config, config.n)
        return np.stack([model.gaussian_init(d, config.sigma_w, config.seed + k).numpy()
                         for k in range(config.n)])
    if init == "grid":
        check_model_cost(config, len(config.grid_a) * len(config.grid_b))
        pts = np.stack([model.diagonal_init(d, float(a), float(b)).numpy()
                        for a in config.grid_a for b in config.grid_b])
        if config.perturb > 0:
            act = model.active_mask(d)
            rng = np.random.default_rng(config.seed)
            pts[:, act] += config.perturb * rng.standard_normal((pts.shape[0], int(act.sum())))
        return pts
    assert config.init_file is not None
    arr = read_starts(config.init_file, P, f" for the {model} model at d={d}")
    check_model_cost(config, int(arr.shape[0]))
    return arr


@dataclass(frozen=True)
class ModelEnsembleResult(RunResult):
    """A model ensemble's summary (``to_dict()`` is ``mesadyn ensemble --model ... --json``).

    `statuses`: how many rows ended with each :class:`~mesadyn.outcome.Outcome`; `status`
    combines them (:meth:`~mesadyn.outcome.Outcome.combine`).  `fixed_points`: the distinct
    fixed points the converged rows reached (:class:`~mesadyn.analysis.model_ensemble.
    FixedPoint`, lowest loss first), grouped by loss within `loss_rtol`; `fractions`: the
    fraction of rows (95% Wilson) at each fixed point and with each other outcome.
    `n_continued`: rows stopped at a saddle and continued to their horizon; `n_subspace`:
    rows whose flow ran in the fixed subspace of the loss's coordinate symmetry, with the
    largest gradient entry off it `subspace_leak_max`; `invariant_drift_max`: the largest
    change of a per-layer invariant over every finite row (``None``: the model conserves
    none); `off_inactive_max`: the largest inactive entry (never moved).  `rows` (not in
    ``to_dict()``): one row per trajectory, the run file's arrays.
    """

    family: str
    d: int
    T: int
    model: str
    layers: int
    field: dict[str, Any]
    n: int
    init: str
    sigma_w: float | None
    t_end: float
    n_params: int
    n_active: int
    fractions: dict[str, dict[str, float | int]]
    statuses: dict[str, int]
    fixed_points: list[FixedPoint]
    loss_rtol: float
    n_continued: int
    n_subspace: int
    subspace_leak_max: float | None
    invariant_drift_max: float | None
    off_inactive_max: float
    solver: dict[str, object]
    reused: bool
    rows_reused: int
    out: str | None
    rows: xr.Dataset = hidden()

    def to_dataset(self) -> xr.Dataset:
        """The rows: what the run file holds besides the ``--json`` object."""
        return self.rows.copy()


def _model_field(config: Config) -> Field:
    from ..field import make_field

    fld = make_field(_spec(config))
    fld.prepare(None)
    return fld


def _flow(fld: Field, theta0: np.ndarray, free: np.ndarray, basis: np.ndarray | None,
          config: Config, *, t_end: float, atol: float, steady_tol: float, max_steps: int,
          progress: ProgressCallback | None) -> Any:
    from ._model_flow import model_flow

    return model_flow(fld, theta0, free, t_end=t_end, solver=config.solver, rtol=config.rtol,
                      atol=atol, steady_tol=steady_tol, max_steps=max_steps, n_save=2,
                      basis=basis, progress=progress)


def _row(fld: Field, model: Model, spec: FieldSpec, config: Config, theta0: np.ndarray,
         free: np.ndarray, t_end: float, atol: float,
         progress: ProgressCallback | None) -> dict[str, Any]:
    """One row: the model flow from ``theta0`` (``integrate --model``'s path), judged where
    the steady-state test stopped it; at a saddle continued without the test to ``t_end``
    (``max_steps`` gradients in all) and judged again."""
    from ..analysis.model_ensemble import stop_verdict
    from ._model_runs import flow_basis

    start = time.perf_counter()
    steady = config.steady_tol

    def bar(offset: float) -> ProgressCallback | None:
        if progress is None:
            return None
        seen = [0.0]

        def report(t: float) -> None:
            seen[0] = max(seen[0], min(1.0, (offset + t) / t_end))
            progress(seen[0])
        return report

    diverged = _diverged_at_start(fld, theta0, free, start)
    if diverged is not None:
        return diverged
    basis = flow_basis(model, spec, theta0, free)
    path = _flow(fld, theta0, free, basis, config, t_end=t_end, atol=atol, steady_tol=steady,
                 max_steps=config.max_steps, progress=bar(0.0))
    status, message = path.status, path.message
    theta, t = path.final, float(path.t[-1])
    loss, gmax = float(path.loss[-1]), float(path.grad_max[-1])
    nfev, njev = path.nfev, path.njev
    leak = path.leak
    t_saddle = math.nan
    curv = None

    def stopped() -> bool:
        return status is Outcome.CONVERGED or (status is Outcome.T_END and steady > 0
                                               and gmax < steady)

    if stopped():
        status, curv, said = stop_verdict(fld, model, theta, free, at_start=t <= 0.0)
        message = f"{message}; {said}"
        left = config.max_steps - nfev
        if status is Outcome.SADDLE and t < t_end and left > 0:
            t_saddle = t
            more = _flow(fld, theta, free, flow_basis(model, spec, theta, free), config,
                         t_end=t_end - t, atol=atol, steady_tol=0.0, max_steps=left,
                         progress=bar(t))
            status, theta = more.status, more.final
            t += float(more.t[-1])
            loss, gmax = float(more.loss[-1]), float(more.grad_max[-1])
            nfev, njev = nfev + more.nfev, njev + more.njev
            if more.leak is not None:
                leak = max(leak or 0.0, more.leak)
            message = (f"stopped at a saddle at τ={t_saddle:.6g} and continued without the "
                       f"steady-state test: {more.message} (τ counted from there)")
            curv = None
            if stopped():
                status, curv, said = stop_verdict(fld, model, theta, free, at_start=False)
                message = f"{message}; {said}"
    return {"theta": theta, "t": t, "loss": loss, "grad_max": gmax, "status": status.value,
            "message": message,
            "lambda_min": math.nan if curv is None else curv.lambda_min,
            "n_negative": -1 if curv is None else curv.n_negative, "t_saddle": t_saddle,
            "subspace": 0 if path.subspace is None else int(path.subspace),
            "leak": math.nan if leak is None else float(leak), "nfev": int(nfev),
            "njev": int(njev), "wall_s": time.perf_counter() - start}


def _diverged_at_start(fld: Field, theta0: np.ndarray, free: np.ndarray,
                       start: float) -> dict[str, Any] | None:
    """The row of a start where the loss or its gradient is not finite (``diverged`` at
    τ = 0: the flow cannot take a step), or ``None``."""
    import numpy as np
    import torch

    with np.errstate(all="ignore"):
        L, g = fld.loss_and_grad(torch.from_numpy(np.ascontiguousarray(theta0)))
        gf = g.detach().cpu().numpy()[free]
        if np.isfinite(float(L)) and np.isfinite(gf).all():
            return None
        gmax = float(np.max(np.abs(gf)))
    return {"theta": np.array(theta0, dtype=np.float64), "t": 0.0, "loss": float(L),
            "grad_max": gmax, "status": Outcome.DIVERGED.value,
            "message": "the loss or its gradient is not finite at the start",
            "lambda_min": math.nan, "n_negative": -1, "t_saddle": math.nan, "subspace": 0,
            "leak": math.nan, "nfev": 1, "njev": 0, "wall_s": time.perf_counter() - start}


def _chunk(model: Model, th0: np.ndarray, rows: list[dict[str, Any]]) -> xr.Dataset:
    """The rows of one chunk as a Dataset along ``traj``."""
    import numpy as np
    import xarray as xr

    from ..analysis.model_ensemble import end_geometry

    theta = np.stack([r["theta"] for r in rows])
    geo = end_geometry(model, th0, theta)
    scalars = {k: ("traj", np.asarray([r[k] for r in rows]))
               for k in ("t", "loss", "grad_max", "lambda_min", "n_negative", "t_saddle",
                         "subspace", "leak", "nfev", "njev", "wall_s")}
    return xr.Dataset({
        "theta0": (("traj", "param"), th0), "theta": (("traj", "param"), theta),
        "status": ("traj", np.asarray([r["status"] for r in rows], dtype=str)),
        "message": ("traj", np.asarray([r["message"] for r in rows], dtype=str)),
        "ab": (("traj", "coord"), geo["ab"]),
        "invariants": (("traj", "layer"), geo["invariants"]),
        "invariants0": (("traj", "layer"), geo["invariants0"]),
        "invariant_drift": ("traj", geo["invariant_drift"]),
        "off_diagonal": ("traj", geo["off_diagonal"]),
        "off_inactive": ("traj", geo["off_inactive"]), **scalars})


def _stored(config: Config, th0: np.ndarray) -> xr.Dataset | None:
    """The rows of ``config.out`` this run keeps, or ``None`` (recompute and overwrite): the
    one reuse rule (:func:`~mesadyn.workflows.stored_run`), then this rows format, every row
    variable along ``traj``, known outcomes, the totals and the starts of this run."""
    import numpy as np

    if config.out is None or config.recompute:
        return None
    try:
        old = stored_run(config.out, config)
    except ValueError:  # MesadynError: another run, version or file
        return None
    if old is None or old.attrs.get("model_rows_format") != MODEL_ROWS_FORMAT:
        return None
    done = int(old.sizes.get("traj", 0))
    if (not 1 <= done <= th0.shape[0]
            or any(k not in old.data_vars or old[k].dims[:1] != ("traj",)
                   for k in MODEL_ROW_VARIABLES)
            or old["theta0"].shape != (done, th0.shape[1])
            or not np.array_equal(old["theta0"].values, th0[:done])
            or not set(old["status"].values.astype(str)) <= {o.value for o in Outcome}
            or not all(isinstance(v, (int, float, np.integer, np.floating))
                       and not isinstance(v, (bool, np.bool_)) and 0 <= v < np.inf
                       for v in (old.attrs.get(k) for k in MODEL_TOTALS))):
        return None
    return old.drop_vars([k for k in old.data_vars if k not in MODEL_ROW_VARIABLES])


def run_model(config: Config, progress: ProgressCallback | None = None) -> ModelEnsembleResult:
    """The ensemble of ``config.attention()`` (module docstring); the run file (``out``) is
    written after every ``chunk`` rows and at the end; `progress` gets the rows done
    (fractional within a row).

    ## Raises
    `MesadynError` for bad input, and for a row that fails: the message says which and why,
    and the run file keeps the chunks finished before it.  `KeyboardInterrupt` is passed on,
    the finished chunks likewise kept.
    """
    from ..io import check_writable, clean_stale_tmp, save_run

    if config.out is not None:  # before any work; and the temporary files a killed run left
        clean_stale_tmp(check_writable(config.out, suffixes=config.OUT_SUFFIXES).parent)
    model = config.attention()
    th0_all = model_starts(config)  # priced before a start is drawn
    N = int(th0_all.shape[0])
    spec = _spec(config)
    fld = _model_field(config)
    free = model.free_mask("none", config.d)
    t_end = model_horizon(config)
    atol = config.atol * (min(1.0, config.sigma_w) if str(config.init) == "gaussian" else 1.0)
    old = _stored(config, th0_all)
    parts: list[xr.Dataset] = [] if old is None else [old]
    done = 0 if old is None else int(old.sizes["traj"])
    totals = {k: 0.0 if old is None else float(old.attrs[k]) for k in MODEL_TOTALS}

    def attrs() -> dict[str, object]:
        return {"t_end": t_end, "n_rows": N, "model_rows_format": MODEL_ROWS_FORMAT,
                **{k: v if k == "wall_s" else int(v) for k, v in totals.items()}}

    if progress is not None and done:
        progress(float(done))
    for start in range(done, N, config.rows_per_chunk):
        stop = min(N, start + config.rows_per_chunk)
        rows = []
        for k in range(start, stop):
            bar = None if progress is None else _shifted(progress, k)
            try:
                rows.append(_row(fld, model, spec, config, th0_all[k], free, t_end, atol, bar))
            except Exception as exc:  # noqa: BLE001 - any failure: say where, keep the rows done
                kept = (f"{config.out!r} keeps rows 0..{start - 1}; run again to continue"
                        if config.out is not None and start else "no rows were kept")
                raise MesadynError(f"ensemble stopped at row {k} of {N} "
                                   f"({type(exc).__name__}: {exc}); {kept}") from exc
            if progress is not None:
                progress(float(k + 1))
        parts.append(_chunk(model, th0_all[start:stop], rows))
        totals["wall_s"] += sum(r["wall_s"] for r in rows)
        totals["nfev"] += sum(r["nfev"] for r in rows)
        totals["njev"] += sum(r["njev"] for r in rows)
        if config.out is not None and stop < N:  # the last chunk is written with the result
            save_run(joined(parts, attrs(), ROW_STRINGS), config.out, kind=config.COMMAND,
                     config=config.run_config(), seed=config.seed)
    result = _summarise(config, model, fld, t_end, joined(parts, attrs(), ROW_STRINGS), done)
    return write_run(config, result)


def _shifted(progress: ProgressCallback, row: int) -> ProgressCallback:
    """A row's fraction done as the run's number of rows done."""
    def update(x: float) -> None:
        progress(row + x)
    return update


def _summarise(config: Config, model: Model, fld: Field, t_end: float, ds: xr.Dataset,
               rows_reused: int) -> ModelEnsembleResult:
    """The :class:`ModelEnsembleResult` of the rows ``ds`` (the fixed points grouped here, the
    group of every row added to ``ds`` as ``group``)."""
    import numpy as np

    from ..analysis.model_ensemble import LOSS_RTOL, fixed_points, fractions, group_by_loss
    from ._model_flow import check_model_solver

    status = ds["status"].values.astype(str)
    conv = status == Outcome.CONVERGED.value
    loss = ds["loss"].values
    group = group_by_loss(loss, conv)
    ds["group"] = ("traj", group)
    points = fixed_points(group, loss, ds["ab"].values, ds["grad_max"].values,
                          ds["off_diagonal"].values, ds["lambda_min"].values)
    n = int(len(status))
    counts = Outcome.counts(status.tolist())
    ok = {o.value for o in Outcome if o.ok}
    failed = sum(k for s, k in counts.items() if s not in ok)
    said = ", ".join(f"{k} {s}" for s, k in counts.items())
    found = f"; {len(points)} distinct fixed point(s)" if points else ""
    message = (f"{n} trajectories: {said}{found}" if not failed
               else f"{failed} of {n} trajectories failed ({said}){found}")
    drift = ds["invariant_drift"].values
    sub = ds["subspace"].values > 0
    leak = ds["leak"].values[sub]
    return ModelEnsembleResult(
        family=config.family().name, d=config.d, T=config.T, model=model.name,
        layers=model.layers, field=dict(fld.describe()), n=n, init=str(config.init),
        sigma_w=config.sigma_w if str(config.init) == "gaussian" else None, t_end=t_end,
        n_params=model.n_params(config.d), n_active=int(model.active_mask(config.d).sum()),
        fractions=fractions(group, status), statuses=counts, fixed_points=points,
        loss_rtol=LOSS_RTOL, n_continued=int(np.isfinite(ds["t_saddle"].values).sum()),
        n_subspace=int(sub.sum()),
        subspace_leak_max=float(np.nanmax(leak)) if np.isfinite(leak).any() else None,
        invariant_drift_max=float(np.nanmax(drift)) if np.isfinite(drift).any() else None,
        off_inactive_max=float(ds["off_inactive"].values.max()),
        solver={"solver": f"scipy:{check_model_solver(config.solver)}", "rtol": config.rtol,
                "atol": config.atol, "steady_tol": config.steady_tol,
                "max_steps": config.max_steps, "chunk": config.rows_per_chunk,
                "device": config.torch_device, "wall_s": float(ds.attrs["wall_s"]),
                "nfev": int(ds.attrs["nfev"]), "njev": int(ds.attrs["njev"])},
        reused=rows_reused == n, rows_reused=rows_reused, out=config.out, rows=ds,
        status=Outcome.combine(counts), message=message)
