"""``integrate``, ``stability`` and ``train`` for a model other than the paper's (``--model``).

Each reads the model's own layout (:class:`~mesadyn.models.Model`) and reports what is
defined for every model: the loss, ``max|∇L|``, the model's per-coordinate step
``Σ_l a_l b_l`` (:meth:`~mesadyn.models.Model.ab`, the GD step of Corollary 4.1 on the
layered diagonal manifold), the per-layer invariants, the largest entry off the layered
diagonals, and (``stability``) the spectrum of ``−∇²L`` with its zero modes explained
(:func:`._model_flow.model_spectrum`).  Quantities of the paper's one-layer theory (ab* of
Theorem 4.1, the reduced closed form, Proposition 4.1's ratio) are not reported: they are not
theorems of these models.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import hidden, omitted_if
from ._model_flow import (
    NEWTON_HANDOFF,
    JacobianKind,
    ModelPath,
    ModelSpectrum,
    model_spectrum,
    model_steady,
)
from ._run import RunResult, load_point, write_run

if TYPE_CHECKING:
    import numpy as np
    import xarray as xr

    from ..analysis.model_fixedpoint import ModelCurvature, ModelNewton
    from ..field import Field, FieldSpec
    from ..models import Model
    from . import integrate, stability, train

__all__ = ["ModelFlowResult", "ModelStabilityResult", "ModelTrainResult", "check_model_flow",
           "flow_basis", "flow_of_model", "model_steady_options", "stability_of_model",
           "train_model"]

#: A model's flow without ``t_end`` runs to this flow time (it stops earlier at its steady
#: state): the paper's model settles at d = 2, T = 6 by τ ≈ 10.
MODEL_T_END = 1e3


#: The tolerances of the flow ``stability`` follows to a model's fixed point.  The fixed point
#: is where ``max|∇L|`` falls below :data:`FIXED_POINT_TOL`, whatever the path's accuracy; the
#: path decides only where along the orbits of the model's symmetries it lands (to about this
#: relative accuracy), and the loss, ŷ and the spectrum are constant along them.  Measured at
#: d = 2, T = 6 (two layers, exact, 2 threads): 475 gradients and 6 Jacobians to 8.1e-11,
#: 119 s with the Hessian and the spectrum; rtol = 1e-8 advanced the flow time about four
#: times more slowly.
FIXED_POINT_RTOL = 1e-6
FIXED_POINT_ATOL = 1e-9
#: ``max|∇L|`` of a model's fixed point, for every field ``stability`` takes (exact, finite and
#: Monte-Carlo: the sampled gradient); on a sampled field the flow hands over to Newton on the
#: way (:func:`._model_flow.model_steady`).
FIXED_POINT_TOL = 1e-10
#: Test sequences of the in-context analyses at a model's fixed point.
INCONTEXT_SEQUENCES = 1000


def model_steady_options(field: Any) -> tuple[JacobianKind, float]:
    """The Jacobian of a model's flow (:class:`._model_flow.JacobianKind`, also Newton's
    matrix) and its Newton handoff level (:func:`._model_flow.model_steady`) on ``field``.

    A sampled field (``mc``, ``finite``): differences of the gradient, updated along the path
    (the fused kernel makes a gradient far cheaper than an exact Hessian), and Newton from
    :data:`._model_flow.NEWTON_HANDOFF`.  The exact field keeps the exact Hessian and the flow
    alone, the path :mod:`mesadyn.workflows.ensemble` reproduces row by row: its symmetries
    keep invariant manifolds (the two-layer flow from ``(0.5, 1.5)`` at d = 1, T = 4 stays on
    one and converges to a saddle) that exact Jacobians respect to rounding, and the updates,
    along the path's last directions, do not."""
    from ..field import FieldKind

    if FieldKind(field) is FieldKind.EXACT:
        return JacobianKind.EXACT, 0.0
    return JacobianKind.UPDATED, NEWTON_HANDOFF


