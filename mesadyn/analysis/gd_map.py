"""Gradient descent at a finite step size as a map (docs/design.md §8).

``G_η(θ) = θ − η P∇L(θ)``, with ``P`` the projection on the free coordinates (the active
entries of Eq. 1, intersected with a mask).  Its Jacobian is ``DG = I − η P∇²L P``; at a fixed
point GD is linearly stable iff every eigenvalue of ``DG`` lies in ``[−1, 1]``, i.e.
``η λ_max(∇²L) <= 2`` over the free coordinates (and ``λ_min >= 0``), so the critical step is
``η* = 2/λ_max`` (:func:`critical_step`).  An eigenvalue of ``DG`` crossing −1 is a flip
(period-doubling).

On the reduced system (Lemma 5.3), ``ℓ̃ = (c2 − c1 ab)²/(2c1)`` and the map is explicit
(:func:`reduced_step`): with ``r = c2 − c1 ab``, ``a' = a + η b r``, ``b' = b + η a r``.  At a
point of the hyperbola ``ab = c2/c1`` the Hessian is ``c1 [[b², ab], [ab, a²]]`` with
eigenvalues ``{0, c1(a² + b²)}``.

GD conserves no ``a² − b²``: for the reduced map ``Δ' = Δ (1 − η² r²)`` exactly; in the full
space the invariant ``I = ‖A‖² − ‖P‖²`` changes by exactly ``η² (‖∇_A L‖² − ‖∇_P L‖²)`` per
step (the first-order term vanishes by the conservation law of the flow,
``⟨A, ∇_A L⟩ = ⟨P, ∇_P L⟩``; :func:`invariant_step`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..errors import MesadynError, check_int, check_positive
from ..record import Record

if TYPE_CHECKING:
    from ..field import Field
    from ..model import MaskLike

__all__ = ["Sharpness", "critical_step", "eigh", "gd_step", "invariant_change", "invariant_step",
           "lyapunov_exponent",
           "map_jacobian", "onset_of_instability", "reduced_critical_step", "reduced_hessian",
           "reduced_invariant_step", "reduced_step", "sharpness"]

FloatArray = npt.NDArray[np.float64]
#: The blocks of P = (W^PV_12 W^PV_13) and of A (the lower-right 2d × 2d of W^KQ), Eq. 1.
_P_BLOCKS = ("W_PV_12", "W_PV_13")
_A_BLOCKS = ("W_KQ_22", "W_KQ_23", "W_KQ_32", "W_KQ_33")


def _free(field: Field, mask: MaskLike) -> npt.NDArray[np.intp]:
    from ..model import free_mask

    return np.flatnonzero(free_mask(mask, field.d))


def _grad(field: Field, theta: FloatArray) -> FloatArray:
    import torch

    return np.asarray(field.grad(torch.from_numpy(np.ascontiguousarray(theta))).cpu().numpy(),
                      dtype=np.float64)


def _hessian(field: Field, theta: FloatArray, free: npt.NDArray[np.intp]) -> FloatArray:
    import torch

    H = field.hessian(torch.from_numpy(np.ascontiguousarray(theta))).cpu().numpy()
    H = np.asarray(H, dtype=np.float64)[np.ix_(free, free)]
    return 0.5 * (H + H.T)


def eigh(H: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Eigenvalues (ascending) and eigenvectors of the symmetric ``H`` by LAPACK's ``dsyevr``
    (scipy): numpy's ``eigh`` (``dsyevd``) spends milliseconds in thread synchronisation on
    small matrices when OpenBLAS runs several threads, ``dsyevr`` does not."""
    from scipy.linalg import eigh as _eigh

    ev, V = _eigh(H, driver="evr", check_finite=False)
    return np.asarray(ev, dtype=np.float64), np.asarray(V, dtype=np.float64)


def gd_step(field: Field, theta: npt.ArrayLike, eta: float, mask: MaskLike = None) -> FloatArray:
    """One GD step ``G_η(θ) = θ − η P∇L(θ)`` (the free coordinates move, the rest stay)."""
    eta = check_positive("eta", eta)
    th = np.array(theta, dtype=np.float64)
    free = _free(field, mask)
    th[free] -= eta * _grad(field, th)[free]
    return th


