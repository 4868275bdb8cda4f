"""Ensembles of full-flow runs: where the flow goes, with what frequency, and when it leaves the
saddle at θ = 0.

- :func:`classify` — each end point's :class:`Basin`, onto the fixed-point sets of Theorems
  4.1/4.3: the hyperbola
  ``a_k b_k = ab*`` with every coordinate on the ``a > 0`` branch, every one on ``a < 0``, or
  mixed; a converged point off the diagonal structure (``dense``: Proposition 4.2's branch for
  ones); another critical point (``other``, e.g. the saddle); or ``not_converged``.  The
  off-structure test looks only at the entries the flow can move: :func:`inert_mask` finds the
  entries the loss does not depend on (for sparse, κ3 = 0, the off-diagonal entries of the
  ``W^KQ`` blocks), which keep their initial values for ever; their size is reported apart
  (:func:`inert_size`).  Beyond those, an end point whose diagonal projection is itself a fixed
  point with the same loss sits on the same fixed-point set, displaced along a flat valley
  (:func:`flat_check`; sparse's ``W^KQ_33``/``W^PV_13`` entries): it counts as on the branch.
- :func:`wilson` — 95% Wilson score intervals for outcome fractions.
- :func:`saddle_modes` — the linearisation at the saddle θ = 0: ``−∇²L(0)`` (only the bilinear
  cross term of L survives at 0, so its eigenvalues are ``±σ_i(C)``), its top rate ``λ_top``
  and where the top eigenvectors live (block weights; on/off the diagonals).
- :func:`escape_time_prediction` — the time to reach ``mean_k a_k b_k = ab*/2`` from a small
  start: the start's projection onto the top eigenspace grows like ``e^{λ_top τ}``; each
  coordinate's ``s_k = a_k b_k`` then follows Lemma 5.2's logistic (``Δ = 0``) from
  ``s_k(0) = a_k b_k`` of the projection — so ``s_k(τ) = p s_k0 / (s_k0 + (p − s_k0) e^{−2 c2 τ})``
  with ``p = ab*`` and the rate ``2 c2 = 2 λ_top`` (gaussian, sparse) — and the mean is solved
  for ``p/2`` by bisection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt
import torch

from ..errors import MesadynError
from ..field import Field
from ..field.batched import batched_loss_and_grad
from ..model import active_mask, block_labels, diagonal_entries, diagonal_mask
from ..record import Record, hidden
from ..reduced import ReducedSystem

FloatArray = npt.NDArray[np.float64]


#: :func:`classify`'s default: off-structure entries below this put a point on the structure.
OFF_TOL = 1e-6


class Basin(StrEnum):
    """Where a trajectory ended: a classification of its end point (string-valued, the words
    of the run files' ``outcome`` column), not how the run ended (that is its
    :class:`~mesadyn.outcome.Outcome`)."""

    BRANCH_PLUS = "branch_plus"
    BRANCH_MINUS = "branch_minus"
    BRANCH_MIXED = "branch_mixed"
    DENSE = "dense"
    OTHER = "other"
    NOT_CONVERGED = "not_converged"


@dataclass(frozen=True)
class Interval(Record):
    """A fraction ``count/n`` with its 95% Wilson score interval (``fraction``, ``low``,
    ``high``)."""

    count: int
    n: int
    fraction: float
    low: float
    high: float

    @property
    def k(self) -> int:
        """The count (``k`` of ``k/n``)."""
        return self.count


def wilson(k: int, n: int, z: float = 1.959963984540054) -> Interval:
    """The Wilson score interval for ``k`` successes in ``n`` trials (95% by default).

    ``(p̂ + z²/2n ± z √(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n)``; well-behaved at k = 0 and k = n.

    # Raises
    `MesadynError` unless ``0 <= k <= n`` and ``n >= 1``.
    """
    if n < 1 or not 0 <= k <= n:
        raise MesadynError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    p = k / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return Interval(k, n, p, low, high)


def off_structure(theta: npt.ArrayLike, inert: npt.ArrayLike | None = None) -> FloatArray:
    """max |θ_i| over the active entries outside the diagonals of W^KQ_32 and W^PV_12, per row,
    leaving out the `inert` entries (a boolean mask over θ, :func:`inert_mask`) if given."""
    th = np.asarray(theta, dtype=np.float64)
    d = int(round((th.shape[-1] / 18) ** 0.5))
    off = active_mask(d) & ~diagonal_mask(d)
    if inert is not None:
        off &= ~np.asarray(inert, dtype=bool)
    if not off.any():
        return np.zeros(th.shape[:-1])
    out: FloatArray = np.max(np.abs(th[..., off]), axis=-1)
    return out


def inert_mask(field: Field, probes: int = 4, seed: int = 0, rel: float = 1e-12) -> npt.NDArray[
        np.bool_]:
    """The active entries of θ the loss does not depend on: ``∂L/∂θ_i`` vanishes identically.

    Tested at `probes` random dense θ (every entry ``N(0, 1)``, generator `seed`): entry i is
    inert when ``|∂L/∂θ_i| <= rel · max_j |∂L/∂θ_j|`` at every probe.  The flow never moves an
    inert entry, so it keeps its initial value; the fixed-point sets are then not isolated along
    it.  For sparse (κ3 = 0: one coordinate per sequence) these are the off-diagonal entries of
    ``W^KQ_22, W^KQ_23, W^KQ_32, W^KQ_33``; gaussian and ones have none.

    # Returns
    A boolean mask over θ (18d²,).
    """
    rng = np.random.default_rng(seed)
    th = rng.standard_normal((max(1, int(probes)), field.n_params))
    _, g = batched_loss_and_grad(field, th)
    g = np.abs(g)
    flat = np.all(g <= rel * g.max(axis=1, keepdims=True), axis=0)
    out: npt.NDArray[np.bool_] = flat & active_mask(field.d)
    return out


def inert_size(theta: npt.ArrayLike, inert: npt.ArrayLike) -> FloatArray:
    """max |θ_i| over the `inert` entries (:func:`inert_mask`) per row; 0 if there are none."""
    th = np.asarray(theta, dtype=np.float64)
    m = np.asarray(inert, dtype=bool)
    if not m.any():
        return np.zeros(th.shape[:-1])
    out: FloatArray = np.max(np.abs(th[..., m]), axis=-1)
    return out


@dataclass(frozen=True)
class FlatCheck:
    """Whether each end point is its diagonal projection moved along a flat valley.

    ``theta_s`` (:func:`structure_projection`) keeps only the diagonals of W^KQ_32 and W^PV_12;
    `projected_grad_max` is max|∇L(θ_s)|, `loss_gap` is ``L(θ) − L(θ_s)``; `flat` holds where
    θ_s is itself a fixed point (gradient below the tolerance) with the same loss: then θ lies
    on the same (non-isolated) fixed-point set as θ_s, and its off-structure entries are a
    displacement the flow does not remove.
    """

    flat: npt.NDArray[np.bool_]
    projected_grad_max: FloatArray
    loss_gap: FloatArray


def structure_projection(theta: npt.ArrayLike) -> FloatArray:
    """θ with every active entry outside the diagonals of W^KQ_32 and W^PV_12 set to 0."""
    th = np.array(theta, dtype=np.float64)
    d = int(round((th.shape[-1] / 18) ** 0.5))
    th[..., active_mask(d) & ~diagonal_mask(d)] = 0.0
    return th


def flat_check(field: Field, theta: npt.ArrayLike, grad_tol: float,
               loss_rtol: float = 1e-9) -> FlatCheck:
    """:class:`FlatCheck` of the rows of `theta`: ``max|∇L(θ_s)| <= grad_tol`` and
    ``|L(θ) − L(θ_s)| <= loss_rtol · max(1, |L(θ)|)``.

    Found on sparse: with κ3 = 0 the converged rows from a Gaussian start keep off-diagonal
    entries of the init's size in ``W^KQ_33`` and ``W^PV_13`` (beyond the inert entries) that
    the gradient does not see at the fixed point, while their diagonal projection is an exact
    fixed point on Theorem 4.3's hyperbola with the same loss.
    """
    th = np.array(theta, dtype=np.float64, ndmin=2)
    ths = structure_projection(th)
    loss, _ = batched_loss_and_grad(field, th)
    loss_s, g_s = batched_loss_and_grad(field, ths)
    gmax = np.max(np.abs(g_s), axis=1)
    gap = loss - loss_s
    flat = (gmax <= grad_tol) & (np.abs(gap) <= loss_rtol * np.maximum(1.0, np.abs(loss)))
    return FlatCheck(flat=flat, projected_grad_max=gmax, loss_gap=gap)


def classify(theta: npt.ArrayLike, converged: npt.ArrayLike, ab_star: float | None, *,
             ab_tol: float = 1e-6, off_tol: float = OFF_TOL,
             inert: npt.ArrayLike | None = None,
             flat: npt.ArrayLike | None = None) -> npt.NDArray[np.str_]:
    """The :class:`Basin` of each end point (rows of ``theta``).

    # Arguments
    - `theta`: end points (N, 18d²); `converged`: (N,) whether each met the steady-state test.
    - `ab_star`: the hyperbola's ``c2/c1`` (``None`` for families without a reduced system:
      every converged diagonal point is then ``other``).
    - `ab_tol`: ``max_k |a_k b_k − ab*| <= ab_tol · ab*`` puts a point on the hyperbola;
      `off_tol`: :func:`off_structure` below it puts it on the diagonal structure.
    - `inert`: entries left out of the off-structure test (:func:`inert_mask`): the loss is flat
      along them, so their (initial) values say nothing about where the flow went.
    - `flat`: (N,) rows that count as on the diagonal structure whatever their off-structure
      size, because they are their diagonal projection moved along a flat valley of the
      fixed-point set (:func:`flat_check`).

    # Returns
    An array of :class:`Basin` strings (N,).
    """
    th = np.asarray(theta, dtype=np.float64)
    conv = np.asarray(converged, dtype=bool)
    a, b = diagonal_entries(th)
    off = off_structure(th, inert)
    out = np.full(th.shape[0], Basin.NOT_CONVERGED.value, dtype="<U13")
    diag = conv & (off <= off_tol)
    if flat is not None:
        diag |= conv & np.asarray(flat, dtype=bool)
    out[conv & ~diag] = Basin.DENSE.value
    out[diag] = Basin.OTHER.value
    if ab_star is not None:
        on = diag & np.all(np.abs(a * b - ab_star) <= ab_tol * ab_star, axis=1)
        plus, minus = np.all(a > 0, axis=1), np.all(a < 0, axis=1)
        out[on & plus] = Basin.BRANCH_PLUS.value
        out[on & minus] = Basin.BRANCH_MINUS.value
        out[on & ~plus & ~minus] = Basin.BRANCH_MIXED.value
    return out


def fractions(basins: npt.ArrayLike) -> dict[str, Interval]:
    """Each :class:`Basin`'s fraction of ``basins`` (end-point classes, :func:`classify`) with
    its Wilson interval."""
    o = np.asarray(basins)
    n = int(o.size)
    return {k.value: wilson(int(np.sum(o == k.value)), n) for k in Basin}


@dataclass(frozen=True)
class SaddleModes(Record):
    """The linearisation of the flow at the saddle θ = 0 (over the active entries).

    `lambda_top`: the top eigenvalue of ``−∇²L(0)``, of multiplicity `multiplicity`;
    `block_weights`: the squared weight of its eigenspace per block; `diagonal_weight`: its
    squared weight on diag W^KQ_32 and diag W^PV_12.  Not in ``to_dict()``: `rates` (every
    eigenvalue of ``−∇²L(0)``, descending) and `top_vectors` ((18d², m), the top eigenspace,
    zero on the inactive entries).
    """

    lambda_top: float
    multiplicity: int
    block_weights: dict[str, float]
    diagonal_weight: float
    rates: FloatArray = hidden()
    top_vectors: FloatArray = hidden()


def saddle_modes(field: Field, rel: float = 1e-9) -> SaddleModes:
    """``−∇²L(0)`` restricted to the active entries, its top rate and eigenspace.

    For gaussian and sparse, ``λ_top = c2`` with the d diagonal modes ``a_k = b_k`` (weights
    ½ on W^KQ_32, ½ on W^PV_12, all on the diagonals); for ones it is a different mode.
    """
    d = field.d
    act = active_mask(d)
    H = field.hessian(torch.zeros(field.n_params, dtype=torch.float64)).detach().cpu().numpy()
    w, V = np.linalg.eigh(-H[np.ix_(act, act)])
    order = np.argsort(w)[::-1]
    w, V = w[order], V[:, order]
    top = float(w[0])
    m = int(np.sum(w >= top - rel * abs(top)))
    vecs = np.zeros((field.n_params, m))
    vecs[act] = V[:, :m]
    labels = block_labels(d)
    weights = {str(bk): float(np.sum(vecs[labels == bk] ** 2) / m) for bk in np.unique(
        labels[act])}
    dm = diagonal_mask(d)
    return SaddleModes(rates=w, lambda_top=top, multiplicity=m, top_vectors=vecs,
                       block_weights={k: v for k, v in weights.items() if v > 1e-12},
                       diagonal_weight=float(np.sum(vecs[dm] ** 2) / m))


def escape_time_prediction(modes: SaddleModes, system: ReducedSystem,
                           theta0: npt.ArrayLike) -> FloatArray:
    """Predicted τ at which ``mean_k a_k b_k`` first reaches ``ab*/2``, per row of ``theta0``.

    The start's projection onto the top eigenspace gives ``s_k0 = a_k b_k`` per coordinate
    (the other modes grow slower or decay); each ``s_k`` then follows the logistic of Lemma 5.2
    with ``Δ = 0`` at rate ``2 λ_top`` to ``p = ab*``.  NaN where the projection has no
    positive ``s_k0`` (no escape along the diagonal mode) or the top eigenspace is not the
    diagonal one (e.g. ones: ``diagonal_weight < 1``).

    # Returns
    (N,) predicted times.
    """
    th = np.array(theta0, dtype=np.float64, ndmin=2)
    if modes.diagonal_weight < 1 - 1e-9:
        return np.full(th.shape[0], np.nan)
    proj = (th @ modes.top_vectors) @ modes.top_vectors.T
    a, b = diagonal_entries(proj)
    s0 = a * b  # (N, d)
    p, rate = system.ab_star, 2.0 * modes.lambda_top
    out = np.full(th.shape[0], np.nan)
    for k in range(th.shape[0]):
        sk = s0[k][s0[k] > 0]
        if sk.size == 0 or np.mean(np.minimum(sk, p)) >= p / 2:
            continue
        d = s0.shape[1]
        lo, hi = 0.0, 1.0 / rate
        while _mean_logistic(sk, d, p, rate, hi) < p / 2 and hi < 1e6 / rate:
            hi *= 2.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if _mean_logistic(sk, d, p, rate, mid) < p / 2 else (lo, mid)
        out[k] = hi
    return out


def _mean_logistic(s0: FloatArray, d: int, p: float, rate: float, tau: float) -> float:
    """``(1/d) Σ_k p s_k0 / (s_k0 + (p − s_k0) e^{−rate τ})`` (coordinates with s_k0 <= 0
    contribute 0)."""
    e = math.exp(-rate * tau)
    return float(np.sum(p * s0 / (s0 + (p - s0) * e)) / d)
