"""k-layer linear attention with the residual stream (docs/design.md §7).

``e^{(0)}_t = e_t = (0_d, x_t, x_{t−1})``; for ``l = 1..k``

    e^{(l)}_t = e^{(l−1)}_t + W^PV_l (Σ_{i≤t} e^{(l−1)}_i e^{(l−1)*}_i) W^KQ_l e^{(l−1)}_t / ρ_t,

``ρ_t = t − 1`` (position 1 is never updated), ``ŷ_t = [e^{(k)}_t]_{1:d}``.  θ is
``(W^KQ_1, W^PV_1, …, W^KQ_k, W^PV_k)``, each real 3d×3d, flattened in that order (18k d²);
k = 1 is the paper's model (the first block of ``e_t`` is 0).  ŷ has degree ``3^k`` in the
tokens and ``3^k − 1`` in θ.

**Active entries.**  Layer 1 reads a stream whose first block is 0, so only ``W^KQ_1``'s blocks
(2..3, 2..3) and ``W^PV_1``'s columns 2..3 reach ŷ; the last layer writes ŷ through the first
block row of ``W^PV_k`` only; every other entry of a layer l ≥ 2 (or l < k) is active.

**Symmetries** (exact for every data distribution):

* per-layer scaling ``(W^PV_l, W^KQ_l) → (α W^PV_l, W^KQ_l / α)`` (one per layer), conserving
  ``‖W^KQ_l‖² − ‖W^PV_l‖²`` over the active entries (:meth:`~Model.invariants`);
* for k ≥ 2, a change of basis of the residual stream ``e ↦ S e`` that fixes every input
  ``e_t`` and the readout ``[·]_{1:d}``: ``S = [[I, 0, 0], [S_21, I, 0], [S_31, 0, I]]``
  (2d² generators), acting on every layer as ``W^PV_l → S W^PV_l S^{-1}``,
  ``W^KQ_l → S^{-T} W^KQ_l S^{-1}``; the stream becomes ``S e^{(l)}`` and ŷ is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, final

import numpy as np

from ..errors import check_int
from ._base import Block, Model

if TYPE_CHECKING:
    import torch

__all__ = ["DeepLinearAttention"]


@lru_cache(maxsize=64)
def _blocks(k: int, d: int) -> tuple[Block, ...]:
    n = 9 * d * d
    out = []
    for layer in range(k):
        out.append(Block(f"L{layer + 1}.W_KQ", 2 * layer * n, 3 * d, 3 * d))
        out.append(Block(f"L{layer + 1}.W_PV", (2 * layer + 1) * n, 3 * d, 3 * d))
    return tuple(out)


#: Positions per block of the chunked scan of :meth:`DeepLinearAttention.predict` (a shorter
#: sequence is one block: the plain causal attention form).
BLOCK = 8


def _causal_sum(q: torch.Tensor, src: torch.Tensor, pe: torch.Tensor, c: int) -> torch.Tensor:
    """``u_t = Σ_{i≤t} pe_i (src_i^* q_t)`` for every t of ``q``, ``src`` (n, T, r) and ``pe``
    (n, T, p), T a multiple of ``c``: within a block of c positions ``tril(Q Srcᴴ) PE``, across
    blocks ``Q Z`` with ``Z = Σ conj(src_i) pe_iᵀ`` over the earlier blocks (an exclusive prefix
    sum over the block axis); (n, T, p)."""
    import torch

    n, T, r = src.shape
    p = pe.shape[-1]
    nb = T // c
    qb = q.reshape(n * nb, c, r)
    kb = src.reshape(n * nb, c, r).mH  # (n nb, r, c)
    pb = pe.reshape(n * nb, c, p)
    causal = torch.ones(c, c, dtype=src.dtype, device=src.device).tril()
    out = ((qb @ kb) * causal) @ pb
    if nb > 1:
        state = (kb @ pb).reshape(n, nb, r, p).cumsum(1)[:, :-1]
        prev = torch.nn.functional.pad(state, (0, 0, 0, 0, 1, 0)).reshape(n * nb, r, p)
        out = torch.baddbmm(out, qb, prev)
    return out.reshape(n, T, p)


@final
@dataclass(frozen=True)
class DeepLinearAttention(Model):
    """k-layer linear attention with the residual stream (see the module docstring)."""

    name = "deep"
    k: int = field(default=2)

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", check_int("layers", self.k, 1))

    @property
    def layers(self) -> int:
        return self.k

    def describe(self) -> dict[str, object]:
        return {"model": self.name, "layers": self.k}

    @property
    def token_degree(self) -> int:
        return 3**self.k

    @property
    def theta_degree(self) -> int:
        return 3**self.k - 1

    # ---- layout ------------------------------------------------------------------------------
    def blocks(self, d: int) -> tuple[Block, ...]:
        return _blocks(self.k, check_int("d", d, 1))

    def n_params(self, d: int) -> int:
        return 18 * self.k * check_int("d", d, 1) ** 2

    def active_mask(self, d: int) -> np.ndarray:
        d = check_int("d", d, 1)
        parts = []
        for layer in range(self.k):
            kq = np.ones((3 * d, 3 * d), dtype=bool)
            pv = np.ones((3 * d, 3 * d), dtype=bool)
            if layer == 0:  # the stream's first block is 0 at the input
                kq[:d, :] = kq[:, :d] = False
                pv[:, :d] = False
            if layer == self.k - 1:  # ŷ is the first block
                pv[d:, :] = False
            parts += [kq.ravel(), pv.ravel()]
        return np.concatenate(parts)

    def _diagonal_index(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        i = np.arange(d)
        blks = self.blocks(d)
        kq = np.stack([blks[2 * l].start + (2 * d + i) * 3 * d + d + i for l in range(self.k)])
        pv = np.stack([blks[2 * l + 1].start + i * 3 * d + d + i for l in range(self.k)])
        return kq, pv

    def diagonal_mask(self, d: int) -> np.ndarray:
        out = np.zeros(self.n_params(d), dtype=bool)
        kq, pv = self._diagonal_index(d)
        out[kq.ravel()] = True
        out[pv.ravel()] = True
        return out

    # ---- forward -------------------------------------------------------------------------------
    def graph_bytes(self, d: int, T: int) -> int:
        """Bytes of one sequence's autograd graph (an estimate): per layer and token the block
        scores (:data:`BLOCK` complex) and about 12d stream and projection entries, four times
        over (values, saved tensors, gradients)."""
        return 16 * 4 * T * (self.k * (min(T, BLOCK) + 12 * d) + 12 * d)

    def predict(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """ŷ_2..ŷ_T by the chunked causal scan (:func:`_causal_sum`), ``O(n T k d (c + d))`` for
        blocks of ``c = min(T, BLOCK)`` positions: layer l adds ``Σ_{i≤t} (W^PV_l e_i)
        (e_i^* W^KQ_l e_t) / ρ_t`` at t ≥ 2 (only the rows that matter: the first block at the
        last layer; the x-blocks of the stream at the first).  T is padded with zero tokens to
        a multiple of c; they come after every real position, so no real sum sees them."""
        import torch

        d = self._check_x(theta, x)
        mats = self.matrices(theta)
        T = int(x.shape[1])
        nb = -(-T // BLOCK)
        c = -(-T // nb)
        Tp = nb * c
        xc = x.to(torch.complex128)
        ex = torch.cat([xc, torch.nn.functional.pad(xc, (0, 0, 1, 0))[:, :-1]], dim=-1)
        ex = torch.nn.functional.pad(ex, (0, 0, 0, Tp - T))
        t = torch.arange(Tp, device=x.device, dtype=torch.float64)[:, None]
        inv_rho = torch.where(t > 0, 1.0 / t.clamp(min=1.0), 0.0)  # 1/ρ_t; position 1: no update
        stream = None
        for layer in range(self.k):
            KQ = mats[2 * layer].to(torch.complex128)
            PV = mats[2 * layer + 1].to(torch.complex128)
            last = layer == self.k - 1
            if stream is None:  # the first layer reads the x-blocks only
                src, KQ, PV = ex, KQ[d:, d:], PV[:, d:]
            else:
                src = stream
            if last:
                PV = PV[:d]
            q = src @ KQ.T
            if PV.shape[0] > src.shape[-1]:  # values wider than the stream: project after
                upd = (_causal_sum(q, src, src, c) * inv_rho) @ PV.T
            else:
                upd = _causal_sum(q, src, src @ PV.T, c) * inv_rho
            if last:
                y = upd if stream is None else stream[..., :d] + upd
                return y[:, 1:T]
            base = torch.cat([torch.zeros_like(ex[..., :d]), ex], dim=-1) if stream is None \
                else stream
            stream = base + upd
        raise AssertionError("unreachable: k >= 1")  # pragma: no cover

    # ---- symmetries ----------------------------------------------------------------------------
    def symmetries(self, theta: Any) -> np.ndarray:
        """The k per-layer scaling tangents ``(−W^KQ_l, W^PV_l)`` and, for k ≥ 2, the 2d²
        stream shears ``δW^PV_l = G W^PV_l − W^PV_l G``, ``δW^KQ_l = −Gᵀ W^KQ_l − W^KQ_l G``
        (``G`` one unit entry of the blocks (2, 1) or (3, 1)), each restricted to the active
        entries (ŷ depends on those alone, and the active part of each orbit depends on the
        active entries alone)."""
        th = np.asarray(theta, np.float64)
        d = self.dim_of(th)
        act = self.active_mask(d)
        mats = [th[b.start:b.stop].reshape(b.rows, b.cols) for b in self.blocks(d)]
        cols = []
        for layer in range(self.k):
            kq, pv = self._layer_slices(d, layer)
            v = np.zeros_like(th)
            v[kq], v[pv] = -th[kq], th[pv]
            cols.append(v * act)
        if self.k >= 2:
            for blk in (1, 2):
                for a in range(d):
                    for b in range(d):
                        G = np.zeros((3 * d, 3 * d))
                        G[blk * d + a, b] = 1.0
                        parts = []
                        for layer in range(self.k):
                            KQ, PV = mats[2 * layer], mats[2 * layer + 1]
                            parts += [(-G.T @ KQ - KQ @ G).ravel(), (G @ PV - PV @ G).ravel()]
                        cols.append(np.concatenate(parts) * act)
        return np.stack(cols, axis=1)

    def symmetry_names(self, d: int) -> tuple[str, ...]:
        names = [f"scaling of layer {layer + 1}" for layer in range(self.k)]
        if self.k >= 2:
            names += [f"stream shear S_{blk + 1}1[{a},{b}]" for blk in (1, 2)
                      for a in range(d) for b in range(d)]
        return tuple(names)
