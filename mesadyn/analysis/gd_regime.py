"""A GD run as an orbit of the map ``G_η`` (:mod:`mesadyn.analysis.gd_map`): its trace and its
regime.

:func:`descend` iterates ``θ ↦ θ − η P∇L(θ)`` and records, per step, the loss, ab (the
mean of the per-coordinate products ``diag(W^KQ_32) ⊙ diag(W^PV_12)``), the mean of
``a_i² − b_i²``, the full invariant ``I = ‖A‖² − ‖P‖²`` with its exact second-order
prediction (:func:`~mesadyn.analysis.gd_map.invariant_step`, summed), the mass off the
diagonal structure, and the sharpness ``λ_max(∇²L)`` with ``η·λ_max``.  :func:`classify`
names the regime from the trace:

- ``divergent`` — the loss left every bound (``blowup × max(L(θ_0), L(0))``) or θ became
  non-finite; the step is recorded;
- ``periodic`` — the last iterates repeat with a period ``2 <= p <= 8``, to within
  :data:`PERIOD_RTOL` and a :data:`PERIOD_CONTRAST` of the amplitude (the last step), which
  is at least :data:`PERIOD_AMPLITUDE` relative;
- ``edge_of_stability`` — unsettled, with ``η·λ_max`` hovering at 2 (within
  :data:`EOS_BAND`) over the last quarter of the run (Cohen et al. 2021);
- ``chaotic`` — unsettled, bounded, not periodic, with a positive largest Lyapunov exponent
  along the last quarter;
- ``catapult`` — the loss rose above its start, then the run settled at a point flatter than
  ``2/η`` (Lewkowycz et al. 2020);
- ``monotone`` — the loss never rose and the run settled;
- ``converging`` — not settled within the steps, but the loss never rose and the last
  ``η·λ_max`` is below 2: monotone convergence still under way;
- ``unsettled`` — none of these within the steps given.

A run has *settled* when its last step moved θ by less than :data:`SETTLE_RTOL` relative.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..errors import check_int, check_positive
from ..record import Record, hidden

if TYPE_CHECKING:
    from ..field import Field
    from ..model import MaskLike
    from ..progress import ProgressCallback
    from .gd_orbits import GDMap

__all__ = ["EOS_BAND", "PERIOD_AMPLITUDE", "PERIOD_CONTRAST", "SETTLE_RTOL", "GDTrace", "Regime",
           "classify", "descend"]

FloatArray = npt.NDArray[np.float64]
#: A run has settled when its last step is below this relative to ``max(1, ‖θ‖)``.
SETTLE_RTOL = 1e-9
#: Edge of stability: ``η·λ_max`` within this band around 2 on average over the last quarter.
EOS_BAND = (1.8, 2.2)
#: Default divergence threshold, a multiple of ``max(L(θ_0), L(0))`` (as ``mesadyn.train``).
BLOWUP = 1e6
#: Periods tried by the periodicity test, and its relative tolerance.
PERIODS = range(2, 9)
PERIOD_RTOL = 1e-8
#: Smallest last step (relative to ``max(1, ‖θ‖)``) of a run called periodic.
PERIOD_AMPLITUDE = 1e-6
#: A cycle repeats to within this fraction of its amplitude (a decaying oscillation does not).
PERIOD_CONTRAST = 1e-3


class Regime(enum.StrEnum):
    """The regime of a GD run (module docstring)."""

    MONOTONE = "monotone"
    CATAPULT = "catapult"
    EDGE_OF_STABILITY = "edge_of_stability"
    PERIODIC = "periodic"
    CHAOTIC = "chaotic"
    DIVERGENT = "divergent"
    CONVERGING = "converging"
    UNSETTLED = "unsettled"


@dataclass(frozen=True)
class GDTrace(Record):
    """One GD run (rows ``k = 0..K``, the iterates θ_k): the per-step arrays and the step at
    which a divergent run left every bound (``None`` otherwise)."""

    eta: float
    step: FloatArray = hidden()
    theta: FloatArray = hidden()
    loss: FloatArray = hidden()
    ab: FloatArray = hidden()
    delta_ab: FloatArray = hidden()
    invariant: FloatArray = hidden()
    invariant_predicted: FloatArray = hidden()
    offdiag: FloatArray = hidden()
    sharpness: FloatArray = hidden()
    diverged_step: int | None = None
    limit: float = math.nan

    @property
    def eta_sharpness(self) -> FloatArray:
        """``η·λ_max(∇²L)`` per step (NaN where the sharpness was not evaluated)."""
        out: FloatArray = self.eta * self.sharpness
        return out

    @property
    def invariant_drift_error(self) -> float:
        """``max_k |I_k − I_0 − Σ_{j<k} η²(‖∇_A L‖² − ‖∇_P L‖²)_j|`` relative to the largest
        drift: how exactly the second-order prediction accounts for GD's drift."""
        drift = self.invariant - self.invariant[0]
        ok = np.isfinite(drift) & np.isfinite(self.invariant_predicted)
        if not ok.any():
            return math.nan
        scale = max(float(np.abs(drift[ok]).max()), 1e-300)
        return float(np.abs(drift[ok] - self.invariant_predicted[ok]).max()) / scale

    def to_dataset(self) -> object:
        """The per-step arrays over ``step`` (an xarray Dataset)."""
        import xarray as xr

        n = len(self.step)
        return xr.Dataset(
            {"theta": (("step", "param"), self.theta), "loss": ("step", self.loss),
             "ab": ("step", self.ab), "delta_ab": ("step", self.delta_ab),
             "invariant": ("step", self.invariant),
             "invariant_predicted": ("step", self.invariant_predicted),
             "offdiag": ("step", self.offdiag), "sharpness": ("step", self.sharpness),
             "eta_sharpness": ("step", self.eta_sharpness)},
            coords={"step": np.arange(n), "param": np.arange(self.theta.shape[1])})


