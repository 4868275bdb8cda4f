"""The exact field by quadrature: Eq. 2 integrated exactly for any model polynomial in the
tokens, through the model's own forward pass (docs/design.md §7, "Exact by quadrature").

On the paper's process (``W = r·diag(λ)``, no noise) every token is ``x_t = r^{t−1} λ^{t−1} ⊙
x_1``, so the Eq. 2 summand of a model whose ŷ has degree ``n_y`` in the tokens
(:attr:`~mesadyn.models.Model.token_degree`) is

* a polynomial of degree ``n = 2 n_y`` in ``x_1``: integrated exactly by a product rule exact
  to degree n in each coordinate — Gauss–Hermite with ``⌈(n+1)/2⌉`` nodes for gaussian (and the
  shifted gaussian), Gauss–Legendre for uniform, the point masses of rademacher, sparse
  (``±c e_i``) and fixed tokens (ones), the components' rules for a mixture, and for any other
  family with six moments (the 4-atom rule of :func:`~mesadyn.process.hankel_atoms`) where
  ``n <= 6`` (the paper's model);
* a trigonometric polynomial of degree at most ``D = n_y (T − 2)`` in each phase ``φ_k``
  (:meth:`~mesadyn.models.Model.phase_degree`): integrated exactly by ``N = D + 1`` equally
  spaced angles per coordinate (``Σ_j e^{i m 2πj/N} = 0`` for ``0 < |m| < N``).

Coordinates where a token node is 0 stay 0 at every t, so their phases are not integrated
(Example 4.1's sparse nodes need one angle grid each).  Two exact symmetries halve the rule
where they apply: the loss is even in ``x_1`` when ŷ is odd in the tokens
(:attr:`~mesadyn.models.Model.odd_in_tokens`; a rule symmetric under ``x ↦ −x`` keeps one node
of each pair, with both weights), and even in the phases (``λ ↦ λ̄`` conjugates the sequence:
:attr:`~mesadyn.models.Model.conjugation_symmetric`; one angle vector of each pair ``φ, −φ``).

The weighted sequences go through :meth:`~mesadyn.models.Model.sequence_loss` — none of the
moment counting of :class:`~mesadyn.field.ExactField` — so for the paper's model this is the
independent check of that counting; the loss, gradient, Hessian-vector products and the exact
Hessian are autodiff through the weighted sum (:class:`~._direct.WeightedSequences`).  The rule
grows like ``N^d`` times the token nodes: :func:`quadrature_plan` states the points, bytes and
seconds before anything is built, and :class:`QuadratureField` hands them to the one size guard
(:func:`mesadyn.budget.check`), refusing more than :data:`MAX_POINTS` points.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import final

import numpy as np
import torch

from ..budget import Estimate, check, fmt_bytes
from ..device import Device
from ..errors import MesadynError, check_int, check_positive
from ..models import Model
from ..process import IID, Family, Fixed, Mixture, Shifted, Sparse
from ..process.samplers import GaussianDraw, RademacherDraw, UniformDraw
from ..progress import ProgressCallback
from ..theory import check_T
from ._device import check_device
from ._direct import HVP_CHUNK_DIVISOR, WeightedSequences
from ._direct_cost import DirectCost, direct_cost
from ._sequences import CHUNK_GRAPH_BYTES

__all__ = ["MAX_POINTS", "QuadratureField", "QuadraturePlan", "TokenRule", "quadrature_plan",
           "token_rule"]

#: More weighted sequences than this are refused (the rule is for small d and T).
MAX_POINTS = 50_000_000
#: Gauss nodes per coordinate beyond which no rule is formed (degree ``2·256 − 1``: the
#: loss of five layers, ``2·3^5 = 486``, has a rule; six layers do not).
MAX_RULE_NODES = 256
#: The weighted sequences are kept in memory up to this many bytes (and a quarter of the
#: memory budget); beyond it they are rebuilt chunk by chunk on every evaluation.
KEEP_BYTES = 2**30


@dataclass(frozen=True)
class TokenRule:
    """Nodes (K, d) and weights (K,) summing to 1, exact for every polynomial of degree
    ``<= degree`` in each coordinate of ``x_1`` (``degree`` None: every degree)."""

    nodes: np.ndarray
    weights: np.ndarray
    kind: str
    degree: int | None


def _product(rules: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    nodes = np.array(list(itertools.product(*[n for n, _ in rules])), dtype=np.float64)
    weights = np.prod(np.array(list(itertools.product(*[w for _, w in rules]))), axis=1)
    return nodes, weights


def _gauss_hermite(k: int, mu: float, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    z, w = np.polynomial.hermite_e.hermegauss(k)
    return mu + sigma * z, w / w.sum()


def _gauss_legendre(k: int) -> tuple[np.ndarray, np.ndarray]:
    z, w = np.polynomial.legendre.leggauss(k)
    return z, w / w.sum()


def token_rule(family: Family, degree: int) -> TokenRule:
    """A product rule for ``x_1 ~ family`` exact to ``degree`` in each coordinate.

    Raises:
        MesadynError: a family with no rule of that degree (named, with its kind).
    """
    degree = check_int("degree", degree, 0)
    d = family.d
    k = math.ceil((degree + 1) / 2)
    if isinstance(family, Mixture):
        parts = [token_rule(f, degree) for _, f in family.components]
        nodes = np.concatenate([r.nodes for r in parts])
        weights = np.concatenate([p * r.weights for (p, _), r in
                                  zip(family.components, parts, strict=True)])
        return TokenRule(nodes, weights, "mixture", degree)
    if isinstance(family, Sparse):
        c = family.scale
        return TokenRule(np.concatenate([c * np.eye(d), -c * np.eye(d)]),
                         np.full(2 * d, 1.0 / (2 * d)), "point masses ±c e_i", None)
    if isinstance(family, Fixed):
        return TokenRule(np.asarray(family.vector, np.float64)[None, :], np.ones(1),
                         "fixed token", None)
    sampler = family.sampler if isinstance(family, IID) else None
    gauss = ((family.mu, family.sigma) if isinstance(family, Shifted)
             else (sampler.mu, sampler.sigma) if isinstance(sampler, GaussianDraw) else None)
    if (gauss is not None or isinstance(sampler, UniformDraw)) and (
            k > MAX_RULE_NODES or k**d > MAX_POINTS):
        raise MesadynError(f"a Gauss rule exact to degree {degree} needs {k} nodes per "
                           f"coordinate ({k}^{d} in all), more than the {MAX_RULE_NODES} per "
                           f"coordinate and {MAX_POINTS} points the quadrature takes; use "
                           "field='mc' or field='finite'")
    if gauss is not None:
        nodes, weights = _product([_gauss_hermite(k, *gauss)] * d)
        return TokenRule(nodes, weights, f"Gauss-Hermite, {k} nodes", 2 * k - 1)
    if isinstance(sampler, UniformDraw):
        nodes, weights = _product([_gauss_legendre(k)] * d)
        return TokenRule(nodes, weights, f"Gauss-Legendre, {k} nodes", 2 * k - 1)
    if isinstance(sampler, RademacherDraw):
        nodes, weights = _product([(np.array([-1.0, 1.0]), np.array([0.5, 0.5]))] * d)
        return TokenRule(nodes, weights, "point masses ±1", None)
    if degree <= 6:
        from ._quadrature import token_rule as six_moment_rule

        try:
            nodes, weights = six_moment_rule(family)
        except MesadynError:
            pass
        else:
            return TokenRule(nodes, weights, "4-atom rule of six moments", 6)
    raise MesadynError(f"no quadrature rule of degree {degree} for family {family.name!r} "
                       f"(kind {family.kind!r}); use field='mc' or field='finite'")


def _fold_negation(nodes: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One node of each pair ``x, −x`` with both weights, when the rule is symmetric under
    ``x ↦ −x`` (else the rule unchanged)."""
    where = {tuple(np.round(row, 12) + 0.0): i for i, row in enumerate(nodes)}
    keep, w = [], []
    for i, row in enumerate(nodes):
        j = where.get(tuple(np.round(-row, 12) + 0.0))
        if j is None or not math.isclose(weights[i], weights[j], rel_tol=1e-12):
            return nodes, weights
        if i <= j:
            keep.append(i)
            w.append(weights[i] if i == j else weights[i] + weights[j])
    return nodes[keep], np.asarray(w)


