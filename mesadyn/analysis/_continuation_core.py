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
"""

from __future__ import annotations

import enum
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import MesadynError, check_int, check_positive

from ..tolerances import ZERO_RTOL  # non-symmetry eigenvalues below it count as zero


class Gauge(enum.StrEnum):
    """How the symmetry orbit is cut (one phase condition per symmetry generator)."""

    INVARIANT = "invariant"
    """``θᵀ S_k θ`` fixed at its start value: the flow's conserved quantity (symmetric S_k)."""
    SLICE = "slice"
    """``⟨S_k θ_ref, θ − θ_ref⟩ = 0`` with θ_ref the last accepted point (any S_k)."""


class Status(enum.StrEnum):
    """Why a branch stopped."""

    REACHED_END = "reached_end"
    """It reached the end of the requested range (the last point lies on it exactly)."""
    LEFT_RANGE = "left_range"
    """It turned (after a fold) and left the range on the other side, or (a switched branch)
    left it on either side before reaching the end."""
    MAX_STEPS = "max_steps"
    """The step budget ran out."""
    STEP_FAILED = "step_failed"
    """The corrector did not converge even at the smallest step length."""
    SINGULAR = "singular"
    """The bordered Jacobian is singular at the start: zero modes of the Hessian that no
    declared symmetry explains (a continuum, or a higher-order degeneracy such as sparse
    data's ``(W^KQ_33, W^PV_13)`` pairs, where ``L`` is quartic)."""
    NO_BRANCH = "no_branch"
    """Branch switching found no second branch (degenerate bifurcation equation)."""


class Bifurcation(enum.StrEnum):
    """What happens where a non-symmetry eigenvalue of ``−∇²L`` crosses zero."""

    FOLD = "fold"
    PITCHFORK = "pitchfork"
    TRANSCRITICAL = "transcritical"
    UNLOCATED = "unlocated"
    """A sign change between two points that the located eigenvalue did not bracket."""


@dataclass(frozen=True)
class Symmetry:
    """A one-parameter symmetry ``θ ↦ e^{α S} θ`` of ``L`` with a linear generator ``S``.

    ``S`` is given as its diagonal (shape (n,)) or as a dense matrix (n, n).  The tangent of
    the orbit at θ is ``S θ``; when ``S`` is symmetric, ``θᵀ S θ`` is conserved by the
    gradient flow (``d/dτ θᵀSθ = −2⟨Sθ, ∇L⟩ = 0``).
    """

    name: str
    generator: np.ndarray

    def tangent(self, theta: np.ndarray) -> np.ndarray:
        S = self.generator
        return S * theta if S.ndim == 1 else S @ theta

    @property
    def conserved(self) -> bool:
        S = self.generator
        return bool(S.ndim == 1 or np.allclose(S, S.T, rtol=0, atol=0))

    def quadratic(self, theta: np.ndarray) -> float:
        """``θᵀ S θ`` (conserved when S is symmetric)."""
        return float(theta @ self.tangent(theta))


class Problem(ABC):
    """``F(θ, p) = ∇L(θ; p)`` and its derivatives on a flat θ of length :attr:`n`.

    Implementations fill :attr:`free` (a bool mask of the coordinates that evolve: drop the
    ones ``L`` does not depend on) and :attr:`symmetries`, and implement the four methods.
    ``hessian`` must be symmetric; every method works on float64 numpy arrays.
    """

    n: int
    free: np.ndarray
    symmetries: tuple[Symmetry, ...] = ()

    @abstractmethod
    def loss(self, theta: np.ndarray, p: float) -> float:
        """``L(θ; p)``."""

    @abstractmethod
    def grad(self, theta: np.ndarray, p: float) -> np.ndarray:
        """``∇_θ L(θ; p)``, shape (n,)."""

    @abstractmethod
    def hessian(self, theta: np.ndarray, p: float) -> np.ndarray:
        """``∇²_θ L(θ; p)``, shape (n, n)."""

    @abstractmethod
    def grad_p(self, theta: np.ndarray, p: float) -> np.ndarray:
        """``∂∇_θ L/∂p``, shape (n,)."""


