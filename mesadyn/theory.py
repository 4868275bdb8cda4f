"""The paper's closed-form predictions: c1, c2 (Lemmas 5.3, A.5), ab* (Theorems 4.1, 4.3).

For a family with moments κ1, κ2, κ3 (Assumption 4.1) and training length T:

    c1 = (T−2) κ2 + H_{T−2} κ3,   c2 = (T−2) κ1,   ab* = c2 / c1,

with ``H_n = Σ_{k=1}^n 1/k``.  For ``x_1 = 1_d`` with the diagonal mask (Lemma A.5) the same
formulas hold with κ1 = κ2 = 1, κ3 = d − 1 (Theorem 4.3).

**Radius r** (``W = r·diag(λ)``, DESIGN.md §6).  At a diagonal point (``W^KQ_32 = a I``,
``W^PV_12 = b I``, ``s = ab``) ``ŷ_{t,j} = (s/(t−1)) Σ_{i=2}^{t} x_{i,j} ⟨x_{i−1}, x_t⟩``;
averaging over λ leaves only the terms whose λ-exponents cancel, each with the factor
``r^{(sum of the exponents)}``, and

    c1 = Σ_{t=2}^{T−1} r^{2t} (κ2 S_t² + κ3 Q_t) / (t−1)²,   c2 = κ1 Σ_{t=2}^{T−1} r^{2t} S_t/(t−1),
    S_t = Σ_{m=0}^{t−2} r^{2m},   Q_t = Σ_{m=0}^{t−2} r^{4m},

which is Lemma 5.3 at r = 1 (S_t = Q_t = t − 1).  The loss on the diagonal is
``d (½ c1 s² − c2 s) + const``, and by the exchangeability of the coordinates the flow keeps
``a_k = a``, ``b_k = b``: the 2-D system of Lemma 5.2 with these constants.  It is the unmasked
flow's when Assumption 4.1 holds (:attr:`Reduction.DIAGONAL`), the masked flow's otherwise
(:attr:`Reduction.MASKED`, as Lemma A.5 for ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from .errors import MesadynError, check_int
from .process import Family, NoExactMoments, NoReducedSystem, check_radius

__all__ = ["HARMONIC_EXACT_MAX", "T_MAX", "Constants", "NoReducedSystem", "Reduction",
           "check_T", "constants", "harmonic", "predicted_ratio", "radius_sums"]

#: Up to this n, :func:`harmonic` sums exactly (math.fsum); above it, the asymptotic series.
HARMONIC_EXACT_MAX = 10_000
#: The largest training length the closed forms accept (T − 2 must be a finite float).
T_MAX = 10**300
#: Euler–Mascheroni γ.
EULER_GAMMA = 0.57721566490153286060651209008240243


def harmonic(n: int) -> float:
    """``H_n = Σ_{k=1}^n 1/k`` (``H_0 = 0``) in O(1) for large n.

    Summed exactly in float64 (math.fsum) up to :data:`HARMONIC_EXACT_MAX`; above it,
    ``H_n = ln n + γ + 1/(2n) − 1/(12n²) + 1/(120n⁴) − 1/(252n⁶)`` (the digamma asymptotic
    series, ``H_n = ψ(n+1) + γ``), whose next term is below ``1e-33`` there.

    Raises:
        MesadynError: n is not an integer >= 0.
    """
    n = check_int("n", n, 0)
    if n <= HARMONIC_EXACT_MAX:
        return math.fsum(1.0 / k for k in range(1, n + 1))
    x = float(n)
    inv2 = 1.0 / (x * x)
    tail = 1.0 / (2 * x) - inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 / 252))
    return math.fsum((math.log(n), EULER_GAMMA, tail))


class Reduction(StrEnum):
    """Which gradient flow the 2-D system describes."""

    DIAGONAL = "diagonal"
    """Assumption 4.1 holds: the diagonal manifold is invariant (Lemma 5.2, Theorem 4.1)."""
    MASKED = "masked"
    """Only the flow with the diagonal mask reduces (Lemma A.5, Theorem 4.3): the unmasked
    flow leaves the diagonal (Proposition 4.2)."""


@dataclass(frozen=True)
class Constants:
    """The reduced system's constants for one process and training length."""

    kappa1: float
    kappa2: float
    kappa3: float
    T: int
    c1: float
    c2: float
    radius: float = 1.0
    reduction: Reduction = Reduction.DIAGONAL

    @property
    def ab_star(self) -> float:
        """Theorem 4.1 (4.3 for ones): ``ab* = c2/c1 = κ1 / (κ2 + κ3 H_{T−2}/(T−2))`` at r = 1."""
        return self.c2 / self.c1

    @property
    def ab_limit(self) -> float:
        """The T → ∞ limit of ``ab*``: ``κ1/κ2`` at r = 1 (the value the paper's figures
        draw); for r < 1 the convergent sums of :func:`radius_sums` at T = ∞; for r > 1 zero
        (the last terms dominate: ``c2/c1 ~ (q − 1) T r^{−2T}`` with ``q = r²``)."""
        if self.radius == 1:
            return self.kappa1 / self.kappa2
        if self.radius > 1:
            return 0.0
        s2, q1, s1 = radius_sums(2**62, self.radius)  # truncated where the rest is < 1e-18
        return self.kappa1 * s1 / (self.kappa2 * s2 + self.kappa3 * q1)


