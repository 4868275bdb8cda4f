"""The k (preconditioned) GD steps on the in-context least squares that come closest to a given
prediction ŷ_t (von Oswald et al. 2023; Ahn et al. 2023): is a trained model's ŷ_t k steps

    W_{j+1} = W_j − Λ_j ∇L_OLS,t(W_j) Γ_j/(t−1),   W_0 = 0,   ŷ_t = W_k x_t

(:mod:`mesadyn.analysis.gd_iterates`), and with which preconditioners?  :func:`fit_gd_predictions`
minimises ``Σ_{t,n} ‖ŷ_t − ŷ_t(GD)‖²`` over the ``Γ_j`` (:class:`Side` ``right``), the ``Λ_j``
(``left``) or both, of a :class:`Preconditioner` structure, the same at every position, by
Levenberg–Marquardt (MINPACK's, :func:`scipy.optimize.least_squares` with ``method="lm"``: a
QR factorisation of the Jacobian per step) with the exact Jacobian (:meth:`GDIterates.jacobian`).
The objective is multilinear in the steps, so it has several local minima; the fit starts from:

- scalar: ``[ab, 0, …]`` (when a model's ab is given), the best single step ``[η_1, 0, …]`` (a
  linear least squares), ``[η_1/k, …]`` and :data:`RANDOM_STARTS` seeded random starts;
- one side: the scalar optimum ``η_j I``, the best single step ``[Γ_1, 0, …]`` of the structure
  (linear), ``[Γ_1/k, …]`` and seeded random starts of the scalar optimum's scale;
- both: the right and the left optima (the other side ``I``), the scalar optimum and seeded
  random starts,

and keeps the best end point, so a preconditioned residual is never above the scalar one, nor
a two-sided one above either side's.  The loss has the coordinate symmetry of the data's law,
so on symmetric data a unique optimum is fixed by it: :func:`gamma_form` says how far each
fitted matrix is from ``c I + c'(J − I)`` (permutations; ``c' = 0`` under signed ones).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..budget import Estimate, check
from ..errors import MesadynError, check_choice, check_int
from .gd_iterates import GDIterates, Preconditioner, Side, check_times, check_x

__all__ = ["GTOL", "RANDOM_STARTS", "TOL", "GDStepFit", "GammaForm", "check_fit_size",
           "fit_gd_predictions", "fit_iterates", "gamma_form"]

#: Starts of a fit drawn at random (seeded), besides the deterministic ones.
RANDOM_STARTS = 3
#: The relative step at which a fit stops (MINPACK's ``xtol``).
TOL = 1e-10
#: The largest cosine between the residual and a column of the Jacobian at a fit's end
#: (MINPACK's ``gtol``).
GTOL = 1e-10


@dataclass(frozen=True)
class GammaForm:
    """The nearest ``c I + c_off (J − I)`` to a matrix Γ (Frobenius: ``c`` the mean diagonal
    entry, ``c_off`` the mean off-diagonal one) and ``‖Γ − (c I + c_off (J − I))‖/‖Γ‖`` (0 for
    Γ = 0)."""

    c: float
    c_off: float
    rel_distance: float

    def to_dict(self) -> dict[str, float]:
        return {"c": self.c, "c_off": self.c_off, "rel_distance": self.rel_distance}


def gamma_form(gamma: Any) -> GammaForm:
    """:class:`GammaForm` of a real square ``gamma``."""
    g = np.asarray(gamma, dtype=np.float64)
    if g.ndim != 2 or g.shape[0] != g.shape[1]:
        raise MesadynError(f"gamma must be a square matrix, got shape {g.shape}")
    d = g.shape[0]
    c = float(np.trace(g)) / d
    c_off = float((g.sum() - np.trace(g)) / (d * d - d)) if d > 1 else 0.0
    near = c * np.eye(d) + c_off * (np.ones((d, d)) - np.eye(d))
    norm = float(np.linalg.norm(g))
    return GammaForm(c=c, c_off=c_off,
                     rel_distance=float(np.linalg.norm(g - near)) / norm if norm > 0 else 0.0)


@dataclass(frozen=True)
class GDStepFit:
    """How close a prediction ŷ_t is to k (preconditioned) GD steps on the in-context least
    squares.

    ``preconditioner`` and ``side``: what was fitted; ``gammas`` and ``lambdas``: the fitted
    (k, d, d) ``Γ_j`` (right) and ``Λ_j`` (left; ``I`` on a side not fitted, and a scalar fit
    puts ``η_j I`` in ``gammas``); ``gamma_forms``, ``lambda_forms``: :func:`gamma_form` of each
    fitted matrix (none for a side not fitted); ``rel_residual``: ``‖ŷ − ŷ(GD)‖/‖ŷ‖``
    (Frobenius over positions, sequences and coordinates; nan when ŷ is 0); ``max_rel_err``:
    ``max |ŷ − ŷ(GD)|`` over every entry relative to ``max |ŷ|``.  ``etas`` and
    ``scalar_residual``: the scalar fit's step numerators (step j of size ``η_j/(t−1)``) and
    residual, the same fit for ``scalar``; ``improvement``: ``1 − rel_residual/scalar_residual``
    (nan when that is 0).  ``converged``: the kept end point met the tolerances :data:`TOL`
    (not the evaluation cap of :meth:`_Problem.solve`).  ``structure`` (a model's θ only): the
    largest |entry| of θ's active entries off the layered diagonals relative to the largest
    active one.
    """

    k: int
    preconditioner: str
    side: str
    etas: list[float]
    gammas: list[list[list[float]]]
    lambdas: list[list[list[float]]]
    gamma_forms: list[GammaForm]
    lambda_forms: list[GammaForm]
    rel_residual: float
    max_rel_err: float
    scalar_residual: float
    improvement: float
    converged: bool
    t_checked: tuple[int, ...]
    sequences: int
    structure: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {"k": self.k, "preconditioner": self.preconditioner, "side": self.side,
                "etas": list(self.etas), "gammas": self.gammas, "lambdas": self.lambdas,
                "gamma_forms": [f.to_dict() for f in self.gamma_forms],
                "lambda_forms": [f.to_dict() for f in self.lambda_forms],
                "rel_residual": self.rel_residual, "max_rel_err": self.max_rel_err,
                "scalar_residual": self.scalar_residual, "improvement": self.improvement,
                "converged": self.converged, "t_checked": list(self.t_checked),
                "sequences": self.sequences, "structure": self.structure}


def check_fit_size(x: torch.Tensor, m: int, k: int, structure: Preconditioner,
                   side: Side) -> None:
    """Refuse a fit whose prefix sums, iterates, transport and Jacobian would not fit in
    memory (complex, bytes): the prefix sums ``16 n T d(4d + 1)``, the iterates and ``G_j``
    ``16 n m (k + 4) d²``, the transport ``Z`` and its products ``16·4 n m d³`` and the Jacobian
    with its real and imaginary parts and their products ``16·4 n m d P``."""
    n, T, d = (int(s) for s in x.shape)
    P = (2 if side is Side.BOTH else 1) * k * structure.size(d)
    check(Estimate(f"the {structure.value} ({side.value}) GD-step fit at n={n}, {m} positions, "
                   f"d={d}, k={k}",
                   16 * n * T * d * (4 * d + 1) + 16 * n * m * (k + 4) * d * d
                   + 64 * n * m * d ** 3 + 64 * n * m * d * P,
                   advice="use fewer sequences or positions"))


class _Problem:
    """The least squares of one prediction: its residual and exact Jacobian in the parameters
    ``p`` of a structure and side (the Λ_j's first, then the Γ_j's)."""

    def __init__(self, gd: GDIterates, y: np.ndarray, k: int):
        self.gd, self.y, self.k, self.d = gd, y, k, gd.d
        self.w = float(np.linalg.norm(y))
        self.eye = np.broadcast_to(np.eye(gd.d), (k, gd.d, gd.d))

    def unpack(self, p: np.ndarray, structure: Preconditioner, side: Side
               ) -> tuple[np.ndarray, np.ndarray]:
        """``(gammas, lambdas)``, each (k, d, d)."""
        n = self.k * structure.size(self.d)
        lambdas = structure.matrices(p[:n], self.k, self.d) if side.left else self.eye
        gammas = (structure.matrices(p[n if side.left else 0:], self.k, self.d) if side.right
                  else self.eye)
        return np.asarray(gammas), np.asarray(lambdas)

    def _gauge(self, structure: Preconditioner, side: Side) -> bool:
        """Whether the fit carries the rows ``w (tr Λ_j/d − 1)``: two-sided steps are fixed
        only up to ``(Λ_j, Γ_j) → (α Λ_j, Γ_j/α)``, and these rows pick ``tr Λ_j = d`` from
        each orbit (with ``w = ‖ŷ‖``; a start is rescaled onto them, so the minimum is the
        one-sided problem's wherever ``tr Λ_j ≠ 0``)."""
        return side is Side.BOTH and structure is not Preconditioner.SCALAR

    def residual(self, p: np.ndarray, structure: Preconditioner, side: Side) -> np.ndarray:
        gammas, lambdas = self.unpack(p, structure, side)
        r = self.gd.predict(gammas, lambdas) - self.y
        rows = [r.real.ravel(), r.imag.ravel()]
        if self._gauge(structure, side):
            rows.append(self.w * (np.einsum("jbb->j", lambdas) / self.d - 1.0))
        return np.concatenate(rows)

    def jacobian(self, p: np.ndarray, structure: Preconditioner, side: Side) -> np.ndarray:
        J = self.gd.jacobian(*self.unpack(p, structure, side), structure, side)
        J = J.reshape(-1, p.size)
        rows = [J.real, J.imag]
        if self._gauge(structure, side):
            size = structure.size(self.d)
            trace = structure.params(np.eye(self.d)[None]) * self.w / self.d  # ∂ tr/∂p, one Λ
            g = np.zeros((self.k, p.size))
            for j in range(self.k):
                g[j, j * size:(j + 1) * size] = trace
            rows.append(g)
        return np.concatenate(rows)

    def solve(self, structure: Preconditioner, side: Side, starts: list[np.ndarray],
              randoms: list[np.ndarray]) -> tuple[np.ndarray, bool]:
        """The best end point of Levenberg–Marquardt from each start (at most ``100 + 10P``
        evaluations from the deterministic ``starts``, ``50 + 2P`` from the ``randoms``), and
        whether it met the tolerances (:data:`TOL` on the step, :data:`GTOL` on the gradient)."""
        from scipy.optimize import least_squares

        best: tuple[float, np.ndarray, bool] | None = None
        for start, cap in [(p, 100 + 10 * p.size) for p in starts] + [
                (p, 50 + 2 * p.size) for p in randoms]:
            sol = least_squares(lambda q: self.residual(q, structure, side), start,
                                jac=lambda q: self.jacobian(q, structure, side), method="lm",
                                xtol=TOL, ftol=1e-15, gtol=GTOL, max_nfev=cap)
            cost = 2.0 * float(sol.cost)
            if best is None or cost < best[0]:
                best = (cost, np.asarray(sol.x, np.float64), bool(sol.status > 0))
        assert best is not None
        return best[1], best[2]

    def one_step(self, structure: Preconditioner, side: Side) -> np.ndarray:
        """The best single step of one side (a linear least squares: ŷ is linear in it)."""
        n1 = structure.size(self.d)
        zero = np.zeros(n1)
        gd1 = _Problem(self.gd, self.y, 1)
        A = gd1.jacobian(zero, structure, side)
        rhs = np.concatenate([self.y.real.ravel(), self.y.imag.ravel()])
        return np.asarray(np.linalg.lstsq(A, rhs, rcond=None)[0], np.float64)

    def scalar(self, ab_hint: float | None) -> tuple[np.ndarray, bool]:
        """The scalar steps η (starts in the module's docstring)."""
        k = self.k
        eta1 = float(self.one_step(Preconditioner.SCALAR, Side.RIGHT)[0])
        starts = [] if ab_hint is None else [np.array([ab_hint] + [0.0] * (k - 1))]
        starts.append(np.array([eta1] + [0.0] * (k - 1)))
        randoms = []
        if k >= 2:
            rng = np.random.default_rng(0)
            scale = max(abs(eta1), abs(ab_hint or 0.0), 1e-3)
            starts.append(np.full(k, eta1 / k))
            randoms = [scale * rng.standard_normal(k) for _ in range(RANDOM_STARTS)]
        return self.solve(Preconditioner.SCALAR, Side.RIGHT, starts, randoms)

    def one_side(self, structure: Preconditioner, side: Side, etas: np.ndarray
                 ) -> tuple[np.ndarray, bool]:
        """The preconditioners of one side (starts in the module's docstring)."""
        k = self.k
        one = self.one_step(structure, side)
        scalar = structure.params(Preconditioner.SCALAR.matrices(etas, k, self.d))
        starts = [scalar, np.concatenate([one, np.zeros((k - 1) * one.size)])]
        randoms = []
        if k >= 2:  # (one step is a linear least squares: its optimum is ``one``)
            rng = np.random.default_rng(1 if side is Side.RIGHT else 2)
            scale = max(float(np.abs(etas).max()), float(np.abs(one).max()), 1e-3)
            starts.append(np.tile(one / k, k))
            randoms = [scale * rng.standard_normal(scalar.size) for _ in range(RANDOM_STARTS)]
        return self.solve(structure, side, starts, randoms)

    def both(self, structure: Preconditioner, etas: np.ndarray, right: np.ndarray,
             left: np.ndarray) -> tuple[np.ndarray, bool]:
        """Λ_j and Γ_j from the one-sided optima ``right`` and ``left`` (starts in the module's
        docstring), each rescaled to ``tr Λ_j = d``."""
        ident = structure.params(np.asarray(self.eye))
        scalar = structure.params(Preconditioner.SCALAR.matrices(etas, self.k, self.d))
        starts = [np.concatenate([ident, right]), np.concatenate([left, ident]),
                  np.concatenate([ident, scalar])]
        rng = np.random.default_rng(3)
        scale = max(float(np.abs(etas).max()), 1e-3)
        randoms = [np.concatenate([ident + 0.5 * rng.standard_normal(ident.size),
                                   scale * rng.standard_normal(ident.size)])
                   for _ in range(RANDOM_STARTS)]
        return self.solve(structure, Side.BOTH, *([self._on_gauge(p, structure) for p in ps]
                                                  for ps in (starts, randoms)))

    def _on_gauge(self, p: np.ndarray, structure: Preconditioner) -> np.ndarray:
        """``(α_j Λ_j, Γ_j/α_j)`` with ``tr α_j Λ_j = d`` (a step with ``tr Λ_j = 0`` kept)."""
        size, n = structure.size(self.d), self.k * structure.size(self.d)
        out = p.copy()
        traces = np.einsum("jbb->j", structure.matrices(p[:n], self.k, self.d))
        for j, tr in enumerate(traces):
            if tr != 0:
                out[j * size:(j + 1) * size] *= self.d / tr
                out[n + j * size:n + (j + 1) * size] *= tr / self.d
        return out


def _rel(r: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    scale_fro = float(np.linalg.norm(y))
    scale_max = float(np.abs(y).max()) if y.size else 0.0
    return (float(np.linalg.norm(r)) / scale_fro if scale_fro > 0 else float("nan"),
            float(np.abs(r).max()) / scale_max if scale_max > 0 else float("nan"))


def fit_iterates(gd: GDIterates, y: np.ndarray, k: int,
                 structure: Preconditioner = Preconditioner.SCALAR,
                 sides: Sequence[Side] = (Side.RIGHT,), *, ab_hint: float | None = None,
                 etas: Sequence[float] | None = None,
                 structure_of_theta: float | None = None) -> dict[Side, GDStepFit]:
    """:func:`fit_gd_predictions` on built iterates and ŷ (complex (n, m, d) at ``gd.times``),
    for each of ``sides`` (one scalar fit is shared; ``both`` starts from the one-sided
    optima, which it fits too; at d = 1 every structure and side is the scalar fit).
    ``ab_hint`` adds the start ``[ab, 0, …]`` to the scalar fit; ``etas``, the scalar optimum
    already found, skips it."""
    prob = _Problem(gd, y, k)
    if etas is None:
        found_etas, scalar_ok = prob.scalar(ab_hint)
    else:
        found_etas, scalar_ok = np.asarray(etas, np.float64), True
    label, structure = structure, Preconditioner.SCALAR if gd.d == 1 else structure  # 1×1: η
    found: dict[Side, tuple[np.ndarray, bool]] = {}
    if structure is not Preconditioner.SCALAR:
        for side in (Side.RIGHT, Side.LEFT):
            if side in sides or Side.BOTH in sides:
                found[side] = prob.one_side(structure, side, found_etas)
        if Side.BOTH in sides:
            found[Side.BOTH] = prob.both(structure, found_etas, found[Side.RIGHT][0],
                                         found[Side.LEFT][0])
    scalar_fit = prob.unpack(found_etas, Preconditioner.SCALAR, Side.RIGHT)
    scalar_res = _rel(gd.predict(*scalar_fit) - y, y)[0]
    out = {}
    for side in sides:
        if structure is Preconditioner.SCALAR:  # the same fit on either side
            (gammas, lambdas), ok = scalar_fit, scalar_ok
        else:
            gammas, lambdas = prob.unpack(found[side][0], structure, side)
            ok = found[side][1]
        rel, max_rel = _rel(gd.predict(gammas, lambdas) - y, y)
        right = side.right or structure is Preconditioner.SCALAR
        left = side.left and structure is not Preconditioner.SCALAR
        out[side] = GDStepFit(
            k=k, preconditioner=label.value, side=side.value,
            etas=[float(e) for e in found_etas], gammas=gammas.tolist(),
            lambdas=lambdas.tolist(),
            gamma_forms=[gamma_form(g) for g in gammas] if right else [],
            lambda_forms=[gamma_form(g) for g in lambdas] if left else [],
            rel_residual=rel, max_rel_err=max_rel, scalar_residual=scalar_res,
            improvement=1.0 - rel / scalar_res if scalar_res > 0 else float("nan"),
            converged=ok, t_checked=gd.times, sequences=int(y.shape[0]),
            structure=structure_of_theta)
    return out


def fit_gd_predictions(x: torch.Tensor, y: Any, k: int, ts: Sequence[int] | None = None,
                       preconditioner: Preconditioner | str = Preconditioner.SCALAR,
                       side: Side | str = Side.RIGHT) -> GDStepFit:
    """The k preconditioners of the given structure and side that bring k GD steps on the
    prompts ``x`` closest to the predictions ``y`` (the module's docstring).

    Arguments:
        x: complex (n, T, d) prompts, T >= 2.
        y: complex (n, T−1, d) predictions with ``y[:, t−2]`` = ŷ_t (the layout of
            :meth:`mesadyn.models.Model.predict`).
        k: the number of GD steps (>= 1).
        ts: the positions compared (default every t = 2..T).
        preconditioner: a :class:`Preconditioner` or its name (``scalar`` by default).
        side: a :class:`Side` or its name (``right`` by default; a scalar fit is the same on
            either side).

    Raises:
        MesadynError: k < 1, an unknown preconditioner or side, x or y of the wrong shape, a
            position out of range (each names the value), or arrays that do not fit in memory.
    """
    k = check_int("k", k, 1)
    structure = check_choice("preconditioner", preconditioner, Preconditioner)
    where = check_choice("side", side, Side)
    xc = check_x(x, 2)
    n, T, d = (int(s) for s in xc.shape)
    yy = np.asarray(y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else y,
                    dtype=np.complex128)
    if yy.shape != (n, T - 1, d):
        raise MesadynError(f"y must have shape {(n, T - 1, d)} (ŷ_2..ŷ_T of x), got {yy.shape}")
    times = check_times(ts, T)
    check_fit_size(xc, len(times), k, structure, where)
    return fit_iterates(GDIterates(xc, times), yy[:, [t - 2 for t in times]], k, structure,
                        (where,))[where]
