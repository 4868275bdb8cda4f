"""The counting behind the exact fields of real rotations and noise, against brute force.

- :func:`lattice_sums` (O(1) per t) against enumerating every ``(i, i')`` for random systems of
  rows with coefficients in {−2..2} (what a 2×2 rotation's paired phases produce), with and
  without the radius weights;
- the noise kernel (:func:`job_sums`) against a direct triple loop with the covariance weight
  ``f(τ_a, τ_b) = Σ_{j<min} r^{τ_a+τ_b−2−2j}`` written as that sum;
- without noise pairs the kernel reproduces the closed-form lattice sums.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mesadyn.field._lattice import brute_sums, lattice_sums
from mesadyn.field._noise_sums import job_sums


@pytest.mark.parametrize("q", [1.0, 0.64, 1.21])
def test_lattice_sums_equal_enumeration(q):
    rng = np.random.default_rng(3)
    T = 9
    t = np.arange(2, T)[None, :]
    for _ in range(400):
        rows = [(int(a), int(b), int(c), int(k)) for a, b, c, k in
                zip(*rng.integers(-2, 3, (3, 3)), rng.integers(-6, 7, 3), strict=True)]
        rows = rows[: int(rng.integers(1, 4))]
        has_ip = bool(rng.random() < 0.8)
        if not has_ip:
            rows = [(a, 0, c, k) for a, _, c, k in rows]
        lo_i, lo_ip = int(rng.integers(1, 3)), int(rng.integers(1, 3)) if has_ip else 1
        got = lattice_sums(t, [(a, b, c, np.array([[k]])) for a, b, c, k in rows],
                           np.array([[lo_i]]), np.array([[lo_ip]]),
                           t if has_ip else np.ones((1, 1), dtype=np.int64),
                           math.log(q), math.log(q) if has_ip else 0.0)[0]
        ref = brute_sums(T, rows, lo_i, lo_ip, has_ip, q, q if has_ip else 1.0)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


def _brute_job(rows, base, hh, role, pairs, lo_i, lo_ip, has_ip, T, r, power):
    def tau(b, h, i, ip, t):
        return (i - h, ip - h, t - h, t + 1)[b]

    total = 0.0
    for t in range(2, T):
        for i in range(lo_i, t + 1):
            for ip in (range(lo_ip, t + 1) if has_ip else (1,)):
                if any(a * i + b * ip + c * t + k != 0 for a, b, c, k in rows):
                    continue
                w = 1.0
                for s in range(len(base)):
                    if role[s] < 0:
                        w *= r ** (tau(base[s], hh[s], i, ip, t) - 1)
                for sa, sb in pairs:
                    ta, tb = (tau(base[x], hh[x], i, ip, t) for x in (sa, sb))
                    w *= sum(r ** (ta + tb - 2 - 2 * j) for j in range(1, min(ta, tb)))
                total += w / (t - 1.0) ** power
    return total


@pytest.mark.parametrize("r", [1.0, 0.8, 1.1])
def test_noise_kernel_equals_a_direct_triple_loop(r):
    rng = np.random.default_rng(11)
    T = 8
    base_g = (0, 0, 2, 1, 1, 2)
    for trial in range(60):
        G = trial % 3 != 0
        base = base_g if G else (3, 0, 0, 2)
        S = len(base)
        hh = rng.integers(0, 2, S)
        if not G:
            hh[0] = 0
        nr = int(rng.integers(1, 4))
        rows = [(int(rng.integers(-2, 3)), int(rng.integers(-2, 3)) if G else 0,
                 int(rng.integers(-2, 3)), int(rng.integers(-5, 6))) for _ in range(nr)]
        slots = rng.permutation(S)
        npairs = int(rng.integers(0, S // 2 + 1))
        pairs = [(int(slots[2 * p]), int(slots[2 * p + 1])) for p in range(npairs)]
        role = -np.ones(S, dtype=np.int64)
        for p, (a, b) in enumerate(pairs):
            role[a] = role[b] = p
        lo_i = 1 + max(hh[s] for s in range(S) if base[s] == 0)
        ip_slots = [s for s in range(S) if base[s] == 1]
        lo_ip = 1 + max(hh[s] for s in ip_slots) if ip_slots else 1
        arr_rows = np.zeros((1, 6, 4), dtype=np.int64)
        arr_rows[0, :nr] = rows
        arr_pairs = np.zeros((1, 3, 2), dtype=np.int64)
        arr_pairs[0, :npairs] = pairs if pairs else np.zeros((0, 2))
        got = job_sums(arr_rows, np.array([nr]), np.array([base]), hh[None, :], role[None, :],
                       arr_pairs, np.array([npairs]), np.array([lo_i]), np.array([lo_ip]),
                       has_ip=G, T=T, radius=r, power=2 if G else 1)[0]
        ref = _brute_job(rows, base, hh, role, pairs, lo_i, lo_ip, G, T, r, 2 if G else 1)
        assert got == pytest.approx(ref, rel=1e-12, abs=1e-13), (trial, rows, pairs)


def test_noise_kernel_without_pairs_is_the_closed_form():
    T, r = 30, 0.9
    t = np.arange(2, T)[None, :]
    rows = [(1, -1, 0, 0), (0, 1, -1, 1)]  # i = i', i' = t − 1
    closed = (lattice_sums(t, [(a, b, c, np.array([[k]])) for a, b, c, k in rows],
                           np.array([[1]]), np.array([[1]]), t, 2 * math.log(r), 2 * math.log(r))
              * np.exp((2 * t - 6) * math.log(r)) @ (1.0 / (t[0] - 1.0) ** 2))[0]
    arr = np.zeros((1, 6, 4), dtype=np.int64)
    arr[0, :2] = rows
    got = job_sums(arr, np.array([2]), np.array([[0, 0, 2, 1, 1, 2]]), np.zeros((1, 6), int),
                   -np.ones((1, 6), int), np.zeros((1, 3, 2), int), np.array([0]),
                   np.array([1]), np.array([1]), has_ip=True, T=T, radius=r, power=2)[0]
    assert got == pytest.approx(closed, rel=1e-13)
