"""The invariant manifold of real block rotations and its 3-D reduced gradient flow.

For ``W = r·blockdiag(R(φ_b))`` the loss is invariant under ``(P, A) → (QᵀP Q₂, Q₂ᵀA Q₂)``
(``Q₂ = Q ⊕ Q``) for every Q that leaves the process's law unchanged: rotations and reflections
within a block and permutations of blocks for isotropic tokens, the dihedral group of the square
per block for sign-symmetric iid tokens (Assumption 4.1).  The matrices commuting with these are
the multiples of I, so every active block is a scalar; and ``W → −W`` (also a symmetry:
``x_τ → (−1)^{τ−1} x_τ``) flips ``(W^PV_13, W^KQ_22, W^KQ_33)`` together with the sign of
``(P, A)``, so they stay 0.  What is left is the 3-D manifold

    W^KQ_32 = a I,   W^KQ_23 = c I,   W^PV_12 = b I,   every other entry 0,

on which ``ŷ_t = b (a φ_t + c ψ_t)`` with the mesa feature ``φ_t = Σ_i x_i x_{i−1}* x_t/(t−1)``
(Corollary 4.1) and ``ψ_t = Σ_i x_i x_i* x_{t−1}/(t−1)``.  Per coordinate
``ℓ = ½ b² uᵀΓu − b hᵀu`` with ``u = (a, c)``, ``Γ = [[g11, g12], [g12, g22]]``, ``h = (h1, h2)``;
the flow of θ moves each diagonal entry by ``−∂ℓ/∂(a, c, b)``.  The diagonal paper's manifold
(c = 0) is *not* invariant: at ``c = 0`` the flow has ``ċ = b h2 − a b² g12 ≠ 0``.  Unlike the
diagonal model, the real one has no U(1) phase symmetry (``W → e^{iψ}W`` is not real), and that
symmetry is what removed ``W^KQ_23`` there.

The model depends on ``k = b u`` only, a convex quadratic ``½ kᵀΓk − hᵀk`` with minimiser
``k* = Γ⁻¹h``; the flow conserves ``Δ = a² + c² − b²`` (the shadow of ``‖A‖² − ‖P‖²``), so the
limit of the flow is ``b∞² = (√(Δ² + 4‖k*‖²) − Δ)/2``, ``(a∞, c∞) = k*/b∞`` — the paper's
hyperbola ``ab* = c2/c1`` with ``k*`` in place of ``ab*``.

The constants come from the exact field (:meth:`ManifoldSystem.from_field`, exact polynomial
identities of the loss on the manifold: any radius, any noise) or in closed form at r = 1
without noise (:func:`mesadyn.theory.rotation_constants`); the tests check one against the
other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..errors import MesadynError, check_finite
from ..field import Field
from ..model import block, dim_of, pack, unpack
from ..process import Family
from ..theory import RotationConstants

#: The blocks of the manifold, in the order ``(a, c, b)``.
MANIFOLD_BLOCKS = (("KQ", 3, 2), ("KQ", 2, 3), ("PV", 1, 2))


def embed(d: int, a: float, c: float, b: float) -> torch.Tensor:
    """θ on the manifold: ``W^KQ_32 = aI``, ``W^KQ_23 = cI``, ``W^PV_12 = bI``, else 0."""
    KQ = torch.zeros(3 * d, 3 * d, dtype=torch.float64)
    PV = torch.zeros_like(KQ)
    eye = torch.eye(d, dtype=torch.float64)
    block(KQ, 3, 2).copy_(a * eye)
    block(KQ, 2, 3).copy_(c * eye)
    block(PV, 1, 2).copy_(b * eye)
    return pack(KQ, PV)


def coordinates(theta: torch.Tensor | np.ndarray) -> tuple[float, float, float]:
    """``(a, c, b)``: the traces over d of the three manifold blocks of θ."""
    th = torch.as_tensor(np.asarray(theta, dtype=np.float64))
    d = dim_of(th)
    KQ, PV = unpack(th)
    mats = {"KQ": KQ, "PV": PV}
    a, c, b = (float(torch.trace(block(mats[m], i, j))) / d for m, i, j in MANIFOLD_BLOCKS)
    return a, c, b


def distance(theta: torch.Tensor | np.ndarray) -> float:
    """``max |θ − embed(coordinates(θ))|``: how far θ is off the manifold (0 on it)."""
    th = torch.as_tensor(np.asarray(theta, dtype=np.float64))
    a, c, b = coordinates(th)
    return float((th - embed(dim_of(th), a, c, b)).abs().max())


@dataclass(frozen=True)
class ManifoldSystem:
    """The 3-D gradient flow on the manifold (module docstring), per coordinate."""

    g11: float
    g12: float
    g22: float
    h1: float
    h2: float

    @classmethod
    def from_constants(cls, c: RotationConstants) -> ManifoldSystem:
        """From the closed forms (:func:`mesadyn.theory.rotation_constants`)."""
        return cls(c.g11, c.g12, c.g22, c.h1, c.h2)

    @classmethod
    def from_field(cls, field: Field) -> ManifoldSystem:
        """From the loss itself: on the manifold with b = 1, ``ℓ(a, c)`` is a quadratic, so
        its coefficients are exact finite differences of five loss values (any process)."""
        d = field.d

        def ell(a: float, c: float) -> float:
            return float(field.loss(embed(d, a, c, 1.0))) / d

        l00, l10, lm0, l01, l0m, l11 = (ell(0, 0), ell(1, 0), ell(-1, 0), ell(0, 1),
                                        ell(0, -1), ell(1, 1))
        return cls(g11=l10 + lm0 - 2 * l00, g12=l11 - l10 - l01 + l00,
                   g22=l01 + l0m - 2 * l00, h1=-(l10 - lm0) / 2, h2=-(l01 - l0m) / 2)

    @property
    def gamma(self) -> np.ndarray:
        return np.array([[self.g11, self.g12], [self.g12, self.g22]])

    @property
    def k_star(self) -> np.ndarray:
        """``k* = Γ⁻¹ h``: the products ``(ab, cb)`` at every minimum."""
        return np.linalg.solve(self.gamma, np.array([self.h1, self.h2]))

    @property
    def one_step_k(self) -> float:
        """The best pure mesa-optimizer (c = 0): ``ab = h1/g11`` (Theorem 4.1's ab* form)."""
        return self.h1 / self.g11

    def loss(self, a: float, c: float, b: float) -> float:
        """``ℓ`` per coordinate (without the constant)."""
        u = np.array([a, c])
        return float(0.5 * b * b * u @ self.gamma @ u - b * (self.h1 * a + self.h2 * c))

    def rhs(self, a: float, c: float, b: float) -> np.ndarray:
        """``(ȧ, ċ, ḃ) = −∇ℓ``."""
        G, h = self.gamma, np.array([self.h1, self.h2])
        u = np.array([a, c])
        du = -(b * b * (G @ u)) + b * h
        db = -(b * (u @ G @ u)) + h @ u
        return np.array([du[0], du[1], db])

    def jacobian(self, a: float, c: float, b: float) -> np.ndarray:
        """``∂(ȧ, ċ, ḃ)/∂(a, c, b) = −∇²ℓ``."""
        G, h = self.gamma, np.array([self.h1, self.h2])
        u = np.array([a, c])
        J = np.zeros((3, 3))
        J[:2, :2] = -b * b * G
        J[:2, 2] = J[2, :2] = -2 * b * (G @ u) + h
        J[2, 2] = -(u @ G @ u)
        return J

    @staticmethod
    def invariant(a: float, c: float, b: float) -> float:
        """The conserved ``Δ = a² + c² − b²``."""
        return a * a + c * c - b * b

    def limit_candidates(self, a0: float, c0: float, b0: float) -> list[np.ndarray]:
        """The two fixed points on the level set ``Δ`` of the start: ``±(k*/b∞, b∞)``."""
        a0, c0, b0 = (check_finite(n, v) for n, v in (("a0", a0), ("c0", c0), ("b0", b0)))
        k = self.k_star
        delta = self.invariant(a0, c0, b0)
        kk = float(k @ k)
        b2 = 2 * kk / (math.sqrt(delta * delta + 4 * kk) + delta) if delta > 0 else (
            (math.sqrt(delta * delta + 4 * kk) - delta) / 2)
        b = math.sqrt(b2)
        return [np.array([k[0] / b, k[1] / b, b]), np.array([-k[0] / b, -k[1] / b, -b])]

    @property
    def saddle_rate(self) -> float:
        """``‖h‖``: the unstable rate of the saddle at the origin (the Jacobian there is
        ``[[0, h], [hᵀ, 0]]``, eigenvalues ``±‖h‖, 0``), the 3-D system's ``c2``."""
        return math.hypot(self.h1, self.h2)

    def balanced(self) -> np.ndarray:
        """The fixed point with ``a² + c² = b²`` (Δ = 0) and ``b > 0``: ``b = ‖k*‖^{1/2}``,
        ``(a, c) = k*/b`` (Theorem 4.1's balanced point ``a = b = √ab*`` when c = 0)."""
        k = self.k_star
        b = math.sqrt(math.hypot(float(k[0]), float(k[1])))
        return np.array([k[0] / b, k[1] / b, b])

    def fixed_point_eigenvalues(self, a: float, c: float, b: float) -> np.ndarray:
        """The closed-form eigenvalues (ascending) of :meth:`jacobian` at a fixed point
        ``b (a, c) = k*``: there ``∇²ℓ = [[b²Γ, h], [hᵀ, q]]`` with ``q = uᵀΓu`` (since
        ``bΓu = h``), singular along the scaling ``(−u, b)``, so its eigenvalues are 0 and the
        roots of ``μ² − τ μ + e₂`` with ``τ = b² tr Γ + q`` and ``e₂ = b⁴ det Γ + b² q tr Γ −
        ‖h‖²`` (the principal 2×2 minors); the Jacobian's are their negatives."""
        u = np.array([a, c])
        q = float(u @ self.gamma @ u)
        tr_g = self.g11 + self.g22
        tau = b * b * tr_g + q
        e2 = (b**4 * (self.g11 * self.g22 - self.g12**2) + b * b * q * tr_g
              - self.h1**2 - self.h2**2)
        root = math.sqrt(max(tau * tau / 4 - e2, 0.0))
        return np.sort(np.array([-(tau / 2 + root), -(tau / 2 - root), 0.0]))

    def solve(self, y0: tuple[float, float, float] | np.ndarray, t_end: float, *,
              method: str = "LSODA", rtol: float = 1e-12, atol: float = 1e-14,
              t_eval: np.ndarray | None = None, events: Any = None,
              dense_output: bool = False) -> Any:
        """:func:`scipy.integrate.solve_ivp` of the flow from ``y0 = (a0, c0, b0)`` to ``t_end``
        (implicit methods get :meth:`jacobian`; ``dense_output``: ``sol.sol(t)`` interpolates
        at the solver's own order); the solver's result, unchecked."""
        from scipy.integrate import solve_ivp

        jac = None if method in ("RK45", "RK23", "DOP853") else (
            lambda _t, y: self.jacobian(*y))
        kw = {} if jac is None else {"jac": jac}
        return solve_ivp(lambda _t, y: self.rhs(*y), (0.0, float(t_end)),
                         [float(v) for v in y0], method=method, rtol=rtol, atol=atol,
                         t_eval=t_eval, events=events, dense_output=dense_output, **kw)

    def integrate(self, a0: float, c0: float, b0: float, t_end: float,
                  rtol: float = 1e-12, atol: float = 1e-14) -> tuple[np.ndarray, np.ndarray]:
        """The flow from ``(a0, c0, b0)`` to ``t_end`` (LSODA with :meth:`jacobian`):
        times and states (n, 3)."""
        sol = self.solve((a0, c0, b0), t_end, rtol=rtol, atol=atol)
        if not sol.success:
            raise MesadynError(f"the reduced rotation flow failed: {sol.message}")
        return sol.t, sol.y.T

    def limit(self, a0: float, c0: float, b0: float, t_end: float = 1e4) -> np.ndarray:
        """Where the flow from ``(a0, c0, b0)`` ends: the closed-form fixed point of its level
        set on the side the flow reaches (the integration only picks the side).

        Raises:
            MesadynError: the flow does not approach either candidate (a start on the stable
                manifold of the saddle at the origin, for example).
        """
        _, ys = self.integrate(a0, c0, b0, t_end)
        end = ys[-1]
        cands = self.limit_candidates(a0, c0, b0)
        dist = [float(np.abs(end - p).max()) for p in cands]
        best = int(np.argmin(dist))
        if dist[best] > 1e-3 * (1 + float(np.abs(cands[best]).max())):
            raise MesadynError(f"the reduced flow from ({a0}, {c0}, {b0}) ends at "
                               f"{end.tolist()}, not at a minimum (distance {dist[best]:.3g})")
        return cands[best]


def rotation_tangents(theta: torch.Tensor | np.ndarray) -> np.ndarray:
    """The tangents of the block rotations' orbit through θ, one column per 2×2 block
    (18d² × d/2): with ``G_b`` the generator of block b and ``G₃ = G_b ⊕ G_b ⊕ G_b``,
    ``(W^KQ, W^PV) ↦ (W^KQ G₃ − G₃ W^KQ, W^PV G₃ − G₃ W^PV)``.

    For tokens whose law is rotation invariant in each block (gaussian) the loss is constant on
    the orbit, so at a fixed point each nonzero tangent is a zero mode of ∇²L — the symmetries a
    rotation-commuting model adds to the scaling one.  They vanish on the 3-D manifold (its
    blocks commute with every rotation), so the diagonal start's end point has none.
    """
    th = torch.as_tensor(np.asarray(theta, dtype=np.float64))
    d = dim_of(th)
    if d % 2:
        raise MesadynError(f"block rotations need an even d, got d={d}")
    KQ, PV = unpack(th)
    cols = []
    for b in range(d // 2):
        G = torch.zeros(d, d, dtype=torch.float64)
        G[2 * b, 2 * b + 1], G[2 * b + 1, 2 * b] = -1.0, 1.0
        G3 = torch.block_diag(G, G, G)
        cols.append(pack(KQ @ G3 - G3 @ KQ, PV @ G3 - G3 @ PV).numpy())
    return np.stack(cols, axis=1)


def unexplained_zero_modes(hessian: np.ndarray, theta: np.ndarray, rtol: float) -> tuple[int, int]:
    """``(before, after)``: the zero modes of ∇²L (``|μ| <= rtol·max|μ|``) outside the span of
    the inactive entries and the scaling tangent ``(P, −A)``, then also outside the rotation
    tangents (:func:`rotation_tangents`): ``after = 0`` says the declared symmetries explain
    every zero mode."""
    from ..model import active_mask
    from .fixedpoint import symmetry_direction

    H = 0.5 * (hessian + hessian.T)
    mu, V = np.linalg.eigh(H)
    Z = V[:, np.abs(mu) <= rtol * np.abs(mu).max()]
    d = dim_of(theta)
    inactive = np.eye(H.shape[0])[:, ~active_mask(d)]
    sym = symmetry_direction(theta)[:, None]

    def outside(E: np.ndarray) -> int:
        U, sv, _ = np.linalg.svd(E, full_matrices=False)
        Q = U[:, sv > 1e-10 * sv.max()]
        R = Z - Q @ (Q.T @ Z)
        return int((np.linalg.svd(R, compute_uv=False) > 1e-6).sum()) if R.size else 0

    base = np.concatenate([inactive, sym], axis=1)
    return outside(base), outside(np.concatenate([base, rotation_tangents(theta)], axis=1))


def manifold_gradient_residual(field: Field, theta: torch.Tensor | np.ndarray) -> float:
    """``max |∇L − (its projection on the manifold's tangent space)|`` at θ: zero (to rounding)
    at the manifold's points wherever it is invariant (the check of its invariance)."""
    th = torch.as_tensor(np.asarray(theta, dtype=np.float64))
    g = field.grad(th)
    return distance(g.detach().numpy())


# ---- the manifold as a structure of θ: masks, distances, the end points' classes -----------
def _unit_blocks(d: int) -> np.ndarray:
    """(3, 18d²): the flat θ of ``embed(d, 1, 0, 0)``, ``(0, 1, 0)``, ``(0, 0, 1)``."""
    return np.stack([embed(d, *e).numpy() for e in np.eye(3)])


def manifold_mask(d: int) -> np.ndarray:
    """The entries of θ the manifold occupies: the diagonals of ``W^KQ_32``, ``W^KQ_23`` and
    ``W^PV_12`` (boolean, 18d²)."""
    return np.asarray(_unit_blocks(d).any(axis=0))


def off_manifold(theta: np.ndarray, inert: np.ndarray | None = None) -> np.ndarray:
    """Per row of ``theta`` (N, 18d²) or for one θ: ``max |θ − embed(coordinates(θ))|`` over the
    active entries, leaving out the ``inert`` ones (a boolean mask over θ the loss does not
    depend on, :func:`mesadyn.analysis.ensemble.inert_mask`): 0 on the manifold."""
    from ..model import active_mask

    th = np.array(theta, dtype=np.float64, ndmin=2)
    d = dim_of(th[0])
    U = _unit_blocks(d)
    coords = th @ U.T / d  # (N, 3): the mean of each block's diagonal
    resid = np.abs(th - coords @ U)
    keep = active_mask(d) if inert is None else active_mask(d) & ~np.asarray(inert, bool)
    out: np.ndarray = resid[:, keep].max(axis=1) if keep.any() else np.zeros(th.shape[0])
    return out if np.ndim(theta) > 1 else out[:1]


def block_moments(fam: Family) -> tuple[float, float]:
    """``(μ2, μ3) = (E ρ², E ρ³)`` of one block norm ``ρ = x_1² + x_2²`` (the token's first
    block; Assumption 4.1 families have the same law in every block)."""
    def rho(p: int) -> float:
        c = np.zeros((p + 1, fam.d), dtype=np.int64)
        c[:, 0] = 2 * np.arange(p + 1)
        c[:, 1] = 2 * (p - np.arange(p + 1))
        w = np.array([math.comb(p, k) for k in range(p + 1)], dtype=np.float64)
        return float(w @ np.asarray(fam.moment(c), dtype=np.float64))

    return rho(2), rho(3)


def k_limit(fam: Family) -> np.ndarray:
    """The T → ∞ limit of ``k*`` at r = 1 without noise: ``(2μ2/μ3, 0)``.  From
    :func:`mesadyn.theory.rotation_constants`, ``h ≈ μ2 (T−2)/4 (1, 0)`` and
    ``Γ ≈ μ3 (T−2)/8 · I`` up to ``O(log T)``, so ``k* = (2μ2/μ3, 0) + O(log T / T)`` (1/3 for
    gaussian tokens)."""
    mu2, mu3 = block_moments(fam)
    return np.array([2 * mu2 / mu3, 0.0])


def classify_ends(theta: np.ndarray, stationary: np.ndarray, k_star: np.ndarray, *,
                  inert: np.ndarray | None = None, k_tol: float = 1e-6,
                  off_tol: float = 1e-6) -> np.ndarray:
    """The :class:`~mesadyn.analysis.ensemble.Basin` of each end point (rows of ``theta``) of
    a real-rotation flow, against the 3-D manifold's fixed points (the structure of these
    processes, as the diagonal is the paper's): a stationary row within ``off_tol`` of the
    manifold (:func:`off_manifold`) is on it; there it is on the branch when
    ``‖b (a, c) − k*‖ <= k_tol ‖k*‖`` — ``branch_plus`` for a > 0, ``branch_minus`` for
    a < 0 (the two curves ``±(k*/b, b)``; no mixed branch: one a for every block) — and
    ``other`` otherwise (the saddle); a stationary row off the manifold is ``dense``; any other
    ``not_converged``."""
    from .ensemble import Basin

    th = np.array(theta, dtype=np.float64, ndmin=2)
    st = np.asarray(stationary, dtype=bool)
    d = dim_of(th[0])
    coords = th @ _unit_blocks(d).T / d
    k = coords[:, 2:3] * coords[:, :2]
    ks = np.asarray(k_star, dtype=np.float64)
    at = np.linalg.norm(k - ks, axis=1) <= k_tol * np.linalg.norm(ks)
    on = st & (off_manifold(th, inert) <= off_tol)
    out = np.full(th.shape[0], Basin.NOT_CONVERGED.value, dtype="<U13")
    out[st & ~on] = Basin.DENSE.value
    out[on] = Basin.OTHER.value
    out[on & at & (coords[:, 0] > 0)] = Basin.BRANCH_PLUS.value
    out[on & at & (coords[:, 0] < 0)] = Basin.BRANCH_MINUS.value
    return out