def _angle_grid(n_angles: int, s: int, fold: bool) -> tuple[np.ndarray, np.ndarray]:
    """Index vectors ``j ∈ {0..N−1}^s`` (angles ``2πj/N``) and weights summing to 1; with
    ``fold``, one of each pair ``j, −j mod N`` carrying both weights."""
    if s == 0:
        return np.zeros((1, 0), dtype=np.int64), np.ones(1)
    grid = np.array(list(itertools.product(range(n_angles), repeat=s)), dtype=np.int64)
    w = np.full(len(grid), 1.0 / len(grid))
    if not fold:
        return grid, w
    radix = n_angles ** np.arange(s - 1, -1, -1)
    flat = grid @ radix
    partner = ((-grid) % n_angles) @ radix
    keep = flat <= partner
    return grid[keep], np.where(flat[keep] == partner[keep], 1.0, 2.0) / len(grid)


def _grid_size(n_angles: int, s: int, fold: bool) -> int:
    """The length of :func:`_angle_grid`: ``N^s``, folded ``(N^s + c)/2`` with ``c`` the
    self-paired vectors (``2^s`` for even N: every entry 0 or N/2; 1 for odd N)."""
    total = n_angles**s
    if not fold or s == 0:
        return total
    c = 2**s if n_angles % 2 == 0 else 1
    return (total + c) // 2


