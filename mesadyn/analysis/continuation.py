"""Follow fixed points of the gradient flow through a data parameter (pseudo-arclength).

``∇L(θ; p) = 0`` is continued in one scalar parameter ``p`` of the data — the token scale σ,
the sparse scale c, a moment of an iid family (m2, m4, m6), the token mean μ, a mixture
weight, or T in discrete steps — for the exact field of Eq. 2 at every p.  The engine
(:mod:`._continuation_core`, re-exported here) works transverse to the continuous symmetries
the field has: the 12d² inactive entries of θ (Eq. 1) and the entries the data never reach are
dropped, and each scaling symmetry ``(P, A) ↦ (αP, A/α)`` (one global, or one per coordinate
when the data decouple, e.g. sparse ``x_1``) gets a phase condition — by default the flow's
conserved quantity ``‖A‖² − ‖P‖²`` is held at its start value, so the branch is the fixed point
the gradient flow reaches from initialisations with that invariant.

* :class:`Parameter` — maps ``p`` to a :class:`~mesadyn.field.FieldSpec` and knows its
  domain and whether ``L`` is a polynomial in ``p`` (then ``∇L``, ``∇²L`` and ``∂∇L/∂p`` at any
  p are exact combinations of the fields at a few nodes).  A new parameter is one small class.
* :class:`ParametricField` — the :class:`Problem` of a parameter: fields rebuilt at every p
  (``make_field(spec)``), exact Hessian, ``∂∇L/∂p``, free coordinates and symmetries detected
  at random points.
* :func:`follow` — start point (Theorem 4.1's balanced point or a given θ, refined by Newton),
  the primary branch, located folds and branch points, and the branches that emerge there.
* :func:`analyse_point` — loss, ab (Theorem 4.1), off-diagonal mass, the invariant and the
  full spectrum of ``−∇²L`` classified by :func:`mesadyn.analysis.spectrum.classify`.
"""

from __future__ import annotations

import enum
import math
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import torch

from ..errors import MesadynError, check_int
from ..field import Field, FieldKind, FieldSpec, make_field
from ..model import P_and_A, active_mask, diagonal_mask
from ..model import ab as model_ab
from ..process import IID, Family, Mixture, Shifted, Sparse, gaussian, iid, mixture, shifted
from ..process import sparse as sparse_family
from ._continuation_core import (
    ZERO_RTOL,
    Bifurcation,
    Branch,
    Gauge,
    Options,
    Point,
    Problem,
    Special,
    Status,
    Symmetry,
    _System,
    run_branch,
    switch_branch,
)

__all__ = [
    "Bifurcation", "Branch", "Continuation", "Domain", "Gauge", "IIDMoment", "MixtureWeight",
    "Options", "Parameter", "ParameterName", "ParametricField", "Point", "PointAnalysis",
    "Problem", "Radius", "ShiftedMean", "Sigma", "SparseScale", "Special", "Status", "Symmetry",
    "TrainingLength", "analyse_point", "follow", "follow_discrete", "lagrange_weights",
    "make_parameter",
    "run_branch", "start_point", "switch_branch",
]


# ---- parameters ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Domain:
    """The values a parameter may take: an interval, open or closed at each end."""

    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = True
    hi_open: bool = True
    integer: bool = False

    def contains(self, p: float) -> bool:
        if not math.isfinite(p):
            return False
        if self.integer and p != int(p):
            return False
        above = p > self.lo if self.lo_open else p >= self.lo
        below = p < self.hi if self.hi_open else p <= self.hi
        return above and below

    def __str__(self) -> str:
        def num(x: float) -> str:
            return "inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:g}"

        kind = "integers in " if self.integer else ""
        return (f"{kind}{'(' if self.lo_open else '['}{num(self.lo)}, {num(self.hi)}"
                f"{')' if self.hi_open else ']'}")


class ParameterName(enum.StrEnum):
    """The parameters :func:`make_parameter` knows (the CLI's ``--parameter``)."""

    SIGMA = "sigma"
    SCALE = "scale"
    M2 = "m2"
    M4 = "m4"
    M6 = "m6"
    T = "T"
    MU = "mu"
    WEIGHT = "weight"
    RADIUS = "radius"


