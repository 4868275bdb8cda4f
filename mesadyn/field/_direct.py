"""The direct form of any model's loss over weighted sequences, with ``torch.func`` derivatives.

A field in direct form is a sum over chunks of sequences of ``Σ_s w_s ℓ(θ; x_s)`` with
``ℓ`` the model's Eq. 2 summand (:meth:`mesadyn.models.Model.sequence_loss`): equal weights
``1/m`` for the sampled fields (:mod:`._model_fields`), the rule's weights for the exact field
by quadrature (:mod:`._quadrature_field`).  :class:`WeightedSequences` is that shared part: the
loss and gradient by one backward pass per chunk (bounded memory), one Hessian-vector product
by reverse-over-reverse, many by forward-over-reverse (``torch.func.jvp`` of
``torch.func.grad``), batched over directions with ``torch.func.vmap`` (:data:`HVP_BATCH` at a
time), and the Hessian as the rows of the active entries (every other row and column is
exactly 0).  Everything runs on the device of the
sequences; θ and results come back on θ's device.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch

from ..errors import MesadynError
from ._base import Field

if TYPE_CHECKING:
    from ..models import Model

#: Directions of a batched Hessian-vector product evaluated at once (``vmap``): bounds the
#: memory of a chunk's forward-over-reverse graph at this many copies.
HVP_BATCH = 16
#: A batched HVP runs on chunks of the field's chunk over this many sequences: its graph holds
#: :data:`HVP_BATCH` copies, so about ``HVP_BATCH / HVP_CHUNK_DIVISOR`` times a gradient's
#: (fewer, larger chunks: measured twice as fast as ``chunk / HVP_BATCH`` at d = 2, T = 6).
HVP_CHUNK_DIVISOR = 4

__all__ = ["HVP_BATCH", "HVP_CHUNK_DIVISOR", "WeightedSequences"]


class WeightedSequences(Field):
    """``L(θ) = Σ_chunks Σ_s w_s ℓ(θ; x_s)`` for a model (the direct form of any model).

    A subclass sets ``model``, ``family``, ``T`` and ``device`` and yields its chunks with
    :meth:`_weighted` (sequences complex (k, T, d) and weights (k,) float64 on ``device``).
    """

    has_exact_hessian = True
    model: Model

    @abstractmethod
    def _weighted(self, chunk: int | None = None
                  ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The chunks ``(x, w)`` of the weighted sum (the same numbers on every call), of at
        most ``chunk`` sequences (default: the field's own chunk)."""

    def _hvp_chunk(self) -> int | None:
        """Sequences per chunk of a batched HVP (its graph holds :data:`HVP_BATCH` copies):
        the field's chunk over :data:`HVP_CHUNK_DIVISOR`; ``None`` keeps the field's own."""
        return None

    def _chunk_loss(self, theta: torch.Tensor, x: torch.Tensor,
                    w: torch.Tensor) -> torch.Tensor:
        return (self.model.sequence_loss(theta, x) * w).sum()

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        """The weighted sum, differentiable in θ (one graph over every chunk: for the
        derivatives use :meth:`loss_and_grad`, :meth:`hvp`, :meth:`hessian`)."""
        th = theta.to(self.device)
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        for x, w in self._weighted():
            total = total + self._chunk_loss(th, x, w)
        return total.to(theta.device)

    def loss_and_grad(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L, ∇L)``: k-layer linear attention on the CPU by the fused kernel
        (:mod:`._deep_fused`), every other model by one backward pass per chunk."""
        from . import _deep_fused

        theta = self.check_theta(theta)
        if _deep_fused.applies(self.model, self.device):
            return _deep_fused.loss_and_grad(self.model, theta,
                                              self._weighted(_deep_fused.CHUNK))
        th = theta.detach().to(self.device).requires_grad_(True)
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        grad = torch.zeros_like(th)
        with torch.enable_grad():
            for x, w in self._weighted():
                part = self._chunk_loss(th, x, w)
                (g,) = torch.autograd.grad(part, th)
                total += part.detach()
                grad += g
        return total.to(theta.device), grad.to(theta.device)

    def batched_hvp(self, theta: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        """``∇²L v`` for every row ``v`` of ``V`` (r, n): ``vmap`` of ``jvp(grad)`` per chunk,
        :data:`HVP_BATCH` directions at a time."""
        from torch.func import grad, jvp, vmap

        theta = self.check_theta(theta)
        VV = torch.as_tensor(V, dtype=torch.float64).to(self.device)
        if VV.ndim != 2 or VV.shape[1] != theta.numel():
            raise MesadynError(f"directions must have shape (r, {theta.numel()}), got "
                               f"{tuple(VV.shape)}")
        th = theta.detach().to(self.device)
        out = torch.zeros_like(VV)
        for x, w in self._weighted(self._hvp_chunk()):
            g = grad(lambda t, x=x, w=w: self._chunk_loss(t, x, w))
            for lo in range(0, VV.shape[0], HVP_BATCH):
                block = VV[lo:lo + HVP_BATCH]
                out[lo:lo + HVP_BATCH] += vmap(lambda v, g=g: jvp(g, (th,), (v,))[1])(block)
        return out.to(theta.device)

    def hvp(self, theta: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``∇²L v`` for one direction: reverse-over-reverse (the gradient of ``∇ℓ·v``) on
        the field's own chunks, which costs about 3.5 gradients at d = 2, T = 6 (two layers)
        against 9 for a one-row :meth:`batched_hvp`, whose ``vmap`` pays for many rows."""
        theta = self.check_theta(theta)
        vv = torch.as_tensor(v, dtype=torch.float64)
        if vv.shape != (self.n_params,):
            raise MesadynError(f"v must have shape ({self.n_params},), got {tuple(vv.shape)}")
        vv = vv.to(self.device)
        th = theta.detach().to(self.device).requires_grad_(True)
        out = torch.zeros_like(th)
        with torch.enable_grad():
            for x, w in self._weighted():
                (g,) = torch.autograd.grad(self._chunk_loss(th, x, w), th, create_graph=True)
                (hv,) = torch.autograd.grad(g @ vv, th)
                out += hv
        return out.to(theta.device)

    def hessian(self, theta: torch.Tensor) -> torch.Tensor:
        """The Hessian: the rows of the active entries by batched Hessian-vector products
        (the rows and columns of inactive entries are exactly 0), symmetrised."""
        theta = self.check_theta(theta)
        n = theta.numel()
        idx = torch.from_numpy(self.model.active_mask(self.d)).nonzero().squeeze(1)
        E = torch.zeros(idx.numel(), n, dtype=torch.float64)
        E[torch.arange(idx.numel()), idx] = 1.0
        rows = self.batched_hvp(theta, E).to(theta.device)
        H = torch.zeros(n, n, dtype=torch.float64, device=theta.device)
        H[idx.to(theta.device)] = rows
        return 0.5 * (H + H.T)
