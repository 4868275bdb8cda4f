"""Many GD runs at once, each classified into its regime (the phase diagrams).

:func:`reduced_regimes` iterates the reduced map of Lemma 5.3 on arrays of starts and step
sizes (numpy, in chunks); :func:`field_regimes` iterates GD on a field for a batch of starts in
one batched call per step (:func:`mesadyn.field.batched.batched_loss_and_grad`).  Neither stores
the trajectories: the statistics :func:`mesadyn.analysis.gd_regime.classify` reads from a trace
are accumulated as the runs go — the first loss and the largest, whether the loss ever rose,
the step at which a run left every bound, the last 17 iterates (settling and periods up to 8),
``η·λ_max`` over the last quarter (at the steps a trace of ``sharpness_every`` would hold) and
the largest Lyapunov exponent along the last quarter (the tangent vector propagated by
``DG = I − η∇²L``, with the same fixed start and burn-in as
:func:`mesadyn.analysis.gd_map.lyapunov_exponent`).  The decision is
:func:`mesadyn.analysis.gd_regime.classify`'s, rule for rule, so a batch and a single run agree.

Hessian-vector products of the field are exact from gradients alone: ``∇L`` is a cubic
polynomial in θ (the loss is quartic), so the fourth-order central difference
``[8(g(θ+hv) − g(θ−hv)) − (g(θ+2hv) − g(θ−2hv))]/(12h)`` has no truncation error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..errors import MesadynError, check_int, check_positive
from ..record import Record, hidden
from .gd_regime import (
    BLOWUP,
    EOS_BAND,
    PERIOD_AMPLITUDE,
    PERIOD_CONTRAST,
    PERIOD_RTOL,
    PERIODS,
    SETTLE_RTOL,
    Regime,
)

if TYPE_CHECKING:
    from ..field import Field
    from ..model import MaskLike
    from ..progress import ProgressCallback

__all__ = ["REGIMES", "RegimeBatch", "field_regimes", "reduced_regimes"]

FloatArray = npt.NDArray[np.float64]
#: The regimes in code order: ``RegimeBatch.code[i]`` indexes this tuple.
REGIMES: tuple[Regime, ...] = tuple(Regime)
_CODE = {r: i for i, r in enumerate(REGIMES)}
_RING = 2 * max(PERIODS) + 1
#: Reduced-map runs per chunk (bounds the memory of the last 17 iterates).
CHUNK = 200_000


@dataclass(frozen=True)
class RegimeBatch(Record):
    """The regimes of N GD runs (``code`` indexes :data:`REGIMES`), their counts, and per run
    (hidden arrays) the end point, the step at which a divergent run left every bound (−1:
    none), the first and last loss, the last ``η·λ_max`` and the Lyapunov exponent (NaN where
    not computed)."""

    steps: int
    runs: int
    counts: dict[str, int]
    code: npt.NDArray[np.int8] = hidden()
    end: FloatArray = hidden()
    diverged_step: npt.NDArray[np.int64] = hidden()
    loss_start: FloatArray = hidden()
    loss_end: FloatArray = hidden()
    eta_lambda_end: FloatArray = hidden()
    lyapunov: FloatArray = hidden()

    def regimes(self) -> list[Regime]:
        """The regime of each run."""
        return [REGIMES[int(c)] for c in self.code]


class _Tracker:
    """What :func:`~mesadyn.analysis.gd_regime.classify` reads from a trace, accumulated."""

    def __init__(self, n: int, dim: int, steps: int, every: int) -> None:
        self.steps, self.every = steps, every
        self.quarter = max(1, (steps + 1) // 4)
        self.burn = (self.quarter + 1) // 4
        self.L0 = np.full(n, np.nan)
        self.Lprev = np.full(n, np.nan)
        self.Lmax = np.full(n, -np.inf)
        self.rose = np.zeros(n, dtype=bool)
        self.limit = np.full(n, np.inf)
        self.div = np.full(n, -1, dtype=np.int64)
        self.ring = np.zeros((_RING, n, dim))
        self.es_sum = np.zeros(n)
        self.es_n = 0
        self.es_last = np.full(n, np.nan)
        self.lyap = np.zeros(n)
        self.lyap_n = 0

    def in_window(self, k: int) -> bool:
        """Whether step k's tangent enters the Lyapunov window (rows K−quarter .. K−1)."""
        return self.steps - self.quarter <= k < self.steps

    def sharp_due(self, k: int) -> bool:
        """Whether step k's sharpness enters the last quarter (as a trace would record it)."""
        return k > self.steps - self.quarter and (k % self.every == 0 or k == self.steps)

    def loss(self, k: int, L: FloatArray, zero_loss: float, blowup: float) -> npt.NDArray[
            np.bool_]:
        """Record step k's losses; returns the runs that diverge now."""
        alive = self.div < 0
        if k == 0:
            self.L0 = L.copy()
            self.limit = blowup * np.maximum(L, zero_loss)
        else:
            up = L - self.Lprev > 1e-12 * np.maximum(np.abs(self.Lprev), 1e-300)
            self.rose |= up & alive & np.isfinite(L)
        with np.errstate(invalid="ignore"):
            self.Lmax = np.where(alive & np.isfinite(L), np.maximum(self.Lmax, L), self.Lmax)
            bad = alive & (~np.isfinite(L) | (L > self.limit))
        self.div[bad] = k
        self.Lprev = np.where(alive, L, self.Lprev)
        return bad

    def theta(self, k: int, th: FloatArray) -> None:
        self.ring[k % _RING] = th

    def sharp(self, es: FloatArray) -> None:
        self.es_sum += es
        self.es_n += 1
        self.es_last = es

    def tangent(self, k: int, norm: FloatArray) -> None:
        if k - (self.steps - self.quarter) >= self.burn:
            with np.errstate(divide="ignore"):
                self.lyap += np.log(norm)
            self.lyap_n += 1

    def classify(self, end: FloatArray) -> tuple[npt.NDArray[np.int8], FloatArray]:
        """The regime codes (``classify``'s rules) and the Lyapunov exponents used."""
        K = self.steps
        n = self.L0.size
        row = [self.ring[(K - j) % _RING] for j in range(min(_RING, K + 1))]
        last = row[0]
        scale = np.maximum(1.0, np.linalg.norm(last, axis=1))
        settled = (np.linalg.norm(last - row[1], axis=1) <= SETTLE_RTOL * scale if K >= 1
                   else np.zeros(n, dtype=bool))
        periodic = np.zeros(n, dtype=bool)
        amp = np.linalg.norm(last - row[1], axis=1) if K >= 1 else np.zeros(n)
        undecided = amp >= PERIOD_AMPLITUDE * scale
        tol = np.minimum(PERIOD_RTOL * scale, PERIOD_CONTRAST * amp)
        for p in PERIODS:
            if K + 1 < 2 * p + 1:
                break
            hit = np.ones(n, dtype=bool)
            for j in range(p):
                hit &= np.linalg.norm(row[j] - row[j + p], axis=1) <= tol
            periodic |= hit & undecided
            undecided &= ~hit
        es_mean = self.es_sum / self.es_n if self.es_n else np.full(n, np.nan)
        eos = (self.es_n > 0) & (es_mean >= EOS_BAND[0]) & (es_mean <= EOS_BAND[1])
        lyap = self.lyap / self.lyap_n if self.lyap_n else np.full(n, np.nan)
        chaos_ok = self.quarter + 1 > 8
        code = np.full(n, _CODE[Regime.UNSETTLED], dtype=np.int8)
        flat = self.es_last < 2.0
        above = self.Lmax > self.L0
        mono = settled & ~self.rose
        cat = settled & self.rose & above & flat
        code[settled & self.rose] = _CODE[Regime.MONOTONE]
        code[cat] = _CODE[Regime.CATAPULT]
        code[mono] = _CODE[Regime.MONOTONE]
        rest = ~settled
        code[rest & periodic] = _CODE[Regime.PERIODIC]
        rest &= ~periodic
        code[rest & eos & self.rose] = _CODE[Regime.EDGE_OF_STABILITY]
        rest &= ~(eos & self.rose)
        if chaos_ok:
            code[rest & self.rose & (lyap > 0)] = _CODE[Regime.CHAOTIC]
            rest &= ~(self.rose & (lyap > 0))
        code[rest & ~self.rose & flat] = _CODE[Regime.CONVERGING]
        code[self.div >= 0] = _CODE[Regime.DIVERGENT]
        return code, lyap


