"""Exact moment tensors for real block rotations and for noisy AR (docs/design.md §6).

The tensors are those of :mod:`mesadyn.field._moments` (``G = Σ_t E[ū^t u^t]``,
``C = Σ_t E[x̄_{t+1,j} u^t]``), for the processes

* **real rotations** ``W = r·blockdiag(R(φ_1), …, R(φ_{d/2}))``: in block b the complex
  coordinate ``z_b = x_{2b} + i x_{2b+1}`` turns by ``e^{iφ_b}`` and ``z̄_b`` by ``e^{−iφ_b}``,
  and ``(x_{2b}, x_{2b+1}) = U1 (z_b, z̄_b)`` with ``U1 = ½[[1, 1], [−i, i]]``.  Every slot is
  therefore a sum over its phase sign ``ε = ±1`` (coefficient ``U1[ρ, ε]`` for the slot's
  coordinate ``2b + ρ``), a term survives the average over φ when in every block
  ``Σ_s ε_s (τ_s − 1) = 0`` (the counting of :mod:`._lattice`, coefficients up to ±2), and its
  token moment is ``E[Π_b z_b^{p_b} z̄_b^{q_b}]`` (expanded into the family's real moments);
* **noisy AR** ``x_{τ+1} = W x_τ + ε_τ`` (W diagonal or real rotations): a slot is the token
  part or a noise part; Gaussian noise pairs an unconjugated and a conjugated noise slot of
  the same basis coordinate (phase signs opposite), whose phases cancel in the noise time, so
  the pair counts like two token slots and carries the covariance weight of
  :mod:`._noise_sums` and ``s²`` (diagonal) or ``2 s²`` (``E|ε_{2b} ± iε_{2b+1}|²``).

For diagonal W every slot's phase sign is fixed by its conjugation (``ε = −1`` conjugated),
``U1 = [[1]]`` and the token moment is ``E[Π_k x_k^{n_k}]``: without noise this is exactly the
count of :mod:`._moments` (which the paper's field keeps using).  The tensors come out in the
same layout as :func:`mesadyn.field._moments.build`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ..process import Family
from ._lattice import Row, lattice_sums
from ._moments import BYTES_PER_ENTRY, check_exact_T, set_partitions
from ._noise_sums import job_sums

#: ``(x_{2b}, x_{2b+1}) = U1 (z_b, z̄_b)``; rows ρ = 0, 1, columns ε = +1, −1.
U1 = np.array([[0.5, 0.5], [-0.5j, 0.5j]])
#: A tensor entry is dropped when below this fraction of the sum of its terms' magnitudes
#: (what an exactly cancelling sum leaves after rounding).
ZERO_RTOL = 1e-13


@dataclass(frozen=True)
class Layout:
    """The slots of one tensor: time code (``_noise_sums.BASE_*``), conjugation, the offset
    of the exponent ``n_s = base + off − h_s``, the slots carrying an h, and the weight
    ``(t−1)^{−power}``."""

    base: tuple[int, ...]
    conj: tuple[int, ...]
    off: tuple[int, ...]
    hslots: tuple[int, ...]
    power: int

    @property
    def S(self) -> int:
        return len(self.base)

    def h_patterns(self) -> np.ndarray:
        """(H, S) h-patterns (zeros on the slots without an h)."""
        n = len(self.hslots)
        bits = (np.arange(2**n)[:, None] >> np.arange(n - 1, -1, -1)[None, :]) & 1
        h = np.zeros((2**n, self.S), dtype=np.int64)
        h[:, list(self.hslots)] = bits
        return h


#: G: ᾱ(i), β(i), γ̄(t), α'(i'), β̄'(i'), γ'(t).   C: x̄_{t+1}, α(i), β̄(i), γ(t).
G_LAYOUT = Layout((0, 0, 2, 1, 1, 2), (1, 0, 1, 0, 1, 0), (-1,) * 6, (0, 1, 2, 3, 4, 5), 2)
C_LAYOUT = Layout((3, 0, 0, 2), (1, 0, 1, 0), (0, -1, -1, -1), (1, 2, 3), 1)


@dataclass(frozen=True)
class Process:
    """What the counting needs of the process: ``block`` (1 diagonal, 2 real rotations),
    the radius and the noise scale."""

    block: int
    radius: float
    noise: float

    @property
    def pair_variance(self) -> float:
        """``E|η|²`` of one basis coordinate's noise: s² (diagonal), 2 s² (``z = x + iy``)."""
        return self.block * self.noise**2


