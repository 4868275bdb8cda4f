"""Time sums of the noisy moment tensors: lattice sums weighted by the noise covariances.

With AR noise ``x_{τ+1} = W x_τ + ε_τ`` a slot of a moment is either the token part
``(rW)^{τ−1} x_1`` or a noise part ``Σ_{j<τ} (rW)^{τ−1−j} ε_j``.  Gaussian noise pairs an
unconjugated with a conjugated noise slot of the same basis coordinate and the same ``j``; the
pair's phases then cancel in ``j``, so its phase exponent is that of two token slots, and it
carries the covariance factor (``m = min(τ_a, τ_b)``)

    f(τ_a, τ_b) = Σ_{j=1}^{m−1} r^{τ_a + τ_b − 2 − 2j} = r^{|τ_a − τ_b|} (1 − r^{2(m−1)}) / (1 − r²)

(``m − 1`` at r = 1) instead of the token slots' ``r^{τ_a − 1} r^{τ_b − 1}``.  A job is one
pattern (the block equations with their constants for one h-pattern, the slots' times, the
pairs); :func:`job_sums` returns ``Σ_t (t−1)^{−p} Σ_{(i,i')} r^{Σ_token (τ−1)} Π_pairs f``.

The sums run in compiled loops (numba): per t the solutions are walked along a line (O(t)) or
over the box (separably when no pair couples ``i`` and ``i'``, else O(t²)), so a job costs
O(T²) (O(T³) for the coupled boxes); the token-only patterns use the O(T) closed forms of
:mod:`mesadyn.field._lattice` instead.
"""

from __future__ import annotations

import math

import numba
import numpy as np

#: Slot time codes: ``τ = i − h``, ``i' − h``, ``t − h`` or ``t + 1`` (the C tensor's target).
BASE_I, BASE_IP, BASE_T, BASE_T1 = 0, 1, 2, 3


@numba.njit(cache=True)
def _tau(base: int, h: int, i: int, ip: int, t: int) -> int:  # pragma: no cover - compiled
    if base == 0:
        return i - h
    if base == 1:
        return ip - h
    if base == 2:
        return t - h
    return t + 1


@numba.njit(cache=True)
def _weight(j: int, i: int, ip: int, t: int, part: int, base: np.ndarray, hh: np.ndarray,
            role: np.ndarray, pairs: np.ndarray, npairs: np.ndarray, nslots: int,
            log_r: float) -> float:  # pragma: no cover - compiled
    """The weight at ``(t, i, i')``; ``part`` 0: all factors, 1: all but those involving an
    ``i'``-slot, 2: only those (the separable split of a box)."""
    e = 0
    for s in range(nslots):
        if role[j, s] >= 0:
            continue
        b = base[j, s]
        if (part == 1 and b == 1) or (part == 2 and b != 1):
            continue
        e += _tau(b, hh[j, s], i, ip, t) - 1
    w = 1.0 if log_r == 0.0 else math.exp(e * log_r)
    for p in range(npairs[j]):
        sa, sb = pairs[j, p, 0], pairs[j, p, 1]
        has_ip = base[j, sa] == 1 or base[j, sb] == 1
        if (part == 1 and has_ip) or (part == 2 and not has_ip):
            continue
        ta = _tau(base[j, sa], hh[j, sa], i, ip, t)
        tb = _tau(base[j, sb], hh[j, sb], i, ip, t)
        m = min(ta, tb)
        if m <= 1:
            return 0.0
        if log_r == 0.0:
            w *= m - 1.0
        else:
            w *= math.exp(abs(ta - tb) * log_r) * (math.expm1(2.0 * (m - 1) * log_r)
                                                   / math.expm1(2.0 * log_r))
    return w


