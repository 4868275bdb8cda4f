"""The paper's closed-form predictions: c1, c2 (Lemmas 5.3, A.5), ab* (Theorems 4.1, 4.3).

For a family with moments κ1, κ2, κ3 (Assumption 4.1) and training length T:

    c1 = (T−2) κ2 + H_{T−2} κ3,   c2 = (T−2) κ1,   ab* = c2 / c1,

with ``H_n = Σ_{k=1}^n 1/k``.  For ``x_1 = 1_d`` with the diagonal mask (Lemma A.5) the same
formulas hold with κ1 = κ2 = 1, κ3 = d − 1 (Theorem 4.3).

**Radius r** (``W = r·diag(λ)``, docs/design.md §6).  At a diagonal point (``W^KQ_32 = a I``,
``W^PV_12 = b I``, ``s = ab``) ``ŷ_{t,j} = (s/(t−1)) Σ_{i=2}^{t} x_{i,j} ⟨x_{i−1}, x_t⟩``;
averaging over λ leaves only the terms whose λ-exponents cancel, each with the factor
``r^{(sum of the exponents)}``, and

    c1 = Σ_{t=2}^{T−1} r^{2t} (κ2 S_t² + κ3 Q_t) / (t−1)²,   c2 = κ1 Σ_{t=2}^{T−1} r^{2t} S_t/(t−1),
    S_t = Σ_{m=0}^{t−2} r^{2m},   Q_t = Σ_{m=0}^{t−2} r^{4m},

which is Lemma 5.3 at r = 1 (S_t = Q_t = t − 1).  The loss on the diagonal is
``d (½ c1 s² − c2 s) + const``, and by the exchangeability of the coordinates the flow keeps
``a_k = a``, ``b_k = b``: the 2-D system of Lemma 5.2 with these constants.  It is the unmasked
flow's when Assumption 4.1 holds (:attr:`Reduction.DIAGONAL`), the masked flow's otherwise
(:attr:`Reduction.MASKED`, as Lemma A.5 for ones).

**Beyond the paper's process** (docs/design.md §6; derivations in ``docs/data-models.md``):

* *AR noise* ``x_{t+1} = W x_t + ε_t`` with diagonal W: every coordinate is
  ``x_{τ,k} = λ_k^{τ−1} y_{τ,k}`` with ``y_τ = r^{τ−1} x_1 + N_τ`` independent of λ (the circular
  noise absorbs the phases), ``E[N_τ N̄_τ'] = K(τ, τ') = s² Σ_{j<min(τ,τ')} r^{τ+τ'−2−2j}``.  So
  the same index patterns survive as without noise, the global phase symmetry keeps the diagonal
  manifold invariant, and ``c1(s), c2(s)`` are the sums above with the moments of y (Wick's
  theorem over the noise): :func:`constants` with ``noise``.
* *Haar W* (:func:`haar_constants`): ``W → e^{iψ}W`` keeps the law, so the diagonal manifold is
  invariant too; ``V*x_1`` is uniform on the complex sphere of radius ``‖x_1‖`` (Dirichlet
  weights) and the eigenvalues are CUE, so c1, c2 depend on ``E‖x_1‖⁴, E‖x_1‖⁶`` only, e.g.
  ``E|x*Uⁿx|² = E‖x‖⁴ (d + min(n, d)) / (d(d+1))``.
* *Real rotations*: no U(1) symmetry, so the flow leaves the diagonal manifold for the 3-D one
  ``(W^KQ_32, W^KQ_23, W^PV_12) = (a, c, b)·I`` (the W → −W symmetry keeps W^KQ_22, W^KQ_33 and
  W^PV_13 at zero); :func:`rotation_constants` gives its constants at r = 1 without noise.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from enum import StrEnum

from .errors import MesadynError, check_finite, check_int
from .process import Family, NoExactMoments, NoReducedSystem, check_radius

__all__ = ["HARMONIC_EXACT_MAX", "T_MAX", "Constants", "NoReducedSystem", "Reduction",
           "RotationConstants", "check_T", "constants", "haar_constants", "harmonic",
           "predicted_ratio", "radius_sums", "rotation_constants"]

#: Up to this n, :func:`harmonic` sums exactly (math.fsum); above it, the asymptotic series.
HARMONIC_EXACT_MAX = 10_000
#: The largest training length the closed forms accept (T − 2 must be a finite float).
T_MAX = 10**300
#: Euler–Mascheroni γ.
EULER_GAMMA = 0.57721566490153286060651209008240243


def harmonic(n: int) -> float:
    """``H_n = Σ_{k=1}^n 1/k`` (``H_0 = 0``) in O(1) for large n.

    Summed exactly in float64 (math.fsum) up to :data:`HARMONIC_EXACT_MAX`; above it,
    ``H_n = ln n + γ + 1/(2n) − 1/(12n²) + 1/(120n⁴) − 1/(252n⁶)`` (the digamma asymptotic
    series, ``H_n = ψ(n+1) + γ``), whose next term is below ``1e-33`` there.

    Raises:
        MesadynError: n is not an integer >= 0.
    """
    n = check_int("n", n, 0)
    if n <= HARMONIC_EXACT_MAX:
        return math.fsum(1.0 / k for k in range(1, n + 1))
    x = float(n)
    inv2 = 1.0 / (x * x)
    tail = 1.0 / (2 * x) - inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 / 252))
    return math.fsum((math.log(n), EULER_GAMMA, tail))


class Reduction(StrEnum):
    """Which gradient flow the 2-D system describes."""

    DIAGONAL = "diagonal"
    """Assumption 4.1 holds: the diagonal manifold is invariant (Lemma 5.2, Theorem 4.1)."""
    MASKED = "masked"
    """Only the flow with the diagonal mask reduces (Lemma A.5, Theorem 4.3): the unmasked
    flow leaves the diagonal (Proposition 4.2)."""


@dataclass(frozen=True)
class Constants:
    """The reduced system's constants for one process and training length."""

    kappa1: float
    kappa2: float
    kappa3: float
    T: int
    c1: float
    c2: float
    radius: float = 1.0
    reduction: Reduction = Reduction.DIAGONAL
    #: The AR noise scale s and the rotation (``diagonal`` or ``haar``) they were derived for.
    noise: float = 0.0
    rotation: str = "diagonal"
    #: ``E‖x_1‖⁴``, ``E‖x_1‖⁶`` and d (Haar's constants depend on the token through these).
    norm4: float = float("nan")
    norm6: float = float("nan")
    dim: int = 0

    @property
    def ab_star(self) -> float:
        """Theorem 4.1 (4.3 for ones): ``ab* = c2/c1 = κ1 / (κ2 + κ3 H_{T−2}/(T−2))`` at r = 1."""
        return self.c2 / self.c1

    @property
    def ab_limit(self) -> float:
        """The T → ∞ limit of ``ab*``: ``κ1/κ2`` at r = 1 (the value the paper's figures
        draw); for r < 1 the convergent sums of :func:`radius_sums` at T = ∞; for r > 1 zero
        (the last terms dominate: ``c2/c1 ~ (q − 1) T r^{−2T}`` with ``q = r²``).  Haar W at
        r = 1: ``(d + 2) E‖x‖⁴ / (3 E‖x‖⁶)``; with noise: not derived (NaN)."""
        if self.rotation == "haar":  # E|w|⁴/E|w|⁶ of the Dirichlet weights |(V*x)_a|²
            d = self.dim
            return (d + 2) * self.norm4 / (3 * self.norm6) if self.radius == 1 else float("nan")
        if self.noise != 0:
            return float("nan")  # not derived
        if self.radius == 1:
            return self.kappa1 / self.kappa2
        if self.radius > 1:
            return 0.0
        s2, q1, s1 = radius_sums(2**62, self.radius)  # truncated where the rest is < 1e-18
        return self.kappa1 * s1 / (self.kappa2 * s2 + self.kappa3 * q1)


