"""The AR-batch loss kernels of the sampled fields: Eq. 2's per-sequence loss on fixed AR
draws ``(x_1, λ)`` without storing the sequences.

:class:`ARBatch` splits a chunk of draws by the cheapest exact path: sequences with one nonzero
entry of ``x_1`` (Example 4.1) sum over t in closed form (:class:`_SingleCoordinate`); the
others take the closed form of the prefix Grams (:class:`_ClosedForm`) unless two of their
phases nearly coincide, which take the prefix Grams themselves (:class:`_PrefixGram`).  The
closed form and the prefix Grams run either through torch's batched products or through the
fused numba kernels of :mod:`._fused` (:class:`Kernel`; their autograd functions are in
:mod:`._ar_autograd`).  The model's own forward pass (:func:`mesadyn.model.predict_ar`) gives
the same numbers (tested).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import StrEnum

import numpy as np
import torch

from ..errors import MesadynError
from ..model import (
    NEAR_ONE,
    ar_matrices,
    gram_kernel,
    gram_prefix,
    near_one,
    phase_powers,
    ratios,
    unit_modulus,
    unpack_batch,
    yhat_ar,
)
from ._ar_autograd import _ClosedFormLoss, _FusedLoss

__all__ = ["CLOSED_FORM_MIN_T", "NEAR_ONE", "ARBatch", "Kernel", "sequence_loss_ar",
           "single_coordinate"]


class ARBatch:
    """Precomputed, θ-independent parts of Eq. 2 for fixed draws ``(x_1, λ)`` (t = 2..T−1).

    A sequence whose ``x_1`` has at most one nonzero entry (Example 4.1's sparse
    ``x_1 = ±c e_i``) takes :class:`_SingleCoordinate`, whose sum over t is closed.  Every other
    sequence takes the closed form (:class:`_ClosedForm`, two d×d matrices instead of the prefix
    Grams) unless two of its ratios ``z_lj = λ_l λ̄_j`` come closer to 1 than :data:`NEAR_ONE`
    without being 1; those few take the prefix-Gram path (:class:`_PrefixGram`) so that the
    cancellation in ``(z − z^t)/(1 − z)`` never costs accuracy.  Below :data:`CLOSED_FORM_MIN_T`
    those take the prefix-Gram path too (cheaper there).  The
    split is fixed here; :meth:`sequence_loss` returns the sequences in the order given.
    ``kernel`` picks the :class:`Kernel` of the closed form and the prefix Grams (``None``: the
    fastest that fits each).
    """

    def __init__(self, x1: torch.Tensor, lam: torch.Tensor, T: int,
                 kernel: Kernel | None = None):
        self.x1 = x1.to(torch.float64)
        self.lam = lam
        self.T = T
        self.unit = unit_modulus(lam)  # |λ| = 1: checked once here, not per call
        z = ratios(lam, self.unit)
        single = single_coordinate(self.x1)
        near = (near_one(z).any(dim=(1, 2)) | (T < CLOSED_FORM_MIN_T)) & ~single
        groups = (single, ~single & ~near, near)
        index = [g.nonzero().squeeze(1) for g in groups]
        self.n_single, _, self.n_prefix_gram = (int(i.numel()) for i in index)
        self._parts: list[_SingleCoordinate | _ClosedForm | _PrefixGram] = []
        one, fast, slow = index
        if one.numel():
            self._parts.append(_SingleCoordinate(self.x1[one], lam[one], T, self.unit))
        if fast.numel():
            self._parts.append(_ClosedForm(self.x1[fast], lam[fast], T, self.unit, z[fast],
                                           kernel))
        if slow.numel():
            self._parts.append(_PrefixGram(self.x1[slow], lam[slow], T, self.unit, kernel))
        mixed = len(self._parts) > 1
        self._order = torch.argsort(torch.cat(index)) if mixed else None

    def nbytes(self) -> int:
        return sum(p.nbytes() for p in self._parts)

    def sequence_loss(self, theta: torch.Tensor) -> torch.Tensor:
        """Per-sequence ``Σ_{t=2}^{T−1} ½‖ŷ_t − x_{t+1}‖²``: shape (n,), or (k, n) for a batch
        of θ of shape (k, 18d²)."""
        parts = [p.sequence_loss(theta) for p in self._parts]
        if self._order is None:
            return parts[0]
        return torch.cat(parts, dim=-1)[..., self._order]


class _SingleCoordinate:
    """Sequences with ``x_1 = c e_k`` (at most one nonzero entry; Example 4.1): Eq. 2 in O(d).

    Every token lies in ``span(f_1, f_2)`` (``f_1 = (e_k, 0)``, ``f_2 = (0, e_k)``):
    ``e_1 = c f_1`` and ``e_i = c λ^{i−2} v`` for i >= 2, ``v = λ f_1 + f_2``, ``λ = λ_k``.  So
    ``Σ_{i=2}^t e_i e_i^* = c² S_t v v^*`` with ``S_t = Σ_{j<t−1} |λ|^{2j}`` and

        ŷ_t − x_{t+1} = λ^{t−2} [ (1/ρ_t) a + (S_t/ρ_t) g + h ],
        a = c³ (f_1^T A v) P f_1,   g = c³ (v^* A v) P v,   h = −c λ² e_k,

    whose squared norm, summed over t = 2..T−1 with the weights ``|λ|^{2(t−2)}``, is the
    quadratic form ``½ Σ_ij Q_ij Re⟨u_i, u_j⟩`` of ``u = (a, g, h)`` with the θ-independent 3×3
    ``Q = Σ_t |λ|^{2(t−2)} φ_t φ_t^T``, ``φ_t = (1/ρ_t, S_t/ρ_t, 1)``: no sum over t per call.
    """

    def __init__(self, x1: torch.Tensor, lam: torch.Tensor, T: int, unit: bool):
        nz = x1 != 0
        self.k = nz.to(torch.int64).argmax(dim=1)  # the nonzero entry (0 where x_1 = 0)
        rows = torch.arange(x1.shape[0], device=x1.device)
        self.c = x1[rows, self.k]
        lk = lam[rows, self.k]
        self.lam = torch.polar(torch.ones_like(lk.real), torch.angle(lk)) if unit else lk
        self.onehot = torch.nn.functional.one_hot(self.k, x1.shape[1]).to(torch.float64)
        mod2 = self.lam.abs().square()[:, None]  # |λ|², (n, 1)
        j = torch.arange(T - 2, device=x1.device, dtype=torch.float64)
        w = mod2**j  # |λ|^{2(t−2)} for t = 2..T−1, (n, τ)
        S = torch.cumsum(w, dim=1)  # S_t = Σ_{j=0}^{t−2} |λ|^{2j}
        rho = j + 1
        phi = torch.stack([1 / rho.expand_as(S), S / rho, torch.ones_like(S)], dim=1)
        self.Q = torch.einsum("nit,njt,nt->nij", phi, phi, w)  # (n, 3, 3)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size()
                   for t in (self.k, self.c, self.lam, self.onehot, self.Q))

    def sequence_loss(self, theta: torch.Tensor) -> torch.Tensor:
        batched = theta.ndim == 2
        th = theta if batched else theta[None]
        W_KQ, W_PV = unpack_batch(th)
        d = self.onehot.shape[1]
        k = self.k
        P0 = W_PV[:, :d, d : 2 * d][:, :, k].transpose(1, 2)  # P f_1: (k, n, d)
        P1 = W_PV[:, :d, 2 * d :][:, :, k].transpose(1, 2)
        A = W_KQ[:, d:, d:]
        a00, a01 = A[:, k, k], A[:, k, d + k]  # (k, n)
        a10, a11 = A[:, d + k, k], A[:, d + k, d + k]
        lam = self.lam
        alpha = lam * a00 + a01  # f_1^T A v
        beta = lam.abs().square() * a00 + lam.conj() * a01 + lam * a10 + a11  # v^* A v
        c3 = self.c**3
        a = (c3 * alpha)[..., None] * P0
        g = (c3 * beta)[..., None] * (lam[:, None] * P0 + P1)
        h = (-self.c * lam.square())[:, None] * self.onehot
        u = torch.stack([a, g, h.expand_as(g)], dim=-2)  # (k, n, 3, d)
        gram = (u @ u.conj().transpose(-1, -2)).real
        out = 0.5 * (self.Q * gram).sum(dim=(-2, -1))
        return out if batched else out[0]



#: Shorter sequences take the prefix-Gram path: its (m, T, d, d) tensor is small there and the
#: closed form's fixed per-sequence work (its d×d matrices and their gradients) dominates.
#: Measured crossover (loss + gradient, m = 10⁴, d = 5, one thread, paired runs): the
#: prefix-Gram path is 1.6x faster at T = 10 and 1.1x at T = 20, the closed form 1.3x faster at
#: T = 30 and 1.5x at T = 100.  With the fused kernels (n = 4000): prefix Grams 0.4–0.9x the
#: closed form's time at T = 8–20, 1.2–2.1x at T = 26–50.
CLOSED_FORM_MIN_T = 26


def single_coordinate(x1: torch.Tensor) -> torch.Tensor:
    """True for the draws whose ``x_1`` has at most one nonzero entry (:class:`ARBatch` sums
    their t in closed form)."""
    return (x1 != 0).sum(dim=-1) <= 1



class Kernel(StrEnum):
    """How :class:`ARBatch` evaluates its closed-form and prefix-Gram parts (the numbers agree
    to rounding).

    ``fused``: one compiled loop per sequence from θ to its loss and gradient
    (:mod:`._fused`, numba), on the CPU in complex128 (the closed form also needs ``E``
    the identity or zero: no exactly equal pair of phases off the diagonal).  ``batched``:
    torch's batched products; any device and dtype, and the path of every double backward.
    """

    fused = "fused"
    batched = "batched"


class _FusablePart(ABC):
    """A part of :class:`ARBatch` that :class:`_FusedLoss` can evaluate (the closed form and
    the prefix Grams).

    A subclass provides the torch path (:meth:`torch_loss`: differentiable twice; every device)
    and the fused one (:meth:`fused_loss`: one call of :mod:`._fused`), sets
    :attr:`x1`, :attr:`lam` and :attr:`unit`, then calls :meth:`_set_kernel` (which sets
    :attr:`kernel`, :attr:`lc` and :attr:`dx`); :meth:`sequence_loss` picks the path.
    """

    x1: torch.Tensor  # (n, d) real
    lam: torch.Tensor  # (n, d) complex
    unit: bool  # every |λ| = 1
    kernel: Kernel
    lc: torch.Tensor  # Λ^{-1} (n, d): λ̄ when |λ| = 1, else 1/λ
    dx: torch.Tensor  # −x_1 ∘ λ (n, d): the target is x_{t+1} = −dx ∘ W_t

    def _set_kernel(self, kernel: Kernel | None, fusable: bool, why: str) -> None:
        """Resolve ``kernel`` (``None``: fused where it applies) and the fused inputs."""
        if kernel is Kernel.fused and not fusable:
            raise MesadynError(f"the fused kernel needs {why}")
        self.kernel = kernel or (Kernel.fused if fusable else Kernel.batched)
        self.lc = (self.lam.conj() if self.unit else 1 / self.lam).resolve_conj().contiguous()
        self.dx = -(self.lam * self.x1).contiguous()

    @property
    @abstractmethod
    def tau(self) -> int:
        """The number of steps t summed (T − 2)."""

    @abstractmethod
    def torch_loss(self, theta: torch.Tensor) -> torch.Tensor:
        """Per-sequence loss by torch operations: (n,) for a flat θ, (k, n) for a batch."""

    @abstractmethod
    def fused_loss(self, blocks: np.ndarray, lo: int, hi: int, loss: np.ndarray,
                   grad: np.ndarray, need: bool) -> None:
        """Rows ``lo..hi−1`` of the loss and (when ``need``) its gradient in θ's blocks
        (:data:`._fused.BLOCKS`), in place, without the GIL."""

    def sequence_loss(self, theta: torch.Tensor) -> torch.Tensor:
        """Per-sequence ``Σ_t ½‖ŷ_t − x_{t+1}‖²`` by :attr:`kernel`: (n,) or (k, n)."""
        if self.kernel is Kernel.batched:
            return self.torch_loss(theta)
        batched = theta.ndim == 2
        out = torch.stack([_FusedLoss.apply(th, self)
                           for th in (theta if batched else theta[None])])
        return out if batched else out[0]


class _PrefixGram(_FusablePart):
    """The prefix-Gram path: stores ``G'_t = Σ_{i=2}^t w_i w_i^*`` (n, T−2, d, d)."""

    def __init__(self, x1: torch.Tensor, lam: torch.Tensor, T: int, unit: bool,
                 kernel: Kernel | None = None):
        self.x1, self.lam, self.unit = x1.contiguous(), lam, unit
        w = phase_powers(lam, T)
        self.rho = torch.arange(1, T - 1, device=lam.device, dtype=torch.float64)
        self.inv_rho = 1 / self.rho
        self.W = w[:, 1 : T - 1].contiguous()  # W_t = w_t for t = 2..T−1, (n, T − 2, d)
        self.G = gram_prefix(w[:, : T - 1])
        self.target = (w[:, 2:] * x1.to(torch.complex128)[:, None, :]).contiguous()
        self._set_kernel(kernel, lam.device.type == "cpu" and w.dtype == torch.complex128,
                         "CPU complex128 draws")

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size()
                   for t in (self.W, self.G, self.target, self.lc, self.dx))

    @property
    def tau(self) -> int:
        return int(self.W.shape[1])

    def torch_loss(self, theta: torch.Tensor) -> torch.Tensor:
        w = self.W / self.rho[None, :, None]  # w_t / ρ_t
        r = yhat_ar(theta, self.x1, self.lam, w, self.G, self.unit) - self.target
        return 0.5 * torch.view_as_real(r).square().sum(dim=(-3, -2, -1))

    def fused_loss(self, blocks: np.ndarray, lo: int, hi: int, loss: np.ndarray,
                   grad: np.ndarray, need: bool) -> None:
        from . import _fused

        _fused.prefix_gram_loss(blocks, self.x1.numpy(), self.lc.numpy(), self.dx.numpy(),
                                self.W.numpy(), self.inv_rho.numpy(), lo, hi, loss, grad, need)