def descend(field: Field, theta0: npt.ArrayLike, eta: float, steps: int, *,
            mask: MaskLike = None, sharpness_every: int = 1, blowup: float = BLOWUP,
            progress: ProgressCallback | None = None) -> GDTrace:
    """GD ``θ_{k+1} = θ_k − η P∇L(θ_k)`` for ``steps`` steps from ``theta0``, recording the
    trace (module docstring); the sharpness every ``sharpness_every`` steps (0: never).  Stops
    at the first step whose loss is not finite or exceeds ``blowup × max(L(θ_0), L(0))``."""
    import torch

    from ..model import diagonal_entries, diagonal_mask, free_mask, invariant
    from .gd_map import invariant_change, sharpness

    eta = check_positive("eta", eta)
    steps = check_int("steps", steps, 0)
    every = check_int("sharpness_every", sharpness_every, 0)
    blowup = check_positive("blowup", blowup)
    th = np.array(field.check_theta(torch.as_tensor(np.asarray(theta0, np.float64))).numpy())
    free = np.flatnonzero(free_mask(mask, field.d))
    off = ~diagonal_mask(field.d) & free_mask(None, field.d)
    zero_loss = float(field.loss(torch.zeros(field.n_params, dtype=torch.float64)))
    rows: dict[str, list[float]] = {k: [] for k in (
        "loss", "ab", "delta_ab", "invariant", "predicted", "offdiag", "sharpness")}
    thetas: list[FloatArray] = []
    predicted, limit, diverged = 0.0, math.nan, None
    for k in range(steps + 1):
        L_t, g_t = field.loss_and_grad(torch.from_numpy(th.copy()))
        L = float(L_t)
        g = g_t.cpu().numpy()
        if k == 0:
            limit = blowup * max(L, zero_loss)
        a, b = diagonal_entries(th)
        thetas.append(th.copy())
        rows["loss"].append(L)
        rows["ab"].append(float(np.mean(a * b)))
        rows["delta_ab"].append(float(np.mean(a * a - b * b)))
        rows["invariant"].append(float(invariant(th)))
        rows["predicted"].append(predicted)
        rows["offdiag"].append(float(np.linalg.norm(th[off])))
        due = every > 0 and (k % every == 0 or k == steps) and math.isfinite(L)
        rows["sharpness"].append(sharpness(field, th, eta, mask).lambda_max if due else math.nan)
        if not math.isfinite(L) or L > limit:
            diverged = k
            break
        if k == steps:
            break
        predicted += invariant_change(g, eta, field.d, free)
        th = th.copy()
        th[free] -= eta * g[free]
        if not np.isfinite(th).all():
            diverged = k + 1
            break
        if progress is not None:
            progress(float(k + 1))
    return GDTrace(eta=eta, step=np.arange(len(thetas), dtype=np.float64),
                   theta=np.stack(thetas), loss=np.asarray(rows["loss"]),
                   ab=np.asarray(rows["ab"]), delta_ab=np.asarray(rows["delta_ab"]),
                   invariant=np.asarray(rows["invariant"]),
                   invariant_predicted=np.asarray(rows["predicted"]),
                   offdiag=np.asarray(rows["offdiag"]), sharpness=np.asarray(rows["sharpness"]),
                   diverged_step=diverged, limit=limit)


