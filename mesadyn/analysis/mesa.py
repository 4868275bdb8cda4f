"""The trained transformer as a mesa-optimizer (Corollary 4.1, Appendix A.3 and B.5).

Corollary 4.1: at the fixed point of Theorem 4.1 (``W^KQ_32 = ã I``, ``W^PV_12 = b̃ I``, every
other block 0) the prediction is

    ŷ_t = Ŵ_t x_t,   Ŵ_t = W_0 − η_t ∇_W L_OLS,t(W_0),  W_0 = 0,  η_t = ãb̃/(t−1),
    L_OLS,t(W) = ½ Σ_{i=1}^{t−1} ‖x_{i+1} − W x_i‖²,

one gradient-descent step on the in-context least-squares problem.  Appendix B.5 (x_1 = 1_d):
with dense ``W^KQ_32 = W_1``, ``W^PV_12 = W_2`` and the other blocks 0,

    ŷ_t = (1/(t−1)) Σ_{i=1}^{t} W_2 x_i x_{i−1}^* W_1 x_t,

a preconditioned step.  The gradient of ``L_OLS`` is taken here by autodiff (an independent
computation from the closed form ``Σ x_{i+1} x_i^*``), and both are compared with the model's
own forward pass :func:`mesadyn.model.predict`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import MesadynError
from ..model import P_and_A, block, dim_of, predict, unpack
from ..model import ab as model_ab


def ols_gd_step(x: torch.Tensor, t: int, step: torch.Tensor | float,
                W0: torch.Tensor | None = None) -> torch.Tensor:
    """One GD step ``W0 − step·∇_W L_OLS,t(W0)`` for each sequence (Corollary 4.1), by autodiff.

    ``x`` is complex (n, T, d); ``t`` is the prediction index (2 <= t <= T, 1-indexed) so the
    OLS problem uses the pairs ``(x_i, x_{i+1})``, i = 1..t−1.  ``step`` is a scalar or an (n,)
    tensor.  torch's complex gradient of a real loss is the conjugate Wirtinger direction
    ``2 ∂L/∂W̄``, which is the steepest-descent direction, so ``W0 − η·grad`` is plain GD.
    Returns complex (n, d, d).
    """
    if x.ndim != 3:
        raise MesadynError(f"x must have shape (n, T, d), got {tuple(x.shape)}")
    n, T, d = x.shape
    if not 2 <= t <= T:
        raise MesadynError(f"t must satisfy 2 <= t <= T={T}, got t={t}")
    x = x.to(torch.complex128)
    if W0 is None:
        W0 = torch.zeros(n, d, d, dtype=torch.complex128, device=x.device)
    W = W0.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        xi = x[:, : t - 1]  # x_1..x_{t−1}
        xn = x[:, 1:t]  # x_2..x_t
        r = xn - torch.einsum("nab,nib->nia", W, xi)
        loss = 0.5 * (r.real.square() + r.imag.square()).sum()
        (g,) = torch.autograd.grad(loss, W)
    eta = torch.as_tensor(step, dtype=torch.float64, device=x.device)
    if eta.ndim == 1:
        eta = eta[:, None, None]
    return (W0 - eta * g).detach()


@dataclass(frozen=True)
class MesaCheck:
    """Corollary 4.1 measured on one θ and a batch of sequences."""

    ab: float  # the common product ãb̃ used as the step numerator
    ab_spread: float  # max − min of the per-coordinate products diag(W^KQ_32)·diag(W^PV_12)
    structure_residual: float  # largest |entry| that Theorem 4.1's structure says is 0
    max_abs_err: float  # max_t,n ‖ŷ_t(model) − Ŵ_t x_t‖_∞
    max_rel_err: float  # max_abs_err / max |ŷ_t(model)|
    t_checked: tuple[int, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "ab": self.ab, "ab_spread": self.ab_spread,
            "structure_residual": self.structure_residual,
            "max_abs_err": self.max_abs_err, "max_rel_err": self.max_rel_err,
            "t_checked": list(self.t_checked),
        }


def structure_residual(theta: torch.Tensor) -> float:
    """Largest |entry| of the active blocks that Theorem 4.1 says vanish.

    That is every entry of ``P`` and ``A`` except the diagonals of ``W^KQ_32`` and ``W^PV_12``.
    """
    theta = torch.as_tensor(theta, dtype=torch.float64)
    d = dim_of(theta)
    P, A = P_and_A(theta)
    P = P.clone()
    A = A.clone()
    idx = torch.arange(d)
    P[idx, idx] = 0.0  # W^PV_12 diagonal
    A[d + idx, idx] = 0.0  # W^KQ_32 diagonal
    return float(max(P.abs().max(), A.abs().max()))


def mesa_check(theta: torch.Tensor, x: torch.Tensor,
               ts: list[int] | None = None) -> MesaCheck:
    """Compare the model's ŷ_t with one OLS GD step of size ``ab/(t−1)`` (Corollary 4.1).

    ``ab`` is the mean of the per-coordinate products; ``ab_spread`` says how far from a
    scalar step θ is.  The comparison is meaningful at a θ with Theorem 4.1's structure
    (``structure_residual`` ≈ 0 and ``ab_spread`` ≈ 0), e.g. the end point of the exact flow
    from Assumption 3.1.
    """
    theta = torch.as_tensor(theta, dtype=torch.float64)
    if x.ndim != 3:
        raise MesadynError(f"x must have shape (n, T, d), got {tuple(x.shape)}")
    T = x.shape[1]
    prods = model_ab(theta)
    ab = float(prods.mean())
    yhat = predict(theta, x)  # [:, k] is ŷ_{k+2}
    ts = list(range(2, T + 1)) if ts is None else [int(t) for t in ts]
    err = 0.0
    scale = 0.0
    for t in ts:
        What = ols_gd_step(x, t, ab / (t - 1))
        y_gd = torch.einsum("nab,nb->na", What, x[:, t - 1].to(torch.complex128))
        y_model = yhat[:, t - 2]
        err = max(err, float((y_model - y_gd).abs().max()))
        scale = max(scale, float(y_model.abs().max()))
    return MesaCheck(
        ab=ab,
        ab_spread=float(prods.max() - prods.min()),
        structure_residual=structure_residual(theta),
        max_abs_err=err,
        max_rel_err=err / scale if scale > 0 else float("nan"),
        t_checked=tuple(ts),
    )


def preconditioned_predictions(theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Appendix B.5: ``ŷ_t = W_2 [(1/(t−1)) Σ_{i=1}^{t−1} x_{i+1} x_i^*] W_1 x_t``, t = 2..T.

    Uses only ``W_1 = W^KQ_32`` and ``W_2 = W^PV_12`` of θ (the other blocks are assumed 0;
    compare with :func:`mesadyn.model.predict` to test that).  Returns complex (n, T−1, d)
    with ``[:, k]`` = ŷ_{k+2}, the layout of :func:`mesadyn.model.predict`.
    """
    theta = torch.as_tensor(theta, dtype=torch.float64)
    W_KQ, W_PV = unpack(theta)
    W1 = block(W_KQ, 3, 2).to(torch.complex128)
    W2 = block(W_PV, 1, 2).to(torch.complex128)
    x = x.to(torch.complex128)
    n, T, d = x.shape
    C = torch.cumsum(x[:, 1:, :, None] * x[:, :-1, None, :].conj(), dim=1)  # Σ_{i<t} x_{i+1}x_i^*
    rho = torch.arange(1, T, dtype=torch.float64)
    q = torch.einsum("ab,ntb->nta", W1, x[:, 1:])  # W_1 x_t, t = 2..T
    y = torch.einsum("ntab,ntb->nta", C, q) / rho[None, :, None]
    return torch.einsum("ab,ntb->nta", W2, y)


def ab_per_coordinate(theta: torch.Tensor) -> np.ndarray:
    """``diag(W^KQ_32) ⊙ diag(W^PV_12)`` as a numpy array."""
    return model_ab(torch.as_tensor(theta, dtype=torch.float64)).detach().cpu().numpy()
