"""Where gradient descent lands on the minimiser set, against η and the initialisation.

The gradient flow conserves ``Δ = a² − b²`` (and ``‖A‖² − ‖P‖²``), so its limit on the
hyperbola ``ab = s* = c2/c1`` is fixed by the start and independent of any step size:
``a∞² = (Δ0 + √(Δ0² + 4s*²))/2``, ``b∞ = s*/a∞`` (for ``a0 + b0 > 0``; the flow keeps the
sign of ``a + b``).  GD does not conserve it: one reduced step maps ``Δ ↦ Δ(1 − η²r²)``
exactly, ``r = c2 − c1 ab``, so

    Δ_GD = Δ0 Π_k (1 − η² r_k²),

which shrinks ``|Δ|`` at every step with ``|η r_k| < 1``: large steps balance ``|a|`` and
``|b|`` (Wang, Chen, Zhao & Tao 2022, "Large learning rate tames homogeneity").  The
first-order modified flow ``dθ/dτ = −∇L − (η/2)∇²L∇L`` drifts by ``dΔ/dτ = −η r² Δ``
(exactly, on the reduced loss: ``(a∂_a − b∂_b)`` kills every function of ``ab`` and maps
``a² + b²`` to ``2Δ``), so it predicts ``Δ0 exp(−η∫r² dτ)``, GD's product to first order.
A limit must also be stable: ``η c1 (a∞² + b∞²) <= 2`` bounds the imbalance,

    |Δ∞| <= √((2/(η c1))² − 4 s*²),

which binds when GD reaches the minimiser set at the edge of stability.  None of this moves
``ab``: on the diagonal plane every limit has ``ab = c2/c1``, so the learned predictor
(Corollary 4.1's step ``ab/(t−1)``, Eq. 3) is the same.  In the full space (a Gaussian
initialisation) the limit point is a point of a larger minimiser set, and
:func:`field_landing` measures what changes with η: ab per coordinate, the distance from the
diagonal structure, the in-context ratio (Proposition 4.1) and Corollary 4.1's error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..errors import MesadynError, check_int, check_positive
from ..record import Record

if TYPE_CHECKING:
    from ..field import Field
    from ..model import MaskLike
    from ..process import Family

__all__ = ["FieldLanding", "LimitSummary", "ReducedLanding", "field_landing",
           "flow_limit", "limit_summary", "reduced_landing", "stability_bound"]

FloatArray = npt.NDArray[np.float64]
#: A GD run has landed when its last step is below this relative to ``max(1, ‖θ‖)``.
LAND_RTOL = 1e-13


def flow_limit(a0: float, b0: float, c1: float, c2: float) -> tuple[float, float]:
    """The gradient flow's limit on the hyperbola from ``(a0, b0)`` (module docstring)."""
    s = c2 / c1
    delta = a0 * a0 - b0 * b0
    sign = 1.0 if a0 + b0 >= 0 else -1.0
    a = sign * math.sqrt(0.5 * (delta + math.sqrt(delta * delta + 4 * s * s)))
    return a, s / a


def stability_bound(eta: float, c1: float, c2: float) -> float:
    """The largest ``|a² − b²|`` of a point of the hyperbola that GD at ``eta`` can converge
    to (its diagonal mode stable): ``√((2/(ηc1))² − 4(c2/c1)²)``; NaN when none is."""
    x = (2.0 / (eta * c1)) ** 2 - 4 * (c2 / c1) ** 2
    return math.sqrt(x) if x >= 0 else math.nan


@dataclass(frozen=True)
class ReducedLanding(Record):
    """The reduced model's landing point from ``(a0, b0)`` for each η: GD's limit
    ``(a, b)`` with ``Δ = a² − b²`` and ``|a| − |b|`` (NaN where GD did not converge within
    the steps: a cycle, chaos or divergence), the modified flow's ``Δ``, the stability
    bound on ``|Δ|``; the flow's limit and ``Δ0`` (η-independent); ``ab`` at each limit."""

    a0: float
    b0: float
    delta0: float
    flow_a: float
    flow_b: float
    eta: list[float]
    converged: list[bool]
    steps: list[int]
    a: list[float]
    b: list[float]
    ab: list[float]
    delta: list[float]
    abs_gap: list[float]
    modified_delta: list[float]
    bound: list[float]


