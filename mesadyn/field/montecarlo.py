"""Monte-Carlo estimate of the population loss and gradient, with standard errors.

Common random numbers: the samples are drawn once from ``seed``, so the estimate is a fixed,
smooth function of θ that an ODE solver can integrate.  Standard errors come from batch
means: the ``N`` samples are split into ``B`` equal batches, and
``se = std(batch estimates) / √B``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

import torch

from ..errors import MesadynError, check_int
from ..process import Family, default_device, make_generator, sample
from ..theory import check_T
from ._device import check_device
from ._sampled import Form, SampledField, check_draws_fit


@dataclass(frozen=True)
class Estimate:
    """A Monte-Carlo estimate with its standard errors (batch means)."""

    loss: torch.Tensor
    loss_se: torch.Tensor
    grad: torch.Tensor
    grad_se: torch.Tensor
    samples: int
    batches: int


@final
class MonteCarloField(SampledField):
    """``L`` and ``∇L`` estimated from ``samples`` fixed draws (common random numbers).

    ``device`` (default: CUDA if available) is where the draws live and the loss runs; one this
    machine does not have, or draws that would not fit its free memory, are refused (one-line
    :class:`~mesadyn.errors.MesadynError`) before anything is drawn.
    """

    name = "mc"

    def __init__(self, family: Family, T: int, samples: int = 100_000, seed: int = 0,
                 batches: int = 32, device: torch.device | str | None = None, *,
                 chunk: int | None = None, form: Form | str = Form.AUTO,
                 radius: float = 1.0) -> None:
        samples = check_int("samples", samples, 2)
        batches = check_int("batches", batches, 2)
        if samples < batches:
            raise MesadynError(f"samples must be >= batches={batches}, got samples={samples}")
        device = check_device(device if device is not None else default_device())
        check_draws_fit(family.d, samples, what="samples", T=check_T(T), device=device)
        x1, lam = sample(family, samples, T, make_generator(seed, device), device,
                          radius=radius)
        super().__init__(family, T, x1, lam, device, chunk, form)
        self.seed = int(seed)
        self.batches = batches

    def estimate(self, theta: torch.Tensor) -> Estimate:
        """Loss and gradient with standard errors from ``batches`` batch means."""
        theta = self.check_theta(theta)
        th = theta.detach().to(self.device).requires_grad_(True)
        edges = torch.linspace(0, self.m, self.batches + 1).round().long().tolist()
        losses, grads = [], []
        with torch.enable_grad():
            for b in range(self.batches):
                lo, hi = edges[b], edges[b + 1]
                lb = torch.zeros((), dtype=torch.float64, device=self.device)
                gb = torch.zeros_like(th)
                for chunk in self._chunks(lo, hi):
                    part = chunk.sequence_loss(th).sum() / (hi - lo)
                    (g,) = torch.autograd.grad(part, th)
                    lb += part.detach()
                    gb += g
                losses.append(lb)
                grads.append(gb)
        L = torch.stack(losses)
        G = torch.stack(grads)
        w = torch.tensor([edges[b + 1] - edges[b] for b in range(self.batches)],
                         dtype=torch.float64, device=self.device) / self.m
        loss = (w * L).sum()
        grad = (w[:, None] * G).sum(0)
        B = self.batches
        loss_se = L.std(unbiased=True) / B**0.5
        grad_se = G.std(dim=0, unbiased=True) / B**0.5
        dev = theta.device
        return Estimate(loss.to(dev), loss_se.to(dev), grad.to(dev), grad_se.to(dev),
                        self.m, B)

    def options(self) -> dict[str, object]:
        return {"samples": self.m, "seed": self.seed, "batches": self.batches}