def _batch(tr: _Tracker, code: npt.NDArray[np.int8], lyap: FloatArray, end: FloatArray,
           L_end: FloatArray) -> RegimeBatch:
    counts = {r.value: int((code == i).sum()) for i, r in enumerate(REGIMES) if (code == i).any()}
    return RegimeBatch(steps=tr.steps, runs=int(code.size), counts=counts, code=code, end=end,
                       diverged_step=tr.div, loss_start=tr.L0, loss_end=L_end,
                       eta_lambda_end=tr.es_last, lyapunov=lyap)


def _concat(parts: list[RegimeBatch], steps: int) -> RegimeBatch:
    if len(parts) == 1:
        return parts[0]
    code = np.concatenate([p.code for p in parts])
    counts = {r.value: int((code == i).sum()) for i, r in enumerate(REGIMES) if (code == i).any()}

    def cat(name: str) -> Any:
        return np.concatenate([getattr(p, name) for p in parts])

    return RegimeBatch(steps=steps, runs=int(code.size), counts=counts, code=code,
                       end=cat("end"), diverged_step=cat("diverged_step"),
                       loss_start=cat("loss_start"), loss_end=cat("loss_end"),
                       eta_lambda_end=cat("eta_lambda_end"), lyapunov=cat("lyapunov"))