@numba.njit(cache=True)
def _job_sums(rows: np.ndarray, nrows: np.ndarray, base: np.ndarray, hh: np.ndarray,
              role: np.ndarray, pairs: np.ndarray, npairs: np.ndarray, lo_i: np.ndarray,
              lo_ip: np.ndarray, nslots: int, has_ip: bool, T: int, log_r: float,
              power: int, out: np.ndarray) -> None:  # pragma: no cover - compiled
    J = rows.shape[0]
    rr = np.zeros(8, dtype=np.int64)
    for j in range(J):
        nr = nrows[j]
        ib = -1  # a row involving i'
        for q in range(nr):
            if rows[j, q, 1] != 0:
                ib = q
                break
        coupled = False  # a pair joining an i-slot and an i'-slot
        for p in range(npairs[j]):
            b1, b2 = base[j, pairs[j, p, 0]], base[j, pairs[j, p, 1]]
            if (b1 == 0 and b2 == 1) or (b1 == 1 and b2 == 0):
                coupled = True
        total = 0.0
        for t in range(2, T):
            feasible = True
            for q in range(nr):
                rr[q] = -(rows[j, q, 2] * t + rows[j, q, 3])
                if rows[j, q, 0] == 0 and rows[j, q, 1] == 0 and rr[q] != 0:
                    feasible = False
            if not feasible:
                continue
            hi_ip = t if has_ip else 1
            sip = 0.0
            if ib < 0 and has_ip and not coupled:
                for ip in range(lo_ip[j], hi_ip + 1):
                    sip += _weight(j, 0, ip, t, 2, base, hh, role, pairs, npairs, nslots,
                                   log_r)
                if sip == 0.0:
                    continue
            st = 0.0
            for i in range(lo_i[j], t + 1):
                good = True
                for q in range(nr):
                    if rows[j, q, 1] == 0 and rows[j, q, 0] != 0 and rows[j, q, 0] * i != rr[q]:
                        good = False
                        break
                if not good:
                    continue
                if ib >= 0:
                    num = rr[ib] - rows[j, ib, 0] * i
                    bq = rows[j, ib, 1]
                    if num % bq != 0:
                        continue
                    ip = num // bq
                    if ip < lo_ip[j] or ip > hi_ip:
                        continue
                    for q in range(nr):
                        if rows[j, q, 0] * i + rows[j, q, 1] * ip != rr[q]:
                            good = False
                            break
                    if good:
                        st += _weight(j, i, ip, t, 0, base, hh, role, pairs, npairs, nslots,
                                      log_r)
                elif not has_ip:
                    st += _weight(j, i, 1, t, 0, base, hh, role, pairs, npairs, nslots, log_r)
                elif not coupled:
                    st += sip * _weight(j, i, 0, t, 1, base, hh, role, pairs, npairs, nslots,
                                        log_r)
                else:
                    for ip in range(lo_ip[j], hi_ip + 1):
                        st += _weight(j, i, ip, t, 0, base, hh, role, pairs, npairs, nslots,
                                      log_r)
            total += st / (t - 1.0) ** power
        out[j] = total


def job_sums(rows: np.ndarray, nrows: np.ndarray, base: np.ndarray, hh: np.ndarray,
             role: np.ndarray, pairs: np.ndarray, npairs: np.ndarray, lo_i: np.ndarray,
             lo_ip: np.ndarray, *, has_ip: bool, T: int, radius: float,
             power: int) -> np.ndarray:
    """The weights of ``J`` jobs (module docstring).

    Arguments (J jobs, S slots): ``rows`` (J, R, 4) int64 ``(a, b, c, k)`` with ``nrows``
    (J,) of them used; ``base``, ``hh``, ``role`` (J, S): each slot's time code
    (:data:`BASE_I` …), its h and its pair (−1 for a token slot); ``pairs`` (J, P, 2) slot
    indices with ``npairs`` (J,); ``lo_i``, ``lo_ip`` (J,) the box's lower corners;
    ``has_ip``: whether ``i'`` exists (G) or is fixed at 1 (C); ``power``: the weight
    ``(t−1)^{−power}``.  Returns float64 (J,).
    """
    J = int(rows.shape[0])
    out = np.zeros(J)
    if J == 0:
        return out
    S = int(base.shape[1])
    _job_sums(np.ascontiguousarray(rows, np.int64), np.ascontiguousarray(nrows, np.int64),
              np.ascontiguousarray(base, np.int64), np.ascontiguousarray(hh, np.int64),
              np.ascontiguousarray(role, np.int64), np.ascontiguousarray(pairs, np.int64),
              np.ascontiguousarray(npairs, np.int64), np.ascontiguousarray(lo_i, np.int64),
              np.ascontiguousarray(lo_ip, np.int64), S, bool(has_ip), int(T),
              math.log(radius), int(power), out)
    return out
