"""Monte-Carlo estimate of the population loss and gradient, with standard errors.

Common random numbers: the samples are drawn once from ``seed``, so the estimate is a fixed,
smooth function of θ that an ODE solver can integrate.  Standard errors come from batch
means: the ``N`` samples are split into ``B`` equal batches, and
``se = std(batch estimates) / √B``.
"""

from __future__ import annotations

from typing import final

import torch

from ..device import make_generator
from ..process import Family, sample
from ..theory import check_T
from ._device import check_device
from ._forms import Form
from ._sampled import Estimate as Estimate
from ._sampled import MonteCarloDraws, SampledField, check_batches, check_draws_fit


@final
class MonteCarloField(SampledField, MonteCarloDraws):
    """``L`` and ``∇L`` estimated from ``samples`` fixed draws (common random numbers).

    ``device`` (``None``: the CPU, :func:`mesadyn.device.resolve_device`) is where the draws live
    and the loss runs; one this machine does not have, or draws that would not fit its free
    memory, are refused (one-line :class:`~mesadyn.errors.MesadynError`) before anything is
    drawn.
    """

    def __init__(self, family: Family, T: int, samples: int = 100_000, seed: int = 0,
                 batches: int = 32, device: torch.device | str | None = None, *,
                 chunk: int | None = None, form: Form | str = Form.AUTO,
                 radius: float = 1.0) -> None:
        samples, batches = check_batches(samples, batches)
        device = check_device(device)
        check_draws_fit(family.d, samples, what="samples", T=check_T(T), device=device)
        x1, lam = sample(family, samples, T, make_generator(seed, device), device,
                          radius=radius)
        super().__init__(family, T, x1, lam, device, chunk, form)
        self.seed = int(seed)
        self.batches = batches
