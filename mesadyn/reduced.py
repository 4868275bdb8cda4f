"""The reduced 2-D gradient flow of Lemma 5.2 (Lemma A.5 for ones with the diagonal mask).

    ȧ = −a b² c1 + b c2,   ḃ = −a² b c1 + a c2,

the gradient flow of the surrogate ``ℓ̃(a, b) = (c2 − c1 ab)² / (2 c1)`` (Lemma 5.3).  It
conserves ``a² − b²``; its minima lie on the hyperbola ``ab = c2/c1`` (Theorems 4.1, 4.3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import check_positive
from .process import Family
from .theory import constants


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

    def rhs(self, a, b):
        """``(ȧ, ḃ)`` of Lemma 5.2; works elementwise on arrays."""
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        return -a * b * b * self.c1 + b * self.c2, -a * a * b * self.c1 + a * self.c2

    def surrogate(self, a, b):
        """``ℓ̃(a, b) = (c2 − c1 ab)² / (2 c1)`` (Lemma 5.3); its minimum is 0."""
        s = np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64)
        return (self.c2 - self.c1 * s) ** 2 / (2 * self.c1)

    def invariant(self, a, b):
        """The conserved ``a² − b²``."""
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        return a * a - b * b

    def pl_constant(self, a, b):
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
