"""The problem side of the engine and its bordered system (:mod:`._engine` drives them).

:class:`Problem` is what the engine continues (``∇L``, ``∇²L``, ``∂∇L/∂p`` on a flat θ, its
free coordinates and its continuous symmetries); :class:`Options` its step control;
:class:`Point` one converged point.  The bordered system of a problem restricted to its free
coordinates (phase conditions, the bordered Jacobian, Newton's corrector and the branch
tangent) is private to the engine.
"""

from __future__ import annotations

import enum
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ...errors import MesadynError, check_int, check_positive
from ...tolerances import ZERO_RTOL

__all__ = ["ROUNDING_FLOOR", "Gauge", "Options", "Point", "Problem", "Symmetry",
           "count_unstable"]

#: The corrector's rounding floor, in units of ``max|∇²L| · max|θ|`` (the size of the
#: gradient's largest terms): 64 ε.  Below 1e-11 wherever that size is below 700 (σ ≲ 10 at
#: d = 2, T = 6); the ends of a wide range are solved to it.
ROUNDING_FLOOR = 64 * float(np.finfo(np.float64).eps)


class Gauge(enum.StrEnum):
    """How the symmetry orbit is cut (one phase condition per symmetry generator)."""

    INVARIANT = "invariant"
    """``θᵀ S_k θ`` fixed at its start value for every symmetric S_k (the flow's conserved
    quantity: the paper's ``‖A‖² − ‖P‖²``, a deep model's per-layer invariants); a generator
    that conserves nothing (not symmetric: a deep model's stream shears) gets the slice."""
    SLICE = "slice"
    """``⟨S_k θ_ref, θ − θ_ref⟩ = 0`` with θ_ref the last accepted point (any S_k)."""


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
      condition holds to ``tol`` (relative to its scale); where the gradient's own rounding
      floor :data:`ROUNDING_FLOOR` ``· max|∇²L| · max|θ|`` is larger (the far end of a wide
      range: ``L`` grows like σ⁶ from σ = 0.5 to 100), that floor.
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


def count_unstable(eigenvalues: np.ndarray) -> int:
    """How many of the non-symmetry eigenvalues ``μ`` of ``J = −∇²L`` are unstable: those above
    ``ZERO_RTOL·max|μ|`` (:data:`mesadyn.tolerances.ZERO_RTOL`; smaller ones count as zero)."""
    mu = np.asarray(eigenvalues, np.float64)
    tol = ZERO_RTOL * float(np.abs(mu).max()) if mu.size else 0.0
    return int((mu > tol).sum())


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
        #: which phase conditions hold a conserved quantity (the others are slices)
        self.held = np.array([options.gauge is Gauge.INVARIANT and s.conserved
                              for s in self.sym], dtype=bool)
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
        """Phase residuals (m,) and their gradient rows (m, nf): ``θᵀS_kθ − c_k`` for the held
        symmetries (:attr:`held`), ``⟨S_k θ_ref, θ − θ_ref⟩`` for the others."""
        if not self.m:
            return np.zeros(0), np.zeros((0, self.nf))
        if self.held.all():
            r = np.array([s.quadratic(theta) for s in self.sym]) - self.c
            return r, 2.0 * self.tangents(theta).T
        Tr = self.tangents(ref)
        if not self.held.any():
            return Tr.T @ (theta - ref)[self.free], Tr.T
        r = Tr.T @ (theta - ref)[self.free]
        rows = Tr.T.copy()
        held = np.flatnonzero(self.held)
        r[held] = np.array([self.sym[k].quadratic(theta) for k in held]) - self.c[held]
        rows[held] = 2.0 * self.tangents(theta)[:, held].T
        return r, rows

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
        # the gradient cannot be resolved below the rounding of its largest terms
        floor = ROUNDING_FLOOR * float(np.abs(J[:nf, :nf]).max(initial=0.0)) * float(
            np.abs(th).max(initial=0.0))
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
        if r <= max(opt.tol, floor) and ph_ok and step <= 1e-6:
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
    return Point(theta=c.theta, p=c.p, residual=c.residual, iterations=c.iterations,
                 eigenvalues=mu, n_unstable=count_unstable(mu), tangent=tangent, ds=ds)