def _pairings(slots: list[int], conj: tuple[int, ...], eps: tuple[int, ...]
              ) -> list[tuple[tuple[int, int], ...]]:
    """Every set of disjoint noise pairs among ``slots``: one conjugated and one unconjugated
    slot with opposite phase signs (the empty set first)."""
    out: list[tuple[tuple[int, int], ...]] = [()]

    def rec(rem: list[int], cur: tuple[tuple[int, int], ...]) -> None:
        for pos, a in enumerate(rem):
            for b in rem[pos + 1:]:
                if conj[a] != conj[b] and eps[a] == -eps[b]:
                    new = cur + ((a, b),)
                    out.append(new)
                    rec([x for x in rem[pos + 1:] if x != b], new)

    rec(slots, ())
    return out


def _z_poly(p: int, q: int) -> np.ndarray:
    """Coefficients ``c_e`` of ``x^e y^{p+q−e}`` in ``(x + iy)^p (x − iy)^q``."""
    c = np.zeros(p + q + 1, dtype=complex)
    for a in range(p + 1):
        for a2 in range(q + 1):
            c[a + a2] += math.comb(p, a) * math.comb(q, a2) * (1j) ** (p - a) * (-1j) ** (q - a2)
    return c


class _Moments:
    """Token moments per group structure, over all assignments of groups to blocks (cached)."""

    def __init__(self, family: Family, process: Process) -> None:
        self.family = family
        self.block = process.block
        self.m = family.d // process.block
        self._assign: dict[int, np.ndarray] = {}
        self._cache: dict[tuple[object, ...], tuple[np.ndarray, np.ndarray]] = {}

    def assignments(self, nb: int) -> np.ndarray:
        if nb not in self._assign:
            self._assign[nb] = np.array(list(itertools.permutations(range(self.m), nb)),
                                        dtype=np.int64).reshape(-1, nb)
        return self._assign[nb]

    def get(self, nb: int, pq: tuple[tuple[int, int], ...]) -> tuple[np.ndarray, np.ndarray]:
        """``(μ, scale)`` over assignments for per-group token counts ``(p_g, q_g)`` (phase
        signs + and −; diagonal W: ``p_g + q_g`` powers of ``x_k``)."""
        key = (nb, pq)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._compute(nb, pq)
        return hit

    def _compute(self, nb: int, pq: tuple[tuple[int, int], ...]
                 ) -> tuple[np.ndarray, np.ndarray]:
        assign = self.assignments(nb)
        M, d = assign.shape[0], self.family.d
        if self.block == 1:
            counts = np.zeros((M, d), dtype=np.int64)
            for g, (p, q) in enumerate(pq):
                counts[np.arange(M), assign[:, g]] += p + q
            mom = self.family.moment(counts)
            return mom.astype(complex), np.abs(mom)
        polys = [_z_poly(p, q) for p, q in pq]
        combos = list(itertools.product(*[range(len(c)) for c in polys]))
        coef = np.array([np.prod([polys[g][e] for g, e in enumerate(es)]) for es in combos])
        counts = np.zeros((len(combos), M, d), dtype=np.int64)
        rows = np.arange(M)
        for ci, es in enumerate(combos):
            for g, e in enumerate(es):
                n = pq[g][0] + pq[g][1]
                counts[ci, rows, 2 * assign[:, g]] += e
                counts[ci, rows, 2 * assign[:, g] + 1] += n - e
        mom = self.family.moment(counts.reshape(-1, d)).reshape(len(combos), M)
        return coef @ mom, np.abs(coef) @ np.abs(mom)


