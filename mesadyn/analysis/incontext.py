"""In-context evaluation of a trained θ: Proposition 4.1's ratio and Theorem 4.2's test MSE.

Given a test prompt ``x_1..x_{T_te}`` (``x_t = λ^{t−1} x_1``), the model predicts the next token
``W x_{T_te} = λ^{T_te} ⊙ x_1`` by ``ŷ_{T_te}`` (Eq. 1).  At the fixed point of Theorem 4.1 this
is Eq. 3, ``ŷ_{T_te} = W (ab Σ_{i<T_te} x_i x_i^*/(T_te−1)) x_{T_te}``.

**Ratio estimator (Proposition 4.1).**  The paper estimates ``E[(ŷ_{T_te})_j/(W x_{T_te})_j]``
"by the mean of the element-wise divide" (Appendix B.3).  Here, over ``n`` test sequences:

- entries whose denominator ``(W x_{T_te})_j`` is exactly zero are *excluded and counted*
  (e.g. the inactive coordinates of the sparse family, Example 4.1) — no epsilon is added;
- each used entry gives a complex ``r_ij``; the estimate is the mean of ``Re r_ij`` over the
  ``N = Σ_i N_i`` used entries, ``R = Σ_i S_i / Σ_i N_i`` with ``S_i = Σ_j Re r_ij``;
- entries of one sequence are correlated, so the standard error is the ratio-estimator
  (cluster-robust) one, ``se = √(n'/(n'−1) · Σ_i (S_i − R N_i)²) / N`` over the ``n'``
  sequences with ``N_i > 0``;
- the imaginary parts are averaged the same way and reported with their standard error (in
  expectation they vanish; a large value flags a problem).

At a fixed point of Theorem 4.1 the ratio has no ``1/x_j`` factor left and finite variance; at
a general θ it can be heavy-tailed (for gaussian ``x_1``, ``E|1/x_j| = ∞``), so its standard
error is then only indicative.

**MSE (Theorem 4.2).**  ``E‖ŷ_{T_te} − W x_{T_te}‖²`` (summed over the d coordinates), the mean
over sequences with standard error ``std/√n``; ``baseline = E‖W x_{T_te}‖²`` is the MSE of
predicting 0, for scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from ..errors import MesadynError, check_int
from ..model import P_and_A, dim_of, embed, predict_ar_at
from ..process import Family, make_generator, sample, sequences

#: Work-memory budget of one chunk of sequences (bytes).
CHUNK_BYTES = 2**27


@dataclass(frozen=True)
class RatioEstimate:
    """Proposition 4.1's ratio ``E[Re (ŷ)_j/(Wx)_j]`` with its standard error (see module doc)."""

    value: float
    se: float
    imag: float
    imag_se: float
    used: int
    excluded: int
    sequences: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


@dataclass(frozen=True)
class MSEEstimate:
    """``E‖ŷ_{T_te} − W x_{T_te}‖²`` with standard error, and the predict-zero ``baseline``."""

    value: float
    se: float
    baseline: float
    sequences: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


@dataclass(frozen=True)
class ContextCurve:
    """Ratio and MSE for each test context length ``T_te`` (arrays aligned with ``T_te``)."""

    T_te: np.ndarray
    mse: np.ndarray
    mse_se: np.ndarray
    baseline: np.ndarray
    ratio: np.ndarray
    ratio_se: np.ndarray
    ratio_imag: np.ndarray
    ratio_imag_se: np.ndarray
    used: np.ndarray
    excluded: np.ndarray
    sequences: int


