"""The one cost model of the workflows: what a run is expected to cost before it starts.

Two uses, one owner:

- **the guard** — a Monte-Carlo or finite-sample full flow expected to run longer than
  :data:`COST_LIMIT_S` is refused before anything is built, unless the user confirms
  (``force=True``, ``--yes``): :func:`sampled_flow_seconds` prices it from the sampled field's own
  cost model (:func:`mesadyn.field.choose_form`), :func:`check_cost` hands it to the one size
  guard (:func:`mesadyn.budget.check`);
- **a model's fields** — a model other than the paper's is priced per gradient and per
  Hessian-vector product by :func:`model_cost` (the fields' own :func:`mesadyn.field.
  direct_cost`, over the quadrature rule's points or the draws), the same rule for
  ``integrate``, ``stability``, ``continue``, ``ensemble`` and ``gdflow``;
- **the schedule** — ``mesadyn reproduce`` orders its runs costliest first across worker
  processes: :func:`gd_cost` and :data:`FLOW_COST` give each run a relative CPU cost (never used
  for a result).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..field import DirectCost, FieldSpec

__all__ = ["COST_LIMIT_S", "FLOW_COST", "MIN_FULL_FLOW_EVALS", "SPARSE_SEQUENCE_COST",
           "check_cost", "gd_cost", "model_cost", "sampled_flow_seconds"]

#: A Monte-Carlo / finite-sample full flow expected to run longer than this is refused
#: unless ``force`` is set.
COST_LIMIT_S = 60.0
#: Lower bound on the gradient evaluations of a full flow to its steady state (the exact
#: d = 3, T = 20 flows of the golden tests take 347 and 881 with LSODA at rtol 1e-10).
MIN_FULL_FLOW_EVALS = 200
#: An exact flow's cost in :func:`gd_cost`'s units (``mesadyn reproduce``'s flows, to the
#: horizon of :func:`mesadyn.analysis.horizon.full_flow_horizon` at rtol 1e-10): at most about
#: two CPU seconds (0.4–1.8 measured; the unmasked ``x_1 = 1_d`` flow, whose horizon is 20×
#: longer, about 6), some fourteen GD steps at the paper's m = 10⁴, T = 100 (0.13–0.15 CPU-s
#: each with the fused kernel, ``benchmarks/bench_gd_step.py``).
FLOW_COST = 14 * 10_000 * 100
#: A sparse sequence's cost in :func:`gd_cost`'s units (a dense one costs T): its closed sum
#: over t makes a GD step at d = 5, T = 100, m = 10⁴ take 0.029 CPU-s against 0.125 for
#: gaussian draws through the fused kernel, i.e. ≈ 23/100.
SPARSE_SEQUENCE_COST = 23


def sampled_flow_seconds(d: int, T: int, m: int, flows: int = 1, *,
                         single_coordinate: bool = False) -> float:
    """A lower bound on the wall time of ``flows`` full flows of one sampled field with ``m``
    draws at ``(d, T)``, before anything is built: :data:`MIN_FULL_FLOW_EVALS` gradient
    evaluations each at the cost the field's own model (:func:`mesadyn.field.choose_form`)
    gives, plus the one-time build of the polynomial form when that is the form it picks.
    ``single_coordinate``: every draw has one nonzero entry of ``x_1``
    (:attr:`mesadyn.process.Family.single_coordinate`)."""
    from ..field import Form, choose_form

    c = choose_form(d, T, m, single=m if single_coordinate else 0)
    if c.form is Form.POLYNOMIAL:
        return c.build_s + flows * MIN_FULL_FLOW_EVALS * c.poly_eval_s
    return flows * MIN_FULL_FLOW_EVALS * c.direct_eval_s


def model_cost(spec: FieldSpec) -> DirectCost:
    """What one gradient and one Hessian-vector product of the field ``spec`` names cost, for a
    model other than the paper's, before it is built: :func:`mesadyn.field.direct_cost` over
    its weighted sequences (the exact field's quadrature points, the Monte-Carlo samples or the
    training sequences).  A quadrature rule that does not fit is refused here, naming it
    (:func:`mesadyn.budget.check`)."""
    from ..budget import check
    from ..field import FieldKind, direct_cost, quadrature_plan

    model, fam = spec.model, spec.family
    if spec.kind is FieldKind.EXACT:
        plan = quadrature_plan(model, fam, spec.T, radius=spec.radius)
        check(plan.estimate())
        return plan.cost()
    rows = spec.samples if spec.kind is FieldKind.MC else spec.m
    assert rows is not None
    return direct_cost(model, fam.d, spec.T, rows)


def check_cost(seconds: float, what: str, force: bool) -> None:
    """Refuse a run estimated above :data:`COST_LIMIT_S` unless ``force``: the time part of
    the one size guard (:func:`mesadyn.budget.check` with ``time_limit``).

    ## Raises
    `MesadynError`: one line with the estimate and the ways out.
    """
    from ..budget import Estimate, check

    check(Estimate(
        f"{what} (at least {MIN_FULL_FLOW_EVALS} gradient evaluations per flow)", 0,
        seconds=seconds, advice="or use fewer samples / --field exact"),
        force=force, time_limit=COST_LIMIT_S)


def gd_cost(T: int, m: int, steps: int, *, single_coordinate: bool = False) -> float:
    """A GD run's relative CPU cost, for scheduling only: ``(steps + 1)·m·T``, with
    :data:`SPARSE_SEQUENCE_COST` in place of T where every draw has one nonzero entry
    (Example 4.1's sparse family)."""
    per_sequence = SPARSE_SEQUENCE_COST if single_coordinate else T
    return float((steps + 1) * m * per_sequence)
