"""A sampled full flow on K independent sample sets: its end point with error bars
(``mesadyn integrate --repeats K``; the :class:`RepeatedResult` of
:func:`mesadyn.workflows.integrate.run`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import Record, hidden
from ._cost import check_cost, sampled_flow_seconds
from ._run import RunResult

if TYPE_CHECKING:
    import torch

    from .integrate import Config, FullResult

__all__ = ["QUANTITIES", "Interval", "RepeatedResult", "end_point", "run_repeated"]

#: The end-point quantities of :class:`RepeatedResult`, in their order.
QUANTITIES = ("ab", "loss", "grad_norm", "off_diagonal_norm", "hessian_min", "hessian_max")


@dataclass(frozen=True)
class Interval(Record):
    """An end-point quantity over K sample sets: the mean, its standard error ``SD/√K`` and the
    95% interval ``mean ± t_{0.975, K−1} SE`` (Student's t), with the exact flow's value."""

    name: str = hidden("")
    values: tuple[float, ...] = hidden(())
    mean: float = math.nan
    se: float = math.nan
    lo: float = hidden(math.nan)
    hi: float = hidden(math.nan)
    exact: float | None = None

    DERIVED = ("ci95", "exact_in_ci95", "bias_over_se", "value_list")

    @classmethod
    def of(cls, name: str, values: list[float], exact: float | None) -> Interval:
        """The interval of ``values`` (K >= 2 finite numbers, else the statistics are nan)."""
        import numpy as np
        from scipy.stats import t as student

        x = np.asarray(values, dtype=np.float64)
        k = len(x)
        if k < 2 or not np.isfinite(x).all():
            nan = math.nan
            return cls(name, tuple(values), float(np.mean(x)) if k else nan, nan, nan, nan,
                       exact)
        mean = float(x.mean())
        se = float(x.std(ddof=1) / math.sqrt(k))
        half = float(student.ppf(0.975, k - 1)) * se
        return cls(name, tuple(float(v) for v in x), mean, se, mean - half, mean + half, exact)

    @property
    def ci95(self) -> list[float]:
        """The 95% interval ``[lo, hi]``."""
        return [self.lo, self.hi]

    @property
    def covers_exact(self) -> bool | None:
        """Whether the 95% interval contains the exact value (None without one)."""
        if self.exact is None or not math.isfinite(self.se):
            return None
        return self.lo <= self.exact <= self.hi

    @property
    def exact_in_ci95(self) -> bool | None:
        return self.covers_exact

    @property
    def bias_over_se(self) -> float | None:
        """``(mean − exact) / SE`` (None without an exact value or a positive SE)."""
        if self.exact is None or not self.se > 0:
            return None
        return (self.mean - self.exact) / self.se

    @property
    def value_list(self) -> list[float]:
        return list(self.values)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["values"] = out.pop("value_list")
        return out


def end_point(res: FullResult) -> dict[str, float]:
    """The end-point quantities of one full flow (:data:`QUANTITIES`): mean ab over the
    coordinates, the loss and max|∇L| there, the distance ``‖θ − θ_diag‖₂`` from the diagonal
    structure (Assumption 3.1's entries), and the extreme eigenvalues of ``∇²L`` over the free
    coordinates (nan where the flow's end point has no spectrum)."""
    import numpy as np

    from ..model import Mask, free_mask

    theta = res.flow.final if res.flow is not None else np.full(18 * res.d * res.d, np.nan)
    off = ~free_mask(Mask.diagonal, res.d)
    eig = None if res.flow is None else res.flow.hessian_eigenvalues
    return {"ab": res.ab_mean, "loss": res.loss, "grad_norm": res.grad_norm,
            "off_diagonal_norm": float(np.linalg.norm(theta[off])),
            "hessian_min": math.nan if eig is None or not len(eig) else float(eig.min()),
            "hessian_max": math.nan if eig is None or not len(eig) else float(eig.max())}


@dataclass(frozen=True)
class RepeatedResult(RunResult):
    """A sampled flow on K independent sample sets (seeds ``seed .. seed+K−1``, the same start):
    each end-point quantity with a standard error and a 95% interval, against the exact flow
    from the same start (``exact``; None when the family has no exact field).

    The sampled end point is the fixed point of ``L̂``, a smooth function of the empirical
    moments, so it is biased by O(1/N) and spread by O(1/√N) (``docs/sampled-fields.md``): the
    interval is for the mean of the sampled end point, and covers the exact value only while the
    bias is small against ``SE ≈ SD/√K``.  ``status`` combines the K flows' outcomes
    (:meth:`~mesadyn.outcome.Outcome.combine`).
    """

    DERIVED = ("repeats", "statuses", "exact_end", "t_final", "nfev")

    family: str
    d: int
    T: int
    field: str
    draws: int
    seeds: tuple[int, ...]
    quantities: dict[str, Interval]
    runs: tuple[FullResult, ...] = hidden(())
    exact: FullResult | None = hidden()
    wall_s: float = 0.0

    @property
    def repeats(self) -> int:
        return len(self.seeds)

    @property
    def statuses(self) -> tuple[Outcome, ...]:
        return tuple(r.status for r in self.runs)

    @property
    def exact_end(self) -> dict[str, Any] | None:
        """The exact flow's outcome and end-point quantities (None without an exact field)."""
        if self.exact is None:
            return None
        return {"status": self.exact.status, **end_point(self.exact)}

    @property
    def t_final(self) -> list[float]:
        return [r.t_final for r in self.runs]

    @property
    def nfev(self) -> list[int]:
        return [r.stats.nfev for r in self.runs]

    def to_dict(self) -> dict[str, Any]:
        """The ``mesadyn integrate --repeats K --json`` object."""
        out = super().to_dict()
        out["exact"] = out.pop("exact_end")
        return out


RunFull = Callable[..., "FullResult"]


def run_repeated(config: Config, run_full: RunFull, progress: ProgressCallback | None = None,
                 *, build_progress: ProgressCallback | None = None) -> RepeatedResult:
    """The sampled flow of ``config`` on ``config.repeats`` sample sets, one after the other
    (seeds ``seed + k``; the start θ0 stays the one ``seed`` gives), and the exact flow from the
    same start (``run_full`` is :func:`mesadyn.workflows.integrate.run_full`); see
    :class:`RepeatedResult`.

    ## Raises
    `MesadynError`: as ``run_full``; the cost guard counts all K flows.
    """
    import time

    start = time.perf_counter()
    K = config.repeats
    per = sampled_flow_seconds(config.d, config.T, config.draws,
                               single_coordinate=config.family().single_coordinate)
    check_cost(K * per, f"{K} {config.field} full flows", config.force)
    one = dataclasses.replace(config, repeats=1, force=True)
    theta0 = _theta0(config)  # the start of seed `config.seed`, whatever the draws' seed
    runs = [run_full(dataclasses.replace(one, seed=config.seed + k), progress,
                     build_progress=build_progress, theta0=theta0) for k in range(K)]
    exact: FullResult | None
    try:
        exact = run_full(dataclasses.replace(one, field="exact"), theta0=theta0)
    except MesadynError:  # no exact moments for this process
        exact = None
    ends = [end_point(r) for r in runs]
    ref = None if exact is None else end_point(exact)
    quantities = {q: Interval.of(q, [e[q] for e in ends], None if ref is None else ref[q])
                  for q in QUANTITIES}
    status = Outcome.combine(r.status for r in runs)
    bad = [f"seed {s}: {r.status} ({r.message})"
           for s, r in zip((config.seed + k for k in range(K)), runs, strict=True)
           if r.status is not Outcome.CONVERGED]
    message = f"{K - len(bad)} of {K} flows converged" + ("; " + "; ".join(bad) if bad else "")
    return RepeatedResult(
        family=runs[0].family, d=runs[0].d, T=config.T, field=str(config.field),
        draws=config.draws, seeds=tuple(config.seed + k for k in range(K)),
        quantities=quantities, runs=tuple(runs), exact=exact,
        wall_s=time.perf_counter() - start, status=status, message=message)


def _theta0(config: Config) -> torch.Tensor:
    from ._common import Init, initial_theta

    return initial_theta(Init(config.init), config.d, config.a0, config.b0, config.sigma_w,
                         config.seed)
