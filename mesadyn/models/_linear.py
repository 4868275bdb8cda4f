"""The paper's one-layer linear causal self-attention (Section 3.2) as a :class:`Model`.

Every method is :mod:`mesadyn.model`'s own function, so every number is the module's to the last
digit: ``θ = (W^KQ, W^PV)`` (18d²), ``ŷ_t = P M_t A e^x_t`` (Eq. 1), Assumption 3.1's init, the
scaling symmetry ``(P, A) → (αP, A/α)`` and its conserved ``‖A‖_F² − ‖P‖_F²``.  It is the one
model whose moment-tensor exact field applies (:class:`~mesadyn.field.ExactField`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, final

import numpy as np

from ..model import _diagonal_index
from ..model import ab as _ab
from ..model import active_mask as _active_mask
from ..model import block_labels as _block_labels
from ..model import diagonal_init as _diagonal_init
from ..model import diagonal_mask as _diagonal_mask
from ..model import dim_of as _dim_of
from ..model import free_mask as _free_mask
from ..model import gaussian_init as _gaussian_init
from ..model import invariant as _invariant
from ..model import n_params as _n_params
from ..model import predict as _predict
from ..model import sequence_loss as _sequence_loss
from ._base import Block, Model

if TYPE_CHECKING:
    import torch

__all__ = ["LinearAttention"]


@cache
def _blocks(d: int) -> tuple[Block, ...]:
    n = 9 * d * d
    return (Block("W_KQ", 0, 3 * d, 3 * d), Block("W_PV", n, 3 * d, 3 * d))


@final
@dataclass(frozen=True)
class LinearAttention(Model):
    """The paper's model: ``ŷ_t = [W^PV E_t E_t^* W^KQ e_t / ρ_t]_{1:d}``, ``ρ_t = t − 1``."""

    name = "linear"
    moment_exact = True

    @property
    def is_paper(self) -> bool:
        return True

    @property
    def token_degree(self) -> int:
        return 3

    @property
    def theta_degree(self) -> int:
        return 2

    def blocks(self, d: int) -> tuple[Block, ...]:
        return _blocks(d)

    def n_params(self, d: int) -> int:
        return _n_params(d)

    def dim_of(self, theta: Any) -> int:
        return _dim_of(theta)

    def block_labels(self, d: int) -> np.ndarray:
        return _block_labels(d)

    def active_mask(self, d: int) -> np.ndarray:
        return _active_mask(d)

    def diagonal_mask(self, d: int) -> np.ndarray:
        return _diagonal_mask(d)

    def free_mask(self, mask: Any, d: int) -> np.ndarray:
        return _free_mask(mask, d)

    def predict(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return _predict(theta, x)

    def sequence_loss(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return _sequence_loss(theta, x)

    def diagonal_init(self, d: int, a0: float, b0: float) -> torch.Tensor:
        return _diagonal_init(d, a0, b0)

    def gaussian_init(self, d: int, sigma_w: float, seed: int = 1) -> torch.Tensor:
        return _gaussian_init(d, sigma_w, seed)

    def _diagonal_index(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        kq, pv = _diagonal_index(d)
        return kq[None, :], pv[None, :]

    def ab(self, theta: Any) -> Any:
        return _ab(theta)

    def invariant(self, theta: Any) -> Any:
        return _invariant(theta)

    def invariants(self, theta: Any) -> Any:
        return _invariant(theta)[..., None]

    def symmetries(self, theta: Any) -> np.ndarray:
        """The scaling tangent ``(P, −A)`` (:func:`mesadyn.analysis.fixedpoint.
        symmetry_direction` unnormalised): one column."""
        th = np.asarray(theta, np.float64)
        d = _dim_of(th)
        n = 9 * d * d
        kq = np.zeros((3 * d, 3 * d))
        pv = np.zeros((3 * d, 3 * d))
        kq[d:, d:] = -th[:n].reshape(3 * d, 3 * d)[d:, d:]
        pv[:d, d:] = th[n:].reshape(3 * d, 3 * d)[:d, d:]
        return np.concatenate([kq.ravel(), pv.ravel()])[:, None]

    def symmetry_names(self, d: int) -> tuple[str, ...]:
        return ("scaling (P, A) -> (αP, A/α)",)
