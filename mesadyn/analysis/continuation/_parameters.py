"""The data parameters a continuation follows: what the exact field is at each ``p``.

A :class:`Parameter` maps a scalar ``p`` of the data (the token scale σ, the sparse scale c, a
moment of an iid family, the token mean μ, a mixture weight, the radius r of ``W``, the AR
noise scale s, or T in integer steps) to a :class:`~mesadyn.field.FieldSpec`, knows its
:class:`Domain` and whether ``L`` is a polynomial in ``p`` (``powers``).  Every parameter
carries the process it varies within (:class:`Process`: the radius, rotation and noise of
``x_{t+1} = W x_t + ε_t``) into the spec, so a continuation in σ follows the exact field of
real rotations, Haar W or noisy AR as it does the paper's.  It also carries the attention
model (:class:`~mesadyn.models.Model`; the paper's by default): the field at ``p`` is then that
model's exact field by quadrature (:class:`~mesadyn.field.QuadratureField`, the paper's diagonal
W without noise), rebuilt at each ``p``.  :func:`make_parameter` builds one by its
:class:`ParameterName` (the CLI's ``--parameter``).  A new parameter is one small frozen class.
"""

from __future__ import annotations

import enum
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from ...errors import MesadynError, check_int
from ...field import Field, FieldKind, FieldSpec, make_field
from ...models import PAPER, Model
from ...process import IID, Family, Mixture, Shifted, Sparse, gaussian, iid, mixture, shifted
from ...process import sparse as sparse_family

__all__ = ["Domain", "IIDMoment", "MixtureWeight", "NoiseScale", "Parameter", "ParameterName",
           "Process", "Radius", "ShiftedMean", "Sigma", "SparseScale", "TrainingLength",
           "make_parameter"]


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
    NOISE = "noise"


@dataclass(frozen=True, kw_only=True)
class Process:
    """The process a parameter varies within (docs/design.md §6; the defaults are the paper's):
    the radius r and the ``rotation`` of ``W = r·R`` and the scale s of the AR ``noise``,
    carried into every :class:`~mesadyn.field.FieldSpec` the parameter builds; and the
    attention ``model`` whose field it is (docs/design.md §7; the paper's by default)."""

    radius: float = 1.0
    rotation: str = "diagonal"
    noise: float = 0.0
    model: Model = PAPER

    def process(self) -> dict[str, object]:
        """What differs from the paper's process (``radius``, ``rotation``, ``noise``)."""
        out: dict[str, object] = {} if self.radius == 1 else {"radius": self.radius}
        if self.rotation != "diagonal":
            out["rotation"] = str(self.rotation)
        if self.noise != 0:
            out["noise"] = self.noise
        return out


#: ``L`` in a scale of the token (σ, c) is ``σ⁶ L_6 + σ⁴ L_4 + σ² L_2``; with AR noise every
#: moment of ``y = r^{τ−1} x + N`` also has terms of lower order in the token, down to the
#: noise's own (``s⁶``, ``s⁴``, ``s²``: order 0 in σ).
_SCALE_POWERS, _NOISY_SCALE_POWERS = (2, 4, 6), (0, 2, 4, 6)


