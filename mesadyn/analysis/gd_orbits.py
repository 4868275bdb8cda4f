"""Periodic orbits of gradient descent, the flip that gives birth to them, and their branch
in the step size (docs/design.md §8).

A **period-k orbit** of ``G_η(x) = x − η∇L(x)`` is a zero of ``F(x) = G^k(x) − x``, whose
Jacobian is exact: ``DF = DG(x_{k−1}) ⋯ DG(x_0) − I`` with ``DG = I − η∇²L`` along the orbit
``x_{j+1} = G(x_j)`` (:func:`orbit_residual`).  The fixed points of G form a continuum (the
minimiser set and its scaling orbit), on which ``DF`` is singular, so Newton's step is the
minimum-norm least-squares one (a pseudo-inverse, :func:`periodic_orbit`).

**The flip.**  The fixed points do not depend on η; along the branch ``x* = const`` the
multipliers of ``DG`` are ``1 − ηλ_i`` and one crosses −1 at ``η = 2/λ_max(x*)``
(:func:`flip_point` follows the branch in η and locates the crossing by Brent's method).  A
period-2 orbit near the flip oscillates along the flip mode ``u`` with amplitude ε; each step
moves the invariant ``I = ‖A‖² − ‖P‖²`` by ``η²(‖∇_A L‖² − ‖∇_P L‖²) ≈ η²λ²ε²(‖u_A‖² − ‖u_P‖²)``
(:func:`mesadyn.analysis.gd_map.invariant_step`), so a period-2 orbit can be born only where
the flip mode is balanced, ``‖u_A‖ = ‖u_P‖`` — the flattest point of the orbit
(:func:`mesadyn.analysis.gd_limits.flattest_point`; the balanced point ``a = b`` of the reduced
model).  Elsewhere on the minimiser set a flip creates no cycle: GD oscillates and drifts
along the set to a flatter point (a catapult).

**The branch.**  :func:`switch_to_period2` solves ``F(x; η) = 0`` with ``⟨u, x − x*⟩ = ε`` for
``(x, η)`` (a bordered Newton step), which puts it on the period-2 branch; :func:`follow_period2`
continues that branch in ``p = η/η_flip`` with the pseudo-arclength engine of
:mod:`mesadyn.analysis.continuation` (:func:`~mesadyn.analysis.continuation.run_branch`, no
symmetry: off the fixed-point set GD is not equivariant under the scaling, so period-2 orbits
are isolated for each η).  For the reduced map on ``a = b`` the orbit is in closed form
(:func:`reduced_period2`): with ``k = ηc2``, ``y = √(ηc1) a`` maps as ``y ↦ y(1 + k − y²)``,
whose 2-cycle is ``y_{0,1} = (√(k+3) ± √(k−1))/2`` for ``k > 1``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..errors import MesadynError, check_int, check_positive
from ..outcome import Outcome
from ..record import Record, hidden
from .continuation import Problem
from .gd_map import eigh as _eigh

if TYPE_CHECKING:
    from ..field import Field
    from ..model import MaskLike

__all__ = ["FieldMap", "FlipPoint", "GDMap", "Period2Branch", "PeriodicOrbit", "ReducedMap",
           "flip_point", "follow_period2", "map_lyapunov", "orbit_residual", "periodic_orbit",
           "reduced_period2", "switch_to_period2"]

FloatArray = npt.NDArray[np.float64]
#: Singular values of ``DF`` below this relative to the largest are dropped by the Newton step.
PINV_RTOL = 1e-10


class GDMap(ABC):
    """A loss on a flat coordinate vector ``x`` (length :attr:`n`) with its gradient and
    Hessian; the GD map ``G_η(x) = x − η∇L(x)`` and its Jacobian follow."""

    n: int

    @abstractmethod
    def grad(self, x: FloatArray) -> FloatArray:
        """``∇L(x)``."""

    @abstractmethod
    def hessian(self, x: FloatArray) -> FloatArray:
        """``∇²L(x)`` (symmetric, n × n)."""

    @abstractmethod
    def loss(self, x: FloatArray) -> float:
        """``L(x)``."""

    def step(self, x: FloatArray, eta: float) -> FloatArray:
        out: FloatArray = x - eta * self.grad(x)
        return out

    def jacobian(self, x: FloatArray, eta: float) -> FloatArray:
        """``DG_η(x) = I − η∇²L(x)``."""
        out: FloatArray = np.eye(self.n) - eta * self.hessian(x)
        return out


class ReducedMap(GDMap):
    """GD on the reduced loss ``ℓ̃ = (c2 − c1 ab)²/(2c1)`` (Lemma 5.3), ``x = (a, b)``."""

    n = 2

    def __init__(self, c1: float, c2: float) -> None:
        self.c1, self.c2 = check_positive("c1", c1), check_positive("c2", c2)

    def loss(self, x: FloatArray) -> float:
        return float((self.c2 - self.c1 * x[0] * x[1]) ** 2 / (2 * self.c1))

    def grad(self, x: FloatArray) -> FloatArray:
        r = self.c2 - self.c1 * x[0] * x[1]
        return np.array([-x[1] * r, -x[0] * r])

    def hessian(self, x: FloatArray) -> FloatArray:
        from .gd_map import reduced_hessian

        return reduced_hessian(float(x[0]), float(x[1]), self.c1, self.c2)

    def balanced(self) -> FloatArray:
        """The balanced fixed point ``a = b = √(c2/c1)``."""
        s = math.sqrt(self.c2 / self.c1)
        return np.array([s, s])


class FieldMap(GDMap):
    """GD on a field over its free coordinates: ``x = θ[free]``, the other entries of θ held
    at ``base`` (the inactive ones are zero forever, Eq. 1)."""

    def __init__(self, field: Field, base: npt.ArrayLike, mask: MaskLike = None) -> None:
        from .gd_map import _free

        self.field = field
        self.base = np.array(base, dtype=np.float64)
        self.free = _free(field, mask)
        self.n = int(self.free.size)

    def theta(self, x: FloatArray) -> FloatArray:
        """The full θ of the coordinates ``x``."""
        th = self.base.copy()
        th[self.free] = x
        return th

    def coords(self, theta: npt.ArrayLike) -> FloatArray:
        out: FloatArray = np.asarray(theta, dtype=np.float64)[self.free].copy()
        return out

    def loss(self, x: FloatArray) -> float:
        import torch

        return float(self.field.loss(torch.from_numpy(self.theta(x))))

    def grad(self, x: FloatArray) -> FloatArray:
        from .gd_map import _grad

        out: FloatArray = _grad(self.field, self.theta(x))[self.free]
        return out

    def hessian(self, x: FloatArray) -> FloatArray:
        from .gd_map import _hessian

        return _hessian(self.field, self.theta(x), self.free)


def map_lyapunov(gd: GDMap, orbit: npt.ArrayLike, eta: float, *, burn_in: int = 0) -> float:
    """The largest Lyapunov exponent of ``gd``'s map along ``orbit`` (rows ``x_0..x_K``): the
    mean of ``log ‖DG(x_k) v_k‖`` over ``k >= burn_in`` with ``v`` renormalised each step from
    the fixed start ``linspace(1, 2, n)`` (as :func:`mesadyn.analysis.gd_map.lyapunov_exponent`
    on a field)."""
    pts = np.asarray(orbit, dtype=np.float64)
    K = pts.shape[0] - 1
    burn_in = check_int("burn_in", burn_in, 0)
    if burn_in >= K:
        raise MesadynError(f"burn_in={burn_in} leaves no step of the {K}-step orbit")
    v = np.linspace(1.0, 2.0, gd.n)
    v /= np.linalg.norm(v)
    total = 0.0
    for k in range(K):
        w = gd.jacobian(pts[k], eta) @ v
        norm = float(np.linalg.norm(w))
        if not (norm > 0 and math.isfinite(norm)):
            return math.inf if not math.isfinite(norm) else -math.inf
        if k >= burn_in:
            total += math.log(norm)
        v = w / norm
    return total / (K - burn_in)


def orbit_residual(gd: GDMap, x: npt.ArrayLike, eta: float, period: int
                   ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """``(points, F, DF, ∂F/∂η)`` of ``F(x) = G^k(x) − x``: the orbit ``x_0..x_k`` (rows), the
    residual, its exact Jacobian ``Π_j DG(x_j) − I`` and its η-derivative (by the recursion
    ``v_{j+1} = DG(x_j) v_j − ∇L(x_j)``, ``v_0 = 0``)."""
    period = check_int("period", period, 1)
    xj = np.array(x, dtype=np.float64)
    pts = [xj.copy()]
    M = np.eye(gd.n)
    v = np.zeros(gd.n)
    for _ in range(period):
        g = gd.grad(xj)
        D = np.eye(gd.n) - eta * gd.hessian(xj)
        M = D @ M
        v = D @ v - g
        xj = xj - eta * g
        pts.append(xj.copy())
    return np.stack(pts), xj - pts[0], M - np.eye(gd.n), v


@dataclass(frozen=True)
class PeriodicOrbit(Record):
    """A period-k orbit of GD: ``residual = max|G^k(x) − x|`` (and relative to ``max|x|``),
    the multipliers of ``DG^k`` largest in modulus first (``stable``: all within the unit
    circle up to the ones of the fixed-point continuum), its ``amplitude`` ``max|x_1 − x_0|``
    and ``minimal_period`` (1 when Newton fell onto a fixed point)."""

    period: int
    eta: float
    residual: float
    relative_residual: float
    amplitude: float
    minimal_period: int
    multipliers: list[float]
    stable: bool
    iterations: int
    status: Outcome
    message: str
    points: FloatArray = hidden()


def _orbit(gd: GDMap, x: FloatArray, eta: float, period: int, iterations: int,
           status: Outcome, message: str) -> PeriodicOrbit:
    pts, F, DF, _ = orbit_residual(gd, x, eta, period)
    scale = max(1.0, float(np.abs(x).max()))
    mult = np.linalg.eigvals(DF + np.eye(gd.n))
    mult = mult[np.argsort(-np.abs(mult))]
    minimal = next((p for p in range(1, period + 1) if period % p == 0
                    and float(np.abs(pts[p] - pts[0]).max()) <= 1e-9 * scale), period)
    stable = bool(np.all(np.abs(mult) <= 1 + 1e-9))
    return PeriodicOrbit(
        period=period, eta=eta, residual=float(np.abs(F).max()),
        relative_residual=float(np.abs(F).max()) / scale,
        amplitude=float(np.abs(pts[1] - pts[0]).max()), minimal_period=minimal,
        multipliers=[float(m.real) if abs(m.imag) < 1e-12 else float(abs(m)) for m in mult[:6]],
        stable=stable, iterations=iterations, status=status, message=message, points=pts[:-1])


def periodic_orbit(gd: GDMap, x0: npt.ArrayLike, eta: float, period: int = 2, *,
                   tol: float = 1e-13, max_iter: int = 50) -> PeriodicOrbit:
    """Newton on ``G^k(x) − x = 0`` from ``x0`` with the exact Jacobian and the
    minimum-norm least-squares step (module docstring); a step that does not reduce
    ``max|F|`` is halved.  ``status`` is ``converged`` when ``max|F| <= tol·max(1, max|x|)``,
    ``failed`` otherwise; check ``minimal_period`` (a fixed point solves every period)."""
    eta = check_positive("eta", eta)
    period = check_int("period", period, 1)
    x = np.array(x0, dtype=np.float64)
    if x.shape != (gd.n,):
        raise MesadynError(f"x0 must have {gd.n} coordinates, got shape {x.shape}")
    _, F, DF, _ = orbit_residual(gd, x, eta, period)
    r = float(np.abs(F).max())
    for it in range(1, max_iter + 1):
        if r <= tol * max(1.0, float(np.abs(x).max())):
            return _orbit(gd, x, eta, period, it - 1, Outcome.CONVERGED,
                          f"G^{period}(x) = x to {r:.2e}")
        step = np.linalg.lstsq(DF, -F, rcond=PINV_RTOL)[0]
        t = 1.0
        for _ in range(30):
            trial = x + t * step
            _, F2, DF2, _ = orbit_residual(gd, trial, eta, period)
            r2 = float(np.abs(F2).max())
            if r2 < r:
                break
            t *= 0.5
        else:
            return _orbit(gd, x, eta, period, it, Outcome.FAILED,
                          f"Newton stagnated at max|G^{period}(x) − x| = {r:.2e}")
        x, F, DF, r = trial, F2, DF2, r2
    ok = r <= tol * max(1.0, float(np.abs(x).max()))
    return _orbit(gd, x, eta, period, max_iter, Outcome.CONVERGED if ok else Outcome.FAILED,
                  f"max|G^{period}(x) − x| = {r:.2e} after {max_iter} Newton steps")


@dataclass(frozen=True)
class FlipPoint(Record):
    """Where the fixed point ``x*`` flips: the step ``eta`` at which the smallest multiplier
    ``1 − ηλ_max`` of ``DG(x*)`` crosses −1 (``multiplier`` at the located η), found by
    following the fixed-point branch in η and bisecting the crossing (``bracket``: the final
    interval in η); the flip mode ``u`` (hidden) and its balance ``‖u_A‖² − ‖u_P‖²``."""

    eta: float
    multiplier: float
    bracket: float
    lambda_max: float
    mode_balance: float | None
    x: FloatArray = hidden()
    mode: FloatArray = hidden()


def flip_point(gd: GDMap, x_star: npt.ArrayLike, eta_range: tuple[float, float], *,
               samples: int = 16, xtol: float = 1e-15) -> FlipPoint:
    """Follow the fixed point ``x_star`` (it does not move with η) from ``eta_range[0]`` to
    ``eta_range[1]`` over ``samples`` steps, and locate where the smallest multiplier of
    ``DG_η(x*)`` crosses −1 by Brent's method (``xtol`` in η).

    ## Raises
    `MesadynError`: an empty or non-positive range, or no crossing in it (named).
    """
    from scipy.optimize import brentq

    lo, hi = (check_positive("eta_min", eta_range[0]), check_positive("eta_max", eta_range[1]))
    if not lo < hi:
        raise MesadynError(f"the η range is empty: {lo:g} >= {hi:g}")
    x = np.asarray(x_star, dtype=np.float64)
    ev, V = _eigh(gd.hessian(x))

    def mu_plus_one(eta: float) -> float:  # the smallest multiplier of DG(x*), plus one
        return float(np.linalg.eigvalsh(gd.jacobian(x, eta))[0]) + 1.0

    grid = np.linspace(lo, hi, samples + 1)
    vals = [mu_plus_one(e) for e in grid]
    k = next((i for i in range(samples) if vals[i] > 0 >= vals[i + 1]), None)
    if k is None:
        raise MesadynError(f"no multiplier of DG crosses −1 for η in [{lo:g}, {hi:g}] "
                           f"(the flip is at 2/λ_max = {2 / ev[-1]:.6g})")
    eta, info = brentq(mu_plus_one, grid[k], grid[k + 1], xtol=xtol, full_output=True)
    balance = None
    if isinstance(gd, FieldMap):
        from .gd_limits import mode_balance

        balance = mode_balance(V[:, -1], gd.free, gd.field.d)
    elif isinstance(gd, ReducedMap):
        balance = float(V[0, -1] ** 2 - V[1, -1] ** 2)  # ‖u_a‖² − ‖u_b‖² (A ↔ a, P ↔ b)
    return FlipPoint(eta=float(eta), multiplier=mu_plus_one(float(eta)) - 1.0,
                     bracket=float(xtol), lambda_max=float(ev[-1]), mode_balance=balance,
                     x=x.copy(), mode=V[:, -1].copy())


def switch_to_period2(gd: GDMap, flip: FlipPoint, epsilon: float, *, tol: float = 1e-13,
                      max_iter: int = 60) -> tuple[PeriodicOrbit, float]:
    """The period-2 orbit with ``⟨u, x − x*⟩ = ε`` near the flip (``u`` the flip mode): Newton
    on the bordered system ``[F(x; η), ⟨u, x − x*⟩ − ε] = 0`` for ``(x, η)`` from
    ``(x* + εu, η_flip)``, least-squares steps.  Returns the orbit and its η."""
    u, xs = flip.mode, flip.x
    x, eta = xs + epsilon * u, flip.eta

    def system(x: FloatArray, eta: float) -> tuple[FloatArray, FloatArray]:
        _, F, DF, Fe = orbit_residual(gd, x, eta, 2)
        J = np.zeros((gd.n + 1, gd.n + 1))
        J[:gd.n, :gd.n], J[:gd.n, gd.n], J[gd.n, :gd.n] = DF, Fe * flip.eta, u
        return np.concatenate([F, [float(u @ (x - xs)) - epsilon]]), J

    R, J = system(x, eta)
    r = float(np.abs(R).max())
    it = 0
    while r > tol * max(1.0, float(np.abs(x).max())) and it < max_iter:
        it += 1
        d = np.linalg.lstsq(J, -R, rcond=PINV_RTOL)[0]
        t = 1.0
        for _ in range(30):
            xt, et = x + t * d[:-1], eta * (1.0 + t * d[-1])
            R2, J2 = system(xt, et)
            if float(np.abs(R2).max()) < r:
                break
            t *= 0.5
        else:
            break
        x, eta, R, J, r = xt, et, R2, J2, float(np.abs(R2).max())
    ok = r <= tol * max(1.0, float(np.abs(x).max()))
    orbit = _orbit(gd, x, eta, 2, it, Outcome.CONVERGED if ok else Outcome.FAILED,
                   f"switched onto the period-2 branch at ε={epsilon:g} (residual {r:.2e})")
    return orbit, eta


def reduced_period2(eta: float, c1: float, c2: float) -> FloatArray:
    """The reduced map's 2-cycle on ``a = b`` in closed form (module docstring): rows
    ``(a_0, b_0)``, ``(a_1, b_1)`` with ``a_j = b_j = y_j/√(ηc1)``, for ``ηc2 > 1``."""
    k = eta * c2
    if not k > 1:
        raise MesadynError(f"no 2-cycle on a = b for ηc2 = {k:.6g} <= 1 (the flip is at 1/c2)")
    y = np.array([math.sqrt(k + 3) + math.sqrt(k - 1), math.sqrt(k + 3) - math.sqrt(k - 1)]) / 2
    a = y / math.sqrt(eta * c1)
    return np.stack([a, a], axis=1)


@dataclass(frozen=True)
class Period2Branch(Record):
    """The period-2 branch followed from a flip: per point (hidden arrays) η, the amplitude
    ``max|x_1 − x_0|``, ``max|G²(x) − x|``, whether the cycle is stable and the largest
    multiplier modulus of ``DG²``; the branch's ``status`` (the engine's outcome)."""

    flip_eta: float
    eta_start: float
    eta_end: float
    points: int
    max_residual: float
    status: Outcome
    message: str
    eta: FloatArray = hidden()
    amplitude: FloatArray = hidden()
    residual: FloatArray = hidden()
    stable: npt.NDArray[np.bool_] = hidden()
    top_multiplier: FloatArray = hidden()
    x: FloatArray = hidden()


def follow_period2(gd: GDMap, flip: FlipPoint, eta_end: float, *, epsilon: float | None = None,
                   ds: float = 0.02, max_steps: int = 200) -> Period2Branch:
    """Switch onto the period-2 branch at ``flip`` (:func:`switch_to_period2`) and follow it
    to ``eta_end`` with :func:`mesadyn.analysis.continuation.run_branch` in ``p = η/η_flip``.

    The problem handed to the engine is ``F(x; p) = G²(x) − x`` with its exact Jacobian (not
    symmetric: the engine's corrector and tangent only solve with it; its eigenvalue
    detection is off and each point's multipliers are computed here)."""
    from .continuation import Options, run_branch

    eta_end = check_positive("eta_end", eta_end)
    eps = epsilon if epsilon is not None else 1e-2 * max(1e-3, float(np.abs(flip.x).max()))
    start, eta0 = switch_to_period2(gd, flip, eps)
    if start.status is not Outcome.CONVERGED or start.minimal_period != 2:
        raise MesadynError(f"could not switch onto the period-2 branch: {start.message}")
    problem = _Period2Problem(gd, flip.eta)
    p0, p_end = eta0 / flip.eta, eta_end / flip.eta
    lo, hi = sorted((p0, p_end))
    opts = Options(ds=ds, ds_max=max(ds, 0.05), max_steps=max_steps, tol=1e-12, detect=False,
                   cos_min=0.5)
    br = run_branch(problem, start.points[0], p0, p_end, opts, lo=lo, hi=hi)
    etas, amps, res, stab, top, xs = [], [], [], [], [], []
    for pt in br.points:
        eta = pt.p * flip.eta
        orb = _orbit(gd, pt.theta, eta, 2, pt.iterations, Outcome.CONVERGED, "")
        etas.append(eta)
        amps.append(orb.amplitude)
        res.append(orb.residual)
        stab.append(orb.stable)
        top.append(abs(orb.multipliers[0]))
        xs.append(pt.theta)
    return Period2Branch(flip_eta=flip.eta, eta_start=etas[0], eta_end=etas[-1],
                         points=len(etas), max_residual=float(max(res)), status=br.status,
                         message=br.message, eta=np.array(etas), amplitude=np.array(amps),
                         residual=np.array(res), stable=np.array(stab, dtype=bool),
                         top_multiplier=np.array(top), x=np.stack(xs))


class _Period2Problem(Problem):
    """``F(x; p) = G²_{pη_f}(x) − x`` as the continuation engine's
    :class:`~mesadyn.analysis.continuation.Problem` (no symmetry; the last evaluation is
    cached)."""

    def __init__(self, gd: GDMap, eta_flip: float) -> None:
        self.gd, self.eta_f = gd, eta_flip
        self.n = gd.n
        self.free = np.ones(gd.n, dtype=bool)
        self._key: tuple[bytes, float] | None = None
        self._val: tuple[FloatArray, FloatArray, FloatArray] | None = None

    def _eval(self, x: FloatArray, p: float) -> tuple[FloatArray, FloatArray, FloatArray]:
        key = (np.asarray(x, np.float64).tobytes(), float(p))
        if key != self._key or self._val is None:
            _, F, DF, Fe = orbit_residual(self.gd, x, p * self.eta_f, 2)
            self._key, self._val = key, (F, DF, Fe * self.eta_f)
        return self._val

    def loss(self, x: FloatArray, p: float) -> float:
        return 0.5 * float(np.sum(self._eval(x, p)[0] ** 2))

    def grad(self, x: FloatArray, p: float) -> FloatArray:
        return self._eval(x, p)[0]

    def hessian(self, x: FloatArray, p: float) -> FloatArray:
        return self._eval(x, p)[1]

    def grad_p(self, x: FloatArray, p: float) -> FloatArray:
        return self._eval(x, p)[2]