#: A weight's key: the partition's labels, the canonical phase signs and the noise pairs.
WKey = tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, int], ...]]


@dataclass
class _Pattern:
    eps_index: int
    npairs: int
    wkey: WKey
    mu: np.ndarray
    scale: np.ndarray


@dataclass
class _Part:
    labels: tuple[int, ...]
    assign: np.ndarray
    patterns: list[_Pattern] = field(default_factory=list)


class TensorCount:
    """The counted tensor (G or C) of one layout and process: patterns, weights, entries."""

    def __init__(self, layout: Layout, family: Family, T: int, process: Process,
                 moments: _Moments) -> None:
        self.L, self.fam, self.T, self.proc = layout, family, T, process
        self.h = layout.h_patterns()
        S = layout.S
        self.eps_list = ([tuple((-1) ** c for c in layout.conj)] if process.block == 1
                         else list(itertools.product((1, -1), repeat=S)))
        self.eps_index = {e: k for k, e in enumerate(self.eps_list)}
        self.parts: list[_Part] = []
        self.wkeys: dict[WKey, int] = {}
        m = family.d // process.block
        for labels in set_partitions(S):
            nb = max(labels) + 1
            if nb > m:
                continue
            part = _Part(labels, moments.assignments(nb))
            groups = [[s for s in range(S) if labels[s] == g] for g in range(nb)]
            for eps in self.eps_list:
                per_group = [_pairings(g, layout.conj, eps) if process.noise > 0 else [()]
                             for g in groups]
                for combo in itertools.product(*per_group):
                    P = tuple(p for ps in combo for p in ps)
                    paired = {x for p in P for x in p}
                    pq = tuple((sum(1 for s in g if s not in paired and eps[s] > 0),
                                sum(1 for s in g if s not in paired and eps[s] < 0))
                               for g in groups)
                    mu, scale = moments.get(nb, pq)
                    if not np.any(np.abs(mu) > ZERO_RTOL * scale):
                        continue
                    canon = list(eps)
                    for g in groups:  # the weight is even under flipping a block's signs
                        if canon[g[0]] < 0:
                            for s in g:
                                canon[s] = -canon[s]
                    wkey: WKey = (labels, tuple(canon), P)
                    self.wkeys.setdefault(wkey, len(self.wkeys))
                    part.patterns.append(_Pattern(self.eps_index[eps], len(P), wkey, mu, scale))
            if part.patterns:
                self.parts.append(part)
        self.weights: np.ndarray | None = None

    # ---- weights ---------------------------------------------------------------------
    def _rows(self, labels: tuple[int, ...], eps: tuple[int, ...]) -> list[Row]:
        L, h = self.L, self.h
        rows: list[Row] = []
        for g in range(max(labels) + 1):
            sl = [s for s in range(L.S) if labels[s] == g]
            a = sum(eps[s] for s in sl if L.base[s] == 0)
            b = sum(eps[s] for s in sl if L.base[s] == 1)
            c = sum(eps[s] for s in sl if L.base[s] in (2, 3))
            k = sum(eps[s] * (L.off[s] - h[:, s]) for s in sl)
            rows.append((a, b, c, np.asarray(k, dtype=np.int64)[:, None]))
        return rows

    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        L, h = self.L, self.h
        lo_i = 1 + h[:, [s for s in range(L.S) if L.base[s] == 0]].max(axis=1)
        ip = [s for s in range(L.S) if L.base[s] == 1]
        lo_ip = 1 + h[:, ip].max(axis=1) if ip else np.ones(h.shape[0], dtype=np.int64)
        return lo_i, lo_ip

    def compute_weights(self) -> np.ndarray:
        """``(n_wkeys, H)``: token-only patterns in closed form, noisy ones by the kernel."""
        L, T, r = self.L, self.T, self.proc.radius
        H = self.h.shape[0]
        W = np.zeros((len(self.wkeys), H))
        t = np.arange(2, T, dtype=np.int64)[None, :]
        wt = 1.0 / (t[0] - 1.0) ** L.power
        lo_i, lo_ip = self._bounds()
        has_ip = 1 in L.base
        lq = 2 * math.log(r)
        fac = np.exp((2 * t + sum(L.off) - self.h.sum(1)[:, None]) * math.log(r)) \
            if r != 1 else None
        jobs: list[tuple[int, WKey]] = []
        for wkey, row in self.wkeys.items():
            labels, eps, P = wkey
            if P:
                jobs.append((row, wkey))
                continue
            rows = self._rows(labels, eps)
            sums = lattice_sums(t, rows, lo_i[:, None], lo_ip[:, None],
                                t if has_ip else np.ones((1, 1), dtype=np.int64),
                                lq, lq if has_ip else 0.0)
            W[row] = (sums if fac is None else sums * fac) @ wt
        if jobs:
            W[[j for j, _ in jobs]] = self._noise_weights([k for _, k in jobs], lo_i, lo_ip)
        self.weights = W
        return W

    def _noise_weights(self, keys: list[WKey], lo_i: np.ndarray,
                       lo_ip: np.ndarray) -> np.ndarray:
        L, H, S = self.L, self.h.shape[0], self.L.S
        J = len(keys) * H
        rows = np.zeros((J, 6, 4), dtype=np.int64)
        nrows = np.zeros(J, dtype=np.int64)
        base = np.tile(np.asarray(L.base, dtype=np.int64), (J, 1))
        hh = np.tile(self.h, (len(keys), 1))
        role = np.full((J, S), -1, dtype=np.int64)
        pairs = np.zeros((J, 3, 2), dtype=np.int64)
        npairs = np.zeros(J, dtype=np.int64)
        for n, (labels, eps, P) in enumerate(keys):
            sl = slice(n * H, (n + 1) * H)
            rs = self._rows(labels, eps)
            nrows[sl] = len(rs)
            for q, (a, b, c, k) in enumerate(rs):
                rows[sl, q, 0], rows[sl, q, 1], rows[sl, q, 2] = a, b, c
                rows[sl, q, 3] = k[:, 0]
            for p, (sa, sb) in enumerate(P):
                pairs[sl, p] = (sa, sb)
                role[sl, sa] = role[sl, sb] = p
            npairs[sl] = len(P)
        out = job_sums(rows, nrows, base, hh, role, pairs, npairs, np.tile(lo_i, len(keys)),
                       np.tile(lo_ip, len(keys)), has_ip=1 in L.base, T=self.T,
                       radius=self.proc.radius, power=L.power)
        return out.reshape(len(keys), H)

    # ---- entries ---------------------------------------------------------------------
    def n_candidates(self) -> int:
        """An upper bound on the entries (every ρ and h of every admissible assignment)."""
        per = (2**self.L.S if self.proc.block == 2 else 1) * self.h.shape[0]
        return sum(p.assign.shape[0] * per for p in self.parts)

    def entries(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Per partition: slot indices ``α_s = h_s d + k_s`` (N, S) and real values (N,)."""
        W = self.compute_weights() if self.weights is None else self.weights
        S, d = self.L.S, self.fam.d
        H = self.h.shape[0]
        var = self.proc.pair_variance
        real = self.proc.block == 2
        for part in self.parts:
            M = part.assign.shape[0]
            n_eps = len(self.eps_list)
            acc = np.zeros((M, n_eps, H), dtype=complex)
            scl = np.zeros((M, n_eps, H))
            for pat in part.patterns:
                w = W[self.wkeys[pat.wkey]] * var**pat.npairs
                acc[:, pat.eps_index, :] += pat.mu[:, None] * w[None, :]
                scl[:, pat.eps_index, :] += pat.scale[:, None] * w[None, :]
            k_slot = part.assign[:, list(part.labels)]  # (M, S) blocks of the slots
            if real:  # ε → ρ, slot by slot
                v = acc.reshape((M,) + (2,) * S + (H,))
                for s in range(S):
                    v = np.moveaxis(np.tensordot(U1, v, axes=([1], [1 + s])), 0, 1 + s)
                acc = v.reshape(M, 2**S, H)
                scl = scl.sum(axis=1, keepdims=True) * 0.5**S * np.ones((1, 2**S, 1))
                rho = ((np.arange(2**S)[:, None] >> np.arange(S - 1, -1, -1)[None, :]) & 1)
                k = 2 * k_slot[:, None, :] + rho[None, :, :]  # (M, 2^S, S)
            else:
                k = k_slot[:, None, :]
            vals = acc.real
            keep = (np.abs(vals) > ZERO_RTOL * scl) & (scl > 0)
            m_i, r_i, h_i = np.nonzero(keep)
            if m_i.size == 0:
                continue
            idx = self.h[h_i] * d + k[m_i, r_i]
            yield idx, vals[m_i, r_i, h_i]


@dataclass
class RotationPlan:
    """What a build will allocate, known before allocating it (as :class:`._moments.Plan`)."""

    d: int
    T: int
    G: TensorCount
    C: TensorCount
    nnz: int
    bytes: int


def plan_rotation(family: Family, T: int, *, block: int, radius: float = 1.0,
                  noise: float = 0.0) -> RotationPlan:
    """The patterns (with their token moments) and a memory estimate, before the weights.

    Raises:
        MesadynError: T or the radius out of the exact field's range, or a family without
            exact moments.
    """
    check_exact_T(T, radius)
    if not family.exact_moments:
        from ._moments import admissible

        admissible(family, (0,))  # raises the one-line refusal
    proc = Process(block, radius, noise)
    moments = _Moments(family, proc)
    G = TensorCount(G_LAYOUT, family, T, proc, moments)
    C = TensorCount(C_LAYOUT, family, T, proc, moments)
    d, n = family.d, 2 * family.d
    nnz = min(G.n_candidates(), n**6)
    scratch = max((p.assign.shape[0] * (2**6 if block == 2 else 1) * 64 * (16 * 3 + 6 * 8)
                   for p in G.parts), default=0)
    est = nnz * (BYTES_PER_ENTRY + 20) + scratch + 8 * d * n**3 + 3 * 8 * n**4 + 64 * 64 * T * 8
    return RotationPlan(d, T, G, C, nnz, int(est))


def build_rotation(family: Family, pl: RotationPlan) -> dict[str, np.ndarray]:
    """The tensors in :func:`mesadyn.field._moments.build`'s layout: ``C`` dense
    (d, n, n, n) and G's nonzeros as COO ``g_q, g_a1, g_a2, g_val``."""
    d, n = family.d, 2 * family.d
    C = np.zeros((d, n, n, n))
    for idx, val in pl.C.entries():
        np.add.at(C, (idx[:, 0], idx[:, 1], idx[:, 2], idx[:, 3]), val)
    qs, a1s, a2s, vals = [], [], [], []
    for idx, val in pl.G.entries():
        qs.append((idx[:, 0] * n + idx[:, 3]).astype(np.int32))
        a1s.append((idx[:, 1] * n + idx[:, 2]).astype(np.int32))
        a2s.append((idx[:, 4] * n + idx[:, 5]).astype(np.int32))
        vals.append(val)

    def cat(xs: list[np.ndarray], dt: type) -> np.ndarray:
        return np.concatenate(xs) if xs else np.zeros(0, dtype=dt)

    return {"C": C, "g_q": cat(qs, np.int32), "g_a1": cat(a1s, np.int32),
            "g_a2": cat(a2s, np.int32), "g_val": cat(vals, np.float64)}


def noise_constant(T: int, radius: float, noise: float, d: int) -> float:
    """``½ Σ_{t=2}^{T−1} E‖noise part of x_{t+1}‖²`` = ``½ d s² Σ_t Σ_{j=1}^{t} r^{2(t−j)}``
    for any unitary W (the token part is the constant of the noiseless field)."""
    if noise == 0:
        return 0.0
    q = radius * radius
    total = math.fsum(float(t) if q == 1 else -math.expm1(t * math.log(q)) / -math.expm1(
        math.log(q)) for t in range(2, T))
    return 0.5 * d * noise * noise * total
