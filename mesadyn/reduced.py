"""The reduced 2-D gradient flow of Lemma 5.2 (Lemma A.5 for ones with the diagonal mask).

    ȧ = −a b² c1 + b c2,   ḃ = −a² b c1 + a c2,

the gradient flow of the surrogate ``ℓ̃(a, b) = (c2 − c1 ab)² / (2 c1)`` (Lemma 5.3).  It
conserves ``a² − b²``; its minima lie on the hyperbola ``ab = c2/c1`` (Theorems 4.1, 4.3).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from .errors import MesadynError, check_finite, check_positive
from .process import Family
from .theory import constants

FloatArray = npt.NDArray[np.float64]

#: Default closeness for :meth:`ReducedSystem.settle_time` and :meth:`ReducedSystem.horizon`.
SETTLE_TOL = 1e-12


class SettleMeasure(StrEnum):
    """How :meth:`ReducedSystem.settle_time` measures "settled".

    ``distance``: within ``tol · max(1, ‖(a0, b0)‖)`` of the limit point (Euclidean);
    ``ab``: ``|ab − ab*| <= tol · ab*`` (on the stable manifold ``a0 = −b0``, which never reaches
    the hyperbola, the distance to the saddle has shrunk to ``tol · ‖(a0, b0)‖``).
    """

    distance = "distance"
    ab = "ab"


@dataclass(frozen=True)
class ReducedSystem:
    """The 2-D system with constants ``c1 > 0``, ``c2 > 0`` (Lemma 5.3)."""

    c1: float
    c2: float

    def __post_init__(self) -> None:
        check_positive("c1", self.c1)
        check_positive("c2", self.c2)

    @classmethod
    def from_family(cls, fam: Family, T: int) -> ReducedSystem:
        """Constants of Lemma 5.3 (Lemma A.5 for ``x_1 = c·1_d``) at training length T."""
        c = constants(fam, T)
        return cls(c.c1, c.c2)

    @property
    def ab_star(self) -> float:
        """The fixed hyperbola ``ab = c2/c1``."""
        return self.c2 / self.c1

    def rhs(self, a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
        """``(ȧ, ḃ)`` of Lemma 5.2; works elementwise on arrays."""
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):  # trial steps of solvers may blow up
            return -a * b * b * self.c1 + b * self.c2, -a * a * b * self.c1 + a * self.c2

    def surrogate(self, a: npt.ArrayLike, b: npt.ArrayLike) -> FloatArray:
        """``ℓ̃(a, b) = (c2 − c1 ab)² / (2 c1)`` (Lemma 5.3); its minimum is 0."""
        s = np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64)
        return (self.c2 - self.c1 * s) ** 2 / (2 * self.c1)

    def invariant(self, a: npt.ArrayLike, b: npt.ArrayLike) -> FloatArray:
        """The conserved ``a² − b²``."""
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        return a * a - b * b

    def pl_constant(self, a: npt.ArrayLike, b: npt.ArrayLike) -> FloatArray:
        """Lemma 5.4: ``‖∇ℓ̃‖² = 2 c1 (a² + b²) ℓ̃``, so the PL constant is ``2 c1 (a² + b²)``."""
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        return 2 * self.c1 * (a * a + b * b)

    def jacobian(self, a: float, b: float) -> np.ndarray:
        """The 2×2 Jacobian of ``(ȧ, ḃ)`` at ``(a, b)`` (= −∇²ℓ̃)."""
        c1, c2 = self.c1, self.c2
        return np.array(
            [[-b * b * c1, -2 * a * b * c1 + c2], [-2 * a * b * c1 + c2, -a * a * c1]],
            dtype=np.float64,
        )

    # ---- closed form -----------------------------------------------------------------
    def rate(self, a0: float, b0: float) -> float:
        """Exponential rate of approach to the limit: ``c1 √(Δ² + 4 s*²)`` (``2 c2`` if a0 = b0).

        It is minus the Jacobian's nonzero eigenvalue at the limit point (the hyperbola is a
        line of fixed points).  On the saddle's stable manifold ``a0 = −b0`` (and at the
        origin) it is the saddle's stable eigenvalue's magnitude ``c2``.
        """
        a0, b0 = check_finite("a0", a0), check_finite("b0", b0)
        delta = _delta(a0, b0)
        if delta == 0.0:
            return 2 * self.c2 if a0 == b0 and a0 != 0.0 else self.c2
        return self.c1 * math.hypot(delta, 2 * self.ab_star)

    def limit(self, a0: float, b0: float) -> tuple[float, float]:
        """The point ``(a∞, b∞)`` that the flow from ``(a0, b0)`` converges to.

        The intersection of the start's branch of ``a² − b² = Δ`` with ``ab = c2/c1``; the
        origin (the saddle) for starts on its stable manifold ``a0 = −b0`` or at the origin.
        """
        a, b = self.solution(a0, b0, np.inf)
        return float(a), float(b)

    def solution(self, a0: float, b0: float,
                 tau: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
        """The exact ``(a(τ), b(τ))`` of Lemma 5.2's flow from ``(a0, b0)``; τ may be an array.

        Uses the conserved ``Δ = a² − b²``.  For Δ > 0 write ``a = ±√Δ cosh(ψ/2)``,
        ``b = ±√Δ sinh(ψ/2)`` (sign of a0), so ``s = ab = q sinh ψ`` with ``q = Δ/2`` and
        ``ψ̇ = 2 c1 (p − q sinh ψ)``, ``p = c2/c1``.  With ``t = e^ψ`` this is the Riccati
        equation ``ṫ = −c1 q (t − t₊)(t − t₋)``, ``t± = (p ± R)/q``, ``R = √(p² + q²)``, whose
        solution is the Möbius map ``(t − t₊)/(t − t₋) = r0 e^{−2 c1 R τ}`` — fully explicit, no
        root solve.  Δ < 0 follows by the symmetry ``a ↔ b``; Δ = 0 is the logistic
        ``ṡ = 2|s| (c2 − c1 s)``: ``a0 = b0 ≠ 0`` rises to ``s* = p``, ``a0 = −b0 ≠ 0`` decays to
        the saddle along its stable manifold ``a = −b``, and the origin stays put.
        """
        a0, b0 = check_finite("a0", a0), check_finite("b0", b0)
        tau = np.asarray(tau, dtype=np.float64)
        if np.any(np.isnan(tau)) or np.any(tau < 0):
            raise MesadynError(f"τ must be >= 0, got min τ={np.nanmin(tau) if tau.size else tau!r}")
        delta = _delta(a0, b0)
        if delta < 0:
            b, a = self.solution(b0, a0, tau)
            return a, b
        if delta == 0.0:
            return self._solution_logistic(a0, b0, tau)
        psi = self._psi(a0, b0, tau)
        sign = 1.0 if a0 > 0 else -1.0
        return sign * _sqrt_cosh_half(delta, psi), sign * _sqrt_sinh_half(delta, psi)

    def _psi_constants(self, a0: float, b0: float) -> tuple[float, float, float, float]:
        """``(ψ₊, u0, R, |t₋|/t₊)`` for Δ = a0² − b0² > 0 (see :meth:`solution`)."""
        delta = _delta(a0, b0)
        p, q = self.ab_star, 0.5 * delta
        R = math.hypot(p, q)
        psi_plus = math.asinh(p / q)
        # a ± b = ±√Δ e^{±ψ/2}: ψ0 from logs of |a0 + b0| and |a0 − b0| (no cancellation)
        psi0 = math.log(abs(a0 + b0)) - math.log(abs(a0 - b0))
        ratio = (q / (p + R)) ** 2  # |t₋| / t₊ = (R − p)/(R + p)
        return psi_plus, psi0 - psi_plus, R, ratio

    def _psi(self, a0: float, b0: float, tau: np.ndarray) -> np.ndarray:
        """``ψ(τ)`` from the Möbius solution, written to avoid cancellation near the limit."""
        psi_plus, u0, R, ratio = self._psi_constants(a0, b0)
        r0 = math.expm1(u0) / (math.exp(u0) + ratio)  # (t0 − t₊)/(t0 − t₋)
        one_minus_r0 = (1.0 + ratio) / (math.exp(u0) + ratio)  # 1 − r0 without cancellation
        with np.errstate(over="ignore"):
            E = np.exp(-2.0 * self.c1 * R * tau)
            r = r0 * E
            if r0 < 0:  # 1 − r = 1 + |r|
                one_minus_r = 1.0 - r
            else:  # 1 − r = (1 − r0) + r0 (1 − E), both terms >= 0
                one_minus_r = one_minus_r0 - r0 * np.expm1(-2.0 * self.c1 * R * tau)
            # t/t₊ = (1 + r |t₋|/t₊) / (1 − r): both factors positive, no cancellation
            log_one_minus_r = np.where(np.abs(r) < 0.5, np.log1p(-np.clip(r, -0.5, 0.5)),
                                       np.log(one_minus_r))
            u = np.log1p(r * ratio) - log_one_minus_r
        return psi_plus + u

    def _solution_logistic(self, a0: float, b0: float,
                           tau: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Δ = 0: ``a = ±b`` for all τ, ``s`` logistic (Bernoulli) in closed form."""
        c1, c2 = self.c1, self.c2
        E = np.exp(-2.0 * c2 * tau)
        if a0 == 0.0:  # the saddle
            z = np.zeros_like(tau)
            return z, z.copy()
        v0 = a0 * a0
        if a0 == b0:  # s = a² > 0 rises logistically to p: ṡ = 2 c2 s (1 − s/p)
            p = self.ab_star
            s = p * v0 / (v0 + (p - v0) * E)
            a = math.copysign(1.0, a0) * np.sqrt(s)
            return a, a.copy()
        # a0 = −b0: v = a² obeys v̇ = −2 v (c2 + c1 v): v = c2 v0 E / (c2 − c1 v0 expm1(−2c2τ))
        v = c2 * v0 * E / (c2 - c1 * v0 * np.expm1(-2.0 * c2 * tau))
        a = math.copysign(1.0, a0) * np.sqrt(v)
        return a, -a

    def distance_to_limit(self, a0: float, b0: float, tau: npt.ArrayLike) -> FloatArray:
        """Euclidean distance of ``(a(τ), b(τ))`` from :meth:`limit`."""
        a, b = self.solution(a0, b0, tau)
        al, bl = self.limit(a0, b0)
        return np.hypot(a - al, b - bl)

    def time_to_reach(self, a0: float, b0: float, distance: float) -> float:
        """The exact τ at which the flow from ``(a0, b0)`` first comes within ``distance`` of
        its limit point (0 if it starts there).

        The orbit is known (the branch of ``a² − b² = Δ``, or the line ``a = ±b``), and the
        distance from the limit is monotone along it, so the point on the orbit at that
        distance is found by a bracketed root solve (Brent, to machine precision) on the exact
        orbit parametrisation; the time to reach it is then the closed form's exact inverse.
        """
        distance = check_positive("distance", distance)
        a0, b0 = check_finite("a0", a0), check_finite("b0", b0)
        if float(self.distance_to_limit(a0, b0, 0.0)) <= distance:
            return 0.0
        delta = _delta(a0, b0)
        if delta < 0:
            return self.time_to_reach(b0, a0, distance)
        if delta == 0.0:
            v0 = a0 * a0
            if a0 == b0:  # distance √2 |√s − √p|, s logistic
                p = self.ab_star
                root = math.sqrt(p) + math.copysign(distance / math.sqrt(2), v0 - p)
                s = root * root
                # s = p v0/(v0 + (p − v0) e^{−2c2τ})  ⇒  e^{−2c2τ} = v0 (p − s) / (s (p − v0))
                return -math.log(v0 * (p - s) / (s * (p - v0))) / (2 * self.c2)
            # a0 = −b0: distance √(2v) from the origin; 1/v + c1/c2 grows like e^{2c2τ}
            v = distance * distance / 2
            c = self.c1 / self.c2
            return math.log((1 / v + c) / (1 / v0 + c)) / (2 * self.c2)
        psi_plus, u0, R, ratio = self._psi_constants(a0, b0)

        def excess(u: float) -> float:  # chord from the limit on the hyperbola, minus distance
            return 2 * math.sqrt(delta) * abs(math.sinh(u / 4)) * math.sqrt(
                math.cosh(psi_plus + u / 2)) - distance

        u = _brentq(excess, 0.0, u0, xtol=1e-300, rtol=4 * _EPS, maxiter=500)
        return self._time_between(u0, u, R, ratio)

    def _time_between(self, u0: float, u: float, R: float, ratio: float) -> float:
        """τ at which ``ψ − ψ₊`` has gone from ``u0`` to ``u`` (the Möbius solution inverted)."""
        r0 = math.expm1(u0) / (math.exp(u0) + ratio)
        r = math.expm1(u) / (math.exp(u) + ratio)
        return math.log(r0 / r) / (2 * self.c1 * R)

    # ---- settling: the one home of "how long until the reduced flow settles" -------------
    def settle_time(self, a0: float, b0: float, tol: float = SETTLE_TOL,
                    measure: SettleMeasure | str = SettleMeasure.distance) -> float:
        """The exact τ at which the flow from ``(a0, b0)`` has settled (0 if it starts so).

        # Arguments
        - `a0`, `b0`: the start (Assumption 3.1's scalars).
        - `tol`: the closeness, relative (see `measure`).
        - `measure`: ``distance`` (default): within ``tol · max(1, ‖(a0, b0)‖)`` of the limit
          point, by :meth:`time_to_reach`; ``ab``: ``|ab − ab*| <= tol · ab*``, by inverting the
          closed form at the target ``s = ab*(1 ∓ tol)`` (``s = ab`` is monotone along every
          orbit); on the stable manifold ``a0 = −b0`` (which never reaches the hyperbola) the
          time for the distance to the saddle to shrink to ``tol · ‖(a0, b0)‖``.

        # Returns
        τ >= 0, exact to rounding (no ODE solve).

        # Raises
        `MesadynError` for a non-finite start, ``tol <= 0``, or an unknown measure.
        """
        a0, b0 = check_finite("a0", a0), check_finite("b0", b0)
        tol = check_positive("tol", tol)
        try:
            how = SettleMeasure(measure)
        except ValueError:
            raise MesadynError(f"unknown settle measure {measure!r}; choose distance or ab") \
                from None
        if how is SettleMeasure.distance:
            return self.time_to_reach(a0, b0, tol * max(1.0, math.hypot(a0, b0)))
        return self._ab_settle_time(a0, b0, tol)

    def horizon(self, a0: float, b0: float) -> float:
        """An integration horizon well past settling: ``max(3 τ_s, 50/c2)``, with
        ``τ_s = settle_time(a0, b0, 1e-12)`` (within ``1e-12 · max(1, ‖(a0, b0)‖)`` of the
        limit).  ``50/c2`` keeps a non-trivial horizon for starts at (or near) a fixed point:
        ``c2`` is the saddle's rate (Lemma 5.2 linearised at the origin).

        # Returns
        The flow time τ to integrate to (the CLI's automatic ``--t-end``).
        """
        return max(3.0 * self.settle_time(a0, b0, SETTLE_TOL), 50.0 / self.c2)

    def max_rate(self, a0: float, b0: float) -> float:
        """The largest spectral radius of the Jacobian (:meth:`jacobian`) along the orbit from
        ``(a0, b0)`` to its limit: the fastest local time scale, which bounds the step of an
        explicit solver (stability needs ``h · max_rate ≲ 3.3`` for dopri5).

        With ``Δ = a² − b²`` fixed and ``s = ab`` monotone along the orbit, the Jacobian
        ``[[−c1 b², c2 − 2c1 s], [c2 − 2c1 s, −c1 a²]]`` has spectral radius
        ``ρ(s) = c1 √(Δ² + 4s²)/2 + √((c1 Δ/2)² + (c2 − 2 c1 s)²)``, convex in ``s``, so the
        maximum is at the start or at the limit — exact, no search.
        """
        a0, b0 = check_finite("a0", a0), check_finite("b0", b0)
        delta = _delta(a0, b0)
        a_inf, b_inf = self.limit(a0, b0)

        def rho(s: float) -> float:
            return (0.5 * self.c1 * math.hypot(delta, 2 * s)
                    + math.hypot(0.5 * self.c1 * delta, self.c2 - 2 * self.c1 * s))

        return max(rho(a0 * b0), rho(a_inf * b_inf))

    def _ab_settle_time(self, a0: float, b0: float, tol: float) -> float:
        """``|ab − ab*| <= tol · ab*`` (see :meth:`settle_time`)."""
        p = self.ab_star
        s0 = a0 * b0
        if abs(s0 - p) <= tol * p or (a0 == 0.0 and b0 == 0.0):
            return 0.0
        delta = _delta(a0, b0)
        if delta == 0.0 and a0 == -b0:  # the stable manifold: s → 0, never reaches ab*
            return self.time_to_reach(a0, b0, tol * math.hypot(a0, b0))
        target = p * (1.0 - tol) if s0 < p else p * (1.0 + tol)
        if delta == 0.0:  # a0 = b0: s logistic, e^{−2c2τ} = v0 (p − s) / (s (p − v0))
            v0 = a0 * a0
            return -math.log(v0 * (p - target) / (target * (p - v0))) / (2 * self.c2)
        if delta < 0:
            a0, b0 = b0, a0
            delta = -delta
        psi_plus, u0, R, ratio = self._psi_constants(a0, b0)
        u = math.asinh(target / (0.5 * delta)) - psi_plus  # s = (Δ/2) sinh ψ
        return self._time_between(u0, u, R, ratio)


