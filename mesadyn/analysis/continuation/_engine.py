"""Pseudo-arclength continuation of ``∇L(θ; p) = 0`` transverse to known continuous symmetries.

The engine behind :mod:`mesadyn.analysis.continuation`; it knows nothing of transformers.  A
:class:`Problem` supplies ``∇L``, ``∇²L`` and ``∂∇L/∂p`` on a flat θ, the coordinates that
evolve (``free``) and the generators ``S_k`` of its continuous symmetries (``L(e^{αS_k} θ) =
L(θ)``, so ``⟨S_k θ, ∇L(θ)⟩ ≡ 0``).

**Corrector** (Keller's pseudo-arclength with symmetry unfolding, as in equivariant
continuation, e.g. Champneys & Sandstede 2007).  Unknowns ``y = (x, p, λ)`` with ``x = θ[free]``
and one multiplier ``λ_k`` per symmetry; equations

    F(θ, p) + B λ = 0,        B = [S_k θ_ref]  (the tangents of the orbit at the last point)
    φ_k(θ) = 0,               the gauge: θᵀS_kθ = c_k ("invariant", the flow's conserved
                              quantity) or ⟨S_k θ_ref, θ − θ_ref⟩ = 0 ("slice")
    ⟨τ, (x, p) − (x, p)_pred⟩ = 0   the arclength hyperplane through the predictor.

Because ``⟨S_k θ, F⟩ ≡ 0`` the multipliers vanish at a solution, and the bordered Jacobian

    [[H, F_p, B], [Φ, 0, 0], [τ_x, τ_p, 0]]

is nonsingular at regular points *and folds* of the branch, although ``H`` itself is singular
on the whole branch (the orbit is a continuum of critical points).  It is singular only at
branch points, which is what detection looks for.

**Spectrum and detection.**  At each point ``H`` is restricted to the free coordinates
orthogonal to the symmetry tangents (``H_r = Qᵀ H Q``); the eigenvalues of ``−H_r`` are the
non-symmetry eigenvalues of the flow's Jacobian.  When the number of positive ones changes
between two points, the eigenvalue that crossed is followed along the arclength by the
Illinois (safeguarded regula falsi) method until the arclength bracket is below ``locate_tol``,
so ``p`` is located to ``|dp/ds|·locate_tol``.  At the zero, ``v`` (the null vector of
``H_r``) classifies it: ``vᵀ F_p ≠ 0`` is a fold (limit point); ``vᵀ F_p = 0`` is a branch
point, a pitchfork when the cubic coefficient ``D³L[v, v, v]`` vanishes and transcritical
otherwise.  **Branch switching** solves the algebraic bifurcation equation
``vᵀ D²F[τ, τ] = 0`` on the plane of the two null vectors of ``[H, F_p]`` for the emerging
tangent and continues along it (Keller 1977; Doedel's AUTO notes).

A branch stops with an :class:`~mesadyn.outcome.Outcome`: ``reached_end``, ``left_range`` (it
turned at a fold and left the range on the other side, or a switched branch left it before
the end), ``max_steps``, ``step_failed`` (no convergence at the smallest step), ``singular``
(the bordered Jacobian is singular at the start: zero modes of the Hessian that no declared
symmetry explains) or ``no_branch`` (branch switching found no second branch).

This module is the driver (:func:`run_branch`, :func:`switch_branch`, :class:`Branch`); the
problem and its bordered system live in :mod:`._system`, locating, classifying and the
emerging tangent in :mod:`._detect`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ...errors import MesadynError
from ...outcome import Outcome
from ._detect import Bifurcation, Special, _crossing_index, _locate, emerging_tangent
from ._system import (
    Gauge,
    Options,
    Point,
    Problem,
    Symmetry,
    _bordered_cond,
    _correct,
    _Corrected,
    _point,
    _System,
    _tangent,
)

__all__ = ["Bifurcation", "Branch", "BranchHook", "Gauge", "Options", "Point", "Problem",
           "Special", "Symmetry", "run_branch", "switch_branch"]


@dataclass
class Branch:
    """A followed branch: its points, the special points found on it, and why it stopped."""

    points: list[Point] = field(default_factory=list)
    specials: list[Special] = field(default_factory=list)
    status: Outcome = Outcome.MAX_STEPS  # until it stops (a fresh or interrupted branch)
    message: str = ""
    origin: int = -1  # index of the special point it switched from (-1: the primary branch)
    direction: int = 1
    steps: int = 0
    rejected: int = 0

# ---- the driver -------------------------------------------------------------------------
#: Called with the branch after each of its accepted points (to analyse, checkpoint or report
#: the new point; the branch's last point is the new one).
BranchHook = Callable[[Branch], None]


def _in_range(p: float, lo: float, hi: float) -> bool:
    return lo <= p <= hi


def run_branch(problem: Problem, theta0: np.ndarray, p0: float, p_end: float, options: Options,
               *, lo: float, hi: float, tangent0: np.ndarray | None = None,
               branch: Branch | None = None, on_point: BranchHook | None = None,
               gauge_theta: np.ndarray | None = None) -> Branch:
    """Follow the branch through ``(θ0, p0)`` (a converged point) until ``p_end``.

    The branch stays in ``[lo, hi]`` (both ends are landed on exactly, by a last step at fixed
    p).  ``tangent0`` (an ``(x, p)`` direction) starts it; by default towards ``p_end``.
    ``branch`` resumes a partial branch (its last point is the start).  ``gauge_theta`` fixes
    the invariant gauge's constants (default θ0).  ``on_point`` is called after every
    accepted point.
    """
    opt = options
    sys = _System(problem, theta0 if gauge_theta is None else gauge_theta, opt)
    sys.base = np.asarray(theta0, np.float64).copy()
    br = branch if branch is not None else Branch()
    direction = 1.0 if p_end >= p0 else -1.0
    if br.points:
        cur = br.points[-1]
        sys.base = cur.theta.copy()
        ds = cur.ds
    else:
        guess = np.zeros(sys.nf + 1)
        guess[-1] = direction
        if tangent0 is not None:
            guess = np.asarray(tangent0, np.float64)
        t0 = _tangent(sys, np.asarray(theta0, np.float64), p0, guess)
        if tangent0 is None and t0[-1] * direction < 0:
            t0 = -t0
        if any(np.linalg.norm(s.tangent(theta0)[sys.free]) == 0 for s in sys.sym):
            raise MesadynError("the start has P = 0 or A = 0 on a symmetry's coordinates (e.g. "
                               "the origin, a saddle): its orbit is a point; start elsewhere")
        r0 = float(np.abs(problem.grad(np.asarray(theta0, np.float64), p0)).max())
        cur = _point(sys, _Corrected(np.asarray(theta0, np.float64), p0, 0, r0), t0, 0.0)
        br.points.append(cur)
        ds = opt.ds
        cond = _bordered_cond(sys, cur.theta, p0, t0)
        if not math.isfinite(cond) or cond > 1e13:
            br.status = Outcome.SINGULAR
            br.message = (f"the bordered Jacobian is singular at the start (condition "
                          f"{cond:.2e}): zero modes of the Hessian that no declared symmetry "
                          "explains (a further continuum, or a higher-order degeneracy); "
                          "restrict the coordinates (a mask) or start elsewhere")
            return br
        if on_point is not None:
            on_point(br)
    while br.steps < opt.max_steps:
        br.steps += 1
        x0 = cur.theta[sys.free]
        pred = np.concatenate([x0, [cur.p]]) + ds * cur.tangent
        landing: float | None = None
        if not _in_range(float(pred[-1]), lo, hi):
            landing = hi if pred[-1] > hi else lo
            frac = (landing - cur.p) / (pred[-1] - cur.p) if pred[-1] != cur.p else 1.0
            pred = np.concatenate([x0, [cur.p]]) + frac * ds * cur.tangent
            pred[-1] = landing
            c = _correct(sys, pred[:-1], landing, cur.theta, arc=None, fixed_p=landing)
        else:
            c = _correct(sys, pred[:-1], float(pred[-1]), cur.theta, arc=cur.tangent,
                         fixed_p=None)
        tan = None
        if c is not None:
            tan = _tangent(sys, c.theta, c.p, cur.tangent)
            if float(tan @ cur.tangent) < opt.cos_min:
                c = None
        if c is None or tan is None:
            br.rejected += 1
            ds *= 0.5
            if ds < opt.ds_min:
                br.status = Outcome.STEP_FAILED
                br.message = (f"the corrector did not converge at p={cur.p:.12g} even with "
                              f"step {ds * 2:.2e} (ds_min={opt.ds_min:g})")
                return br
            continue
        new = _point(sys, c, tan, ds)
        if opt.detect:
            k = _crossing_index(cur, new)
            if k is not None:
                sp = _locate(sys, cur, new, k)
                br.specials.append(replace(sp, after=len(br.points) - 1))
        br.points.append(new)
        sys.base = new.theta.copy()
        if on_point is not None:
            on_point(br)
        cur = new
        if c.iterations <= 2:
            ds = min(ds * opt.grow, opt.ds_max)
        elif c.iterations >= 5:
            ds = max(ds * opt.shrink, opt.ds_min)
        if landing is not None:
            reached = (landing == p_end)
            br.status = Outcome.REACHED_END if reached else Outcome.LEFT_RANGE
            br.message = (f"reached p={landing:.12g}" if reached else
                          f"the branch left the range at p={landing:.12g}")
            return br
    br.status = Outcome.MAX_STEPS
    br.message = f"{opt.max_steps} steps without reaching p={p_end:.12g}"
    return br


def switch_branch(problem: Problem, special: Special, p_end: float, options: Options, *,
                  lo: float, hi: float, direction: int, gauge_theta: np.ndarray,
                  on_point: BranchHook | None = None, origin: int = -1) -> Branch:
    """Follow the branch emerging at a branch point, leaving it along ``±`` (``direction``)
    its tangent from the algebraic bifurcation equation."""
    sys = _System(problem, gauge_theta, options)
    sys.base = special.theta.copy()
    tau = emerging_tangent(sys, special)
    br = Branch(origin=origin, direction=direction)
    if tau is None:
        br.status = Outcome.NO_BRANCH
        br.message = f"no second branch at p={special.p:.12g} (degenerate bifurcation equation)"
        return br
    tau = direction * tau
    x0 = special.theta[sys.free]
    for _ in range(40):
        h = options.ds
        pred = np.concatenate([x0, [special.p]]) + h * tau
        c = _correct(sys, pred[:-1], float(pred[-1]), special.theta, arc=tau, fixed_p=None)
        if c is not None:
            away = np.concatenate([c.theta[sys.free], [c.p]]) - np.concatenate([x0, [special.p]])
            nrm = float(np.linalg.norm(away))
            if nrm > 0 and abs(float(away @ special.tangent)) / nrm < 0.9:
                break
        options = replace(options, ds=max(options.ds * 0.5, options.ds_min))
    else:
        br.status = Outcome.NO_BRANCH
        br.message = f"the corrector fell back onto the known branch at p={special.p:.12g}"
        return br
    assert c is not None
    t1 = _tangent(sys, c.theta, c.p, tau)
    first = _point(sys, c, t1, options.ds)
    br.points.append(first)
    target = hi if t1[-1] >= 0 else lo
    if not _in_range(c.p, lo, hi):
        br.status = Outcome.LEFT_RANGE
        br.message = f"the emerging branch starts outside the range at p={c.p:.12g}"
        return br
    return run_branch(problem, c.theta, c.p, p_end if target == p_end else target, options,
                      lo=lo, hi=hi, branch=br, on_point=on_point, gauge_theta=gauge_theta)
