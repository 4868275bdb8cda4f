"""Stability limits of gradient descent over the minimiser set (docs/design.md §8).

The minimisers of Theorems 4.1 and 4.3 form the hyperbola ``ab = c2/c1`` in the diagonal
plane, which is the orbit of the balanced point under the scaling symmetry
``(P, A) ↦ (αP, A/α)``; Proposition 4.2's dense point (``x_1 = 1_d``) has its own orbit.  Along
such an orbit ``L(θ(α)) = L(θ)``, so ``∇L(Dθ) = D⁻¹∇L(θ)`` and ``∇²L(Dθ) = D⁻¹∇²L(θ)D⁻¹`` with
``D = diag(α on P, 1/α on A)``: the Hessian at every point of the orbit is known from one
point, and its top eigenvalue moves as

    d λ_max / d log α = 2 λ_max (‖u_A‖² − ‖u_P‖²),

``u`` the top eigenvector (unit, over the free coordinates) and ``u_A``, ``u_P`` its parts on
``A`` and ``P``.  So ``λ_max`` is smallest — the *flattest* point of the orbit, where GD with
the largest step can still converge — where the top mode weighs ``A`` and ``P`` equally
(:func:`flattest_point`), or at a crossing of two eigenvalues.  There the largest stable step
is ``η_max = 2/λ_max``; for a given ``η`` the stable part of the orbit is the interval of α
where ``η λ_max(α) < 2`` (:func:`stable_part`).

The reduced model of Lemma 5.3 sees only the diagonal mode, whose eigenvalue is
``c1 (a² + b²)``, smallest at the balanced point (``2 c2``).  In the full space the top mode
can lie off the diagonal structure (for gaussian ``x_1``: in ``W^KQ_22``, ``W^KQ_33``,
``W^PV_13``), and then the full-space critical step is smaller than the reduced one: the
point goes unstable first along a direction the reduced model does not have.
:func:`stability_limits` reports both along the orbit, which mode decides, and the stable part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..errors import MesadynError, check_positive
from ..record import Record, hidden
from .gd_map import eigh as _eigh

if TYPE_CHECKING:
    from ..field import Field
    from ..model import MaskLike
    from ..theory import Constants

__all__ = ["StabilityLimits", "StabilityPoint", "flattest_point", "mode_balance",
           "orbit_theta", "point_limit", "reduced_stable_part", "stability_limits",
           "stable_part"]

FloatArray = npt.NDArray[np.float64]
#: A top mode with at least this share of its weight on diag(W^KQ_32), diag(W^PV_12) is the
#: diagonal (reduced-model) mode; otherwise it is off the diagonal structure.
DIAGONAL_SHARE = 0.5


def _blocks(d: int) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    from ..model import block_labels
    from .gd_map import _A_BLOCKS, _P_BLOCKS

    labels = block_labels(d)
    return np.isin(labels, _P_BLOCKS), np.isin(labels, _A_BLOCKS)


def orbit_theta(theta: npt.ArrayLike, alpha: float) -> FloatArray:
    """``θ`` moved along the scaling orbit: ``P ↦ αP``, ``A ↦ A/α`` (every other entry kept).
    On the diagonal plane ``(a, b) ↦ (a/α, αb)``: the hyperbola ``ab = const``."""
    alpha = check_positive("alpha", alpha)
    th = np.array(theta, dtype=np.float64)
    from ..model import dim_of

    in_P, in_A = _blocks(dim_of(th))
    th[in_P] *= alpha
    th[in_A] /= alpha
    return th


def mode_balance(vector: npt.ArrayLike, free: npt.NDArray[np.intp], d: int) -> float:
    """``‖u_A‖² − ‖u_P‖²`` of a unit vector over the free coordinates ``free``."""
    u = np.asarray(vector, dtype=np.float64)
    in_P, in_A = _blocks(d)
    return float(np.sum(u[in_A[free]] ** 2) - np.sum(u[in_P[free]] ** 2))


@dataclass(frozen=True)
class StabilityPoint(Record):
    """The stability limit of GD at one fixed point: ``a``, ``b`` (the root mean squares of
    ``diag(W^KQ_32)`` and ``diag(W^PV_12)``), ``λ_max(∇²L)`` over the free coordinates and the
    critical step ``2/λ_max``, the reduced model's ``2/(c1(a² + b²))``
    (``None`` without reduced constants), the top mode's share on the diagonal structure and
    per block, whether it is the ``diagonal`` or an ``off_diagonal`` mode, and its balance
    ``‖u_A‖² − ‖u_P‖²`` (the sign of ``dλ_max/d log α``)."""

    alpha: float
    a: float
    b: float
    lambda_max: float
    critical_step: float
    reduced_critical_step: float | None
    top_mode: str
    top_mode_diagonal: float
    top_mode_blocks: dict[str, float]
    mode_balance: float


def point_limit(field: Field, theta: npt.ArrayLike, mask: MaskLike = None, *,
                alpha: float = 1.0, c1: float | None = None) -> StabilityPoint:
    """The :class:`StabilityPoint` of the fixed point ``theta`` (exact Hessian, dense)."""
    from ..model import diagonal_entries, diagonal_mask
    from .gd_map import _free, _hessian

    th = np.asarray(theta, dtype=np.float64)
    free = _free(field, mask)
    ev, V = _eigh(_hessian(field, th, free))
    lam, u = float(ev[-1]), V[:, -1]
    if not lam > 0:
        raise MesadynError(f"λ_max(∇²L) = {lam:.3g} <= 0 at this point: no critical step")
    from ..model import block_labels

    w = u * u
    labels = block_labels(field.d)[free]
    blocks = {str(k): float(w[labels == k].sum()) for k in dict.fromkeys(labels.tolist())}
    diag = float(w[diagonal_mask(field.d)[free]].sum())
    a, b = (math.sqrt(float(np.mean(v * v))) for v in diagonal_entries(th))
    red = None if c1 is None else 2.0 / (c1 * (a * a + b * b))
    return StabilityPoint(alpha=alpha, a=a, b=b, lambda_max=lam, critical_step=2.0 / lam,
                          reduced_critical_step=red,
                          top_mode="diagonal" if diag >= DIAGONAL_SHARE else "off_diagonal",
                          top_mode_diagonal=diag,
                          top_mode_blocks={k: v for k, v in blocks.items() if v > 1e-12},
                          mode_balance=mode_balance(u, free, field.d))


def _lam(field: Field, theta: FloatArray, free: npt.NDArray[np.intp]) -> float:
    from .gd_map import _hessian

    return float(np.linalg.eigvalsh(_hessian(field, theta, free))[-1])


@dataclass(frozen=True)
class Flattest(Record):
    """The flattest point of an orbit: where ``λ_max`` is smallest, found as a zero of the
    top mode's balance (``kind="balanced"``) or at a crossing of two top eigenvalues
    (``kind="crossing"``); ``eta_max = 2/λ_max`` is the largest step for which any point of
    the orbit is stable."""

    alpha: float
    lambda_max: float
    eta_max: float
    kind: str
    point: StabilityPoint


def flattest_point(field: Field, theta: npt.ArrayLike, mask: MaskLike = None, *,
                   log_alpha: tuple[float, float] = (-2.5, 2.5), grid: int = 41,
                   c1: float | None = None, xtol: float = 1e-13) -> Flattest:
    """The flattest point of the scaling orbit of the fixed point ``theta`` (module
    docstring): ``λ_max`` on a grid of ``log α``, then Brent's method on the top mode's
    balance in the bracket around the grid's minimum (``xtol`` in ``log α``; since ``λ_max``
    is stationary there, ``η_max`` is exact to second order in that error).

    ## Raises
    `MesadynError`: the minimum lies at the end of the grid (widen ``log_alpha``).
    """
    from scipy.optimize import brentq

    from .gd_map import _free, _hessian

    th = np.asarray(theta, dtype=np.float64)
    free = _free(field, mask)
    s = np.linspace(log_alpha[0], log_alpha[1], grid)
    lam = np.array([_lam(field, orbit_theta(th, math.exp(x)), free) for x in s])
    k = int(np.argmin(lam))
    if k in (0, grid - 1):
        raise MesadynError(f"λ_max is smallest at the end of log α ∈ {log_alpha}: widen it")

    def balance(x: float) -> float:
        ev, V = _eigh(_hessian(field, orbit_theta(th, math.exp(x)), free))
        return mode_balance(V[:, -1], free, field.d)

    lo, hi = s[k - 1], s[k + 1]
    g_lo, g_hi = balance(lo), balance(hi)
    if g_lo * g_hi > 0:  # both on one side of the grid point: the zero is in the other half
        mid = balance(s[k])
        lo, hi = (s[k], hi) if mid * g_hi < 0 else (lo, s[k])
    x = float(brentq(balance, lo, hi, xtol=xtol, rtol=4 * np.finfo(float).eps))
    ev = np.linalg.eigvalsh(_hessian(field, orbit_theta(th, math.exp(x)), free))
    gap = (ev[-1] - ev[-2]) / ev[-1]
    kind = "balanced" if abs(balance(x)) < 1e-6 or gap > 1e-6 else "crossing"
    pt = point_limit(field, orbit_theta(th, math.exp(x)), mask, alpha=math.exp(x), c1=c1)
    return Flattest(alpha=math.exp(x), lambda_max=pt.lambda_max, eta_max=pt.critical_step,
                    kind=kind, point=pt)


def stable_part(field: Field, theta: npt.ArrayLike, eta: float, mask: MaskLike = None, *,
                flattest: Flattest | None = None, log_alpha: tuple[float, float] = (-2.5, 2.5),
                xtol: float = 1e-12) -> tuple[float, float] | None:
    """The interval ``(α_lo, α_hi)`` of the scaling orbit of ``theta`` on which GD at ``eta``
    is linearly stable (``η λ_max(θ(α)) < 2``): Brent's method on each side of the flattest
    point; ``None`` when even the flattest point is unstable.  ``λ_max`` grows without bound
    towards both ends of the orbit (``A`` or ``P`` large), so the interval is finite; an end
    beyond ``log_alpha`` is an error."""
    from scipy.optimize import brentq

    from .gd_map import _free

    eta = check_positive("eta", eta)
    th = np.asarray(theta, dtype=np.float64)
    free = _free(field, mask)
    flat = flattest if flattest is not None else flattest_point(field, th, mask,
                                                                log_alpha=log_alpha)
    if eta * flat.lambda_max >= 2.0:
        return None
    x0 = math.log(flat.alpha)

    def excess(x: float) -> float:
        return eta * _lam(field, orbit_theta(th, math.exp(x)), free) - 2.0

    ends = []
    for edge in log_alpha:
        if excess(edge) <= 0:
            raise MesadynError(f"GD at η={eta:g} is still stable at log α = {edge}: widen "
                               "log_alpha")
        ends.append(math.exp(brentq(excess, *sorted((x0, edge)), xtol=xtol)))
    return ends[0], ends[1]


def reduced_stable_part(a: float, b: float, eta: float, c1: float) -> tuple[float, float] | None:
    """The reduced model's stable part of the orbit ``(a/α, αb)`` of ``(a, b)`` at ``eta``:
    ``c1 (a²/α² + α² b²) < 2/η`` in closed form (a quadratic in α²); ``None`` when even the
    balanced point ``|a/α| = |αb|`` is unstable (``η c1 · 2|ab| >= 2``)."""
    eta = check_positive("eta", eta)
    r = 2.0 / (eta * c1)
    disc = r * r - 4 * a * a * b * b
    if disc <= 0:
        return None
    lo, hi = (r - math.sqrt(disc)) / (2 * b * b), (r + math.sqrt(disc)) / (2 * b * b)
    return math.sqrt(lo), math.sqrt(hi)


@dataclass(frozen=True)
class StabilityLimits(Record):
    """The stability limits of GD along the scaling orbit of a fixed point (module
    docstring): one :class:`StabilityPoint` per α (``points``), the point itself
    (``base``), the flattest point with the largest stable step ``eta_max`` (``flattest``),
    the reduced model's largest stable step ``1/c2`` (at the balanced point), and for
    ``eta`` the stable part of the orbit in α, full space and reduced.  ``note`` says which
    mode decides."""

    eta: float | None
    base: StabilityPoint
    flattest: Flattest
    reduced_eta_max: float | None
    stable_alpha: tuple[float, float] | None
    reduced_stable_alpha: tuple[float, float] | None
    note: str
    points: list[StabilityPoint] = hidden()

    def to_dataset(self) -> object:
        """The orbit's points over ``alpha`` (an xarray Dataset)."""
        import xarray as xr

        pts = self.points

        def col(f: str) -> FloatArray:
            return np.array([np.nan if getattr(p, f) is None else getattr(p, f) for p in pts],
                            dtype=np.float64)

        return xr.Dataset({k: ("alpha", col(k)) for k in (
            "a", "b", "lambda_max", "critical_step", "reduced_critical_step",
            "top_mode_diagonal", "mode_balance")}, coords={"alpha": col("alpha")})


