"""Gradient descent against the gradient flow (``mesadyn gdflow``).

GD at Table 1's step size η (:func:`mesadyn.train.table1_lr`) against the gradient flow at
``τ = kη`` and against the first-order modified flow of backward error analysis
``dθ/dτ = −∇L − (η/2)∇²L∇L`` (:mod:`mesadyn.analysis.gd_flow`), on the exact population loss
(population GD) and on the finite-sample loss of one training set of ``m`` sequences (the
paper's GD, Section 6).  Optionally the spread of GD end points over ``spread_seeds`` training
sets for each size in ``spread_m``, with the fitted power law ``spread ∝ m^slope`` (≈ −1/2
expected).  Every number is reproducible to the bit (the Lanczos estimate of ``η λ_max``
starts from a fixed vector, :func:`mesadyn.analysis.gd_flow.sharpness`), so ``out`` (a ``.nc``
run file with the trajectories) reruns to the same numbers (``mesadyn rerun FILE``).

Example:
    ```python
    from mesadyn.workflows import gdflow

    res = gdflow.run(gdflow.Config(d=2, T=6, steps=20, lr=1e-3, m=50))
    res.exact["ratio"] > 5  # True: the modified flow follows GD far closer than the flow
    ```
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError, check_bool, check_choice, check_int, check_positive
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import hidden, omitted_if
from ._common import Init, check_init, set_fields
from ._run import NOT_RECORDED, DeviceOptions, RunResult, write_run

if TYPE_CHECKING:
    import xarray as xr

    from ..analysis.gd_flow import GDFlowComparison
    from ..field import Field, FieldSpec
    from ..models import Model

__all__ = ["Config", "Result", "run"]


def _sizes(value: object) -> tuple[int, ...]:
    """The training-set sizes of the spread study: a tuple of ints or ``"100,300"``."""
    if isinstance(value, str):
        parts: list[object] = [p for p in value.replace(" ", "").split(",") if p]
    elif isinstance(value, (list, tuple)):
        parts = list(value)
    else:
        raise MesadynError(f"spread_m must be a list of sizes, got {value!r}")
    out: list[int] = []
    for p in parts:
        try:
            v = int(p) if isinstance(p, str) else p
        except ValueError:
            raise MesadynError(f"spread_m must be integers, got {p!r}") from None
        out.append(check_int("spread_m", v, 1))
    if len(set(out)) != len(out):
        raise MesadynError(f"spread_m has repeated sizes: {value!r}")
    if len(out) == 1:
        raise MesadynError(f"spread_m needs at least two sizes for the fit, got {value!r}")
    return tuple(sorted(out))


@dataclass(frozen=True)
class Config(DeviceOptions):
    """GD against the flow (validated on construction; a bad value names itself).

    - `lr`: the step size η (``None``: Table 1's, an error where the table has none);
    - `steps`: GD steps (the paper's 200); the flows run to ``τ = steps·η``;
    - `init`, `a0`, `b0`, `sigma_w`: the start (Assumption 3.1's diagonal point or
      ``N(0, σ_w²)`` entries drawn from ``seed``);
    - `mask`: ``none`` or ``diagonal`` (Theorem 4.3's clipping), for GD and both flows;
    - `m`: training sequences of the finite-sample comparison (seed ``seed``; 0 skips it);
    - `spread_m`, `spread_seeds`: training-set sizes and seeds (``seed .. seed+S−1``) of the
      end-point spread study (empty: skipped);
    - `solver`, `rtol`, `atol`: the flows' solver (explicit: the modified field has no cheap
      Hessian) and tolerances;
    - `out`: the ``.nc`` run file; `device` (cpu — the default —, auto, cuda): where the
      fields are evaluated;
    - `model`, `layers` (:class:`~mesadyn.workflows.ProcessOptions`): a model other than the
      paper's compares on its exact field by quadrature (a polynomial model: ``deep``; softmax
      has none) and its finite-sample field, from its own layered initialisations; such a run
      expected to exceed :data:`~mesadyn.workflows._cost.COST_LIMIT_S` is refused unless
      `force` (not recorded: it changes no number).
    """

    COMMAND = "gdflow"

    d: int = 3
    T: int = 20
    lr: float | None = None
    steps: int = 200
    init: str = "diagonal"
    a0: float = 0.1
    b0: float = 0.1
    sigma_w: float = 0.01
    mask: str = "none"
    m: int = 1000
    spread_m: tuple[int, ...] | str = ()
    spread_seeds: int = 8
    solver: str = "scipy:DOP853"
    rtol: float = 1e-11
    atol: float = 1e-13
    force: bool = dataclasses.field(default=False, metadata=NOT_RECORDED)

    def __post_init__(self) -> None:
        from ..flow import resolve_solver
        from ..model import Mask

        super().__post_init__()
        if not self.paper_model:
            self.field_spec("exact")  # names a model with no exact field (softmax)
        init, a0, b0, sigma_w = check_init(self.init, self.a0, self.b0, self.sigma_w)
        solver = resolve_solver(self.solver)
        if solver.implicit:
            raise MesadynError(f"solver {self.solver!r} is implicit: the modified flow has no "
                               "cheap exact Jacobian; choose an explicit one (e.g. scipy:DOP853)")
        set_fields(
            self, init=init, a0=a0, b0=b0, sigma_w=sigma_w,
            lr=None if self.lr is None else check_positive("lr", self.lr),
            steps=check_int("steps", self.steps, 1), mask=check_choice("mask", self.mask, Mask),
            m=check_int("m", self.m, 0), spread_m=_sizes(self.spread_m),
            spread_seeds=check_int("spread_seeds", self.spread_seeds, 3),
            solver=solver.id, rtol=check_positive("rtol", self.rtol),
            atol=check_positive("atol", self.atol), force=check_bool("force", self.force),
        )
        self.check_exact_reach()
        if self.lr is None:
            from ..train import table1_lr

            table1_lr(self.family())  # names the missing Table 1 entry before any work

    @property
    def spread_sizes(self) -> tuple[int, ...]:
        """The training-set sizes of the spread study (``spread_m``, validated, ascending)."""
        return _sizes(self.spread_m) if self.spread_m else ()

    def step_size(self) -> float:
        """η: the given ``lr`` or Table 1's."""
        from ..train import table1_lr

        return table1_lr(self.family()) if self.lr is None else float(self.lr)


@dataclass(frozen=True)
class Result(RunResult):
    """The gaps (``to_dict()`` is ``mesadyn gdflow --json``); the trajectories are in
    ``comparisons`` (``"exact"``, ``"finite"``) for figures and in the run file
    (:meth:`to_dataset`).  ``status`` is ``ok`` (GD diverging or a flow stopping early is
    bad input: it raises).  ``model``, ``layers``: a model other than the paper's (omitted for
    the paper's)."""

    family: str
    d: int
    T: int
    lr: float
    steps: int
    tau_end: float
    init: str
    mask: str
    exact: dict[str, Any]
    finite: dict[str, Any] | None
    spread: dict[str, Any] | None
    solver: dict[str, Any]
    cpu_s: float
    model: str | None = omitted_if(None)
    layers: int | None = omitted_if(None)
    comparisons: dict[str, GDFlowComparison] = hidden(None)

    def to_dataset(self) -> xr.Dataset:
        """Per comparison ``name`` (exact, finite): θ of GD, the flow and the modified flow
        (``theta_{gd,flow,modified}_<name>`` over ``step`` × ``param``), their losses and the
        two gap curves over ``step`` (``tau`` = kη), and ``eta_lambda_<name>``, η λ_max at the
        GD iterates of ``sharpness_step``."""
        import numpy as np
        import xarray as xr

        ds = xr.Dataset()
        for name, comp in (self.comparisons or {}).items():
            ds = ds.assign_coords(step=np.arange(comp.steps + 1), tau=("step", comp.t))
            for what in ("gd", "flow", "modified"):
                ds[f"theta_{what}_{name}"] = (("step", "param"), getattr(comp, what))
                ds[f"loss_{what}_{name}"] = ("step", getattr(comp, f"loss_{what}"))
            g_flow, g_mod = comp.gap_curves()
            ds[f"gap_flow_{name}"] = ("step", g_flow)
            ds[f"gap_modified_{name}"] = ("step", g_mod)
            if comp.sharpness:
                ds = ds.assign_coords(sharpness_step=[k for k, _ in comp.sharpness])
                ds[f"eta_lambda_{name}"] = ("sharpness_step", [v for _, v in comp.sharpness])
        return ds


def _check_model_cost(config: Config, model: Model) -> None:
    """Refuse a model's comparison expected above ``COST_LIMIT_S`` (unless ``force``), or
    whose quadrature rule does not fit, before anything is built: each GD step is one
    gradient, each flow at least ``MIN_FULL_FLOW_EVALS`` evaluations, the modified flow's one
    gradient and one Hessian-vector product each, priced by the one rule of a model's fields
    (:func:`._cost.model_cost`) on the exact and the finite field."""
    from ..budget import Estimate, check
    from ..field import quadrature_plan
    from ._cost import COST_LIMIT_S, MIN_FULL_FLOW_EVALS, model_cost

    def comparison(spec: FieldSpec) -> float:
        c = model_cost(spec)
        return ((config.steps + 2 * MIN_FULL_FLOW_EVALS) * c.gradient
                + MIN_FULL_FLOW_EVALS * c.hvp)

    seconds = comparison(config.sampled_spec("exact"))
    if config.m:  # GD and both flows on one training set
        seconds += comparison(config.sampled_spec("finite", m=config.m))
    for m in config.spread_sizes:  # GD alone on each of spread_seeds training sets
        seconds += (config.spread_seeds * config.steps
                    * model_cost(config.sampled_spec("finite", m=m)).gradient)
    points = quadrature_plan(model, config.family(), config.T, radius=config.radius).points
    check(Estimate(f"gdflow of the {model} model at d={config.d}, T={config.T}, "
                   f"{config.steps} steps ({points} quadrature points)", 0,
                   seconds=seconds, advice="use a smaller d, T, steps or m"),
          force=config.force, time_limit=COST_LIMIT_S)


def run(config: Config, progress: ProgressCallback | None = None) -> Result:
    """GD against the flow and the modified flow on the exact and the finite field, and the
    end-point spread over training sets (module docstring); writes ``config.out``.

    ## Arguments
    - `config`: the validated options.
    - `progress`: called with the fraction of the work done (0..1).

    ## Returns
    A :class:`Result`.

    ## Raises
    - `MesadynError`: an unwritable ``out``, a run that does not fit
      (:func:`mesadyn.budget.gdflow`, checked before anything is built), a family with no
      exact field, GD diverging at this η, a flow that stopped early.
    """
    import numpy as np

    from ..analysis.gd_flow import compare_gd_flow, endpoint_spread, fit_power_law, gd_iterates
    from ..budget import check
    from ..budget import gdflow as gdflow_estimate
    from ..field import make_field
    from ..io import check_writable
    from ..models import PAPER
    from ._common import initial_theta

    if config.out is not None:
        check_writable(config.out, suffixes=config.OUT_SUFFIXES)
    model = None if config.paper_model else config.attention()
    if model is None:
        check(gdflow_estimate(config.d, config.T, config.steps, m=config.m,
                              spread_m=config.spread_sizes, device=config.torch_device))
    else:
        _check_model_cost(config, model)
    start = time.process_time()
    fam = config.family()
    lr = config.step_size()
    init = Init(config.init)
    theta0 = initial_theta(init, fam.d, config.a0, config.b0, config.sigma_w, config.seed,
                           model)
    mask = str(config.mask)
    sizes = config.spread_sizes
    n_spread = len(sizes) * config.spread_seeds
    weights = [1.0, 1.0 if config.m > 0 else 0.0, 0.5 * n_spread]
    total = sum(weights)
    done = 0.0

    def stage(weight: float) -> ProgressCallback:
        base = done

        def report(x: float) -> None:
            if progress is not None:
                progress(min(1.0, (base + weight * x) / total))

        return report

    def comparison(fld: Field, weight: float) -> GDFlowComparison:
        return compare_gd_flow(fld, theta0, lr, config.steps, mask=mask, solver=config.solver,
                               rtol=config.rtol, atol=config.atol, progress=stage(weight))

    comparisons = {"exact": comparison(make_field(config.sampled_spec("exact")), weights[0])}
    done += weights[0]
    finite: dict[str, Any] | None = None
    if config.m > 0:
        spec = config.sampled_spec("finite", m=config.m)
        comparisons["finite"] = comparison(make_field(spec), weights[1])
        finite = {"m": config.m, "seed": config.seed, **comparisons["finite"].to_dict()}
        done += weights[1]
    spread: dict[str, Any] | None = None
    if sizes:
        report = stage(weights[2])
        values, ses, ab_sd = [], [], []
        for i, m in enumerate(sizes):
            ends = []
            for j in range(config.spread_seeds):
                fld = make_field(config.sampled_spec("finite", m=m, seed=config.seed + j))
                ends.append(gd_iterates(fld, theta0, lr, config.steps, mask=mask)[-1])
                report((i * config.spread_seeds + j + 1) / n_spread)
            s, se = endpoint_spread(np.stack(ends))
            values.append(s)
            ses.append(se)
            ab_sd.append(float(np.std([float(np.mean((model or PAPER).ab(e))) for e in ends],
                                      ddof=1)))
        fit = fit_power_law(sizes, values, ses)
        spread = {"m": list(sizes), "seeds": config.spread_seeds,
                  "spread": values, "spread_se": ses, "ab_sd": ab_sd, "fit": fit.to_dict()}
    if progress is not None:
        progress(1.0)
    result = Result(
        family=fam.name, d=fam.d, T=config.T, lr=lr, steps=config.steps,
        tau_end=lr * config.steps, init=init.value, mask=mask,
        exact=comparisons["exact"].to_dict(), finite=finite, spread=spread,
        solver={"solver": config.solver, "rtol": config.rtol, "atol": config.atol},
        cpu_s=time.process_time() - start,
        model=None if model is None else model.name,
        layers=None if model is None else model.layers, comparisons=comparisons,
        status=Outcome.OK,
        message=f"GD against the flow and the modified flow on {', '.join(comparisons)} "
                f"field(s) to τ = {lr * config.steps:.6g}")
    return write_run(config, result)
