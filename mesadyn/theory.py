"""The paper's closed-form predictions: c1, c2 (Lemmas 5.3, A.5), ab* (Theorems 4.1, 4.3).

For a family with moments κ1, κ2, κ3 (Assumption 4.1) and training length T:

    c1 = (T−2) κ2 + H_{T−2} κ3,   c2 = (T−2) κ1,   ab* = c2 / c1,

with ``H_n = Σ_{k=1}^n 1/k``.  For ``x_1 = 1_d`` with the diagonal mask (Lemma A.5) the same
formulas hold with κ1 = κ2 = 1, κ3 = d − 1 (Theorem 4.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import MesadynError, check_int
from .process import Family


def harmonic(n: int) -> float:
    """``H_n = Σ_{k=1}^n 1/k`` (``H_0 = 0``), summed exactly in float64 with math.fsum."""
    n = check_int("n", n, 0)
    return math.fsum(1.0 / k for k in range(1, n + 1))


@dataclass(frozen=True)
class Constants:
    """The reduced system's constants for one process and training length."""

    kappa1: float
    kappa2: float
    kappa3: float
    T: int
    c1: float
    c2: float

    @property
    def ab_star(self) -> float:
        """Theorem 4.1 (4.3 for ones): ``ab* = c2/c1 = κ1 / (κ2 + κ3 H_{T−2}/(T−2))``."""
        return self.c2 / self.c1

    @property
    def ab_limit(self) -> float:
        """The T → ∞ limit ``κ1/κ2``, which the paper's figures draw."""
        return self.kappa1 / self.kappa2


def check_T(T: int) -> int:
    """Training length T >= 3 (Eq. 2 sums t = 2..T−1)."""
    return check_int("T", T, 3)


def constants(fam: Family, T: int) -> Constants:
    """``c1, c2`` of Lemma 5.3 (Assumption 4.1 families) or Lemma A.5 (``x_1 = c·1_d``)."""
    T = check_T(T)
    try:
        k1, k2, k3 = fam.kappa1, fam.kappa2, fam.kappa3
    except MesadynError:
        raise MesadynError(
            f"family {fam.name!r} has no reduced system: Theorem 4.3 needs x_1 = c·1_d"
        ) from None
    H = harmonic(T - 2)
    return Constants(k1, k2, k3, T, c1=(T - 2) * k2 + H * k3, c2=(T - 2) * k1)


def predicted_ratio(fam: Family, T: int) -> float:
    """Proposition 4.1's ``E[(ŷ)_j/(W x)_j] = ab* · E[x_j²]`` (per active coordinate).

    For gaussian this is ``σ² ab*`` → 1/5 as T → ∞; for sparse, conditioned on the active
    coordinate, ``c² ab*`` = 1.
    """
    ab = constants(fam, T).ab_star
    return ab * fam.active_second_moment