class Parameter(ABC):
    """A scalar data parameter ``p``: what the field is at ``p`` and where ``p`` may go.

    Subclasses are frozen dataclasses holding the base family and ``T``; they set ``name``,
    ``symbol`` (matplotlib mathtext), ``powers`` (``L(θ; p) = Σ_k p^k L_k(θ)`` over these
    powers k, if ``L`` is such a polynomial in ``p``; ``None`` if not: then ``∂∇L/∂p`` is a
    central difference) and implement :meth:`domain`, :meth:`value` and :meth:`family_at`
    (or :meth:`spec` for T).
    """

    name: ClassVar[ParameterName]
    symbol: ClassVar[str]
    powers: ClassVar[tuple[int, ...] | None] = None
    discrete: ClassVar[bool] = False
    family: Family
    T: int

    @abstractmethod
    def domain(self) -> Domain:
        """Where ``p`` may go."""

    @abstractmethod
    def value(self) -> float:
        """``p`` of the base family (the default start)."""

    def family_at(self, p: float) -> Family:
        """The family at ``p``."""
        return self.family

    def spec(self, p: float) -> FieldSpec:
        """The exact field's spec at ``p``."""
        return FieldSpec(FieldKind.EXACT, self.family_at(p), self.T)

    def build(self, p: float) -> Field:
        """The exact field at ``p``, built afresh (not kept in make_field's cache nor on disk:
        a continuation visits hundreds of p)."""
        return make_field(self.spec(p), disk_cache=False, reuse=False)

    def balanced_point(self, p: float) -> np.ndarray:
        """Theorem 4.1's balanced point ``a = b = √ab*`` at ``p`` (the default start)."""
        from .fixedpoint import balanced_point

        spec = self.spec(p)
        return balanced_point(spec.family, spec.T)

    def check(self, p: float, what: str = "p") -> float:
        """``p`` if the domain holds it, else a MesadynError naming it."""
        try:
            v = float(p)
        except (TypeError, ValueError):
            raise MesadynError(f"{what} must be a number, got {p!r}") from None
        if not self.domain().contains(v):
            raise MesadynError(f"{what}={p!r} is outside the domain of {self.name}: "
                               f"{self.domain()}")
        return v

    def describe(self) -> dict[str, object]:
        return {"parameter": str(self.name), "powers": list(self.powers or ()),
                "domain": str(self.domain()), "T": self.T, **self.family.describe()}


@dataclass(frozen=True)
class Sigma(Parameter):
    """σ of ``gaussian(d, σ)``: ``L = σ⁶ L_6 + σ⁴ L_4 + σ² L_2`` (G holds moments of order 6,
    C of order 4, the constant ``½(T−2)E‖x_1‖²`` of order 2)."""

    family: IID
    T: int
    name: ClassVar[ParameterName] = ParameterName.SIGMA
    symbol: ClassVar[str] = r"$\sigma$"
    powers: ClassVar[tuple[int, ...] | None] = (2, 4, 6)

    def domain(self) -> Domain:
        return Domain(0.0, math.inf)

    def value(self) -> float:
        return math.sqrt(self.family.m2)

    def family_at(self, p: float) -> Family:
        return gaussian(self.family.d, p)


@dataclass(frozen=True)
class SparseScale(Parameter):
    """c of Example 4.1's ``±c e_i``: ``L = c⁶ L_6 + c⁴ L_4 + c² L_2`` as for σ."""

    family: Sparse
    T: int
    name: ClassVar[ParameterName] = ParameterName.SCALE
    symbol: ClassVar[str] = r"$c$"
    powers: ClassVar[tuple[int, ...] | None] = (2, 4, 6)

    def domain(self) -> Domain:
        return Domain(0.0, math.inf)

    def value(self) -> float:
        return float(self.family.scale)

    def family_at(self, p: float) -> Family:
        return sparse_family(self.family.d, p)


_MOMENT_POWERS = {ParameterName.M2: (0, 1, 2, 3), ParameterName.M4: (0, 1),
                  ParameterName.M6: (0, 1)}