def check_model_flow(config: integrate.Config) -> None:
    """A model other than the paper's has a full flow only: no reduced system (Lemma 5.2 is
    the paper's model's), no repeats, one of its solvers (:data:`._model_flow.MODEL_SOLVERS`).
    """
    from ._model_flow import check_model_solver

    model = config.attention()
    if config.reduced:
        raise MesadynError(f"reduced=True is not supported for model={model}: Lemma 5.2's "
                           "reduced system is the paper's one-layer model's")
    if config.repeats > 1:
        raise MesadynError(f"repeats={config.repeats} is not supported for model={model}")
    check_model_solver(config.solver)


def _geometry(model: Model, theta: np.ndarray, diagonal_start: bool) -> dict[str, Any]:
    """``ab`` (the GD step of the layered diagonal manifold: linear attention only), the
    conserved per-layer invariants (none for softmax) and the largest entry off the layered
    diagonals (a diagonal start)."""
    import numpy as np

    inv = np.asarray(model.invariants(theta), dtype=np.float64)
    off = float(np.abs(theta[~model.diagonal_mask(model.dim_of(theta))]).max())
    return {"ab": ([float(v) for v in np.asarray(model.ab(theta))] if model.polynomial
                   else None),
            "invariants": [float(v) for v in inv],
            "off_diagonal_max": off if diagonal_start else None}


@dataclass(frozen=True)
class ModelFlowResult(RunResult):
    """The end of a model's flow (``mesadyn integrate --model ...``).

    ``subspace``: the dimension of the fixed subspace of the loss's coordinate symmetry the
    flow ran in (:func:`flow_basis`; omitted: every free entry), ``subspace_leak`` the largest
    gradient entry off it at any evaluation (round-off when the symmetry holds).

    The flow runs to its steady state and, on a sampled field, hands over to Newton on the
    way (:func:`._model_flow.model_steady`, :func:`model_steady_options`): ``t_final`` and
    ``flow_grad_norm`` are where the flow stopped, ``newton`` what Newton did from there
    (steps, ``max|∇L|`` after each, Hessians), ``handoffs_declined`` why earlier handoffs
    were declined; ``loss``, ``grad_norm`` and the
    geometry are the end point's, ``curvature`` its spectrum across the model's symmetry
    orbits (minimum or saddle).  ``gradients`` counts every gradient (the flow's ``nfev``, the
    difference Jacobians', Newton's), ``hessians`` the exact Hessians, ``njev`` the flow's
    Jacobians (``jacobian``: how they were computed); ``invariant_drift`` is the flow's.
    """

    family: str
    d: int
    T: int
    model: str
    layers: int
    field: str
    mask: str
    init: str
    loss: float
    grad_norm: float
    ab: list[float] | None
    invariants: list[float]
    invariant_drift: float | None
    off_diagonal_max: float | None
    t_end: float
    t_final: float
    nfev: int
    njev: int
    solver: str
    wall_s: float
    steady_tol: float
    gradients: int = 0
    hessians: int = 0
    jacobian: str = str(JacobianKind.EXACT)
    cpu_s: float = 0.0
    flow_grad_norm: float | None = omitted_if(None)
    newton: ModelNewton | None = omitted_if(None)
    curvature: ModelCurvature | None = omitted_if(None)
    handoffs_declined: tuple[str, ...] = omitted_if(())
    subspace: int | None = omitted_if(None)
    subspace_leak: float | None = omitted_if(None)
    out: str | None = omitted_if(None)
    path: ModelPath | None = hidden()
    final_theta: np.ndarray | None = hidden()
    field_config: dict[str, Any] = hidden(None)

    def to_dataset(self) -> xr.Dataset:
        """θ(τ), L and max|∇L| at the kept points of the flow, the end point
        (``final_theta``: Newton's, where it ran); the field's description (JSON)."""
        import xarray as xr

        from ..io import to_json

        assert self.path is not None
        p = self.path
        final = p.final if self.final_theta is None else self.final_theta
        ds = xr.Dataset({"theta": (("tau", "param"), p.theta), "loss": ("tau", p.loss),
                         "grad_max": ("tau", p.grad_max),
                         "final_theta": ("param", final)}, coords={"tau": p.t})
        ds.attrs["field_config"] = to_json(self.field_config or {})
        return ds


def _start(config: Any, model: Model) -> np.ndarray:
    from ._common import Init, initial_theta

    return initial_theta(Init(config.init), config.d, config.a0, config.b0, config.sigma_w,
                         config.seed, model).numpy()


