"""The stability report of a fixed point, and Proposition 4.2's released dense point.

A *report* (:class:`PointReport`) puts together, at one refined critical point of ``L``: the
mean diagonals ``a, b`` and ``ab`` against Theorem 4.1/4.3's ``ab* = c2/c1``; the gradient split
on and off the diagonal structure; the spectrum of ``−∇²L`` with its zero modes explained
(:func:`mesadyn.analysis.spectrum.classify`); the 2-D system of Lemma 5.2 at ``(a, b)``
(numeric and closed-form eigenvalues, and ``−c1(a² + b²)`` against the nearest full eigenvalue);
and the *transverse* spectrum across the invariant diagonal manifold.

Proposition 4.2 (``x_1 = 1_d``, Section 4.3): at Theorem 4.3's masked fixed point the
off-diagonal gradient of ``W^KQ_32``, ``W^PV_12`` is not zero, so the unmasked flow leaves the
diagonal structure; :func:`released_point` reports the dense fixed point it reaches
(Appendix B.5), whose ``W1 = W^KQ_32``, ``W2 = W^PV_12`` are not multiples of the identity.

Whether a point *is* a fixed point is tested, never assumed (:class:`FixedPointTest`): Newton's
residual ``max|∇L|`` over the free coordinates must meet the flow's own steady-state tolerance;
for a Monte-Carlo field, whose sampled gradient never vanishes at the population fixed point,
a point evaluated as given passes when every active gradient entry is within the Monte-Carlo
error (:meth:`MonteCarloCheck.consistent_with_zero`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..errors import MesadynError
from ..field import Field, MonteCarloDraws
from ..model import active_mask, block, unpack
from ..reduced import ReducedSystem
from ..theory import Constants
from .fixedpoint import FixedPoint, FlowEnd, gradient_split, offdiag_mask
from .pl import PLTrace, ab_mean, dominant_rate, fitted_rate, mean_diagonals, pl_trace
from .spectrum import (
    Spectrum,
    classify,
    reduced_spectrum,
    reduced_spectrum_analytic,
    restricted_spectrum,
)

if TYPE_CHECKING:
    from ..models import Model

#: Family-wise false-alarm rate of the Monte-Carlo zero-gradient test (Bonferroni over entries).
MC_ALPHA = 1e-3
#: The blocks of θ that Proposition 4.2's dense point leaves at zero (Appendix B.5).
OTHER_ACTIVE_BLOCKS = ("W_KQ_22", "W_KQ_23", "W_KQ_33", "W_PV_13")


# ---- the start point ---------------------------------------------------------------------
def check_point(arr: np.ndarray, d: int, where: str, model: Model | None = None
                ) -> np.ndarray:
    """``arr`` as a flat θ of ``model``'s length at ``d`` (the paper's ``18d²`` without a
    model) of real, finite entries (float64), or a one-line error naming ``where`` it came from
    (:func:`mesadyn.workflows.load_point` reads the files).

    ## Raises
    `MesadynError`: a non-numeric array (complex, boolean, strings: refused, never cast), the
    wrong shape, or non-finite entries.
    """
    n = 18 * d * d if model is None else model.n_params(d)
    layout = f"d={d}" if model is None else f"the {model} model at d={d}"
    if arr.dtype.kind not in "fiu":
        raise MesadynError(f"the point in {where} must be real numbers, got {arr.dtype}")
    out = np.asarray(arr, np.float64)
    if out.shape != (n,):
        raise MesadynError(f"the point in {where} must have shape ({n},) for {layout}, got "
                           f"{out.shape}")
    if not np.isfinite(out).all():
        raise MesadynError(f"the point in {where} has {int((~np.isfinite(out)).sum())} "
                           "non-finite entries")
    return out


# ---- is it a fixed point? ------------------------------------------------------------------
@dataclass(frozen=True)
class MonteCarloCheck:
    """The Monte-Carlo gradient at a point, with batch-means standard errors.

    ``max_z`` is the largest ``|∇L_i| / SE_i`` over the active entries (an entry with zero SE,
    which the data never reach, counts as 0).
    """

    samples: int
    batches: int
    loss: float
    loss_se: float
    grad_max: float
    grad_se_max: float
    max_z: float
    n_tested: int
    hessian: str = "central differences of the common-random-numbers gradient"

    @property
    def z_critical(self) -> float:
        """Two-sided Student-t quantile (``batches − 1`` degrees of freedom) at the
        Bonferroni level ``MC_ALPHA / n_tested``: all entries are within it with probability
        ``>= 1 − MC_ALPHA`` when the population gradient is zero."""
        from scipy.stats import t as student_t

        return float(student_t.isf(MC_ALPHA / (2 * max(self.n_tested, 1)), self.batches - 1))

    def consistent_with_zero(self) -> bool:
        """Whether the sampled gradient is zero within the Monte-Carlo error (``max_z``)."""
        return math.isfinite(self.max_z) and self.max_z <= self.z_critical

    def to_dict(self) -> dict[str, object]:
        """JSON-ready (the ``monte_carlo`` object of ``mesadyn stability --json``)."""
        return {"samples": self.samples, "batches": self.batches, "loss": self.loss,
                "loss_se": self.loss_se, "grad_max": self.grad_max,
                "grad_se_max": self.grad_se_max, "max_z": self.max_z, "hessian": self.hessian}


def monte_carlo_check(field: MonteCarloDraws, theta: np.ndarray) -> MonteCarloCheck:
    """:class:`MonteCarloCheck` of a Monte-Carlo ``field`` (the paper's draws or whole
    sequences) at ``theta`` (one :meth:`estimate`)."""
    est = field.estimate(torch.as_tensor(theta))
    g, se = est.grad.numpy(), est.grad_se.numpy()
    act = active_mask(field.d)
    z = np.abs(g[act]) / np.where(se[act] > 0, se[act], np.inf)
    return MonteCarloCheck(
        samples=est.samples, batches=est.batches, loss=float(est.loss),
        loss_se=float(est.loss_se), grad_max=float(np.abs(g).max()),
        grad_se_max=float(se.max()), max_z=float(z.max()), n_tested=int(act.sum()))


@dataclass(frozen=True)
class FixedPointTest:
    """Whether a refined point is a fixed point: ``residual <= tolerance`` (``max|∇L|`` over
    the free coordinates, against the flow's steady-state tolerance), or, for a Monte-Carlo
    field, the sampled gradient is zero within its error (``monte_carlo``)."""

    residual: float
    tolerance: float
    monte_carlo: MonteCarloCheck | None = None

    @property
    def passed(self) -> bool:
        if math.isfinite(self.residual) and self.residual <= self.tolerance:
            return True
        return self.monte_carlo is not None and self.monte_carlo.consistent_with_zero()

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"residual": self.residual, "tolerance": self.tolerance,
                                  "passed": self.passed}
        if self.monte_carlo is not None:
            out["max_z"] = self.monte_carlo.max_z
            out["z_critical"] = self.monte_carlo.z_critical
        return out


# ---- the report at a fixed point -----------------------------------------------------------
@dataclass(frozen=True)
class ReducedComparison:
    """Lemma 5.2's 2×2 Jacobian at the mean diagonals ``(a, b)`` of a full point."""

    c1: float
    c2: float
    eigenvalues_numeric: np.ndarray
    eigenvalues_analytic: np.ndarray
    mu_hyperbola: float  # −c1(a² + b²), the non-zero eigenvalue on ab = c2/c1
    nearest_full_eigenvalue: float

    @property
    def max_abs_diff(self) -> float:
        return float(np.abs(self.eigenvalues_numeric - self.eigenvalues_analytic).max())

    def to_dict(self) -> dict[str, object]:
        return {"c1": self.c1, "c2": self.c2,
                "eigenvalues_numeric": self.eigenvalues_numeric.tolist(),
                "eigenvalues_analytic": self.eigenvalues_analytic.tolist(),
                "max_abs_diff": self.max_abs_diff, "mu_hyperbola": self.mu_hyperbola,
                "nearest_full_eigenvalue": self.nearest_full_eigenvalue}


@dataclass(frozen=True)
class TransverseSpectrum:
    """Eigenvalues of ``−∇²L`` restricted to the active entries off the diagonals of
    ``W^KQ_32``, ``W^PV_12``: the curvature across the diagonal manifold of Theorem 4.1."""

    eigenvalues: np.ndarray
    tol: float  # the zero-mode threshold of the full spectrum

    def to_dict(self) -> dict[str, object]:
        mu, tol = self.eigenvalues, self.tol
        return {
            "n": int(mu.size),
            "max_eigenvalue": float(mu.max()) if mu.size else float("nan"),
            "min_eigenvalue": float(mu.min()) if mu.size else float("nan"),
            "n_unstable": int((mu > tol).sum()),
            "n_zero": int((np.abs(mu) <= tol).sum()),
            "stable": bool((mu <= tol).all()),
        }


@dataclass(frozen=True)
class PointReport:
    """A refined critical point of ``L`` and its linear stability (module docstring)."""

    point: FixedPoint
    spectrum: Spectrum
    a: float
    b: float
    ab: float
    ab_theory: float
    newton_over: str
    gradient: dict[str, float]  # gradient_split: max|∇L| on and off the diagonal structure
    reduced: ReducedComparison
    transverse: TransverseSpectrum

    def to_dict(self) -> dict[str, object]:
        """JSON-ready (the ``fixed_point`` object of ``mesadyn stability --json``)."""
        return {
            "ab": self.ab, "ab_theory": self.ab_theory, "a": self.a, "b": self.b,
            "loss": self.point.loss, "newton_iterations": self.point.iterations,
            "newton_residual": self.point.residual, "newton_over": self.newton_over,
            **self.gradient, **self.spectrum.to_dict(),
            "reduced": self.reduced.to_dict(), "transverse": self.transverse.to_dict(),
        }


def analyse_point(field: Field, c: Constants, fp: FixedPoint, *, zero_rtol: float,
                  newton_over: str) -> PointReport:
    """The :class:`PointReport` of ``fp`` (Hessian of ``field`` at ``fp.theta``).

    ## Arguments
    - `field`: a field whose :meth:`~mesadyn.field.Field.hessian` is affordable (exact, or a
      :class:`~mesadyn.field.FiniteDifferenceHessian`).
    - `c`: the constants of Lemma 5.2 for the field's family and T.
    - `fp`: the refined point; `zero_rtol`: zero-mode threshold relative to ``max|μ|``;
      `newton_over`: which coordinates Newton refined (shown in the report).
    """
    H = field.hessian(torch.as_tensor(fp.theta)).cpu().numpy()
    sp = classify(H, fp.theta, rtol=zero_rtol, field=field)
    a, b = mean_diagonals(fp.theta)
    system = ReducedSystem(c.c1, c.c2)
    mu_red = -c.c1 * (a * a + b * b)
    nearest = float(sp.eigenvalues[np.argmin(np.abs(sp.eigenvalues - mu_red))])
    return PointReport(
        point=fp, spectrum=sp, a=a, b=b, ab=ab_mean(fp.theta), ab_theory=c.ab_star,
        newton_over=newton_over, gradient=gradient_split(fp.grad),
        reduced=ReducedComparison(c.c1, c.c2, reduced_spectrum(system, a, b),
                                  reduced_spectrum_analytic(system, a, b), mu_red, nearest),
        transverse=TransverseSpectrum(restricted_spectrum(H, offdiag_mask(field.d)), sp.tol),
    )


# ---- Proposition 4.2 -----------------------------------------------------------------------
def identity_distance(W: np.ndarray) -> float:
    """``‖W − (tr W/d) I‖_F / ‖W‖_F``: 0 for a multiple of the identity (0 for W = 0)."""
    d = W.shape[0]
    nrm = np.linalg.norm(W)
    if nrm == 0:
        return 0.0
    return float(np.linalg.norm(W - np.trace(W) / d * np.eye(d)) / nrm)


def theta_blocks(theta: np.ndarray) -> dict[str, np.ndarray]:
    """Every d×d block ``W_KQ_ij``, ``W_PV_ij`` (i, j = 1..3) of a flat θ, as numpy arrays."""
    W_KQ, W_PV = unpack(torch.as_tensor(theta))
    out = {}
    for m, W in (("KQ", W_KQ), ("PV", W_PV)):
        for i in (1, 2, 3):
            for j in (1, 2, 3):
                out[f"W_{m}_{i}{j}"] = block(W, i, j).numpy().copy()
    return out


def _diag_mean(W: np.ndarray) -> float:
    return float(np.diag(W).mean())


def _offdiag_mean(W: np.ndarray) -> float:
    d = W.shape[0]
    return float((W.sum() - np.trace(W)) / (d * d - d)) if d > 1 else 0.0


@dataclass(frozen=True)
class ReleasedPoint:
    """Proposition 4.2 / Appendix B.5: the dense fixed point the unmasked flow reaches from
    Theorem 4.3's masked one, and how far its ``W1 = W^KQ_32``, ``W2 = W^PV_12`` are from
    multiples of the identity (one *preconditioned* GD step, not vanilla GD)."""

    report: PointReport
    flow: FlowEnd
    masked_loss: float
    W_KQ_32: np.ndarray
    W_PV_12: np.ndarray
    other_active_blocks_max: float

    @property
    def loss_drop(self) -> float:
        return self.masked_loss - self.report.point.loss

    def to_dict(self) -> dict[str, object]:
        """JSON-ready (the ``released`` object of ``mesadyn stability --json``)."""
        rep = self.report.to_dict()
        W1, W2 = self.W_KQ_32, self.W_PV_12
        return {
            "W_KQ_32": W1.tolist(), "W_PV_12": W2.tolist(),
            "loss": self.report.point.loss, "loss_drop": self.loss_drop,
            "grad_norm": self.report.point.grad_norm,
            **{k: rep[k] for k in ("eigenvalues", "n_zero", "n_unstable", "stable",
                                   "stiffness", "zero_modes", "zero_gap", "leading", "ab")},
            "newton_iterations": self.report.point.iterations,
            "flow": self.flow.to_dict(),
            "one_step_gd": {
                "W1_identity_distance": identity_distance(W1),
                "W2_identity_distance": identity_distance(W2),
                "W1_diag_mean": _diag_mean(W1), "W1_offdiag_mean": _offdiag_mean(W1),
                "W2_diag_mean": _diag_mean(W2), "W2_offdiag_mean": _offdiag_mean(W2),
                "other_active_blocks_max": self.other_active_blocks_max,
            },
        }


def released_point(report: PointReport, flow: FlowEnd, masked: FixedPoint) -> ReleasedPoint:
    """:class:`ReleasedPoint` from the report at the dense point, the release flow and the
    masked fixed point it started from (Proposition 4.2)."""
    blocks = theta_blocks(report.point.theta)
    others = max(float(np.abs(blocks[k]).max()) for k in OTHER_ACTIVE_BLOCKS)
    return ReleasedPoint(report, flow, masked.loss, blocks["W_KQ_32"], blocks["W_PV_12"],
                         others)


# ---- PL along a trajectory (Lemma 5.4) -------------------------------------------------------
@dataclass(frozen=True)
class PLReport:
    """Lemma 5.4's PL ratio along a flow to ``point``, the measured rate of ``L − L*`` and the
    rate predicted by the linearisation at the end point."""

    trace: PLTrace
    flow: FlowEnd
    measured_rate: float
    linearised_rate: float
    linearised_mode_blocks: dict[str, float]
    lemma_rate: float  # 2c1(a*² + b*²) at the end point
    trajectory: str

    def to_dict(self) -> dict[str, object]:
        """JSON-ready (the ``pl`` object of ``mesadyn stability --json``); ``ratio`` is
        ``null`` where the loss gap is at rounding level."""
        tr = self.trace
        return {
            **tr.to_dict(),
            "t_end": float(self.flow.t), "flow_status": self.flow.status,
            "flow_backend": self.flow.backend, "measured_rate": self.measured_rate,
            "linearised_rate": self.linearised_rate,
            "linearised_mode_blocks": self.linearised_mode_blocks,
            "lemma_rate": self.lemma_rate, "t": tr.t.tolist(),
            "ratio": [None if not math.isfinite(x) else x for x in tr.ratio.tolist()],
            "lemma": tr.lemma.tolist(), "trajectory": self.trajectory,
        }


def pl_report(field: Field, c: Constants, flow: FlowEnd, fp: FixedPoint, spectrum: Spectrum,
              trajectory: str) -> PLReport:
    """:class:`PLReport` of the flow ``flow`` that ended at the refined point ``fp``."""
    tr = pl_trace(field, flow.t_series, flow.theta_series, fp.loss, c.c1)
    a, b = mean_diagonals(fp.theta)
    lin, mode_blocks = dominant_rate(tr, flow.theta_series, fp.theta, spectrum)
    return PLReport(tr, flow, fitted_rate(tr.t, tr.loss_gap), lin, mode_blocks,
                    2 * c.c1 * (a * a + b * b), trajectory)


__all__ = ["FixedPointTest", "MonteCarloCheck", "PLReport", "PointReport", "ReducedComparison",
           "ReleasedPoint", "TransverseSpectrum", "analyse_point", "check_point",
           "identity_distance", "monte_carlo_check", "pl_report", "released_point",
           "theta_blocks"]
