"""Assumption 4.2 for any initial-token family, derived exactly (beyond the paper).

Assumption 4.2 asks ``(κ1/κ2) M x_T → x_T`` as ``T = T_te → ∞``, with
``M = (1/(T−1)) Σ_{i=1}^{T−1} x_i x_i^*`` and ``x_i = Λ^{i−1} x_1``.  Coordinate j of ``M x_T`` is

    (M x_T)_j = x_j² x_{T,j}  +  Σ_{k≠j} x_j x_k² λ_k^{T−1} (1/(T−1)) Σ_{i=1}^{T−1} (λ_j/λ_k)^{i−1}.

*Diagonal part* (k = j): ``x_j² x_{T,j}``, so the limit needs ``(κ1/κ2) x_j² = 1`` wherever
``x_j ≠ 0``, i.e. ``x_j² = κ2/κ1`` almost surely on ``{x_j ≠ 0}``.
*Off-diagonal part* (k ≠ j): the geometric sum is bounded by ``2/|1 − λ_j/λ_k|``, so it is
``O(1/T)`` whenever ``λ_j ≠ λ_k`` (almost surely); in mean square it is exactly
``x_j² x_k⁴ /(T−1)``.  It vanishes for every family, at rate 1/T_te.

Averaging over the independent uniform phases kills every cross term (each carries a non-zero
net power of some λ), which gives the exact mean-squared residual of the predictor
``ŷ = W (s M) x_T`` against ``W x_T`` for *any* distribution of ``x_1``:

    MSE(s, T_te) = Σ_j E[x_j² (s x_j² − 1)²] + (s²/(T_te−1)) Σ_j Σ_{k≠j} E[x_j² x_k⁴].

With ``s = κ1/κ2`` the ``T_te → ∞`` limit is ``Σ_j (E x_j² − E[x_j⁴]²/E[x_j⁶])`` ≥ 0
(Cauchy–Schwarz ``E[x⁴]² ≤ E[x²] E[x⁶]``), zero iff ``x_j²`` is constant on ``{x_j ≠ 0}``.
So: sparse (Example 4.1) and rademacher satisfy Assumption 4.2; gaussian (limit 0.4 d σ²) and
uniform (limit d·(1/3 − 7/25) = 4d/75) do not.  Rademacher also satisfies Assumption 4.1, so
Theorem 4.2 applies to it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import MesadynError, check_finite, check_int
from ..process import Family, make_generator, sample
from ..record import Record


def _unit_counts(d: int, powers: dict[int, int]) -> np.ndarray:
    c = np.zeros((1, d), dtype=np.int64)
    for k, p in powers.items():
        c[0, k] += p
    return c


def coordinate_moments(fam: Family) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per coordinate ``E x_j², E x_j⁴, E x_j⁶`` and the matrix ``E[x_j² x_k⁴]`` (exact)."""
    d = fam.d
    m2 = np.array([fam.moment(_unit_counts(d, {j: 2}))[0] for j in range(d)])
    m4 = np.array([fam.moment(_unit_counts(d, {j: 4}))[0] for j in range(d)])
    m6 = np.array([fam.moment(_unit_counts(d, {j: 6}))[0] for j in range(d)])
    cross = np.zeros((d, d))
    for j in range(d):
        for k in range(d):
            if j != k:
                cross[j, k] = fam.moment(_unit_counts(d, {j: 2, k: 4}))[0]
    return m2, m4, m6, cross


def limit_step(fam: Family) -> float:
    """``κ1/κ2`` (the T_tr → ∞ limit of ab*, Theorem 4.1), from coordinate 1's moments."""
    _, m4, m6, _ = coordinate_moments(fam)
    return float(m4[0] / m6[0])


def exact_mse(fam: Family, T_te: int, s: float | None = None) -> float:
    """``E‖W(sM)x_{T_te} − W x_{T_te}‖²`` exactly (module docstring), default ``s = κ1/κ2``."""
    T_te = check_int("T_te", T_te, 2)
    s = limit_step(fam) if s is None else check_finite("s", s)
    m2, m4, m6, cross = coordinate_moments(fam)
    diag = float(np.sum(s * s * m6 - 2 * s * m4 + m2))
    return diag + s * s * float(cross.sum()) / (T_te - 1)


def limit_mse(fam: Family, s: float | None = None) -> float:
    """The ``T_te → ∞`` limit of :func:`exact_mse`: ``Σ_j E[x_j² (s x_j² − 1)²]``."""
    s = limit_step(fam) if s is None else check_finite("s", s)
    m2, m4, m6, _ = coordinate_moments(fam)
    return float(np.sum(s * s * m6 - 2 * s * m4 + m2))


def mc_mse(fam: Family, T_te: int, s: float | None = None, n: int = 20_000,
           seed: int = 0, batches: int = 20) -> tuple[float, float]:
    """Monte-Carlo ``E‖s M x_T − x_T‖²`` with its batch-means standard error.

    Builds the sequences and ``M`` explicitly (no use of the closed form), so it is an
    independent check of :func:`exact_mse`.
    """
    from ..process import sequences

    T_te = check_int("T_te", T_te, 2)
    n = check_int("n", n, batches)
    s = limit_step(fam) if s is None else check_finite("s", s)
    gen = make_generator(seed)
    x1, lam = sample(fam, n, T_te, gen)
    x = sequences(x1, lam, T_te)  # (n, T, d)
    ctx = x[:, : T_te - 1]
    xT = x[:, T_te - 1]
    proj = (ctx.conj() * xT[:, None, :]).sum(-1)  # x_i^* x_T, (n, T−1)
    Mx = (ctx * proj[..., None]).sum(1) / (T_te - 1)
    r = s * Mx - xT
    per = (r.real.square() + r.imag.square()).sum(-1)
    means = torch.stack([c.mean() for c in per.chunk(batches)])
    return float(per.mean()), float(means.std(unbiased=True) / batches**0.5)


@dataclass(frozen=True)
class Assumption42(Record):
    """Whether a family satisfies Assumption 4.2, and by how much it misses."""

    family: str
    satisfies_41: bool
    step: float  # κ1/κ2
    limit_mse: float  # T_te → ∞ residual; 0 iff Assumption 4.2 holds
    relative_limit: float  # limit_mse / E‖x_1‖²
    satisfied: bool
    reason: str


def check(fam: Family, rtol: float = 1e-12) -> Assumption42:
    """Assumption 4.2 holds iff the limit residual is 0 (relative to ``E‖x_1‖²``, rounding)."""
    try:
        s = limit_step(fam)
    except (MesadynError, ZeroDivisionError) as exc:
        raise MesadynError(f"family {fam.name!r} has no κ1/κ2: {exc}") from None
    lim = limit_mse(fam, s)
    scale = fam.mean_sq_norm
    rel = lim / scale
    ok = abs(rel) <= rtol
    m2, m4, m6, _ = coordinate_moments(fam)
    if ok:
        reason = f"x_j² = κ2/κ1 = {m6[0] / m4[0]:.6g} almost surely where x_j ≠ 0"
    else:
        reason = (f"x_j² is not constant on {{x_j ≠ 0}}: E[x²]E[x⁶] − E[x⁴]² = "
                  f"{m2[0] * m6[0] - m4[0] ** 2:.6g} > 0")
    return Assumption42(fam.name, fam.assumption_41, s, lim, rel, ok, reason)