@dataclass(frozen=True)
class Options:
    """Step control and tolerances of :func:`follow`.

    ## Arguments
    - `ds`: first step length (arclength in (θ, p)); `ds_min`, `ds_max` bound it.
    - `max_steps`: attempted steps per branch (accepted or not).
    - `tol`: Newton stops when ``max|∇L| <= tol`` over the free coordinates and every phase
      condition holds to ``tol`` (relative to its scale).
    - `newton_max`: Newton iterations per step; a step needing more is retried at half length.
    - `grow`, `shrink`: step-length factors after an easy (<= 2 iterations) / hard (>= 5) step.
    - `cos_min`: smallest cosine between consecutive tangents (larger turns are rejected:
      they mean a jump to another branch).
    - `gauge`: the phase condition (:class:`Gauge`).
    - `detect`: look for zero crossings of non-symmetry eigenvalues; `locate_tol`: arclength
      bracket at which locating stops.
    """

    ds: float = 1e-2
    ds_min: float = 1e-9
    ds_max: float = 0.1
    max_steps: int = 10_000
    tol: float = 1e-11
    newton_max: int = 8
    grow: float = 1.5
    shrink: float = 0.6
    cos_min: float = 0.9
    gauge: Gauge = Gauge.INVARIANT
    detect: bool = True
    locate_tol: float = 1e-10

    def __post_init__(self) -> None:
        for name in ("ds", "ds_min", "ds_max", "tol", "locate_tol"):
            check_positive(name, getattr(self, name))
        if not self.ds_min <= self.ds_max:
            raise MesadynError(f"ds_min={self.ds_min} must be <= ds_max={self.ds_max}")
        check_int("max_steps", self.max_steps, 1)
        check_int("newton_max", self.newton_max, 1)
        if not 0 < self.cos_min < 1:
            raise MesadynError(f"cos_min must be in (0, 1), got {self.cos_min}")
        object.__setattr__(self, "gauge", Gauge(self.gauge))
        object.__setattr__(self, "ds", min(max(self.ds, self.ds_min), self.ds_max))


@dataclass(frozen=True)
class Point:
    """One converged point of a branch."""

    theta: np.ndarray
    p: float
    residual: float  # max|∇L| over all coordinates (the inactive ones are exactly 0)
    iterations: int
    eigenvalues: np.ndarray  # non-symmetry eigenvalues of J = −∇²L, ascending
    n_unstable: int  # of them, > ZERO_RTOL·max|μ|
    tangent: np.ndarray  # unit (x, p) tangent, x = θ[free]
    ds: float  # the step length that reached this point

    @property
    def stable(self) -> bool:
        return self.n_unstable == 0

    @property
    def dp_ds(self) -> float:
        return float(self.tangent[-1])


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


@dataclass
class Branch:
    """A followed branch: its points, the special points found on it, and why it stopped."""

    points: list[Point] = field(default_factory=list)
    specials: list[Special] = field(default_factory=list)
    status: Status = Status.MAX_STEPS
    message: str = ""
    origin: int = -1  # index of the special point it switched from (-1: the primary branch)
    direction: int = 1
    steps: int = 0
    rejected: int = 0


# ---- linear algebra ---------------------------------------------------------------------
def _orth_complement(T: np.ndarray) -> np.ndarray:
    """Orthonormal basis (columns) of the orthogonal complement of span(T) (n × m)."""
    n = T.shape[0]
    if T.shape[1] == 0:
        return np.eye(n)
    U, s, _ = np.linalg.svd(T, full_matrices=True)
    r = int((s > 1e-12 * max(s.max(), 1e-300)).sum())
    return U[:, r:]


