"""The paper's closed-form predictions for one process (``mesadyn theory``).

κ1, κ2, κ3 (Assumption 4.1), the reduced system's ``c1, c2`` (Lemma 5.3; Lemma A.5 for
``x_1 = 1_d``), Theorem 4.1's ``ab* = c2/c1`` at this T (Theorem 4.3's for ones), its T → ∞
limit κ1/κ2 that the paper's figures draw, and Proposition 4.1's predicted ratio; for real
rotations the five constants of the 3-D manifold and its minima ``k* = Γ⁻¹h``
(:func:`mesadyn.workflows._manifold.theory_result`).

Example:
    ```python
    from mesadyn.workflows import theory

    theory.run(theory.Config(x1="gaussian", sigma=1.0)).ab_star  # 0.19190508858...
    ```
"""

from __future__ import annotations

from dataclasses import dataclass

from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import omitted_if
from ._run import RunOptions, RunResult, write_run

__all__ = ["Config", "Result", "run"]


@dataclass(frozen=True)
class Config(RunOptions):
    """The process (``x1, sigma, scale, d, T`` and the data models); ``seed`` is accepted and
    unused; ``out``: a run file recording the constants with the configuration."""

    COMMAND = "theory"


@dataclass(frozen=True)
class Result(RunResult):
    """Theorem 4.1 / 4.3's predictions for one process at training length ``T``; ``status`` is
    always ``ok`` (closed forms either evaluate or raise on bad input)."""

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
    radius: float = omitted_if(1.0)
    """r of ``W = r·diag(λ)`` (docs/design.md §6); reported only when it is not the paper's 1."""
    rotation: str = omitted_if("diagonal")
    """The rotation of W (``real``, ``haar``); reported only when it is not the paper's."""
    noise: float = omitted_if(0.0)
    """The AR noise scale s; reported only when it is not 0."""
    g12: float | None = omitted_if(None)
    """Real rotations (:mod:`mesadyn.workflows._manifold`): the 3-D manifold's constants of the
    third coordinate c, ``ℓ = ½ b² (c1 a² + 2 g12 a c + g22 c²) − b (c2 a + h2 c)``, and
    ``cb_star``, the product cb at every minimum (``(ab_star, cb_star) = k* = Γ⁻¹h``)."""
    g22: float | None = omitted_if(None)
    h2: float | None = omitted_if(None)
    cb_star: float | None = omitted_if(None)

    @property
    def theorem(self) -> str:
        """Which result gives ``ab_star``: Theorem 4.1 (Assumption 4.1 holds), 4.3 (masked
        ones), or the 3-D manifold of real rotations."""
        if self.rotation == "real":
            return "the 3-D rotation manifold"
        return "Theorem 4.1" if self.assumption_4_1 else "Theorem 4.3 (masked)"


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

    if config.rotation == "real":  # the 3-D manifold's constants (no 2-D reduced system)
        from ._manifold import theory_result

        return write_run(config, theory_result(config))
    fam = config.family()
    c = config.constants()
    result = Result(
        family=fam.name, d=fam.d, T=c.T, kappa1=c.kappa1, kappa2=c.kappa2, kappa3=c.kappa3,
        c1=c.c1, c2=c.c2, ab_star=c.ab_star, ab_limit=c.ab_limit,
        # Proposition 4.1's ratio is derived for the paper's process only (r = 1, diagonal W,
        # no noise)
        ratio=(predicted_ratio(fam, config.T)
               if config.radius == 1 and config.diagonal_noiseless else None),
        assumption_4_1=fam.assumption_41, radius=config.radius,
        rotation=str(config.rotation), noise=config.noise, status=Outcome.OK,
    )
    return write_run(config, result)
