"""The analysis of :mod:`mesadyn.workflows.stability`: find the point, test it, leave a saddle
the steady-state test stopped at, analyse the point (and, for Proposition 4.2's families, the
dense point the unmasked flow reaches), the PL diagnostics and the spectra figure."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..outcome import Outcome
from ..progress import ProgressCallback
from .stability import NEWTON_ITERATIONS, Config, Failure, Result, hessian_field, result_of

if TYPE_CHECKING:
    from ..analysis.fixedpoint import FixedPoint, FlowEnd
    from ..analysis.spectrum import Spectrum
    from ..analysis.stability import PLReport, PointReport, ReleasedPoint
    from ..analysis.steady import Curvature
    from ..field import Field
    from ..model import MaskLike

__all__ = ["analyse", "leave_saddle"]


def _joined(first: FlowEnd, more: FlowEnd) -> FlowEnd:
    """The flow ``first`` followed by ``more`` (which started where ``first`` ended)."""
    from ..analysis.fixedpoint import FlowEnd

    t0 = first.t
    return FlowEnd(theta=more.theta, t=t0 + more.t, status=more.status, backend=more.backend,
                   wall_s=first.wall_s + more.wall_s,
                   t_series=np.concatenate([first.t_series, t0 + more.t_series[1:]]),
                   theta_series=np.concatenate([first.theta_series, more.theta_series[1:]]),
                   loss_series=np.concatenate([first.loss_series, more.loss_series[1:]]))


def _saddle_words(c: Curvature) -> str:
    return (f"∇²L has {c.n_negative} negative eigenvalue(s) (the smallest "
            f"{c.lambda_min:.4g}): a saddle")


def leave_saddle(fld: Field, fp: FixedPoint, end: FlowEnd, *, mask: MaskLike, t_end: float,
                 newton: int) -> tuple[FixedPoint, FlowEnd, Outcome, str]:
    """A flow's end ``fp`` (refined from ``end``) checked for negative curvature over the free
    coordinates (:func:`~mesadyn.analysis.steady.curvature`).  At a saddle that the
    steady-state test stopped the flow at, the flow goes on from where it stopped without that
    test, to ``t_end`` (a run asked for a flow's end does not stop at a saddle), and is refined
    again.  Returns the point, the (joined) flow, ``saddle`` or ``fixed_point``, and a note."""
    from ..analysis.fixedpoint import flow_to_fixed_point
    from ..analysis.steady import curvature
    from ..model import free_mask

    if not np.isfinite(fp.theta).all():
        return fp, end, Outcome.FIXED_POINT, ""
    free = free_mask(mask, fld.d)
    c = curvature(fld, fp.theta, free)
    if not c.saddle:
        return fp, end, Outcome.FIXED_POINT, ""
    if end.status != str(Outcome.CONVERGED) or end.t >= t_end:
        return fp, end, Outcome.SADDLE, f"the flow ends at τ={end.t:.6g}, where {_saddle_words(c)}"
    note = (f"the steady-state test stopped the flow at τ={end.t:.6g}, where {_saddle_words(c)}; "
            "it was continued from there without that test")
    fp2, more = flow_to_fixed_point(fld, end.theta, t_end=t_end - end.t, mask=mask,
                                    steady_tol=0.0, max_iter=newton)
    joined = _joined(end, more)
    if np.isfinite(fp2.theta).all():
        c2 = curvature(fld, fp2.theta, free)
        if c2.saddle:
            return fp2, joined, Outcome.SADDLE, (
                f"{note} to τ={joined.t:.6g}, and it ends at a saddle still ({c2.n_negative} "
                f"negative eigenvalue(s), the smallest {c2.lambda_min:.4g})")
    return fp2, joined, Outcome.FIXED_POINT, f"{note} to τ={joined.t:.6g}"


def analyse(config: Config, progress: ProgressCallback | None = None) -> Result:
    """The analysis of :func:`mesadyn.workflows.stability.run` (its docstring), not written;
    real rotations analyse the 3-D manifold's fixed point
    (:mod:`mesadyn.workflows._manifold_stability`)."""
    import torch

    if not config.paper_model:  # the model's own layout (mesadyn.workflows._model_runs)
        from ._model_runs import stability_of_model

        return stability_of_model(config, progress)  # type: ignore[return-value]
    if config.rotation == "real":
        from ._manifold_stability import analyse as analyse_manifold

        return analyse_manifold(config, progress)

    from ..analysis.fixedpoint import flow_to_fixed_point, refine
    from ..analysis.spectrum import classify
    from ..analysis.stability import (
        FixedPointTest,
        analyse_point,
        monte_carlo_check,
        pl_report,
        released_point,
    )
    from ..field import FiniteDifferenceHessian, MonteCarloDraws
    from ..model import diagonal_init, diagonal_mask
    from ._run import load_point

    def tick(stage: int) -> None:
        if progress is not None:
            progress(float(stage))

    c = config
    d = c.d
    fam = c.family()
    consts = c.constants()  # refuses a rotation or noise: no reduced system to compare with
    th_file = load_point(c.point, d) if c.point is not None else None
    fld = hessian_field(c.sampled_spec(c.field, samples=c.samples, m=c.m))
    fld.prepare()
    # Proposition 4.2: without Assumption 4.1 the diagonal is invariant only under the mask
    ones = not fam.assumption_41
    mask = diagonal_mask(d) if ones else None
    mask_note = "diagonal mask (Theorem 4.3)" if ones else "all active entries"
    newton = NEWTON_ITERATIONS if c.deterministic else 0  # Monte-Carlo: the point as given
    finite = str(c.field) == "finite"
    end: FlowEnd | None = None
    if th_file is not None:
        source = f"file {c.point}"
        mask, mask_note = None, "all active entries"  # a given θ may be dense
        if finite:
            # e.g. the end of GD on the same draws: flow on to the finite loss's own fixed
            # point (Newton alone is not safe that far out along its slow modes)
            source = f"flow of the finite-sample loss from file {c.point}"
            fp, end = flow_to_fixed_point(fld, th_file, t_end=c.t_end,
                                          steady_tol=c.steady_tol, max_iter=newton)
        else:
            fp = refine(fld, th_file, max_iter=newton)
    elif c.a0 is not None and c.b0 is not None:
        source = f"flow from diagonal init a0={c.a0}, b0={c.b0}"
        fp, end = flow_to_fixed_point(fld, diagonal_init(d, c.a0, c.b0).numpy(),
                                      t_end=c.t_end, mask=mask, steady_tol=c.steady_tol,
                                      max_iter=newton)
    else:
        theorem = "4.3" if ones else "4.1"
        source = f"balanced point a = b = sqrt(ab*) (Theorem {theorem})"
        s = math.sqrt(consts.ab_star)  # the balanced point at this radius
        balanced = diagonal_init(d, s, s).numpy()
        if finite:
            # the draws break the diagonal symmetry: the finite loss's own fixed point lies off
            # the diagonal structure, O(1/√m) away, where Newton alone is not safe; flow there
            source = (f"flow of the finite-sample loss from the balanced point a = b = "
                      f"sqrt(ab*) of the exact loss (Theorem {theorem})")
            fp, end = flow_to_fixed_point(fld, balanced, t_end=c.t_end, mask=mask,
                                          steady_tol=c.steady_tol, max_iter=newton)
        else:
            fp = refine(fld, balanced, mask=mask, max_iter=newton)
    outcomes: list[Outcome] = []
    notes: list[str] = []
    if end is not None:  # meant to be the flow's end: not a saddle the steady test stopped at
        fp, end, verdict, note = leave_saddle(fld, fp, end, mask=mask, t_end=c.t_end,
                                              newton=newton)
        outcomes.append(verdict)
        notes += [note] if note else []
    base = fld.base if isinstance(fld, FiniteDifferenceHessian) else fld
    mc = (monte_carlo_check(base, fp.theta)
          if isinstance(base, MonteCarloDraws) and np.isfinite(fp.theta).all() else None)

    def done(status: Outcome, failure: Failure | None = None, *,
             fixed_point: PointReport | None, released: ReleasedPoint | None = None,
             pl: PLReport | None = None, plot: str | None = None) -> Result:
        lead = [failure.message] if failure is not None else []
        if not lead and status is Outcome.FIXED_POINT:
            lead = ["every analysed point passed the fixed-point test"]
        return result_of(c, fld, source, status, "; ".join(lead + notes),
                         fixed_point=fixed_point, monte_carlo=mc, released=released, pl=pl,
                         plot=plot, failure=failure)

    test = FixedPointTest(fp.residual, c.steady_tol, mc)
    if not test.passed:
        return done(Outcome.FAILED, Failure.of("fixed point", test, fp, end), fixed_point=None)
    report = analyse_point(fld, consts, fp, zero_rtol=c.zero_rtol, newton_over=mask_note)
    tick(1)
    spectra: dict[str, Spectrum] = {
        ("masked fixed point" if ones else "fixed point"): report.spectrum}
    released = None
    pl_flow, pl_fp, pl_sp = end, fp, report.spectrum
    if ones:
        rel_fp, rel_end = flow_to_fixed_point(fld, fp.theta, t_end=c.t_end,
                                              steady_tol=c.steady_tol, max_iter=newton)
        rel_fp, rel_end, verdict, note = leave_saddle(fld, rel_fp, rel_end, mask=None,
                                                      t_end=c.t_end, newton=newton)
        outcomes.append(verdict)
        notes += [note] if note else []
        rel_test = FixedPointTest(rel_fp.residual, c.steady_tol)
        if not rel_test.passed:
            return done(Outcome.FAILED, Failure.of("released dense point", rel_test, rel_fp,
                                                   rel_end), fixed_point=report)
        rel_report = analyse_point(fld, consts, rel_fp, zero_rtol=c.zero_rtol,
                                   newton_over="all active entries")
        released = released_point(rel_report, rel_end, fp)
        spectra["dense fixed point (released)"] = rel_report.spectrum
        pl_flow, pl_fp, pl_sp = rel_end, rel_fp, rel_report.spectrum
    tick(2)
    pl = None
    if c.pl and c.exact:
        if pl_flow is None:
            start = diagonal_init(d, 0.1, 0.1).numpy()
            pl_fp, pl_flow = flow_to_fixed_point(fld, start, t_end=c.t_end)
            H = fld.hessian(torch.as_tensor(pl_fp.theta)).cpu().numpy()
            pl_sp = classify(H, pl_fp.theta, rtol=c.zero_rtol, field=fld)
        trajectory = "release flow (unmasked)" if ones else (
            source if end is not None else "flow from diagonal init a0 = b0 = 0.1")
        pl = pl_report(fld, consts, pl_flow, pl_fp, pl_sp, trajectory)
    plot = None
    if c.plot is not None:
        from ..plots import family_title, save, spectra_panels

        fig, _ = spectra_panels(spectra, title=family_title(fam, T=c.T))
        plot = str(save(fig, c.plot))
    tick(3)
    status = Outcome.combine([Outcome.FIXED_POINT, *outcomes])
    return done(status, fixed_point=report, released=released, pl=pl, plot=plot)
