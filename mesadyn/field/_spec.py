"""What a field is: :class:`FieldSpec`, a validated, hashable description of one field.

Two specs are equal (and hash alike) exactly when the fields they build give the same numbers:
the kind, the process (its :meth:`~mesadyn.process.Family.describe` plus the identity of any
function it samples with), T and the options of the kind.  :func:`mesadyn.field.make_field`
builds the field of a spec and reuses it within a process.

This module imports no heavy library, so a configuration can hold a spec cheaply.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from ..device import Device, resolve_device
from ..errors import MesadynError, check_int
from ..models import PAPER, Model
from ..process import (
    CoordinateGroup,
    Family,
    Rotation,
    check_noise,
    check_radius,
    check_rotation,
)
from ._reach import check_haar


class FieldKind(enum.StrEnum):
    """The kinds of population-loss field (the values are the CLI's ``--field`` strings)."""

    EXACT = "exact"
    """Exact expectations from counted moment tensors (:class:`~mesadyn.field.ExactField`)."""
    MC = "mc"
    """Monte-Carlo estimate on fixed draws (:class:`~mesadyn.field.MonteCarloField`)."""
    FINITE = "finite"
    """The finite-sample loss of Section 6 (:class:`~mesadyn.field.FiniteField`)."""


#: The options (besides ``family``, ``T`` and ``device``) each kind takes.  ``seed`` is taken by
#: the sampled kinds; the exact field draws nothing, so its spec ignores ``seed``.
KIND_OPTIONS: dict[FieldKind, tuple[str, ...]] = {
    FieldKind.EXACT: ("device",),
    FieldKind.MC: ("samples", "seed", "batches", "device"),
    FieldKind.FINITE: ("m", "seed", "device"),
}
#: Defaults of the Monte-Carlo field.
DEFAULT_SAMPLES = 100_000
DEFAULT_BATCHES = 32
DEFAULT_SEED = 1


def _function_key(fn: Callable[..., object]) -> Hashable:
    """What determines the numbers ``fn`` draws.

    mesadyn's own samplers (closures made by :mod:`mesadyn.process` constructors) depend only on
    their code and captured values, so two made with the same arguments are the same; any other
    callable (a user's sampler, which may read state we cannot see) is keyed by identity.
    """
    module = getattr(fn, "__module__", None) or ""
    code = getattr(fn, "__code__", None)
    if module.startswith("mesadyn.") and code is not None:
        cells = getattr(fn, "__closure__", None) or ()
        try:
            values = tuple(c.cell_contents for c in cells)
            hash(values)
        except (TypeError, ValueError):  # unhashable or empty cell: fall back to identity
            return _identity(fn)
        return ("code", module, code, values)
    return _identity(fn)


def _identity(fn: Callable[..., object]) -> Hashable:
    try:
        hash(fn)
    except TypeError:  # a callable object that defines __eq__ without __hash__
        return ("id", id(fn))
    return ("object", fn)


def family_key(family: Family) -> Hashable:
    """A hashable key of everything about ``family`` that changes a field's numbers.

    Its :meth:`~mesadyn.process.Family.describe` (canonical JSON) plus, for every callable the
    family holds (a sampler), that callable's key (:func:`_function_key`): two ``sampled(...)``
    families with different samplers never share a key.
    """
    desc = json.dumps(family.describe(), sort_keys=True, default=repr)
    funcs: list[tuple[str, Hashable]] = []
    if dataclasses.is_dataclass(family):
        for f in dataclasses.fields(family):
            key = _value_key(getattr(family, f.name))
            if key is not None:
                funcs.append((f.name, key))
    return (type(family).__qualname__, desc, tuple(funcs))


def _value_key(value: object) -> Hashable | None:
    """The key of the callables and families inside a family's field (e.g. a mixture's
    components); ``None`` when it holds neither (its describe() covers it)."""
    if isinstance(value, Family):
        return family_key(value)
    if isinstance(value, tuple | list):
        keys = tuple(_value_key(v) for v in value)
        return keys if any(k is not None for k in keys) else None
    if callable(value):
        return _function_key(value)
    return None


def check_samples(samples: object, batches: int = DEFAULT_BATCHES) -> int:
    """The draws of a Monte-Carlo field: an integer of at least ``batches`` (one draw per batch
    mean of its standard errors at least); one message for every count below it."""
    why = "the Monte-Carlo standard errors take one mean per batch"
    try:
        return check_int("samples", samples, batches)
    except MesadynError:
        try:
            count = check_int("samples", samples, -(2**63))
        except MesadynError:
            raise MesadynError(f"samples must be an integer >= batches={batches} ({why}), got "
                               f"{samples!r}") from None
        raise MesadynError(f"samples must be >= batches={batches} ({why}), got "
                           f"samples={count}") from None


@dataclass(frozen=True, eq=False)
class FieldSpec:
    """A validated, hashable description of one field: the argument of ``make_field``.

    Arguments:
        kind: a :class:`FieldKind` or its string (``"exact"``, ``"mc"``, ``"finite"``).
        family: the initial-token distribution (Section 3.1).
        T: the training length of Eq. 2 (``T >= 3``).
        samples: Monte-Carlo draws (``mc`` only; default 100 000).
        m: number of training sequences (``finite`` only; required).
        seed: seed of the draws (``mc``, ``finite``); the exact field draws nothing and
            ignores it (it is stored as the default, so exact specs differing only in seed are
            equal).
        batches: batch means for the standard errors (``mc`` only; default 32).
        device: ``None`` or ``"cpu"`` (the CPU, the default of every kind), ``"auto"``,
            ``"cuda"`` or ``"cuda:N"``; resolved once, here (:func:`mesadyn.device.resolve_device`),
            so :attr:`device` is ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
        radius: r > 0 of ``W = r·diag(λ)`` (docs/design.md §6; 1 is the paper), every kind.
        rotation: the transition ``W = r·R`` (:class:`~mesadyn.process.Rotation`: ``diagonal``,
            the paper's; ``real`` 2×2 blocks, d even; ``haar``), and ``noise``: the scale s of
            the AR noise in ``x_{t+1} = W x_t + ε_t`` (>= 0).  The exact kind counts real
            rotations and noise (:mod:`mesadyn.field._moments_rotation`) and Haar W within its
            reach (noiseless, d <= 5, T <= 1000: :mod:`mesadyn.field._reach`); the sampled
            kinds (``mc``, ``finite``) draw whole sequences (:mod:`mesadyn.field._sequences`).
        model: the attention model (:class:`~mesadyn.models.Model`; default the paper's,
            :data:`~mesadyn.models.PAPER`).  Another model's exact field is the quadrature of
            :mod:`mesadyn.field._quadrature_field` (polynomial models, the paper's diagonal W
            without noise); its sampled fields draw whole sequences
            (:mod:`mesadyn.field._model_fields`).  Only a model other than the paper's enters
            :meth:`key` and :meth:`describe`.

    Raises:
        MesadynError: an unknown kind, a bad value, an option the kind does not take, an odd
            d with real rotations, an exact Haar field beyond its reach, or a device this
            machine does not have (the message names it).
    """

    kind: FieldKind
    family: Family
    T: int
    samples: int | None = None
    m: int | None = None
    seed: int = DEFAULT_SEED
    batches: int | None = None
    device: str = "cpu"
    radius: float = 1.0
    rotation: Rotation = Rotation.DIAGONAL
    noise: float = 0.0
    model: Model = PAPER

    def __init__(self, kind: FieldKind | str, family: Family, T: int, *,
                 samples: int | None = None, m: int | None = None, seed: int = DEFAULT_SEED,
                 batches: int | None = None, device: Device | str | None = None,
                 radius: float = 1.0, rotation: Rotation | str = Rotation.DIAGONAL,
                 noise: float = 0.0, model: Model | None = None) -> None:
        try:
            k = FieldKind(kind)
        except ValueError:
            raise MesadynError(
                f"unknown field {kind!r}; choose one of {', '.join(FieldKind)}"
            ) from None
        if not isinstance(family, Family):
            raise MesadynError(f"family must be a mesadyn Family, got {family!r}")
        given = {"samples": samples, "m": m, "batches": batches}
        bad = sorted(name for name, v in given.items()
                     if v is not None and name not in KIND_OPTIONS[k])
        if bad:
            raise MesadynError(
                f"the {k} field does not take {', '.join(bad)}; it takes "
                f"{', '.join(KIND_OPTIONS[k])}"
            )
        T = check_int("T", T, 3)
        radius = check_radius(radius)
        rotation = check_rotation(rotation)
        noise = check_noise(noise)
        if rotation is Rotation.REAL and family.d % 2:
            raise MesadynError(f"real rotations need an even d, got d={family.d}")
        if k is FieldKind.EXACT and rotation is Rotation.HAAR:
            check_haar(family.d, T, noise)  # the exact Haar field's reach
        model = _check_model(model, k, rotation, noise)
        seed = check_int("seed", seed, 0)
        if k is FieldKind.EXACT:
            seed = DEFAULT_SEED
        if k is FieldKind.MC:
            batches = check_int("batches", DEFAULT_BATCHES if batches is None else batches, 2)
            samples = check_samples(DEFAULT_SAMPLES if samples is None else samples, batches)
        if k is FieldKind.FINITE:
            if m is None:
                raise MesadynError("the finite field needs the number of sequences m")
            m = check_int("m", m, 1)
        resolved = resolve_device(device)
        for name, value in (("kind", k), ("family", family), ("T", T), ("samples", samples),
                            ("m", m), ("seed", seed), ("batches", batches),
                            ("device", resolved), ("radius", radius), ("rotation", rotation),
                            ("noise", noise), ("model", model)):
            object.__setattr__(self, name, value)

    # ---- identity ----------------------------------------------------------------------
    def key(self) -> Hashable:
        """The tuple that equality and hashing use (everything that changes the numbers)."""
        base = (str(self.kind), family_key(self.family), self.T, self.samples, self.m,
                self.seed, self.batches, self.device)
        key: tuple[Hashable, ...] = (
            *base, *(("process", name, value) for name, value in self.process().items()))
        return key if self.model.is_paper else (*key, ("model", self.model.key()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSpec):
            return NotImplemented
        return self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def options(self) -> dict[str, int | str]:
        """The options this kind takes, as set (``None`` ones left out)."""
        out: dict[str, int | str] = {}
        for name in KIND_OPTIONS[self.kind]:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @property
    def diagonal_noiseless(self) -> bool:
        """Whether W is the paper's ``r·diag(λ)`` without noise (the draws are ``(x_1, λ)``)."""
        return self.rotation is Rotation.DIAGONAL and self.noise == 0

    @property
    def coordinate_group(self) -> CoordinateGroup:
        """The coordinate maps that leave this field's loss invariant
        (:class:`~mesadyn.process.CoordinateGroup`): the family's for the exact field with a
        diagonal or Haar W (isotropic noise keeps it; real 2×2 rotations pair coordinates and
        keep none), the identity for the sampled fields (their draws have no symmetry)."""
        if self.kind is not FieldKind.EXACT or self.rotation is Rotation.REAL:
            return CoordinateGroup.TRIVIAL
        return self.family.coordinate_group

    def process(self) -> dict[str, object]:
        """What differs from the paper's process: ``radius`` when not 1, ``rotation`` and
        ``noise`` when W is not the noiseless diagonal."""
        out: dict[str, object] = {} if self.radius == 1 else {"radius": self.radius}
        if not self.diagonal_noiseless:
            out.update(rotation=str(self.rotation), noise=self.noise)
        return out

    def describe(self) -> dict[str, object]:
        """JSON-ready: ``{"field": kind, "T": T, **family.describe(), **options}``, plus
        ``radius`` when it is not the paper's 1 and ``rotation``, ``noise`` when W is not the
        paper's noiseless diagonal, and the model (``model``, ``layers``) when it is not the
        paper's."""
        out = {"field": str(self.kind), "T": self.T, **self.family.describe(), **self.options()}
        out = {**out, **self.process()}
        return out if self.model.is_paper else {**out, **self.model.describe()}


def _check_model(model: object, kind: FieldKind, rotation: Rotation, noise: float) -> Model:
    """The model of a spec (``None``: the paper's), refused where ``kind`` has no field of it:
    an exact field of a model that is not polynomial in the tokens, or the exact field of a
    model other than the paper's beyond the paper's diagonal noiseless W (its quadrature
    integrates the phases of ``W = r·diag(λ)`` only)."""
    if model is None:
        return PAPER
    if not isinstance(model, Model):
        raise MesadynError(f"model must be a mesadyn Model (mesadyn.models.model_of), got "
                           f"{model!r}")
    if kind is FieldKind.EXACT and not model.moment_exact:
        if not model.polynomial:
            raise MesadynError(f"field='exact' is not supported by model={model}: ŷ is not a "
                               "polynomial in the tokens; use field='mc' or field='finite'")
        if rotation is not Rotation.DIAGONAL or noise != 0:
            raise MesadynError(f"field='exact' for model={model} integrates the paper's "
                               f"diagonal W without noise only, got rotation={rotation!s}, "
                               f"noise={noise!r}; use field='mc' or field='finite'")
    return model

