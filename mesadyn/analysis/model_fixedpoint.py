"""Fixed points of any model's flow: Newton's method with the model's symmetries projected
out, and the curvature verdict there (the counterpart, for every
:class:`~mesadyn.models.Model`, of :func:`mesadyn.analysis.fixedpoint.refine` and
:func:`mesadyn.analysis.steady.curvature`).

* :func:`symmetry_basis` — orthonormal tangents, over the free entries, of the model's declared
  continuous symmetries (:meth:`~mesadyn.models.Model.symmetries`: orbits of equal loss for
  every data distribution) that move the free entries alone.  ``L`` is constant along each, so
  ``∇L ⟂`` them at every point and they are exact zero modes of ``∇²L`` at every critical
  point, of every field (exact, quadrature or sampled);
* :func:`transverse_basis` — orthonormal columns spanning the free entries orthogonal to them;
* :func:`projected_curvature` and :func:`curvature_verdict` — the spectrum of ``∇²L`` on that
  transverse space: a ``saddle`` where an eigenvalue lies below ``−ZERO_RTOL · max|λ|``
  (:data:`mesadyn.tolerances.ZERO_RTOL`), else a ``minimum``; ``n_flat`` counts the transverse
  eigenvalues within ``±ZERO_RTOL · max|λ|`` (flat directions the declared symmetries do not
  explain: an active entry the data never reach, or an undeclared symmetry);
* :func:`difference_hvp` and :func:`difference_hessian` — ``∇²L v`` and the free block of
  ``∇²L`` by central differences of the gradient (a sampled field's gradient is a smooth
  function of θ); :func:`free_hessian` — the exact free block;
* :func:`newton_polish` — Newton's method on ``∇L = 0`` over the free entries, the step
  ``δ = −Z (Zᵀ H Z)⁺ Zᵀ ∇L`` in the transverse space ``Z`` (the minimum-norm step: it never
  moves along an orbit; the pseudo-inverse drops ``|h| <= PINV_RTOL · max|h|``), halved until
  ``max|∇L|`` decreases, and the Hessian reused (a chord step, one gradient) while it contracts
  ``max|∇L|`` by :data:`CHORD_CONTRACTION` per step.  Newton finds whatever critical point is
  near: start it where the flow has decided the basin (:func:`mesadyn.workflows.integrate`).
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import MesadynError, check_int, check_positive
from ..outcome import Outcome
from ..record import Record, hidden
from ..tolerances import ZERO_RTOL
from ._newton import PINV_RTOL, backtrack

if TYPE_CHECKING:
    import numpy.typing as npt

    from ..field import Field
    from ..models import Model

__all__ = ["CENTRAL_STEP", "CHORD_CONTRACTION", "PINV_RTOL", "SYMMETRY_RANK_RTOL",
           "TANGENT_ZERO_RTOL",
           "CriticalKind", "ModelCurvature", "ModelNewton", "curvature_verdict",
           "difference_hessian", "difference_hvp", "free_hessian", "newton_polish",
           "projected_curvature", "symmetry_basis", "transverse_basis"]

#: Singular values of the symmetry tangents below this times the largest are dependent
#: directions (a tangent that vanishes at this point), left out of the projection.
SYMMETRY_RANK_RTOL = 1e-10
#: A declared symmetry tangent ``t`` counts as a zero mode of ``H`` where
#: ``‖H t/‖t‖‖ <= TANGENT_ZERO_RTOL · max|H|`` (:func:`projected_curvature`).
TANGENT_ZERO_RTOL = 1e-6
#: A reused Hessian is kept while each chord step shrinks ``max|∇L|`` at least this much
#: (``r_new <= CHORD_CONTRACTION · r``); otherwise the next step computes a fresh one.
CHORD_CONTRACTION = 0.25


class CriticalKind(enum.StrEnum):
    """What a critical point is, by its curvature across the symmetry orbits."""

    MINIMUM = "minimum"
    SADDLE = "saddle"


@dataclass(frozen=True)
class ModelCurvature(Record):
    """The spectrum of ``∇²L`` across the symmetry orbits at a point (:func:`projected_curvature`):
    the smallest and largest eigenvalue, how many lie below ``−ZERO_RTOL · max|λ|``
    (``n_negative``) and within ``±ZERO_RTOL · max|λ|`` (``n_flat``), the dimension of the
    projected-out symmetry span (``n_symmetry``) and the kind of point."""

    kind: CriticalKind
    lambda_min: float
    lambda_max: float
    n_negative: int
    n_flat: int
    n_symmetry: int
    smallest_positive: float

    @property
    def saddle(self) -> bool:
        """Whether there is negative curvature across the orbits."""
        return self.kind is CriticalKind.SADDLE

    @property
    def outcome(self) -> Outcome:
        """``saddle`` or ``converged`` (a flow that ends here)."""
        return Outcome.SADDLE if self.saddle else Outcome.CONVERGED

    def describe(self) -> str:
        """One clause for a run's message."""
        if self.saddle:
            return (f"∇²L has {self.n_negative} negative eigenvalue(s) across the symmetry "
                    f"orbits (the smallest {self.lambda_min:.4g}): a saddle")
        flat = f", {self.n_flat} flat direction(s) unexplained" if self.n_flat else ""
        return (f"∇²L >= 0 across the {self.n_symmetry} symmetry direction(s) (the smallest "
                f"eigenvalue {self.lambda_min:.4g}{flat}): a minimum")