def _field(config: Any, build_progress: ProgressCallback | None = None) -> Field:
    from ..field import make_field

    fld = make_field(_spec(config))
    fld.prepare(build_progress)
    return fld


def _spec(config: Any) -> FieldSpec:
    return config.sampled_spec(config.field, samples=config.samples, m=config.m)


def flow_basis(model: Model, spec: FieldSpec, theta0: np.ndarray,
               free: np.ndarray) -> np.ndarray | None:
    """The orthonormal basis of the subspace the flow from ``theta0`` keeps, or ``None``.

    On the exact field, when ``theta0`` has no entry that is even under the phase reflection
    (:meth:`Model.phase_parity_mask`), the odd free entries; within them (or within ``free``)
    the fixed subspace of the loss's coordinate symmetry (:attr:`FieldSpec.coordinate_group`,
    :meth:`Model.fixed_subspace`) when ``theta0`` lies in it.  The layered diagonal init lies
    in both, a Gaussian init in neither.  Running the flow in the basis keeps the subspace
    exactly: in it the loss's symmetry sets the other components of ``∇L`` to zero, but
    rounding does not, and from a saddle that is stable only inside the subspace the
    rounding would grow."""
    import numpy as np

    from ..field import FieldKind

    d = model.dim_of(theta0)
    tol = 1e-12 * max(1.0, float(np.abs(theta0).max()))
    kept = free
    odd = model.phase_parity_mask(d) if spec.kind is FieldKind.EXACT else None
    graded = odd is not None and float(np.abs(theta0[~odd]).max(initial=0.0)) <= tol
    if graded:
        assert odd is not None
        kept = free & odd
    group = spec.coordinate_group
    P = model.fixed_subspace(d, group, kept)
    whole = model.fixed_subspace(d, group, np.ones(theta0.shape[0], dtype=bool))
    if P is not None and whole is not None \
            and float(np.abs(theta0 - whole @ (whole.T @ theta0)).max()) <= tol:
        return P
    return np.eye(theta0.shape[0])[:, kept] if graded else None


def flow_of_model(config: integrate.Config, progress: ProgressCallback | None = None, *,
                  build_progress: ProgressCallback | None = None) -> ModelFlowResult:
    """``mesadyn integrate`` (full flow) for ``config.attention()`` (module docstring)."""
    import numpy as np

    from ..field import FieldKind
    from ._cost import MIN_FULL_FLOW_EVALS, check_cost, model_cost

    model = config.attention()
    theta0 = _start(config, model)
    if FieldKind(config.field) is not FieldKind.EXACT:
        check_cost(MIN_FULL_FLOW_EVALS * model_cost(_spec(config)).gradient,
                   f"this {config.field} full flow of the {model} model", config.force)
    fld = _field(config, build_progress)
    free = model.free_mask(str(config.mask), config.d)
    t_end = MODEL_T_END if config.t_end is None else config.t_end
    jacobian, handoff = model_steady_options(config.field)
    run = model_steady(fld, model, theta0, free, t_end=t_end, solver=config.solver,
                       rtol=config.rtol, atol=config.atol, steady_tol=config.steady_tol,
                       max_steps=config.max_steps, n_save=config.n_save,
                       basis=flow_basis(model, _spec(config), theta0, free), progress=progress,
                       jacobian=jacobian, handoff=handoff)
    path = run.path
    geo = _geometry(model, run.theta, str(config.init) == "diagonal")
    inv = np.asarray(model.invariants(path.theta), dtype=np.float64)
    drift = float(np.abs(inv - inv[0]).max()) if inv.size else None
    result = ModelFlowResult(
        family=config.family().name, d=config.d, T=config.T, model=model.name,
        layers=model.layers, field=str(config.field), mask=str(config.mask),
        init=str(config.init), loss=run.loss, grad_norm=run.grad_max,
        ab=geo["ab"], invariants=geo["invariants"],
        invariant_drift=drift,
        off_diagonal_max=geo["off_diagonal_max"], t_end=t_end, t_final=run.t_flow,
        nfev=path.nfev, njev=path.njev, solver=path.solver, wall_s=run.wall_s,
        steady_tol=config.steady_tol, gradients=run.gradients, hessians=run.hessians,
        jacobian=str(path.jacobian), cpu_s=run.cpu_s,
        flow_grad_norm=run.flow_grad_max if run.newton is not None else None,
        newton=run.newton, curvature=run.curvature,
        handoffs_declined=tuple(run.declined), subspace=path.subspace, subspace_leak=path.leak,
        out=config.out, path=path, final_theta=run.theta,
        field_config=dict(fld.describe()), status=run.status, message=run.message)
    return write_run(config, result)