@dataclass(frozen=True)
class IIDMoment(Parameter):
    """One moment (m2, m4 or m6) of an iid zero-mean family, the others held.

    Every moment tensor entry is a product of at most three per-coordinate moments whose orders
    sum to 6 (G) or 4 (C), so ``L`` has degree 3 in m2 and 1 in m4 and m6.  The domain is where
    ``m4 >= m2²`` and ``m6 m2 > m4²`` (Cauchy–Schwarz: some distribution has these moments).
    """

    family: IID
    T: int
    which: ParameterName = ParameterName.M4

    def __post_init__(self) -> None:
        if self.which not in _MOMENT_POWERS:
            raise MesadynError(f"which must be m2, m4 or m6, got {self.which!r}")

    @property
    def name(self) -> ParameterName:  # type: ignore[override]
        return self.which

    @property
    def powers(self) -> tuple[int, ...]:  # type: ignore[override]
        return _MOMENT_POWERS[self.which]

    @property
    def symbol(self) -> str:  # type: ignore[override]
        return f"$m_{str(self.which)[1]}$"

    def _moments(self) -> dict[ParameterName, float]:
        f = self.family
        return {ParameterName.M2: f.m2, ParameterName.M4: f.m4, ParameterName.M6: f.m6}

    def domain(self) -> Domain:
        m = self._moments()
        m2, m4, m6 = m[ParameterName.M2], m[ParameterName.M4], m[ParameterName.M6]
        # ends computed through a square root or a quotient are open: rounding could put
        # them a hair outside the moment conditions
        if self.which is ParameterName.M2:
            return Domain(m4 * m4 / m6, math.sqrt(m4))
        if self.which is ParameterName.M4:
            return Domain(m2 * m2, math.sqrt(m6 * m2), lo_open=False)
        return Domain(m4 * m4 / m2, math.inf)

    def value(self) -> float:
        return self._moments()[self.which]

    def family_at(self, p: float) -> Family:
        m = self._moments()
        m[self.which] = p
        return iid(self.family.d, m[ParameterName.M2], m[ParameterName.M4], m[ParameterName.M6])

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "parameter": str(self.which)}


@dataclass(frozen=True)
class ShiftedMean(Parameter):
    """μ of ``x_1 = μ·1_d + σ g`` (DESIGN.md §6): moments up to order 6 are polynomials of
    degree 6 in μ.  μ = 0 is ``gaussian(d, σ)``."""

    family: Shifted
    T: int
    name: ClassVar[ParameterName] = ParameterName.MU
    symbol: ClassVar[str] = r"$\mu$"
    powers: ClassVar[tuple[int, ...] | None] = (0, 1, 2, 3, 4, 5, 6)

    def domain(self) -> Domain:
        return Domain(-math.inf, math.inf)

    def value(self) -> float:
        return float(self.family.mu)

    def family_at(self, p: float) -> Family:
        return shifted(self.family.d, p, self.family.sigma)


@dataclass(frozen=True)
class MixtureWeight(Parameter):
    """The weight ``w`` of the first component of a two-component mixture
    (``w F_1 + (1 − w) F_2``): moments are linear in ``w``, so ``L`` is too."""

    family: Mixture
    T: int
    name: ClassVar[ParameterName] = ParameterName.WEIGHT
    symbol: ClassVar[str] = r"$w$"
    powers: ClassVar[tuple[int, ...] | None] = (0, 1)

    def __post_init__(self) -> None:
        if len(self.family.components) != 2:
            raise MesadynError("the weight parameter needs a mixture of two components, got "
                               f"{len(self.family.components)}")

    def domain(self) -> Domain:
        return Domain(0.0, 1.0, lo_open=False, hi_open=False)

    def value(self) -> float:
        return float(self.family.components[0][0])

    def family_at(self, p: float) -> Family:
        (_, f1), (_, f2) = self.family.components
        return mixture([(p, f1), (1.0 - p, f2)], name=self.family.name)


@dataclass(frozen=True)
class TrainingLength(Parameter):
    """T of Eq. 2, in integer steps (:func:`follow_discrete`)."""

    family: Family
    T: int
    name: ClassVar[ParameterName] = ParameterName.T
    symbol: ClassVar[str] = r"$T$"
    discrete: ClassVar[bool] = True

    def domain(self) -> Domain:
        return Domain(3.0, math.inf, lo_open=False, integer=True)

    def value(self) -> float:
        return float(self.T)

    def spec(self, p: float) -> FieldSpec:
        return FieldSpec(FieldKind.EXACT, self.family, int(p))