def _orthonormal(S: np.ndarray) -> np.ndarray:
    """Orthonormal columns spanning the columns of ``S`` (rank by :data:`SYMMETRY_RANK_RTOL`)."""
    if S.size == 0 or not np.isfinite(S).all():
        return np.zeros((S.shape[0], 0))
    U, s, _ = np.linalg.svd(S, full_matrices=False)
    if not s.size or s[0] == 0:
        return np.zeros((S.shape[0], 0))
    return U[:, s > SYMMETRY_RANK_RTOL * s[0]]


def symmetry_basis(model: Model, theta: Any, free: npt.NDArray[np.bool_]) -> np.ndarray:
    """Orthonormal columns (``free.sum()`` × s) spanning the model's declared tangents at
    ``theta`` (:meth:`~mesadyn.models.Model.symmetries`) that leave every active entry off
    ``free`` fixed (the combinations with no component there), restricted to ``free``.  An
    inactive entry never reaches ŷ, so a component on it does not matter."""
    th = np.asarray(theta, np.float64)
    S = np.asarray(model.symmetries(th), np.float64)
    held = model.active_mask(model.dim_of(th)) & ~free
    if S.shape[1] and held.any():
        from scipy.linalg import null_space

        S = S @ null_space(S[held], rcond=SYMMETRY_RANK_RTOL)
    return _orthonormal(S[free])


def transverse_basis(model: Model, theta: Any, free: npt.NDArray[np.bool_]) -> np.ndarray:
    """Orthonormal columns spanning the free entries orthogonal to :func:`symmetry_basis`."""
    U = symmetry_basis(model, theta, free)
    k = int(np.count_nonzero(free))
    if U.shape[1] == 0:
        return np.eye(k)
    Q, _ = np.linalg.qr(U, mode="complete")
    return Q[:, U.shape[1]:]


def free_hessian(fld: Field, theta: Any, free: npt.NDArray[np.bool_]) -> np.ndarray:
    """``∇²L`` of ``fld`` at ``theta`` over the ``free`` entries (:meth:`Field.hessian`),
    symmetrised, float64."""
    import torch

    H = fld.hessian(torch.from_numpy(np.ascontiguousarray(theta, dtype=np.float64)))
    Hf = np.asarray(H.detach().cpu().numpy(), np.float64)[np.ix_(free, free)]
    return 0.5 * (Hf + Hf.T)