def settled(trace: GDTrace) -> bool:
    """Whether the run's last step moved θ by less than :data:`SETTLE_RTOL` relative."""
    if trace.theta.shape[0] < 2:
        return False
    last, prev = trace.theta[-1], trace.theta[-2]
    return bool(np.linalg.norm(last - prev)
                <= SETTLE_RTOL * max(1.0, float(np.linalg.norm(last))))


def period(trace: GDTrace) -> int | None:
    """The smallest period ``p`` in :data:`PERIODS` with which the last iterates repeat
    (``‖θ_n − θ_{n−p}‖ <= min(PERIOD_RTOL · max(1, ‖θ_n‖), PERIOD_CONTRAST · s)``, checked
    over the last two periods, ``s = ‖θ_n − θ_{n−1}‖``) while the last step is a real
    oscillation (``s >= PERIOD_AMPLITUDE · max(1, ‖θ_n‖)``): a run still converging, or an
    oscillation still decaying, repeats to within the tolerance too and is not a cycle.
    ``None`` if none."""
    th = trace.theta
    if th.shape[0] < 2:
        return None
    norm = max(1.0, float(np.linalg.norm(th[-1])))
    amplitude = float(np.linalg.norm(th[-1] - th[-2]))
    if amplitude < PERIOD_AMPLITUDE * norm:
        return None
    scale = min(PERIOD_RTOL * norm, PERIOD_CONTRAST * amplitude)
    for p in PERIODS:
        if th.shape[0] < 2 * p + 1:
            return None
        if all(np.linalg.norm(th[-1 - j] - th[-1 - j - p]) <= scale for j in range(p)):
            return p
    return None