@dataclass(frozen=True)
class Radius(Parameter):
    """The radius r of ``W = r·diag(λ)`` (DESIGN.md §6; r = 1 is the paper).  Each counted
    term of the moment tensors carries ``r^{2t − K − Σh}``, so ``L`` has degree about 6T in r:
    not a polynomial worth interpolating, hence a field built at each r and ``∂∇L/∂p`` by
    central differences; the field at r is ``FieldSpec(..., radius=r)``."""

    family: Family
    T: int
    name: ClassVar[ParameterName] = ParameterName.RADIUS
    symbol: ClassVar[str] = r"$r$"

    def domain(self) -> Domain:
        return Domain(0.0, math.inf)

    def value(self) -> float:
        return 1.0

    def spec(self, p: float) -> FieldSpec:
        return FieldSpec(FieldKind.EXACT, self.family, self.T, radius=p)

    def balanced_point(self, p: float) -> np.ndarray:
        from ..model import diagonal_init
        from ..theory import constants

        s = math.sqrt(constants(self.family, self.T, radius=p).ab_star)
        return diagonal_init(self.family.d, s, s).numpy()

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "radius": "p"}


def make_parameter(name: str, family: Family, T: int) -> Parameter:
    """The parameter called ``name`` of ``family`` at training length ``T``.

    ## Raises
    - `MesadynError`: an unknown name, or a parameter the family does not have.
    """
    try:
        which = ParameterName(name)
    except ValueError:
        names = ", ".join(m.value for m in ParameterName)
        raise MesadynError(f"unknown parameter {name!r}; choose one of {names}") from None
    T = check_int("T", T, 3)

    def needs(cls: type, what: str) -> None:
        if not isinstance(family, cls):
            raise MesadynError(f"parameter {which} applies to {what}, not to family "
                               f"{family.name!r}")

    if which is ParameterName.SIGMA:
        needs(IID, "the gaussian family")
        if family.name != "gaussian":
            raise MesadynError(f"parameter sigma applies to the gaussian family, not to family "
                               f"{family.name!r}; use m2 for an iid family")
        return Sigma(family, T)  # type: ignore[arg-type]
    if which is ParameterName.SCALE:
        needs(Sparse, "the sparse family")
        return SparseScale(family, T)  # type: ignore[arg-type]
    if which in _MOMENT_POWERS:
        needs(IID, "iid families (gaussian, rademacher, uniform)")
        return IIDMoment(family, T, which)  # type: ignore[arg-type]
    if which is ParameterName.MU:
        needs(Shifted, "the shifted family")
        return ShiftedMean(family, T)  # type: ignore[arg-type]
    if which is ParameterName.WEIGHT:
        needs(Mixture, "two-component mixtures")
        return MixtureWeight(family, T)  # type: ignore[arg-type]
    if which is ParameterName.RADIUS:
        return Radius(family, T)
    return TrainingLength(family, T)


# ---- the problem of a parameter -----------------------------------------------------------
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
    """

    def __init__(self, parameter: Parameter, lo: float, hi: float, *,
                 mask: np.ndarray | None = None, seed: int = 0):
        self.parameter = parameter
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
        return self.parameter.build(p)

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


# ---- start points --------------------------------------------------------------------------
def start_point(problem: ParametricField, p0: float, theta: np.ndarray | None = None, *,
                tol: float = 1e-11) -> np.ndarray:
    """A converged fixed point at ``p0``: Newton (:func:`~mesadyn.analysis.fixedpoint.refine`)
    from ``theta`` or from Theorem 4.1's balanced point ``a = b = √ab*``.

    ## Raises
    - `MesadynError`: no balanced point for this family, or the start is not near a fixed
      point (Newton does not converge, or moves θ by more than 5% of its norm).
    """
    from .fixedpoint import refine

    fam = problem.parameter.spec(p0).family
    if theta is None:
        try:
            theta = problem.parameter.balanced_point(p0)
        except MesadynError as exc:
            raise MesadynError(f"no balanced start point for family {fam.name!r} ({exc}); "
                               "give a start point") from None
    theta = np.asarray(theta, np.float64)
    field = problem.field(p0)
    r0 = float(np.abs(problem.grad(theta, p0)).max())
    fp = refine(field, theta, mask=problem.free, tol=tol, max_iter=30)
    moved = float(np.linalg.norm(fp.theta - theta))
    size = max(float(np.linalg.norm(theta)), 1e-12)
    if not fp.converged or moved > 0.05 * size:
        raise MesadynError(
            f"the start is not near a fixed point at {problem.parameter.name}={p0:g}: "
            f"max|∇L| = {r0:.3g} there and Newton reached {fp.residual:.3g} after moving θ by "
            f"{moved / size:.1%} of its norm; start from a fixed point (e.g. a flow end point)")
    out: np.ndarray = np.asarray(fp.theta, np.float64)
    return out


# ---- what a point says about the paper's objects -----------------------------------------
@dataclass(frozen=True)
class PointAnalysis:
    """The paper's quantities at one point of a branch."""

    loss: float
    residual: float  # max|∇L| of the field built at p
    ab: np.ndarray  # per coordinate: diag(W^KQ_32) ⊙ diag(W^PV_12)
    offdiag_mass: float  # ‖θ off the diagonals of W^KQ_32, W^PV_12‖² / ‖θ active‖²
    invariant: float  # ‖A‖_F² − ‖P‖_F², conserved by the flow
    eigenvalues: np.ndarray  # all 18d² eigenvalues of −∇²L, ascending
    n_zero: int
    n_stable: int
    n_unstable: int
    zero_modes: dict[str, object]

    @property
    def ab_mean(self) -> float:
        return float(self.ab.mean())