@dataclass(frozen=True)
class ModelStabilityResult(RunResult):
    """A model's fixed point and spectrum (``mesadyn stability --model ...``); ``subspace``
    and ``subspace_leak`` as :class:`ModelFlowResult`'s, ``njev`` the flow's Jacobians;
    ``incontext`` the in-context analyses at the fixed point
    (:func:`mesadyn.analysis.model_mesa.model_incontext` on :data:`INCONTEXT_SEQUENCES` test
    sequences of length T from the test seed: the k-step GD fit, Proposition 4.1's ratio, the
    MSE).  ``t_final`` is where the flow stopped, ``newton`` what Newton did from there
    (:class:`ModelFlowResult`); ``gradients`` and ``hessians`` count every gradient and exact
    Hessian of the run."""

    family: str
    d: int
    T: int
    model: str
    layers: int
    field: dict[str, Any]
    source: str
    n_params: int
    n_active: int
    loss: float
    grad_norm: float
    tolerance: float
    ab: list[float] | None
    invariants: list[float]
    off_diagonal_max: float | None
    t_final: float
    nfev: int
    wall_s: float
    njev: int = 0
    gradients: int = 0
    hessians: int = 0
    cpu_s: float = 0.0
    newton: ModelNewton | None = omitted_if(None)
    handoffs_declined: tuple[str, ...] = omitted_if(())
    subspace: int | None = omitted_if(None)
    subspace_leak: float | None = omitted_if(None)
    spectrum: ModelSpectrum | None = omitted_if(None)
    incontext: dict[str, Any] | None = omitted_if(None)
    theta: np.ndarray | None = hidden()

    def to_dataset(self) -> xr.Dataset:
        """θ of the analysed point (``theta`` over ``point``, ``param``)."""
        import xarray as xr

        assert self.theta is not None
        return xr.Dataset({"theta": (("point", "param"), self.theta[None, :])},
                          coords={"point": ["fixed_point"]})