def check_T(T: int) -> int:
    """Training length ``3 <= T <= T_MAX`` (Eq. 2 sums t = 2..T−1)."""
    T = check_int("T", T, 3)
    if T > T_MAX:
        raise MesadynError(f"T must be <= 1e300, got T={T:.3g}")
    return T


def radius_sums(T: int, radius: float) -> tuple[float, float, float]:
    """``(Σ_t r^{2t} S_t²/(t−1)², Σ_t r^{2t} Q_t/(t−1)², Σ_t r^{2t} S_t/(t−1))`` over
    t = 2..T−1 (module docstring), so that ``c1 = κ2·first + κ3·second``, ``c2 = κ1·third``.

    For r < 1 the terms fall like r^{2t}: the sum stops once the rest is below 1e-17 of it
    (O(min(T, log(1e-17)/log r)) work).  For r > 1 the terms grow like r^{6T}; an overflow of
    float64 is refused.

    Raises:
        MesadynError: r <= 0, or r > 1 with ``r^{2T}`` beyond float64.
    """
    T = check_T(T)
    r = check_radius(radius)
    if r > 1 and 2 * (T - 1) * math.log(r) > 700:
        raise MesadynError(
            f"radius={r!r} with T={T} overflows float64 (r^(2T) > 1e304); use a smaller T or r"
        )
    import numpy as np  # here only: the r = 1 constants stay pure Python

    q = r * r
    if q == 0.0:  # r² underflows float64: the sums' terms r^{2t} are not representable
        raise MesadynError(f"radius={r!r} underflows float64 (r² = 0); use r >= 1e-150")
    n = T - 2
    if r < 1:
        # every term is <= q^t/(1−q)², so the rest after t = n is <= q^n/(1−q)³: stop once
        # that is below 1e-18 of the first term (q²)
        cut = math.log(1e-18 * (1 - q) ** 3) / math.log(q)
        n = min(n, max(1, int(cut) + 4))
    t = np.arange(2, n + 2, dtype=np.float64)
    m = t - 1  # t − 1 = number of terms of S_t, Q_t
    if r == 1:
        S = Q = m
    else:
        S = -np.expm1(m * math.log(q)) / -math.expm1(math.log(q))
        Q = -np.expm1(m * 2 * math.log(q)) / -math.expm1(2 * math.log(q))
    w = np.exp(t * math.log(q))
    return (math.fsum(w * S * S / (m * m)), math.fsum(w * Q / (m * m)),
            math.fsum(w * S / m))