#: The relative step of :func:`difference_hessian`, ``ε^{1/3}`` (an error ``O(ε^{2/3})`` of the
#: Hessian's scale).
CENTRAL_STEP = float(np.cbrt(np.finfo(np.float64).eps))


def difference_hvp(grad: Callable[[np.ndarray], np.ndarray], theta: Any,
                   V: np.ndarray) -> np.ndarray:
    """``∇²L v`` for every column ``v`` of ``V`` (n × k) by central differences of ``grad``
    (θ ↦ ∇L): ``(∇L(θ + h v) − ∇L(θ − h v)) / 2h``, ``h`` = :data:`CENTRAL_STEP` times
    ``max(1, |θ|)`` on the column's support, two gradients per column; (n × k)."""
    th = np.array(theta, dtype=np.float64)
    out = np.empty((th.size, V.shape[1]))
    for j in range(V.shape[1]):
        v = V[:, j]
        h = CENTRAL_STEP * max(1.0, float(np.abs(th[v != 0]).max(initial=0.0)))
        out[:, j] = (np.asarray(grad(th + h * v), np.float64)
                     - np.asarray(grad(th - h * v), np.float64)) / (2 * h)
    return out


def difference_hessian(grad: Callable[[np.ndarray], np.ndarray], theta: Any,
                       free: npt.NDArray[np.bool_], *,
                       basis: np.ndarray | None = None) -> np.ndarray:
    """``∇²L`` over the ``free`` entries (given ``basis``, n × m orthonormal columns:
    ``basisᵀ ∇²L basis``) by :func:`difference_hvp` along each free entry (basis column),
    symmetrised.  A sampled field's gradient is a smooth function of θ (its sequences are
    fixed), so this is its Hessian up to the differencing error (``O(ε^{2/3})`` of its
    scale): a Jacobian for an implicit step or Newton's matrix, not an exact Hessian."""
    th = np.asarray(theta, dtype=np.float64)
    D = np.eye(th.size)[:, free] if basis is None else np.asarray(basis, np.float64)
    HD = difference_hvp(grad, th, D)
    H = HD[free] if basis is None else D.T @ HD
    return 0.5 * (H + H.T)


def projected_curvature(H: Any, symmetries: Any, *, rtol: float = ZERO_RTOL) -> ModelCurvature:
    """The curvature of ``H`` (over the free entries, k × k) across the span of
    ``symmetries`` (k × s, the tangents restricted to the same entries): the eigenvalues of
    ``Zᵀ H Z`` for ``Z`` an orthonormal basis of the complement (module docstring).  A
    non-finite ``H`` has no verdict.

    Raises:
        MesadynError: ``H`` not square, ``symmetries`` not of its size, or ``H`` not finite.
    """
    Hm = np.asarray(H, np.float64)
    if Hm.ndim != 2 or Hm.shape[0] != Hm.shape[1]:
        raise MesadynError(f"H must be a square matrix, got shape {Hm.shape}")
    S = np.asarray(symmetries, np.float64).reshape(Hm.shape[0], -1)
    if not np.isfinite(Hm).all():
        raise MesadynError("∇²L is not finite: no curvature verdict")
    U = _orthonormal(S)
    if U.shape[1]:
        # only the tangents H annihilates are zero modes: near a point where an orbit
        # degenerates (a layer's scaling at θ → 0) a normalised tangent is not one
        Hs = 0.5 * (Hm + Hm.T)
        _, sv, Vt = np.linalg.svd(Hs @ U)
        small = np.zeros(U.shape[1], dtype=bool)
        small[sv.size:] = True
        small[:sv.size] = sv <= TANGENT_ZERO_RTOL * max(float(np.abs(Hs).max()), 1e-300)
        U = U @ Vt.T[:, small]
    if U.shape[1]:
        Q, _ = np.linalg.qr(U, mode="complete")
        Z = Q[:, U.shape[1]:]
        Hm = Z.T @ Hm @ Z
    return _verdict(np.linalg.eigvalsh(0.5 * (Hm + Hm.T)), U.shape[1], rtol)


