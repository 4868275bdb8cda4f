"""``mesadyn stability`` for real rotations: the full field at the fixed points of the 3-D
manifold ``(W^KQ_32, W^KQ_23, W^PV_12) = (a, c, b)·I`` (:mod:`mesadyn.workflows._manifold`).

The point is the manifold's balanced fixed point (``a² + c² = b²``, ``b·(a, c) = k*``:
:meth:`~mesadyn.analysis.rotation_manifold.ManifoldSystem.balanced`), the end of the full flow
from Assumption 3.1's diagonal start ``(a0, b0)``, or a θ read from ``point``; it is refined by
Newton over every active entry (a finite-sample field's own fixed point is found by its flow,
as for the paper's process) and tested like every stability point.  The report
(:class:`ManifoldPointReport`) has the keys of the paper's
(:class:`~mesadyn.analysis.stability.PointReport`) with the manifold in place of the diagonal:
``ab_theory = k*_1`` and ``c, cb, cb_theory = k*_2``; ``reduced`` is the 3-D system's Jacobian
at the point (numeric, and in closed form on the fixed-point curve:
:meth:`~mesadyn.analysis.rotation_manifold.ManifoldSystem.fixed_point_eigenvalues`) against
the nearest eigenvalues of the full ``−∇²L`` (the manifold's tangent space is invariant
under ∇²L, so its two nonzero eigenvalues are eigenvalues of the full spectrum); ``transverse``
is the spectrum on the active entries off the manifold's three diagonals.  The zero modes are
classified with the block rotations' tangents declared as symmetries
(:func:`~mesadyn.analysis.rotation_manifold.rotation_tangents`: zero on the manifold, a zero
mode at off-manifold minima).  Lemma 5.4's PL diagnostics are the 2-D system's: not computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..analysis.stability import PointReport, ReducedComparison
from ..outcome import Outcome
from ..progress import ProgressCallback

if TYPE_CHECKING:
    from ..analysis.fixedpoint import FixedPoint, FlowEnd
    from ..analysis.rotation_manifold import ManifoldSystem
    from ..field import Field
    from .stability import Config, Result

__all__ = ["ManifoldComparison", "ManifoldPointReport", "analyse", "manifold_report"]


@dataclass(frozen=True)
class ManifoldComparison(ReducedComparison):
    """The 3-D system's Jacobian ``−∇²ℓ`` at the point: ``c1 = g11``, ``c2 = h1`` and the
    other constants; ``eigenvalues_numeric`` (3, ascending) and ``eigenvalues_analytic`` (the
    closed form on the fixed-point curve); ``manifold_eigenvalues`` (its two nonzero ones) and
    the nearest full eigenvalues (``mu_hyperbola``/``nearest_full_eigenvalue``: the stiffer
    of the two)."""

    g12: float
    g22: float
    h2: float
    manifold_eigenvalues: np.ndarray
    nearest_full_eigenvalues: np.ndarray

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "system": "3-D rotation manifold (a, c, b)",
                "g11": self.c1, "g12": self.g12, "g22": self.g22, "h1": self.c2, "h2": self.h2,
                "manifold_eigenvalues": self.manifold_eigenvalues.tolist(),
                "nearest_full_eigenvalues": self.nearest_full_eigenvalues.tolist()}


@dataclass(frozen=True)
class ManifoldPointReport(PointReport):
    """A :class:`~mesadyn.analysis.stability.PointReport` at a real-rotation point, with the
    third coordinate: ``c`` (mean diagonal of ``W^KQ_23``), ``cb`` (mean of
    ``diag W^KQ_23 · diag W^PV_12``), ``cb_theory = k*_2`` and ``manifold_distance``
    (:func:`~mesadyn.analysis.rotation_manifold.off_manifold`)."""

    c: float
    cb: float
    cb_theory: float
    manifold_distance: float

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "c": self.c, "cb": self.cb, "cb_theory": self.cb_theory,
                "manifold_distance": self.manifold_distance}


def manifold_report(field: Field, ms: ManifoldSystem, fp: FixedPoint, *, zero_rtol: float,
                    newton_over: str) -> ManifoldPointReport:
    """The report at ``fp`` (Hessian of ``field``; the module docstring)."""
    import torch

    from ..analysis.fixedpoint import gradient_split
    from ..analysis.pl import ab_mean, mean_diagonals
    from ..analysis.rotation_manifold import (
        coordinates,
        manifold_mask,
        off_manifold,
        rotation_tangents,
    )
    from ..analysis.spectrum import classify, restricted_spectrum
    from ..analysis.stability import TransverseSpectrum
    from ..model import active_mask, block, unpack

    theta = np.asarray(fp.theta, np.float64)
    H = field.hessian(torch.as_tensor(theta)).cpu().numpy()
    sp = classify(H, theta, rtol=zero_rtol, field=field, symmetries=rotation_tangents(theta))
    a, c, b = coordinates(theta)
    numeric = np.linalg.eigvalsh(ms.jacobian(a, c, b))
    analytic = ms.fixed_point_eigenvalues(a, c, b)
    # the two of largest size (on the fixed-point curve: the two negative ones; the third is
    # the scaling's 0)
    nonzero = np.sort(analytic[np.argsort(np.abs(analytic))[1:]])
    nearest = np.array([float(sp.eigenvalues[np.argmin(np.abs(sp.eigenvalues - m))])
                        for m in nonzero])
    KQ, PV = unpack(torch.as_tensor(theta))
    cb = float((torch.diagonal(block(KQ, 2, 3)) * torch.diagonal(block(PV, 1, 2))).mean())
    ma, mb = mean_diagonals(theta)
    d = field.d
    k = ms.k_star
    return ManifoldPointReport(
        point=fp, spectrum=sp, a=ma, b=mb, ab=ab_mean(theta), ab_theory=float(k[0]),
        newton_over=newton_over, gradient=gradient_split(fp.grad),
        reduced=ManifoldComparison(
            c1=ms.g11, c2=ms.h1, eigenvalues_numeric=numeric, eigenvalues_analytic=analytic,
            mu_hyperbola=float(nonzero[0]), nearest_full_eigenvalue=float(nearest[0]),
            g12=ms.g12, g22=ms.g22, h2=ms.h2, manifold_eigenvalues=nonzero,
            nearest_full_eigenvalues=nearest),
        transverse=TransverseSpectrum(
            restricted_spectrum(H, active_mask(d) & ~manifold_mask(d)), sp.tol),
        c=c, cb=cb, cb_theory=float(k[1]), manifold_distance=float(off_manifold(theta)[0]))


def analyse(config: Config, progress: ProgressCallback | None = None) -> Result:
    """The analysis of :func:`mesadyn.workflows.stability.run` for real rotations (module
    docstring), not written."""
    from ..analysis.fixedpoint import flow_to_fixed_point, refine
    from ..analysis.rotation_manifold import embed
    from ..analysis.stability import FixedPointTest, monte_carlo_check
    from ..field import FiniteDifferenceHessian, MonteCarloDraws
    from ..model import diagonal_init
    from ._manifold import manifold_system
    from ._run import load_point
    from ._stability_run import leave_saddle
    from .stability import NEWTON_ITERATIONS, Failure, hessian_field, result_of

    def tick(stage: int) -> None:
        if progress is not None:
            progress(float(stage))

    c = config
    d = c.d
    ms, how = manifold_system(c)
    th_file = load_point(c.point, d) if c.point is not None else None
    fld = hessian_field(c.sampled_spec(c.field, samples=c.samples, m=c.m))
    fld.prepare()
    newton = NEWTON_ITERATIONS if c.deterministic else 0
    finite = str(c.field) == "finite"
    end: FlowEnd | None = None
    if th_file is not None:
        source = f"file {c.point}"
        if finite:
            source = f"flow of the finite-sample loss from file {c.point}"
            fp, end = flow_to_fixed_point(fld, th_file, t_end=c.t_end, steady_tol=c.steady_tol,
                                          max_iter=newton)
        else:
            fp = refine(fld, th_file, max_iter=newton)
    elif c.a0 is not None and c.b0 is not None:
        source = f"flow from diagonal init a0={c.a0}, b0={c.b0}"
        fp, end = flow_to_fixed_point(fld, diagonal_init(d, c.a0, c.b0).numpy(), t_end=c.t_end,
                                      steady_tol=c.steady_tol, max_iter=newton)
    else:
        source = ("the 3-D manifold's balanced fixed point a² + c² = b², b·(a, c) = k* "
                  f"(constants from the {how})")
        balanced = embed(d, *ms.balanced()).numpy()
        if finite:
            source = f"flow of the finite-sample loss from {source}"
            fp, end = flow_to_fixed_point(fld, balanced, t_end=c.t_end, steady_tol=c.steady_tol,
                                          max_iter=newton)
        else:
            fp = refine(fld, balanced, max_iter=newton)
    outcomes: list[Outcome] = []
    notes: list[str] = []
    if end is not None:
        fp, end, verdict, note = leave_saddle(fld, fp, end, mask=None, t_end=c.t_end,
                                              newton=newton)
        outcomes.append(verdict)
        notes += [note] if note else []
    if c.pl:
        notes.append("Lemma 5.4's PL diagnostics are the paper's 2-D system's: not computed for "
                     "rotation=real")
    base = fld.base if isinstance(fld, FiniteDifferenceHessian) else fld
    # a Monte-Carlo point: its sampled gradient against its error (real rotations draw whole
    # sequences, MonteCarloSequenceField)
    mc = (monte_carlo_check(base, fp.theta)
          if isinstance(base, MonteCarloDraws) and np.isfinite(fp.theta).all() else None)
    test = FixedPointTest(fp.residual, c.steady_tol, mc)
    if not test.passed:
        failure = Failure.of("fixed point", test, fp, end)
        return result_of(c, fld, source, Outcome.FAILED, "; ".join([failure.message, *notes]),
                         fixed_point=None, monte_carlo=mc, failure=failure)
    report = manifold_report(fld, ms, fp, zero_rtol=c.zero_rtol, newton_over="all active entries")
    tick(1)
    plot = None
    if c.plot is not None:
        from ..plots import family_title, save, spectra_panels

        fig, _ = spectra_panels({"fixed point (3-D rotation manifold)": report.spectrum},
                                title=family_title(c.family(), T=c.T))
        plot = str(save(fig, c.plot))
    tick(3)
    status = Outcome.combine([Outcome.FIXED_POINT, *outcomes])
    lead = "every analysed point passed the fixed-point test" if status is Outcome.FIXED_POINT \
        else ""
    return result_of(c, fld, source, status, "; ".join([m for m in [lead, *notes] if m]),
                     fixed_point=report, monte_carlo=mc, plot=plot)