class _ClosedForm(_FusablePart):
    """The closed-form path: ``G'_t`` through two θ-independent d×d matrices per sequence.

    With ``z_lj = λ_l λ̄_j`` and ``W_t = λ^{t−1}``, ``G'_t[l, j] = Σ_{s=1}^{t−1} z_lj^s`` is
    ``K_lj (1 − W_t[l] W̄_t[j])`` with ``K = z/(1 − z)`` where ``z ≠ 1`` and ``(t−1) E_lj``
    where ``z = 1`` (``E``: the diagonal when ``|λ| = 1``, and any exactly equal pair).  So

        ŷ_t − x_{t+1} = C W_t/ρ_t + P̃ s_t − X Λ W_t,
        s_t = E h_t − (W_t/ρ_t) ∘ K (W̄_t ∘ h_t),   h_t = Ã W_t,   C = (P_0 x_1) s_1^T + P̃ K Ã:

    per (sequence, t) three d×d products, and only ``W`` (n, d, τ), τ = T − 2, is stored
    (time-last, which the batched products prefer), besides ``K`` and ``E``.
    """

    def __init__(self, x1: torch.Tensor, lam: torch.Tensor, T: int, unit: bool,
                 z: torch.Tensor, kernel: Kernel | None = None):
        self.x1, self.lam, self.unit = x1.contiguous(), lam, unit
        d = x1.shape[1]
        self.W = phase_powers(lam, T)[:, 1 : T - 1].transpose(1, 2).contiguous()
        self.inv_rho = 1 / torch.arange(1, T - 1, device=lam.device, dtype=torch.float64)
        one = z == 1
        self.K = gram_kernel(z)
        self.KT = self.K.transpose(1, 2).contiguous()
        eye = torch.eye(d, dtype=torch.bool, device=lam.device)
        #: E as a matrix, or None when it is the identity (|λ| = 1, distinct λ) or zero (|λ| ≠ 1)
        self.E: torch.Tensor | None = None
        self.E_is_eye = bool((one == eye).all())
        if not self.E_is_eye and bool(one.any()):
            self.E = one.to(torch.complex128)
        self._set_kernel(kernel, (lam.device.type == "cpu" and self.W.dtype == torch.complex128
                                  and self.E is None),
                         "CPU complex128 draws whose E is the identity or zero (no exactly "
                         "equal pair of phases off the diagonal)")

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size()
                   for t in (self.W, self.dx, self.lc, self.K, self.KT))

    def matrices(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(Ã, P̃, C)`` for a batch of θ (k, 18d²): each (k, n, d, d), differentiable."""
        Atil, Ptil, p0x, s1 = ar_matrices(theta, self.x1, self.lam, self.unit)
        C = p0x[..., :, None] * s1[..., None, :] + Ptil @ (self.K @ Atil)
        return Atil, Ptil, C

    def eh(self, hw: torch.Tensor, E: torch.Tensor | None) -> torch.Tensor:
        """``E h`` for ``h`` (n, d, τ) (``E`` the block's rows, or None)."""
        if self.E_is_eye:
            return hw
        if E is None:
            return torch.zeros_like(hw)
        return E @ hw

    def residual(self, H: torch.Tensor, Ptil: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
        """``ŷ_t − x_{t+1}`` (n, d, τ) by plain differentiable operations (the reference and
        the double-backward path of :class:`_ClosedFormLoss`)."""
        W = self.W
        Wr = W * self.inv_rho
        hw = H @ W
        s = self.eh(hw, self.E) - Wr * (self.K @ (W.conj() * hw))
        return C @ Wr + Ptil @ s + self.dx[..., None] * W

    @property
    def tau(self) -> int:
        return int(self.W.shape[2])

    def fused_loss(self, blocks: np.ndarray, lo: int, hi: int, loss: np.ndarray,
                   grad: np.ndarray, need: bool) -> None:
        from . import _fused

        _fused.closed_form_loss(blocks, self.x1.numpy(), self.lc.numpy(), self.dx.numpy(),
                                self.K.numpy(), self.W.numpy(), self.inv_rho.numpy(),
                                1.0 if self.E_is_eye else 0.0, lo, hi, loss, grad, need)

    def torch_loss(self, theta: torch.Tensor) -> torch.Tensor:
        batched = theta.ndim == 2
        H, Ptil, C = self.matrices(theta if batched else theta[None])
        out = torch.stack([_ClosedFormLoss.apply(H[i], Ptil[i], C[i], self)
                           for i in range(H.shape[0])])
        return out if batched else out[0]



def sequence_loss_ar(theta: torch.Tensor, x1: torch.Tensor, lam: torch.Tensor,
                     T: int) -> torch.Tensor:
    """:func:`sequence_loss` on AR sequences via :func:`predict_ar`, shape (n,)."""
    return ARBatch(x1, lam, T).sequence_loss(theta)
