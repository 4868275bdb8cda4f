"""Polyak–Łojasiewicz diagnostics along a trajectory (Lemma 5.4) and convergence rates.

Lemma 5.4: ``‖∇ℓ̃‖² = 2 c1 (a² + b²) (ℓ̃ − 0)`` for the surrogate (an identity, not only a bound:
``∇ℓ̃ = −(c2 − c1 ab)(b, a)``).  At a diagonal point of the full θ with every coordinate equal,
``L − L* = d·ℓ̃`` and ``‖∇L‖² = d·‖∇ℓ̃‖²`` (d diagonal entries of W^KQ_32 and of W^PV_12, each
carrying ``∂ℓ̃/∂a`` resp. ``∂ℓ̃/∂b``), so the factor d cancels and

    ‖∇L‖² / (L − L*) = 2 c1 (a² + b²).

Along the flow ``d(L − L*)/dτ = −‖∇L‖² = −PL(τ)·(L − L*)``, so the loss gap decays at the
rate ``PL(τ)``; near the fixed point this is ``2 c1 (a*² + b*²) = 2|μ|`` with ``μ = −c1(a*² + b*²)``
the non-zero eigenvalue of the reduced Jacobian (the distance decays at ``|μ|``, the loss at
twice it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..errors import MesadynError
from ..field import Field
from ..model import ab as model_ab
from ..model import diagonal_entries


@dataclass
class PLTrace:
    """PL quantities at the saved points of a trajectory."""

    t: np.ndarray
    loss_gap: np.ndarray  # L − L*
    grad_sq: np.ndarray  # ‖∇L‖²
    ratio: np.ndarray  # ‖∇L‖² / (L − L*)  (nan where the gap is at rounding level)
    lemma: np.ndarray  # 2 c1 (a² + b²) with a, b the mean diagonals of W^KQ_32, W^PV_12
    a: np.ndarray
    b: np.ndarray

    def to_dict(self) -> dict[str, object]:
        """JSON-ready summary: first/last PL ratio and Lemma 5.4 value, largest deviation."""
        ok = np.isfinite(self.ratio)
        rel = np.abs(self.ratio[ok] / self.lemma[ok] - 1) if ok.any() else np.array([np.nan])
        return {
            "n_points": int(self.t.size),
            "ratio_first": float(self.ratio[ok][0]) if ok.any() else float("nan"),
            "ratio_last": float(self.ratio[ok][-1]) if ok.any() else float("nan"),
            "lemma_first": float(self.lemma[ok][0]) if ok.any() else float("nan"),
            "lemma_last": float(self.lemma[ok][-1]) if ok.any() else float("nan"),
            "max_rel_dev_from_lemma": float(rel.max()),
        }


def mean_diagonals(theta: np.ndarray) -> tuple[float, float]:
    """Mean of diag W^KQ_32 (a) and of diag W^PV_12 (b)."""
    a, b = diagonal_entries(torch.as_tensor(np.asarray(theta, np.float64)))
    return float(a.mean()), float(b.mean())


def pl_trace(field: Field, t: np.ndarray, thetas: np.ndarray, loss_star: float, c1: float,
             *, gap_floor: float = 1e-9) -> PLTrace:
    """``‖∇L‖²/(L − L*)`` at each saved θ next to Lemma 5.4's ``2 c1 (a² + b²)``.

    Points where ``L − L* <= gap_floor·max(1, |L*|)`` are left out of the ratio (``nan``): there
    the gap is rounding, not signal.
    """
    thetas = np.atleast_2d(np.asarray(thetas, np.float64))
    t = np.asarray(t, np.float64)
    if thetas.shape[0] != t.size:
        raise MesadynError(f"got {t.size} times but {thetas.shape[0]} points")
    gaps, gsq, a, b = [], [], [], []
    for th in thetas:
        L, g = field.loss_and_grad(torch.as_tensor(th))
        gaps.append(float(L) - loss_star)
        gsq.append(float((g * g).sum()))
        ai, bi = mean_diagonals(th)
        a.append(ai)
        b.append(bi)
    gap = np.array(gaps)
    gs = np.array(gsq)
    floor = gap_floor * max(1.0, abs(loss_star))
    ratio = np.where(gap > floor, gs / np.where(gap > floor, gap, 1.0), np.nan)
    A, B = np.array(a), np.array(b)
    return PLTrace(t, gap, gs, ratio, 2 * c1 * (A * A + B * B), A, B)


def fitted_rate(t: np.ndarray, loss_gap: np.ndarray, *, lo: float = 1e-10,
                hi: float = 1e-6) -> float:
    """Exponential rate r of ``L − L* ∝ e^{−r τ}``: least-squares slope of ``log(L − L*)`` over
    the late window where the gap is between ``lo`` and ``hi`` times its initial value."""
    t = np.asarray(t, np.float64)
    gap = np.asarray(loss_gap, np.float64)
    g0 = gap[0] if gap[0] > 0 else np.nanmax(gap)
    sel = (gap > lo * g0) & (gap < hi * g0)
    if sel.sum() < 3:
        return float("nan")
    slope = np.polyfit(t[sel], np.log(gap[sel]), 1)[0]
    return float(-slope)


def ab_mean(theta: np.ndarray) -> float:
    """Mean over coordinates of ``diag W^KQ_32 ⊙ diag W^PV_12`` (Theorem 4.1's ab)."""
    return float(model_ab(torch.as_tensor(np.asarray(theta, np.float64))).mean())


def dominant_rate(trace: PLTrace, thetas: np.ndarray, theta_star: np.ndarray, spectrum: Any,
                  *, lo: float = 1e-10, hi: float = 1e-6) -> tuple[float, dict[str, float]]:
    """Linearised rate of ``L − L*`` over the fit window of :func:`fitted_rate`.

    Near θ*, ``θ − θ* ≈ Σ c_i e^{μ_i τ} v_i`` (μ_i < 0 the non-zero eigenvalues of ``−∇²L(θ*)``)
    and ``L − L* ≈ ½ Σ |μ_i| c_i² e^{2μ_i τ}``.  The ``c_i`` are read off ``θ(τ₀) − θ*`` at the
    first point of the window; the predicted gap is fitted over the window's times exactly as
    the measured one, so the two rates are comparable (a diagonal start excites only the
    ``−c1(a² + b²)`` mode, giving ``2c1(a*² + b*²)``).  Returns ``(rate, block shares of the
    mode carrying most of the predicted gap at the window's end)``; nan if the window is empty.
    """
    gap = trace.loss_gap
    g0 = gap[0] if gap[0] > 0 else np.nanmax(gap)
    sel = np.flatnonzero((gap > lo * g0) & (gap < hi * g0))
    if sel.size < 3:
        return float("nan"), {}
    k0 = sel[0]
    delta = np.asarray(thetas[k0], np.float64) - np.asarray(theta_star, np.float64)
    nz = spectrum.kinds != "zero"
    V = spectrum.eigenvectors[:, nz]
    mu = spectrum.eigenvalues[nz]
    coef = V.T @ delta
    tau = trace.t[sel] - trace.t[k0]
    parts = 0.5 * np.abs(mu)[None, :] * coef[None, :] ** 2 * np.exp(2 * mu[None, :] * tau[:, None])
    pred = parts.sum(axis=1)
    slope = np.polyfit(tau, np.log(pred), 1)[0]
    i = int(np.argmax(parts[-1]))
    from .spectrum import dominant_blocks

    blocks = dominant_blocks(V[:, [i]], spectrum.d)[0]
    return float(-slope), {n: round(w, 4) for n, w in blocks}
