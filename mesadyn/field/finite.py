"""The finite-sample loss: Eq. 2 with E replaced by the mean over m fixed sequences.

This is what the paper's simulations minimise by full-batch gradient descent (Section 6).
"""

from __future__ import annotations

import torch

from ..errors import check_int
from ..model import ARBatch
from ..process import Family, default_device, make_generator, sample
from ..theory import check_T
from ._base import Field

#: Precomputed θ-independent data (:class:`~mesadyn.model.ARBatch`) is kept up to this size.
CACHE_BYTES = 2**31


class SampledField(Field):
    """Mean of the per-sequence loss over fixed draws ``(x_1, λ)``; gradients chunked.

    Uses the AR fast path :meth:`mesadyn.model.ARBatch.sequence_loss`; the θ-independent
    prefix Gram matrices are built once and kept while they fit in :data:`CACHE_BYTES`.
    """

    def __init__(self, family: Family, T: int, x1: torch.Tensor, lam: torch.Tensor,
                 device: torch.device | str | None = None, chunk: int | None = None):
        self.family = family
        self.T = check_T(T)
        self.device = torch.device(device) if device is not None else x1.device
        self.x1 = x1.to(self.device, torch.float64)
        self.lam = lam.to(self.device, torch.complex128)
        self.m = int(self.x1.shape[0])
        d = family.d
        per_seq = 16 * (self.T * d * d + 3 * self.T * d)
        self.chunk = chunk or max(1, min(self.m, 2**27 // per_seq))
        self._cache: list[ARBatch] | None = [] if per_seq * self.m <= CACHE_BYTES else None

    def _batch(self, start: int, stop: int) -> ARBatch:
        if self._cache is not None and start % self.chunk == 0 and stop - start == min(
            self.chunk, self.m - start
        ):
            k = start // self.chunk
            while len(self._cache) <= k:
                lo = len(self._cache) * self.chunk
                hi = min(lo + self.chunk, self.m)
                self._cache.append(ARBatch(self.x1[lo:hi], self.lam[lo:hi], self.T))
            return self._cache[k]
        return ARBatch(self.x1[start:stop], self.lam[start:stop], self.T)

    def _chunks(self, lo: int = 0, hi: int | None = None):
        hi = self.m if hi is None else hi
        for start in range(lo, hi, self.chunk):
            yield self._batch(start, min(start + self.chunk, hi))

    def per_sequence_loss(self, theta: torch.Tensor) -> torch.Tensor:
        """The Eq. 2 summand of every sequence, shape (m,)."""
        th = theta.to(self.device)
        return torch.cat([b.sequence_loss(th) for b in self._chunks()])

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        return self.per_sequence_loss(theta).mean().to(theta.device)

    def loss_and_grad(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L, ∇L)`` with the backward pass run chunk by chunk (bounded memory)."""
        theta = self.check_theta(theta)
        th = theta.detach().to(self.device).requires_grad_(True)
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        grad = torch.zeros_like(th)
        with torch.enable_grad():
            for b in self._chunks():
                part = b.sequence_loss(th).sum() / self.m
                (g,) = torch.autograd.grad(part, th)
                total += part.detach()
                grad += g
        return total.to(theta.device), grad.to(theta.device)


class FiniteField(SampledField):
    """The finite-sample loss on ``m`` sequences drawn once from ``seed`` (Section 6)."""

    name = "finite"

    def __init__(self, family: Family, T: int, m: int, seed: int = 1,
                 device: torch.device | str | None = None):
        m = check_int("m", m, 1)
        device = torch.device(device) if device is not None else default_device()
        x1, lam = sample(family, m, T, make_generator(seed, device), device)
        super().__init__(family, T, x1, lam, device)
        self.seed = int(seed)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "m": self.m, "seed": self.seed}
