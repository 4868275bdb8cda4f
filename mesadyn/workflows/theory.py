"""The paper's closed-form predictions for one process (``mesadyn theory``).

κ1, κ2, κ3 (Assumption 4.1), the reduced system's ``c1, c2`` (Lemma 5.3; Lemma A.5 for
``x_1 = 1_d``), Theorem 4.1's ``ab* = c2/c1`` at this T (Theorem 4.3's for ones), its T → ∞
limit κ1/κ2 that the paper's figures draw, and Proposition 4.1's predicted ratio.

Example:
    >>> from mesadyn.workflows import theory
    >>> theory.run(theory.Config(x1="gaussian", sigma=1.0)).ab_star  # doctest: +ELLIPSIS
    0.1919050885...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..progress import ProgressCallback
from ._common import ProcessOptions

__all__ = ["Config", "Result", "run"]


@dataclass(frozen=True)
class Config(ProcessOptions):
    """The process (``x1, sigma, scale, d, T``); ``seed`` is accepted and unused."""


@dataclass(frozen=True)
class Result:
    """Theorem 4.1 / 4.3's predictions for one process at training length ``T``."""

    family: str
    d: int
    T: int
    kappa1: float
    kappa2: float
    kappa3: float
    c1: float
    c2: float
    ab_star: float
    ab_limit: float
    ratio: float | None
    assumption_4_1: bool
    radius: float = 1.0
    """r of ``W = r·diag(λ)`` (DESIGN.md §6); reported only when it is not the paper's 1."""

    @property
    def status(self) -> str:
        """Always ``"ok"``: closed forms either evaluate or raise on bad input."""
        return "ok"

    @property
    def theorem(self) -> str:
        """Which theorem gives ``ab_star``: 4.1 (Assumption 4.1 holds) or 4.3 (masked ones)."""
        return "Theorem 4.1" if self.assumption_4_1 else "Theorem 4.3 (masked)"

    def to_dict(self) -> dict[str, Any]:
        """The ``mesadyn theory --json`` object."""
        return {
            "family": self.family, "d": self.d, "T": self.T, "kappa1": self.kappa1,
            "kappa2": self.kappa2, "kappa3": self.kappa3, "c1": self.c1, "c2": self.c2,
            "ab_star": self.ab_star, "ab_limit": self.ab_limit, "ratio": self.ratio,
            "assumption_4_1": self.assumption_4_1,
        } | ({} if self.radius == 1 else {"radius": self.radius})


def run(config: Config, progress: ProgressCallback | None = None) -> Result:
    """Evaluate the closed forms (Lemma 5.3 / A.5, Theorems 4.1 / 4.3, Proposition 4.1).

    ## Arguments
    - `config`: the validated process options.
    - `progress`: unused (the closed forms are instant); accepted like every workflow's.

    ## Returns
    A :class:`Result`.

    ## Raises
    - `MesadynError`: the family has no reduced system (no moments and not ``c·1_d``).
    """
    from ..theory import predicted_ratio

    fam = config.family()
    c = config.constants()
    return Result(
        family=fam.name, d=fam.d, T=c.T, kappa1=c.kappa1, kappa2=c.kappa2, kappa3=c.kappa3,
        c1=c.c1, c2=c.c2, ab_star=c.ab_star, ab_limit=c.ab_limit,
        # Proposition 4.1's ratio is derived for r = 1 only
        ratio=predicted_ratio(fam, config.T) if config.radius == 1 else None,
        assumption_4_1=fam.assumption_41, radius=config.radius,
    )
