"""The continuation problem of a data parameter: the exact field of Eq. 2 at every ``p``.

:class:`ParametricField` is the :class:`~._system.Problem` of a
:class:`~._parameters.Parameter`: ``∇L``, ``∇²L`` and ``∂∇L/∂p`` of the exact field (exact
combinations of the fields at a few Chebyshev nodes when ``L`` is a polynomial in ``p``, else
fields rebuilt at each ``p``), the free coordinates and the scaling symmetries
(:func:`scaling_generators`), detected at random points.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import torch

from ...errors import MesadynError
from ...field import Field
from ...model import P_and_A, active_mask
from ._parameters import Parameter
from ._system import Problem, Symmetry

__all__ = ["ParametricField", "lagrange_weights", "scaling_generators"]


def _chebyshev(lo: float, hi: float, k: int) -> np.ndarray:
    """``k`` Chebyshev points of the first kind on ``[lo, hi]``."""
    j = np.arange(k)
    return 0.5 * (lo + hi) + 0.5 * (hi - lo) * np.cos((2 * j + 1) * np.pi / (2 * k))


def lagrange_weights(nodes: np.ndarray, p: float, *, derivative: bool = False) -> np.ndarray:
    """``ℓ_j(p)`` (or ``ℓ_j'(p)``) of the Lagrange basis on ``nodes``, by products of
    differences (no division by ``p − x_k``: exact at and near the nodes, and with Chebyshev
    nodes ``Σ|ℓ_j| ≤ Λ ≈ 2``, so combining node values loses little to rounding)."""
    x = np.asarray(nodes, np.float64)
    k = x.size
    out = np.zeros(k)
    for j in range(k):
        others = [i for i in range(k) if i != j]
        denom = math.prod(x[j] - x[i] for i in others)
        if derivative:
            out[j] = math.fsum(math.prod(p - x[i] for i in others if i != m)
                               for m in others) / denom
        else:
            out[j] = math.prod(p - x[i] for i in others) / denom
    return out


def _flat_indices(d: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat-θ indices of ``P`` (d, 2d) and ``A`` (2d, 2d)."""
    P, A = P_and_A(torch.arange(18 * d * d))
    return P.numpy().copy(), A.numpy().copy()


def scaling_generators(d: int) -> tuple[Symmetry, list[Symmetry]]:
    """The global scaling ``(αP, A/α)`` and the per-coordinate ones (P[:, S_j], A[S_j, S_j]),
    ``S_j = {j, d + j}``, as diagonal generators (+1 on P, −1 on A)."""
    iP, iA = _flat_indices(d)
    n = 18 * d * d
    g = np.zeros(n)
    g[iP.ravel()] = 1.0
    g[iA.ravel()] = -1.0
    per = []
    for j in range(d):
        S = [j, d + j]
        s = np.zeros(n)
        s[iP[:, S].ravel()] = 1.0
        s[iA[np.ix_(S, S)].ravel()] = -1.0
        per.append(Symmetry(f"scaling[{j}]", s))
    return Symmetry("scaling", g), per


class ParametricField(Problem):
    """The exact field of a :class:`Parameter` as a continuation :class:`Problem`.

    For a parameter with ``powers`` (``L(θ; p) = Σ_k p^k L_k(θ)``), the exact fields at
    ``len(powers)`` Chebyshev points ``p_j`` of ``[lo, hi]`` determine every ``L_k``, so
    ``∇L``, ``∇²L`` and ``∂∇L/∂p`` at any p are the combinations ``Σ_j c_j(p) ∇L(θ; p_j)``:
    exact up to rounding.  With every power ``0..K`` present, ``c`` is the Lagrange basis
    (:func:`lagrange_weights`, ``Σ|c_j| ≤ Λ ≈ 2``); otherwise (σ, c: powers 2, 4, 6)
    ``c(p) = V^{−T} (p^k)_k`` with ``V_{jk} = p_j^k``, rounding ``≲ κ(V)·ε`` relative.  The
    residual of every point is checked against the field built at that p
    (:func:`analyse_point`).

    Otherwise the field is built at every p (a small LRU keeps the last few) and ``∂∇L/∂p`` is
    a central difference with ``h = ε^{1/3}·max(1, |p|)``: error ``O(h² ∂³F + ε F/h) ≈
    ε^{2/3} ≈ 4e-11`` relative.  ``∂∇L/∂p`` only enters the corrector's Jacobian and the
    tangent, never the residual: it changes the Newton rate, not the accuracy of the points.

    ``device`` (a resolved device, :func:`mesadyn.device.resolve_device`) is where the exact
    fields are built (:meth:`Parameter.build <._parameters.Parameter.build>`); ``mask``
    restricts the free coordinates; ``seed`` draws the random points of the structure tests.
    """

    def __init__(self, parameter: Parameter, lo: float, hi: float, *,
                 mask: np.ndarray | None = None, seed: int = 0, device: str | None = None):
        self.parameter = parameter
        self.device = device
        self.mask = None if mask is None else np.asarray(mask, bool)
        self.lo, self.hi = float(min(lo, hi)), float(max(lo, hi))
        d = parameter.family.d
        self.d = d
        self.n = 18 * d * d
        self._fields: OrderedDict[float, Field] = OrderedDict()
        self._hcache: tuple[bytes, float, np.ndarray] | None = None
        self.nodes: np.ndarray | None = None
        self._Vinv = np.zeros((0, 0))
        self._node_fields: list[Field] = []
        powers = parameter.powers
        if powers is not None and not parameter.discrete:
            lo_n, hi_n = self.lo, self.hi
            width = max(hi_n - lo_n, 0.1 * max(1.0, abs(lo_n)))
            mid = 0.5 * (lo_n + hi_n)
            nodes = _chebyshev(mid - width / 2, mid + width / 2, len(powers))
            dom = parameter.domain()
            if all(dom.contains(float(x)) for x in nodes):
                V = np.array([[x**k for k in powers] for x in nodes])
                self.nodes = nodes
                self._Vinv = np.linalg.inv(V)
                self._node_fields = [self._build(float(x)) for x in nodes]
        self.free, self.symmetries = self._structure(seed)

    # -- fields --------------------------------------------------------------------------
    def _build(self, p: float) -> Field:
        return self.parameter.build(p, device=self.device)

    def field(self, p: float) -> Field:
        """The exact field built at ``p`` (LRU of the last few)."""
        p = float(p)
        f = self._fields.get(p)
        if f is None:
            f = self._build(p)
            self._fields[p] = f
            while len(self._fields) > 6:
                self._fields.popitem(last=False)
        else:
            self._fields.move_to_end(p)
        return f

    def _weights(self, p: float, derivative: bool = False) -> np.ndarray:
        powers = self.parameter.powers
        assert powers is not None and self.nodes is not None
        if tuple(powers) == tuple(range(len(powers))):  # every power: Lagrange, no Vandermonde
            return lagrange_weights(self.nodes, p, derivative=derivative)
        if derivative:
            phi = np.array([k * p ** (k - 1) if k else 0.0 for k in powers])
        else:
            phi = np.array([p**k for k in powers])
        out: np.ndarray = self._Vinv.T @ phi
        return out

    def loss(self, theta: np.ndarray, p: float) -> float:
        if self.nodes is None:
            return float(self.field(p).loss(torch.as_tensor(theta)))
        th = torch.as_tensor(theta)
        return float(sum(w * float(f.loss(th))
                         for w, f in zip(self._weights(p), self._node_fields, strict=True)))

    def _combine(self, w: np.ndarray, what: Callable[[Field], torch.Tensor]) -> np.ndarray:
        out = np.zeros(0)
        for wj, f in zip(w, self._node_fields, strict=True):
            v = wj * what(f).numpy()
            out = v if out.size == 0 else out + v
        return out

    def grad(self, theta: np.ndarray, p: float) -> np.ndarray:
        th = torch.as_tensor(theta)
        if self.nodes is None:
            return self.field(p).grad(th).numpy()
        return self._combine(self._weights(p), lambda f: f.grad(th))

    def hessian(self, theta: np.ndarray, p: float) -> np.ndarray:
        key = theta.tobytes()
        if self._hcache is not None and self._hcache[0] == key and self._hcache[1] == p:
            return self._hcache[2]
        th = torch.as_tensor(theta)
        if self.nodes is None:
            H = self.field(p).hessian(th).numpy()
        else:
            H = self._combine(self._weights(p), lambda f: f.hessian(th))
        self._hcache = (key, float(p), H)
        return H

    def grad_p(self, theta: np.ndarray, p: float) -> np.ndarray:
        th = torch.as_tensor(theta)
        if self.nodes is not None:
            return self._combine(self._weights(p, derivative=True), lambda f: f.grad(th))
        h = np.finfo(float).eps ** (1 / 3) * max(1.0, abs(p))
        return (self.field(p + h).grad(th).numpy() - self.field(p - h).grad(th).numpy()) / (2 * h)

    # -- structure -----------------------------------------------------------------------
    def _structure(self, seed: int) -> tuple[np.ndarray, tuple[Symmetry, ...]]:
        """Free coordinates (active entries ``L`` depends on) and the scaling symmetries,
        tested at a random θ at both ends and the middle of the range."""
        rng = np.random.default_rng(seed)
        theta = 0.5 * rng.standard_normal(self.n)
        act = active_mask(self.d)
        used = np.zeros(self.n, bool)
        glob, per = scaling_generators(self.d)
        ok_per = [True] * self.d
        ok_glob = True
        for p in sorted({self.lo, 0.5 * (self.lo + self.hi), self.hi}):
            if self.parameter.discrete:
                p = float(round(p))
            f = self.field(p)
            g = f.grad(torch.as_tensor(theta)).numpy()
            H = f.hessian(torch.as_tensor(theta)).numpy()
            scale = float(np.abs(H).max())
            used |= act & ((np.abs(H).max(axis=1) > 1e-14 * scale) | (g != 0))

            def invariant(s: Symmetry, g: np.ndarray = g) -> bool:
                t = s.tangent(theta)
                return bool(abs(float(g @ t)) <= 1e-9 * np.linalg.norm(g) * np.linalg.norm(t))

            ok_glob &= invariant(glob)
            ok_per = [o and invariant(s) for o, s in zip(ok_per, per, strict=True)]
        if self.mask is not None:
            if self.mask.shape != (self.n,):
                raise MesadynError(f"mask must have length {self.n}, got {self.mask.shape}")
            used &= self.mask
        if all(ok_per):
            syms = tuple(Symmetry(s.name, np.where(used, s.generator, 0.0)) for s in per)
        elif ok_glob:
            syms = (Symmetry(glob.name, np.where(used, glob.generator, 0.0)),)
        else:  # pragma: no cover - Eq. 1 guarantees the global scaling symmetry
            raise MesadynError("the field has no scaling symmetry; it is not Eq. 2's")
        return used, syms

