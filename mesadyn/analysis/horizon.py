"""The one horizon policy of the full gradient flow: how long to integrate when no ``t_end``
is given.

The reduced system of Lemma 5.2 sizes it (:meth:`mesadyn.reduced.ReducedSystem.horizon`: three
settling times, at least ``50/c2``), with two corrections, each decided by what the start and
the family declare, never by a family's name:

- a Gaussian start of scale σ_w near the saddle at the origin needs ``~ log(1/σ_w)/c2`` more
  to escape it: the horizon of ``(σ_w, σ_w)`` times ``max(1, log(1/σ_w))``;
- a family outside Assumption 4.1 (:attr:`mesadyn.process.Family.assumption_41` is False, e.g.
  ``x_1 = 1_d``) without the diagonal mask leaves the diagonal structure along slower
  off-diagonal directions (Proposition 4.2): :data:`OFF_DIAGONAL_FACTOR` times longer.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..process import Family
    from ..reduced import ReducedSystem

__all__ = ["OFF_DIAGONAL_FACTOR", "full_flow_horizon", "reduced_horizon"]

#: How much longer a flow takes off the diagonal manifold (Proposition 4.2's families).
OFF_DIAGONAL_FACTOR = 20.0


def reduced_horizon(system: ReducedSystem, a0: float, b0: float) -> float:
    """:meth:`ReducedSystem.horizon <mesadyn.reduced.ReducedSystem.horizon>` from ``(a0, b0)``,
    finite or refused: a start so large or so small that its settling time overflows or
    underflows (``a0² = 0`` in floating point, or ``c1 a0⁴`` beyond it) has no automatic
    horizon.

    ## Raises
    `MesadynError`: one line naming the start and the way out (give ``t_end``).
    """
    import warnings

    import numpy as np

    from ..errors import MesadynError

    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            horizon = float(system.horizon(a0, b0))
    except (ArithmeticError, ValueError):
        horizon = math.nan
    if not (math.isfinite(horizon) and horizon > 0):
        raise MesadynError(
            f"the automatic horizon from (a0, b0) = ({a0:g}, {b0:g}) cannot be computed: the "
            "reduced flow's settling time overflows or underflows at so extreme a start; give "
            "t_end (--t-end)")
    return horizon


def full_flow_horizon(system: ReducedSystem, family: Family, *, gaussian: bool, a0: float,
                      b0: float, sigma_w: float, masked: bool) -> float:
    """The τ horizon of a full flow from Assumption 3.1's ``(a0, b0)`` (``gaussian=False``) or
    from a Gaussian start of scale ``sigma_w``; ``masked``: only the diagonals of ``W^KQ_32``
    and ``W^PV_12`` evolve (Theorem 4.3's clipping).

    ## Raises
    `MesadynError`: a start with no finite horizon (:func:`reduced_horizon`)."""
    if gaussian:
        horizon = reduced_horizon(system, sigma_w, sigma_w) * max(1.0, math.log(1 / sigma_w))
    else:
        horizon = reduced_horizon(system, a0, b0)
    if not (family.assumption_41 or masked):
        horizon *= OFF_DIAGONAL_FACTOR
    return horizon
