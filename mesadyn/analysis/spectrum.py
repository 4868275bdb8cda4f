"""Linear stability of the gradient flow ``dθ/dτ = −∇L(θ)``: spectra of the Jacobian ``−∇²L``.

* :func:`reduced_spectrum` / :func:`reduced_spectrum_analytic` — the 2-D system of Lemma 5.2
  (Lemma A.5 for ones, masked).  Its Jacobian ``J = −∇²ℓ̃`` has trace ``−c1(a² + b²)`` and
  determinant ``c1² a² b² − (c2 − 2 c1 ab)²``; on the hyperbola ``ab = c2/c1`` (Theorems 4.1,
  4.3) the determinant vanishes and the spectrum is ``{−c1(a² + b²), 0}``; at the origin it is
  ``{−c2, +c2}`` (the saddle).
* :func:`classify` — the full θ (length 18d²): eigenvalues of ``−∇²L``, split into zero, stable
  and unstable modes; the zero modes are explained by the inactive parameters (entries of θ
  outside ``P`` and ``A``, Eq. 1: ``18d² − 6d² = 12d²`` of them), the scaling symmetry
  ``P → αP, A → A/α`` (one direction, :func:`mesadyn.analysis.fixedpoint.symmetry_direction`)
  and parameters that the data never reach (e.g. for sparse ``x_1`` the entries of ``A``
  coupling two different coordinates).

Tolerance.  A mode is a zero mode when ``|μ| <= rtol · max|μ|``.  Rounding in an exactly
computed Hessian perturbs eigenvalues by ``≲ n ε ‖H‖ ≈ 10⁻¹³ ‖H‖`` (Weyl) for ``n = 18d²``
≤ 500; a residual gradient ``g`` at a refined fixed point moves the symmetry mode by
``O(‖g‖/‖θ‖)``.  The default ``rtol = 1e-8`` sits far above both and far below the smallest
physical curvature we measure; :class:`Spectrum` reports the gap (largest zero mode and smallest
non-zero mode, both relative), so the margin is visible in every run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import MesadynError
from ..field import Field
from ..field import FiniteDifferenceHessian as FiniteDifferenceHessian  # noqa: F401 (moved)
from ..field import fd_hessian as fd_hessian  # noqa: F401 (moved to mesadyn.field)
from ..model import ACTIVE_BLOCKS, active_mask, block_labels, dim_of, unpack
from ..reduced import ReducedSystem
from ..tolerances import ZERO_RTOL as ZERO_RTOL  # the one owner of the threshold


# ---- the reduced system ---------------------------------------------------------------
def reduced_spectrum(system: ReducedSystem, a: float, b: float) -> np.ndarray:
    """Numeric eigenvalues (ascending) of the 2×2 Jacobian of Lemma 5.2 at ``(a, b)``."""
    return np.linalg.eigvalsh(system.jacobian(a, b))


def reduced_spectrum_analytic(system: ReducedSystem, a: float, b: float) -> np.ndarray:
    """Closed-form eigenvalues (ascending) of the Jacobian of Lemma 5.2 at ``(a, b)``.

    ``μ± = tr/2 ± √((a² − b²)² c1²/4 + (c2 − 2 c1 ab)²)`` with ``tr = −c1(a² + b²)``: the
    discriminant ``tr²/4 − det`` simplifies to that sum of squares, so it is never negative
    (the Jacobian is symmetric).  On ``ab = c2/c1`` this is ``{−c1(a² + b²), 0}``; at the origin
    ``{−c2, c2}``.
    """
    c1, c2 = system.c1, system.c2
    half_tr = -0.5 * c1 * (a * a + b * b)
    root = float(np.hypot(0.5 * c1 * (a * a - b * b), c2 - 2 * c1 * a * b))
    return np.array([half_tr - root, half_tr + root])


# ---- the full system ------------------------------------------------------------------
def block_weights(vectors: np.ndarray, d: int) -> dict[str, np.ndarray]:
    """Fraction of ``‖v‖²`` in each block of θ for each column of ``vectors`` (18d² × k)."""
    labels = block_labels(d)
    v2 = np.asarray(vectors) ** 2
    total = v2.sum(axis=0)
    total = np.where(total > 0, total, 1.0)
    return {name: v2[labels == name].sum(axis=0) / total for name in np.unique(labels)}


def dominant_blocks(vectors: np.ndarray, d: int, top: int = 2) -> list[list[tuple[str, float]]]:
    """For each column, the ``top`` blocks holding most of ``‖v‖²``, with their fractions."""
    weights = block_weights(vectors, d)
    names = list(weights)
    W = np.stack([weights[n] for n in names])  # (blocks, k)
    out = []
    for j in range(W.shape[1]):
        order = np.argsort(-W[:, j])[:top]
        out.append([(names[i], float(W[i, j])) for i in order if W[i, j] > 1e-3])
    return out


@dataclass
class Spectrum:
    """The spectrum of the flow's Jacobian ``J = −∇²L`` at one point, its modes classified."""

    eigenvalues: np.ndarray  # ascending, of J = −H
    eigenvectors: np.ndarray  # columns, orthonormal
    kinds: np.ndarray  # "zero" | "stable" | "unstable" per eigenvalue
    tol: float  # absolute zero-mode threshold
    d: int
    n_inactive: int = 0
    n_symmetry: int = 0
    n_unused: int = 0
    unused_blocks: dict[str, int] = field(default_factory=dict)
    n_unexplained: int = 0
    n_coordinate_symmetry: int = 0
    n_degenerate: int = 0
    n_flat: int = 0
    #: zero modes explained by the declared symmetry tangents (``classify(symmetries=...)``,
    #: also counted in ``n_symmetry``); ``None`` when none were declared
    n_declared_symmetry: int | None = None
    degenerate_orders: list[float] = field(default_factory=list)
    symmetry_residual: float = float("nan")
    zero_gap: tuple[float, float] = (0.0, float("inf"))

    @property
    def n_zero(self) -> int:
        return int((self.kinds == "zero").sum())

    @property
    def n_stable(self) -> int:
        return int((self.kinds == "stable").sum())

    @property
    def n_unstable(self) -> int:
        return int((self.kinds == "unstable").sum())

    @property
    def stable(self) -> bool:
        """No unstable direction (Lyapunov stable up to the zero modes)."""
        return self.n_unstable == 0

    @property
    def stiffness(self) -> float:
        """Largest over smallest non-zero ``|μ|`` (inf if there are none)."""
        nz = np.abs(self.eigenvalues[self.kinds != "zero"])
        return float(nz.max() / nz.min()) if nz.size else float("inf")

    def leading(self, k: int = 3, top: int = 2) -> list[dict[str, object]]:
        """The ``k`` most negative (fastest), ``k`` slowest stable and all unstable modes."""
        idx_stable = np.flatnonzero(self.kinds == "stable")
        picks = [("fastest", i) for i in idx_stable[:k]]
        picks += [("slowest", i) for i in idx_stable[::-1][:k]]
        picks += [("unstable", i) for i in np.flatnonzero(self.kinds == "unstable")[::-1][:k]]
        vecs = self.eigenvectors[:, [i for _, i in picks]]
        blocks = dominant_blocks(vecs, self.d, top)
        return [
            {"mode": m, "eigenvalue": float(self.eigenvalues[i]),
             "blocks": {n: round(w, 4) for n, w in bl}}
            for (m, i), bl in zip(picks, blocks, strict=True)
        ]

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: eigenvalues (ascending), mode counts, zero modes explained, leading modes."""
        return {
            "eigenvalues": self.eigenvalues.tolist(),
            "n_zero": self.n_zero,
            "n_stable": self.n_stable,
            "n_unstable": self.n_unstable,
            "stable": self.stable,
            "stiffness": self.stiffness,
            "zero_tol": self.tol,
            "zero_gap": list(self.zero_gap),
            "zero_modes": {
                "inactive": self.n_inactive,
                "symmetry": self.n_symmetry,
                "unused": self.n_unused,
                "unused_blocks": self.unused_blocks,
                "coordinate_symmetry": self.n_coordinate_symmetry,
                "higher_order": self.n_degenerate,
                "higher_order_orders": [round(p, 2) for p in self.degenerate_orders
                                        if np.isfinite(p)],
                "flat": self.n_flat,
                "unexplained": self.n_unexplained,
                **({} if self.n_declared_symmetry is None
                   else {"declared_symmetry": self.n_declared_symmetry}),
            },
            "symmetry_residual": self.symmetry_residual,
            "leading": self.leading(),
        }


def jacobian_eigh(hessian: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and eigenvectors of ``J = −H`` for a symmetric Hessian ``H``."""
    H = np.asarray(hessian, dtype=np.float64)
    if H.ndim != 2 or H.shape[0] != H.shape[1]:
        raise MesadynError(f"the Hessian must be square, got shape {H.shape}")
    if not np.isfinite(H).all():
        raise MesadynError("the Hessian has non-finite entries")
    J = -0.5 * (H + H.T)
    return np.linalg.eigh(J)