def _sqrt_cosh_half(delta: float, psi: np.ndarray) -> np.ndarray:
    """``√Δ cosh(ψ/2)`` without overflow for tiny Δ and huge |ψ|."""
    h = np.abs(psi) / 2
    with np.errstate(over="ignore"):
        direct = math.sqrt(delta) * np.cosh(h)
    big = h > 300
    if np.any(big):
        logs = h + 0.5 * math.log(delta) - math.log(2.0)
        direct = np.where(big, np.exp(logs) * (1 + np.exp(-2 * np.minimum(h, 700))), direct)
    return direct


def _sqrt_sinh_half(delta: float, psi: np.ndarray) -> np.ndarray:
    """``√Δ sinh(ψ/2)`` without overflow for tiny Δ and huge |ψ|."""
    h = psi / 2
    with np.errstate(over="ignore"):
        direct = math.sqrt(delta) * np.sinh(h)
    big = np.abs(h) > 300
    if np.any(big):
        logs = np.abs(h) + 0.5 * math.log(delta) - math.log(2.0)
        direct = np.where(big, np.sign(h) * np.exp(logs) * -np.expm1(-2 * np.minimum(np.abs(h),
                                                                                     700)), direct)
    return direct


#: The float64 machine epsilon.
_EPS = 2.0**-52


