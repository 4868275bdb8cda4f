"""Exact moment tensors for Haar-unitary W (docs/design.md §6), where they are affordable.

Write ``U = V D V*`` with V Haar on U(d) and ``D = diag(λ)`` the eigenvalues of the circular
unitary ensemble in random order, independent of V (Weyl's integration formula).  A slot of a
moment is ``x_{τ,k} = r^{τ−1} Σ_{a,l} V_{ka} λ_a^{τ−1} V̄_{la} x_l`` (its conjugate for a
conjugated slot): one entry of V and one of V̄ sharing the column a.  So

    E[Π_s slot_s] = Σ_β d!/(d−|β|)! · F_d(m_β) · Σ_σ W_β(σ) X_σ(k),

summed over the set partitions β of the slots by equal columns a, where

* ``F_d(m) = E[Π_B λ_B^{m_B}]`` for ``|β|`` labelled CUE eigenvalues with the net exponents
  ``m_B = Σ_{s∈B} ε_s (τ_s − 1)`` (``ε = −1`` conjugated) — by the Vandermonde expansion of
  ``|Δ(λ)|²``, ``F_d(m) = (1/d!) Σ_{σ∈S_d} sgn(σ) sgn(σ + m) [σ + m ∈ S_d]``, nonzero only for
  ``|m_B| < d`` and ``Σ m_B = 0``: the time sums count the solutions of ``m_β(t, i, i') = m``
  for each such m (:func:`mesadyn.field._lattice.lattice_sums`);
* ``W_β(σ) = Σ_{π ∈ S_β} Wg(σ π⁻¹)`` with the Weingarten function of ``S_S`` at dimension d
  (the pseudo-inverse of the Gram matrix ``d^{#cycles(σ τ⁻¹)}``, valid also for d < S);
* ``X_σ(k) = Σ_l E[Π_s x_{l_s}] Π_s δ(R_s, R̄_{σ(s)})``: the rows of V and V̄ (a slot's own
  coordinate k_s or the summed l_s) matched by σ, i.e. products of δ's between the k's and the
  token moments ``E[Π x_k ‖x‖^{2m}]``.

**Reach** (:mod:`mesadyn.field._reach`): noiseless, ``d <= 5``, ``T <= 1000``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

from ..process import Family
from ._lattice import lattice_sums
from ._moments import BYTES_PER_ENTRY, check_exact_T, set_partitions
from ._moments_rotation import C_LAYOUT, G_LAYOUT, ZERO_RTOL, Layout
from ._reach import HAAR_MAX_D as HAAR_MAX_D
from ._reach import HAAR_MAX_T as HAAR_MAX_T
from ._reach import check_haar


# ---- the eigenvalues: CUE moments ---------------------------------------------------------
@cache
def cue_moments(d: int, nb: int) -> dict[tuple[int, ...], float]:
    """``F_d(m)`` for every ``m ∈ (−d, d)^nb`` with a nonzero value (module docstring)."""
    perms = list(itertools.permutations(range(d)))
    sign = {p: _sign(p) for p in perms}
    out: dict[tuple[int, ...], float] = {}
    for m in itertools.product(range(-d + 1, d), repeat=nb):
        if sum(m) != 0:
            continue
        full = m + (0,) * (d - nb)
        total = 0
        for p in perms:
            q = tuple(p[j] + full[j] for j in range(d))
            if sorted(q) == list(range(d)):
                total += sign[p] * sign[q]
        if total:
            out[m] = total / math.factorial(d)
    return out


def _sign(p: tuple[int, ...]) -> int:
    s, seen = 1, [False] * len(p)
    for i in range(len(p)):
        if not seen[i]:
            j, length = i, 0
            while not seen[j]:
                seen[j] = True
                j = p[j]
                length += 1
            s *= -1 if length % 2 == 0 else 1
    return s


# ---- the eigenvectors: Weingarten calculus ------------------------------------------------
def _cycle_counts(comp: np.ndarray) -> np.ndarray:
    """Number of cycles of each permutation in ``comp`` (..., S) (one-line notation)."""
    S = comp.shape[-1]
    ident = np.broadcast_to(np.arange(S), comp.shape)
    low, cur = ident.copy(), ident.copy()
    for _ in range(S):  # every element's orbit minimum, following the permutation S times
        cur = np.take_along_axis(comp, cur, axis=-1)
        low = np.minimum(low, cur)
    return (low == ident).sum(axis=-1)


@cache
def weingarten(S: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """The permutations of ``S_S`` (S!, S) and the matrix ``Wg[σ, τ] = Wg(σ τ⁻¹)`` at dimension
    d: the (pseudo-)inverse of the Gram matrix ``d^{#cycles(σ τ⁻¹)}`` (its zero eigenvalues,
    those of the partitions with more than d rows, are exactly zero and dropped)."""
    P = np.array(list(itertools.permutations(range(S))), dtype=np.int64)
    inv = np.argsort(P, axis=1)
    comp = P[np.arange(len(P))[:, None, None], inv[None, :, :]]  # σ(τ⁻¹(q)), (S!, S!, S)
    gram = float(d) ** _cycle_counts(comp)
    w, V = np.linalg.eigh(gram)
    keep = np.abs(w) > 1e-9 * w.max()
    return P, (V[:, keep] / w[keep]) @ V[:, keep].T


def _young(labels: tuple[int, ...], P: np.ndarray) -> np.ndarray:
    """Indices in ``P`` of the permutations keeping every block of ``labels``."""
    lab = np.asarray(labels)
    return np.flatnonzero((lab[P] == lab[None, :]).all(axis=1))


# ---- the token: the matched rows --------------------------------------------------------
#: The δ's of one permutation: k–k pairs, the k's feeding a token factor, the l–l pairs.
Structure = tuple[tuple[tuple[int, int], ...], tuple[int, ...], int]


class _TokenTensors:
    """``X_σ(k)`` over the k-grid [d]^S, shared by the permutations of equal structure."""

    def __init__(self, family: Family, layout: Layout) -> None:
        self.family, self.L = family, layout
        d, S = family.d, layout.S
        self.grid = np.array(list(itertools.product(range(d), repeat=S)), dtype=np.int64)
        self._cache: dict[Structure, np.ndarray] = {}

    def _norm_moment(self, counts: np.ndarray, m: int) -> np.ndarray:
        """``E[Π_k x_k^{counts_k} ‖x‖^{2m}]`` for each row of ``counts``."""
        if m == 0:
            return self.family.moment(counts)
        total = np.zeros(counts.shape[0])
        for j in range(self.family.d):
            c = counts.copy()
            c[:, j] += 2
            total += self._norm_moment(c, m - 1)
        return total

    def structure(self, sigma: tuple[int, ...]) -> Structure:
        """The δ's of σ: k–k pairs, k–l pairs (which k feeds a token factor), l–l pairs."""
        conj = self.L.conj
        # ports: ("k", s) or ("l", s); V-port of s is k_s if unconjugated, else l_s
        vport = [("l", s) if conj[s] else ("k", s) for s in range(len(sigma))]
        vbar = [("k", s) if conj[s] else ("l", s) for s in range(len(sigma))]
        kk: list[tuple[int, int]] = []
        kl: list[int] = []
        ll = 0
        for s, t in enumerate(sigma):
            a, b = vport[s], vbar[t]
            if a[0] == "k" and b[0] == "k":
                kk.append((min(a[1], b[1]), max(a[1], b[1])))
            elif a[0] == "l" and b[0] == "l":
                ll += 1
            else:
                kl.append(a[1] if a[0] == "k" else b[1])
        return (tuple(sorted(kk)), tuple(sorted(kl)), ll)

    def get(self, key: Structure) -> np.ndarray:
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        kk, kl, ll = key
        g, d = self.grid, self.family.d
        ok = np.ones(g.shape[0], dtype=bool)
        for a, b in kk:
            ok &= g[:, a] == g[:, b]
        counts = np.zeros((g.shape[0], d), dtype=np.int64)
        for a in kl:
            counts[np.arange(g.shape[0]), g[:, a]] += 1
        uniq, inv = np.unique(counts[ok], axis=0, return_inverse=True)
        vals = np.zeros(g.shape[0])
        vals[ok] = self._norm_moment(uniq, int(ll))[inv.reshape(-1)]
        self._cache[key] = vals
        return vals


