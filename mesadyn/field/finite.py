"""The finite-sample loss: Eq. 2 with E replaced by the mean over m fixed sequences.

This is what the paper's simulations minimise by full-batch gradient descent (Section 6).
"""

from __future__ import annotations

from typing import final

import torch

from ..device import make_generator
from ..errors import check_int
from ..process import Family, sample
from ..theory import check_T
from ._device import check_device
from ._forms import Form
from ._sampled import SampledField, check_draws_fit


@final
class FiniteField(SampledField):
    """The finite-sample loss on ``m`` sequences drawn once from ``seed`` (Section 6).

    Arguments:
        family, T: the process and the training length.
        m: the number of sequences; seed: their seed (``x_1`` first, then ``λ``).
        device: where the draws live (``None``: the CPU, :func:`mesadyn.device.resolve_device`);
            chunk: sequences per chunk of the backward pass (does not change the numbers
            beyond rounding).
        form: ``"polynomial"``, ``"direct"`` or ``"auto"`` (the cost model's choice; see
            :class:`~mesadyn.field.SampledField`).
    """

    name = "finite"

    def __init__(self, family: Family, T: int, m: int, seed: int = 1,
                 device: torch.device | str | None = None, *, chunk: int | None = None,
                 form: Form | str = Form.AUTO, radius: float = 1.0) -> None:
        m = check_int("m", m, 1)
        device = check_device(device)
        check_draws_fit(family.d, m, what="sequences", T=check_T(T), device=device)
        x1, lam = sample(family, m, T, make_generator(seed, device), device,
                          radius=radius)
        super().__init__(family, T, x1, lam, device, chunk, form)
        self.seed = int(seed)

    def options(self) -> dict[str, object]:
        return {"m": self.m, "seed": self.seed}