def constants(fam: Family, T: int, radius: float = 1.0, noise: float = 0.0) -> Constants:
    """``c1, c2`` of Lemma 5.3 (Assumption 4.1 families) or Lemma A.5 (``x_1 = c·1_d``,
    masked), for the radius r and the AR noise scale s (module docstring; r = 1, s = 0 is the
    paper).

    Arguments:
        fam: a family with exchangeable coordinates and known κ1, κ2, κ3.
        T: training length (``3 <= T <= T_MAX``; O(1) at r = 1 without noise; with noise the
            sums over (t, i, i') cost O(T³), about a second at T = 300).
        radius: r of ``W = r·diag(λ)``.
        noise: s of ``x_{t+1} = W x_t + ε_t`` (>= 0).

    Returns:
        :class:`Constants`; ``reduction`` says whether the unmasked flow reduces.

    Raises:
        NoReducedSystem: the family has no reduced system (its message says why).
    """
    T = check_T(T)
    r = check_radius(radius)
    s = check_finite("noise", noise)
    if s < 0:
        raise MesadynError(f"noise must be >= 0, got noise={s!r}")
    try:
        k1, k2, k3 = fam.kappas()
    except NoExactMoments:
        raise NoReducedSystem(
            f"family {fam.name!r} has no reduced system: it has no exact moments "
            "(only the Monte-Carlo field applies)"
        ) from None
    except NoReducedSystem as exc:
        raise NoReducedSystem(
            f"family {fam.name!r} has no reduced system: Theorem 4.3 needs x_1 = c·1_d "
            f"and Lemma 5.3 exchangeable coordinates ({exc})"
        ) from None
    reduction = Reduction.DIAGONAL if fam.assumption_41 else Reduction.MASKED
    if s > 0:
        if r > 1 and 2 * (T - 1) * math.log(r) > 700:
            raise MesadynError(f"radius={r!r} with T={T} overflows float64 (r^(2T) > 1e304); "
                               "use a smaller T or r")
        c1, c2 = _noisy_diagonal_sums(_token_moments(fam), T, r, s, fam.d)
        return Constants(k1, k2, k3, T, c1=c1, c2=c2, radius=r, reduction=reduction, noise=s)
    if r == 1:
        H = harmonic(T - 2)
        c1, c2 = (T - 2) * k2 + H * k3, (T - 2) * k1
    else:
        s2, q1, s1 = radius_sums(T, r)
        c1, c2 = k2 * s2 + k3 * q1, k1 * s1
    return Constants(k1, k2, k3, T, c1=c1, c2=c2, radius=r, reduction=reduction)