def reduced_landing(a0: float, b0: float, etas: npt.ArrayLike, c1: float, c2: float, *,
                    max_steps: int = 1_000_000, modified: bool = True) -> ReducedLanding:
    """GD on the reduced loss from ``(a0, b0)`` at every η until it lands (its last step
    below :data:`LAND_RTOL`), vectorised over η; with ``modified``, the modified flow's limit
    for each η (scipy ``DOP853`` on the closed-form right-hand side)."""
    e = np.asarray(etas, dtype=np.float64).ravel()
    if e.size == 0:
        raise MesadynError("the η range is empty")
    if not (np.isfinite(e).all() and (e > 0).all()):
        raise MesadynError("every η must be finite and > 0")
    max_steps = check_int("max_steps", max_steps, 1)
    a, b = np.full(e.size, float(a0)), np.full(e.size, float(b0))
    done = np.zeros(e.size, dtype=bool)
    bad = np.zeros(e.size, dtype=bool)
    nsteps = np.zeros(e.size, dtype=np.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(1, max_steps + 1):
            live = ~(done | bad)
            if not live.any():
                break
            r = c2 - c1 * a * b
            da, db = e * b * r, e * a * r
            a = np.where(live, a + da, a)
            b = np.where(live, b + db, b)
            nsteps[live] = k
            bad |= live & ~(np.isfinite(a) & np.isfinite(b) & (np.abs(a * b) < 1e150))
            moved = np.hypot(da, db)
            done |= live & ~bad & (moved <= LAND_RTOL * np.maximum(1.0, np.hypot(a, b)))
    fa, fb = flow_limit(a0, b0, c1, c2)
    nan = float("nan")
    A = [float(x) if ok else nan for x, ok in zip(a, done, strict=True)]
    B = [float(x) if ok else nan for x, ok in zip(b, done, strict=True)]
    mod = [_modified_delta(a0, b0, float(x), c1, c2) if modified else nan for x in e]
    return ReducedLanding(
        a0=float(a0), b0=float(b0), delta0=float(a0 * a0 - b0 * b0), flow_a=fa, flow_b=fb,
        eta=[float(x) for x in e], converged=[bool(x) for x in done],
        steps=[int(x) for x in nsteps], a=A, b=B, ab=[x * y for x, y in zip(A, B, strict=True)],
        delta=[x * x - y * y for x, y in zip(A, B, strict=True)],
        abs_gap=[abs(x) - abs(y) for x, y in zip(A, B, strict=True)], modified_delta=mod,
        bound=[stability_bound(float(x), c1, c2) for x in e])


def _modified_delta(a0: float, b0: float, eta: float, c1: float, c2: float) -> float:
    """``Δ`` at the end of the reduced modified flow ``−∇ℓ̃ − (η/2)∇²ℓ̃∇ℓ̃`` from ``(a0, b0)``."""
    from scipy.integrate import solve_ivp

    from .gd_map import reduced_hessian

    def rhs(_t: float, y: FloatArray) -> FloatArray:
        r = c2 - c1 * y[0] * y[1]
        g = np.array([-y[1] * r, -y[0] * r])
        out: FloatArray = -(g + 0.5 * eta * reduced_hessian(y[0], y[1], c1, c2) @ g)
        return out

    horizon = 200.0 / c2 + math.log(1.0 + (c2 / c1) / max(abs(a0 * b0), 1e-300)) / c2 * 4
    sol = solve_ivp(rhs, (0.0, horizon), [a0, b0], method="DOP853", rtol=1e-12, atol=1e-14)
    if sol.status != 0 or not np.isfinite(sol.y[:, -1]).all():
        return math.nan
    a, b = sol.y[:, -1]
    return float(a * a - b * b)


@dataclass(frozen=True)
class LimitSummary(Record):
    """What a limit point θ is as a predictor: ``ab`` (the mean of the per-coordinate
    products ``diag(W^KQ_32) ⊙ diag(W^PV_12)``) and their spread, ``a² − b²`` of the mean
    diagonals, the invariant ``‖A‖² − ‖P‖²``, the largest entry off Theorem 4.1's structure,
    the loss, the sharpness ``λ_max``, Proposition 4.1's in-context ratio at ``T_te`` with its
    standard error, Corollary 4.1's relative error (the model against one OLS step of size
    ``ab/(t−1)``), and how many coordinates have ``a_i < 0``: a minimiser with signs
    ``(a_i, b_i) = ±(a, b)`` has the loss and the in-context ratio of Theorem 4.1's but
    predicts ``ŷ_t = D Ŵ_t D x_t`` (``D = diag(sign a_i)``, ``Ŵ_t`` Corollary 4.1's step): the
    OLS step in sign-flipped coordinates, whose cross terms Corollary 4.1's check sees."""

    ab: float
    ab_spread: float
    delta_ab: float
    invariant: float
    structure_residual: float
    loss: float
    lambda_max: float
    ratio: float
    ratio_se: float
    mesa_rel_err: float
    negative_coordinates: int


def limit_summary(field: Field, theta: npt.ArrayLike, family: Family, T_te: int, *,
                  test: int = 4000, seed: int = 7, mask: MaskLike = None) -> LimitSummary:
    """The :class:`LimitSummary` of ``theta`` on a fixed test set (``test`` sequences from
    ``seed``; 200 of them for Corollary 4.1's check)."""
    import torch

    from ..model import ab as model_ab
    from ..model import diagonal_entries, invariant
    from ..process import make_generator, sample, sequences
    from .gd_map import sharpness
    from .incontext import ContextBatch
    from .mesa import mesa_check, structure_residual

    th = np.asarray(theta, dtype=np.float64)
    t = torch.from_numpy(th.copy())
    prods = np.asarray(model_ab(th))
    a, b = (float(np.mean(v)) for v in diagonal_entries(th))
    x1, lam = sample(family, test, 2, make_generator(seed, "cpu"), "cpu")
    ratio = ContextBatch(x1, lam, T_te).ratio(t)
    xs = sequences(x1[:200], lam[:200], T_te)
    mesa = mesa_check(t, xs)
    return LimitSummary(
        ab=float(prods.mean()), ab_spread=float(prods.max() - prods.min()),
        delta_ab=a * a - b * b, invariant=float(invariant(th)),
        structure_residual=structure_residual(t), loss=float(field.loss(t)),
        lambda_max=sharpness(field, th, 1.0, mask).lambda_max, ratio=ratio.value,
        ratio_se=ratio.se, mesa_rel_err=mesa.max_rel_err,
        negative_coordinates=int((np.asarray(diagonal_entries(th)[0]) < 0).sum()))


@dataclass(frozen=True)
class FieldLanding(Record):
    """GD's limit from one θ0 for each η (``gd``: a :class:`LimitSummary` per η, ``None``
    where GD did not land within the steps; ``steps`` it took), against the flow's limit
    from the same θ0 (``flow``, η-independent)."""

    eta: list[float]
    steps: list[int]
    landed: list[bool]
    gd: list[LimitSummary | None]
    flow: LimitSummary


def field_landing(field: Field, theta0: npt.ArrayLike, etas: npt.ArrayLike, *,
                  max_steps: int = 50_000, mask: MaskLike = None, T_te: int | None = None,
                  test: int = 4000, seed: int = 7) -> FieldLanding:
    """GD on ``field`` from ``theta0`` at every η (one batched gradient per step) until each
    run lands (:data:`LAND_RTOL`) or ``max_steps``; each limit summarised
    (:func:`limit_summary`, at ``T_te`` = the field's T by default) beside the flow's limit
    (:func:`mesadyn.analysis.fixedpoint.flow_to_fixed_point`)."""
    from ..field.batched import batched_loss_and_grad
    from ..model import free_mask
    from .fixedpoint import flow_to_fixed_point

    e = np.asarray(etas, dtype=np.float64).ravel()
    if e.size == 0:
        raise MesadynError("the η range is empty")
    for x in e:
        check_positive("eta", x)
    max_steps = check_int("max_steps", max_steps, 1)
    idx = np.flatnonzero(free_mask(mask, field.d))
    th = np.repeat(np.asarray(theta0, dtype=np.float64)[None], e.size, axis=0)
    landed = np.zeros(e.size, dtype=bool)
    bad = np.zeros(e.size, dtype=bool)
    nsteps = np.zeros(e.size, dtype=np.int64)
    for k in range(1, max_steps + 1):
        live = ~(landed | bad)
        if not live.any():
            break
        _, g = batched_loss_and_grad(field, th[live])
        step = e[live, None] * g[:, idx]
        sub = th[live]
        sub[:, idx] -= step
        th[live] = sub
        nsteps[live] = k
        moved = np.linalg.norm(step, axis=1)
        fin = np.isfinite(sub).all(axis=1) & (np.abs(sub).max(axis=1) < 1e100)
        li = np.flatnonzero(live)
        bad[li[~fin]] = True
        landed[li[fin & (moved <= LAND_RTOL * np.maximum(1.0, np.linalg.norm(sub, axis=1)))]] = True
    T_eval = field.T if T_te is None else check_int("T_te", T_te, 2)
    gd = [limit_summary(field, th[i], field.family, T_eval, test=test, seed=seed, mask=mask)
          if landed[i] else None for i in range(e.size)]
    fp, _ = flow_to_fixed_point(field, np.asarray(theta0, dtype=np.float64), mask=mask)
    flow = limit_summary(field, fp.theta, field.family, T_eval, test=test, seed=seed, mask=mask)
    return FieldLanding(eta=[float(x) for x in e], steps=[int(x) for x in nsteps],
                        landed=[bool(x) for x in landed], gd=gd, flow=flow)
