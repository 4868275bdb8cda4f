"""Every model of :mod:`mesadyn.models` as a mesa-optimizer: Corollary 4.1, Eq. 3 and
Proposition 4.1's ratio beyond the paper's one-layer layout.

**Corollary 4.1** says that at Theorem 4.1's fixed point the one-layer model's prediction is
one gradient-descent step on the in-context least squares,

    ŷ_t = W_1 x_t,   W_1 = W_0 − η_t ∇L_OLS,t(W_0),   W_0 = 0,   η_t = ab/(t−1),
    L_OLS,t(W) = ½ Σ_{i=1}^{t−1} ‖x_{i+1} − W x_i‖²,

and **Eq. 3** is the same prediction at the test length, ``ŷ_{T_te} = W (ab Σ_{i<T_te} x_i
x_i^*/(T_te−1)) x_{T_te}``.  von Oswald et al. (2023) ask whether a k-layer model is k such
steps, Ahn et al. (2023) whether it is k *preconditioned* steps ``W_{j+1} = W_j −
∇L_OLS,t(W_j) Γ_j/(t−1)``.  :func:`fit_gd_steps` answers both for a given θ: the step sizes
``η_j`` (``Γ_j = η_j I``) or the diagonal or full ``Γ_j`` (the same at every t) that bring k
steps from ``W_0 = 0`` closest to the model's ŷ_t over the positions t and the sequences, and
how far they stay (:mod:`mesadyn.analysis.gd_fit`).  At the layered diagonal point with one
nonzero layer the answer is exact (``Γ = ab I``, residual at rounding).

**Proposition 4.1's ratio** ``E[(ŷ_{T_te})_j / (W x_{T_te})_j]`` and Theorem 4.2's test MSE need
only the model's prediction at the last position: :func:`model_ratio` and :func:`model_mse` take
sequences of length ``T_te + 1`` of the noiseless diagonal process, predict on the first
``T_te`` tokens and compare ``ŷ_{T_te}`` with the truth ``W x_{T_te} = x_{T_te+1}``, with the
estimators of :mod:`mesadyn.analysis.incontext` (zero denominators excluded and counted).
:func:`model_incontext` draws the test set and reports them with the GD fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..errors import check_choice, check_int
from ..models import Model
from ..process import Family, make_generator, sample_sequences
from .gd_fit import GDStepFit, check_fit_size, fit_iterates
from .gd_iterates import GDIterates, Preconditioner, Side, check_times, check_x
from .incontext import MSEEstimate, RatioEstimate, mse_estimate, ratio_estimate

__all__ = ["PRECONDITIONED_MIN_SEQUENCES", "PRECONDITIONED_RESIDUALS", "ModelInContext",
           "fit_gd_steps", "model_incontext", "model_mse", "model_ratio"]

#: The complex residuals (sequences × positions × d) on which :func:`model_incontext` fits
#: preconditioned steps, on the first test sequences (:data:`PRECONDITIONED_MIN_SEQUENCES` at
#: least): their Jacobian has ``k d²`` columns per side and costs ``O(d⁴)`` per position and
#: prompt to build, the scalar fit's ``O(d²)``.
PRECONDITIONED_RESIDUALS = 2500
#: The fewest test sequences of the preconditioned fits (all of them when there are fewer).
PRECONDITIONED_MIN_SEQUENCES = 20


def _theta(model: Model, theta: Any, d: int) -> torch.Tensor:
    model.check_theta(theta, d)
    return torch.as_tensor(np.asarray(theta, np.float64) if not isinstance(theta, torch.Tensor)
                           else theta.detach(), dtype=torch.float64)


def _structure(model: Model, theta: torch.Tensor, d: int) -> float:
    th = np.abs(theta.cpu().numpy())
    active = model.active_mask(d)
    top = float(th[active].max()) if active.any() else 0.0
    off = active & ~model.diagonal_mask(d)
    if top == 0.0 or not off.any():
        return 0.0
    return float(th[off].max()) / top


def _ab_mean(model: Model, th: torch.Tensor) -> float:
    return float(torch.as_tensor(model.ab(th)).mean())


def fit_gd_steps(model: Model, theta: Any, x: torch.Tensor, k: int,
                 ts: Sequence[int] | None = None,
                 preconditioner: Preconditioner | str = Preconditioner.SCALAR,
                 side: Side | str = Side.RIGHT) -> GDStepFit:
    """The k steps (von Oswald et al.) or preconditioners (Ahn et al.) that bring k GD steps
    closest to ``model``'s ŷ_t on the prompts ``x``.

    Minimises ``Σ_{t,n} ‖ŷ_t(model) − ŷ_t(GD)‖²`` over the preconditioners of the structure
    ``preconditioner`` on ``side`` (:func:`mesadyn.analysis.gd_fit.fit_gd_predictions`; the
    scalar fit also starts from ``[mean ab, 0, …]``).  The result's ``structure`` is θ's
    largest active entry off the layered diagonals relative to its largest active one (0 at
    Assumption 3.1's structure, and for θ = 0).

    Arguments:
        model: the model of θ.
        theta: its flat θ.
        x: complex (n, T, d) sequences, T >= 2.
        k: the number of GD steps (>= 1).
        ts: the positions compared (default every t = 2..T).
        preconditioner: ``scalar`` (default), ``diagonal`` or ``full``.
        side: ``right`` (default, ``∇L Γ_j``), ``left`` (``Λ_j ∇L``) or ``both``.

    Raises:
        MesadynError: k < 1, an unknown preconditioner or side, x not (n, T, d), θ of the
            wrong length, or a position out of range (each names the value), or arrays that do
            not fit in memory.
    """
    k = check_int("k", k, 1)
    structure = check_choice("preconditioner", preconditioner, Preconditioner)
    where = check_choice("side", side, Side)
    xc = check_x(x, 2)
    d = int(xc.shape[-1])
    th = _theta(model, theta, d)
    times = check_times(ts, int(xc.shape[1]))
    check_fit_size(xc, len(times), k, structure, where)
    with torch.no_grad():
        y_model = model.predict(th, xc)[:, [t - 2 for t in times]].cpu().numpy()
    return fit_iterates(GDIterates(xc, times), y_model, k, structure, (where,),
                        ab_hint=_ab_mean(model, th),
                        structure_of_theta=_structure(model, th, d))[where]


# ---- Proposition 4.1's ratio and Theorem 4.2's MSE -----------------------------------------------
def _last_prediction(model: Model, theta: Any, x: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ŷ_{T_te}, x_{T_te+1})`` of sequences of length ``T_te + 1``, both complex (n, d)."""
    xc = check_x(x, 3)
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
    MSE and the GD fits on the prompts: k scalar steps (``gd_fit``), k steps with full
    preconditioners on each side (``gd_fit_preconditioned``, keyed ``right``, ``left``,
    ``both``) and, for k >= 2, one scalar step (``gd_fit_1``); ``ab`` is ``model.ab(θ)`` for a
    polynomial model (else ``None``)."""

    model: dict[str, object]
    d: int
    T_te: int
    sequences: int
    seed: int
    ab: list[float] | None
    ratio: RatioEstimate
    mse: MSEEstimate
    gd_fit: GDStepFit
    gd_fit_preconditioned: dict[str, GDStepFit]
    gd_fit_1: GDStepFit | None

    def to_dict(self) -> dict[str, object]:
        return {"model": dict(self.model), "d": self.d, "T_te": self.T_te,
                "sequences": self.sequences, "seed": self.seed,
                "ab": None if self.ab is None else list(self.ab),
                "ratio": self.ratio.to_dict(), "mse": self.mse.to_dict(),
                "gd_fit": self.gd_fit.to_dict(),
                "gd_fit_preconditioned": {side: fit.to_dict() for side, fit
                                          in self.gd_fit_preconditioned.items()},
                "gd_fit_1": None if self.gd_fit_1 is None else self.gd_fit_1.to_dict()}


def model_incontext(model: Model, theta: Any, family: Family, T_te: int, n: int, seed: int,
                    k: int | None = None) -> ModelInContext:
    """Draw ``n`` test sequences of length ``T_te + 1`` from ``family`` (seeded, on the CPU) and
    report the ratio (:func:`model_ratio`), the MSE (:func:`model_mse`) and the GD fits on the
    prompts ``x_1..x_{T_te}`` (:func:`fit_gd_steps`, k = ``model.layers`` by default): k scalar
    steps, k steps with full preconditioners on the right, on the left and on both sides (on the
    first prompts, :data:`PRECONDITIONED_RESIDUALS`, with the scalar fit on the same prompts as
    their start and ``scalar_residual``)
    and, for k >= 2, one scalar step, so that a reader sees whether depth and preconditioning
    help.

    Raises:
        MesadynError: T_te < 2, n < 2, k < 1, or θ of the wrong length for ``family.d`` (each
            names the value), or a fit that does not fit in memory.
    """
    T_te = check_int("T_te", T_te, 2)
    n = check_int("n", n, 2)
    k = model.layers if k is None else check_int("k", k, 1)
    d = int(family.d)
    th = _theta(model, theta, d)
    x = check_x(sample_sequences(family, n, T_te + 1, make_generator(int(seed)), "cpu"), 3)
    prompts, truth = x[:, :T_te], x[:, T_te]
    times = list(range(2, T_te + 1))
    few = min(n, max(PRECONDITIONED_MIN_SEQUENCES,
                     math.ceil(PRECONDITIONED_RESIDUALS / (len(times) * d))))
    check_fit_size(prompts, len(times), k, Preconditioner.SCALAR, Side.RIGHT)
    check_fit_size(prompts[:few], len(times), k, Preconditioner.FULL, Side.BOTH)
    with torch.no_grad():  # one forward pass: ŷ_2..ŷ_{T_te}, the last one for the ratio
        pred = model.predict(th, prompts)
    y_model = pred.cpu().numpy()
    gd = GDIterates(prompts, times)
    kw: dict[str, Any] = {"ab_hint": _ab_mean(model, th),
                          "structure_of_theta": _structure(model, th, d)}
    fit = fit_iterates(gd, y_model, k, Preconditioner.SCALAR, **kw)[Side.RIGHT]
    full = fit_iterates(GDIterates(prompts[:few], times), y_model[:few], k, Preconditioner.FULL,
                        tuple(Side), **kw)
    fit_1 = (fit_iterates(gd, y_model, 1, Preconditioner.SCALAR, **kw)[Side.RIGHT] if k >= 2
             else None)
    ab = ([float(v) for v in torch.as_tensor(model.ab(th)).reshape(-1)]
          if model.polynomial else None)
    return ModelInContext(model=model.describe(), d=d, T_te=T_te, sequences=n, seed=int(seed),
                          ab=ab, ratio=ratio_estimate(pred[:, -1], truth),
                          mse=mse_estimate(pred[:, -1], truth), gd_fit=fit,
                          gd_fit_preconditioned={s.value: f for s, f in full.items()},
                          gd_fit_1=fit_1)