def predicted_ratio(fam: Family, T: int) -> float:
    """Proposition 4.1's ``E[(ŷ)_j/(W x)_j] = ab* · E[x_j²]`` (per active coordinate).

    For gaussian this is ``σ² ab*`` → 1/5 as T → ∞; for sparse, conditioned on the active
    coordinate, ``c² ab*`` = 1.
    """
    ab = constants(fam, T).ab_star
    return ab * fam.active_second_moment


# ---- AR noise, diagonal W ---------------------------------------------------------------
def _token_moments(fam: Family) -> dict[str, float]:
    """The token moments the noisy sums need: ``m2, m4, m6`` of one coordinate and, summed
    over ``k ≠ j``, ``J22 = Σ E[x_j² x_k²]`` and ``κ3 = Σ E[x_j² x_k⁴]`` (exchangeable families)."""
    import numpy as np

    d = fam.d

    def mom(*powers: int) -> float:
        c = np.zeros((1, d), dtype=np.int64)
        c[0, : len(powers)] = powers
        return float(fam.moment(c)[0])

    cross = d > 1
    return {"m2": mom(2), "m4": mom(4), "m6": mom(6),
            "J22": (d - 1) * mom(2, 2) if cross else 0.0,
            "J24": (d - 1) * mom(2, 4) if cross else 0.0}


#: The perfect matchings of Wick's theorem between k of 3 conjugated and k of 3 plain slots:
#: (conjugated slots, plain slots) index pairs.
_MATCHINGS = tuple(
    tuple(zip(cs, perm, strict=True))
    for k in range(4) for cs in itertools.combinations(range(3), k)
    for us in itertools.combinations(range(3), k) for perm in itertools.permutations(us))


