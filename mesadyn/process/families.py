"""The initial-token distributions of Section 3.1: the abstract :class:`Family` and the final
classes of the iid, sparse (Example 4.1), fixed (Section 4.3) and sampler-only kinds.

A family is one final class per kind, each owning its exact joint moments
(:meth:`Family.moment`), the slot partitions that can carry a nonzero moment
(:meth:`Family.admits`), its sampler and its description.  Families are frozen dataclasses,
hashable by value (a custom sampler by identity), so caches may be keyed by them.  The kinds
with moment sequences are in :mod:`.moments`, mixtures in :mod:`.mixture`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar, final

from ..errors import MesadynError
from .samplers import GaussianDraw, RademacherDraw, UniformDraw

if TYPE_CHECKING:  # imported inside the functions that use them: `mesadyn theory` loads neither
    import numpy as np
    import torch

__all__ = ["IID", "MAX_ORDER", "CoordinateGroup", "Family", "Fixed", "NoExactMoments",
           "NoReducedSystem", "Sampled", "Sampler", "Sparse"]

#: Highest order of the joint moments a family must know (Eq. 2 is a degree-6 polynomial in x_1).
MAX_ORDER = 6

#: A sampler ``(n, generator, device) -> x_1`` of shape (n, d), float64.
Sampler = Callable[[int, "torch.Generator", "torch.device"], "torch.Tensor"]


class NoExactMoments(MesadynError):
    """The family is known only through a sampler: no exact field, no reduced system."""


class NoReducedSystem(MesadynError):
    """The family has no 2-D reduced system (its coordinates are not exchangeable, or its
    moments are unknown): κ1, κ2, κ3 are not defined for it."""


def _device(generator: torch.Generator, device: torch.device | str | None) -> torch.device:
    """Where to draw: ``device`` when given, else the generator's own device."""
    import torch

    return torch.device(device) if device is not None else generator.device


def _check_counts(counts: np.ndarray, d: int) -> np.ndarray:
    import numpy as np

    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 2 or counts.shape[1] != d:
        raise MesadynError(f"counts must have shape (N, {d}), got {counts.shape}")
    if counts.max(initial=0) > MAX_ORDER:
        raise MesadynError(f"moments above order 6 are not known, got {counts.max()}")
    return counts


def _even_blocks(labels: tuple[int, ...]) -> bool:
    """Every block of the partition has even size (all that zero-mean independent coordinates
    admit: an odd power of a lone coordinate has mean 0)."""
    import numpy as np

    return bool((np.bincount(np.asarray(labels)) % 2 == 0).all())


class CoordinateGroup(StrEnum):
    """The coordinate maps ``x ↦ D x`` that leave a family's law invariant, largest first.

    The process of Section 3.1 with ``W = r·diag(λ)`` (or Haar W) inherits the group: ``D`` real
    orthogonal commutes with the law of ``λ``, so every model equivariant under
    ``e ↦ (I_3 ⊗ D) e`` has a loss invariant under ``θ ↦ (I_3 ⊗ D) θ (I_3 ⊗ D)ᵀ`` blockwise, and
    its gradient flow keeps the fixed subspace of that action
    (:meth:`mesadyn.models.Model.fixed_subspace`).
    """

    SIGNED_PERMUTATIONS = "signed permutations"
    """Permutations and sign flips of coordinates (iid symmetric coordinates, Example 4.1)."""
    PERMUTATIONS = "permutations"
    """Permutations only (exchangeable coordinates with a nonzero mean, ``x_1 = c·1_d``)."""
    TRIVIAL = "trivial"
    """The identity only."""

    def meet(self, other: CoordinateGroup) -> CoordinateGroup:
        """The largest group in both (the group of a mixture of the two laws)."""
        order = list(CoordinateGroup)
        return order[max(order.index(self), order.index(other))]


