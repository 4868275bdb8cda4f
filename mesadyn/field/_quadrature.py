"""Exact quadrature of Eq. 2 through the model code: the independent check of the exact fields.

Eq. 2 is a polynomial of degree 6 in ``x_1`` (and in the noise) and, for each W, a
trigonometric polynomial in its phases.  Both are integrated exactly by finite rules
(docs/design.md §7): the token by a product rule matching every coordinate's moments up to order 6
(the 4-point rule of :func:`mesadyn.process.hankel_atoms` per independent coordinate; the
atoms of sparse and fixed tokens; the components of a mixture), a phase by ``N`` equally
spaced angles (exact for trigonometric degree below ``N``), Gaussian noise by Gauss–Hermite
nodes per real component.  The weighted sequences then go through
:func:`mesadyn.model.sequence_loss` — none of the counting code — and autograd gives the
gradient and Hessian-vector products.

The rules grow as ``N^{blocks} × nodes^d``: this is a test utility for small d and T.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from ..errors import MesadynError
from ..model import sequence_loss
from ..process import IID, Family, Fixed, Mixture, Moments, Shifted, Sparse, hankel_atoms

__all__ = ["QuadratureRule", "phase_grid", "token_rule", "transitions"]


def token_rule(fam: Family) -> tuple[np.ndarray, np.ndarray]:
    """Nodes (K, d) and weights (K,) integrating every polynomial of degree <= 6 in each
    coordinate of ``x_1 ~ fam`` exactly (weights sum to 1)."""
    d = fam.d
    if isinstance(fam, Mixture):
        parts = [token_rule(f) for _, f in fam.components]
        nodes = np.concatenate([n for n, _ in parts])
        weights = np.concatenate([p * w for (p, _), (_, w) in zip(fam.components, parts,
                                                                     strict=True)])
        return nodes, weights
    if isinstance(fam, Sparse):
        nodes = np.concatenate([fam.scale * np.eye(d), -fam.scale * np.eye(d)])
        return nodes, np.full(2 * d, 1.0 / (2 * d))
    if isinstance(fam, Fixed):
        return np.asarray(fam.vector, dtype=np.float64)[None, :], np.ones(1)
    seqs: list[tuple[float, ...]]
    if isinstance(fam, IID):
        seqs = [(0.0, fam.m2, 0.0, fam.m4, 0.0, fam.m6)] * d
    elif isinstance(fam, Shifted):
        seqs = [fam.raw_moments] * d
    elif isinstance(fam, Moments):
        seqs = [tuple(row[1:]) for row in np.asarray(fam.table)]
    else:
        raise MesadynError(f"no token rule for family {fam.name!r} (kind {fam.kind!r})")
    per = [hankel_atoms(s) for s in seqs]
    nodes = np.array(list(itertools.product(*[n for n, _ in per])), dtype=np.float64)
    weights = np.prod(np.array(list(itertools.product(*[w for _, w in per]))), axis=1)
    return nodes, weights


def phase_grid(n_angles: int, blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """Every combination of ``n_angles`` equally spaced angles in ``blocks`` phases: (K, blocks)
    angles and equal weights."""
    ang = 2 * math.pi * np.arange(n_angles) / n_angles
    grid = np.array(list(itertools.product(ang, repeat=blocks)), dtype=np.float64)
    return grid, np.full(len(grid), 1.0 / len(grid))


def transitions(angles: np.ndarray, d: int, rotation: str, radius: float) -> np.ndarray:
    """``W = r·diag(e^{iφ})`` (one angle per coordinate) or ``r·blockdiag(R(φ_b))`` (one per
    2×2 block), complex (K, d, d)."""
    K = angles.shape[0]
    W = np.zeros((K, d, d), dtype=complex)
    if rotation == "diagonal":
        W[:, np.arange(d), np.arange(d)] = np.exp(1j * angles)
    elif rotation == "real":
        c, s = np.cos(angles), np.sin(angles)
        k = np.arange(0, d, 2)
        W[:, k, k], W[:, k, k + 1], W[:, k + 1, k], W[:, k + 1, k + 1] = c, -s, s, c
    else:
        raise MesadynError(f"no phase grid for rotation={rotation!r}")
    return radius * W


def _noise_rule(T: int, d: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    """Noise draws ``ε_1..ε_{T−1}`` (K, T−1, d) complex with ``E|ε|² = s²``, exact for the
    loss: ``ε_{T−1}`` enters only the last target (degree 2: two nodes per real component),
    the others up to degree 6 (four nodes)."""
    z4, w4 = np.polynomial.hermite_e.hermegauss(4)
    z2, w2 = np.polynomial.hermite_e.hermegauss(2)
    rules = [(z4, w4 / w4.sum())] * (2 * d * (T - 2)) + [(z2, w2 / w2.sum())] * (2 * d)
    nodes = np.array(list(itertools.product(*[z for z, _ in rules])))
    weights = np.prod(np.array(list(itertools.product(*[w for _, w in rules]))), axis=1)
    re, im = nodes[:, 0::2], nodes[:, 1::2]
    eps = (noise / math.sqrt(2)) * (re + 1j * im)
    return eps.reshape(-1, T - 1, d), weights


class QuadratureRule:
    """Weighted sequences whose weighted mean of any Eq. 2 quantity is its exact expectation.

    Arguments: the family, T, ``rotation`` (``"diagonal"`` or ``"real"``), the radius r and the
    noise scale s (then every noise component gets Gauss–Hermite nodes: small d and T only).
    ``n_angles`` defaults to ``6(T − 1) + 1`` (above the trigonometric degree of Eq. 2).
    """

    def __init__(self, fam: Family, T: int, *, rotation: str = "diagonal", radius: float = 1.0,
                 noise: float = 0.0, n_angles: int | None = None) -> None:
        d = fam.d
        blocks = d if rotation == "diagonal" else d // 2
        N = 6 * (T - 1) + 1 if n_angles is None else n_angles
        xs, wx = token_rule(fam)
        ang, wp = phase_grid(N, blocks)
        W = transitions(ang if rotation == "real" else ang, d, rotation, radius)
        if noise > 0:
            eps, we = _noise_rule(T, d, noise)
        else:
            eps, we = np.zeros((1, T - 1, d), dtype=complex), np.ones(1)
        self.T, self.d = T, d
        self._x1, self._wx = xs, wx
        self._W, self._wp = W, wp
        self._eps, self._we = eps, we
        self.size = len(wx) * len(wp) * len(we)

    def chunks(self, max_rows: int = 65_536):  # type: ignore[no-untyped-def]
        """Yield ``(x (k, T, d) complex128, w (k,))`` in pieces of at most ``max_rows``
        sequences (the weights sum to 1 over all pieces)."""
        T, d = self.T, self.d
        ne, nw = len(self._we), len(self._wp)
        for lo in range(0, self.size, max_rows):
            flat = np.arange(lo, min(self.size, lo + max_rows))
            ix, rest = np.divmod(flat, ne * nw)
            ie, iw = np.divmod(rest, nw)
            W, eps = self._W[iw], self._eps[ie]
            x = np.zeros((len(flat), T, d), dtype=complex)
            x[:, 0] = self._x1[ix]
            for t in range(1, T):
                x[:, t] = np.einsum("kij,kj->ki", W, x[:, t - 1]) + eps[:, t - 1]
            w = self._wx[ix] * self._we[ie] * self._wp[iw]
            yield torch.from_numpy(x), torch.from_numpy(w)

    def loss_grad_hvp(self, theta: torch.Tensor, v: torch.Tensor | None = None
                      ) -> tuple[float, torch.Tensor, torch.Tensor | None]:
        """Exact ``(L, ∇L, ∇²L v)`` at θ (``v`` optional) through the model code."""
        th = theta.detach().clone().to(torch.float64).requires_grad_(True)
        L = 0.0
        g = torch.zeros_like(th)
        hv = torch.zeros_like(th) if v is not None else None
        for x, w in self.chunks():
            part = (sequence_loss(th, x) * w).sum()
            (gi,) = torch.autograd.grad(part, th, create_graph=v is not None)
            if v is not None and hv is not None:
                (hi,) = torch.autograd.grad(gi @ v.to(torch.float64), th)
                hv += hi
            L += float(part.detach())
            g += gi.detach()
        return L, g, hv
