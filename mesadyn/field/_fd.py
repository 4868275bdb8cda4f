"""A field wrapper whose Hessian is central differences of another field's gradient."""

from __future__ import annotations

from typing import final

import numpy as np
import torch

from ..model import active_mask, dim_of
from ._base import Field


def fd_hessian(field: Field, theta: np.ndarray, *, h: float = 1e-5,
               mask: np.ndarray | None = None) -> np.ndarray:
    """Central finite differences of ``field.grad`` column by column (18d² × 18d², symmetrised).

    Only the active entries (or ``mask``) are differenced; the other columns are 0 — exactly
    right for inactive entries, which ``L`` does not depend on (Eq. 1).  Error ``O(h²)``; with a
    Monte-Carlo field using common random numbers the gradient is a smooth (polynomial)
    function of θ, so this is the Hessian of the sampled loss.

    Arguments:
        field: the field whose gradient is differenced.
        theta: the point (flat, length 18d²).
        h: the step; mask: the columns to difference (default: the active entries).

    Returns:
        The symmetrised Hessian, a float64 array (18d², 18d²).
    """
    th = np.asarray(theta, np.float64)
    d = dim_of(th)
    cols = np.flatnonzero(active_mask(d) if mask is None else np.asarray(mask, bool))
    n = th.size
    H = np.zeros((n, n))
    for k in cols:
        e = np.zeros(n)
        e[k] = h
        gp = field.grad(torch.as_tensor(th + e)).cpu().numpy()
        gm = field.grad(torch.as_tensor(th - e)).cpu().numpy()
        H[:, k] = (gp - gm) / (2 * h)
    return 0.5 * (H + H.T)


@final
class FiniteDifferenceHessian(Field):
    """``base`` with its Hessian replaced by :func:`fd_hessian` of ``base.grad``.

    Costs ``2·6d²`` gradient evaluations and bounded memory per Hessian, where an autodiff
    Hessian of a sampled field would hold the graph of every sample at once.  Loss and gradient
    are the base field's.  The Hessian is approximate (``O(h²)``), so ``has_exact_hessian`` is
    False.
    """

    def __init__(self, base: Field, h: float = 1e-5) -> None:
        self.base = base
        self.family = base.family
        self.T = base.T
        self.device = base.device
        self.name = base.name
        self.h = float(h)

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        return self.base.loss(theta)

    def loss_and_grad(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.base.loss_and_grad(theta)

    def hessian(self, theta: torch.Tensor) -> torch.Tensor:
        th = self.check_theta(theta).detach().cpu().numpy()
        return torch.as_tensor(fd_hessian(self.base, th, h=self.h))

    def describe(self) -> dict[str, object]:
        return {**self.base.describe(), "hessian": f"central differences, h={self.h}"}
