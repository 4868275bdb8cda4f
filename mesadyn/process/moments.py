"""Families given by moment sequences: :class:`Shifted` (``μ·1_d + σ g``) and :class:`Moments`
(independent coordinates with given ``E[x^k]``, sampled from a discrete distribution with
exactly those moments, :func:`hankel_atoms`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, ClassVar, final

from ..errors import MesadynError, check_finite
from .families import (
    MAX_ORDER,
    CoordinateGroup,
    Family,
    NoReducedSystem,
    _check_counts,
    _draw,
    _even_blocks,
)
from .samplers import AtomDraw, GaussianDraw

if TYPE_CHECKING:  # imported inside the functions that use them: `mesadyn theory` loads neither
    import numpy as np
    import torch

__all__ = ["Moments", "Shifted", "gaussian_raw_moments", "hankel_atoms"]


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


@final
@dataclass(frozen=True)
class Shifted(Family):
    """``x_1 = μ·1_d + σ g``, ``g ~ N(0, I_d)`` (docs/design.md §6): independent coordinates with
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
    def coordinate_group(self) -> CoordinateGroup:
        return (CoordinateGroup.SIGNED_PERMUTATIONS if self.mu == 0
                else CoordinateGroup.PERMUTATIONS)

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


@final
@dataclass(frozen=True)
class Moments(Family):
    """Independent coordinates with given moments ``E[x_k^j]``, j = 1..6 (docs/design.md §6):
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

    @property
    def coordinate_group(self) -> CoordinateGroup:
        """Of the law the sampler draws: its atoms are symmetric when the odd moments are 0."""
        if not self._shared:
            return CoordinateGroup.TRIVIAL
        return (CoordinateGroup.SIGNED_PERMUTATIONS if self._zero_odd
                else CoordinateGroup.PERMUTATIONS)

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
