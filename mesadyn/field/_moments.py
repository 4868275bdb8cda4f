"""Exact moment tensors of Eq. 2 by counting (the structure of DESIGN.md §3).

Slots ``α ∈ [2d]`` stand for ``(h, k)`` with ``α = h·d + k``: ``e_{i,α} = x_{i−h,k} =
λ_k^{i−1−h} x_k`` when ``i ≥ 1 + h`` and 0 otherwise (``x_0 = 0``).  With ``P`` (d×2d) and
``A`` (2d×2d) from :func:`mesadyn.model.P_and_A`,

    ŷ_t = P v_t,   v_{t,α} = Σ_{βγ} A_{βγ} u^t_{αβγ},
    u^t_{αβγ} = (1/(t−1)) Σ_{i≤t} e_{iα} ē_{iβ} e_{tγ},
    L = ½ Σ G_{αβγ,α'β'γ'} Q_{αα'} A_{βγ} A_{β'γ'} − Σ C_{j,αβγ} P_{jα} A_{βγ} + ½(T−2) E‖x_1‖²,

with ``Q = PᵀP``, ``G = Σ_{t=2}^{T−1} E[ū^t u^t]`` and ``C = Σ_{t=2}^{T−1} E[x̄_{t+1,j} u^t]``.
Since ``E[λ_k^n] = [n = 0]`` independently over ``k``, an entry is ``w(π, h) · E[Π x_{k_s}]``
where ``π`` is the partition of the slots into equal coordinates and ``w(π, h)`` counts the
times ``(t, i, i')`` at which every block's net λ-exponent vanishes, each with weight
``(t−1)^{−2}`` (G) or ``(t−1)^{−1}`` (C).  Each block gives one linear equation in ``(i, i')``
with coefficients in {−1, 0, 1}; its solutions in the box are counted in O(1) per t.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from ..errors import MesadynError
from ..process import Family

#: Per slot: (coefficient of i, of i', of t, sign of the constant 1 + h) of its λ-exponent.
#: G slots: ᾱ, β, γ̄ (from ū^t) then α', β̄', γ' (from u^t).
G_SLOTS = ((-1, 0, 0, 1), (1, 0, 0, -1), (0, 0, -1, 1),
           (0, 1, 0, -1), (0, -1, 0, 1), (0, 0, 1, -1))
#: C slots: x̄_{t+1,j} (exponent −t, no h), α, β̄, γ.
C_SLOTS = ((0, 0, -1, 0), (1, 0, 0, -1), (-1, 0, 0, 1), (0, 0, 1, -1))


@cache
def set_partitions(n: int) -> tuple[tuple[int, ...], ...]:
    """All set partitions of ``n`` slots as restricted-growth label tuples (Bell(n) of them)."""
    out: list[tuple[int, ...]] = []

    def rec(prefix: tuple[int, ...], nb: int) -> None:
        if len(prefix) == n:
            out.append(prefix)
            return
        for b in range(nb + 1):
            rec(prefix + (b,), max(nb, b + 1))

    rec((), 0)
    return tuple(out)


def _count(t: np.ndarray, rows: list[tuple[int, int, int, np.ndarray]], lo_i: np.ndarray,
           lo_ip: np.ndarray, hi_ip: np.ndarray) -> np.ndarray:
    """Number of integers ``(i, i')`` in ``[lo_i, t] × [lo_ip, hi_ip]`` solving every row.

    A row ``(a, b, c, k)`` means ``a·i + b·i' + c·t + k = 0`` (``k`` varies with the h-pattern,
    shape (H, 1)); ``t`` has shape (1, nt).  Returns counts of shape (H, nt).
    """
    H = lo_i.shape[0]
    shape = (H, t.shape[1])
    ok = np.ones(shape, dtype=bool)
    live: list[tuple[int, int, np.ndarray]] = []
    for a, b, c, k in rows:
        r = -(c * t + k)
        if a == 0 and b == 0:
            ok &= r == 0
        else:
            live.append((a, b, r))
    hi_i = np.broadcast_to(t, shape)
    n_i = np.clip(hi_i - lo_i + 1, 0, None)
    n_ip = np.clip(hi_ip - lo_ip + 1, 0, None)
    if not live:
        return np.where(ok, n_i * n_ip, 0)
    a1, b1, r1 = live[0]
    other = None
    for a, b, r in live[1:]:
        if a * b1 - b * a1 == 0:  # proportional: (a, b) = s (a1, b1), s = ±1
            s = a // a1 if a1 != 0 else b // b1
            ok &= r == s * r1
        elif other is None:
            other = (a, b, r)
    if other is not None:  # rank 2: a unique solution (Cramer), integral or not
        a2, b2, r2 = other
        det = a1 * b2 - b1 * a2
        ni, nip = r1 * b2 - b1 * r2, a1 * r2 - a2 * r1
        ok &= (ni % abs(det) == 0) & (nip % abs(det) == 0)
        i, ip = ni // det, nip // det
        for a, b, r in live:
            ok &= a * i + b * ip == r
        ok &= (i >= lo_i) & (i <= hi_i) & (ip >= lo_ip) & (ip <= hi_ip)
        return ok.astype(np.int64)
    if b1 == 0:  # i = r1 / a1
        i = r1 * a1
        return np.where(ok & (i >= lo_i) & (i <= hi_i), n_ip, 0)
    if a1 == 0:  # i' = r1 / b1
        ip = r1 * b1
        return np.where(ok & (ip >= lo_ip) & (ip <= hi_ip), n_i, 0)
    # a1 i + b1 i' = r1  ⇒  i' = s i + c with s = −a1 b1, c = r1 b1 (a1, b1 = ±1)
    s, c = -a1 * b1, r1 * b1
    if s == 1:
        lo, hi = np.maximum(lo_i, lo_ip - c), np.minimum(hi_i, hi_ip - c)
    else:
        lo, hi = np.maximum(lo_i, c - hi_ip), np.minimum(hi_i, c - lo_ip)
    return np.where(ok, np.clip(hi - lo + 1, 0, None), 0)


def _h_patterns(n: int) -> np.ndarray:
    """All h ∈ {0,1}^n, row r holding the bits of r (slot 0 the most significant)."""
    r = np.arange(2**n)
    return (r[:, None] >> np.arange(n - 1, -1, -1)[None, :]) & 1


def weights(T: int, which: str, partitions: list[tuple[int, ...]] | None = None) -> np.ndarray:
    """``w(π, h)`` for every partition (rows, in :func:`set_partitions` order unless given)
    and h-pattern (columns, :func:`_h_patterns` order) of the G (``which="G"``, 6 slots,
    weight ``(t−1)^{−2}``) or C (``"C"``, 4 slots, ``(t−1)^{−1}``) tensor."""
    slots = G_SLOTS if which == "G" else C_SLOTS
    S = len(slots)
    parts = list(set_partitions(S)) if partitions is None else partitions
    h = _h_patterns(S)
    t = np.arange(2, T, dtype=np.int64)[None, :]
    if which == "G":
        lo_i = 1 + np.maximum(h[:, 0], h[:, 1])[:, None]
        lo_ip = 1 + np.maximum(h[:, 3], h[:, 4])[:, None]
        hi_ip = t
        wt = 1.0 / (t[0] - 1.0) ** 2
    else:
        lo_i = 1 + np.maximum(h[:, 1], h[:, 2])[:, None]
        lo_ip = hi_ip = np.ones((1, 1), dtype=np.int64)
        wt = 1.0 / (t[0] - 1.0)
        h = h.copy()
        h[:, 0] = 0  # the target slot has no h (its constant is 0 anyway)
    spec = np.asarray(slots)
    out = np.zeros((len(parts), len(h)))
    for p, labels in enumerate(parts):
        lab = np.asarray(labels)
        rows = []
        for blk in range(lab.max() + 1):
            sel = lab == blk
            a, b, c = (int(v) for v in spec[sel, :3].sum(0))
            k = spec[sel, 3][None, :] * (1 + h[:, sel])
            rows.append((a, b, c, k.sum(1)[:, None]))
        counts = _count(t, rows, lo_i, lo_ip, hi_ip)
        out[p] = counts @ wt
    return out


def brute_weight(T: int, which: str, labels: tuple[int, ...], hbits: tuple[int, ...]) -> float:
    """``w(π, h)`` by enumerating every ``(t, i, i')`` (the slow reference for tests)."""
    total = 0.0
    for t in range(2, T):
        for i in range(1, t + 1):
            for ip in range(1, t + 1) if which == "G" else (1,):
                if which == "G":
                    if i < 1 + max(hbits[0], hbits[1]) or ip < 1 + max(hbits[3], hbits[4]):
                        continue
                    exps = (-(i - 1 - hbits[0]), i - 1 - hbits[1], -(t - 1 - hbits[2]),
                            ip - 1 - hbits[3], -(ip - 1 - hbits[4]), t - 1 - hbits[5])
                else:
                    if i < 1 + max(hbits[1], hbits[2]):
                        continue
                    exps = (-t, i - 1 - hbits[1], -(i - 1 - hbits[2]), t - 1 - hbits[3])
                net: dict[int, int] = {}
                for lab, e in zip(labels, exps, strict=True):
                    net[lab] = net.get(lab, 0) + e
                if all(v == 0 for v in net.values()):
                    total += (t - 1.0) ** (-2 if which == "G" else -1)
    return total


# ---- which partitions can carry a nonzero moment ------------------------------------
def admissible(family: Family, labels: tuple[int, ...]) -> bool:
    """Whether ``E[Π x_{k_s}]`` can be nonzero for coordinates partitioned as ``labels``
    (:meth:`Family.admits`); a family without exact moments is refused with a hint."""
    if not family.exact_moments:
        raise MesadynError(
            f"family {family.name!r} (kind {family.kind!r}) has no exact moments; "
            "use the Monte-Carlo field instead (--field mc)"
        )
    return family.admits(labels)


def n_assignments(d: int, nb: int) -> int:
    """Injective maps of ``nb`` blocks to ``d`` coordinates: d!/(d−nb)!."""
    return math.perm(d, nb) if nb <= d else 0


@dataclass
class Plan:
    """What a build will allocate, known before allocating it."""

    d: int
    T: int
    parts_G: list[tuple[int, ...]]
    parts_C: list[tuple[int, ...]]
    wG: np.ndarray
    wC: np.ndarray
    nnz: int
    bytes: int


#: Bytes per stored G entry once loaded: COO (3 int32 + float64) on disk, int64 torch
#: indices and values, two scipy CSR copies (int32 index + float64 value each).
BYTES_PER_ENTRY = 20 + 32 + 2 * 12


def plan(family: Family, T: int) -> Plan:
    """The partitions, weights, an upper bound on the stored entries (``nnz``) and a memory
    estimate in bytes (the peak of a build plus the loaded field), before allocating."""
    d = family.d
    parts_G = [p for p in set_partitions(6) if admissible(family, p)]
    parts_C = [p for p in set_partitions(4) if admissible(family, p)]
    wG = weights(T, "G", parts_G)
    wC = weights(T, "C", parts_C)
    per = [n_assignments(d, max(p) + 1) * int((wG[r] != 0).sum()) for r, p in enumerate(parts_G)]
    nnz = sum(per)
    n = 2 * d
    # per-partition scratch: the (M, S) coordinates, counts (M, d), the (N, 6) int64 slots
    scratch = max((n_assignments(d, max(p) + 1) * (8 * 6 + 8 * d) + q * (6 * 8 + 8 + 20)
                   for p, q in zip(parts_G, per, strict=True)), default=0)
    # + the (h-pattern × t) integer scratch of :func:`weights` (already spent by now)
    est = (nnz * (BYTES_PER_ENTRY + 20) + scratch + 8 * d * n**3 + 3 * 8 * n**4
           + 12 * 8 * 64 * T)
    return Plan(d, T, parts_G, parts_C, wG, wC, nnz, int(est))


def _entries(family: Family, labels: tuple[int, ...], w: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray] | None:
    """Slot indices (N, S) and values (N,) of one partition's nonzero entries."""
    d = family.d
    S = len(labels)
    nb = max(labels) + 1
    if nb > d:
        return None
    hsel = np.flatnonzero(w)
    if hsel.size == 0:
        return None
    assign = np.array(list(itertools.permutations(range(d), nb)), dtype=np.int64)
    k = assign[:, list(labels)]  # (M, S)
    counts = np.zeros((k.shape[0], d), dtype=np.int64)
    for s in range(S):
        np.add.at(counts, (np.arange(k.shape[0]), k[:, s]), 1)
    mom = family.moment(counts)
    keep = mom != 0
    k, mom = k[keep], mom[keep]
    hb = _h_patterns(S)[hsel]  # (Hn, S)
    idx = (hb[None, :, :] * d + k[:, None, :]).reshape(-1, S)
    val = (mom[:, None] * w[hsel][None, :]).reshape(-1)
    return idx, val


def build(family: Family, pl: Plan) -> dict[str, np.ndarray]:
    """The tensors: ``C`` dense (d, n, n, n), ``n = 2d``, and the nonzeros of G as COO
    (``g_q, g_a1, g_a2, g_val``) indexed ``[α n + α', β n + γ, β' n + γ']``."""
    d = family.d
    n = 2 * d
    C = np.zeros((d, n, n, n))
    for r, labels in enumerate(pl.parts_C):
        got = _entries(family, labels, pl.wC[r])
        if got is None:
            continue
        idx, val = got
        keep = idx[:, 0] < d  # the target slot carries no h: keep its h = 0 copy only
        np.add.at(C, (idx[keep, 0], idx[keep, 1], idx[keep, 2], idx[keep, 3]), val[keep])
    qs, a1s, a2s, vals = [], [], [], []
    for r, labels in enumerate(pl.parts_G):
        got = _entries(family, labels, pl.wG[r])
        if got is None:
            continue
        idx, val = got
        qs.append((idx[:, 0] * n + idx[:, 3]).astype(np.int32))
        a1s.append((idx[:, 1] * n + idx[:, 2]).astype(np.int32))
        a2s.append((idx[:, 4] * n + idx[:, 5]).astype(np.int32))
        vals.append(val)
        del idx
    # distinct (partition, coordinates, h) give distinct entries, so there are no duplicates
    def cat(xs: list[np.ndarray], dt: type) -> np.ndarray:
        return np.concatenate(xs) if xs else np.zeros(0, dtype=dt)

    return {"C": C, "g_q": cat(qs, np.int32), "g_a1": cat(a1s, np.int32),
            "g_a2": cat(a2s, np.int32), "g_val": cat(vals, np.float64)}
