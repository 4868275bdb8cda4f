"""The pieces of Newton's method on ``∇L = 0`` that the paper's model
(:func:`mesadyn.analysis.fixedpoint.refine`) and every model
(:func:`mesadyn.analysis.model_fixedpoint.newton_polish`) share: the pseudo-inverse cut-off and
the backtracking on ``max|∇L|``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["MAX_HALVINGS", "PINV_RTOL", "Trial", "backtrack"]

#: Pseudo-inverse cut-off of a Newton step, relative to the largest |eigenvalue| of the
#: Hessian it inverts: smaller eigenvalues (symmetry orbits, rounding) are left out.
PINV_RTOL = 1e-10
#: Halvings of a Newton step before no step counts as decreasing ``max|∇L|``.
MAX_HALVINGS = 30

#: A point tried by :func:`backtrack`: ``(t, θ, L, ∇L, max|∇L| on the free entries)``.
Trial = tuple[float, np.ndarray, float, np.ndarray, float]


def backtrack(evaluate: Callable[[np.ndarray], tuple[float, np.ndarray]], theta: np.ndarray,
              free: np.ndarray, step: np.ndarray, r: float) -> Trial | None:
    """The first of ``θ + t·step`` (on the ``free`` entries; ``t = 1, ½, ¼, …``,
    :data:`MAX_HALVINGS` tries) whose ``max|∇L|`` over the free entries is below ``r``, or
    ``None`` when none is.  ``evaluate``: θ ↦ ``(L, ∇L)``."""
    t = 1.0
    for _ in range(MAX_HALVINGS):
        trial = theta.copy()
        trial[free] += t * step
        L, g = evaluate(trial)
        r2 = float(np.abs(g[free]).max())
        if r2 < r:
            return t, trial, L, g, r2
        t *= 0.5
    return None
