"""Many full-flow trajectories at once (``mesadyn ensemble``).

Starts: the Gaussian init (every entry ``N(0, σ_w²)``, seeds ``seed .. seed+n−1``), Assumption
3.1's diagonal init on a grid of ``(a0, b0)`` (optionally perturbed by ``N(0, perturb²)`` on
every active entry), or the rows of a ``.npy`` file.  All rows are integrated in one batched
solve (:func:`mesadyn.flow.integrate_batch`: per-row error control and stopping at
``max|∇L| < steady_tol`` at a minimum: a row the test would stop at a saddle — negative
curvature, :func:`~mesadyn.analysis.steady.saddle_verdict` — integrates on, and one still
there at the horizon is ``saddle``, a failure); each end point's
:class:`~mesadyn.analysis.ensemble.Basin` (Theorems 4.1/4.3's fixed-point sets) is counted
with 95% Wilson intervals; the saddle-escape time (``mean_k a_k b_k = ab*/2``) is measured
and, for the Gaussian init, predicted from the linearisation at θ = 0 plus the reduced flow.
``status`` combines the trajectories' outcomes (:meth:`~mesadyn.outcome.Outcome.combine`): one
failed trajectory fails the ensemble.

The run file (``out``) holds every trajectory's summary and, with ``n_save > 0``, every
trajectory thinned to the common grid :func:`save_grid`.  The starts are integrated in chunks
of ``chunk`` rows and the run file is rewritten (atomically) after each, so a run that stops
keeps the chunks it finished, and the same configuration run again continues from the first
missing row (:func:`~mesadyn.workflows.stored_run`'s rule, and the same starts) with the numbers
an uninterrupted run gives, bit for bit.  One ensemble per σ_w: :func:`mesadyn.sweep.sweep_sigma`.

A model other than the paper's (``model``, ``layers``: :class:`~mesadyn.models.Model`) runs
row by row through its own flow and is described in its own terms
(:mod:`._model_ensemble`, :class:`ModelEnsembleResult`): the paper's basins are Theorems
4.1/4.3's, so its rows are grouped into distinct fixed points by their loss instead.

Example:
    ```python
    from mesadyn.workflows import ensemble

    res = ensemble.run(ensemble.Config(d=2, T=6, n=4, sigma_w=1e-3))
    res.status, res.fractions["branch_plus"]["fraction"]
    ```
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from ..errors import MesadynError, check_bool, check_choice, check_finite, check_int, check_positive
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import hidden
from ._common import optional_path, set_fields
from ._ensemble_rows import ROWS_FORMAT as ROWS_FORMAT
from ._ensemble_rows import SAVE_DECADES as SAVE_DECADES
from ._ensemble_rows import TOTALS, chunk_rows, joined, read_starts, stored_rows
from ._ensemble_rows import save_grid as save_grid
from ._ensemble_rows import thinned_rows as thinned_rows
from ._model_ensemble import MODEL_CHUNK as MODEL_CHUNK
from ._model_ensemble import ModelEnsembleResult as ModelEnsembleResult
from ._run import NOT_RECORDED, DeviceOptions, RunResult, write_run

if TYPE_CHECKING:
    import numpy as np
    import xarray as xr

    from ..analysis.ensemble import SaddleModes
    from ..flow import SolverStats
    from ..reduced import ReducedSystem

__all__ = ["DEFAULT_CHUNK", "MODEL_CHUNK", "ROWS_FORMAT", "SAVE_DECADES", "BasinResult",
           "Config", "EnsembleInit", "ModelEnsembleResult", "Result", "check_size",
           "initial_points", "n_starts", "run", "save_grid", "thinned_rows"]

#: Rows per chunk: about 25 CPU-seconds at d = 3, T = 20 from σ_w = 1e-2 (≈ 0.12 s per row,
#: the Dormand–Prince stepper's ≈ 1100 steps), so a checkpoint is written every half minute or
#: so, while the batch stays large enough that Python's per-step overhead is shared out.
DEFAULT_CHUNK = 200


class EnsembleInit(StrEnum):
    """Where the starts come from."""

    GAUSSIAN = "gaussian"
    GRID = "grid"
    FILE = "file"


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
class Config(DeviceOptions):
    """An ensemble run (validated on construction; a bad value names itself).

    - `n`: trajectories (Gaussian init); `sigma_w`: their σ_w;
    - `grid_a`, `grid_b`: the (a0, b0) grid (init ``grid``; every pair), `perturb`: σ of a
      random perturbation of every active entry (0: none);
    - `init_file`: a ``.npy`` of real numbers of shape (N, 18d²) (init ``file``; another
      model: (N, ``model.n_params(d)``));
    - `t_end`: the horizon (``None``: ``1000/c2 · max(1, ln(1/σ_w)/ln 100)``);
    - `rtol`, `atol`, `steady_tol`, `max_steps`: the batched solver's; `atol` is scaled by
      min(1, σ_w) for the Gaussian init so that tiny starts keep their relative accuracy;
    - `method`: the batched stepper (:class:`mesadyn.flow.BatchMethod`): ``dopri5`` (explicit
      Dormand–Prince, :func:`~mesadyn.flow.integrate_batch`'s default) or ``rodas4`` (the
      linearly implicit Rosenbrock RODAS4 with the exact Hessian; it pays at loose tolerances);
    - `chunk`: rows integrated per batched solve; the run file is written after each, and a
      rerun continues from the first missing row.  It is part of the configuration (a row's
      last bits can depend on which rows share its batch), so a different `chunk` recomputes;
      ``None``: :data:`DEFAULT_CHUNK` (another model: :data:`MODEL_CHUNK` rows per checkpoint);
    - `n_save`: store every trajectory thinned to the ``n_save`` times of :func:`save_grid`
      (0: none, the default; else >= 2);
    - `device` (:class:`~mesadyn.workflows.DeviceOptions`): where the exact field is evaluated;
      off the CPU the batched gradient is evaluated row by row
      (:func:`mesadyn.field.batched.batched_loss_and_grad`);
    - `out` (:class:`~mesadyn.workflows.RunOptions`): the run file (.nc); `recompute`:
      recompute even if it holds this run (not recorded: it changes no number);
    - `model`, `layers` (:class:`~mesadyn.workflows.ProcessOptions`): a model other than the
      paper's runs row by row (:mod:`._model_ensemble`) on `field`: ``exact`` (its exact field
      by quadrature; a polynomial model only) or the sampled ``mc`` (`samples` draws) and
      ``finite`` (`m` sequences) drawn from ``seed``; softmax has no exact field and is refused
      with it, never switched to a sampled one (a sampled loss has its own fixed points).  Its
      rows run by `solver` (:data:`._model_flow.MODEL_SOLVERS`; ``auto``: BDF with the exact
      Hessian), not `method`, and keep no `n_save` trajectories; a run expected to exceed
      :data:`~mesadyn.workflows._cost.COST_LIMIT_S` is refused unless `force` (not recorded),
      as in every workflow.
      The paper's ensemble takes ``field="exact"`` and ``solver="auto"`` only.
    """

    COMMAND = "ensemble"

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
    chunk: int | None = None
    n_save: int = 0
    field: str = "exact"
    samples: int = 100_000
    m: int = 10_000
    solver: str = "auto"
    recompute: bool = dataclasses.field(default=False, metadata=NOT_RECORDED)
    force: bool = dataclasses.field(default=False, metadata=NOT_RECORDED)

    def __post_init__(self) -> None:
        super().__post_init__()
        init = check_choice("init", self.init, EnsembleInit)
        grid_a, grid_b = _floats("grid_a", self.grid_a), _floats("grid_b", self.grid_b)
        if init is EnsembleInit.GRID and (not grid_a or not grid_b):
            raise MesadynError("the grid has no points: give grid_a and grid_b "
                               f"(got grid_a={self.grid_a!r}, grid_b={self.grid_b!r})")
        perturb = check_finite("perturb", self.perturb)
        if perturb < 0:
            raise MesadynError(f"perturb must be >= 0, got perturb={self.perturb!r}")
        init_file = optional_path("init_file", self.init_file)
        if init is EnsembleInit.FILE and init_file is None:
            raise MesadynError("init file: give init_file (a .npy of shape (N, "
                               f"{self.attention().n_params(self.d)}))")
        n_save = check_int("n_save", self.n_save, 0)
        if n_save == 1:
            raise MesadynError(f"n_save must be 0 (none) or >= 2, got n_save={self.n_save!r}")
        steady = check_finite("steady_tol", self.steady_tol)
        if steady < 0:
            raise MesadynError(f"steady_tol must be >= 0, got steady_tol={self.steady_tol!r}")
        if not isinstance(self.recompute, bool):
            raise MesadynError("recompute must be true or false, got "
                               f"recompute={self.recompute!r}")
        from ..field import FieldKind, check_samples
        from ..flow import BatchMethod

        method = check_choice("method", self.method, BatchMethod)
        field = check_choice("field", self.field, FieldKind)
        samples = (check_samples(self.samples) if field is FieldKind.MC
                   else check_int("samples", self.samples, 2))
        set_fields(self, field=field, samples=samples, m=check_int("m", self.m, 1),
                   force=check_bool("force", self.force),
                   chunk=None if self.chunk is None else check_int("chunk", self.chunk, 1))
        if self.paper_model:
            _check_paper_options(self, method)
        else:
            _check_model_options(self, method, n_save)
        set_fields(self, init=init, n=check_int("n", self.n, 1),
                   sigma_w=check_positive("sigma_w", self.sigma_w), grid_a=grid_a,
                   grid_b=grid_b, perturb=perturb, init_file=init_file, steady_tol=steady,
                   t_end=None if self.t_end is None else check_positive("t_end", self.t_end),
                   rtol=check_positive("rtol", self.rtol), atol=check_positive("atol", self.atol),
                   max_steps=check_int("max_steps", self.max_steps, 1),
                   chunk=self.chunk if self.chunk is not None
                   else DEFAULT_CHUNK if self.paper_model else MODEL_CHUNK,
                   method=method, n_save=n_save)

    @property
    def rows_per_chunk(self) -> int:
        """`chunk`, resolved on construction (its default depends on the model)."""
        assert self.chunk is not None
        return self.chunk


def _check_paper_options(config: Config, method: object) -> None:
    """The paper's ensemble: its exact field (every process within its reach) in one batched
    solve by ``method``; the model flow's options are refused, naming the value."""
    if config.field != "exact":
        raise MesadynError(f"field={config.field!s} is not supported by the paper's ensemble: "
                           "it integrates the exact field in one batched solve; the sampled "
                           "fields run for the other models (--model deep, softmax)")
    if config.solver != "auto":
        raise MesadynError(f"solver={config.solver!r} is the model flow's (--model); the "
                           f"paper's ensemble steps by method (got method={method!s})")
    config.check_exact_reach()
    config.field_spec("exact", device=config.torch_device)  # the exact field takes these


