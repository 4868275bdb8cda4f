"""The AR process of Section 3.1: initial-token families, their moments, and sequences.

``x_1 ~ D`` (real), ``W = r·diag(λ_1..λ_d)`` with ``λ_k = exp(iθ_k)``, ``θ_k ~ U[0, 2π)``
independent and fresh for every sequence, ``x_{t+1} = W x_t``; the radius ``r = 1`` is the
paper (DESIGN.md §6).  Sequences are complex128.

A family is one final class per kind, each owning its exact joint moments
(:meth:`Family.moment`), the slot partitions that can carry a nonzero moment
(:meth:`Family.admits`), its sampler and its description.  Families are frozen dataclasses,
hashable by value (a custom sampler by identity), so caches may be keyed by them.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, ClassVar

from .errors import MesadynError, check_finite, check_int, check_positive

if TYPE_CHECKING:  # imported inside the functions that use them: `mesadyn theory` loads neither
    import numpy as np
    import torch

#: The paper's families (Section 3.1, Example 4.1, Section 4.3), by name.
FAMILIES = ("gaussian", "sparse", "ones", "rademacher", "uniform")

#: Highest order of the joint moments a family must know (Eq. 2 is a degree-6 polynomial in x_1).
MAX_ORDER = 6

Sampler = Callable[[int, "torch.Generator", "torch.device"], "torch.Tensor"]


class FamilyName(StrEnum):
    """Every family :func:`family` builds by name (the CLI's ``--x1`` choices)."""

    GAUSSIAN = "gaussian"
    SPARSE = "sparse"
    ONES = "ones"
    RADEMACHER = "rademacher"
    UNIFORM = "uniform"
    SHIFTED = "shifted"
    MOMENTS = "moments"
    MIXTURE = "mixture"


class NoExactMoments(MesadynError):
    """The family is known only through a sampler: no exact field, no reduced system."""


class NoReducedSystem(MesadynError):
    """The family has no 2-D reduced system (its coordinates are not exchangeable, or its
    moments are unknown): κ1, κ2, κ3 are not defined for it."""


def default_device() -> torch.device:
    """CUDA when available, CPU otherwise."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A seeded torch generator on ``device``: the same seed gives the same samples."""
    import torch

    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(int(seed))
    return gen


def _device(generator: torch.Generator, device: torch.device | str | None) -> torch.device:
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


# ---- built-in samplers: frozen, so equal by value (a family's equality includes them) -------
@dataclass(frozen=True)
class GaussianDraw:
    """``x = μ + σ g``, ``g ~ N(0, I_d)``."""

    d: int
    sigma: float
    mu: float = 0.0

    def __call__(self, n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
        import torch

        x = self.sigma * torch.randn(n, self.d, generator=gen, device=device,
                                     dtype=torch.float64)
        return x + self.mu if self.mu != 0 else x


@dataclass(frozen=True)
class RademacherDraw:
    """iid ±1 coordinates."""

    d: int

    def __call__(self, n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
        import torch

        return torch.randint(2, (n, self.d), generator=gen, device=device).to(torch.float64) * 2 - 1


@dataclass(frozen=True)
class UniformDraw:
    """iid U[−1, 1] coordinates."""

    d: int

    def __call__(self, n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
        import torch

        u = torch.rand(n, self.d, generator=gen, device=device, dtype=torch.float64)
        return 2 * u - 1


@dataclass(frozen=True)
class AtomDraw:
    """Independent coordinates, coordinate ``k`` drawn from the atoms ``nodes[k]`` with
    probabilities ``weights[k]`` (inverse-CDF of one uniform per coordinate)."""

    nodes: tuple[tuple[float, ...], ...]
    weights: tuple[tuple[float, ...], ...]

    def __call__(self, n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
        import numpy as np
        import torch

        d = len(self.nodes)
        u = torch.rand(n, d, generator=gen, device=device, dtype=torch.float64)
        x = torch.empty(n, d, dtype=torch.float64, device=device)
        for k in range(d):
            cum = torch.tensor(np.cumsum(self.weights[k])[:-1], dtype=torch.float64,
                               device=device)
            idx = torch.bucketize(u[:, k].contiguous(), cum, right=True)
            x[:, k] = torch.tensor(self.nodes[k], dtype=torch.float64, device=device)[idx]
        return x


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
    def single_coordinate(self) -> bool:
        """Whether every draw of ``x_1`` has at most one nonzero entry (Example 4.1's sparse
        family): the finite-sample loss then sums over t in closed form, which the sampled
        fields' cost estimates count (:class:`mesadyn.model.ARBatch`)."""
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


# ---- independent coordinates with known moment sequences --------------------------------------
def _independent_moment(table: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``Π_k table[k, n_k]`` for independent coordinates (``table`` (d, 7), column 0 = 1)."""
    import numpy as np

    d = table.shape[0]
    return np.prod(table[np.arange(d)[None, :], counts], axis=1)


def gaussian_raw_moments(mu: float, sigma: float) -> tuple[float, ...]:
    """``E[x^k]``, k = 1..6, of ``N(μ, σ²)``: ``Σ_{j even} C(k, j) μ^{k−j} σ^j (j−1)!!``."""
    if mu == 0:  # the zero-mean table exactly as the gaussian family writes it
        s = sigma
        return (0.0, s**2, 0.0, 3 * s**4, 0.0, 15 * s**6)
    out = []
    for k in range(1, MAX_ORDER + 1):
        out.append(math.fsum(math.comb(k, j) * mu ** (k - j) * sigma**j * _double_fact(j - 1)
                             for j in range(0, k + 1, 2)))
    return tuple(out)


def _double_fact(n: int) -> int:
    return math.prod(range(n, 0, -2)) if n > 0 else 1


@dataclass(frozen=True)
class Shifted(Family):
    """``x_1 = μ·1_d + σ g``, ``g ~ N(0, I_d)`` (DESIGN.md §6): independent coordinates with
    the moments of ``N(μ, σ²)``.  ``μ = 0`` is ``gaussian(d, σ)``; for ``μ ≠ 0`` Assumption 4.1
    fails (odd moments), and only the masked reduction exists (κ from the same formulas)."""

    kind: ClassVar[str] = "shifted"
    name: str
    d: int
    mu: float
    sigma: float

    @property
    def assumption_41(self) -> bool:
        return self.mu == 0

    @property
    def params(self) -> dict[str, float]:
        return {"mu": self.mu, "sigma": self.sigma}

    @cached_property
    def raw_moments(self) -> tuple[float, ...]:
        """``E[x_j^k]``, k = 1..6."""
        return gaussian_raw_moments(self.mu, self.sigma)

    def kappas(self) -> tuple[float, float, float]:
        m = self.raw_moments
        return m[3], m[5], (self.d - 1) * m[1] * m[3]

    @property
    def second_moment(self) -> float:
        return self.raw_moments[1]

    @property
    def mean_sq_norm(self) -> float:
        return self.d * self.raw_moments[1]

    def moment(self, counts: np.ndarray) -> np.ndarray:
        import numpy as np

        counts = _check_counts(counts, self.d)
        table = np.array([1.0, *self.raw_moments])
        return np.prod(table[counts], axis=1)

    def admits(self, labels: tuple[int, ...]) -> bool:
        return True if self.mu != 0 else _even_blocks(labels)

    def sample(self, n: int, generator: torch.Generator,
               device: torch.device | str | None = None) -> torch.Tensor:
        return _draw(self, GaussianDraw(self.d, self.sigma, self.mu), n, generator, device)

    def describe(self) -> dict[str, object]:
        return self._head()


def _gauss_rule(m: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The n-point Gauss rule of the moments ``m_0..m_{2n−1}``: nodes are the roots of the
    monic orthogonal polynomial of degree n, weights solve the Vandermonde system."""
    import numpy as np

    H = np.array([[m[i + j] for j in range(n)] for i in range(n)])
    c = np.linalg.solve(H, -m[n:2 * n])
    nodes = np.sort(np.roots(np.concatenate([[1.0], c[::-1]])).real)
    V = nodes[None, :] ** np.arange(n)[:, None]
    return nodes, np.linalg.solve(V, m[:n])


def hankel_atoms(mom: Sequence[float], what: str = "moments"
                 ) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A discrete distribution with the moments ``E[x^k] = mom[k−1]``, k = 1..6, or an error
    if there is none (:func:`_hankel_atoms`, cached)."""
    return _hankel_atoms(tuple(float(check_finite(f"{what}[{k}]", v))
                               for k, v in enumerate(mom)), what)


@lru_cache(maxsize=256)
def _hankel_atoms(mom: tuple[float, ...], what: str
                  ) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A discrete distribution with the moments ``E[x^k] = mom[k−1]``, k = 1..6, or an error
    if there is none (the truncated Hamburger moment problem).

    The Hankel matrix ``H = [m_{i+j}]_{i,j=0..3}`` (``m_0 = 1``) must be positive semidefinite.
    If it is definite, the 4-point Gauss rule of the moment functional extended by
    ``m_7 = 0`` matches ``m_0..m_7`` (its nodes are the roots of the degree-4 orthogonal
    polynomial, its weights are positive); if it is singular of rank ``r``, the only possible
    distribution is the ``r``-point rule of ``m_0..m_{2r−1}``, which must reproduce the rest.

    Returns:
        ``(nodes, weights)``, weights positive and summing to 1.

    Raises:
        MesadynError: naming the moments when no distribution has them.
    """
    import numpy as np

    m = np.array([1.0, *mom])
    if len(m) != MAX_ORDER + 1:
        raise MesadynError(f"{what} must give E[x^k] for k = 1..6, got {len(m) - 1} values")
    bad = f"{what} E[x^k] = {[float(v) for v in m[1:]]} are not those of a distribution"
    if m[2] < 0 or m[4] < 0 or m[6] < 0:
        raise MesadynError(f"{bad} (an even moment is negative)")
    if m[2] == 0 or abs(m[2] - m[1] ** 2) <= 1e-14 * m[2]:  # no variance: a point mass
        c = float(m[1])
        point = c ** np.arange(len(m))
        if np.any(np.abs(point - m) > 1e-9 * np.maximum(np.abs(m), np.abs(point))):
            raise MesadynError(f"{bad} (E[x²] = E[x]² forces x = {c!r})")
        return (float(c),), (1.0,)
    # scale x → x/σ so that the Hankel matrix is well conditioned
    s = math.sqrt(m[2])
    with np.errstate(all="ignore"):
        mn = m / s ** np.arange(len(m))
    if not np.all(np.isfinite(mn)):
        raise MesadynError(f"{bad} (or their scales, E[x²] = {m[2]!r}, are beyond float64)")
    H = np.array([[mn[i + j] for j in range(4)] for i in range(4)])
    tol = 1e-9 * max(1.0, float(np.abs(H).max()))
    ev = np.linalg.eigvalsh(H)
    if ev.min() < -tol:
        raise MesadynError(f"{bad} (the Hankel matrix [m_(i+j)] has eigenvalue {ev.min():.3g})")
    rank = 4
    for r in range(1, 5):
        if np.linalg.eigvalsh(H[:r, :r]).min() <= tol:
            rank = r - 1
            break
    if rank == 4:
        # any m_7 gives a 4-point rule; take the one with the smallest largest |node| (a
        # light-tailed sampler, so Monte-Carlo standard errors stay honest)
        def spread(m7: float) -> float:
            import numpy as np

            return float(np.abs(_gauss_rule(np.append(mn, m7), 4)[0]).max())

        span = 10.0 * mn[6]
        grid = np.linspace(-span, span, 41)
        k = int(np.argmin([spread(v) for v in grid]))
        lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
        for _ in range(40):  # golden-section search between the best grid point's neighbours
            a, b = hi - 0.618 * (hi - lo), lo + 0.618 * (hi - lo)
            lo, hi = (lo, b) if spread(a) <= spread(b) else (a, hi)
        best = min((grid[k], 0.5 * (lo + hi)), key=spread)
        ext, n_at = np.append(mn, best), 4
    else:
        ext, n_at = mn, rank
    nodes, w = _gauss_rule(ext, n_at)
    got = (w[None, :] * nodes[None, :] ** np.arange(MAX_ORDER + 1)[:, None]).sum(1)
    if (w <= 0).any() or np.abs(got - mn).max() > 1e-7 * np.abs(mn).max():
        raise MesadynError(
            f"{bad} (the Hankel matrix is singular of rank {rank}, but no {rank}-point "
            "distribution has these moments)"
        )
    w = w / w.sum()
    return tuple(float(x * s) for x in nodes), tuple(float(x) for x in w)


@dataclass(frozen=True)
class Moments(Family):
    """Independent coordinates with given moments ``E[x_k^j]``, j = 1..6 (DESIGN.md §6):
    ``moments`` holds one sequence shared by every coordinate or one per coordinate.  The
    sampler draws a discrete distribution with exactly these moments (:func:`hankel_atoms`)."""

    kind: ClassVar[str] = "moments"
    name: str
    d: int
    moments: tuple[tuple[float, ...], ...]

    @property
    def _shared(self) -> bool:
        return len(set(self.moments)) == 1

    @property
    def _zero_odd(self) -> bool:
        return all(row[0] == row[2] == row[4] == 0 for row in self.moments)

    @property
    def assumption_41(self) -> bool:
        return self._shared and self._zero_odd

    @cached_property
    def table(self) -> np.ndarray:
        """``E[x_k^j]`` as a (d, 7) array (column 0 is 1)."""
        import numpy as np

        rows = self.moments if len(self.moments) == self.d else self.moments * self.d
        return np.array([[1.0, *row] for row in rows])

    @cached_property
    def sampler(self) -> AtomDraw:
        """The discrete distribution with these moments, one per coordinate."""
        atoms = {row: hankel_atoms(row) for row in set(self.moments)}
        rows = self.moments if len(self.moments) == self.d else self.moments * self.d
        return AtomDraw(tuple(atoms[r][0] for r in rows), tuple(atoms[r][1] for r in rows))

    def kappas(self) -> tuple[float, float, float]:
        if not self._shared:
            raise NoReducedSystem(
                f"family {self.name!r} has a different moment sequence per coordinate: "
                "its coordinates are not exchangeable, so it has no reduced system"
            )
        m = self.moments[0]
        return m[3], m[5], (self.d - 1) * m[1] * m[3]

    def moment(self, counts: np.ndarray) -> np.ndarray:
        return _independent_moment(self.table, _check_counts(counts, self.d))

    def admits(self, labels: tuple[int, ...]) -> bool:
        return True if not self._zero_odd else _even_blocks(labels)

    def sample(self, n: int, generator: torch.Generator,
               device: torch.device | str | None = None) -> torch.Tensor:
        return _draw(self, self.sampler, n, generator, device)

    def describe(self) -> dict[str, object]:
        out = self._head()
        out["moments"] = [list(r) for r in self.moments]
        return out


# ---- mixtures -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mixture(Family):
    """Draw ``F_i`` with probability ``p_i`` (DESIGN.md §6): joint moments are the p-weighted
    sums, a partition is admitted if any component admits it, and κ1, κ2, κ3 are p-weighted
    sums when every component has them (the diagonal reduction is linear in the κ's)."""

    kind: ClassVar[str] = "mixture"
    name: str
    d: int
    components: tuple[tuple[float, Family], ...]

    @property
    def exact_moments(self) -> bool:
        return all(f.exact_moments for _, f in self.components)

    @property
    def assumption_41(self) -> bool:
        return all(f.assumption_41 for _, f in self.components)

    def kappas(self) -> tuple[float, float, float]:
        import numpy as np

        total = np.zeros(3)
        for p, f in self.components:
            try:
                total += p * np.asarray(f.kappas())
            except NoReducedSystem as exc:
                raise NoReducedSystem(
                    f"mixture {self.name!r} has no reduced system: component {f.name!r}: {exc}"
                ) from None
        return float(total[0]), float(total[1]), float(total[2])

    def moment(self, counts: np.ndarray) -> np.ndarray:
        import numpy as np

        counts = _check_counts(counts, self.d)
        out = np.zeros(counts.shape[0])
        for p, f in self.components:
            if p != 0:
                out = out + p * f.moment(counts)
        return out

    def admits(self, labels: tuple[int, ...]) -> bool:
        return any(f.admits(labels) for p, f in self.components if p != 0)

    @property
    def second_moment(self) -> float:
        return math.fsum(p * f.second_moment for p, f in self.components)

    @property
    def mean_sq_norm(self) -> float:
        return math.fsum(p * f.mean_sq_norm for p, f in self.components)

    def sample(self, n: int, generator: torch.Generator,
               device: torch.device | str | None = None) -> torch.Tensor:
        import numpy as np
        import torch

        if len(self.components) == 1:
            return self.components[0][1].sample(n, generator, device)
        device = _device(generator, device)
        u = torch.rand(n, generator=generator, device=device, dtype=torch.float64)
        cum = torch.tensor(np.cumsum([p for p, _ in self.components])[:-1],
                           dtype=torch.float64, device=device)
        which = torch.bucketize(u, cum, right=True)
        x = torch.empty(n, self.d, dtype=torch.float64, device=device)
        for i, (_, f) in enumerate(self.components):
            sel = which == i
            k = int(sel.sum())
            if k:
                x[sel] = f.sample(k, generator, device)
        return x

    def describe(self) -> dict[str, object]:
        out = self._head()
        out["components"] = [{"p": p, **f.describe()} for p, f in self.components]
        return out


# ---- constructors --------------------------------------------------------------------------
#: Token scales (σ, c, |μ|) are kept within these bounds: the moments hold their sixth powers
#: and the loss products of them, which must stay finite and non-zero in float64.
SCALE_RANGE = (1e-20, 1e20)


def check_scale(name: str, value: object) -> float:
    """A positive token scale within :data:`SCALE_RANGE`, else a one-line error naming it."""
    v = check_positive(name, value)
    lo, hi = SCALE_RANGE
    if not lo <= v <= hi:
        raise MesadynError(f"{name} must lie in [{lo:g}, {hi:g}] (its sixth power enters the "
                           f"moments, and must stay finite and non-zero), got {name}={v!r}")
    return v


def gaussian(d: int, sigma: float = 1.0) -> IID:
    """``x_1 ~ N(0, σ² I_d)``: κ1 = 3σ⁴, κ2 = 15σ⁶, κ3 = 3(d−1)σ⁶."""
    d = check_int("d", d, 1)
    s = check_scale("sigma", sigma)
    return IID("gaussian", d, m2=s**2, m4=3 * s**4, m6=15 * s**6, sampler=GaussianDraw(d, s))


def sparse(d: int, c: float = 1.0) -> Sparse:
    """Example 4.1: ``x_1 = ±c e_i`` with ``i`` uniform: κ1 = c⁴/d, κ2 = c⁶/d, κ3 = 0."""
    d = check_int("d", d, 1)
    c = check_scale("scale", c)
    return Sparse("sparse", d, c)


def rademacher(d: int) -> IID:
    """iid ±1 coordinates: κ1 = κ2 = 1, κ3 = d − 1."""
    d = check_int("d", d, 1)
    return IID("rademacher", d, m2=1.0, m4=1.0, m6=1.0, sampler=RademacherDraw(d))


def uniform(d: int) -> IID:
    """iid U[−1, 1] coordinates: κ1 = 1/5, κ2 = 1/7, κ3 = (d − 1)/15."""
    d = check_int("d", d, 1)
    return IID("uniform", d, m2=1 / 3, m4=1 / 5, m6=1 / 7, sampler=UniformDraw(d))


def iid(d: int, m2: float, m4: float, m6: float, sampler: Sampler | None = None,
        name: str = "iid") -> IID:
    """Any iid zero-mean family, fixed by its moments ``m2, m4, m6`` (Assumption 4.1)."""
    d = check_int("d", d, 1)
    m2, m4, m6 = (check_positive(k, v) for k, v in (("m2", m2), ("m4", m4), ("m6", m6)))
    if m4 < m2**2 or m6 * m2 < m4**2:
        raise MesadynError(f"moments m2={m2}, m4={m4}, m6={m6} are not those of a distribution")
    if sampler is not None and not callable(sampler):
        raise MesadynError(f"sampler must be callable, got {sampler!r}")
    return IID(name, d, m2=m2, m4=m4, m6=m6, sampler=sampler)


def fixed(vector: list[float] | np.ndarray | tuple[float, ...], name: str = "fixed") -> Fixed:
    """A fixed initial token ``x_1 = v`` (Section 4.3 uses ``v = 1_d``)."""
    import numpy as np

    v = tuple(float(x) for x in np.asarray(vector, dtype=np.float64).ravel())
    if len(v) < 1 or not all(math.isfinite(x) for x in v):
        raise MesadynError(f"the fixed initial token must be a finite vector, got {list(v)}")
    return Fixed(name, len(v), v)


def sampled(d: int, sampler: Sampler, name: str = "sampled") -> Sampled:
    """A family known only through ``sampler(n, generator, device) -> (n, d)`` (kind
    ``"sampled"``): it has no exact moments, so only sampled fields apply to it."""
    d = check_int("d", d, 1)
    if not callable(sampler):
        raise MesadynError(f"sampler must be callable, got {sampler!r}")
    return Sampled(name, d, sampler)


def ones(d: int) -> Fixed:
    """``x_1 = 1_d`` (Section 4.3); Assumption 4.1 fails."""
    d = check_int("d", d, 1)
    return fixed([1.0] * d, name="ones")


def shifted(d: int, mu: float = 0.0, sigma: float = 1.0) -> Shifted:
    """``x_1 = μ·1_d + σ g``, ``g ~ N(0, I_d)`` (σ >= 0, not both 0)."""
    d = check_int("d", d, 1)
    mu = check_finite("mu", mu)
    sigma = check_finite("sigma", sigma)
    if sigma < 0:
        raise MesadynError(f"sigma must be >= 0, got sigma={sigma!r}")
    if sigma == 0 and mu == 0:
        raise MesadynError("shifted with mu=0 and sigma=0 is the zero token; give mu or sigma")
    for name, v in (("sigma", sigma), ("mu", abs(mu))):
        if v != 0:
            check_scale(name, v)
    return Shifted("shifted", d, mu, sigma)


def moments(d: int, values: Sequence[float] | Sequence[Sequence[float]] | np.ndarray,
            name: str = "moments") -> Moments:
    """Independent coordinates with ``E[x^k] = values[k−1]``, k = 1..6 (one sequence for every
    coordinate), or ``values[j][k−1]`` for coordinate j (a (d, 6) table).

    Raises:
        MesadynError: a sequence that no distribution has (Hankel positivity,
            :func:`hankel_atoms`), or a table of the wrong shape.
    """
    import numpy as np

    d = check_int("d", d, 1)
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != MAX_ORDER or arr.shape[0] not in (1, d):
        raise MesadynError(
            f"moments must be 6 numbers E[x^1..x^6] or a ({d}, 6) table, got shape {arr.shape}"
        )
    rows = tuple(tuple(float(v) for v in r) for r in arr)
    for j, r in enumerate(rows):
        hankel_atoms(r, "moments" if len(rows) == 1 else f"moments of coordinate {j}")
    if len(set(rows)) == 1:
        rows = rows[:1]
    return Moments(name, d, rows)


def mixture(components: Sequence[tuple[float, Family]], name: str = "mixture") -> Mixture:
    """Draw ``F_i`` with probability ``p_i``; the ``p_i`` lie in [0, 1] and sum to 1."""
    comps = list(components)
    if not comps:
        raise MesadynError("a mixture needs at least one component")
    ps = []
    for p, f in comps:
        p = check_finite("p", p)
        if not 0 <= p <= 1:
            raise MesadynError(f"mixture weights must lie in [0, 1], got p={p!r}")
        if not isinstance(f, Family):
            raise MesadynError(f"mixture components must be families, got {f!r}")
        ps.append(p)
    if abs(math.fsum(ps) - 1) > 1e-12:
        raise MesadynError(f"mixture weights must sum to 1, got {ps} (sum {math.fsum(ps)!r})")
    d = comps[0][1].d
    if any(f.d != d for _, f in comps):
        raise MesadynError(f"mixture components must share d, got {[f.d for _, f in comps]}")
    return Mixture(name, d, tuple((p, f) for p, (_, f) in zip(ps, comps, strict=True)))


_moments_family = moments
_mixture_family = mixture
_ITEM = re.compile(r"^\s*([^:]+?)\s*:\s*([A-Za-z]+)\s*(?:\((.*)\))?\s*$")


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def parse_mixture(text: str, d: int, *, sigma: float = 1.0, scale: float = 1.0,
                  mu: float = 0.0,
                  moments: str | Sequence[float] | Sequence[Sequence[float]] | None = None
                  ) -> Mixture:
    """The mixture written ``"p1:name1,p2:name2(key=value;...)"``, e.g.
    ``"0.3:ones,0.7:gaussian"`` or ``"0.5:gaussian(sigma=0.5),0.5:gaussian(sigma=2)"``.

    Each component is :func:`family` ``(name, d, ...)`` with the shared ``sigma``, ``scale``,
    ``mu`` and ``moments`` unless its parentheses override them (keys: sigma, scale, mu).
    """
    comps: list[tuple[float, Family]] = []
    for item in _split_top(text):
        got = _ITEM.match(item)
        if got is None:
            raise MesadynError(
                f"mixture component {item.strip()!r} must read p:name or p:name(key=value;...)"
            )
        p_text, name, args = got.groups()
        try:
            p = float(p_text)
        except ValueError:
            raise MesadynError(f"mixture weight must be a number, got {p_text!r}") from None
        if name == FamilyName.MIXTURE:
            raise MesadynError("a mixture component cannot itself be a mixture")
        opts: dict[str, float] = {"sigma": sigma, "scale": scale, "mu": mu}
        for kv in (args or "").split(";"):
            if not kv.strip():
                continue
            key, _, val = kv.partition("=")
            key = key.strip()
            if key not in opts:
                raise MesadynError(
                    f"mixture component {name!r}: unknown parameter {key!r} (sigma, scale, mu)"
                )
            try:
                opts[key] = float(val)
            except ValueError:
                raise MesadynError(f"mixture component {name!r}: {key}={val.strip()!r} "
                                   "is not a number") from None
        comps.append((p, family(name, d, sigma=opts["sigma"], scale=opts["scale"],
                                mu=opts["mu"], moments=moments)))
    return _mixture_family(comps)


def parse_moments(text: str) -> list[list[float]]:
    """``"m1,...,m6"`` (one sequence) or ``"m1,...,m6;m1,...,m6;..."`` (one per coordinate)."""
    rows = []
    for part in text.split(";"):
        try:
            rows.append([float(v) for v in part.replace(" ", "").split(",") if v])
        except ValueError:
            raise MesadynError(f"moments must be numbers m1,...,m6, got {part.strip()!r}") from None
        if len(rows[-1]) != MAX_ORDER:
            raise MesadynError(f"moments need 6 numbers E[x^1..x^6], got {part.strip()!r}")
    return rows


def family(name: str, d: int, sigma: float = 1.0, scale: float = 1.0, mu: float = 0.0,
           moments: str | Sequence[float] | Sequence[Sequence[float]] | None = None,
           mixture: str | None = None) -> Family:
    """The family called ``name`` (a :class:`FamilyName`) from the CLI's option values.

    Arguments:
        name: gaussian (σ), sparse (c = ``scale``), ones, rademacher, uniform,
            shifted (``mu``, σ), moments (``moments``: ``"m1,...,m6"``, ``;`` between
            per-coordinate sequences, or numbers), mixture (``mixture``, :func:`parse_mixture`).

    Raises:
        MesadynError: an unknown name, bad parameters, or an option the family does not use.
    """
    if name not in FamilyName.__members__.values():
        raise MesadynError(
            f"unknown family {name!r}; choose one of {', '.join(m.value for m in FamilyName)}"
        )
    if mu != 0 and name not in (FamilyName.SHIFTED, FamilyName.MIXTURE):
        raise MesadynError(f"mu={mu!r} applies to the shifted family, not {name!r}")
    if mixture is not None and name != FamilyName.MIXTURE:
        raise MesadynError(f"a mixture was given but the family is {name!r}; use mixture")
    if name == FamilyName.GAUSSIAN:
        return gaussian(d, sigma)
    if name == FamilyName.SPARSE:
        return sparse(d, scale)
    if name == FamilyName.ONES:
        return ones(d)
    if name == FamilyName.RADEMACHER:
        return rademacher(d)
    if name == FamilyName.UNIFORM:
        return uniform(d)
    if name == FamilyName.SHIFTED:
        return shifted(d, mu, sigma)
    if name == FamilyName.MOMENTS:
        if moments is None:
            raise MesadynError("the moments family needs its moments E[x^1..x^6]")
        values = parse_moments(moments) if isinstance(moments, str) else moments
        return _moments_family(d, values)
    if mixture is None:
        raise MesadynError("the mixture family needs its components, e.g. 0.3:ones,0.7:gaussian")
    return parse_mixture(mixture, d, sigma=sigma, scale=scale, mu=mu, moments=moments)


# ---- sequences -----------------------------------------------------------------------------
def check_radius(radius: float) -> float:
    """The radius r > 0 of ``W = r·diag(λ)`` (DESIGN.md §6)."""
    return check_positive("radius", radius)


def sample_lambdas(n: int, d: int, generator: torch.Generator,
                   device: torch.device | str | None = None, radius: float = 1.0
                   ) -> torch.Tensor:
    """Diagonal of W: ``r·λ_k``, ``λ_k = exp(iθ_k)``, ``θ_k ~ U[0, 2π)``; complex128 (n, d)."""
    import torch

    radius = check_radius(radius)
    device = _device(generator, device)
    theta = 2 * math.pi * torch.rand(n, d, generator=generator, device=device,
                                     dtype=torch.float64)
    return torch.polar(torch.full_like(theta, radius), theta)


def sequences(x1: torch.Tensor, lam: torch.Tensor, T: int) -> torch.Tensor:
    """``x_t = λ^{t−1} ⊙ x_1`` for t = 1..T; complex128 of shape (n, T, d).

    ``λ`` may have any modulus (``r·λ`` for the radius r); a modulus within 1e-14 of 1 is
    taken as exactly 1, so unit rotations give the phases alone.
    """
    import torch

    T = check_int("T", T, 1)
    powers = torch.arange(T, device=lam.device, dtype=torch.float64)
    angle = torch.angle(lam)[:, None, :] * powers[None, :, None]
    mod = lam.abs()
    if bool(((mod - 1).abs() <= 1e-14).all()):
        lam_pow = torch.polar(torch.ones_like(angle), angle)
    else:
        lam_pow = torch.polar(mod[:, None, :] ** powers[None, :, None], angle)
    return lam_pow * x1.to(torch.complex128)[:, None, :]


def sample(fam: Family, n: int, T: int, generator: torch.Generator,
           device: torch.device | str | None = None, radius: float = 1.0
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``n`` initial tokens and transition diagonals: ``(x1 (n, d) real, rλ (n, d)
    complex)`` (``|rλ_k| = r``; r = 1 is the paper).

    Draws ``x_1`` first, then ``λ``, from one generator, so a seed fixes both.
    """
    n = check_int("n", n, 1)
    check_int("T", T, 1)
    radius = check_radius(radius)
    x1 = fam.sample(n, generator, device)
    lam = sample_lambdas(n, fam.d, generator, device, radius)
    return x1, lam


# ---- processes beyond diagonal W (sampled only) -----------------------------------------------
class Rotation(StrEnum):
    """The transition matrix W (DESIGN.md §6), times the radius r."""

    DIAGONAL = "diagonal"
    """``diag(λ)``, λ uniform on the torus (the paper)."""
    REAL = "real"
    """``blockdiag(R(φ_1), …, R(φ_{d/2}))``, φ uniform on [0, 2π): real sequences, d even."""
    HAAR = "haar"
    """Haar-distributed on U(d) (dense)."""


def check_rotation(rotation: Rotation | str) -> Rotation:
    """The :class:`Rotation` named ``rotation``, or an error naming it."""
    try:
        return Rotation(rotation)
    except ValueError:
        raise MesadynError(
            f"unknown rotation {rotation!r}; choose one of {', '.join(Rotation)}") from None


def check_noise(noise: object) -> float:
    """The AR noise scale ``s >= 0`` of ``x_{t+1} = W x_t + ε_t`` (finite), or an error naming
    it."""
    s = check_finite("noise", noise)
    if s < 0:
        raise MesadynError(f"noise must be >= 0, got noise={s!r}")
    return s


def _haar_unitary(n: int, d: int, generator: torch.Generator,
                  device: torch.device) -> torch.Tensor:
    """``n`` Haar-distributed d×d unitaries: QR of a complex Ginibre matrix with the phases of
    R's diagonal divided out (Mezzadri 2007)."""
    import torch

    z = torch.complex(torch.randn(n, d, d, generator=generator, device=device,
                                  dtype=torch.float64),
                      torch.randn(n, d, d, generator=generator, device=device,
                                  dtype=torch.float64)) / math.sqrt(2)
    q, r = torch.linalg.qr(z)
    ph = torch.diagonal(r, dim1=-2, dim2=-1)
    return q * (ph / ph.abs())[:, None, :]


def sample_transitions(n: int, d: int, generator: torch.Generator,
                       device: torch.device | str | None = None, *, radius: float = 1.0,
                       rotation: Rotation | str = Rotation.DIAGONAL) -> torch.Tensor:
    """``n`` transition matrices ``W = r·R`` as complex128 (n, d, d).

    Raises:
        MesadynError: r <= 0, an unknown rotation, or ``real`` with d odd.
    """
    import torch

    radius = check_radius(radius)
    rot = check_rotation(rotation)
    device = _device(generator, device)
    if rot is Rotation.DIAGONAL:
        return torch.diag_embed(sample_lambdas(n, d, generator, device, radius))
    if rot is Rotation.HAAR:
        return radius * _haar_unitary(n, d, generator, device)
    if d % 2:
        raise MesadynError(f"real rotations need an even d, got d={d}")
    phi = 2 * math.pi * torch.rand(n, d // 2, generator=generator, device=device,
                                   dtype=torch.float64)
    c, s = torch.cos(phi), torch.sin(phi)
    W = torch.zeros(n, d, d, dtype=torch.float64, device=device)
    k = torch.arange(0, d, 2, device=device)
    W[:, k, k], W[:, k, k + 1], W[:, k + 1, k], W[:, k + 1, k + 1] = c, -s, s, c
    return (radius * W).to(torch.complex128)


def sample_sequences(fam: Family, n: int, T: int, generator: torch.Generator,
                     device: torch.device | str | None = None, *, radius: float = 1.0,
                     rotation: Rotation | str = Rotation.DIAGONAL, noise: float = 0.0
                     ) -> torch.Tensor:
    """``n`` sequences ``x_1..x_T`` (complex128, (n, T, d)) of ``x_{t+1} = W x_t + ε_t``.

    ``W = r·R`` (:func:`sample_transitions`), fresh per sequence; ``ε_t`` iid circular complex
    Gaussian with ``E|ε_{t,k}|² = noise²``.  Draws ``x_1``, then W, then the noise, from one
    generator.  The diagonal noiseless case is :func:`sample` + :func:`sequences` (same draws).

    Raises:
        MesadynError: bad n, T, radius, rotation or noise (< 0), or d odd for ``real``.
    """
    import torch

    n = check_int("n", n, 1)
    T = check_int("T", T, 1)
    noise = check_noise(noise)
    rot = check_rotation(rotation)
    if rot is Rotation.DIAGONAL and noise == 0:
        x1, lam = sample(fam, n, T, generator, device, radius=radius)
        return sequences(x1, lam, T)
    device = _device(generator, device)
    x1 = fam.sample(n, generator, device)
    W = sample_transitions(n, fam.d, generator, device, radius=radius, rotation=rotation)
    x = torch.empty(n, T, fam.d, dtype=torch.complex128, device=device)
    x[:, 0] = x1.to(torch.complex128)
    for t in range(T - 1):
        nxt = (W @ x[:, t, :, None]).squeeze(-1)
        if noise > 0:
            eps = torch.complex(
                torch.randn(n, fam.d, generator=generator, device=device, dtype=torch.float64),
                torch.randn(n, fam.d, generator=generator, device=device, dtype=torch.float64))
            nxt = nxt + (noise / math.sqrt(2)) * eps
        x[:, t + 1] = nxt
    return x
