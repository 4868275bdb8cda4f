"""Weighted lattice sums over the solutions of a few linear equations in ``(i, i')``.

The moment tensors of Eq. 2 are sums over times ``(t, i, i')`` of terms that survive only when
every block's net phase exponent vanishes: one linear equation ``a·i + b·i' + c·t + k = 0``
per block, with small integer coefficients.  For the paper's diagonal W the coefficients are in
{−1, 0, 1} (:mod:`mesadyn.field._moments`); a real 2×2 rotation carries both ``e^{±iφ}`` in
each slot, so a block's coefficients are sums of ``±1`` over its slots and reach ``±2``.

:func:`lattice_sums` evaluates, for every ``t`` and every row of constants ``k`` at once,

    Σ_{(i, i') ∈ Box_t, all rows hold} q_i^i · q_ip^{i'},    Box_t = [lo_i, t] × [lo_ip, hi_ip],

in O(1) per ``(t, k)``: the solutions are empty, a point (rank 2), a lattice line (rank 1:
``i = i0 + b'·s``, ``i' = i0' − a'·s``) or the whole box (rank 0), and a geometric sum over a
line or a box is closed.  With ``q_i = q_ip = 1`` the result is an exact integer count.
"""

from __future__ import annotations

import math

import numpy as np

#: A row ``(a, b, c, k)``: ``a·i + b·i' + c·t + k = 0``; ``k`` an int array of shape (H, 1).
Row = tuple[int, int, int, np.ndarray]