def reduced_regimes(eta: npt.ArrayLike, a0: npt.ArrayLike, b0: npt.ArrayLike, c1: float,
                    c2: float, steps: int, *, blowup: float = BLOWUP,
                    chunk: int = CHUNK) -> RegimeBatch:
    """The regime of GD on the reduced loss for every ``(η, a0, b0)`` (broadcast together,
    flattened), as :func:`~mesadyn.analysis.gd_regime.classify` would name each
    :func:`~mesadyn.analysis.gd_regime.reduced_descend` trace; ``end`` holds ``(a, b)``.

    ## Raises
    `MesadynError`: a non-positive or non-finite η, or bad ``steps``.
    """
    e, a, b = (np.ravel(v) for v in np.broadcast_arrays(
        np.asarray(eta, np.float64), np.asarray(a0, np.float64), np.asarray(b0, np.float64)))
    if e.size == 0:
        raise MesadynError("no runs: the arrays of η, a0, b0 are empty")
    if not (np.isfinite(e).all() and (e > 0).all()):
        raise MesadynError("every η must be finite and > 0")
    steps = check_int("steps", steps, 1)
    blowup = check_positive("blowup", blowup)
    parts = [_reduced_chunk(e[i:i + chunk], a[i:i + chunk].copy(), b[i:i + chunk].copy(),
                            c1, c2, steps, blowup) for i in range(0, e.size, chunk)]
    return _concat(parts, steps)


def _reduced_chunk(eta: FloatArray, a: FloatArray, b: FloatArray, c1: float, c2: float,
                   steps: int, blowup: float) -> RegimeBatch:
    n = eta.size
    tr = _Tracker(n, 2, steps, 1)
    zero_loss = c2 * c2 / (2 * c1)
    va, vb = np.full(n, 1.0 / math.sqrt(5.0)), np.full(n, 2.0 / math.sqrt(5.0))
    L = np.zeros(n)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(steps + 1):
            r = c2 - c1 * a * b
            L = r * r / (2 * c1)
            bad = tr.loss(k, L, zero_loss, blowup)
            if bad.any():
                a[bad], b[bad] = 0.0, 0.0  # frozen: finite arithmetic from here on
            tr.theta(k, np.stack([a, b], axis=1))
            due_s, due_t = tr.sharp_due(k), tr.in_window(k)
            if due_s or due_t:
                h11, h22, h12 = c1 * b * b, c1 * a * a, 2 * c1 * a * b - c2
                if due_s:
                    tr.sharp(eta * (0.5 * (h11 + h22) + np.sqrt(0.25 * (h11 - h22) ** 2
                                                                 + h12 * h12)))
                if due_t:
                    wa = va - eta * (h11 * va + h12 * vb)
                    wb = vb - eta * (h12 * va + h22 * vb)
                    nrm = np.hypot(wa, wb)
                    tr.tangent(k, nrm)
                    va, vb = wa / nrm, wb / nrm
            if k == steps:
                break
            a, b = a + eta * b * r, b + eta * a * r
            nonfinite = ~(np.isfinite(a) & np.isfinite(b)) & (tr.div < 0)
            if nonfinite.any():
                tr.div[nonfinite] = k + 1
                a[nonfinite], b[nonfinite] = 0.0, 0.0
    end = np.stack([a, b], axis=1)
    code, lyap = tr.classify(end)
    return _batch(tr, code, lyap, end, L)