# ---- the abstract family -----------------------------------------------------------------
class Family(ABC):
    """An initial-token distribution ``D`` on ``R^d`` (Section 3.1, Assumption 4.1).

    Subclasses are final frozen dataclasses with fields ``name`` and ``d`` (and their own
    parameters); ``kind`` is the JSON tag of :meth:`describe`.  A subclass implements
    :meth:`moment`, :meth:`admits`, :meth:`sample` and :meth:`describe`; it overrides
    :meth:`kappas` when its coordinates are exchangeable (then the 2-D reduced system exists,
    :mod:`mesadyn.theory`) and :attr:`assumption_41` when Assumption 4.1 holds.
    """

    kind: ClassVar[str]
    name: str
    d: int

    # ---- capabilities -------------------------------------------------------------------
    @property
    def exact_moments(self) -> bool:
        """Whether :meth:`moment` is known (so the exact field applies)."""
        return True

    @property
    def assumption_41(self) -> bool:
        """Whether Assumption 4.1 holds (zero odd mixed moments up to order 4, exchangeable
        coordinates): then the diagonal manifold is invariant without a mask (Lemma 5.2)."""
        return False

    @property
    def coordinate_group(self) -> CoordinateGroup:
        """The coordinate maps that leave the law of ``x_1`` invariant (:class:`CoordinateGroup`;
        none but the identity unless a kind says so)."""
        return CoordinateGroup.TRIVIAL

    @property
    def single_coordinate(self) -> bool:
        """Whether every draw of ``x_1`` has at most one nonzero entry (Example 4.1's sparse
        family): the finite-sample loss then sums over t in closed form, which the sampled
        fields' cost estimates count (the AR-batch kernels of :mod:`mesadyn.field`)."""
        return False

    @property
    def params(self) -> dict[str, float]:
        """The constructor's parameters (part of :meth:`describe`)."""
        return {}

    # ---- moments ------------------------------------------------------------------------
    @abstractmethod
    def moment(self, counts: np.ndarray) -> np.ndarray:
        """Exact joint moment ``E[Π_k x_k^{n_k}]`` for each row of ``counts`` (shape (N, d)).

        Raises:
            NoExactMoments: the family has no exact moments.
        """

    @abstractmethod
    def admits(self, labels: tuple[int, ...]) -> bool:
        """Whether ``E[Π_s x_{k_s}]`` can be nonzero when the slots' coordinates are equal
        exactly within the blocks of the set partition ``labels`` (distinct across blocks)."""

    def kappas(self) -> tuple[float, float, float]:
        """``(κ1, κ2, κ3) = (E[x_j⁴], E[x_j⁶], Σ_{r≠j} E[x_j² x_r⁴])`` (Assumption 4.1,
        Lemma A.5), the same for every ``j``.

        Raises:
            NoReducedSystem: the coordinates are not exchangeable or the moments are unknown.
        """
        raise NoReducedSystem(f"family {self.name!r} has no reduced system")

    @property
    def kappa1(self) -> float:
        """κ1 = E[x_j⁴] (Assumption 4.1); for ``x_1 = c·1_d`` the analogue c⁴ (Lemma A.5)."""
        return self.kappas()[0]

    @property
    def kappa2(self) -> float:
        """κ2 = E[x_j⁶]."""
        return self.kappas()[1]

    @property
    def kappa3(self) -> float:
        """κ3 = Σ_{r≠j} E[x_j² x_r⁴]."""
        return self.kappas()[2]

    @property
    def second_moment(self) -> float:
        """E[x_j²] (the same for every coordinate j; an error if the coordinates differ)."""
        import numpy as np

        m = self.moment(2 * np.eye(self.d, dtype=np.int64))
        if np.ptp(m) > 1e-15 * np.abs(m).max():
            raise MesadynError(f"family {self.name!r} has E[x_j²] = {list(m)}, not one value")
        return float(m[0])

    @property
    def active_second_moment(self) -> float:
        """E[x_j²] given that coordinate j is active (Proposition 4.1's ratio uses it)."""
        return self.second_moment

    @property
    def mean_sq_norm(self) -> float:
        """E‖x_1‖²."""
        import numpy as np

        return float(self.moment(2 * np.eye(self.d, dtype=np.int64)).sum())

    # ---- sampling and description -------------------------------------------------------
    @abstractmethod
    def sample(self, n: int, generator: torch.Generator,
               device: torch.device | str | None = None) -> torch.Tensor:
        """Draw ``n`` initial tokens, a float64 tensor of shape (n, d)."""

    @abstractmethod
    def describe(self) -> dict[str, object]:
        """A JSON-ready description (the key of caches and the provenance of runs)."""

    def _head(self) -> dict[str, object]:
        out: dict[str, object] = {"family": self.name, "kind": self.kind, "d": self.d}
        out.update(self.params)
        return out