@dataclass(frozen=True)
class QuadraturePlan:
    """The rule of one exact field by quadrature, priced before it is built.

    ``groups`` pairs each support (the coordinates where a token node is nonzero) with the
    indices of its token nodes; ``points`` is the number of weighted sequences.
    """

    model: Model
    family: Family
    T: int
    radius: float
    token: TokenRule
    n_angles: int
    fold_tokens: bool
    fold_phases: bool
    groups: tuple[tuple[tuple[int, ...], np.ndarray], ...]
    points: int
    chunk: int

    @property
    def sequence_bytes(self) -> int:
        """Bytes of every weighted sequence and its weight."""
        return self.points * (16 * self.T * self.family.d + 8)

    @property
    def keep(self) -> bool:
        """Whether the weighted sequences are kept in memory (else rebuilt per evaluation)."""
        from ._memory import memory_budget

        return self.sequence_bytes <= min(KEEP_BYTES, memory_budget().bytes // 4)

    def cost(self) -> DirectCost:
        """Expected CPU seconds of a gradient and of a Hessian-vector product
        (:func:`~._direct_cost.direct_cost` over the rule's points)."""
        return direct_cost(self.model, self.family.d, self.T, self.points)

    def seconds(self) -> float:
        """Expected CPU seconds of one loss and gradient."""
        return self.cost().gradient

    def estimate(self) -> Estimate:
        """What the field holds: the kept sequences and two chunks of the autograd graph."""
        graph = 2 * self.chunk * self.model.graph_bytes(self.family.d, self.T)
        return Estimate(self.what, (self.sequence_bytes if self.keep else 0) + graph,
                        seconds=self.seconds(), advice="use a smaller d or T, or field='mc'")

    @property
    def what(self) -> str:
        return (f"the exact field by quadrature of the {self.model} model at "
                f"d={self.family.d}, T={self.T} ({self.points} points)")

    def describe(self) -> dict[str, object]:
        """JSON-ready: the rule's sizes (the cost stated before it runs)."""
        return {"method": "quadrature", "points": self.points,
                "token_nodes": int(sum(len(idx) for _, idx in self.groups)),
                "token_rule": self.token.kind, "n_angles": self.n_angles,
                "fold_tokens": self.fold_tokens, "fold_phases": self.fold_phases,
                "bytes": self.estimate().host_bytes, "seconds_per_gradient": self.seconds()}

    def summary(self) -> str:
        """One line: points, memory and time of a gradient."""
        est = self.estimate()
        return (f"{self.what}: {self.token.kind} × {self.n_angles} angles per phase, "
                f"{fmt_bytes(est.host_bytes)}, about {self.seconds():.3g} s per gradient")


def quadrature_plan(model: Model, family: Family, T: int, *, radius: float = 1.0,
                    nodes: int | None = None, n_angles: int | None = None,
                    fold: bool = True) -> QuadraturePlan:
    """The rule of the exact field by quadrature of ``model`` (see the module docstring).

    ``nodes`` and ``n_angles`` override the rule's degree (``nodes`` Gauss nodes per coordinate:
    degree ``2·nodes − 1``) and its angles per phase; both default to the model's degrees;
    ``fold=False`` keeps both halves of the symmetric rules.  A plan is a frozen value of its
    arguments, so the last :data:`PLANS_KEPT` are kept: a workflow that prices a run by its plan
    and then builds the field (:class:`QuadratureField`) forms the rule once.

    Raises:
        MesadynError: a model that is not polynomial, a family with no rule, or a rule below the
            integrand's degree.
    """
    key = (model, family, T, radius, nodes, n_angles, fold)
    try:
        hash(key)
    except TypeError:  # a family holding an unhashable value: form the rule each time
        return _plan(*key)
    return _kept_plan(*key)


#: Quadrature plans kept by :func:`quadrature_plan` (the most recently used).
PLANS_KEPT = 16


def _plan(model: Model, family: Family, T: int, radius: float, nodes: int | None,
          n_angles: int | None, fold: bool) -> QuadraturePlan:
    """:func:`quadrature_plan`, formed."""
    T = check_T(T)
    radius = check_positive("radius", radius)
    if not model.polynomial or model.token_degree is None:
        raise MesadynError(f"field='exact' is not supported by model={model}: ŷ is not a "
                           "polynomial in the tokens; use field='mc' or field='finite'")
    degree = 2 * model.token_degree
    phase = model.phase_degree(T)
    assert phase is not None
    if nodes is not None:
        nodes = check_int("nodes", nodes, 1)
        if 2 * nodes - 1 < degree:
            raise MesadynError(f"nodes={nodes} is exact to degree {2 * nodes - 1}, below the "
                               f"loss's degree {degree} in x_1")
        degree = 2 * nodes - 1
    N = phase + 1 if n_angles is None else check_int("n_angles", n_angles, phase + 1)
    rule = token_rule(family, degree)
    x, w = rule.nodes, rule.weights
    fold_tokens = fold and model.odd_in_tokens
    if fold_tokens:
        n_before = len(w)
        x, w = _fold_negation(x, w)
        fold_tokens = len(w) < n_before
    rule = TokenRule(x, w, rule.kind, rule.degree)
    fold_phases = fold and model.conjugation_symmetric
    supports: dict[tuple[int, ...], list[int]] = {}
    for i, row in enumerate(x):
        supports.setdefault(tuple(int(k) for k in np.flatnonzero(row != 0)), []).append(i)
    groups = tuple((s, np.asarray(idx)) for s, idx in sorted(supports.items()))
    points = sum(len(idx) * _grid_size(N, len(s), fold_phases) for s, idx in groups)
    chunk = max(1, CHUNK_GRAPH_BYTES // model.graph_bytes(family.d, T))
    return QuadraturePlan(model, family, T, radius, rule, N, fold_tokens, fold_phases, groups,
                          points, chunk)


_kept_plan = functools.lru_cache(maxsize=PLANS_KEPT)(_plan)


@final
class QuadratureField(WeightedSequences):
    """The exact population loss of ``model`` by quadrature (see the module docstring).

    Arguments: ``model``, ``family``, ``T``; ``radius`` r of ``W = r·diag(λ)``; ``nodes``,
    ``n_angles``, ``fold`` as :func:`quadrature_plan`; ``device`` where it evaluates.

    Raises:
        MesadynError: as :func:`quadrature_plan`; more than :data:`MAX_POINTS` points, or a rule
            that does not fit in memory (:func:`mesadyn.budget.check`), before anything is built.
    """

    name = "exact"

    def __init__(self, model: Model, family: Family, T: int, *, radius: float = 1.0,
                 nodes: int | None = None, n_angles: int | None = None, fold: bool = True,
                 device: Device | str | torch.device | None = None) -> None:
        self.model = model
        self.family = family
        self.T = check_T(T)
        self.plan = quadrature_plan(model, family, T, radius=radius, nodes=nodes,
                                    n_angles=n_angles, fold=fold)
        if self.plan.points > MAX_POINTS:
            raise MesadynError(f"{self.plan.what} exceeds the {MAX_POINTS} points the "
                               f"quadrature takes; use a smaller d or T, or field='mc'")
        check(self.plan.estimate())
        self.device = check_device(device)
        self.radius = float(radius)
        self._kept: list[tuple[torch.Tensor, torch.Tensor]] | None = None

    # ---- the weighted sequences --------------------------------------------------------------
    def _rows(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``(token rows, angle indices, weights)`` of every group, in pieces."""
        plan = self.plan
        x, wx = plan.token.nodes, plan.token.weights
        d = self.family.d
        for support, idx in plan.groups:
            grid, wp = _angle_grid(plan.n_angles, len(support), plan.fold_phases)
            full = np.zeros((len(grid), d), dtype=np.int64)
            full[:, list(support)] = grid
            per = max(1, plan.chunk // len(grid))
            for lo in range(0, len(idx), per):
                rows = idx[lo:lo + per]
                yield (np.repeat(x[rows], len(grid), axis=0), np.tile(full, (len(rows), 1)),
                       np.outer(wx[rows], wp).ravel())

    def _build(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        plan = self.plan
        T, N = self.T, plan.n_angles
        powers = torch.arange(T, dtype=torch.float64)
        mod = self.radius ** powers
        for x1, j, w in self._rows():
            for lo in range(0, len(w), plan.chunk):
                xs = torch.from_numpy(x1[lo:lo + plan.chunk])
                ang = (2 * math.pi / N) * torch.from_numpy(j[lo:lo + plan.chunk]).to(
                    torch.float64)
                phase = torch.polar(mod[None, :, None].expand(len(xs), T, xs.shape[1]),
                                    powers[None, :, None] * ang[:, None, :])
                seq = (phase * xs[:, None, :].to(torch.complex128)).to(self.device)
                yield seq, torch.from_numpy(w[lo:lo + plan.chunk]).to(self.device)

    def prepare(self, progress: ProgressCallback | None = None) -> None:
        """Build and keep the weighted sequences now (when they fit: :attr:`QuadraturePlan.
        keep`), reporting the fraction of points done to ``progress``."""
        if self._kept is not None or not self.plan.keep:
            return
        kept, done = [], 0
        for x, w in self._build():
            kept.append((x, w))
            done += len(w)
            if progress is not None:
                progress(done / self.plan.points)
        self._kept = kept

    def _weighted(self, chunk: int | None = None
                  ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if self._kept is None and self.plan.keep:
            self.prepare()
        pieces = self._kept if self._kept is not None else self._build()
        for x, w in pieces:
            if chunk is None or chunk >= len(w):
                yield x, w
            else:
                for lo in range(0, len(w), chunk):
                    yield x[lo:lo + chunk], w[lo:lo + chunk]

    def _hvp_chunk(self) -> int:
        return max(1, self.plan.chunk // HVP_CHUNK_DIVISOR)

    def memory_bytes(self) -> int:
        return sum(x.numel() * 16 + w.numel() * 8 for x, w in self._kept or [])

    def describe(self) -> dict[str, object]:
        out = {**super().describe(), **self.plan.describe()}
        return out if self.radius == 1 else {**out, "radius": self.radius}