def classify(trace: GDTrace, field: Field | None = None,
             mask: MaskLike = None, *, gd: GDMap | None = None) -> tuple[Regime, str]:
    """The :class:`Regime` of ``trace`` with a one-line reason (module docstring).  ``field``
    (or, for a trace of another map such as the reduced one, ``gd``:
    :class:`~mesadyn.analysis.gd_orbits.ReducedMap`) is needed only for the chaos test (the
    Lyapunov exponent along the last quarter)."""
    if trace.diverged_step is not None:
        return Regime.DIVERGENT, (f"the loss left every bound at step {trace.diverged_step} "
                                  f"(limit {trace.limit:.3g})")
    L = trace.loss
    rose = bool(np.any(np.diff(L) > 1e-12 * np.maximum(np.abs(L[:-1]), 1e-300)))
    if settled(trace):
        if not rose:
            return Regime.MONOTONE, "the loss never rose and the run settled"
        last = trace.eta_sharpness[np.isfinite(trace.eta_sharpness)]
        flat = last.size > 0 and last[-1] < 2.0
        above = float(L.max()) > float(L[0])
        if above and flat:
            return Regime.CATAPULT, (f"the loss rose to {float(L.max()):.4g} (from "
                                     f"{float(L[0]):.4g}), then the run settled where "
                                     f"η·λ_max = {last[-1]:.3g} < 2")
        return Regime.MONOTONE, "the run settled after transient rises of the loss"
    p = period(trace)
    if p is not None:
        return Regime.PERIODIC, f"the last iterates repeat with period {p}"
    quarter = max(1, len(L) // 4)
    es = trace.eta_sharpness[-quarter:]
    es = es[np.isfinite(es)]
    if es.size and EOS_BAND[0] <= float(es.mean()) <= EOS_BAND[1] and rose:
        return Regime.EDGE_OF_STABILITY, (f"η·λ_max = {float(es.mean()):.3f} on average over "
                                          "the last quarter, the loss non-monotone")
    if (field is not None or gd is not None) and rose:
        from .gd_map import lyapunov_exponent
        from .gd_orbits import map_lyapunov

        orbit = trace.theta[-quarter - 1:]
        if orbit.shape[0] > 8:
            lam = (lyapunov_exponent(field, orbit, trace.eta, mask, burn_in=orbit.shape[0] // 4)
                   if field is not None else
                   map_lyapunov(gd, orbit, trace.eta, burn_in=orbit.shape[0] // 4)
                   if gd is not None else math.nan)
            if lam > 0:
                return Regime.CHAOTIC, (f"bounded, not periodic, with Lyapunov exponent "
                                        f"{lam:.3g} > 0 over the last quarter")
    sharp = trace.eta_sharpness[np.isfinite(trace.eta_sharpness)]
    if not rose and sharp.size and float(sharp[-1]) < 2.0:
        step = float(np.linalg.norm(trace.theta[-1] - trace.theta[-2]))
        return Regime.CONVERGING, (f"the loss never rose and η·λ_max = {float(sharp[-1]):.3g} "
                                   f"< 2, still converging (last step {step:.2e})")
    return Regime.UNSETTLED, "not settled, periodic, at the edge of stability or chaotic"


def reduced_descend(a0: float, b0: float, eta: float, c1: float, c2: float, steps: int, *,
                    blowup: float = BLOWUP) -> GDTrace:
    """GD on the reduced loss ``ℓ̃ = (c2 − c1 ab)²/(2c1)`` (Lemma 5.3) by its closed-form map
    (:func:`~mesadyn.analysis.gd_map.reduced_step`), as a :class:`GDTrace` whose θ is
    ``(a, b)``: the invariant is ``a² − b²`` itself, predicted exactly by
    :func:`~mesadyn.analysis.gd_map.reduced_invariant_step`, and the sharpness is the reduced
    Hessian's top eigenvalue."""
    from .gd_map import reduced_hessian, reduced_invariant_step, reduced_step

    eta = check_positive("eta", eta)
    steps = check_int("steps", steps, 0)
    a, b = float(a0), float(b0)
    zero_loss = c2 * c2 / (2 * c1)
    r0 = c2 - c1 * a * b
    limit = blowup * max(r0 * r0 / (2 * c1), zero_loss)
    rows: dict[str, list[float]] = {k: [] for k in ("a", "b", "loss", "predicted", "sharp")}
    predicted, diverged = 0.0, None
    for k in range(steps + 1):
        r = c2 - c1 * a * b
        L = r * r / (2 * c1)  # a product overflows to inf where ** would raise
        rows["a"].append(a)
        rows["b"].append(b)
        rows["loss"].append(L)
        rows["predicted"].append(predicted)
        rows["sharp"].append(float(np.linalg.eigvalsh(reduced_hessian(a, b, c1, c2))[-1])
                             if math.isfinite(L) else math.nan)
        if not math.isfinite(L) or L > limit:
            diverged = k
            break
        if k == steps:
            break
        predicted += float(reduced_invariant_step(a, b, eta, c1, c2))
        a_new, b_new = reduced_step(a, b, eta, c1, c2)
        a, b = float(a_new), float(b_new)
        if not (math.isfinite(a) and math.isfinite(b)):
            diverged = k + 1
            break
    A, B = np.asarray(rows["a"]), np.asarray(rows["b"])
    delta = A * A - B * B
    return GDTrace(eta=eta, step=np.arange(len(A), dtype=np.float64),
                   theta=np.stack([A, B], axis=1), loss=np.asarray(rows["loss"]), ab=A * B,
                   delta_ab=delta, invariant=delta,
                   invariant_predicted=np.asarray(rows["predicted"]),
                   offdiag=np.zeros(len(A)), sharpness=np.asarray(rows["sharp"]),
                   diverged_step=diverged, limit=limit)