def coordinate_symmetries(theta: np.ndarray) -> np.ndarray:
    """Per-coordinate scaling tangents, one column per coordinate j (18d² × d).

    Column j is ``(P[:, S_j], −A[S_j, S_j])`` with ``S_j = {j, d + j}`` (slots of ``e^x``), zero
    elsewhere.  Their sum is the global tangent on those entries.  They are zero modes only when
    the data decouple coordinate by coordinate (sparse ``x_1``: one coordinate per sequence),
    which :func:`classify` tests rather than assumes.
    """
    th = torch.as_tensor(np.asarray(theta, np.float64))
    d = dim_of(th)
    W_KQ, W_PV = unpack(th)
    cols = []
    for j in range(d):
        S = [j, d + j]
        KQ = torch.zeros_like(W_KQ)
        PV = torch.zeros_like(W_PV)
        for r in S:
            for c in S:
                KQ[d + r, d + c] = -W_KQ[d + r, d + c]
        PV[:d, [d + j, 2 * d + j]] = W_PV[:d, [d + j, 2 * d + j]]
        cols.append(torch.cat([KQ.reshape(-1), PV.reshape(-1)]).numpy())
    return np.stack(cols, axis=1)


def _order(field: Field, theta: np.ndarray, v: np.ndarray) -> float:
    """Leading order ``p`` of ``L(θ + εv) − L(θ) ~ ε^p`` (both signs of ε, ε = 1e-2, 2e-2).

    Returns inf when the loss does not change to rounding along v (a flat direction).
    """
    def dl(eps: float) -> float:
        vals = [float(field.loss(torch.as_tensor(theta + s * eps * v))) for s in (1.0, -1.0)]
        return max(abs(x - L0) for x in vals)

    L0 = float(field.loss(torch.as_tensor(theta)))
    small, big = dl(1e-2), dl(2e-2)
    floor = 1e-12 * max(1.0, abs(L0))
    if big <= floor:
        return float("inf")
    return float(np.log2(big / max(small, floor)))