# ---- the time sums ----------------------------------------------------------------------
def _time_weights(layout: Layout, labels: tuple[int, ...], T: int, d: int,
                  radius: float) -> np.ndarray:
    """``Σ_t (t−1)^{−p} Σ_{(i,i')} r^{Σ(τ−1)} F_d(m_β)`` for every h-pattern: (H,)."""
    L = layout
    h = L.h_patterns()
    eps = [-1 if c else 1 for c in L.conj]
    t = np.arange(2, T, dtype=np.int64)[None, :]
    wt = 1.0 / (t[0] - 1.0) ** L.power
    lo_i = 1 + h[:, [s for s in range(L.S) if L.base[s] == 0]].max(axis=1)
    ip = [s for s in range(L.S) if L.base[s] == 1]
    lo_ip = 1 + h[:, ip].max(axis=1) if ip else np.ones(h.shape[0], dtype=np.int64)
    has_ip = bool(ip)
    lq = 2 * math.log(radius)
    nb = max(labels) + 1
    base_rows = []
    for g in range(nb):
        sl = [s for s in range(L.S) if labels[s] == g]
        a = sum(eps[s] for s in sl if L.base[s] == 0)
        b = sum(eps[s] for s in sl if L.base[s] == 1)
        c = sum(eps[s] for s in sl if L.base[s] in (2, 3))
        k = sum(eps[s] * (L.off[s] - h[:, s]) for s in sl)
        base_rows.append((a, b, c, np.asarray(k, dtype=np.int64)[:, None]))
    total = np.zeros((h.shape[0], t.shape[1]))
    for m, F in cue_moments(d, nb).items():
        rows = [(a, b, c, k - mb) for (a, b, c, k), mb in zip(base_rows, m, strict=True)]
        total += F * lattice_sums(t, rows, lo_i[:, None], lo_ip[:, None],
                                  t if has_ip else np.ones((1, 1), dtype=np.int64),
                                  lq, lq if has_ip else 0.0)
    if radius != 1:
        total *= np.exp((2 * t + sum(L.off) - h.sum(1)[:, None]) * math.log(radius))
    return total @ wt


