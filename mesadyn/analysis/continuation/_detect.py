"""Locating and classifying zero crossings of non-symmetry eigenvalues, and the tangent of
the branch that emerges at a branch point (:mod:`._engine` calls them).

A crossing between two accepted points is followed along the arclength by the Illinois method
(safeguarded regula falsi) until the bracket is below ``locate_tol``; the null vector ``v``
there classifies it (fold: ``vᵀF_p ≠ 0``; else transcritical or pitchfork by
``D³L[v, v, v]``).  The emerging tangent solves the algebraic bifurcation equation
``vᵀ D²F[τ, τ] = 0`` (Keller 1977).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np

from ._system import Point, _correct, _Corrected, _System

__all__ = ["Bifurcation", "Special", "emerging_tangent"]


class Bifurcation(enum.StrEnum):
    """What happens where a non-symmetry eigenvalue of ``−∇²L`` crosses zero."""

    FOLD = "fold"
    PITCHFORK = "pitchfork"
    TRANSCRITICAL = "transcritical"
    UNLOCATED = "unlocated"
    """A sign change between two points that the located eigenvalue did not bracket."""


@dataclass(frozen=True)
class Special:
    """A located zero crossing of a non-symmetry eigenvalue (fold or branch point)."""

    kind: Bifurcation
    p: float
    theta: np.ndarray
    after: int  # index of the branch point before it
    eigenvalue: float  # the crossing eigenvalue at the located point
    null_vector: np.ndarray  # v (free coordinates, unit)
    tangent: np.ndarray  # (x, p) tangent of the branch there
    fold_test: float  # vᵀ F_p / ‖F_p‖ (0 at a branch point)
    cubic: float  # D³L[v, v, v] relative to ‖H‖ (0 at a pitchfork)
    bracket: float  # final arclength bracket
    residual: float


# ---- locating and classifying -----------------------------------------------------------
def _crossing_index(a: Point, b: Point) -> int | None:
    """Sorted index of an eigenvalue that changed sign strictly between ``a`` and ``b``."""
    if a.n_unstable == b.n_unstable or a.eigenvalues.size != b.eigenvalues.size:
        return None
    N = a.eigenvalues.size
    k = N - max(a.n_unstable, b.n_unstable)
    if 0 <= k < N and a.eigenvalues[k] * b.eigenvalues[k] < 0:
        return k
    return None


def _locate(sys: _System, a: Point, b: Point, k: int) -> Special:
    """Illinois iteration on ``μ_k(s)`` along the arclength from ``a`` (s = 0) to ``b``."""
    opt = sys.opt
    xa = a.theta[sys.free]
    tau = a.tangent

    def at(s: float) -> tuple[_Corrected, np.ndarray, np.ndarray, np.ndarray]:
        pred = np.concatenate([xa, [a.p]]) + s * tau
        c = _correct(sys, pred[:-1], float(pred[-1]), a.theta, arc=tau, fixed_p=None)
        if c is None:
            raise _LocateFailed
        H = sys.pb.hessian(c.theta, c.p)
        mu, W, Q = sys.reduced_eigh(H, c.theta)
        return c, mu, W, Q

    # the arclength of b along tau from a
    s_lo, s_hi = 0.0, float(tau @ (np.concatenate([b.theta[sys.free], [b.p]])
                                   - np.concatenate([xa, [a.p]])))
    f_lo, f_hi = float(a.eigenvalues[k]), float(b.eigenvalues[k])
    best: tuple[float, _Corrected, np.ndarray, np.ndarray, np.ndarray] | None = None
    side = 0
    try:
        for _ in range(200):
            if abs(s_hi - s_lo) <= opt.locate_tol:
                break
            s = (s_lo * f_hi - s_hi * f_lo) / (f_hi - f_lo)
            if not (min(s_lo, s_hi) < s < max(s_lo, s_hi)):
                s = 0.5 * (s_lo + s_hi)
            c, mu, W, Q = at(s)
            f = float(mu[k])
            if best is None or abs(f) < abs(best[0]):
                best = (f, c, mu, W, Q)
            if f == 0.0:
                break
            if f * f_lo > 0:
                s_lo, f_lo = s, f
                if side == -1:
                    f_hi *= 0.5
                side = -1
            else:
                s_hi, f_hi = s, f
                if side == 1:
                    f_lo *= 0.5
                side = 1
    except _LocateFailed:
        pass
    if best is None:
        c0 = _Corrected(a.theta, a.p, 0, a.residual)
        H = sys.pb.hessian(a.theta, a.p)
        mu, W, Q = sys.reduced_eigh(H, a.theta)
        best = (float(mu[k]), c0, mu, W, Q)
        kind_forced: Bifurcation | None = Bifurcation.UNLOCATED
    else:
        kind_forced = None
    f, c, mu, W, Q = best
    v = Q @ W[:, k]
    v /= np.linalg.norm(v)
    # the branch's tangent there, interpolated between the bracketing points (the null space
    # of [H, F_p] is two-dimensional at a branch point, so it cannot be solved for)
    span = float(tau @ (np.concatenate([b.theta[sys.free], [b.p]])
                        - np.concatenate([xa, [a.p]])))
    t = float(tau @ (np.concatenate([c.theta[sys.free], [c.p]])
                     - np.concatenate([xa, [a.p]]))) / span if span else 0.0
    tangent = (1 - t) * a.tangent + t * b.tangent
    tangent /= np.linalg.norm(tangent)
    Fp = sys.pb.grad_p(c.theta, c.p)[sys.free]
    nFp = float(np.linalg.norm(Fp))
    fold_test = float(v @ Fp) / nFp if nFp > 0 else 0.0
    H = sys.pb.hessian(c.theta, c.p)
    h = 1e-3 * max(1.0, float(np.linalg.norm(c.theta)))
    vf = np.zeros(sys.pb.n)
    vf[sys.free] = v
    dH = (sys.pb.hessian(c.theta + h * vf, c.p) - sys.pb.hessian(c.theta - h * vf, c.p)) / (2 * h)
    cubic = float(vf @ dH @ vf) / max(float(np.abs(H).max()), 1e-300)
    if kind_forced is not None:
        kind = kind_forced
    elif abs(fold_test) > 1e-6:
        kind = Bifurcation.FOLD
    elif abs(cubic) > 1e-6:
        kind = Bifurcation.TRANSCRITICAL
    else:
        kind = Bifurcation.PITCHFORK
    return Special(kind=kind, p=c.p, theta=c.theta, after=-1, eigenvalue=f, null_vector=v,
                   tangent=tangent, fold_test=fold_test, cubic=cubic,
                   bracket=abs(s_hi - s_lo), residual=c.residual)


class _LocateFailed(Exception):
    pass


def _jvp(sys: _System, theta: np.ndarray, p: float, u: np.ndarray) -> np.ndarray:
    """``[H, F_p] u`` on the free coordinates, u = (u_x, u_p)."""
    H = sys.pb.hessian(theta, p)[np.ix_(sys.free, sys.free)]
    Fp = sys.pb.grad_p(theta, p)[sys.free]
    return H @ u[:-1] + Fp * u[-1]


def emerging_tangent(sys: _System, sp: Special) -> np.ndarray | None:
    """The tangent of the second branch at a branch point, from the algebraic bifurcation
    equation ``vᵀ D²F[τ, τ] = 0`` on ``span{τ_1, (v, 0)}`` (None when it is degenerate)."""
    t1 = sp.tangent
    t2 = np.concatenate([sp.null_vector, [0.0]])
    t2 = t2 - (t2 @ t1) * t1
    if np.linalg.norm(t2) < 1e-8:
        return None
    t2 /= np.linalg.norm(t2)
    h = 1e-4 * max(1.0, float(np.linalg.norm(sp.theta)), abs(sp.p))
    v = sp.null_vector

    def d2(u: np.ndarray, w: np.ndarray) -> float:
        th_p = sys.theta(sp.theta[sys.free] + h * w[:-1])
        th_m = sys.theta(sp.theta[sys.free] - h * w[:-1])
        diff = _jvp(sys, th_p, sp.p + h * w[-1], u) - _jvp(sys, th_m, sp.p - h * w[-1], u)
        return float(v @ diff) / (2 * h)

    M = np.array([[d2(t1, t1), d2(t1, t2)], [d2(t2, t1), d2(t2, t2)]])
    M = 0.5 * (M + M.T)
    ev, U = np.linalg.eigh(M)
    scale = float(np.abs(ev).max())
    if scale == 0 or ev[0] * ev[1] > 0 and min(abs(ev)) > 1e-8 * scale:
        return None
    # zeros of uᵀMu on the unit circle: cos²φ μ0 + sin²φ μ1 = 0
    if abs(ev[1]) <= 1e-12 * scale:
        cand = [U[:, 1]]
    elif abs(ev[0]) <= 1e-12 * scale:
        cand = [U[:, 0]]
    else:
        tphi = math.sqrt(-ev[0] / ev[1])
        phi = math.atan(tphi)
        cand = [math.cos(phi) * U[:, 0] + math.sin(phi) * U[:, 1],
                math.cos(phi) * U[:, 0] - math.sin(phi) * U[:, 1]]
    ab = min(cand, key=lambda u: abs(u[0]))  # farthest from the known branch (1, 0)
    if abs(ab[0]) > 0.99:
        return None
    tau = ab[0] * t1 + ab[1] * t2
    tau /= np.linalg.norm(tau)
    # orientation: increasing p, or (a vertical tangent, as at a pitchfork) a positive largest
    # component, so that direction +1 is reproducible
    lead = tau[-1] if abs(tau[-1]) > 1e-8 else tau[int(np.argmax(np.abs(tau[:-1])))]
    out: np.ndarray = tau if lead > 0 else -tau
    return out