def stability_of_model(config: stability.Config,
                       progress: ProgressCallback | None = None) -> ModelStabilityResult:
    """``mesadyn stability`` for ``config.attention()``: the flow from the layered diagonal
    init ``(a0, b0)`` (default ``a = b = √(ab*/k)``, so that ``Σ_l a_l b_l`` starts at the
    paper's ab*), or from ``point`` (a ``.npy`` file or a run file, :func:`._run.load_point`),
    to ``max|∇L| <`` :data:`FIXED_POINT_TOL` (in the fixed subspace of the loss's
    symmetry where it applies, :func:`flow_basis`; Newton finishes it,
    :func:`._model_flow.model_steady`), the exact Hessian there (:meth:`~mesadyn.field.
    Field.hessian`) and its spectrum (:func:`._model_flow.model_spectrum`).  Every field is
    judged by its own gradient: a Monte-Carlo field's fixed point is that of its fixed
    sequences' loss."""
    import torch

    from ..analysis.model_mesa import model_incontext
    from ..train import test_seed

    model = config.attention()
    if config.plot is not None:
        raise MesadynError(f"plot={config.plot!r} is not supported by stability for "
                           f"model={model}: the spectra figure draws the paper's model's")
    d = config.d
    if config.point is not None:
        theta0 = load_point(config.point, d, model)
        source = f"flow from the point in {str(config.point)!r}"
    else:
        if config.a0 is not None and config.b0 is not None:
            a0, b0 = config.a0, config.b0
            source = f"flow from the layered diagonal init a0={a0}, b0={b0}"
        else:
            a0 = b0 = math.sqrt(config.constants().ab_star / model.layers)
            source = (f"flow from the layered diagonal init a0 = b0 = sqrt(ab*/{model.layers}) "
                      f"= {a0:.6g} (Σ_l a_l b_l = ab* of Theorem 4.1)")
        theta0 = model.diagonal_init(d, a0, b0).numpy()
    fld = _field(config)
    tol = FIXED_POINT_TOL
    free = model.free_mask("none", d)
    jacobian, handoff = model_steady_options(config.field)
    run = model_steady(fld, model, theta0, free, t_end=config.t_end, solver="auto",
                       rtol=FIXED_POINT_RTOL, atol=FIXED_POINT_ATOL, steady_tol=tol,
                       max_steps=100_000, n_save=50,
                       basis=flow_basis(model, _spec(config), theta0, free),
                       jacobian=jacobian, handoff=handoff)
    if progress is not None:
        progress(1.0)
    path, final = run.path, run.theta
    geo = _geometry(model, final, True)
    common = dict(family=config.family().name, d=d, T=config.T, model=model.name,
                  layers=model.layers, field=dict(fld.describe()), source=source,
                  n_params=model.n_params(d), n_active=int(model.active_mask(d).sum()),
                  loss=run.loss, grad_norm=run.grad_max,
                  tolerance=tol, ab=geo["ab"], invariants=geo["invariants"],
                  off_diagonal_max=geo["off_diagonal_max"], t_final=run.t_flow,
                  nfev=path.nfev, njev=path.njev, gradients=run.gradients,
                  hessians=run.hessians, cpu_s=run.cpu_s, newton=run.newton,
                  handoffs_declined=tuple(run.declined), subspace=path.subspace,
                  subspace_leak=path.leak, theta=final)
    if run.status not in (Outcome.CONVERGED, Outcome.SADDLE):
        return ModelStabilityResult(**common, wall_s=run.wall_s, status=Outcome.FAILED,
                                    message=f"no fixed point: {run.message}")
    start = time.perf_counter()
    H = (run.hessian if run.hessian is not None
         else fld.hessian(torch.from_numpy(final)).cpu().numpy())
    spec = model_spectrum(H, final, model, rtol=config.zero_rtol)
    if progress is not None:
        progress(2.0)
    kind = ("a saddle" if spec.n_unstable else "a minimum" if spec.unexplained == 0
            else "a critical point with unexplained zero modes")
    incontext = model_incontext(model, final, config.family(), config.T, INCONTEXT_SEQUENCES,
                                test_seed(config.seed)).to_dict()
    return ModelStabilityResult(
        **common, wall_s=run.wall_s + time.perf_counter() - start, spectrum=spec,
        incontext=incontext,
        status=Outcome.SADDLE if spec.n_unstable else Outcome.FIXED_POINT,
        message=(f"{run.message}; the point is {kind}: {spec.n_zero} zero modes, "
                 f"{spec.inactive} inactive, {spec.unused} unused, {spec.symmetry} from the "
                 f"model's symmetries, {spec.unexplained} unexplained"))


@dataclass(frozen=True)
class ModelTrainResult(RunResult):
    """Full-batch GD of a model on its finite-sample loss (``mesadyn train --model ...``);
    ``incontext`` the in-context analyses of the end point at each test length asked for
    (:func:`mesadyn.analysis.model_mesa.model_incontext`)."""

    family: str
    d: int
    T: int
    model: str
    layers: int
    m: int
    m_test: int
    seed: int
    test_seed: int
    lr: float
    steps: int
    init: str
    train_loss: float
    test_loss: float
    grad_norm: float
    ab: list[float] | None
    invariants: list[float]
    diverged: bool
    diverged_step: int | None
    wall_s: float
    incontext: list[dict[str, Any]] | None = omitted_if(None)
    out: str | None = omitted_if(None)
    trace: dict[str, np.ndarray] | None = hidden()

    def to_dataset(self) -> xr.Dataset:
        """The trace over ``step`` (train and test loss, max|∇L|, mean ab) and the final θ."""
        import xarray as xr

        assert self.trace is not None
        tr = self.trace
        return xr.Dataset({"train_loss": ("step", tr["train_loss"]),
                           "test_loss": ("step", tr["test_loss"]),
                           "grad_max": ("step", tr["grad_max"]),
                           "ab_mean": ("step", tr["ab_mean"]),
                           "final_theta": ("param", tr["final_theta"])},
                          coords={"step": tr["step"]})