def _verdict(h: np.ndarray, n_symmetry: int, rtol: float) -> ModelCurvature:
    if not h.size:
        return ModelCurvature(CriticalKind.MINIMUM, 0.0, 0.0, 0, 0, n_symmetry, math.inf)
    tol = rtol * float(np.abs(h).max())
    neg = int((h < -tol).sum())
    pos = h[h > tol]
    return ModelCurvature(
        kind=CriticalKind.SADDLE if neg else CriticalKind.MINIMUM,
        lambda_min=float(h[0]), lambda_max=float(h[-1]), n_negative=neg,
        n_flat=int((np.abs(h) <= tol).sum()), n_symmetry=n_symmetry,
        smallest_positive=float(pos.min()) if pos.size else math.inf)


def curvature_verdict(fld: Field, model: Model, theta: Any, free: npt.NDArray[np.bool_], *,
                      hessian: np.ndarray | None = None,
                      rtol: float = ZERO_RTOL) -> ModelCurvature:
    """Minimum or saddle: :func:`projected_curvature` of ``fld``'s exact Hessian at ``theta``
    over ``free`` (``hessian``: that free block, already computed) across the model's
    symmetry orbits (:func:`symmetry_basis`)."""
    H = free_hessian(fld, theta, free) if hessian is None else hessian
    return projected_curvature(H, symmetry_basis(model, theta, free), rtol=rtol)


@dataclass(frozen=True)
class ModelNewton(Record):
    """Newton's method from a point (:func:`newton_polish`): ``max|∇L|`` over the free entries
    before the first step and after each (``residuals``), the length of each step
    (``steps``), how many were damped (halved at least once), the Hessians it computed
    (``hessian_fn``'s calls; one passed in is not counted) and the gradients of its steps (a
    difference Hessian's own are its ``hessian_fn``'s), whether ``tol`` was met, its CPU
    seconds; the curvature across the orbits at its first Hessian (``curvature_at_start``)
    and how many of its Hessians had negative curvature there (``saddles_seen``)."""

    iterations: int
    hessians: int
    gradients: int
    residuals: list[float]
    steps: list[float]
    damped: int
    converged: bool
    loss: float
    cpu_s: float
    message: str
    curvature_at_start: ModelCurvature | None = None
    saddles_seen: int = 0
    theta: np.ndarray | None = hidden()

    @property
    def residual(self) -> float:
        """``max|∇L|`` over the free entries at the end."""
        return self.residuals[-1]


@dataclass
class _Factor:
    """A transverse Hessian's eigendecomposition, ready for pseudo-inverse steps."""

    Z: np.ndarray
    h: np.ndarray
    V: np.ndarray
    curvature: ModelCurvature = field(init=False)

    def __post_init__(self) -> None:
        self.curvature = _verdict(self.h, self.Z.shape[0] - self.Z.shape[1], ZERO_RTOL)

    def step(self, g: np.ndarray) -> np.ndarray:
        keep = np.abs(self.h) > PINV_RTOL * float(np.abs(self.h).max())
        V = self.V[:, keep]
        return -(self.Z @ (V @ ((V.T @ (self.Z.T @ g)) / self.h[keep])))


def _factor(H: np.ndarray, Z: np.ndarray) -> _Factor:
    Hr = Z.T @ H @ Z
    h, V = np.linalg.eigh(0.5 * (Hr + Hr.T))
    return _Factor(Z, h, V)