def _tensor(layout: Layout, family: Family, T: int, radius: float
            ) -> tuple[np.ndarray, np.ndarray]:
    """Slot indices ``α_s = h_s d + k_s`` (N, S) and values (N,) of one tensor's nonzeros."""
    d, S = family.d, layout.S
    P, Wg = weingarten(S, d)
    tok = _TokenTensors(family, layout)
    groups: dict[Structure, list[int]] = {}
    for n, p in enumerate(P):
        groups.setdefault(tok.structure(tuple(int(v) for v in p)), []).append(n)
    keys = list(groups)
    X = np.stack([tok.get(k) for k in keys])  # (structures, d^S)
    h = layout.h_patterns()
    acc = np.zeros((h.shape[0], tok.grid.shape[0]))
    scl = np.zeros_like(acc)
    for labels in set_partitions(S):
        nb = max(labels) + 1
        if nb > d:
            continue
        tw = _time_weights(layout, labels, T, d, radius) * (math.perm(d, nb))
        if not np.any(tw):
            continue
        wb = Wg[:, _young(labels, P)].sum(axis=1)  # W_β(σ) for every σ
        coef = np.array([wb[groups[k]].sum() for k in keys])
        Y = coef @ X
        acc += tw[:, None] * Y[None, :]
        scl += np.abs(tw)[:, None] * (np.abs(coef) @ np.abs(X))[None, :]
    keep = np.abs(acc) > ZERO_RTOL * 1e3 * scl  # Wg is known to about 1e-14
    hi, ki = np.nonzero(keep)
    return h[hi] * d + tok.grid[ki], acc[hi, ki]


@dataclass
class HaarPlan:
    """What an exact Haar build allocates (``nnz`` bounded by the dense tensor) and its
    builder."""

    nnz: int
    bytes: int
    build: Callable[[], dict[str, np.ndarray]]


def plan_haar(family: Family, T: int, *, radius: float = 1.0, noise: float = 0.0) -> HaarPlan:
    """The plan of the exact Haar field (its reach checked first, :func:`check_haar`).

    Raises:
        MesadynError: beyond the reach, T or the radius out of range, no exact moments.
    """
    check_haar(family.d, T, noise)
    check_exact_T(T, radius)
    if not family.exact_moments:
        from ._moments import admissible

        admissible(family, (0,))
    d, n = family.d, 2 * family.d
    nnz = n**6
    est = nnz * (BYTES_PER_ENTRY + 40) + 8 * d * n**3 + 3 * 8 * n**4 + 720 * 720 * 16

    def build() -> dict[str, np.ndarray]:
        C = np.zeros((d, n, n, n))
        idx, val = _tensor(C_LAYOUT, family, T, radius)
        np.add.at(C, (idx[:, 0], idx[:, 1], idx[:, 2], idx[:, 3]), val)
        idx, val = _tensor(G_LAYOUT, family, T, radius)
        return {"C": C, "g_q": (idx[:, 0] * n + idx[:, 3]).astype(np.int32),
                "g_a1": (idx[:, 1] * n + idx[:, 2]).astype(np.int32),
                "g_a2": (idx[:, 4] * n + idx[:, 5]).astype(np.int32),
                "g_val": val.astype(np.float64)}

    return HaarPlan(nnz, int(est), build)