def map_jacobian(field: Field, theta: npt.ArrayLike, eta: float,
                 mask: MaskLike = None) -> FloatArray:
    """``DG_η(θ) = I − η ∇²L(θ)`` over the free coordinates (a k × k matrix, k free entries)."""
    eta = check_positive("eta", eta)
    th = np.asarray(theta, dtype=np.float64)
    free = _free(field, mask)
    return np.eye(free.size) - eta * _hessian(field, th, free)


@dataclass(frozen=True)
class Sharpness(Record):
    """``λ_max(∇²L)`` over the free coordinates with ``η·λ_max`` (GD is stable near a fixed
    point while it is <= 2), ``λ_min``, and where the top eigenvector lives: the fraction of
    its squared weight on each block of θ (``blocks``) and on the diagonals of ``W^KQ_32``
    and ``W^PV_12`` (``diagonal``; the rest is off the diagonal structure)."""

    lambda_max: float
    lambda_min: float
    eta_lambda_max: float
    diagonal: float
    blocks: dict[str, float]


def sharpness(field: Field, theta: npt.ArrayLike, eta: float, mask: MaskLike = None,
              *, method: str = "dense") -> Sharpness:
    """The :class:`Sharpness` of ``L`` at ``theta`` for the step ``eta``.

    ``method="dense"``: the exact Hessian's full spectrum (the fields with
    ``has_exact_hessian``); ``"lanczos"``: the two extreme eigenpairs by Lanczos on
    Hessian-vector products (``scipy.sparse.linalg.eigsh``, a fixed start vector, so the
    numbers are reproducible), for fields whose Hessian is dear.
    """
    from ..model import block_labels, diagonal_mask

    eta = check_positive("eta", eta)
    th = np.asarray(theta, dtype=np.float64)
    free = _free(field, mask)
    if method == "dense":
        ev, V = eigh(_hessian(field, th, free))
        lam_max, lam_min, top = float(ev[-1]), float(ev[0]), V[:, -1]
    elif method == "lanczos":
        lam_max, lam_min, top = _lanczos(field, th, free)
    else:
        raise MesadynError(f"unknown method {method!r}; choose dense or lanczos")
    w = top * top
    labels = block_labels(field.d)[free]
    blocks = {str(b): float(w[labels == b].sum()) for b in dict.fromkeys(labels.tolist())}
    diag = float(w[diagonal_mask(field.d)[free]].sum())
    return Sharpness(lam_max, lam_min, eta * lam_max, diag,
                     {k: v for k, v in blocks.items() if v > 0})


def _lanczos(field: Field, theta: FloatArray,
             free: npt.NDArray[np.intp]) -> tuple[float, float, FloatArray]:
    import torch
    from scipy.sparse.linalg import LinearOperator, eigsh

    th = torch.from_numpy(np.ascontiguousarray(theta))
    n = field.n_params

    def matvec(x: FloatArray) -> FloatArray:
        v = np.zeros(n)
        v[free] = np.ravel(x)
        hv = field.hvp(th, torch.from_numpy(v)).cpu().numpy()
        return np.asarray(hv[free], dtype=np.float64)

    op = LinearOperator((free.size, free.size), matvec=matvec, dtype=np.float64)
    v0 = np.linspace(1.0, 2.0, free.size)  # a fixed start: reproducible to the last bit
    hi, Vh = eigsh(op, k=1, which="LA", v0=v0, tol=1e-10)
    lo = eigsh(op, k=1, which="SA", v0=v0, tol=1e-10, return_eigenvectors=False)
    return float(hi[0]), float(lo[0]), np.asarray(Vh[:, 0], dtype=np.float64)


def critical_step(field: Field, theta: npt.ArrayLike, mask: MaskLike = None) -> float:
    """``η* = 2/λ_max(∇²L)`` at ``theta`` (a fixed point) over the free coordinates: GD from
    near it converges back for ``η < η*`` and leaves it for ``η > η*``."""
    lam = sharpness(field, theta, 1.0, mask).lambda_max
    if not lam > 0:
        raise MesadynError(f"λ_max(∇²L) = {lam:.3g} <= 0 at this point: no critical step")
    return 2.0 / lam