def train_model(config: train.Config,
                progress: ProgressCallback | None = None) -> ModelTrainResult:
    """GD ``θ ← θ − η ∇L̂(θ)`` on ``m`` training sequences drawn from ``seed`` (a
    :class:`~mesadyn.field._model_fields.FiniteModelField`), the test loss on ``m_test``
    sequences from :func:`mesadyn.train.test_seed`, recorded every ``eval_every`` steps.  With
    ``incontext`` test lengths, the end point's ratio, test MSE and k-step GD fit at each, on
    the paper's model's in-context test set (:data:`~mesadyn.workflows.train.INCONTEXT_DRAWS`
    sequences from ``seed +`` :data:`~mesadyn.workflows.train.INCONTEXT_SEED_OFFSET`)."""
    import numpy as np
    import torch

    from ..field import FiniteModelField
    from ..io import check_writable
    from ..train import table1_lr, test_seed

    model = config.attention()
    if config.out is not None:
        check_writable(config.out, suffixes=config.OUT_SUFFIXES)
    fam = config.family()
    lr = table1_lr(fam) if config.lr is None else config.lr
    m_test = config.m if config.m_test is None else config.m_test
    tseed = test_seed(config.seed)
    dev = config.torch_device
    train_f, test_f = (
        FiniteModelField(model, fam, config.T, n, seed, radius=config.radius,
                         rotation=config.rotation, noise=config.noise, device=dev)
        for n, seed in ((config.m, config.seed), (m_test, tseed)))
    theta = _start(config, model)
    th = torch.from_numpy(theta)
    free = torch.from_numpy(model.free_mask(str(config.mask), config.d))
    rows: dict[str, list[float]] = {k: [] for k in
                                    ("step", "train_loss", "test_loss", "grad_max", "ab_mean")}
    diverged_step: int | None = None
    start = time.perf_counter()
    L = g = None
    for step in range(config.steps + 1):
        L, g = train_f.loss_and_grad(th)
        g = g * free
        if not (torch.isfinite(L) and torch.isfinite(g).all()):
            diverged_step = step
            break
        if step % config.eval_every == 0 or step == config.steps:
            with torch.no_grad():
                test_loss = float(test_f.loss(th))
            for key, value in (("step", step), ("train_loss", float(L)),
                               ("test_loss", test_loss), ("grad_max", float(g.abs().max())),
                               ("ab_mean", float(np.mean(model.ab(th.numpy()))) if model.polynomial
                                else float("nan"))):
                rows[key].append(value)
        if step == config.steps:
            break
        th = th - lr * g
        if progress is not None:
            progress(float(step + 1))
    wall = time.perf_counter() - start
    final = th.numpy()
    geo = _geometry(model, final, str(config.init) == "diagonal")
    diverged = diverged_step is not None
    trace = {k: np.asarray(v, dtype=np.float64) for k, v in rows.items()}
    trace["final_theta"] = final

    def last(key: str) -> float:
        return float(trace[key][-1]) if len(trace[key]) else float("nan")

    incontext = None
    if config.incontext and not diverged:
        from ..analysis.model_mesa import model_incontext
        from .train import INCONTEXT_DRAWS, INCONTEXT_SEED_OFFSET

        incontext = [model_incontext(model, final, fam, T_te, INCONTEXT_DRAWS,
                                     config.seed + INCONTEXT_SEED_OFFSET).to_dict()
                     for T_te in config.incontext]

    result = ModelTrainResult(
        family=fam.name, d=config.d, T=config.T, model=model.name, layers=model.layers,
        m=config.m, m_test=m_test, seed=config.seed, test_seed=tseed, lr=lr,
        steps=config.steps, init=str(config.init), train_loss=float(last("train_loss")),
        test_loss=float(last("test_loss")), grad_norm=float(last("grad_max")), ab=geo["ab"],
        invariants=geo["invariants"], diverged=diverged, diverged_step=diverged_step,
        wall_s=wall, incontext=incontext, out=config.out, trace=trace,
        status=Outcome.DIVERGED if diverged else Outcome.OK,
        message=(f"GD diverged at step {diverged_step} (lr={lr:.3g})" if diverged
                 else f"{config.steps} GD steps, lr={lr:.3g}"))
    return write_run(config, result)