def analyse_point(problem: ParametricField, theta: np.ndarray, p: float) -> PointAnalysis:
    """Loss, ab, the off-diagonal mass, the invariant and the classified spectrum of ``−∇²L``
    (as ``mesadyn stability`` classifies it: :func:`~mesadyn.analysis.spectrum.classify`)."""
    from .spectrum import classify

    th = np.asarray(theta, np.float64)
    d = problem.d
    field = problem.field(p)
    tth = torch.as_tensor(th)
    L, g = field.loss_and_grad(tth)
    H = field.hessian(tth).numpy()
    sp = classify(H, th, field=field)
    s = sp.to_dict()
    act = active_mask(d)
    off = act & ~diagonal_mask(d)
    na = float(th[act] @ th[act])
    P, A = P_and_A(torch.as_tensor(th))
    zm = s["zero_modes"]
    assert isinstance(zm, dict)
    return PointAnalysis(
        loss=float(L), residual=float(g.abs().max()),
        ab=model_ab(torch.as_tensor(th)).numpy().copy(),
        offdiag_mass=float(th[off] @ th[off]) / na if na > 0 else 0.0,
        invariant=float((A**2).sum() - (P**2).sum()),
        eigenvalues=sp.eigenvalues.copy(), n_zero=sp.n_zero, n_stable=sp.n_stable,
        n_unstable=sp.n_unstable, zero_modes=dict(zm),
    )


# ---- the whole continuation ----------------------------------------------------------------
@dataclass
class Continuation:
    """Every branch followed from one start: ``branches[0]`` is the primary branch; the others
    emerged at its branch points (``origin`` = index of the special point on branch 0)."""

    parameter: Parameter
    start: float
    stop: float
    branches: list[Branch] = field(default_factory=list)

    @property
    def specials(self) -> list[Special]:
        return [s for b in self.branches for s in b.specials]


OnPoint = Callable[[int, Branch], None]