def classify(hessian: np.ndarray, theta: np.ndarray | None = None, *,
             rtol: float = ZERO_RTOL, field: Field | None = None,
             symmetries: np.ndarray | None = None) -> Spectrum:
    """Classify the modes of ``J = −∇²L`` (full θ, 18d² × 18d²) into zero/stable/unstable.

    Zero modes are then explained by candidate directions, each used only if ``‖H v‖ <= tol``:
    the inactive entries of θ (exact zero rows of ``H``), active entries whose Hessian row is
    zero here ("unused": the data never reach them), the global scaling tangent at ``theta``
    and the per-coordinate scaling tangents (:func:`coordinate_symmetries`).  Zero-mode
    directions outside their span are *degenerate*: with ``field`` given, the loss along each
    is probed (:func:`_order`) to tell a flat direction (a further continuum of critical
    points) from a higher-order one (``L − L* ~ ε³, ε⁴``: curvature vanishes, the point is
    still isolated along it).  ``n_unexplained`` counts the flat ones and any not probed.

    ``symmetries`` (18d² × k, one column per tangent) declares further continuous symmetries
    of the process at ``theta`` — e.g. the block rotations of real rotations
    (:func:`mesadyn.analysis.rotation_manifold.rotation_tangents`).  Each nonzero column with
    ``‖H v‖ <= tol ‖v‖`` joins the span; the zero modes they add beyond the others are counted
    in ``n_symmetry`` and in ``n_declared_symmetry`` (the ``declared_symmetry`` key), never
    as higher-order or unexplained.
    """
    H = 0.5 * (np.asarray(hessian, np.float64) + np.asarray(hessian, np.float64).T)
    mu, V = jacobian_eigh(H)
    n = H.shape[0]
    d = dim_of(np.zeros(n))
    scale = float(np.abs(mu).max()) if n else 0.0
    tol = rtol * scale if scale > 0 else 0.0
    kinds = np.where(np.abs(mu) <= tol, "zero", np.where(mu < 0, "stable", "unstable"))
    zero = kinds == "zero"
    absmu = np.abs(mu)
    gap = (float(absmu[zero].max() / scale) if zero.any() and scale else 0.0,
           float(absmu[~zero].min() / scale) if (~zero).any() and scale else float("inf"))

    act = active_mask(d)
    row_max = np.abs(H).max(axis=1)
    inactive = ~act
    unused = act & (row_max <= tol)
    labels = block_labels(d)
    E = np.eye(n)[:, inactive | unused]
    n_sym, n_coord, sym_res = 0, 0, float("nan")

    def rank(M: np.ndarray) -> int:
        return int(np.linalg.matrix_rank(M, tol=1e-8)) if M.size else 0

    if theta is not None:
        from .fixedpoint import symmetry_direction

        s = symmetry_direction(theta)
        s[unused] = 0.0
        if np.linalg.norm(s) > 0:
            s /= np.linalg.norm(s)
            sym_res = float(np.linalg.norm(H @ s))
            if sym_res <= tol:
                E = np.concatenate([E, s[:, None]], axis=1)
                n_sym = 1
        C = coordinate_symmetries(theta)
        C[unused] = 0.0
        ok = [C[:, j] / np.linalg.norm(C[:, j]) for j in range(d)
              if np.linalg.norm(C[:, j]) > 0
              and np.linalg.norm(H @ C[:, j]) <= tol * np.linalg.norm(C[:, j])]
        if ok:
            before = rank(E)
            E2 = np.concatenate([E, np.stack(ok, axis=1)], axis=1)
            n_coord = rank(E2) - before
            E = E2
    n_declared = None
    if symmetries is not None:
        S = np.array(symmetries, dtype=np.float64).reshape(n, -1)
        S[unused] = 0.0
        norms = np.linalg.norm(S, axis=0)
        keep = [S[:, j] / norms[j] for j in range(S.shape[1])
                if norms[j] > 0 and np.linalg.norm(H @ S[:, j]) <= tol * norms[j]]
        n_declared = 0
        if keep:
            before = rank(E)
            E = np.concatenate([E, np.stack(keep, axis=1)], axis=1)
            n_declared = rank(E) - before
            n_sym += n_declared
    Nz = V[:, zero]
    n_degenerate, n_flat, orders = 0, 0, []
    if Nz.shape[1]:
        # an orthonormal basis of span(E); E is rank-deficient when the per-coordinate
        # tangents are present (they sum to the global one), so no plain QR here
        if E.shape[1]:
            UE, sE, _ = np.linalg.svd(E, full_matrices=False)
            Q = UE[:, sE > 1e-10 * sE.max()]
        else:
            Q = np.zeros((n, 0))
        resid = Nz - Q @ (Q.T @ Nz)
        U, sv, _ = np.linalg.svd(resid, full_matrices=False)
        R = U[:, sv > 1e-6]
        if field is not None and theta is not None:
            th = np.asarray(theta, np.float64)
            for k in range(R.shape[1]):
                p = _order(field, th, R[:, k])
                orders.append(p)
                if np.isinf(p):
                    n_flat += 1
                else:
                    n_degenerate += 1
        unexplained = R.shape[1] - n_degenerate
    else:
        unexplained = 0
    return Spectrum(
        eigenvalues=mu, eigenvectors=V, kinds=kinds, tol=tol, d=d,
        n_inactive=int(inactive.sum()), n_symmetry=n_sym, n_unused=int(unused.sum()),
        unused_blocks={b: int((unused & (labels == b)).sum()) for b in ACTIVE_BLOCKS
                       if (unused & (labels == b)).any()},
        n_unexplained=unexplained, symmetry_residual=sym_res, zero_gap=gap,
        n_coordinate_symmetry=n_coord, n_degenerate=n_degenerate, n_flat=n_flat,
        degenerate_orders=orders, n_declared_symmetry=n_declared,
    )


def restricted_spectrum(hessian: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Eigenvalues (ascending) of ``J = −H`` restricted to the coordinates in ``mask``.

    With ``mask`` = the active entries off the diagonals of W^KQ_32 and W^PV_12 this is the
    *transverse* spectrum at a diagonal point: the curvature across the invariant diagonal
    manifold of Theorem 4.1.
    """
    H = np.asarray(hessian, np.float64)
    m = np.asarray(mask, bool)
    return np.linalg.eigvalsh(-H[np.ix_(m, m)])
