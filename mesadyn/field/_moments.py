"""Exact moment tensors of Eq. 2 by counting (the structure of docs/design.md §3).

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

#: The largest T the exact field counts (:func:`check_exact_T`).
T_MAX_EXACT = 100_000

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
    s, off = -a1 * b1, r1 * b1
    if s == 1:
        lo, hi = np.maximum(lo_i, lo_ip - off), np.minimum(hi_i, hi_ip - off)
    else:
        lo, hi = np.maximum(lo_i, off - hi_ip), np.minimum(hi_i, off - lo_ip)
    return np.where(ok, np.clip(hi - lo + 1, 0, None), 0)


def _geo(q: float, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``Σ_{k=lo}^{hi} q^k`` elementwise (0 where ``hi < lo``), accurate for q near 1."""
    n = np.clip(hi - lo + 1, 0, None)
    if q == 1.0:
        return n.astype(np.float64)
    lq = math.log(q)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        out = np.exp(lo * lq) * (np.expm1(n * lq) / math.expm1(lq))
    return np.where(n > 0, out, 0.0)


def _pow(q: float, k: np.ndarray | int, ok: np.ndarray) -> np.ndarray:
    """``q^k`` where ``ok``, else 0 (k may be anything outside ``ok``)."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        out = np.exp(np.where(ok, k, 0) * math.log(q))
    return np.where(ok, out, 0.0)


def _wsum(t: np.ndarray, rows: list[tuple[int, int, int, np.ndarray]], lo_i: np.ndarray,
          lo_ip: np.ndarray, hi_ip: np.ndarray, qi: float, qip: float) -> np.ndarray:
    """``Σ qi^i qip^{i'}`` over the solutions :func:`_count` counts (the radius weights):
    geometric sums over the same points, segments and boxes.  Shape (H, nt)."""
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
    lo_i_b = np.broadcast_to(lo_i, shape)
    if not live:
        return np.where(ok, _geo(qi, lo_i_b, hi_i) * _geo(qip, lo_ip, hi_ip), 0.0)
    a1, b1, r1 = live[0]
    other = None
    for a, b, r in live[1:]:
        if a * b1 - b * a1 == 0:
            s = a // a1 if a1 != 0 else b // b1
            ok &= r == s * r1
        elif other is None:
            other = (a, b, r)
    if other is not None:
        a2, b2, r2 = other
        det = a1 * b2 - b1 * a2
        ni, nip = r1 * b2 - b1 * r2, a1 * r2 - a2 * r1
        ok &= (ni % abs(det) == 0) & (nip % abs(det) == 0)
        i, ip = ni // det, nip // det
        for a, b, r in live:
            ok &= a * i + b * ip == r
        ok &= (i >= lo_i) & (i <= hi_i) & (ip >= lo_ip) & (ip <= hi_ip)
        return _pow(qi, i, ok) * _pow(qip, ip, ok)
    if b1 == 0:
        i = r1 * a1
        ok &= (i >= lo_i) & (i <= hi_i)
        return _pow(qi, i, ok) * _geo(qip, lo_ip, hi_ip)
    if a1 == 0:
        ip = r1 * b1
        ok &= (ip >= lo_ip) & (ip <= hi_ip)
        return _geo(qi, lo_i_b, hi_i) * _pow(qip, ip, ok)
    s, off = -a1 * b1, r1 * b1
    if s == 1:  # i' = i + off: Σ qi^i qip^(i+off)
        lo, hi = np.maximum(lo_i, lo_ip - off), np.minimum(hi_i, hi_ip - off)
        return _pow(qip, off, ok) * _geo(qi * qip, lo, hi)
    lo, hi = np.maximum(lo_i, off - hi_ip), np.minimum(hi_i, off - lo_ip)  # i' = off − i
    return _pow(qip, off, ok) * _geo(qi / qip, lo, hi)


def _h_patterns(n: int) -> np.ndarray:
    """All h ∈ {0,1}^n, row r holding the bits of r (slot 0 the most significant)."""
    r = np.arange(2**n)
    return (r[:, None] >> np.arange(n - 1, -1, -1)[None, :]) & 1


def weights(T: int, which: str, partitions: list[tuple[int, ...]] | None = None,
            radius: float = 1.0) -> np.ndarray:
    """``w(π, h)`` for every partition (rows, in :func:`set_partitions` order unless given)
    and h-pattern (columns, :func:`_h_patterns` order) of the G (``which="G"``, 6 slots,
    weight ``(t−1)^{−2}``) or C (``"C"``, 4 slots, ``(t−1)^{−1}``) tensor.

    With a radius r (``x_t = (rλ)^{t−1} ⊙ x_1``) each counted ``(t, i, i')`` also carries
    ``r^{(sum of the slots' exponents)}`` = ``r^{2i + 2i' + 2t − 6 − Σh}`` (G) or
    ``r^{2i + 2t − 3 − Σh}`` (C): geometric sums over the same solution sets (:func:`_wsum`).
    """
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
    fac = np.ones(1)
    if radius != 1:  # r^{2t − K − Σh}, K = 6 (G) or 3 (C)
        K = 6 if which == "G" else 3
        with np.errstate(under="ignore"):
            fac = np.exp((2 * t - K - h.sum(1)[:, None]) * math.log(radius))
    for p, labels in enumerate(parts):
        lab = np.asarray(labels)
        rows = []
        for blk in range(lab.max() + 1):
            sel = lab == blk
            a, b, c = (int(v) for v in spec[sel, :3].sum(0))
            k = spec[sel, 3][None, :] * (1 + h[:, sel])
            rows.append((a, b, c, k.sum(1)[:, None]))
        if radius == 1:
            counts = _count(t, rows, lo_i, lo_ip, hi_ip)
            out[p] = counts @ wt
        else:
            q = radius * radius
            sums = _wsum(t, rows, lo_i, lo_ip, hi_ip, q, q if which == "G" else 1.0)
            out[p] = (sums * fac) @ wt
    return out


def brute_weight(T: int, which: str, labels: tuple[int, ...], hbits: tuple[int, ...],
                 radius: float = 1.0) -> float:
    """``w(π, h)`` by enumerating every ``(t, i, i')`` (the slow reference for tests); each
    term carries ``radius^(Σ |exponents|)``."""
    total = 0.0
    for t in range(2, T):
        for i in range(1, t + 1):
            for ip in range(1, t + 1) if which == "G" else (1,):
                if which == "G":
                    if i < 1 + max(hbits[0], hbits[1]) or ip < 1 + max(hbits[3], hbits[4]):
                        continue
                    exps: tuple[int, ...] = (
                        -(i - 1 - hbits[0]), i - 1 - hbits[1], -(t - 1 - hbits[2]),
                        ip - 1 - hbits[3], -(ip - 1 - hbits[4]), t - 1 - hbits[5])
                else:
                    if i < 1 + max(hbits[1], hbits[2]):
                        continue
                    exps = (-t, i - 1 - hbits[1], -(i - 1 - hbits[2]), t - 1 - hbits[3])
                net: dict[int, int] = {}
                for lab, e in zip(labels, exps, strict=True):
                    net[lab] = net.get(lab, 0) + e
                if all(v == 0 for v in net.values()):
                    total += (t - 1.0) ** (-2 if which == "G" else -1) * radius ** sum(
                        abs(e) for e in exps)
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


def check_exact_T(T: int, radius: float = 1.0) -> None:
    """The exact field's range: ``T <= T_MAX_EXACT`` (the weights are counted over every
    t = 2..T−1, about 3 ms per t for a fixed token on one core), and for r > 1 no overflow
    of ``r^{6T}`` in float64.

    Raises:
        MesadynError: naming T (and r).
    """
    if T > T_MAX_EXACT:
        raise MesadynError(
            f"the exact field counts every t = 2..T−1 and supports T <= {T_MAX_EXACT}, got "
            f"T={T}; use the Monte-Carlo field (--field mc) or the reduced system"
        )
    if radius <= 0 or not math.isfinite(radius):
        raise MesadynError(f"radius must be finite and > 0, got radius={radius!r}")
    if radius > 1 and 6 * T * math.log(radius) > 700:
        raise MesadynError(
            f"radius={radius!r} with T={T} overflows float64 in the exact field (r^(6T) > "
            "1e304); use a smaller T or radius"
        )


def plan(family: Family, T: int, radius: float = 1.0) -> Plan:
    """The partitions, weights, an upper bound on the stored entries (``nnz``) and a memory
    estimate in bytes (the peak of a build plus the loaded field), before allocating.

    Raises:
        MesadynError: T or the radius out of the exact field's range (:func:`check_exact_T`),
            or a family without exact moments.
    """
    check_exact_T(T, radius)
    d = family.d
    parts_G = [p for p in set_partitions(6) if admissible(family, p)]
    parts_C = [p for p in set_partitions(4) if admissible(family, p)]
    wG = weights(T, "G", parts_G, radius)
    wC = weights(T, "C", parts_C, radius)
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