def _brentq(f: Callable[[float], float], xa: float, xb: float, xtol: float, rtol: float,
            maxiter: int) -> float:
    """A root of ``f`` in the bracket ``[xa, xb]`` by Brent's method (R. P. Brent, *Algorithms
    for Minimization Without Derivatives*, 1973, ch. 4), step for step as
    ``scipy.optimize.brentq`` (its C code, ``Zeros/brentq.c``), so the roots agree bit for bit
    (tested) without importing scipy on the reduced system's path.

    Stops when the bracket is shorter than ``xtol + rtol·|x|``, at an exact zero, or after
    ``maxiter`` iterations (the last iterate).
    """
    xpre, xcur = float(xa), float(xb)
    xblk = fblk = spre = scur = 0.0
    fpre, fcur = f(xpre), f(xcur)
    if fpre == 0:
        return xpre
    if fcur == 0:
        return xcur
    if math.copysign(1.0, fpre) == math.copysign(1.0, fcur):
        raise MesadynError(f"no sign change of the root function on [{xa!r}, {xb!r}]")
    for _ in range(maxiter):
        if fpre != 0 and fcur != 0 and math.copysign(1.0, fpre) != math.copysign(1.0, fcur):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + rtol * abs(xcur)) / 2
        sbis = (xblk - xcur) / 2
        if fcur == 0 or abs(sbis) < delta:
            return xcur
        if abs(spre) > delta and abs(fcur) < abs(fpre):
            if xpre == xblk:  # interpolate
                stry = -fcur * (xcur - xpre) / (fcur - fpre)
            else:  # extrapolate
                dpre = (fpre - fcur) / (xpre - xcur)
                dblk = (fblk - fcur) / (xblk - xcur)
                stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
            if 2 * abs(stry) < min(abs(spre), 3 * abs(sbis) - delta):  # a good short step
                spre, scur = scur, stry
            else:  # bisect
                spre = scur = sbis
        else:  # bisect
            spre = scur = sbis
        xpre, fpre = xcur, fcur
        xcur += scur if abs(scur) > delta else (delta if sbis > 0 else -delta)
        fcur = f(xcur)
    return xcur


def _delta(a0: float, b0: float) -> float:
    """The invariant ``Δ = a0² − b0² = (a0 − b0)(a0 + b0)``, in the accurate factored form."""
    return (a0 - b0) * (a0 + b0)
