"""The run options of one integration, validated once (a frozen value, not a long tuple)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import MesadynError, check_int, check_positive

#: The accepted-step limit when none is given.
DEFAULT_MAX_STEPS = 100_000


@dataclass(frozen=True)
class FlowOptions:
    """What every backend needs to know about a run, checked on construction.

    # Arguments
    - `t_end`: the final flow time τ (> 0).
    - `rtol`, `atol`: the solver's relative and absolute tolerances (> 0).
    - `max_steps`: the most accepted steps (>= 1).
    - `steady_tol`: stop once ``max|∇L| < steady_tol`` (``0``: never).
    - `t_eval`: save at these times (strictly increasing, within ``[0, t_end]``), else at every
      accepted step thinned to `n_save`.
    - `n_save`: the most saved points when `t_eval` is not given (>= 2).

    # Raises
    `MesadynError` naming the first bad value.
    """

    t_end: float = 1.0
    rtol: float = 1e-8
    atol: float = 1e-10
    max_steps: int = DEFAULT_MAX_STEPS
    steady_tol: float = 0.0
    t_eval: tuple[float, ...] | None = None
    n_save: int = 200

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "t_end", check_positive("t_end", self.t_end))
        set_(self, "rtol", check_positive("rtol", self.rtol))
        set_(self, "atol", check_positive("atol", self.atol))
        set_(self, "max_steps", check_int("max_steps", self.max_steps, 1))
        steady = self.steady_tol
        try:
            steady = float(steady)
        except (TypeError, ValueError):
            raise MesadynError(f"steady_tol must be a number >= 0, got {self.steady_tol!r}") \
                from None
        if not math.isfinite(steady) or steady < 0:
            raise MesadynError(f"steady_tol must be >= 0, got steady_tol={self.steady_tol!r}")
        set_(self, "steady_tol", steady)
        set_(self, "n_save", check_int("n_save", self.n_save, 2))
        if self.t_eval is not None:
            try:
                grid = np.asarray(self.t_eval, dtype=np.float64).ravel()
            except (TypeError, ValueError):
                raise MesadynError(f"t_eval must be numbers, got {self.t_eval!r}") from None
            if grid.size == 0 or not np.isfinite(grid).all() or grid[0] < 0 \
                    or np.any(np.diff(grid) <= 0) or grid[-1] > self.t_end:
                raise MesadynError(
                    "t_eval must be strictly increasing, finite, within [0, t_end], got "
                    f"{grid[:3].tolist()}…")
            set_(self, "t_eval", tuple(grid.tolist()))

    @property
    def t_eval_array(self) -> npt.NDArray[np.float64] | None:
        """`t_eval` as a float64 array (``None`` if not given)."""
        return None if self.t_eval is None else np.asarray(self.t_eval, dtype=np.float64)