def _draw(fam: Family, sampler: Sampler | None, n: int, generator: torch.Generator,
          device: torch.device | str | None) -> torch.Tensor:
    import torch

    if sampler is None:
        raise MesadynError(
            f"family {fam.name!r} has moments but no sampler; give one to sample from it"
        )
    return sampler(n, generator, _device(generator, device)).to(torch.float64)

# ---- zero-mean iid coordinates -----------------------------------------------------------
@final
@dataclass(frozen=True)
class IID(Family):
    """iid zero-mean coordinates fixed by ``m2, m4, m6`` (gaussian, rademacher, uniform, any
    :func:`iid`): Assumption 4.1 holds with κ1 = m4, κ2 = m6, κ3 = (d−1) m2 m4."""

    kind: ClassVar[str] = "iid"
    name: str
    d: int
    m2: float
    m4: float
    m6: float
    sampler: Sampler | None = field(default=None, repr=False)

    @property
    def assumption_41(self) -> bool:
        return True

    @property
    def coordinate_group(self) -> CoordinateGroup:
        return CoordinateGroup.SIGNED_PERMUTATIONS

    @property
    def params(self) -> dict[str, float]:
        if isinstance(self.sampler, GaussianDraw):
            return {"sigma": self.sampler.sigma}
        if isinstance(self.sampler, RademacherDraw | UniformDraw):
            return {}
        return {"m2": self.m2, "m4": self.m4, "m6": self.m6}

    def kappas(self) -> tuple[float, float, float]:
        return self.m4, self.m6, (self.d - 1) * self.m2 * self.m4

    @property
    def second_moment(self) -> float:
        return self.m2

    @property
    def mean_sq_norm(self) -> float:
        return self.d * self.m2

    def moment(self, counts: np.ndarray) -> np.ndarray:
        import numpy as np

        counts = _check_counts(counts, self.d)
        table = np.array([1.0, 0.0, self.m2, 0.0, self.m4, 0.0, self.m6])
        return np.prod(table[counts], axis=1)

    def admits(self, labels: tuple[int, ...]) -> bool:
        return _even_blocks(labels)

    def sample(self, n: int, generator: torch.Generator,
               device: torch.device | str | None = None) -> torch.Tensor:
        return _draw(self, self.sampler, n, generator, device)

    def describe(self) -> dict[str, object]:
        out = self._head()
        out.update(m2=self.m2, m4=self.m4, m6=self.m6)
        return out


# ---- Example 4.1 ---------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class Sparse(Family):
    """Example 4.1: ``x_1 = ±c e_i`` with ``i`` uniform: κ1 = c⁴/d, κ2 = c⁶/d, κ3 = 0."""

    kind: ClassVar[str] = "sparse"
    name: str
    d: int
    scale: float

    @property
    def assumption_41(self) -> bool:
        return True

    @property
    def coordinate_group(self) -> CoordinateGroup:
        return CoordinateGroup.SIGNED_PERMUTATIONS

    @property
    def single_coordinate(self) -> bool:
        return True

    @property
    def params(self) -> dict[str, float]:
        return {"scale": self.scale}

    def kappas(self) -> tuple[float, float, float]:
        return self.scale**4 / self.d, self.scale**6 / self.d, 0.0

    @property
    def second_moment(self) -> float:
        return self.scale**2 / self.d

    @property
    def active_second_moment(self) -> float:
        return self.scale**2

    @property
    def mean_sq_norm(self) -> float:
        return self.d * self.second_moment

    def moment(self, counts: np.ndarray) -> np.ndarray:
        import numpy as np

        counts = _check_counts(counts, self.d)
        total = counts.sum(axis=1)
        single = (counts == total[:, None]).any(axis=1)
        out = np.where(single & (total % 2 == 0), self.scale**total / self.d, 0.0)
        return np.where(total == 0, 1.0, out)

    def admits(self, labels: tuple[int, ...]) -> bool:
        import numpy as np

        sizes = np.bincount(np.asarray(labels))
        return len(sizes) == 1 and sizes[0] % 2 == 0

    def sample(self, n: int, generator: torch.Generator,
               device: torch.device | str | None = None) -> torch.Tensor:
        import torch

        device = _device(generator, device)
        d = self.d
        idx = torch.randint(d, (n,), generator=generator, device=device)
        sign = torch.randint(2, (n,), generator=generator, device=device) * 2 - 1
        x = torch.zeros(n, d, dtype=torch.float64, device=device)
        x[torch.arange(n, device=device), idx] = self.scale * sign.to(torch.float64)
        return x

    def describe(self) -> dict[str, object]:
        return self._head()