def _noisy_diagonal_sums(m: dict[str, float], T: int, r: float, s: float,
                         d: int) -> tuple[float, float]:
    """``(c1, c2)`` of the noisy diagonal process (module docstring), summed over (t, i, i').

    ``c2 = Σ_t (1/(t−1)) Σ_i E[ȳ_{t+1} y_i ȳ_{i−1} y_t]`` and ``c1 = Σ_t (1/(t−1)²)
    [Σ_{i,i'} E[ȳ_i y_{i−1} ȳ_t y_{i'} ȳ_{i'−1} y_t] + Σ_{k≠j} Σ_i E|y_{i,j}|² |y_{i−1,k}|²
    |y_{t,k}|²]`` (the patterns whose phases cancel), each moment of ``y = r^{τ−1} x + N``
    expanded by Wick's theorem over the noise pairs.
    """
    import numpy as np

    lr = math.log(r)
    q1 = math.expm1(2 * lr)

    def sig(tau: np.ndarray) -> np.ndarray:
        return np.exp((tau - 1) * lr)

    def K(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        mn = np.minimum(a, b)
        if r == 1:
            return s * s * (mn - 1.0)
        return s * s * np.exp(np.abs(a - b) * lr) * (np.expm1(2 * (mn - 1) * lr) / q1)

    even = {0: 1.0, 2: m["m2"], 4: m["m4"], 6: m["m6"]}

    def wick(conj: list[np.ndarray], plain: list[np.ndarray]) -> np.ndarray:
        """``E[Π ȳ_c Π y_u]`` for one coordinate (3 + 3 or 2 + 2 slots)."""
        n = len(conj)
        total = np.zeros(np.broadcast(*conj, *plain).shape)
        for match in _MATCHINGS:
            if any(c >= n or u >= n for c, u in match):
                continue
            used_c = {c for c, _ in match}
            used_u = {u for _, u in match}
            term = np.ones_like(total)
            for c, u in match:
                term = term * K(conj[c], plain[u])
            for k in range(n):
                if k not in used_c:
                    term = term * sig(conj[k])
                if k not in used_u:
                    term = term * sig(plain[k])
            total += even[2 * (n - len(match))] * term
        return total

    c1 = c2 = 0.0
    for t in range(2, T):
        i = np.arange(2, t + 1, dtype=np.float64)
        tt = np.full_like(i, float(t))
        c2 += float(wick([tt + 1, i - 1], [i, tt]).sum()) / (t - 1)
        I, Ip = np.meshgrid(i, i, indexing="ij")
        T6 = np.full_like(I, float(t))
        same = float(wick([I, T6, Ip - 1], [I - 1, Ip, T6]).sum())
        a, b = i - 1, tt  # k's slots; j's is i
        kpart = {4: sig(a) ** 2 * sig(b) ** 2,
                 2: sig(b) ** 2 * K(a, a) + sig(a) ** 2 * K(b, b) + 2 * sig(a) * sig(b) * K(a, b),
                 0: K(a, a) * K(b, b) + K(a, b) ** 2}
        jpart = {2: sig(i) ** 2, 0: K(i, i)}
        J = {(2, 4): m["J24"], (2, 2): m["J22"], (2, 0): (d - 1) * m["m2"],
             (0, 4): (d - 1) * m["m4"], (0, 2): (d - 1) * m["m2"], (0, 0): float(d - 1)}
        cross = sum(float((jpart[pj] * kpart[pk]).sum()) * J[(pj, pk)]
                    for pj in (2, 0) for pk in (4, 2, 0))
        c1 += (same + cross) / (t - 1) ** 2
    return c1, c2


# ---- Haar W -----------------------------------------------------------------------------
def _norm_moment(fam: Family, k: int) -> float:
    """``E‖x_1‖^{2k}`` from the joint moments (multinomial expansion of ``(Σ x_j²)^k``)."""
    import itertools

    import numpy as np

    d = fam.d
    rows, coef = [], []
    for combo in itertools.combinations_with_replacement(range(d), k):
        n = np.bincount(np.asarray(combo, dtype=np.int64), minlength=d)
        rows.append(2 * n)
        coef.append(math.factorial(k) / math.prod(math.factorial(int(v)) for v in n))
    uniq: dict[tuple[int, ...], float] = {}
    for row, c in zip(rows, coef, strict=True):
        key = tuple(int(v) for v in row)
        uniq[key] = uniq.get(key, 0.0) + c
    counts = np.array(list(uniq), dtype=np.int64)
    return float(np.dot(list(uniq.values()), fam.moment(counts)))


def _cue3(d: int) -> dict[tuple[int, int, int], float]:
    """``E[λ_1^{n1} λ_2^{n2} λ_3^{n3}]`` for three labelled CUE(d) eigenvalues (d >= 3), nonzero
    entries: ``(1/d!) Σ_σ sgn σ · sgn(σ + n) [σ + n a permutation]``."""
    def sign(p: tuple[int, ...]) -> int:
        return -1 if sum(1 for a in range(len(p)) for b in range(a) if p[b] > p[a]) % 2 else 1

    perms = list(itertools.permutations(range(d)))
    out: dict[tuple[int, int, int], float] = {}
    for n1 in range(-d + 1, d):
        for n2 in range(-d + 1, d):
            n = (n1, n2, -n1 - n2) + (0,) * (d - 3)
            tot = 0
            for p in perms:
                q = tuple(p[j] + n[j] for j in range(d))
                if sorted(q) == list(range(d)):
                    tot += sign(p) * sign(q)
            if tot:
                out[(n1, n2, -n1 - n2)] = tot / math.factorial(d)
    return out


def haar_constants(fam: Family, T: int, radius: float = 1.0) -> Constants:
    """``c1, c2`` of the 2-D system for Haar-unitary ``W = r·U`` (module docstring).

    ``c2 = (E‖x‖⁴/d) Σ_t (1/(t−1)) Σ_{i=2}^t r^{2t+2i−4} (d + min(t+1−i, d))/(d(d+1))`` and
    ``c1 = (E‖x‖⁶/d) Σ_t (1/(t−1)²) Σ_{i,i'} r^{2i+2i'+2t−8} B(n)/(d(d+1)(d+2))`` with
    ``n = (i'−i, i−1−t, t+1−i')`` and ``B = 6d + 2d(d−1)ΣG(n_k) + d(d−1)(d−2)F3(n)``:
    the Dirichlet moments of ``|(V*x)_a|²`` times the CUE moments ``G(n) = E[λ_1^{−n} λ_2^n]
    = (min(|n|, d) − d)/(d(d−1))`` and ``F3`` (three eigenvalues).  O(T³) at most.

    Raises:
        NoReducedSystem: the family has no exact moments or no κ's (the diagonal reduction
            needs exchangeable coordinates).
    """
    import numpy as np

    T = check_T(T)
    r = check_radius(radius)
    base = constants(fam, T)  # names a family without a reduced system
    d = fam.d
    n4, n6 = _norm_moment(fam, 2), _norm_moment(fam, 3)
    lr = math.log(r)
    F3 = _cue3(d) if d >= 3 else {}

    def G(n: np.ndarray) -> np.ndarray:
        if d == 1:
            return np.zeros_like(n, dtype=np.float64)
        g = (np.minimum(np.abs(n), d) - d) / (d * (d - 1.0))
        return np.where(n == 0, 1.0, g)

    c1 = c2 = 0.0
    for t in range(2, T):
        i = np.arange(2, t + 1)
        c2 += float((np.exp((2 * t + 2 * i - 4) * lr) * (d + np.minimum(t + 1 - i, d))).sum()
                    ) / (t - 1)
        I, Ip = np.meshgrid(i, i, indexing="ij")
        n1, n2, n3 = Ip - I, I - 1 - t, t + 1 - Ip
        B = 6.0 * d + 2.0 * d * (d - 1) * (G(n1) + G(n2) + G(n3))
        if F3:
            f = np.zeros(I.shape)
            for (a, b, _), v in F3.items():
                f += v * ((n1 == a) & (n2 == b))
            B = B + d * (d - 1) * (d - 2) * f
        c1 += float((np.exp((2 * I + 2 * Ip + 2 * t - 8) * lr) * B).sum()) / (t - 1) ** 2
    c2 *= n4 / (d * d * (d + 1))
    c1 *= n6 / (d * d * (d + 1) * (d + 2))
    return Constants(base.kappa1, base.kappa2, base.kappa3, T, c1=c1, c2=c2, radius=r,
                     reduction=base.reduction, rotation="haar", norm4=n4, norm6=n6, dim=d)


# ---- real rotations: the 3-D manifold -----------------------------------------------------
@dataclass(frozen=True)
class RotationConstants:
    """The constants of the 3-D system of real rotations on ``(W^KQ_32, W^KQ_23, W^PV_12) =
    (a, c, b)·I``: per coordinate, ``ℓ = ½ b² (g11 a² + 2 g12 a c + g22 c²) − b (h1 a + h2 c)``
    (+ const), the mesa feature ``φ_t = Σ_i x_i x_{i−1}* x_t/(t−1)`` weighted by a and the
    feature ``ψ_t = Σ_i x_i x_i* x_{t−1}/(t−1)`` by c."""

    g11: float
    g12: float
    g22: float
    h1: float
    h2: float
    T: int


def rotation_constants(fam: Family, T: int) -> RotationConstants:
    """The closed forms at r = 1 without noise, from the block norms ``ρ_b = x_{2b}² +
    x_{2b+1}²`` (``x_a* x_b = Σ_b ρ_b cos((b−a)φ_b)``; ``μ2 = E ρ_b²``, ``μ3 = E ρ_b³``,
    ``μ21 = E ρ_b² ρ_b'``, ``μ111 = E ρ_b ρ_b' ρ_b''``, m = d/2 blocks, ``H = H_{T−2}``,
    ``H2 = Σ_{k<=T−2} 1/k²``):

        h1 = μ2 (T−2)/4,   h2 = μ2 H/4,
        g11 = ½[μ3 (T−2+H)/4 + (m−1) μ21 H/2],   g12 = ½[μ3 (3H+H2)/4 + (m−1) μ21 H2],
        g22 = ½[μ3 (T−2+5H+4H2)/4 + 3(m−1) μ21 (H+2H2)/2 + (m−1)(m−2) μ111 H2].

    Raises:
        NoReducedSystem: d odd, or a family outside Assumption 4.1 (the 3-D manifold is
            invariant for sign-symmetric exchangeable tokens).
    """
    import numpy as np

    T = check_T(T)
    d = fam.d
    if d % 2 or not fam.exact_moments or not fam.assumption_41:
        raise NoReducedSystem(
            f"family {fam.name!r} with d={d} has no 3-D rotation manifold: it needs an even d "
            "and sign-symmetric exchangeable tokens (Assumption 4.1)")
    m = d // 2

    def rho(powers: list[int]) -> float:
        if len(powers) > m:
            return 0.0
        total = 0.0
        for ks in itertools.product(*[range(p + 1) for p in powers]):
            c = np.zeros((1, d), dtype=np.int64)
            coef = 1
            for b, (p, k) in enumerate(zip(powers, ks, strict=True)):
                c[0, 2 * b], c[0, 2 * b + 1] = 2 * k, 2 * (p - k)
                coef *= math.comb(p, k)
            total += coef * float(fam.moment(c)[0])
        return total

    mu2, mu3, mu21, mu111 = rho([2]), rho([3]), rho([2, 1]), rho([1, 1, 1])
    H = harmonic(T - 2)
    H2 = math.fsum(1.0 / (k * k) for k in range(1, T - 1))
    n = T - 2
    return RotationConstants(
        g11=0.5 * (mu3 * (n + H) / 4 + (m - 1) * mu21 * H / 2),
        g12=0.5 * (mu3 * (3 * H + H2) / 4 + (m - 1) * mu21 * H2),
        g22=0.5 * (mu3 * (n + 5 * H + 4 * H2) / 4 + 1.5 * (m - 1) * mu21 * (H + 2 * H2)
                   + (m - 1) * (m - 2) * mu111 * H2),
        h1=mu2 * n / 4, h2=mu2 * H / 4, T=T)