def follow(parameter: Parameter, start: float, stop: float, *, theta0: np.ndarray | None = None,
           options: Options | None = None, switch: bool = True,
           on_point: OnPoint | None = None, resume: list[Branch] | None = None,
           problem: ParametricField | None = None,
           mask: np.ndarray | None = None) -> Continuation:
    """Continue the fixed point at ``p = start`` to ``p = stop`` and switch at branch points.

    ## Arguments
    - `parameter`: what varies (:func:`make_parameter`); `start`, `stop` must lie in its domain.
    - `theta0`: a point near a fixed point at ``start`` (default: Theorem 4.1's balanced point).
    - `options`: step control (:class:`Options`); `switch`: follow emerging branches (both
      directions) from every pitchfork or transcritical point of the primary branch.
    - `on_point(i, branch)`: called after each accepted point of branch ``i``.
    - `resume`: branches of an interrupted run (the last one is continued, finished ones kept).
    - `mask`: restrict the free coordinates (e.g. :func:`mesadyn.model.diagonal_mask`, the
      clipping of Theorem 4.3); masked-out entries keep their start values.

    ## Raises
    - `MesadynError`: a value outside the domain, a discrete parameter (use
      :func:`follow_discrete`), or a start that is not near a fixed point.
    """
    if parameter.discrete:
        raise MesadynError(f"{parameter.name} is discrete; use follow_discrete")
    start = parameter.check(start, "start")
    stop = parameter.check(stop, "stop")
    if start == stop:
        raise MesadynError(f"start and stop are both {start:g}; give a range")
    opt = options or Options()
    lo, hi = min(start, stop), max(start, stop)
    pb = problem or ParametricField(parameter, lo, hi, mask=mask)
    done = resume if resume is not None else []  # filled in place (a caller may checkpoint it)
    if done and done[0].points:
        th0 = done[0].points[0].theta
    else:
        th0 = start_point(pb, start, theta0, tol=opt.tol)
    result = Continuation(parameter, start, stop, done)

    def cb(i: int) -> Callable[[Branch], None]:
        def inner(br: Branch) -> None:
            if on_point is not None:
                on_point(i, br)
        return inner

    if not done:
        result.branches.append(Branch())
    primary = result.branches[0]
    if primary.status is Status.MAX_STEPS and primary.steps < opt.max_steps:
        run_branch(pb, th0, start, stop, opt, lo=lo, hi=hi, branch=primary, on_point=cb(0),
                   gauge_theta=th0)
    if not switch:
        return result
    jobs = [(k, direction) for k, sp in enumerate(primary.specials)
            if sp.kind in (Bifurcation.PITCHFORK, Bifurcation.TRANSCRITICAL)
            for direction in (1, -1)]
    for n, (k, direction) in enumerate(jobs, start=1):
        if n < len(result.branches):
            br = result.branches[n]
            if br.status is Status.MAX_STEPS and br.points and br.steps < opt.max_steps:
                run_branch(pb, th0, br.points[-1].p, stop, opt, lo=lo, hi=hi, branch=br,
                           on_point=cb(n), gauge_theta=th0)
            continue
        br = switch_branch(pb, primary.specials[k], stop, opt, lo=lo, hi=hi,
                           direction=direction, gauge_theta=th0, on_point=cb(n), origin=k)
        result.branches.append(br)
    return result


def follow_discrete(parameter: Parameter, values: list[int], *,
                    theta0: np.ndarray | None = None, options: Options | None = None,
                    on_point: OnPoint | None = None) -> Continuation:
    """Natural continuation in a discrete parameter (T): Newton at each value from the last
    point (the pseudo-inverse step never moves along the orbit).  A change in the number of
    unstable non-symmetry eigenvalues between two values is reported as an
    :attr:`Bifurcation.UNLOCATED` special point at the second value.
    """
    from .fixedpoint import refine

    if not values:
        raise MesadynError("give at least one value of the discrete parameter")
    vals = [int(parameter.check(v, "value")) for v in values]
    opt = options or Options()
    pb = ParametricField(parameter, min(vals), max(vals))
    theta = start_point(pb, vals[0], theta0, tol=opt.tol)
    sysm = _System(pb, theta, opt)
    br = Branch()
    result = Continuation(parameter, vals[0], vals[-1], [br])
    for i, T in enumerate(vals):
        if i:
            fp = refine(pb.field(T), theta, mask=pb.free, tol=opt.tol, max_iter=30)
            if not fp.converged:
                br.status = Status.STEP_FAILED
                br.message = f"Newton did not converge at {parameter.name}={T}"
                return result
            theta = np.asarray(fp.theta, np.float64)
        H = pb.hessian(theta, T)
        mu, _, _ = sysm.reduced_eigh(H, theta)
        tol = ZERO_RTOL * float(np.abs(mu).max())
        pt = Point(theta=theta, p=float(T), residual=float(np.abs(pb.grad(theta, T)).max()),
                   iterations=0, eigenvalues=mu, n_unstable=int((mu > tol).sum()),
                   tangent=np.zeros(sysm.nf + 1), ds=1.0)
        if br.points and br.points[-1].n_unstable != pt.n_unstable:
            br.specials.append(Special(
                kind=Bifurcation.UNLOCATED, p=float(T), theta=theta, after=len(br.points) - 1,
                eigenvalue=float("nan"), null_vector=np.zeros(sysm.nf), tangent=pt.tangent,
                fold_test=float("nan"), cubic=float("nan"), bracket=1.0,
                residual=pt.residual))
        br.points.append(pt)
        br.steps += 1
        if on_point is not None:
            on_point(0, br)
    br.status = Status.REACHED_END
    br.message = f"reached {parameter.name}={vals[-1]}"
    return result