def stability_limits(field: Field, theta: npt.ArrayLike, *, eta: float | None = None,
                     mask: MaskLike = None, constants: Constants | None = None,
                     alphas: npt.ArrayLike | None = None,
                     log_alpha: tuple[float, float] = (-2.5, 2.5)) -> StabilityLimits:
    """Stability limits over the scaling orbit of the fixed point ``theta`` (module
    docstring).

    ## Arguments
    - `field`, `mask`: the loss and the coordinates GD moves.
    - `theta`: a minimiser (e.g. the balanced point, or Proposition 4.2's dense point).
    - `eta`: a step size whose stable part of the orbit is wanted (optional).
    - `constants`: the reduced constants (``c1``, ``c2``) for the reduced-model comparison.
    - `alphas`: the orbit's sample points (default 41 log-spaced in ``log_alpha``).
    """
    th = np.asarray(theta, dtype=np.float64)
    c1 = None if constants is None else constants.c1
    al = (np.exp(np.linspace(*log_alpha, 41)) if alphas is None
          else np.asarray(alphas, dtype=np.float64))
    points = [point_limit(field, orbit_theta(th, float(x)), mask, alpha=float(x), c1=c1)
              for x in al]
    base = point_limit(field, th, mask, c1=c1)
    flat = flattest_point(field, th, mask, log_alpha=log_alpha, c1=c1)
    red_max = None if constants is None else 1.0 / constants.c2
    part = red_part = None
    if eta is not None:
        eta = check_positive("eta", eta)
        part = stable_part(field, th, eta, mask, flattest=flat, log_alpha=log_alpha)
        if c1 is not None:
            red_part = reduced_stable_part(base.a, base.b, eta, c1)
    blocks = ", ".join(k for k, v in sorted(flat.point.top_mode_blocks.items(),
                                            key=lambda kv: -kv[1]) if v > 0.01)
    if flat.point.top_mode == "diagonal":
        note = (f"the diagonal mode decides: the full-space limit {flat.eta_max:.6g} is the "
                "reduced model's")
    else:
        note = (f"an off-diagonal mode decides ({blocks}): the largest stable step is "
                f"{flat.eta_max:.6g} at α = {flat.alpha:.4g}"
                + (f", against the reduced model's {red_max:.6g}" if red_max else ""))
    return StabilityLimits(eta=eta, base=base, flattest=flat, reduced_eta_max=red_max,
                           stable_alpha=part, reduced_stable_alpha=red_part, note=note,
                           points=points)