class Parameter(Process, ABC):
    """A scalar data parameter ``p``: what the field is at ``p`` and where ``p`` may go.

    Subclasses are frozen dataclasses holding the base family and ``T`` (and, keyword-only,
    the :class:`Process`: radius, rotation, noise); they set ``name``,
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

    @property
    def node_powers(self) -> tuple[int, ...] | None:
        """The powers over which the continuation combines fields at Chebyshev nodes
        (:class:`~._problem.ParametricField`): :attr:`powers` for the paper's model; ``None``
        for another model, whose field by quadrature is rebuilt at each ``p`` (its rule's
        nodes and weights move with ``p``, and ``L`` has the model's own degree in ``p``:
        ``2·3^k`` in σ for k layers)."""
        return self.powers if self.model.is_paper else None

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
        """The exact field's spec at ``p``: the family at ``p`` within this process."""
        return FieldSpec(FieldKind.EXACT, self.family_at(p), self.T, radius=self.radius,
                         rotation=self.rotation, noise=self.noise, model=self.model)

    def build(self, p: float, device: str | None = None) -> Field:
        """The exact field at ``p``, built afresh (not kept in make_field's cache nor on disk:
        a continuation visits hundreds of p), on ``device`` when given (a resolved device,
        :func:`mesadyn.device.resolve_device`; by default the spec's own, the CPU)."""
        spec = self.spec(p)
        if device is not None:
            spec = replace(spec, device=device)
        return make_field(spec, disk_cache=False, reuse=False)

    def balanced_point(self, p: float) -> np.ndarray:
        """Theorem 4.1's balanced point ``a = b = √ab*`` at ``p`` (the default start), with the
        process's ``ab*``: ``c2/c1`` at its radius and noise (:func:`mesadyn.theory.constants`),
        Haar's (:func:`mesadyn.theory.haar_constants`); for real rotations the fixed point of
        the 3-D manifold with ``a² + c² = b²``
        (:meth:`~mesadyn.analysis.rotation_manifold.ManifoldSystem.balanced`, its constants read
        off the exact field at ``p``)."""
        from ...model import diagonal_init
        from ...theory import constants, haar_constants

        if not self.model.is_paper:
            raise MesadynError(f"model={self.model} has no balanced point (Theorem 4.1 is the "
                               "paper's one-layer model's): start from a fixed point of its flow")
        spec = self.spec(p)
        if spec.rotation == "real":
            from ..rotation_manifold import ManifoldSystem, embed

            a, c, b = ManifoldSystem.from_field(self.build(p)).balanced()
            return embed(spec.family.d, a, c, b).numpy()
        if spec.rotation == "haar":
            ab = haar_constants(spec.family, spec.T, radius=spec.radius).ab_star
        else:
            ab = constants(spec.family, spec.T, radius=spec.radius, noise=spec.noise).ab_star
        s = math.sqrt(ab)
        return diagonal_init(spec.family.d, s, s).numpy()

    def check(self, p: float, what: str = "p") -> float:
        """``p`` if the domain holds it, else a MesadynError naming it."""
        try:
            v = float(p)
        except (TypeError, ValueError):
            raise MesadynError(f"{what} must be a number, got {p!r}") from None
        dom = self.domain()
        if dom.lo >= dom.hi:  # one value (or none): the other moments pin it
            raise MesadynError(
                f"{self.name} of {self.family.name} is pinned at {dom.lo:g} by its other "
                f"moments (no distribution with them has another {self.name}), so it cannot "
                "be continued; continue another parameter")
        if not dom.contains(v):
            raise MesadynError(f"{what}={p!r} is outside the domain of {self.name}: {dom}")
        return v

    def describe(self) -> dict[str, object]:
        out = {"parameter": str(self.name), "powers": list(self.node_powers or ()),
               "domain": str(self.domain()), "T": self.T, **self.family.describe(),
               **self.process()}
        return out if self.model.is_paper else {**out, **self.model.describe()}


@dataclass(frozen=True)
class Sigma(Parameter):
    """σ of ``gaussian(d, σ)``: ``L = σ⁶ L_6 + σ⁴ L_4 + σ² L_2`` (G holds moments of order 6,
    C of order 4, the constant ``½(T−2)E‖x_1‖²`` of order 2); with AR noise also ``L_0``."""

    family: IID
    T: int
    name: ClassVar[ParameterName] = ParameterName.SIGMA
    symbol: ClassVar[str] = r"$\sigma$"

    @property
    def powers(self) -> tuple[int, ...]:  # type: ignore[override]
        return _NOISY_SCALE_POWERS if self.noise else _SCALE_POWERS

    def domain(self) -> Domain:
        return Domain(0.0, math.inf)

    def value(self) -> float:
        return math.sqrt(self.family.m2)

    def family_at(self, p: float) -> Family:
        return gaussian(self.family.d, p)