def invariant_step(field: Field, theta: npt.ArrayLike, eta: float,
                   mask: MaskLike = None) -> float:
    """The exact change of ``I = ‖A‖² − ‖P‖²`` (Eq. 1's blocks) over one GD step:
    ``η² (‖P∇_A L‖² − ‖P∇_P L‖²)``, the first-order term being zero (module docstring).  Holds
    when the mask keeps the conservation law (``none``, or ``diagonal``, which keeps whole
    pairs ``(a_i, b_i)``)."""
    eta = check_positive("eta", eta)
    th = np.asarray(theta, dtype=np.float64)
    return invariant_change(_grad(field, th), eta, field.d, _free(field, mask))


def invariant_change(grad: FloatArray, eta: float, d: int,
                     free: npt.NDArray[np.intp] | None = None) -> float:
    """:func:`invariant_step` from a gradient already computed: ``η² (‖g_A‖² − ‖g_P‖²)`` over
    the ``free`` entries (all of them when None)."""
    from ..model import block_labels

    g = np.asarray(grad, dtype=np.float64)
    if free is not None:
        kept = np.zeros_like(g)
        kept[free] = g[free]
        g = kept
    labels = block_labels(d)
    in_P = np.isin(labels, _P_BLOCKS)
    in_A = np.isin(labels, _A_BLOCKS)
    return float(eta * eta * (np.sum(g[in_A] ** 2) - np.sum(g[in_P] ** 2)))


# ---- the reduced map (Lemma 5.3) ------------------------------------------------------------
def reduced_step(a: npt.ArrayLike, b: npt.ArrayLike, eta: float | npt.ArrayLike, c1: float,
                 c2: float) -> tuple[FloatArray, FloatArray]:
    """GD on ``ℓ̃ = (c2 − c1 ab)²/(2c1)`` in closed form, elementwise over arrays of starts and
    step sizes: ``r = c2 − c1 ab``, ``(a, b) ↦ (a + η b r, b + η a r)``."""
    a_ = np.asarray(a, dtype=np.float64)
    b_ = np.asarray(b, dtype=np.float64)
    e_ = np.asarray(eta, dtype=np.float64)
    r = c2 - c1 * a_ * b_
    return a_ + e_ * b_ * r, b_ + e_ * a_ * r


def reduced_hessian(a: float, b: float, c1: float, c2: float) -> FloatArray:
    """``∇²ℓ̃ = [[c1 b², 2c1 ab − c2], [2c1 ab − c2, c1 a²]]`` (on the hyperbola:
    ``c1 [[b², ab], [ab, a²]]``)."""
    off = 2 * c1 * a * b - c2
    return np.array([[c1 * b * b, off], [off, c1 * a * a]])


def reduced_critical_step(a: float, b: float, c1: float) -> float:
    """``2/(c1 (a² + b²))``: the reduced map's critical step at the point ``(a, b)`` of the
    hyperbola (its Hessian's non-zero eigenvalue is ``c1 (a² + b²)``)."""
    return 2.0 / (c1 * (a * a + b * b))


def reduced_invariant_step(a: npt.ArrayLike, b: npt.ArrayLike, eta: float | npt.ArrayLike,
                           c1: float, c2: float) -> FloatArray:
    """The exact change of ``Δ = a² − b²`` over one reduced GD step: ``−η² r² Δ``."""
    a_ = np.asarray(a, dtype=np.float64)
    b_ = np.asarray(b, dtype=np.float64)
    r = c2 - c1 * a_ * b_
    out: FloatArray = -np.asarray(eta, dtype=np.float64) ** 2 * r * r * (a_ * a_ - b_ * b_)
    return out