def _check_model_options(config: Config, method: object, n_save: int) -> None:
    """Another model: its field (softmax has no exact one: refused, naming the fields it
    takes), its flow's solver; the batched stepper and the saved trajectories are refused."""
    from ._model_flow import check_model_solver

    if method != "dopri5":
        raise MesadynError(f"method={method!s} is the paper's batched stepper; the rows of "
                           f"model={config.attention()} run one by one by solver "
                           "(auto: BDF with the exact Hessian)")
    if n_save:
        raise MesadynError(f"n_save={n_save} is not supported for model={config.attention()}: "
                           "the common save grid is the paper's batched solve's")
    check_model_solver(config.solver)
    config.sampled_spec(config.field, samples=config.samples, m=config.m)  # names softmax


@dataclass(frozen=True)
class BasinResult(RunResult):
    """The paper's ensemble's summary (``to_dict()`` is ``mesadyn ensemble --json``) and its
    rows, classified into the basins of Theorems 4.1/4.3.

    `status`: the trajectories' outcomes combined (:meth:`~mesadyn.outcome.Outcome.combine`),
    `statuses`: how many ended with each (:meth:`~mesadyn.outcome.Outcome.counts`);
    `fractions`: each basin's fraction with its Wilson interval.  `reused`: every row came from
    the run file; `rows_reused`: how many did (a resumed run: ``0 < rows_reused < n``).
    `n_inert`: entries the loss does not depend on
    (:func:`mesadyn.analysis.ensemble.inert_mask`), left out of the off-structure test;
    `off_inert_max`: the largest of them over all rows (their initial size: the flow never
    moves them).  `n_flat`: rows on a branch although their (reachable) off-structure exceeds
    the classifier's 1e-6, because their diagonal projection is a fixed point with the same
    loss (:func:`mesadyn.analysis.ensemble.flat_check`: a flat valley of the fixed-point set).
    `solver`: the batched solver's settings and totals; `solver_stats`: its counts over every
    row (:class:`~mesadyn.flow.SolverStats`).  `rows` (not in ``to_dict()``): one row per
    trajectory, the run file's arrays.
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
    solver_stats: SolverStats
    reused: bool
    rows_reused: int
    out: str | None
    rows: xr.Dataset = hidden()

    def to_dataset(self) -> xr.Dataset:
        """The rows: what the run file holds besides the ``--json`` object."""
        return self.rows.copy()


#: What :func:`run` returns: the paper's basins, or another model's fixed points.
Result = BasinResult | ModelEnsembleResult


def n_starts(config: Config) -> int:
    """How many rows the configuration integrates (reads the shape of an init file)."""
    if config.init is EnsembleInit.GAUSSIAN:
        return config.n
    if config.init is EnsembleInit.GRID:
        return len(config.grid_a) * len(config.grid_b)
    return int(initial_points(config).shape[0])


def check_size(config: Config, n: int) -> None:
    """Refuse an ensemble of ``n`` starts that does not fit, before its starts are drawn: the
    one size guard (:func:`mesadyn.budget.check` on :func:`mesadyn.budget.ensemble`)."""
    from ..budget import check, ensemble

    check(ensemble(config.d, n, chunk=config.rows_per_chunk, n_save=config.n_save,
                   hessians=True, device=config.torch_device))


def initial_points(config: Config) -> np.ndarray:
    """The (N, 18d²) starts the configuration names (another model: its own,
    :func:`._model_ensemble.model_starts`).

    ## Raises
    `MesadynError`: starts that do not fit (:func:`check_size`, before any is drawn), an init
    file that cannot be read, holds anything but real numbers (a complex, boolean or string
    array is refused, never cast), has the wrong shape or a non-finite entry.
    """
    import numpy as np
    import torch

    from ..model import active_mask, diagonal_init, gaussian_init, n_params

    if not config.paper_model:
        from ._model_ensemble import model_starts

        return model_starts(config)
    d = config.d
    if config.init is not EnsembleInit.FILE:
        check_size(config, n_starts(config))
    if config.init is EnsembleInit.GAUSSIAN:
        return torch.stack([gaussian_init(d, config.sigma_w, config.seed + k)
                            for k in range(config.n)]).numpy()
    if config.init is EnsembleInit.FILE:
        assert config.init_file is not None
        return read_starts(config.init_file, n_params(d), "")
    pts = np.stack([diagonal_init(d, float(a), float(b)).numpy() for a in config.grid_a
                    for b in config.grid_b])
    if config.perturb > 0:
        rng = np.random.default_rng(config.seed)
        act = active_mask(d)
        pts[:, act] += config.perturb * rng.standard_normal((pts.shape[0], int(act.sum())))
    return pts


def _horizon(config: Config, c2: float) -> float:
    if config.t_end is not None:
        return config.t_end
    return 1000.0 / c2 * max(1.0, math.log(1.0 / config.sigma_w) / math.log(100.0))


def run(config: Config, progress: ProgressCallback | None = None) -> Result:
    """Integrate the ensemble chunk by chunk (or continue / reuse its run file), classify and
    summarise it; the run file (``out``) is written after every chunk and at the end.  A model
    other than the paper's: :func:`._model_ensemble.run_model`.

    `progress` is called with the number of rows done (fractional within a chunk).

    ## Raises
    `MesadynError` for bad input, and for a chunk that fails: the message says at which row and
    why, and the run file keeps the chunks finished before it (run again to continue).
    `KeyboardInterrupt` is passed on, the finished chunks likewise kept.
    """
    import numpy as np

    from ..analysis.ensemble import inert_mask, saddle_modes
    from ..analysis.steady import saddle_verdict
    from ..field import make_field
    from ..flow import integrate_batch
    from ..io import check_writable, clean_stale_tmp, save_run
    from ..model import diagonal_entries, free_mask
    from ..process import NoReducedSystem
    from ..reduced import ReducedSystem

    if not config.paper_model:
        from ._model_ensemble import run_model

        return run_model(config, progress)
    if config.out is not None:  # before any work; and the temporary files a killed run left
        clean_stale_tmp(check_writable(config.out, suffixes=config.OUT_SUFFIXES).parent)
    fam = config.family()
    try:
        c = config.constants()
        system: ReducedSystem | None = ReducedSystem(c.c1, c.c2)
    except (NoReducedSystem, MesadynError):
        system = None
    field_ = make_field(config.field_spec("exact", device=config.torch_device))
    k_star = None  # real rotations: the end points are classified against the 3-D manifold
    if config.rotation == "real":
        from ._manifold import manifold_system

        try:
            k_star = manifold_system(config)[0].k_star
        except NoReducedSystem:
            k_star = None
    modes = saddle_modes(field_)
    inert = inert_mask(field_)
    verdict = saddle_verdict(field_, free_mask(None, config.d))
    c2 = system.c2 if system is not None else modes.lambda_top
    t_end = _horizon(config, c2)
    th0_all = initial_points(config)  # priced before a start is drawn
    N = th0_all.shape[0]
    if config.init is EnsembleInit.FILE:  # the file itself was priced when it was read
        check_size(config, N)
    old = stored_rows(config, th0_all)
    parts: list[xr.Dataset] = [] if old is None else [old]
    done = 0 if old is None else int(old.sizes["traj"])
    totals: dict[str, float] = {k: 0.0 if old is None else float(old.attrs[k]) for k in TOTALS}
    p = None if system is None else system.ab_star
    if k_star is not None:
        p = float(k_star[0])  # ab at the manifold's minima

    def half(th: np.ndarray) -> np.ndarray:
        a, b = diagonal_entries(th)
        out: np.ndarray = np.mean(a * b, axis=1) - (p if p is not None else np.inf) / 2
        return out

    def attrs() -> dict[str, object]:
        return {"t_end": t_end, "n_rows": N, "rows_format": ROWS_FORMAT,
                **{k: v if k == "wall_s" else int(v) for k, v in totals.items()}}

    scale = min(1.0, config.sigma_w) if config.init is EnsembleInit.GAUSSIAN else 1.0
    grid = save_grid(t_end, config.n_save) if config.n_save else None
    if progress is not None and done:
        progress(float(done))
    for start in range(done, N, config.rows_per_chunk):
        stop = min(N, start + config.rows_per_chunk)
        th0 = th0_all[start:stop]
        bar = None if progress is None else _shifted(progress, start, stop - start)
        try:
            res = integrate_batch(field_, th0, t_end=t_end, rtol=config.rtol,
                                  atol=config.atol * scale, steady_tol=config.steady_tol,
                                  max_steps=config.max_steps, event=half if p else None,
                                  progress=bar, method=config.method, t_save=grid,
                                  verdict=verdict)
        except Exception as exc:  # noqa: BLE001 - any failure: say where, keep the rows done
            if isinstance(exc, MesadynError) and start == done:
                raise  # bad input, refused before any work of this run
            kept = (f"{config.out!r} keeps rows 0..{start - 1}; run again to continue"
                    if config.out is not None and start else "no rows were kept")
            raise MesadynError(f"ensemble stopped at row {start} of {N} "
                               f"({type(exc).__name__}: {exc}); {kept}") from exc
        part = chunk_rows(field_, modes, system, inert, th0, res, grid,
                          steady_tol=config.steady_tol,
                          predict=config.init is EnsembleInit.GAUSSIAN)
        if k_star is not None:
            from ._manifold import relabel_ends

            part = relabel_ends(part, k_star, inert)
        parts.append(part)
        for k, v in zip(TOTALS, (res.wall_s, res.nfev, res.njev, res.n_calls), strict=True):
            totals[k] += v
        if config.out is not None and stop < N:  # the last chunk is written with the result
            save_run(joined(parts, attrs()), config.out, kind=config.COMMAND,
                     config=config.run_config(), seed=config.seed)
    result = _summarise(config, fam.name, p, modes, int(inert.sum()), t_end,
                        joined(parts, attrs()), done)
    return write_run(config, result)


def _shifted(progress: ProgressCallback, start: int, size: int) -> ProgressCallback:
    """A chunk's fraction of rows done as the run's number of rows done."""
    def update(x: float) -> None:
        progress(start + x * size)
    return update


def _summarise(config: Config, family: str, p: float | None,
               modes: SaddleModes, n_inert: int, t_end: float, ds: xr.Dataset,
               rows_reused: int) -> BasinResult:
    """The :class:`Result` of the rows ``ds``; ``p`` is the ab of the fixed points the rows are
    classified against (``ab* = c2/c1``; ``k*_1`` of the 3-D manifold for real rotations)."""
    import numpy as np

    from ..analysis.ensemble import OFF_TOL, Basin, fractions
    from ..flow import SolverStats

    basin = ds["outcome"].values.astype(str)
    status = ds["status"].values.astype(str)
    conv = status == Outcome.CONVERGED.value
    esc, pred = ds["escape_time"].values, ds["escape_predicted"].values
    both = np.isfinite(esc) & np.isfinite(pred)
    rel = np.abs(esc[both] - pred[both]) / pred[both]
    escape: dict[str, float | int | None] = {
        "measured_median": float(np.median(esc[np.isfinite(esc)])) if np.isfinite(esc).any()
        else None,
        "predicted_median": float(np.median(pred[np.isfinite(pred)]))
        if np.isfinite(pred).any() else None,
        "median_relative_error": float(np.median(rel)) if rel.size else None,
        "max_relative_error": float(np.max(rel)) if rel.size else None,
        "n_escaped": int(np.isfinite(esc).sum())}
    ab = ds["ab"].values
    n = int(len(basin))
    counts = Outcome.counts(status.tolist())
    outcome = Outcome.combine(counts)
    ok = {o.value for o in Outcome if o.ok}
    failed = sum(k for s, k in counts.items() if s not in ok)
    said = ", ".join(f"{k} {s}" for s, k in counts.items())
    message = (f"{n} trajectories: {said}" if not failed
               else f"{failed} of {n} trajectories failed ({said})")
    stats = SolverStats(nfev=int(ds.attrs["nfev"]), njev=int(ds.attrs["njev"]),
                        n_accepted=int(ds["n_accepted"].values.sum()),
                        n_rejected=int(ds["n_rejected"].values.sum()), n_monitor=None,
                        wall_s=float(ds.attrs["wall_s"]))
    return BasinResult(
        family=family, d=config.d, T=config.T, n=n, init=str(config.init),
        sigma_w=config.sigma_w if config.init is EnsembleInit.GAUSSIAN else None,
        ab_star=p, t_end=t_end,
        fractions={k: v.to_dict() for k, v in fractions(basin).items()},
        statuses=counts, lambda_top=modes.lambda_top, top_mode=modes.to_dict(), escape=escape,
        off_structure_max_converged=float(ds["off_structure"].values[conv].max())
        if conv.any() else None,
        ab_max_error_converged=float(np.max(np.abs(ab[conv] - p))) if conv.any() and p
        else None,
        n_inert=n_inert, off_inert_max=float(ds["off_inert"].values.max()),
        n_flat=int(np.sum(np.isin(basin, [Basin.BRANCH_PLUS, Basin.BRANCH_MINUS,
                                           Basin.BRANCH_MIXED])
                          & (ds["off_structure"].values > OFF_TOL))),
        solver={"solver": f"batched:{config.method}", "method": str(config.method),
                "rtol": config.rtol, "atol": config.atol,
                "steady_tol": config.steady_tol, "chunk": config.rows_per_chunk,
                "n_save": config.n_save, "device": config.torch_device,
                "wall_s": stats.wall_s, "nfev": stats.nfev,
                "n_calls": int(ds.attrs["n_calls"])},
        solver_stats=stats, reused=rows_reused == n, rows_reused=rows_reused, out=config.out,
        rows=ds, status=outcome, message=message)
