"""k steps of (preconditioned) gradient descent on the in-context least squares (von Oswald et
al. 2023, "Transformers learn in-context by gradient descent"; Ahn et al. 2023, "Transformers
learn to implement preconditioned gradient descent for in-context learning"); the fit of them
to a model's prediction is :mod:`mesadyn.analysis.gd_fit`.

The in-context least squares at position t and its gradient are

    L_OLS,t(W) = ½ Σ_{i=1}^{t−1} ‖x_{i+1} − W x_i‖²,   ∇L_OLS,t(W) = W C_t − B_t,
    C_t = Σ_{i<t} x_i x_i^*,   B_t = Σ_{i<t} x_{i+1} x_i^*,

and step j = 0..k−1 from ``W_0 = 0`` is

    W_{j+1} = W_j − Λ_j ∇L_OLS,t(W_j) Γ_j / (t − 1),   ŷ_t = W_k x_t,

with real d×d preconditioners, the same at every position t: ``Γ_j`` on the right (the
:class:`Side` ``right``, ``Λ_j = I``), ``Λ_j`` on the left (``left``, ``Γ_j = I``) or both.
Their structure is a :class:`Preconditioner`: ``scalar`` (``η_j I``: plain GD with step
``η_j/(t−1)``, the same on either side; Corollary 4.1 is k = 1, ``η = ab``), ``diagonal`` or
``full``.

**Right and left.**  ``∇L Γ = (W C_t − B_t) Γ`` acts on the side of the input covariance:
``Γ = (t−1) C_t^{-1}`` makes one step land on the least-squares solution ``B_t C_t^{-1}``
(Newton's step), the preconditioner Ahn et al. prove trained linear transformers implement for
scalar outputs.  Here the outputs are d-dimensional, and a left ``Λ_j`` acts on them: the
one-layer model with dense ``W^KQ_32``, ``W^PV_12`` and no other block is exactly
``ŷ_t = W^PV_12 B_t W^KQ_32 x_t/(t−1)`` (Appendix B.5), one step with both.  The data say the
left side matters: on the trained two-layer saddle for ``x_1 = 1_d`` (d = 2, T = 6) full right
Γ_j leave a relative residual of 0.32, full left Λ_j 0.24 and both 0.15, against 0.36 for
scalar steps, and the paper's one-layer fixed point there is one two-sided step to 1e-14
while either side alone leaves 0.30 and 0.10 (``studies/deep_models.py``, docs/models.md),
so every side is offered.

**The closed form** (:class:`GDIterates`, the fit's): ``G_j = B_t − W_j C_t = −∇L_OLS,t(W_j)``
and ``W_{j+1} = W_j + Λ_j G_j Γ_j/(t−1)``.  ŷ is linear in each Λ_j and each Γ_j.  A change
δ of ``W_{j+1}`` moves ŷ by ``Σ_{ef} Z_{j+1}[a, e, f] δ_{ef}``, with ``Z_k[a, e, f] = δ_{ae}
(x_t)_f`` and ``Z_j[a, e, f] = Z_{j+1}[a, e, f] − Σ_{bc} (Λ_j)_{be} Z_{j+1}[a, b, c]
(C_t Γ_j)_{fc}/(t−1)``, so the exact Jacobian is

    ∂ŷ_a/∂(Γ_j)_{bf} = Σ_e Z_{j+1}[a, e, f] (Λ_j G_j)_{eb}/(t−1),
    ∂ŷ_a/∂(Λ_j)_{eb} = Σ_f Z_{j+1}[a, e, f] (G_j Γ_j)_{bf}/(t−1).

:func:`gd_prediction` takes the gradient by autodiff (:func:`mesadyn.analysis.mesa.ols_gd_step`)
instead: an independent computation of the same iterates.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..errors import MesadynError, check_int
from .mesa import ols_gd_step

__all__ = ["GDIterates", "Preconditioner", "Side", "check_times", "check_x", "gd_prediction"]


class Preconditioner(enum.StrEnum):
    """The structure of every step's preconditioner: ``scalar`` (``η_j I``, plain GD),
    ``diagonal`` or ``full`` (any real d×d matrix)."""

    SCALAR = "scalar"
    DIAGONAL = "diagonal"
    FULL = "full"

    def size(self, d: int) -> int:
        """The free parameters of one d×d preconditioner."""
        return {"scalar": 1, "diagonal": d, "full": d * d}[self.value]

    def matrices(self, p: np.ndarray, k: int, d: int) -> np.ndarray:
        """The (k, d, d) preconditioners of the parameters ``p`` (k·:meth:`size`)."""
        if self is Preconditioner.SCALAR:
            return p.reshape(k, 1, 1) * np.eye(d)
        if self is Preconditioner.DIAGONAL:
            return p.reshape(k, d)[:, :, None] * np.eye(d)
        return p.reshape(k, d, d).copy()

    def params(self, mats: np.ndarray) -> np.ndarray:
        """The parameters of the nearest (Frobenius) matrices of this structure to the (k, d, d)
        ``mats``: the mean diagonal entry, the diagonal, or every entry."""
        if self is Preconditioner.SCALAR:
            return np.einsum("jbb->j", mats) / mats.shape[-1]
        if self is Preconditioner.DIAGONAL:
            return np.einsum("jbb->jb", mats).ravel().copy()
        return mats.ravel().copy()

    def columns(self, J: np.ndarray) -> np.ndarray:
        """The derivatives by this structure's parameters from those by every entry of one
        preconditioner (J: (..., d, d) → (..., :meth:`size`))."""
        if self is Preconditioner.SCALAR:
            return np.einsum("...bb->...", J)[..., None]
        if self is Preconditioner.DIAGONAL:
            return np.einsum("...bb->...b", J)
        return J.reshape(*J.shape[:-2], -1)


class Side(enum.StrEnum):
    """Where the preconditioners act on the gradient: ``right`` (``∇L Γ_j``, on the inputs),
    ``left`` (``Λ_j ∇L``, on the outputs) or ``both`` (``Λ_j ∇L Γ_j``)."""

    RIGHT = "right"
    LEFT = "left"
    BOTH = "both"

    @property
    def left(self) -> bool:
        return self is not Side.RIGHT

    @property
    def right(self) -> bool:
        return self is not Side.LEFT


# ---- the iterates ---------------------------------------------------------------------------
def check_x(x: Any, minimum_T: int) -> torch.Tensor:
    """``x`` as complex (n, T, d) with T >= ``minimum_T``, or one line naming its shape."""
    if not isinstance(x, torch.Tensor) or x.ndim != 3:
        raise MesadynError(f"x must be a tensor of shape (n, T, d), got "
                           f"{tuple(np.shape(x))}")
    if int(x.shape[1]) < minimum_T:
        raise MesadynError(f"x must have at least T={minimum_T} tokens, got T={x.shape[1]}")
    return x.to(torch.complex128)


def check_times(ts: Sequence[int] | None, T: int) -> list[int]:
    """The positions compared: ``ts`` (default 2..T), each ``2 <= t <= T``."""
    out = list(range(2, T + 1)) if ts is None else [check_int("t", t, 2) for t in ts]
    if not out:
        raise MesadynError("give at least one position t")
    bad = [t for t in out if t > T]
    if bad:
        raise MesadynError(f"every position t must satisfy 2 <= t <= T={T}, got t={bad[0]}")
    return out


def _matrices(name: str, steps: Sequence[Any], d: int) -> list[np.ndarray]:
    """Each step as a real (d, d) matrix: a number η is ``η I``."""
    out = []
    for j, s in enumerate(steps):
        g = np.asarray(s, dtype=np.float64)
        if g.ndim == 0:
            g = float(g) * np.eye(d)
        if g.shape != (d, d):
            raise MesadynError(f"{name}[{j}] must be a number or a real {d}x{d} matrix, got "
                               f"shape {g.shape}")
        out.append(g)
    return out


def gd_prediction(x: torch.Tensor, t: int, steps: Sequence[Any],
                  left: Sequence[Any] | None = None) -> torch.Tensor:
    """ŷ_t = W_k x_t after k = ``len(steps)`` (preconditioned) GD steps on ``L_OLS,t`` from
    ``W_0 = 0``: ``W_{j+1} = W_j − Λ_j ∇L_OLS,t(W_j) Γ_j/(t−1)``, the gradient by autodiff
    (:func:`mesadyn.analysis.mesa.ols_gd_step`).  Corollary 4.1 is k = 1, ``steps = [ab]``.

    Arguments:
        x: complex (n, T, d) sequences.
        t: the position predicted, ``2 <= t <= T`` (1-indexed).
        steps: the k >= 1 right preconditioners ``Γ_j``, each a number ``η_j`` (``η_j I``) or
            a real d×d matrix.
        left: the k left preconditioners ``Λ_j`` likewise (default ``I``).

    Returns:
        ŷ_t, complex (n, d).

    Raises:
        MesadynError: x not (n, T, d), t out of range, no step, ``left`` not k long, or a step
            of the wrong shape.
    """
    xc = check_x(x, 2)
    d = int(xc.shape[-1])
    gammas = _matrices("steps", steps, d)
    if not gammas:
        raise MesadynError("steps must hold at least one step (k >= 1), got none")
    lambdas = _matrices("left", [1.0] * len(gammas) if left is None else left, d)
    if len(lambdas) != len(gammas):
        raise MesadynError(f"left must hold one matrix per step ({len(gammas)}), got "
                           f"{len(lambdas)}")
    t = check_int("t", t, 2)
    W = torch.zeros(xc.shape[0], d, d, dtype=torch.complex128)
    for lam, gam in zip(lambdas, gammas, strict=True):
        grad = W - ols_gd_step(xc, t, 1.0, W0=W)  # ∇L_OLS,t(W) by autodiff
        L, R = (torch.from_numpy(m).to(torch.complex128) for m in (lam, gam))
        W = W - L @ grad @ R / (t - 1)
    return torch.einsum("nab,nb->na", W, xc[:, t - 1])


class GDIterates:
    """The closed form of :func:`gd_prediction` at the positions ``ts`` of the prompts ``x``
    (numpy): ``B_t``, ``C_t`` and ``x_t`` as (n, m, ·) arrays for the m positions."""

    def __init__(self, x: torch.Tensor, ts: Sequence[int] | None = None):
        xc = check_x(x, 2)
        self.times = tuple(check_times(ts, int(xc.shape[1])))
        idx = torch.as_tensor([t - 2 for t in self.times], dtype=torch.long, device=xc.device)
        B = torch.cumsum(xc[:, 1:, :, None] * xc[:, :-1, None, :].conj(), dim=1)  # Σ_{i<t}
        C = torch.cumsum(xc[:, :-1, :, None] * xc[:, :-1, None, :].conj(), dim=1)
        self.B = B[:, idx].cpu().numpy()
        self.C = C[:, idx].cpu().numpy()
        self.xt = xc[:, idx + 1].cpu().numpy()
        self.rho = np.asarray([t - 1 for t in self.times], np.float64)[None, :, None, None]

    @property
    def d(self) -> int:
        return int(self.xt.shape[-1])

    def _forward(self, gammas: np.ndarray, lambdas: np.ndarray | None
                 ) -> tuple[np.ndarray, list[np.ndarray]]:
        """``W_k`` and the ``G_j = −∇L_OLS,t(W_j)``, j < k."""
        W = np.zeros_like(self.B)
        Gs = []
        for j, gam in enumerate(gammas):
            G = self.B - W @ self.C
            Gs.append(G)
            step = G @ gam if lambdas is None else lambdas[j] @ G @ gam
            W = W + step / self.rho
        return W, Gs

    def predict(self, gammas: np.ndarray, lambdas: np.ndarray | None = None) -> np.ndarray:
        """ŷ_t at every position for the real (k, d, d) ``gammas`` (right) and ``lambdas``
        (left, default ``I``): complex (n, m, d)."""
        W, _ = self._forward(gammas, lambdas)
        return np.einsum("nmab,nmb->nma", W, self.xt)

    def jacobian(self, gammas: np.ndarray, lambdas: np.ndarray, structure: Preconditioner,
                 side: Side) -> np.ndarray:
        """``∂ŷ_t/∂p``, complex (n, m, d, P), for the parameters p of ``side`` (the Λ_j's, then
        the Γ_j's, step by step, each by ``structure``), by the transport ``Z_j`` of the
        module's docstring."""
        _, Gs = self._forward(gammas, lambdas)
        if side is Side.RIGHT:
            return self._right_jacobian(gammas, Gs, structure)
        d = self.d
        Z = np.eye(d)[None, None, :, :, None] * self.xt[:, :, None, None, :]  # Z_k[a, e, f]
        left: list[np.ndarray] = []
        right: list[np.ndarray] = []
        for j in range(len(gammas) - 1, -1, -1):  # batched matmuls over (n, m, a)
            if side.right:  # [a, b, f] = Σ_e (Λ_j G_j)_{eb} Z[a, e, f]
                H = lambdas[j] @ Gs[j] / self.rho
                right.insert(0, structure.columns(np.swapaxes(H, -1, -2)[:, :, None] @ Z))
            if side.left:  # [a, e, b] = Σ_f Z[a, e, f] (G_j Γ_j)_{bf}
                K = Gs[j] @ gammas[j] / self.rho
                left.insert(0, structure.columns(Z @ np.swapaxes(K, -1, -2)[:, :, None]))
            if j > 0:  # Z[a, e, f] −= Σ_{b,c} (Λ_j)_{be} Z[a, b, c] (C_t Γ_j)_{fc}/(t−1)
                M = self.C @ gammas[j] / self.rho
                Z = Z - (lambdas[j].T @ Z) @ np.swapaxes(M, -1, -2)[:, :, None]
        return np.concatenate(left + right, axis=-1)

    def _right_jacobian(self, gammas: np.ndarray, Gs: list[np.ndarray],
                        structure: Preconditioner) -> np.ndarray:
        """:meth:`jacobian` for ``Λ_j = I``: then ``Z_{j+1}[a, e, f] = δ_{ae} (u_j)_f`` with
        ``u_{k−1} = x_t``, ``u_{j−1} = u_j − C_t Γ_j u_j/(t−1)``, so ``∂ŷ_a/∂(Γ_j)_{bf} =
        (G_j)_{ab} (u_j)_f/(t−1)``."""
        rho = self.rho[..., 0]
        u = self.xt
        cols: list[np.ndarray] = []
        for j in range(len(gammas) - 1, -1, -1):
            G = Gs[j]
            if structure is Preconditioner.SCALAR:
                cols.insert(0, np.einsum("nmab,nmb->nma", G, u / rho)[..., None])
            elif structure is Preconditioner.DIAGONAL:
                cols.insert(0, G * (u / rho)[:, :, None, :])
            else:
                cols.insert(0, (G[..., :, None] * (u / rho)[:, :, None, None, :]).reshape(
                    *G.shape[:3], -1))
            if j > 0:
                u = u - np.einsum("nmab,nmb->nma", self.C, u @ gammas[j].T / rho)
        return np.concatenate(cols, axis=-1)
