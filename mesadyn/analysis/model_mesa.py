"""Every model of :mod:`mesadyn.models` as a mesa-optimizer: Corollary 4.1, Eq. 3 and
Proposition 4.1's ratio beyond the paper's one-layer layout.

**Corollary 4.1** says that at Theorem 4.1's fixed point the one-layer model's prediction is
one gradient-descent step on the in-context least squares,

    ŷ_t = W_1 x_t,   W_1 = W_0 − η_t ∇L_OLS,t(W_0),   W_0 = 0,   η_t = ab/(t−1),
    L_OLS,t(W) = ½ Σ_{i=1}^{t−1} ‖x_{i+1} − W x_i‖²,

and **Eq. 3** is the same prediction at the test length, ``ŷ_{T_te} = W (ab Σ_{i<T_te} x_i
x_i^*/(T_te−1)) x_{T_te}``.  von Oswald et al. (2023, "Transformers learn in-context by gradient
descent") ask whether a k-layer model is k such steps.  :func:`fit_gd_steps` answers it for a
given θ: the step sizes ``η ∈ R^k`` (step j of size ``η_j/(t−1)``, the same η at every t) that
bring k steps of GD from ``W_0 = 0`` (:func:`gd_prediction`) closest to the model's ŷ_t over
the positions t and the sequences, and how far they stay (``rel_residual``).  At the layered
diagonal point with one nonzero layer the answer is exact (η = ab, residual at rounding).

**Proposition 4.1's ratio** ``E[(ŷ_{T_te})_j / (W x_{T_te})_j]`` and Theorem 4.2's test MSE need
only the model's prediction at the last position: :func:`model_ratio` and :func:`model_mse` take
sequences of length ``T_te + 1`` of the noiseless diagonal process, predict on the first
``T_te`` tokens and compare ``ŷ_{T_te}`` with the truth ``W x_{T_te} = x_{T_te+1}``, with the
estimators of :mod:`mesadyn.analysis.incontext` (zero denominators excluded and counted).
:func:`model_incontext` draws the test set and reports the three together.

The fit uses the closed form of the GD iterates, ``∇L_OLS,t(W) = W C_t − B_t`` with
``C_t = Σ_{i<t} x_i x_i^*``, ``B_t = Σ_{i<t} x_{i+1} x_i^*``, so ``W_{j+1} = W_j (I − s_j C_t)
+ s_j B_t``; :func:`gd_prediction` takes the gradient by autodiff
(:func:`mesadyn.analysis.mesa.ols_gd_step`), an independent computation of the same iterates.
ŷ is multilinear in the steps ``s_j`` (each appears at most once in every product), so the
forward difference with a unit step is its exact Jacobian.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..budget import Estimate, check
from ..errors import MesadynError, check_int
from ..models import Model
from ..process import Family, make_generator, sample_sequences
from .incontext import MSEEstimate, RatioEstimate, mse_estimate, ratio_estimate
from .mesa import ols_gd_step

__all__ = ["GDStepFit", "ModelInContext", "fit_gd_steps", "gd_prediction", "model_incontext",
           "model_mse", "model_ratio"]

#: Starts of :func:`fit_gd_steps` drawn at random, besides the deterministic ones.
RANDOM_STARTS = 3


# ---- checks ----------------------------------------------------------------------------------
def _check_x(x: Any, minimum_T: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.ndim != 3:
        raise MesadynError(f"x must be a tensor of shape (n, T, d), got "
                           f"{tuple(np.shape(x))}")
    if int(x.shape[1]) < minimum_T:
        raise MesadynError(f"x must have at least T={minimum_T} tokens, got T={x.shape[1]}")
    return x.to(torch.complex128)


def _theta(model: Model, theta: Any, d: int) -> torch.Tensor:
    model.check_theta(theta, d)
    return torch.as_tensor(np.asarray(theta, np.float64) if not isinstance(theta, torch.Tensor)
                           else theta.detach(), dtype=torch.float64)


def _times(ts: Sequence[int] | None, T: int) -> list[int]:
    out = list(range(2, T + 1)) if ts is None else [check_int("t", t, 2) for t in ts]
    if not out:
        raise MesadynError("give at least one position t")
    bad = [t for t in out if t > T]
    if bad:
        raise MesadynError(f"every position t must satisfy 2 <= t <= T={T}, got t={bad[0]}")
    return out


# ---- k steps of GD on the in-context least squares ---------------------------------------------
def gd_prediction(x: torch.Tensor, t: int, etas: Sequence[float]) -> torch.Tensor:
    """ŷ_t = W_k x_t after k = ``len(etas)`` GD steps on ``L_OLS,t`` from ``W_0 = 0``.

    Step j is ``W_{j+1} = W_j − (etas[j]/(t−1)) ∇L_OLS,t(W_j)`` with
    ``L_OLS,t(W) = ½ Σ_{i=1}^{t−1} ‖x_{i+1} − W x_i‖²`` (Corollary 4.1 for k = 1 and
    ``etas = [ab]``), the gradient by autodiff (:func:`mesadyn.analysis.mesa.ols_gd_step`).

    Arguments:
        x: complex (n, T, d) sequences.
        t: the position predicted, ``2 <= t <= T`` (1-indexed).
        etas: the k >= 1 step numerators.

    Returns:
        ŷ_t, complex (n, d).

    Raises:
        MesadynError: x not (n, T, d), t out of range, or no step.
    """
    xc = _check_x(x, 2)
    steps = [float(e) for e in etas]
    if not steps:
        raise MesadynError("etas must hold at least one step size (k >= 1), got none")
    t = check_int("t", t, 2)
    W: torch.Tensor | None = None
    for eta in steps:
        W = ols_gd_step(xc, t, eta / (t - 1), W0=W)
    assert W is not None
    return torch.einsum("nab,nb->na", W, xc[:, t - 1])


class _GDIterates:
    """The closed form of :func:`gd_prediction` at several positions, for the fit (numpy).

    Holds ``B_t``, ``C_t`` and ``x_t`` (n, m, ·) for the m positions ``ts``; ``ŷ = B Σ_j s_j
    y_j`` with ``y_{k−1} = x_t``, ``y_{j−1} = (I − s_j C) y_j`` and ``s_j = η_j/(t−1)``.
    """

    def __init__(self, x: torch.Tensor, ts: Sequence[int]):
        idx = torch.as_tensor([t - 2 for t in ts], dtype=torch.long, device=x.device)
        B = torch.cumsum(x[:, 1:, :, None] * x[:, :-1, None, :].conj(), dim=1)  # Σ_{i<t}
        C = torch.cumsum(x[:, :-1, :, None] * x[:, :-1, None, :].conj(), dim=1)
        self.B = B[:, idx].cpu().numpy()
        self.C = C[:, idx].cpu().numpy()
        self.xt = x[:, idx + 1].cpu().numpy()
        self.rho = np.asarray([t - 1 for t in ts], np.float64)[None, :, None]

    def predict(self, etas: np.ndarray) -> np.ndarray:
        """ŷ_t at every position of ``ts``: complex (n, m, d)."""
        y = self.xt
        acc = np.zeros_like(y)
        for j in range(len(etas) - 1, -1, -1):
            s = etas[j] / self.rho
            acc = acc + s * y
            if j > 0:
                y = y - s * np.einsum("nmab,nmb->nma", self.C, y)
        return np.einsum("nmab,nmb->nma", self.B, acc)


@dataclass(frozen=True)
class GDStepFit:
    """How close a model's ŷ_t is to k GD steps on the in-context least squares.

    ``etas``: the fitted step numerators (step j of size ``η_j/(t−1)``); ``rel_residual``:
    ``‖ŷ(model) − ŷ(GD)‖/‖ŷ(model)‖`` (Frobenius over positions, sequences and coordinates;
    nan when ŷ(model) is 0); ``max_rel_err``: ``max |ŷ(model) − ŷ(GD)|`` over every entry,
    relative to ``max |ŷ(model)|``; ``structure``: the largest |entry| of θ's active entries off
    the layered diagonals (:meth:`~mesadyn.models.Model.diagonal_mask`) relative to the largest
    active one (0 at Assumption 3.1's structure, and for θ = 0).
    """

    k: int
    etas: list[float]
    rel_residual: float
    max_rel_err: float
    t_checked: tuple[int, ...]
    sequences: int
    structure: float

    def to_dict(self) -> dict[str, object]:
        return {"k": self.k, "etas": list(self.etas), "rel_residual": self.rel_residual,
                "max_rel_err": self.max_rel_err, "t_checked": list(self.t_checked),
                "sequences": self.sequences, "structure": self.structure}


def _structure(model: Model, theta: torch.Tensor, d: int) -> float:
    th = np.abs(theta.cpu().numpy())
    active = model.active_mask(d)
    top = float(th[active].max()) if active.any() else 0.0
    off = active & ~model.diagonal_mask(d)
    if top == 0.0 or not off.any():
        return 0.0
    return float(th[off].max()) / top


def fit_gd_steps(model: Model, theta: Any, x: torch.Tensor, k: int,
                 ts: Sequence[int] | None = None) -> GDStepFit:
    """The k step sizes that bring k GD steps closest to ``model``'s ŷ_t (von Oswald et al.).

    Minimises ``Σ_{t,n} ‖ŷ_t(model) − gd_prediction(x, t, η)‖²`` over ``η ∈ R^k`` by
    :func:`scipy.optimize.least_squares` (real and imaginary parts stacked; the exact Jacobian of
    the multilinear iterates), from ``[mean ab, 0, …]``, from the best one-step ``[η_1, 0, …]``
    (a linear least squares), from ``[η_1/k, …]`` and from :data:`RANDOM_STARTS` seeded random
    starts; the best end point is kept.  Since ``[η_1, 0, …]`` is a start, the k-step residual
    is never above the one-step one.

    Arguments:
        model: the model of θ.
        theta: its flat θ.
        x: complex (n, T, d) sequences, T >= 2.
        k: the number of GD steps (>= 1).
        ts: the positions compared (default every t = 2..T).

    Raises:
        MesadynError: k < 1, x not (n, T, d), θ of the wrong length, or a position out of
            range (each names the value), or arrays that do not fit in memory.
    """
    k = check_int("k", k, 1)
    xc = _check_x(x, 2)
    d = int(xc.shape[-1])
    th = _theta(model, theta, d)
    times = _times(ts, int(xc.shape[1]))
    _check_fit_size(xc, len(times), k)
    with torch.no_grad():
        y_model = model.predict(th, xc)[:, [t - 2 for t in times]].cpu().numpy()
    return _fit(model, th, _GDIterates(xc, times), y_model, k, times)


def _check_fit_size(x: torch.Tensor, m: int, k: int) -> None:
    """Refuse a fit whose prefix sums and iterates would not fit in memory."""
    n, T, d = (int(s) for s in x.shape)
    check(Estimate(f"the GD-step fit at n={n}, {m} positions, d={d}",
                   16 * n * T * d * (4 * d + 1) + 16 * n * m * (2 * d * d + (k + 6) * d),
                   advice="use fewer sequences or positions"))


def _fit(model: Model, th: torch.Tensor, gd: _GDIterates, y_model: np.ndarray, k: int,
         times: Sequence[int]) -> GDStepFit:
    """:func:`fit_gd_steps` on the model's ŷ at ``times`` (``y_model``, complex (n, m, d)) and
    the GD iterates of the same prompts."""
    from scipy.optimize import least_squares

    n, d = int(y_model.shape[0]), int(y_model.shape[-1])

    def residual(etas: np.ndarray) -> np.ndarray:
        r = gd.predict(etas) - y_model
        return np.concatenate([r.real.ravel(), r.imag.ravel()])

    def jacobian(etas: np.ndarray) -> np.ndarray:
        base = residual(etas)
        cols = []
        for j in range(k):  # exact: ŷ is affine in each η_j
            e = etas.copy()
            e[j] += 1.0
            cols.append(residual(e) - base)
        return np.stack(cols, axis=1)

    ab_mean = float(torch.as_tensor(model.ab(th)).mean())
    g = gd.predict(np.ones(1))
    gg = float(np.vdot(g, g).real)
    eta1 = float(np.vdot(g, y_model).real) / gg if gg > 0 else ab_mean
    starts = [np.array([ab_mean] + [0.0] * (k - 1)), np.array([eta1] + [0.0] * (k - 1))]
    if k >= 2:
        rng = np.random.default_rng(0)
        scale = max(abs(eta1), abs(ab_mean), 1e-3)
        starts.append(np.full(k, eta1 / k))
        starts += [scale * rng.standard_normal(k) for _ in range(RANDOM_STARTS)]
    best: tuple[float, np.ndarray] | None = None
    for start in starts:
        sol = least_squares(residual, start, jac=jacobian, method="trf", xtol=1e-15,
                            ftol=1e-15, gtol=1e-15, max_nfev=200 * (k + 1))
        cost = float(np.sum(sol.fun**2))
        if best is None or cost < best[0]:
            best = (cost, np.asarray(sol.x, np.float64))
    assert best is not None
    etas = best[1]
    r = gd.predict(etas) - y_model
    scale_fro = float(np.linalg.norm(y_model))
    scale_max = float(np.abs(y_model).max()) if y_model.size else 0.0
    return GDStepFit(
        k=k, etas=[float(e) for e in etas],
        rel_residual=float(np.linalg.norm(r)) / scale_fro if scale_fro > 0 else float("nan"),
        max_rel_err=float(np.abs(r).max()) / scale_max if scale_max > 0 else float("nan"),
        t_checked=tuple(times), sequences=n, structure=_structure(model, th, d))


# ---- Proposition 4.1's ratio and Theorem 4.2's MSE -----------------------------------------------
def _last_prediction(model: Model, theta: Any, x: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ŷ_{T_te}, x_{T_te+1})`` of sequences of length ``T_te + 1``, both complex (n, d)."""
    xc = _check_x(x, 3)
    th = _theta(model, theta, int(xc.shape[-1]))
    with torch.no_grad():
        y = model.predict(th, xc[:, :-1])[:, -1]
    return y, xc[:, -1]


def model_ratio(model: Model, theta: Any, x: torch.Tensor) -> RatioEstimate:
    """Proposition 4.1's ratio ``E[Re (ŷ_{T_te})_j / (W x_{T_te})_j]`` of any model.

    ``x`` is (n, T_te + 1, d) from the noiseless diagonal process, so that ``x_{T_te+1} =
    W x_{T_te}`` is the truth; the model predicts on the first ``T_te`` tokens.  The estimator is
    :func:`mesadyn.analysis.incontext.ratio_estimate` (zero denominators excluded and counted).

    Raises:
        MesadynError: x not (n, T, d) with T >= 3, θ of the wrong length, or no nonzero
            denominator.
    """
    return ratio_estimate(*_last_prediction(model, theta, x))


def model_mse(model: Model, theta: Any, x: torch.Tensor) -> MSEEstimate:
    """Theorem 4.2's ``E‖ŷ_{T_te} − W x_{T_te}‖²`` of any model, on ``x`` as in
    :func:`model_ratio` (:func:`mesadyn.analysis.incontext.mse_estimate`)."""
    return mse_estimate(*_last_prediction(model, theta, x))


@dataclass(frozen=True)
class ModelInContext:
    """A model's in-context behaviour at one test length: Proposition 4.1's ratio, Theorem 4.2's
    MSE, the k-step GD fit on the prompts (``gd_fit``) and, for k >= 2, the one-step fit
    (``gd_fit_1``); ``ab`` is ``model.ab(θ)`` for a polynomial model (else ``None``)."""

    model: dict[str, object]
    d: int
    T_te: int
    sequences: int
    seed: int
    ab: list[float] | None
    ratio: RatioEstimate
    mse: MSEEstimate
    gd_fit: GDStepFit
    gd_fit_1: GDStepFit | None

    def to_dict(self) -> dict[str, object]:
        return {"model": dict(self.model), "d": self.d, "T_te": self.T_te,
                "sequences": self.sequences, "seed": self.seed,
                "ab": None if self.ab is None else list(self.ab),
                "ratio": self.ratio.to_dict(), "mse": self.mse.to_dict(),
                "gd_fit": self.gd_fit.to_dict(),
                "gd_fit_1": None if self.gd_fit_1 is None else self.gd_fit_1.to_dict()}


def model_incontext(model: Model, theta: Any, family: Family, T_te: int, n: int, seed: int,
                    k: int | None = None) -> ModelInContext:
    """Draw ``n`` test sequences of length ``T_te + 1`` from ``family`` (seeded, on the CPU) and
    report the ratio (:func:`model_ratio`), the MSE (:func:`model_mse`) and the k-step GD fit
    on the prompts ``x_1..x_{T_te}`` (:func:`fit_gd_steps`, k = ``model.layers`` by default),
    with the one-step fit beside it for k >= 2, so that a reader sees whether depth helps.

    Raises:
        MesadynError: T_te < 2, n < 2, k < 1, or θ of the wrong length for ``family.d`` (each
            names the value).
    """
    T_te = check_int("T_te", T_te, 2)
    n = check_int("n", n, 2)
    k = model.layers if k is None else check_int("k", k, 1)
    d = int(family.d)
    th = _theta(model, theta, d)
    x = _check_x(sample_sequences(family, n, T_te + 1, make_generator(int(seed)), "cpu"), 3)
    prompts, truth = x[:, :T_te], x[:, T_te]
    times = list(range(2, T_te + 1))
    _check_fit_size(prompts, len(times), k)
    with torch.no_grad():  # one forward pass: ŷ_2..ŷ_{T_te}, the last one for the ratio
        pred = model.predict(th, prompts)
    y_model = pred.cpu().numpy()
    gd = _GDIterates(prompts, times)
    fit = _fit(model, th, gd, y_model, k, times)
    fit_1 = _fit(model, th, gd, y_model, 1, times) if k >= 2 else None
    ab = ([float(v) for v in torch.as_tensor(model.ab(th)).reshape(-1)]
          if model.polynomial else None)
    return ModelInContext(model=model.describe(), d=d, T_te=T_te, sequences=n, seed=int(seed),
                          ab=ab, ratio=ratio_estimate(pred[:, -1], truth),
                          mse=mse_estimate(pred[:, -1], truth), gd_fit=fit, gd_fit_1=fit_1)