@dataclass(frozen=True)
class SparseScale(Parameter):
    """c of Example 4.1's ``±c e_i``: ``L = c⁶ L_6 + c⁴ L_4 + c² L_2`` as for σ (with AR
    noise also ``L_0``)."""

    family: Sparse
    T: int
    name: ClassVar[ParameterName] = ParameterName.SCALE
    symbol: ClassVar[str] = r"$c$"

    @property
    def powers(self) -> tuple[int, ...]:  # type: ignore[override]
        return _NOISY_SCALE_POWERS if self.noise else _SCALE_POWERS

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
    some symmetric distribution has these moments (the Hankel conditions of ``x²``):
    ``m4 > m2²`` and ``m6 m2 > m4²``.  ``m4 = m2²`` means ``x²`` is constant, so it needs
    ``m6 = m2³`` too; then (a two-point family such as rademacher) m4 is pinned at ``m2²``.
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
            if math.isclose(m6, m2**3, rel_tol=1e-12):  # x² constant: m4 = m2² only
                return Domain(m2 * m2, m2 * m2, lo_open=False, hi_open=False)
            return Domain(m2 * m2, math.sqrt(m6 * m2))
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
    """μ of ``x_1 = μ·1_d + σ g`` (docs/design.md §6): moments up to order 6 are polynomials of
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
        return FieldSpec(FieldKind.EXACT, self.family, int(p), radius=self.radius,
                         rotation=self.rotation, noise=self.noise, model=self.model)


@dataclass(frozen=True)
class Radius(Parameter):
    """The radius r of ``W = r·R`` (docs/design.md §6; r = 1 is the paper), starting by
    default from the process's own ``radius``.  Each counted term of the moment tensors
    carries ``r^{2t − K − Σh}``, so ``L`` has degree about 6T in r: not a polynomial worth
    interpolating, hence a field built at each r and ``∂∇L/∂p`` by central differences; the
    field at r is the process's with ``radius=r``."""

    family: Family
    T: int
    name: ClassVar[ParameterName] = ParameterName.RADIUS
    symbol: ClassVar[str] = r"$r$"

    def domain(self) -> Domain:
        return Domain(0.0, math.inf)

    def value(self) -> float:
        return float(self.radius)

    def spec(self, p: float) -> FieldSpec:
        return FieldSpec(FieldKind.EXACT, self.family, self.T, radius=p,
                         rotation=self.rotation, noise=self.noise, model=self.model)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "radius": "p"}


@dataclass(frozen=True)
class NoiseScale(Parameter):
    """The scale s of the AR noise in ``x_{t+1} = W x_t + ε_t`` (docs/data-models.md; s = 0 is
    the noiseless process), starting by default from the process's own ``noise``.  A Gaussian
    noise pair carries ``K ∝ s²`` and a moment of order 6 (4, 2) holds at most three (two, one)
    pairs, so ``L = s⁶ L_6 + s⁴ L_4 + s² L_2 + L_0``: four exact fields at Chebyshev nodes give
    every s (the noisy exact field is built there, not at each point of the branch)."""

    family: Family
    T: int
    name: ClassVar[ParameterName] = ParameterName.NOISE
    symbol: ClassVar[str] = r"$s$"
    powers: ClassVar[tuple[int, ...] | None] = (0, 2, 4, 6)

    def domain(self) -> Domain:
        return Domain(0.0, math.inf, lo_open=False)

    def value(self) -> float:
        return float(self.noise)

    def spec(self, p: float) -> FieldSpec:
        return FieldSpec(FieldKind.EXACT, self.family, self.T, radius=self.radius,
                         rotation=self.rotation, noise=p, model=self.model)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "noise": "p"}


