"""One-layer softmax attention (docs/design.md §7).

Scores ``s_{t,i} = Re(e_i^* W^KQ e_t)`` for ``i ≤ t``, weights ``w_{t,·} = softmax(s_{t,·})``
over the causal prefix, ``ŷ_t = [W^PV Σ_{i≤t} w_{t,i} e_i]_{1:d}``; the embedding and θ are the
paper's (``θ = (W^KQ, W^PV)``, 18d²).  As in the linear model only ``A`` (the blocks 2..3 × 2..3
of ``W^KQ``) and ``P = (W^PV_12 W^PV_13)`` reach ŷ.  ŷ is not a polynomial in the tokens: its
fields are sampled (Monte-Carlo and finite-sample), never exact.  It declares no continuous
symmetry: softmax is not homogeneous, so the linear model's scaling is not one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

import numpy as np

from ..model import P_and_A as _P_and_A
from ..model import _diagonal_index
from ..model import active_mask as _active_mask
from ..model import diagonal_mask as _diagonal_mask
from ..model import n_params as _n_params
from ._base import Model
from ._linear import _blocks

if TYPE_CHECKING:
    import torch

__all__ = ["SoftmaxAttention"]


@final
@dataclass(frozen=True)
class SoftmaxAttention(Model):
    """One-layer causal softmax attention on the paper's embedding."""

    name = "softmax"
    polynomial = False
    phase_graded = False

    def blocks(self, d: int) -> tuple[Any, ...]:
        return _blocks(d)

    def n_params(self, d: int) -> int:
        return _n_params(d)

    def active_mask(self, d: int) -> np.ndarray:
        return _active_mask(d)

    def diagonal_mask(self, d: int) -> np.ndarray:
        return _diagonal_mask(d)

    def _diagonal_index(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        kq, pv = _diagonal_index(d)
        return kq[None, :], pv[None, :]

    def invariants(self, theta: Any) -> Any:
        """None: without the scaling symmetry the flow conserves no ``‖W^KQ‖² − ‖W^PV‖²``
        (an empty (..., 0) array)."""
        import torch

        shape = (*np.shape(theta)[:-1], 0)
        if isinstance(theta, torch.Tensor):
            return torch.zeros(shape, dtype=theta.dtype, device=theta.device)
        return np.zeros(shape)

    def graph_bytes(self, d: int, T: int) -> int:
        """The scores and weights (T×T per sequence) and the token arrays, about four times."""
        return 4 * (24 * T * T + 16 * T * 12 * d)

    def predict(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """ŷ_2..ŷ_T: the causal softmax over ``i ≤ t`` of ``Re(e_i^* A e_t)`` (scores on the
        x-blocks ``e^x_i = (x_i, x_{i−1})``), then ``P Σ_i w_{t,i} e^x_i``; ``O(n T² d)``."""
        import torch

        d = self._check_x(theta, x)
        T = int(x.shape[1])
        P, A = _P_and_A(theta)
        xc = x.to(torch.complex128)
        ex = torch.cat([xc, torch.nn.functional.pad(xc, (0, 0, 1, 0))[:, :-1]], dim=-1)
        q = ex @ A.T.to(torch.complex128)  # A e_t, (n, T, 2d)
        scores = (ex.conj() @ q.transpose(-1, -2)).real.transpose(-1, -2)  # [t, i]
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        w = torch.softmax(scores, dim=-1).to(torch.complex128)
        y = (w @ ex) @ P.T.to(torch.complex128)  # (n, T, d)
        del d
        return y[:, 1:]