def field_regimes(field: Field, thetas0: npt.ArrayLike, eta: float | npt.ArrayLike,
                  steps: int, *, mask: MaskLike = None, sharpness_every: int = 10,
                  blowup: float = BLOWUP, progress: ProgressCallback | None = None
                  ) -> RegimeBatch:
    """The regime of GD on ``field`` from each row of ``thetas0`` (N, 18d²), each with its
    own step size (``eta`` a scalar or (N,)), as :func:`~mesadyn.analysis.gd_regime.classify`
    would name each :func:`~mesadyn.analysis.gd_regime.descend` trace (with this
    ``sharpness_every``); one batched gradient per step (four more per step of the last
    quarter for the tangent vectors, a batched Hessian where the sharpness is due).
    ``end`` holds the last θ of each run (0 for a divergent one)."""
    from ..field.batched import batched_hessian, batched_loss_and_grad
    from ..model import free_mask

    th = np.array(thetas0, dtype=np.float64)
    if th.ndim != 2 or th.shape[1] != field.n_params:
        raise MesadynError(f"thetas0 must have shape (N, {field.n_params}), got {th.shape}")
    n = th.shape[0]
    e = np.broadcast_to(np.asarray(eta, np.float64), (n,)).copy()
    if not (np.isfinite(e).all() and (e > 0).all()):
        raise MesadynError("every η must be finite and > 0")
    steps = check_int("steps", steps, 1)
    every = check_int("sharpness_every", sharpness_every, 1)
    blowup = check_positive("blowup", blowup)
    free = free_mask(mask, field.d)
    idx = np.flatnonzero(free)
    zero_loss = float(batched_loss_and_grad(field, np.zeros((1, field.n_params)))[0][0])
    tr = _Tracker(n, field.n_params, steps, every)
    v = np.zeros_like(th)
    v[:, idx] = np.linspace(1.0, 2.0, idx.size)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    L = np.zeros(n)
    for k in range(steps + 1):
        L, g = batched_loss_and_grad(field, th)
        bad = tr.loss(k, L, zero_loss, blowup)
        if bad.any():
            th[bad] = 0.0
            L, g = batched_loss_and_grad(field, th)
        tr.theta(k, th)
        if tr.sharp_due(k):
            lam = np.linalg.eigvalsh(batched_hessian(field, th, idx))[:, -1]
            tr.sharp(e * lam)
        if tr.in_window(k):
            hv = _hvp(field, th, v)
            w = v.copy()
            w[:, idx] -= e[:, None] * hv[:, idx]
            nrm = np.linalg.norm(w, axis=1)
            nrm = np.where(nrm > 0, nrm, 1e-300)
            tr.tangent(k, nrm)
            v = w / nrm[:, None]
        if k == steps:
            break
        th[:, idx] -= e[:, None] * g[:, idx]
        nonfinite = ~np.isfinite(th).all(axis=1) & (tr.div < 0)
        if nonfinite.any():
            tr.div[nonfinite] = k + 1
            th[nonfinite] = 0.0
        if progress is not None:
            progress(float(k + 1))
    code, lyap = tr.classify(th)
    return _batch(tr, code, lyap, th, L)


def _hvp(field: Field, th: FloatArray, v: FloatArray) -> FloatArray:
    """``∇²L(θ_i) v_i`` for each row, exact from four batched gradients (module docstring)."""
    from ..field.batched import batched_loss_and_grad

    h = 1e-3 * np.maximum(1.0, np.linalg.norm(th, axis=1))[:, None]

    def grad(x: FloatArray) -> FloatArray:
        return batched_loss_and_grad(field, x)[1]

    d1 = grad(th + h * v) - grad(th - h * v)
    d2 = grad(th + 2 * h * v) - grad(th - 2 * h * v)
    out: FloatArray = (8 * d1 - d2) / (12 * h)
    return out