# ---- estimators on per-sequence predictions ---------------------------------------------
def _ratio_parts(yhat: torch.Tensor,
                 target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sequence sums of Re and Im of the used ratios, and the per-sequence counts."""
    used = target != 0
    safe = torch.where(used, target, torch.ones_like(target))
    r = torch.where(used, yhat / safe, torch.zeros_like(yhat))
    return r.real.sum(-1), r.imag.sum(-1), used.sum(-1)


def _ratio_reduce(S: np.ndarray, I: np.ndarray, N: np.ndarray, total: int) -> RatioEstimate:
    used = int(N.sum())
    if used == 0:
        raise MesadynError(
            f"no test entry has a nonzero denominator (W x)_j among {total} entries; "
            "the ratio of Proposition 4.1 is undefined"
        )
    keep = N > 0
    n_used = int(keep.sum())
    R = float(S.sum() / used)
    Im = float(I.sum() / used)
    if n_used > 1:
        f = n_used / (n_used - 1)
        se = math.sqrt(f * float(((S[keep] - R * N[keep]) ** 2).sum())) / used
        im_se = math.sqrt(f * float(((I[keep] - Im * N[keep]) ** 2).sum())) / used
    else:
        se = im_se = math.nan
    return RatioEstimate(R, se, Im, im_se, used, total - used, int(len(N)))


def ratio_estimate(yhat: torch.Tensor, target: torch.Tensor) -> RatioEstimate:
    """Proposition 4.1's ratio from predictions ``yhat`` and truths ``target`` (both (n, d))."""
    if yhat.shape != target.shape or yhat.ndim != 2:
        raise MesadynError(
            f"yhat and target must both have shape (n, d), got {tuple(yhat.shape)} "
            f"and {tuple(target.shape)}"
        )
    S, I, N = _ratio_parts(yhat.to(torch.complex128), target.to(torch.complex128))
    return _ratio_reduce(S.cpu().numpy(), I.cpu().numpy(), N.cpu().numpy(), target.numel())


def _mse_reduce(err: np.ndarray, base: np.ndarray) -> MSEEstimate:
    n = len(err)
    se = float(err.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return MSEEstimate(float(err.mean()), se, float(base.mean()), n)


def mse_estimate(yhat: torch.Tensor, target: torch.Tensor) -> MSEEstimate:
    """``E‖ŷ − Wx‖²`` over sequences, with standard error ``std/√n`` (both inputs (n, d))."""
    if yhat.shape != target.shape or yhat.ndim != 2:
        raise MesadynError(
            f"yhat and target must both have shape (n, d), got {tuple(yhat.shape)} "
            f"and {tuple(target.shape)}"
        )
    r = (yhat - target).to(torch.complex128)
    err = (r.real**2 + r.imag**2).sum(-1)
    base = (target.real**2 + target.imag**2).sum(-1)
    return _mse_reduce(err.cpu().numpy(), base.cpu().numpy())


# ---- a fixed test set at one context length ---------------------------------------------
class ContextBatch:
    """A fixed test set at context length ``T_te``, with its θ-independent part precomputed.

    ``ŷ_{T_te} = P M A e_{T_te} / (T_te − 1)`` with ``M = Σ_{i≤T_te} e^x_i e^x_i^*`` (Eq. 1), so
    ``M`` and ``e_{T_te}`` are built once and every θ costs O(n d²).
    """

    def __init__(self, x1: torch.Tensor, lam: torch.Tensor, T_te: int):
        self.T_te = check_int("T_te", T_te, 2)
        if x1.ndim != 2 or lam.shape != x1.shape:
            raise MesadynError(
                f"x1 and lam must both have shape (n, d), got {tuple(x1.shape)}, "
                f"{tuple(lam.shape)}"
            )
        self.x1 = x1.to(torch.float64)
        self.lam = lam.to(torch.complex128)
        n, d = x1.shape
        self.d = d
        chunk = max(1, CHUNK_BYTES // (16 * 6 * self.T_te * d))
        Ms, es = [], []
        for lo in range(0, n, chunk):
            e = embed(sequences(self.x1[lo : lo + chunk], self.lam[lo : lo + chunk], self.T_te))
            Ms.append(torch.einsum("ntk,ntl->nkl", e, e.conj()))
            es.append(e[:, -1])
        self.M = torch.cat(Ms)  # (n, 2d, 2d)
        self.e_last = torch.cat(es)  # (n, 2d)
        lam_pow = torch.polar(torch.ones_like(self.x1), torch.angle(self.lam) * self.T_te)
        self.target = lam_pow * self.x1.to(torch.complex128)  # W x_{T_te} = λ^{T_te} x_1

    @property
    def n(self) -> int:
        return int(self.x1.shape[0])

    def predict(self, theta: torch.Tensor) -> torch.Tensor:
        """``ŷ_{T_te}`` of every test sequence, complex (n, d)."""
        if dim_of(theta) != self.d:
            raise MesadynError(f"θ is for d={dim_of(theta)} but the test set has d={self.d}")
        P, A = P_and_A(theta.detach().to(self.x1.device, torch.float64))
        q = self.e_last @ A.to(torch.complex128).T  # A e_T, (n, 2d)
        z = (self.M @ q[:, :, None]).squeeze(-1)  # M A e_T
        return z @ P.to(torch.complex128).T / (self.T_te - 1)

    def ratio(self, theta: torch.Tensor) -> RatioEstimate:
        """Proposition 4.1's ratio at θ (see the module docstring for the estimator)."""
        return ratio_estimate(self.predict(theta), self.target)

    def mse(self, theta: torch.Tensor) -> MSEEstimate:
        """Theorem 4.2's ``E‖ŷ_{T_te} − W x_{T_te}‖²`` at θ."""
        return mse_estimate(self.predict(theta), self.target)


# ---- against the test context length ----------------------------------------------------
def context_curve(theta: torch.Tensor, x1: torch.Tensor, lam: torch.Tensor,
                  T_te: Sequence[int]) -> ContextCurve:
    """Ratio and MSE at each test context length in ``T_te`` (Proposition 4.1, Theorem 4.2).

    Uses :func:`mesadyn.model.predict_ar_at` at the lengths ``T_te`` only (the prefix Grams'
    closed form: O(n·len(T_te)·d²)), chunked over sequences; ``W x_t = λ^t x_1``.
    """
    Ts = np.asarray([check_int("T_te", t, 2) for t in T_te], dtype=np.int64)
    if Ts.size == 0:
        raise MesadynError("give at least one test context length T_te")
    if x1.ndim != 2 or lam.shape != x1.shape:
        raise MesadynError(
            f"x1 and lam must both have shape (n, d), got {tuple(x1.shape)}, {tuple(lam.shape)}"
        )
    n, d = x1.shape
    if dim_of(theta) != d:
        raise MesadynError(f"θ is for d={dim_of(theta)} but the test set has d={d}")
    T_max = int(Ts.max())
    th = theta.detach().to(x1.device, torch.float64)
    chunk = max(1, CHUNK_BYTES // (16 * 4 * T_max * (d * d + 4 * d)))
    S_l, I_l, N_l, E_l, B_l = [], [], [], [], []
    for lo in range(0, n, chunk):
        xc = x1[lo : lo + chunk].to(torch.float64)
        lc = lam[lo : lo + chunk].to(torch.complex128)
        y = predict_ar_at(th, xc, lc, Ts)  # (c, K, d)
        angle = torch.angle(lc)[:, None, :] * torch.as_tensor(Ts, device=x1.device)[None, :, None]
        target = torch.polar(torch.ones_like(angle), angle) * xc.to(torch.complex128)[:, None, :]
        S_c, I_c, N_c = _ratio_parts(y, target)
        r = y - target
        S_l.append(S_c)
        I_l.append(I_c)
        N_l.append(N_c)
        E_l.append((r.real**2 + r.imag**2).sum(-1))
        B_l.append((target.real**2 + target.imag**2).sum(-1))
    S, I, N, E, B = (torch.cat(v).cpu().numpy() for v in (S_l, I_l, N_l, E_l, B_l))
    ratios = [_ratio_reduce(S[:, k], I[:, k], N[:, k], n * d) for k in range(len(Ts))]
    mses = [_mse_reduce(E[:, k], B[:, k]) for k in range(len(Ts))]
    return ContextCurve(
        T_te=Ts,
        mse=np.array([m.value for m in mses]),
        mse_se=np.array([m.se for m in mses]),
        baseline=np.array([m.baseline for m in mses]),
        ratio=np.array([r.value for r in ratios]),
        ratio_se=np.array([r.se for r in ratios]),
        ratio_imag=np.array([r.imag for r in ratios]),
        ratio_imag_se=np.array([r.imag_se for r in ratios]),
        used=np.array([r.used for r in ratios]),
        excluded=np.array([r.excluded for r in ratios]),
        sequences=n,
    )


def draw_test_set(family: Family, n: int, seed: int,
             device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` fresh test draws ``(x_1, λ)`` from ``seed`` (a test set for :func:`context_curve`)."""
    n = check_int("n", n, 2)
    return sample(family, n, 2, make_generator(seed, device), device)