# ---- a fixed token (Section 4.3) -------------------------------------------------------------
@final
@dataclass(frozen=True)
class Fixed(Family):
    """``x_1 = v`` always (``ones``: ``v = 1_d``, Section 4.3).  Assumption 4.1 fails; for
    ``v = c·1_d`` the masked reduction of Lemma A.5 has κ1 = c⁴, κ2 = c⁶, κ3 = (d−1)c⁶."""

    kind: ClassVar[str] = "fixed"
    name: str
    d: int
    vector: tuple[float, ...]

    def _uniform_vector_value(self) -> float:
        v = self.vector
        if any(abs(abs(vi) - abs(v[0])) > 0 for vi in v):
            raise NoReducedSystem(
                f"κ1, κ2, κ3 are defined only for x_1 = c·1_d; got x_1 = {list(v)}"
            )
        return abs(v[0])

    @property
    def coordinate_group(self) -> CoordinateGroup:
        """Permutations when every entry of ``v`` is the same (``ones``), else the identity."""
        same = len(set(self.vector)) == 1
        return CoordinateGroup.PERMUTATIONS if same else CoordinateGroup.TRIVIAL

    def kappas(self) -> tuple[float, float, float]:
        c = self._uniform_vector_value()
        return c**4, c**6, (self.d - 1) * c**6

    @property
    def second_moment(self) -> float:
        return self._uniform_vector_value() ** 2

    @property
    def mean_sq_norm(self) -> float:
        return float(sum(v * v for v in self.vector))

    def moment(self, counts: np.ndarray) -> np.ndarray:
        import numpy as np

        counts = _check_counts(counts, self.d)
        v = np.asarray(self.vector, dtype=np.float64)
        return np.prod(v[None, :] ** counts, axis=1)

    def admits(self, labels: tuple[int, ...]) -> bool:
        return True

    def sample(self, n: int, generator: torch.Generator,
               device: torch.device | str | None = None) -> torch.Tensor:
        import torch

        v = torch.tensor(self.vector, dtype=torch.float64, device=_device(generator, device))
        return v.expand(n, self.d).clone()

    def describe(self) -> dict[str, object]:
        out = self._head()
        out["vector"] = list(self.vector)
        return out


# ---- known only through a sampler ----------------------------------------------------------
@final
@dataclass(frozen=True)
class Sampled(Family):
    """A family known only through ``sampler(n, generator, device) -> (n, d)``: no exact
    moments, so only sampled fields apply to it."""

    kind: ClassVar[str] = "sampled"
    name: str
    d: int
    sampler: Sampler = field(repr=False)

    @property
    def exact_moments(self) -> bool:
        return False

    def _refuse(self) -> NoExactMoments:
        return NoExactMoments(
            f"family {self.name!r} is known only through its sampler and has no exact "
            "moments; use the Monte-Carlo field (--field mc)"
        )

    def kappas(self) -> tuple[float, float, float]:
        raise self._refuse()

    @property
    def second_moment(self) -> float:
        raise self._refuse()

    @property
    def mean_sq_norm(self) -> float:
        raise self._refuse()

    def moment(self, counts: np.ndarray) -> np.ndarray:
        raise self._refuse()

    def admits(self, labels: tuple[int, ...]) -> bool:
        raise self._refuse()

    def sample(self, n: int, generator: torch.Generator,
               device: torch.device | str | None = None) -> torch.Tensor:
        return _draw(self, self.sampler, n, generator, device)

    def describe(self) -> dict[str, object]:
        return self._head()