class _System:
    """The bordered system of one problem, restricted to its free coordinates."""

    def __init__(self, problem: Problem, theta_base: np.ndarray, options: Options):
        self.pb = problem
        self.free = np.asarray(problem.free, bool)
        if self.free.shape != (problem.n,):
            raise MesadynError(f"free must be a mask of length {problem.n}")
        self.base = np.asarray(theta_base, np.float64).copy()
        self.nf = int(self.free.sum())
        self.sym = tuple(problem.symmetries)
        self.m = len(self.sym)
        self.opt = options
        if options.gauge is Gauge.INVARIANT and not all(s.conserved for s in self.sym):
            raise MesadynError("the invariant gauge needs symmetric generators; use the slice "
                               "gauge")
        self.c = np.array([s.quadratic(self.base) for s in self.sym])

    def theta(self, x: np.ndarray) -> np.ndarray:
        th = self.base.copy()
        th[self.free] = x
        return th

    def tangents(self, theta: np.ndarray) -> np.ndarray:
        """The symmetry tangents ``S_k θ`` on the free coordinates, (nf, m)."""
        if not self.m:
            return np.zeros((self.nf, 0))
        return np.stack([s.tangent(theta)[self.free] for s in self.sym], axis=1)

    def phase(self, theta: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Phase residuals (m,) and their gradient rows (m, nf)."""
        if not self.m:
            return np.zeros(0), np.zeros((0, self.nf))
        if self.opt.gauge is Gauge.INVARIANT:
            r = np.array([s.quadratic(theta) for s in self.sym]) - self.c
            return r, 2.0 * self.tangents(theta).T
        Tr = self.tangents(ref)
        return Tr.T @ (theta - ref)[self.free], Tr.T

    def reduced_eigh(self, H: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                       np.ndarray]:
        """Eigenvalues (ascending) and vectors of ``−Qᵀ H_ff Q`` and the basis Q."""
        Q = _orth_complement(self.tangents(theta))
        Hf = H[np.ix_(self.free, self.free)]
        Hr = Q.T @ Hf @ Q
        mu, W = np.linalg.eigh(-0.5 * (Hr + Hr.T))
        return mu, W, Q

    def jac(self, theta: np.ndarray, p: float, B: np.ndarray, Phi: np.ndarray,
            last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The bordered Jacobian and ``F_p`` on the free coordinates."""
        nf, m = self.nf, self.m
        H = self.pb.hessian(theta, p)[np.ix_(self.free, self.free)]
        Fp = self.pb.grad_p(theta, p)[self.free]
        J = np.zeros((nf + m + 1, nf + 1 + m))
        J[:nf, :nf] = H
        J[:nf, nf] = Fp
        J[:nf, nf + 1:] = B
        J[nf:nf + m, :nf] = Phi
        J[nf + m, :nf + 1] = last
        return J, Fp


@dataclass
class _Corrected:
    theta: np.ndarray
    p: float
    iterations: int
    residual: float


def _solve(J: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """``J⁻¹ rhs``; at an exactly singular J (a branch point hit on the nose) the minimum-norm
    least-squares solution."""
    try:
        out = np.linalg.solve(J, rhs)
        if np.isfinite(out).all():
            return out
    except np.linalg.LinAlgError:
        pass
    out = np.linalg.lstsq(J, rhs, rcond=None)[0]
    return out if np.isfinite(out).all() else None


def _correct(sys: _System, x0: np.ndarray, p0: float, ref: np.ndarray, *,
             arc: np.ndarray | None, fixed_p: float | None) -> _Corrected | None:
    """Newton on the bordered system from ``(x0, p0)``: the last row is the arclength
    hyperplane through ``(x0, p0)`` orthogonal to ``arc``, or ``p = fixed_p``."""
    opt = sys.opt
    nf, m = sys.nf, sys.m
    x, p = x0.copy(), float(p0)
    lam = np.zeros(m)
    B = sys.tangents(ref)
    y_pred = np.concatenate([x0, [p0]])
    if arc is not None:
        last = arc
    else:
        last = np.zeros(nf + 1)
        last[nf] = 1.0
    th = sys.theta(x)
    g_full = sys.pb.grad(th, p)
    prev = math.inf
    for it in range(1, opt.newton_max + 1):
        ph, Phi = sys.phase(th, ref)
        if arc is not None:
            row = float(arc @ (np.concatenate([x, [p]]) - y_pred))
        else:
            assert fixed_p is not None
            row = p - fixed_p
        rhs = np.concatenate([g_full[sys.free] + B @ lam, ph, [row]])
        J, _ = sys.jac(th, p, B, Phi, last)
        delta = _solve(J, -rhs)
        if delta is None:
            return None
        x = x + delta[:nf]
        p = p + float(delta[nf])
        lam = lam + delta[nf + 1:]
        th = sys.theta(x)
        g_full = sys.pb.grad(th, p)
        r = float(np.abs(g_full).max())
        if not math.isfinite(r):
            return None
        ph, _ = sys.phase(th, ref)
        ph_ok = (not m) or float(np.abs(ph).max()) <= opt.tol * max(1.0, np.abs(sys.c).max())
        step = float(np.abs(delta[:nf + 1]).max())
        if r <= opt.tol and ph_ok and step <= 1e-6:
            return _Corrected(th, p, it, r)
        if it >= 3 and r > 4 * prev:  # diverging
            return None
        prev = r
    return None


def _tangent(sys: _System, theta: np.ndarray, p: float, prev: np.ndarray) -> np.ndarray:
    """Unit ``(x, p)`` tangent at a point: the null vector of ``[[H, F_p, B], [Φ, 0, 0]]``,
    oriented along ``prev``."""
    B = sys.tangents(theta)
    _, Phi = sys.phase(theta, theta)
    J, _ = sys.jac(theta, p, B, Phi, prev)
    rhs = np.zeros(J.shape[0])
    rhs[-1] = 1.0
    try:
        t = np.linalg.solve(J, rhs)[: sys.nf + 1]
    except np.linalg.LinAlgError:
        _, _, Vt = np.linalg.svd(J[:-1])
        t = Vt[-1][: sys.nf + 1]
    nrm = float(np.linalg.norm(t))
    if not (math.isfinite(nrm) and nrm > 0):
        return np.full_like(t, np.nan)
    t /= nrm
    return t if t @ prev >= 0 else -t


def _bordered_cond(sys: _System, theta: np.ndarray, p: float, tangent: np.ndarray) -> float:
    B = sys.tangents(theta)
    _, Phi = sys.phase(theta, theta)
    if not np.isfinite(tangent).all():
        return math.inf
    J, _ = sys.jac(theta, p, B, Phi, tangent)
    try:
        return float(np.linalg.cond(J))
    except np.linalg.LinAlgError:
        return math.inf


def _point(sys: _System, c: _Corrected, tangent: np.ndarray, ds: float) -> Point:
    H = sys.pb.hessian(c.theta, c.p)
    mu, _, _ = sys.reduced_eigh(H, c.theta)
    tol = ZERO_RTOL * float(np.abs(mu).max()) if mu.size else 0.0
    return Point(theta=c.theta, p=c.p, residual=c.residual, iterations=c.iterations,
                 eigenvalues=mu, n_unstable=int((mu > tol).sum()), tangent=tangent, ds=ds)


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


# ---- the driver -------------------------------------------------------------------------
ProgressFn = Callable[[Branch], None]


def _in_range(p: float, lo: float, hi: float) -> bool:
    return lo <= p <= hi


def run_branch(problem: Problem, theta0: np.ndarray, p0: float, p_end: float, options: Options,
               *, lo: float, hi: float, tangent0: np.ndarray | None = None,
               branch: Branch | None = None, on_point: ProgressFn | None = None,
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
            br.status = Status.SINGULAR
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
                br.status = Status.STEP_FAILED
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
            br.status = Status.REACHED_END if reached else Status.LEFT_RANGE
            br.message = (f"reached p={landing:.12g}" if reached else
                          f"the branch left the range at p={landing:.12g}")
            return br
    br.status = Status.MAX_STEPS
    br.message = f"{opt.max_steps} steps without reaching p={p_end:.12g}"
    return br


def switch_branch(problem: Problem, special: Special, p_end: float, options: Options, *,
                  lo: float, hi: float, direction: int, gauge_theta: np.ndarray,
                  on_point: ProgressFn | None = None, origin: int = -1) -> Branch:
    """Follow the branch emerging at a branch point, leaving it along ``±`` (``direction``)
    its tangent from the algebraic bifurcation equation."""
    sys = _System(problem, gauge_theta, options)
    sys.base = special.theta.copy()
    tau = emerging_tangent(sys, special)
    br = Branch(origin=origin, direction=direction)
    if tau is None:
        br.status = Status.NO_BRANCH
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
        br.status = Status.NO_BRANCH
        br.message = f"the corrector fell back onto the known branch at p={special.p:.12g}"
        return br
    assert c is not None
    t1 = _tangent(sys, c.theta, c.p, tau)
    first = _point(sys, c, t1, options.ds)
    br.points.append(first)
    target = hi if t1[-1] >= 0 else lo
    if not _in_range(c.p, lo, hi):
        br.status = Status.LEFT_RANGE
        br.message = f"the emerging branch starts outside the range at p={c.p:.12g}"
        return br
    return run_branch(problem, c.theta, c.p, p_end if target == p_end else target, options,
                      lo=lo, hi=hi, branch=br, on_point=on_point, gauge_theta=gauge_theta)