def _ceil_div(x: np.ndarray, m: int) -> np.ndarray:
    """``⌈x / m⌉`` for integer arrays and a nonzero integer ``m`` (either sign)."""
    return -((-x) // m)


def _gsum(log_pref: np.ndarray | float, log_ratio: float, lo: np.ndarray,
          hi: np.ndarray) -> np.ndarray:
    """``Σ_{u=lo}^{hi} exp(log_pref + u·log_ratio)`` elementwise (0 where ``hi < lo``),
    without overflow: summed from the larger end (``expm1`` keeps ratios near 1 accurate)."""
    n = np.clip(hi - lo + 1, 0, None)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if log_ratio == 0.0:
            out = n * np.exp(log_pref)
        elif log_ratio < 0:
            out = np.exp(log_pref + lo * log_ratio) * (np.expm1(n * log_ratio)
                                                       / math.expm1(log_ratio))
        else:
            out = np.exp(log_pref + hi * log_ratio) * (np.expm1(-n * log_ratio)
                                                       / math.expm1(-log_ratio))
    return np.where(n > 0, out, 0.0)


def _powq(log_q: float, k: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """``q^k`` where ``ok`` (k arbitrary elsewhere), else 0."""
    if log_q == 0.0:
        return ok.astype(np.float64)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        out = np.exp(np.where(ok, k, 0) * log_q)
    return np.where(ok, out, 0.0)


def _line_range(lo_u: np.ndarray, hi_u: np.ndarray, slope: int, off: np.ndarray,
                lo_v: np.ndarray, hi_v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The integers ``u`` in ``[lo_u, hi_u]`` with ``v = slope·u + off`` in ``[lo_v, hi_v]``."""
    a, b = (lo_v, hi_v) if slope > 0 else (hi_v, lo_v)
    lo = np.maximum(lo_u, _ceil_div(a - off, slope))
    hi = np.minimum(hi_u, (b - off) // slope)
    return lo, hi


def lattice_sums(t: np.ndarray, rows: list[Row], lo_i: np.ndarray, lo_ip: np.ndarray,
                 hi_ip: np.ndarray, log_qi: float = 0.0, log_qip: float = 0.0) -> np.ndarray:
    """``Σ q_i^i q_ip^{i'}`` over the integer solutions of ``rows`` in the box (module
    docstring), for every ``t`` (shape (1, nt)) and every h-row of the ``k``'s and bounds
    (``lo_i``, ``lo_ip``: (H, 1); ``hi_ip``: (H, 1) or ``t``).  ``log_qi = log q_i``; at
    ``log_qi = log_qip = 0`` the sums are exact counts.  Returns shape (H, nt), float64.
    """
    H = lo_i.shape[0]
    shape = (H, t.shape[1])
    ok = np.ones(shape, dtype=bool)
    live: list[tuple[int, int, np.ndarray]] = []
    for a, b, c, k in rows:
        r = np.broadcast_to(-(c * t + k), shape)
        if a == 0 and b == 0:
            ok &= r == 0
        else:
            live.append((a, b, r))
    hi_i = np.broadcast_to(t, shape)
    lo_i_b = np.broadcast_to(lo_i, shape)
    lo_ip_b = np.broadcast_to(lo_ip, shape)
    hi_ip_b = np.broadcast_to(hi_ip, shape)
    if not live:  # the whole box
        return np.where(ok, _gsum(0.0, log_qi, lo_i_b, hi_i)
                        * _gsum(0.0, log_qip, lo_ip_b, hi_ip_b), 0.0)
    a1, b1, r1 = live[0]
    second = None
    for a, b, r in live[1:]:
        if a * b1 - b * a1 == 0:  # proportional rows must agree
            ok &= (a * r1 == a1 * r) & (b * r1 == b1 * r)
        elif second is None:
            second = (a, b, r)
    if second is not None:  # rank 2: one rational point (Cramer), integral or not
        a2, b2, r2 = second
        det = a1 * b2 - b1 * a2
        ni, nip = r1 * b2 - b1 * r2, a1 * r2 - a2 * r1
        ok &= (ni % det == 0) & (nip % det == 0)
        i, ip = ni // det, nip // det
        for a, b, r in live:
            ok &= a * i + b * ip == r
        ok &= (i >= lo_i_b) & (i <= hi_i) & (ip >= lo_ip_b) & (ip <= hi_ip_b)
        return _powq(log_qi, i, ok) * _powq(log_qip, ip, ok)
    if b1 == 0:  # i = r1 / a1, i' free
        ok &= r1 % a1 == 0
        i = r1 // a1
        ok &= (i >= lo_i_b) & (i <= hi_i)
        return _powq(log_qi, i, ok) * np.where(ok, _gsum(0.0, log_qip, lo_ip_b, hi_ip_b), 0.0)
    if a1 == 0:  # i' = r1 / b1, i free
        ok &= r1 % b1 == 0
        ip = r1 // b1
        ok &= (ip >= lo_ip_b) & (ip <= hi_ip_b)
        return _powq(log_qip, ip, ok) * np.where(ok, _gsum(0.0, log_qi, lo_i_b, hi_i), 0.0)
    g = math.gcd(abs(a1), abs(b1))
    ok &= r1 % g == 0
    a_, b_, rr = a1 // g, b1 // g, r1 // g  # coprime, so one of them is ±1 (|a|, |b| <= 2)
    if abs(b_) == 1:  # i free, i' = slope·i + off
        slope, off = -a_ * b_, b_ * rr
        lo, hi = _line_range(lo_i_b, hi_i, slope, off, lo_ip_b, hi_ip_b)
        pref = off * log_qip if log_qip else 0.0
        return np.where(ok, _gsum(pref, log_qi + slope * log_qip, lo, hi), 0.0)
    if abs(a_) != 1:
        raise AssertionError(f"coefficients ({a1}, {b1}) beyond the counted range")
    slope, off = -a_ * b_, a_ * rr  # i' free, i = slope·i' + off
    lo, hi = _line_range(lo_ip_b, hi_ip_b, slope, off, lo_i_b, hi_i)
    pref = off * log_qi if log_qi else 0.0
    return np.where(ok, _gsum(pref, log_qip + slope * log_qi, lo, hi), 0.0)


def brute_sums(T: int, rows: list[tuple[int, int, int, int]], lo_i: int, lo_ip: int,
               has_ip: bool, qi: float = 1.0, qip: float = 1.0) -> np.ndarray:
    """:func:`lattice_sums` for one h-row by enumerating every ``(i, i')`` (tests' reference);
    ``has_ip=False`` fixes ``i' = 1`` (the C tensor).  Returns shape (T − 2,) over t = 2..T−1."""
    out = np.zeros(T - 2)
    for t in range(2, T):
        for i in range(lo_i, t + 1):
            for ip in (range(lo_ip, t + 1) if has_ip else (1,)):
                if all(a * i + b * ip + c * t + k == 0 for a, b, c, k in rows):
                    out[t - 2] += qi**i * qip**ip
    return out