def check_T(T: int) -> int:
    """Training length ``3 <= T <= T_MAX`` (Eq. 2 sums t = 2..T−1)."""
    T = check_int("T", T, 3)
    if T > T_MAX:
        raise MesadynError(f"T must be <= 1e300, got T={T:.3g}")
    return T


def radius_sums(T: int, radius: float) -> tuple[float, float, float]:
    """``(Σ_t r^{2t} S_t²/(t−1)², Σ_t r^{2t} Q_t/(t−1)², Σ_t r^{2t} S_t/(t−1))`` over
    t = 2..T−1 (module docstring), so that ``c1 = κ2·first + κ3·second``, ``c2 = κ1·third``.

    For r < 1 the terms fall like r^{2t}: the sum stops once the rest is below 1e-17 of it
    (O(min(T, log(1e-17)/log r)) work).  For r > 1 the terms grow like r^{6T}; an overflow of
    float64 is refused.

    Raises:
        MesadynError: r <= 0, or r > 1 with ``r^{2T}`` beyond float64.
    """
    T = check_T(T)
    r = check_radius(radius)
    if r > 1 and 2 * (T - 1) * math.log(r) > 700:
        raise MesadynError(
            f"radius={r!r} with T={T} overflows float64 (r^(2T) > 1e304); use a smaller T or r"
        )
    import numpy as np  # here only: the r = 1 constants stay pure Python

    q = r * r
    n = T - 2
    if r < 1:
        # every term is <= q^t/(1−q)², so the rest after t = n is <= q^n/(1−q)³: stop once
        # that is below 1e-18 of the first term (q²)
        cut = math.log(1e-18 * (1 - q) ** 3) / math.log(q)
        n = min(n, max(1, int(cut) + 4))
    t = np.arange(2, n + 2, dtype=np.float64)
    m = t - 1  # t − 1 = number of terms of S_t, Q_t
    if r == 1:
        S = Q = m
    else:
        S = -np.expm1(m * math.log(q)) / -math.expm1(math.log(q))
        Q = -np.expm1(m * 2 * math.log(q)) / -math.expm1(2 * math.log(q))
    w = np.exp(t * math.log(q))
    return (math.fsum(w * S * S / (m * m)), math.fsum(w * Q / (m * m)),
            math.fsum(w * S / m))


def constants(fam: Family, T: int, radius: float = 1.0) -> Constants:
    """``c1, c2`` of Lemma 5.3 (Assumption 4.1 families) or Lemma A.5 (``x_1 = c·1_d``,
    masked), for the radius r (module docstring; r = 1 is the paper).

    Arguments:
        fam: a family with exchangeable coordinates and known κ1, κ2, κ3.
        T: training length (``3 <= T <= T_MAX``; O(1) at r = 1).
        radius: r of ``W = r·diag(λ)``.

    Returns:
        :class:`Constants`; ``reduction`` says whether the unmasked flow reduces.

    Raises:
        NoReducedSystem: the family has no reduced system (its message says why).
    """
    T = check_T(T)
    r = check_radius(radius)
    try:
        k1, k2, k3 = fam.kappas()
    except NoExactMoments:
        raise NoReducedSystem(
            f"family {fam.name!r} has no reduced system: it has no exact moments "
            "(only the Monte-Carlo field applies)"
        ) from None
    except NoReducedSystem as exc:
        raise NoReducedSystem(
            f"family {fam.name!r} has no reduced system: Theorem 4.3 needs x_1 = c·1_d "
            f"and Lemma 5.3 exchangeable coordinates ({exc})"
        ) from None
    reduction = Reduction.DIAGONAL if fam.assumption_41 else Reduction.MASKED
    if r == 1:
        H = harmonic(T - 2)
        c1, c2 = (T - 2) * k2 + H * k3, (T - 2) * k1
    else:
        s2, q1, s1 = radius_sums(T, r)
        c1, c2 = k2 * s2 + k3 * q1, k1 * s1
    return Constants(k1, k2, k3, T, c1=c1, c2=c2, radius=r, reduction=reduction)


def predicted_ratio(fam: Family, T: int) -> float:
    """Proposition 4.1's ``E[(ŷ)_j/(W x)_j] = ab* · E[x_j²]`` (per active coordinate).

    For gaussian this is ``σ² ab*`` → 1/5 as T → ∞; for sparse, conditioned on the active
    coordinate, ``c² ab*`` = 1.
    """
    ab = constants(fam, T).ab_star
    return ab * fam.active_second_moment