def newton_polish(fld: Field, model: Model, theta: Any, free: npt.NDArray[np.bool_], *,
                  tol: float, max_iter: int = 30, hessian: np.ndarray | None = None,
                  hessian_fn: Callable[[np.ndarray], np.ndarray] | None = None,
                  max_hessians: int | None = None,
                  grad: Callable[[np.ndarray], tuple[float, np.ndarray]] | None = None
                  ) -> ModelNewton:
    """Newton's method on ``∇L = 0`` over the ``free`` entries from ``theta`` (module
    docstring), until ``max|∇L| <= tol``, ``max_iter`` steps, ``max_hessians`` Hessians, or a
    step that no halving makes decrease ``max|∇L|`` with a fresh Hessian (the rounding floor,
    or no critical point nearby).  ``hessian``: the free block at ``theta``, already computed
    (not counted); ``hessian_fn``: θ ↦ the free block (default the exact one,
    :func:`free_hessian`; :func:`difference_hessian` converges as well, the fixed point being
    where the gradient vanishes); ``grad``: θ ↦ ``(L, ∇L)`` (default
    :meth:`Field.loss_and_grad`).

    Raises:
        MesadynError: a ``tol`` that is not positive, ``max_iter`` below 0.
    """
    import torch

    check_positive("tol", tol)
    max_iter = check_int("max_iter", max_iter, 0)
    start = time.process_time()
    th = np.array(theta, dtype=np.float64)
    counts = {"gradients": 0, "hessians": 0}

    def evaluate(x: np.ndarray) -> tuple[float, np.ndarray]:
        counts["gradients"] += 1
        if grad is not None:
            return grad(x)
        L, g = fld.loss_and_grad(torch.from_numpy(x))
        return float(L), np.asarray(g.detach().cpu().numpy(), np.float64)

    def factor(x: np.ndarray, H: np.ndarray | None = None) -> _Factor:
        if H is None:
            counts["hessians"] += 1
            H = free_hessian(fld, x, free) if hessian_fn is None else hessian_fn(x)
        if not np.isfinite(H).all():
            raise _Stagnant("∇²L is not finite")
        return _factor(H, transverse_basis(model, x, free))

    L, g = evaluate(th)
    r = float(np.abs(g[free]).max())
    residuals, steps = [r], []
    damped, it = 0, 0
    current: _Factor | None = None
    fresh = False
    first: ModelCurvature | None = None
    saddles = 0
    message = ""
    try:
        while r > tol and it < max_iter and math.isfinite(r):
            if current is None:
                if max_hessians is not None and counts["hessians"] >= max_hessians:
                    message = f"{max_hessians} Hessians (max_hessians) used"
                    break
                current, fresh = factor(th, hessian if it == 0 else None), True
                first = current.curvature if first is None else first
                saddles += current.curvature.saddle
            step = current.step(g[free])
            found = backtrack(evaluate, th, free, step, r)
            if found is None:
                if fresh:
                    message = "no step decreases max|∇L| (the rounding floor)"
                    break
                current = None  # the reused Hessian no longer helps: a fresh one next
                continue
            t, trial, L2, g2, r2 = found
            it += 1
            damped += t < 1.0
            if not fresh and r2 > CHORD_CONTRACTION * r:
                current = None
            fresh = False
            steps.append(float(t * np.linalg.norm(step)))
            th, L, g, r = trial, L2, g2, r2
            residuals.append(r)
    except _Stagnant as stop:
        message = str(stop)
    converged = r <= tol
    if not message:
        message = (f"max|∇L| = {r:.3g} <= {tol:.3g}" if converged
                   else f"{max_iter} Newton steps (max_iter) with max|∇L| = {r:.3g}")
    return ModelNewton(iterations=it, hessians=counts["hessians"],
                       gradients=counts["gradients"], residuals=residuals, steps=steps,
                       damped=int(damped), converged=converged, loss=L,
                       cpu_s=time.process_time() - start, message=message,
                       curvature_at_start=first, saddles_seen=int(saddles), theta=th)


class _Stagnant(Exception):
    pass