# ---- the stability limit, measured by GD itself ---------------------------------------------
def _leaves(field: Field, theta: FloatArray, v: FloatArray, eta: float, steps: int,
            eps: float, free: npt.NDArray[np.intp]) -> bool:
    """Whether GD at ``eta`` from ``theta + eps·v`` (v along the top mode) ends farther from
    ``theta`` along ``v`` than it started — the top mode's multiplier ``|1 − ηλ|`` exceeds 1 —
    or went more than twice as far on the way (a catapult that left the point and came back
    to another, flatter point of the minimiser set: far above the critical step)."""
    th = theta.copy()
    th[free] += eps * v
    for _ in range(steps):
        th[free] -= eta * _grad(field, th)[free]
        if not np.isfinite(th).all():
            return True
        if abs(float(np.dot(th[free] - theta[free], v))) > 2 * eps:
            return True
    return abs(float(np.dot(th[free] - theta[free], v))) > eps


def onset_of_instability(field: Field, theta: npt.ArrayLike, mask: MaskLike = None, *,
                         rtol: float = 1e-7, steps: int = 200, eps: float = 1e-8
                         ) -> tuple[float, float]:
    """The step size at which GD started at the fixed point ``theta`` plus ``eps`` along the
    Hessian's top eigenvector stops coming back, found by bisection with GD itself (each trial
    runs ``steps`` steps), against the prediction :func:`critical_step`.

    The top mode's displacement is multiplied by ``1 − ηλ_max`` per step, so after ``steps``
    steps it has grown iff ``η > 2/λ_max``: with ``steps = 200`` a relative error ``δ`` in η
    changes it by ``e^{±2·200·δ}``, far above the rounding of a 1e-8 displacement for
    ``δ >= 1e-7``.

    ## Returns
    ``(observed, predicted)`` critical steps.
    """
    rtol = check_positive("rtol", rtol)
    steps = check_int("steps", steps, 1)
    th = np.asarray(theta, dtype=np.float64)
    free = _free(field, mask)
    ev, V = eigh(_hessian(field, th, free))
    lam, v = float(ev[-1]), V[:, -1]
    if not lam > 0:
        raise MesadynError(f"λ_max(∇²L) = {lam:.3g} <= 0 at this point: no critical step")
    predicted = 2.0 / lam
    lo, hi = 0.9 * predicted, 1.1 * predicted
    if _leaves(field, th, v, lo, steps, eps, free) or not _leaves(field, th, v, hi, steps, eps,
                                                                     free):
        raise MesadynError("GD does not change from staying to leaving within ±10% of "
                           f"2/λ_max = {predicted:.6g}: not a fixed point, or its top mode "
                           "is not the first to go unstable")
    while (hi - lo) > rtol * predicted:
        mid = 0.5 * (lo + hi)
        if _leaves(field, th, v, mid, steps, eps, free):
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi), predicted


def lyapunov_exponent(field: Field, orbit: FloatArray, eta: float,
                      mask: MaskLike = None, *, burn_in: int = 0) -> float:
    """The largest Lyapunov exponent of the map along ``orbit`` (rows θ_k, k = 0..K):
    the mean of ``log ‖DG(θ_k) v_k‖`` over ``k >= burn_in``, with ``v`` renormalised each
    step (Hessian-vector products; a fixed start vector).  The first ``burn_in`` steps align
    ``v`` with the most expanding direction and are not counted (their transient would bias
    the mean by O(1/K))."""
    import torch

    eta = check_positive("eta", eta)
    free = _free(field, mask)
    n = field.n_params
    v = np.zeros(n)
    v[free] = np.linspace(1.0, 2.0, free.size)
    v /= np.linalg.norm(v)
    total = 0.0
    K = orbit.shape[0] - 1
    burn_in = check_int("burn_in", burn_in, 0)
    if burn_in >= K:
        raise MesadynError(f"burn_in={burn_in} leaves no step of the {K}-step orbit")
    for k in range(K):
        hv = field.hvp(torch.from_numpy(np.ascontiguousarray(orbit[k])),
                       torch.from_numpy(v)).cpu().numpy()
        w = v.copy()
        w[free] -= eta * hv[free]
        norm = float(np.linalg.norm(w))
        if not norm > 0 or not math.isfinite(norm):
            return math.inf if not math.isfinite(norm) else -math.inf
        if k >= burn_in:
            total += math.log(norm)
        v = w / norm
    return total / (K - burn_in)
