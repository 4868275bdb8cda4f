"""The abstract sampled field: Eq. 2 with E replaced by the mean over fixed draws.

:class:`SampledField` holds ``m`` draws ``(x_1, λ)`` and evaluates the mean per-sequence loss by
the AR fast path :meth:`mesadyn.model.ARBatch.sequence_loss`, with the backward pass run chunk
by chunk in bounded memory.  The final subclasses differ in what the draws mean:
:class:`~mesadyn.field.FiniteField` (the paper's training set, Section 6) and
:class:`~mesadyn.field.MonteCarloField` (an estimate of the population loss, with standard
errors).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator

import torch

from ..model import ARBatch
from ..process import Family
from ..theory import check_T
from ._base import Field

#: Precomputed θ-independent data (:class:`~mesadyn.model.ARBatch`) is kept up to this size.
CACHE_BYTES = 2**31


class SampledField(Field):
    """Mean of the per-sequence loss over fixed draws ``(x_1, λ)``; gradients chunked.

    The θ-independent prefix Gram matrices are built once and kept while they fit in
    :data:`CACHE_BYTES`.  Attributes: ``x1`` (m, d) float64, ``lam`` (m, d) complex128, ``m``,
    ``chunk`` (sequences per chunk), ``device``.
    """

    def __init__(self, family: Family, T: int, x1: torch.Tensor, lam: torch.Tensor,
                 device: torch.device | str | None = None, chunk: int | None = None) -> None:
        self.family = family
        self.T = check_T(T)
        self.device = torch.device(device) if device is not None else x1.device
        self.x1 = x1.to(self.device, torch.float64)
        self.lam = lam.to(self.device, torch.complex128)
        self.m = int(self.x1.shape[0])
        d = family.d
        per_seq = 16 * (self.T * d * d + 3 * self.T * d)
        self.chunk = chunk or max(1, min(self.m, 2**27 // per_seq))
        self._batches: list[ARBatch] | None = [] if per_seq * self.m <= CACHE_BYTES else None

    @abstractmethod
    def options(self) -> dict[str, object]:
        """The options that fixed the draws (for :meth:`describe`)."""

    def _batch(self, start: int, stop: int) -> ARBatch:
        if self._batches is not None and start % self.chunk == 0 and stop - start == min(
            self.chunk, self.m - start
        ):
            k = start // self.chunk
            while len(self._batches) <= k:
                lo = len(self._batches) * self.chunk
                hi = min(lo + self.chunk, self.m)
                self._batches.append(ARBatch(self.x1[lo:hi], self.lam[lo:hi], self.T))
            return self._batches[k]
        return ARBatch(self.x1[start:stop], self.lam[start:stop], self.T)

    def _chunks(self, lo: int = 0, hi: int | None = None) -> Iterator[ARBatch]:
        hi = self.m if hi is None else hi
        for start in range(lo, hi, self.chunk):
            yield self._batch(start, min(start + self.chunk, hi))

    def per_sequence_loss(self, theta: torch.Tensor) -> torch.Tensor:
        """The Eq. 2 summand of every sequence, shape (m,)."""
        th = theta.to(self.device)
        return torch.cat([b.sequence_loss(th) for b in self._chunks()])

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        """The mean of :meth:`per_sequence_loss` (Eq. 2 with the sample mean for E)."""
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

    def describe(self) -> dict[str, object]:
        return {**super().describe(), **self.options()}
