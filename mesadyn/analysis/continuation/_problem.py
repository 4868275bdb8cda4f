"""The continuation problem of a data parameter: the exact field of Eq. 2 at every ``p``.

:class:`ParametricField` is the :class:`~._system.Problem` of a
:class:`~._parameters.Parameter`: ``∇L``, ``∇²L`` and ``∂∇L/∂p`` of the exact field (exact
combinations of the fields at a few Chebyshev nodes when ``L`` is a polynomial in ``p``, else
fields rebuilt at each ``p``), the free coordinates and the scaling symmetries
(:func:`scaling_generators`), detected at random points.  A model other than the paper's
(:attr:`Parameter.model <._parameters.Process.model>`) has its exact field by quadrature
rebuilt at each ``p``, and its free coordinates and declared symmetries read through the
:class:`~mesadyn.models.Model` API (:mod:`._models`).
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

__all__ = ["WINDOW_RATIO", "ParametricField", "lagrange_weights", "scaling_generators"]

#: A one-sign range whose ends differ by more than this factor is combined window by window
#: (:class:`ParametricField`); narrower ranges keep one set of nodes.
WINDOW_RATIO = 2.0


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

    The rounding is relative to the node fields' size, so nodes far from ``p`` lose it: at
    σ = 0.5 with nodes across [0.5, 100] (where ``L`` grows like σ⁶) the combined gradient is off
    by 6e-8 while the corrector asks for 1e-11, and the continuation fails at its start.  A
    range one sign whose ends differ by more than :data:`WINDOW_RATIO` is therefore cut into
    windows ``|p| ∈ [m R^k, m R^(k+1)]`` (``m`` the smaller end, ``R`` = :data:`WINDOW_RATIO`), each
    with its own nodes, built when the branch first enters it (``windowed``): every p is
    combined from nodes within a factor R of it, and the rounding is that of the field at p.

    Otherwise the field is built at every p (a small LRU keeps the last few) and ``∂∇L/∂p`` is
    a central difference with ``h = ε^{1/3}·max(1, |p|)``: error ``O(h² ∂³F + ε F/h) ≈
    ε^{2/3} ≈ 4e-11`` relative.  ``∂∇L/∂p`` only enters the corrector's Jacobian and the
    tangent, never the residual: it changes the Newton rate, not the accuracy of the points.

    ``device`` (a resolved device, :func:`mesadyn.device.resolve_device`) is where the exact
    fields are built (:meth:`Parameter.build <._parameters.Parameter.build>`); ``mask``
    restricts the free coordinates; ``seed`` draws the random points of the structure tests.

    For a model other than the paper's (``parameter.model``) the field is built at every p
    (:attr:`Parameter.node_powers <._parameters.Parameter.node_powers>` is ``None``), the
    free coordinates are its active entries the data reach and the symmetries its declared
    ones (:func:`._models.model_structure`); :meth:`restrict_symmetries` keeps those with
    independent tangents at the start.
    """

    def __init__(self, parameter: Parameter, lo: float, hi: float, *,
                 mask: np.ndarray | None = None, seed: int = 0, device: str | None = None):
        self.parameter = parameter
        self.model = parameter.model
        self.device = device
        self.mask = None if mask is None else np.asarray(mask, bool)
        self.lo, self.hi = float(min(lo, hi)), float(max(lo, hi))
        d = parameter.family.d
        self.d = d
        self.n = self.model.n_params(d)
        self._fields: OrderedDict[float, Field] = OrderedDict()
        self._hcache: tuple[bytes, float, np.ndarray] | None = None
        self.nodes: np.ndarray | None = None
        self._Vinv = np.zeros((0, 0))
        self._node_fields: list[Field] = []
        #: windows of a wide range (``window index -> (nodes, V⁻¹, fields)``), built lazily
        self._windows: OrderedDict[int, tuple[np.ndarray, np.ndarray, list[Field]]] = \
            OrderedDict()
        self.windowed = False
        powers = parameter.node_powers
        if powers is not None and not parameter.discrete:
            lo_n, hi_n = self.lo, self.hi
            one_sign = lo_n > 0 or hi_n < 0
            if one_sign and max(abs(lo_n), abs(hi_n)) > WINDOW_RATIO * min(abs(lo_n), abs(hi_n)):
                self.windowed = True  # nodes near each p: see the class docstring
                self.nodes, self._Vinv, self._node_fields = self._window(
                    self._window_index(lo_n))
            else:
                width = max(hi_n - lo_n, 0.1 * max(1.0, abs(lo_n)))
                mid = 0.5 * (lo_n + hi_n)
                basis = self._basis(_chebyshev(mid - width / 2, mid + width / 2, len(powers)))
                if basis is not None:
                    self.nodes, self._Vinv, self._node_fields = basis
        self._reached = np.zeros(self.n, bool)  # a model's reached entries (_model_structure)
        self.free, self.symmetries = self._structure(seed)

    # -- the node fields -----------------------------------------------------------------
    def _basis(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[Field]] | None:
        """The fields at ``nodes`` and ``V⁻¹`` (``V_jk = p_j^k``), or None if a node is outside
        the parameter's domain."""
        powers = self.parameter.node_powers
        assert powers is not None
        dom = self.parameter.domain()
        if not all(dom.contains(float(x)) for x in nodes):
            return None
        V = np.array([[x**k for k in powers] for x in nodes])
        return nodes, np.linalg.inv(V), [self._build(float(x)) for x in nodes]

    def _window_index(self, p: float) -> int:
        """The window of a wide range holding ``p``: ``|p| ∈ [m·R^k, m·R^(k+1)]`` with ``m`` the
        range's smallest ``|p|`` and ``R`` = :data:`WINDOW_RATIO` (the last one ends at the
        range's end)."""
        m = min(abs(self.lo), abs(self.hi))
        top = max(abs(self.lo), abs(self.hi))
        last = max(0, math.ceil(math.log(top / m) / math.log(WINDOW_RATIO)) - 1)
        k = math.floor(math.log(max(abs(float(p)), m) / m) / math.log(WINDOW_RATIO))
        return min(max(k, 0), last)

    def _window(self, k: int) -> tuple[np.ndarray, np.ndarray, list[Field]]:
        """Window ``k``'s nodes, ``V⁻¹`` and fields (built on first use; the last few kept)."""
        hit = self._windows.get(k)
        if hit is not None:
            self._windows.move_to_end(k)
            return hit
        powers = self.parameter.node_powers
        assert powers is not None
        m = min(abs(self.lo), abs(self.hi))
        top = max(abs(self.lo), abs(self.hi))
        a, b = m * WINDOW_RATIO**k, min(top, m * WINDOW_RATIO ** (k + 1))
        sign = 1.0 if self.lo > 0 else -1.0
        basis = self._basis(sign * _chebyshev(a, b, len(powers)))
        if basis is None:  # pragma: no cover - the range lies in the domain, so its windows do
            raise MesadynError(f"the nodes of window [{a:g}, {b:g}] leave the domain of "
                               f"{self.parameter.name}")
        self._windows[k] = basis
        while len(self._windows) > 3:
            self._windows.popitem(last=False)
        return basis

    def _at(self, p: float) -> tuple[np.ndarray, np.ndarray, list[Field]]:
        """The nodes, ``V⁻¹`` and node fields that combine to the field at ``p``."""
        if self.windowed:
            return self._window(self._window_index(p))
        assert self.nodes is not None
        return self.nodes, self._Vinv, self._node_fields

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
        powers = self.parameter.node_powers
        nodes, Vinv, _ = self._at(p)
        assert powers is not None
        if tuple(powers) == tuple(range(len(powers))):  # every power: Lagrange, no Vandermonde
            return lagrange_weights(nodes, p, derivative=derivative)
        if derivative:
            phi = np.array([k * p ** (k - 1) if k else 0.0 for k in powers])
        else:
            phi = np.array([p**k for k in powers])
        out: np.ndarray = Vinv.T @ phi
        return out

    def loss(self, theta: np.ndarray, p: float) -> float:
        if self.nodes is None:
            return float(self.field(p).loss(torch.as_tensor(theta)))
        th = torch.as_tensor(theta)
        return float(sum(w * float(f.loss(th))
                         for w, f in zip(self._weights(p), self._at(p)[2], strict=True)))

    def _combine(self, p: float, w: np.ndarray,
                 what: Callable[[Field], torch.Tensor]) -> np.ndarray:
        out = np.zeros(0)
        for wj, f in zip(w, self._at(p)[2], strict=True):
            v = wj * what(f).numpy()
            out = v if out.size == 0 else out + v
        return out

    def grad(self, theta: np.ndarray, p: float) -> np.ndarray:
        th = torch.as_tensor(theta)
        if self.nodes is None:
            return self.field(p).grad(th).numpy()
        return self._combine(p, self._weights(p), lambda f: f.grad(th))

    def hessian(self, theta: np.ndarray, p: float) -> np.ndarray:
        key = theta.tobytes()
        if self._hcache is not None and self._hcache[0] == key and self._hcache[1] == p:
            return self._hcache[2]
        th = torch.as_tensor(theta)
        if self.nodes is None:
            H = self.field(p).hessian(th).numpy()
        else:
            H = self._combine(p, self._weights(p), lambda f: f.hessian(th))
        self._hcache = (key, float(p), H)
        return H

    def grad_p(self, theta: np.ndarray, p: float) -> np.ndarray:
        th = torch.as_tensor(theta)
        if self.nodes is not None:
            return self._combine(p, self._weights(p, derivative=True), lambda f: f.grad(th))
        h = np.finfo(float).eps ** (1 / 3) * max(1.0, abs(p))
        return (self.field(p + h).grad(th).numpy() - self.field(p - h).grad(th).numpy()) / (2 * h)

    # -- structure -----------------------------------------------------------------------
    def restrict_symmetries(self, theta: np.ndarray) -> None:
        """Keep the declared symmetries of a model other than the paper's whose tangents at
        ``theta`` (the start) are independent (:func:`._models.independent_symmetries`); the
        paper's problem keeps its scalings (a start where one vanishes is refused by the
        engine, naming it)."""
        if not self.model.is_paper:
            from ._models import independent_symmetries

            self.symmetries = independent_symmetries(self.symmetries, theta, self.free,
                                                     self._reached & ~self.free)

    def _structure(self, seed: int) -> tuple[np.ndarray, tuple[Symmetry, ...]]:
        """Free coordinates (active entries ``L`` depends on) and the scaling symmetries,
        tested at a random θ at both ends and the middle of the range."""
        if not self.model.is_paper:
            return self._model_structure(seed)
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

    def _model_structure(self, seed: int) -> tuple[np.ndarray, tuple[Symmetry, ...]]:
        """A model's free coordinates and declared symmetries (:func:`._models.
        model_structure`), from the fields at both ends of the range."""
        from ._models import model_structure

        ends = sorted({self.lo, self.hi})
        if self.parameter.discrete:
            ends = sorted({float(round(p)) for p in ends})
        used, syms = model_structure([self.field(p) for p in ends], self.model, self.d, seed)
        self._reached = used.copy()  # the entries L depends on, before the mask
        if self.mask is not None:
            if self.mask.shape != (self.n,):
                raise MesadynError(f"mask must have length {self.n}, got {self.mask.shape}")
            used &= self.mask
        return used, syms