def make_parameter(name: str, family: Family, T: int, *, radius: float = 1.0,
                   rotation: str = "diagonal", noise: float = 0.0,
                   model: Model | None = None) -> Parameter:
    """The parameter called ``name`` of ``family`` at training length ``T`` within the process
    ``radius``, ``rotation``, ``noise`` (docs/design.md §6; the defaults are the paper's):
    every field the parameter builds is that process's, and a continuation in ``radius``
    (``noise``) starts by default from the process's radius (noise).  ``model`` (default the
    paper's) is the attention model whose exact field it builds (:func:`_check_model`).

    ## Raises
    - `MesadynError`: an unknown name, a parameter the family does not have, a process the
      exact field does not reach (an odd d with real rotations; Haar W with noise, or beyond
      its reach: also for ``noise`` itself, whose nodes are noisy), or a model or parameter
      the model's exact field does not reach (:func:`_check_model`).
    """
    try:
        which = ParameterName(name)
    except ValueError:
        names = ", ".join(m.value for m in ParameterName)
        raise MesadynError(f"unknown parameter {name!r}; choose one of {names}") from None
    T = check_int("T", T, 3)
    model = PAPER if model is None else model
    if not model.is_paper:
        _check_model(model, which, rotation, noise)
    # the process as the exact field takes it (names a bad radius, rotation or noise)
    spec = FieldSpec(FieldKind.EXACT, family, T, radius=radius, rotation=rotation, noise=noise)
    if which is ParameterName.NOISE:
        FieldSpec(FieldKind.EXACT, family, T, radius=radius, rotation=rotation, noise=1.0)
    proc = {"radius": spec.radius, "rotation": str(spec.rotation), "noise": spec.noise,
            "model": model}

    def needs(cls: type, what: str) -> None:
        if not isinstance(family, cls):
            raise MesadynError(f"parameter {which} applies to {what}, not to family "
                               f"{family.name!r}")

    if which is ParameterName.SIGMA:
        needs(IID, "the gaussian family")
        if family.name != "gaussian":
            raise MesadynError(f"parameter sigma applies to the gaussian family, not to family "
                               f"{family.name!r}; use m2 for an iid family")
        return Sigma(family, T, **proc)  # type: ignore[arg-type]
    if which is ParameterName.SCALE:
        needs(Sparse, "the sparse family")
        return SparseScale(family, T, **proc)  # type: ignore[arg-type]
    if which in _MOMENT_POWERS:
        needs(IID, "iid families (gaussian, rademacher, uniform)")
        return IIDMoment(family, T, which, **proc)  # type: ignore[arg-type]
    if which is ParameterName.MU:
        needs(Shifted, "the shifted family")
        return ShiftedMean(family, T, **proc)  # type: ignore[arg-type]
    if which is ParameterName.WEIGHT:
        needs(Mixture, "two-component mixtures")
        return MixtureWeight(family, T, **proc)  # type: ignore[arg-type]
    if which is ParameterName.RADIUS:
        return Radius(family, T, **proc)  # type: ignore[arg-type]
    if which is ParameterName.NOISE:
        return NoiseScale(family, T, **proc)  # type: ignore[arg-type]
    return TrainingLength(family, T, **proc)  # type: ignore[arg-type]


def _check_model(model: Model, which: ParameterName, rotation: str, noise: float) -> None:
    """Refuse, in one line naming it, what the exact field of a model other than the paper's
    does not reach: a model that is not a polynomial in the tokens (softmax: no exact field);
    a rotation or AR noise (its quadrature integrates the phases of the paper's diagonal W
    only, so ``noise`` is refused as a parameter too); a moment m2, m4, m6 when the loss has
    degree above 6 in ``x_1`` (the three moments do not determine its expectation).  A family
    with no quadrature rule of the loss's degree is refused where the rule is first built
    (:func:`mesadyn.field.quadrature_plan`), not here: its size grows as ``3^k``."""
    if not model.polynomial or model.loss_degree is None:
        raise MesadynError(f"model={model} has no exact field (ŷ is not a polynomial in the "
                           "tokens), so its fixed points cannot be continued")
    if which is ParameterName.NOISE or noise != 0 or str(rotation) != "diagonal":
        what = ("parameter noise" if which is ParameterName.NOISE
                else f"noise={noise!r}" if noise != 0 else f"rotation={rotation!s}")
        raise MesadynError(f"{what} is not supported for model={model}: its exact field by "
                           "quadrature integrates the paper's diagonal W without noise only")
    if which in _MOMENT_POWERS and model.loss_degree > 6:
        raise MesadynError(f"parameter {which} is not supported for model={model}: m2, m4, m6 "
                           f"fix x_1's moments up to order 6, and its loss has degree "
                           f"{model.loss_degree} in x_1")
