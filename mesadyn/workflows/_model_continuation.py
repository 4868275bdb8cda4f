"""``mesadyn continue`` for a model other than the paper's (``--model deep --layers k``).

The continuation itself is :mod:`mesadyn.analysis.continuation`'s, on the model's exact field
by quadrature rebuilt at each ``p``; what is the workflow's is here:

* :func:`check_model_cost` — the run priced before anything is built: every point costs
  Hessians of the quadrature field (:data:`HESSIANS_PER_POINT`, each ``n_active``
  Hessian-vector products, priced by :func:`mesadyn.field.direct_cost`), the start flow
  :data:`FLOW_GRADIENTS` gradients and :data:`FLOW_JACOBIANS` Jacobians; a run above
  :data:`~mesadyn.workflows._cost.COST_LIMIT_S` is refused unless ``force`` (``--yes``);
* :func:`model_start` — the start point: the fixed point the model's flow reaches from the
  layered diagonal init ``a0 = b0 = √(ab*/k)`` at ``p = start`` (as ``mesadyn stability
  --model`` finds it: :func:`~._model_flow.model_flow` to ``max|∇L| <``
  :data:`~._model_runs.FIXED_POINT_TOL`, in the fixed subspace of the loss's coordinate
  symmetry where it applies, :func:`~._model_runs.flow_basis`).

``--point`` is read by :func:`._run.load_point` with the model (its length, its name in the
messages).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..errors import MesadynError

if TYPE_CHECKING:
    import numpy as np

    from ..analysis.continuation import Parameter
    from ..models import Model
    from .continuation import Config

__all__ = ["FLOW_GRADIENTS", "FLOW_JACOBIANS", "HESSIANS_PER_POINT", "START_T_END",
           "check_model_cost", "model_start", "start_init", "start_source"]

#: Hessians of the quadrature field per continued point: about three Newton iterations of the
#: corrector and the tangent at the new point (the spectrum reuses it).  Measured for two
#: layers at d = 1, T = 4 (σ from 1 to 1.3 in 13 steps: 3 iterations each).
HESSIANS_PER_POINT = 4
#: The start flow's gradient evaluations and Jacobians (two layers, d = 1, T = 4: 481 and 7;
#: d = 2, T = 6: 475 and 6, :data:`mesadyn.workflows._model_runs.FIXED_POINT_RTOL`).
FLOW_GRADIENTS = 500
FLOW_JACOBIANS = 7
#: The longest flow time of :func:`model_start` (``mesadyn stability``'s default ``t_end``).
START_T_END = 1e4


def check_model_cost(config: Config, par: Parameter, model: Model, start_flow: bool) -> None:
    """Refuse a continuation of ``model`` expected above ``COST_LIMIT_S`` (unless
    ``config.force``), or whose quadrature rule does not fit in memory, before anything is
    built (module docstring): ``config.points`` points, at the largest T of the range, plus
    the start flow when ``start_flow``.

    ## Raises
    `MesadynError`: one line with the sizes, the estimate and the way out.
    """
    from ..budget import Estimate, check
    from ..field import quadrature_plan
    from ._cost import COST_LIMIT_S

    assert config.start is not None and config.stop is not None
    T = int(max(config.start, config.stop)) if par.discrete else config.T
    spec = par.spec(config.start)
    try:
        plan = quadrature_plan(model, spec.family, T, radius=spec.radius)
    except MesadynError as exc:  # no rule for the family: its advice names other fields
        raise MesadynError(f"mesadyn continue follows the exact field of model={model}: "
                           f"{str(exc).split(';')[0]}") from None
    check(plan.estimate())
    cost = plan.cost()  # the one rule of a model's fields (._cost.model_cost)
    grad = cost.gradient
    hessian = cost.hessian(int(model.active_mask(config.d).sum()))
    seconds = config.points * HESSIANS_PER_POINT * hessian
    if start_flow:
        seconds += FLOW_GRADIENTS * grad + FLOW_JACOBIANS * hessian
    check(Estimate(f"the continuation of the {model} model at d={config.d}, T={T} "
                   f"({config.points} points, {plan.points} quadrature points, a Hessian about "
                   f"{hessian:.3g} s)", 0, seconds=seconds,
                   advice="use a smaller d, T or points"),
          force=config.force, time_limit=COST_LIMIT_S)


def start_init(par: Parameter, p0: float) -> float:
    """``a0 = b0 = √(ab*/k)`` of the start flow at ``p = p0``: ``ab*`` of Theorem 4.1 for the
    process there, so that ``Σ_l a_l b_l`` starts at it.

    ## Raises
    `MesadynError`: a family with no reduced system (no ``ab*``: give ``--point``).
    """
    from ..theory import constants

    spec = par.spec(p0)
    try:
        ab_star = constants(spec.family, spec.T, radius=spec.radius).ab_star
    except MesadynError as exc:
        raise MesadynError(f"no layered diagonal start for family {spec.family.name!r} "
                           f"({str(exc).split(';')[0]}); give a start point (--point)") from None
    return math.sqrt(ab_star / par.model.layers)


def start_source(par: Parameter, p0: float) -> str:
    """Where :func:`model_start` starts, in words (the result's ``source``)."""
    from ._model_runs import FIXED_POINT_TOL

    return (f"the flow from the layered diagonal init a0 = b0 = sqrt(ab*/{par.model.layers}) = "
            f"{start_init(par, p0):.6g} at {par.name}={p0:g} to max|∇L| < {FIXED_POINT_TOL:g}")


def model_start(par: Parameter, p0: float, free: np.ndarray,
                device: str | None = None) -> np.ndarray:
    """The fixed point the flow of ``par.model`` reaches at ``p = p0`` from the layered
    diagonal init (:func:`start_init`) over the entries ``free``, its field evaluated on
    ``device`` (a resolved device; default the CPU).

    ## Raises
    `MesadynError`: no ``ab*`` for the family (:func:`start_init`), or a flow that does not
    reach ``max|∇L| < FIXED_POINT_TOL``.
    """
    from ..outcome import Outcome
    from ._model_flow import model_flow
    from ._model_runs import FIXED_POINT_ATOL, FIXED_POINT_RTOL, FIXED_POINT_TOL, flow_basis

    model = par.model
    spec = par.spec(p0)
    a0 = start_init(par, p0)
    theta0 = model.diagonal_init(spec.family.d, a0, a0).numpy()
    path = model_flow(par.build(p0, device=device), theta0, free, t_end=START_T_END, solver="auto",
                      rtol=FIXED_POINT_RTOL, atol=FIXED_POINT_ATOL, steady_tol=FIXED_POINT_TOL,
                      max_steps=100_000, n_save=2, basis=flow_basis(model, spec, theta0, free))
    if path.status is not Outcome.CONVERGED:
        raise MesadynError(f"the flow from the layered diagonal init a0 = b0 = {a0:.6g} found "
                           f"no fixed point at {par.name}={p0:g}: {path.message}; give a start "
                           "point (--point)")
    return path.final


