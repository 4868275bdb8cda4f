"""Many trajectories of the full flow in one solve: batched Dormand–Prince 5(4) and a
batched Rosenbrock method (Rodas4).

Each row of the batch is its own initial value problem with its own step size, its own error
control and its own stopping; rows that are done (steady state, ``t_end``, ``max_steps`` or a
failure) leave the batch.  What is batched is the linear algebra: every stage evaluates ``−∇L``
for all active rows in one vectorised contraction
(:func:`mesadyn.field.batched.batched_loss_and_grad`).  Two methods (:class:`BatchMethod`):

* ``dopri5``: the stepping rules of scipy's ``RK45`` (the same tableau, error norm, initial-step
  selection, safety factor 0.9, step factors in [0.2, 10], no growth right after a rejection),
  applied row-wise, so a batch of N gives, row by row, what ``integrate(...,
  solver="scipy:RK45")`` gives for each start (tested to 1e-9).  Explicit, so stability-limited
  on the stiff full flow (≈ 1100 steps per row from a Gaussian init at d = 3, T = 20).
* ``rodas4``: the L-stable, stiffly accurate Rosenbrock method RODAS of order 4(3) (E. Hairer
  and G. Wanner, *Solving Ordinary Differential Equations II*, 2nd ed., Springer 1996; the
  coefficients of their code ``rodas.f``, ``METH = 1``), with the exact Jacobian ``−∇²L``
  (:func:`mesadyn.field.batched.batched_hessian`) and one batched LU of ``I/(hγ) + ∇²L`` per
  step and row.  Per-row error control on the embedded order-3 solution (the same scaled RMS
  norm as ``dopri5``; step factors ``0.9·err^(−1/4)`` in [0.2, 6], no growth right after a
  rejection).  Its steps are bounded by accuracy, not stability: at rtol 1e-10 it needs about
  twice dopri5's steps (order 4 against 5), so it pays at looser tolerances, which suffice for
  the end points — from the Gaussian init (σ_w = 0.01, d = 3, T = 20) rtol 1e-6,
  atol 1e-8·σ_w takes ≈ 210 steps per row and reaches the same fixed point as dopri5 at
  rtol 1e-12 to 3e-11, far below the stopping rule's own resolution (the end point at
  max|∇L| < 1e-8 lies ≈ 7e-9 from it); from O(1) diagonal starts the same tolerances are off by
  1e-7, so rtol ≤ 1e-8 there (``benchmarks/bench_ensemble.py``, docs/ensembles.md).

A row is bounded by attempts: it stops after ``max_steps`` accepted or ``max_steps`` rejected
steps, and fails at once where its step size is not finite and positive (no finite first
slope).  A *verdict* hook (:func:`mesadyn.analysis.steady.saddle_verdict`) judges the rows the
steady-state test would stop: a minimum stops (``converged``), a saddle integrates on with the
test suspended until its gradient exceeds ``steady_tol`` again, and is ``saddle`` if still
there at ``t_end``.

Optionally a per-row *event* ``g(θ)`` is located (its first upward zero crossing, by bisection
on the cubic Hermite interpolant of the step) — e.g. the saddle-escape time ``ab = ab*/2`` —
and the rows are saved at common times ``t_save`` (the same interpolant), for both methods.
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..errors import MesadynError, check_int, check_positive
from ..model import MaskLike, free_mask
from ..outcome import Outcome
from ..progress import ProgressCallback
from ._options import DEFAULT_MAX_STEPS
from ._results import SolverStats
from ._rodas4 import R_EXPONENT, R_MAX_FACTOR, R_MIN_FACTOR, rodas4_step

if TYPE_CHECKING:
    from ..field import Field

FloatArray = npt.NDArray[np.float64]
#: A batched function of full θ rows (M, 18d²) → (M,), e.g. ``mean(ab) − ab*/2``.
BatchEvent = Callable[[FloatArray], FloatArray]
#: The verdict on full θ rows (M, 18d²) that the steady-state test would stop: an
#: :class:`~mesadyn.outcome.Outcome` value per row (``converged``: stop, ``saddle``: integrate
#: on, anything else: stop with that outcome).
BatchVerdict = Callable[[FloatArray], npt.NDArray[np.str_]]

# Dormand–Prince 5(4), as scipy.integrate.RK45.
_C = np.array([0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1])
_A = [np.array([]), np.array([1 / 5]), np.array([3 / 40, 9 / 40]),
      np.array([44 / 45, -56 / 15, 32 / 9]),
      np.array([19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729]),
      np.array([9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656])]
_B = np.array([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])
_E = np.array([-71 / 57600, 0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40])
_SAFETY, _MIN_FACTOR, _MAX_FACTOR = 0.9, 0.2, 10.0
_EXPONENT = -1 / 5
_EPS = float(np.finfo(np.float64).eps)


class BatchMethod(enum.StrEnum):
    """The stepper of :func:`integrate_batch`."""

    DOPRI5 = "dopri5"
    """Explicit Dormand–Prince 5(4), scipy ``RK45``'s rules row by row (stability-limited on the
    stiff full flow)."""
    RODAS4 = "rodas4"
    """Linearly implicit Rosenbrock RODAS 4(3), L-stable, exact Jacobian ``−∇²L``, one batched
    LU per step (the stiff full flow's method)."""


#: The default of :func:`integrate_batch` (measured: ``benchmarks/bench_ensemble.py``).
DEFAULT_BATCH_METHOD = BatchMethod.DOPRI5


def check_batch_method(method: BatchMethod | str) -> BatchMethod:
    """``method`` as a :class:`BatchMethod`, or `MesadynError` naming it."""
    try:
        return BatchMethod(method)
    except ValueError:
        raise MesadynError(f"unknown batch method {method!r}; choose one of "
                           f"{', '.join(BatchMethod)}") from None


@dataclass(frozen=True)
class BatchFlowResult:
    """N full-flow runs from one batched solve; row k is the run from ``theta0[k]``.

    Per row: the end point `theta`, its time `t`, `loss`, `grad_max` (max|∇L| over the free
    entries), `status` (an :class:`~mesadyn.outcome.Outcome` value), `n_accepted`,
    `n_rejected` (the row's steps), `event_t` (the first upward crossing of the event, NaN if
    none or no event), and, if saved, `theta_saved` (N, len(t_save), 18d²; a row that stopped
    early holds its end point).  The whole solve's counts are one
    :class:`~mesadyn.flow.SolverStats`, `solver_stats` (as for a single flow): `nfev` the
    right-hand-side rows evaluated, `njev` the Jacobian (Hessian) rows evaluated (``rodas4``:
    one per attempted step and row), `n_accepted`/`n_rejected` the rows' steps summed,
    `wall_s`; :attr:`nfev`, :attr:`njev` and :attr:`wall_s` read them.  `n_calls` counts the
    batched calls (several rows each); `method` is the stepper.
    """

    theta0: FloatArray
    theta: FloatArray
    t: FloatArray
    loss: FloatArray
    grad_max: FloatArray
    status: npt.NDArray[np.str_]
    n_accepted: npt.NDArray[np.int64]
    n_rejected: npt.NDArray[np.int64]
    event_t: FloatArray
    mask: npt.NDArray[np.bool_]
    t_save: FloatArray | None
    theta_saved: FloatArray | None
    solver_stats: SolverStats
    n_calls: int
    rtol: float
    atol: float
    steady_tol: float
    t_end: float
    method: BatchMethod = BatchMethod.DOPRI5

    @property
    def n(self) -> int:
        return int(self.theta.shape[0])

    @property
    def nfev(self) -> int:
        """Right-hand-side rows evaluated (``solver_stats.nfev``)."""
        return self.solver_stats.nfev

    @property
    def njev(self) -> int:
        """Jacobian (Hessian) rows evaluated (``solver_stats.njev``)."""
        return self.solver_stats.njev

    @property
    def wall_s(self) -> float:
        """Wall-clock seconds of the solve (``solver_stats.wall_s``)."""
        return self.solver_stats.wall_s

    @property
    def converged(self) -> npt.NDArray[np.bool_]:
        return self.status == Outcome.CONVERGED.value

    def counts(self) -> dict[str, int]:
        """How many rows ended with each status."""
        return Outcome.counts(self.status.tolist())

    def to_dict(self) -> dict[str, object]:
        """Solver summary, JSON-ready (per-row arrays are in the run file, not here)."""
        s = self.solver_stats
        return {"solver": f"batched:{self.method.value}", "n": self.n,
                "statuses": self.counts(), "nfev": s.nfev, "njev": s.njev,
                "n_calls": self.n_calls, "n_accepted_total": s.n_accepted,
                "n_rejected_total": s.n_rejected, "wall_s": s.wall_s,
                "rtol": self.rtol, "atol": self.atol, "steady_tol": self.steady_tol,
                "t_end": self.t_end}


def _step_factors(err: FloatArray, lo: float, hi: float,
                  exponent: float) -> tuple[FloatArray, FloatArray]:
    """Per-row step factors from the scaled error norm: ``(grow, shrink)`` for accepted and
    rejected rows, ``SAFETY·err^exponent`` clipped to ``[lo, hi]`` (``hi`` where ``err = 0``,
    ``lo`` where it is not finite)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        grow = np.where(err == 0, hi, np.minimum(hi, _SAFETY * err**exponent))
        shrink = np.where(np.isfinite(err), np.maximum(lo, _SAFETY * err**exponent), lo)
    return grow, shrink


def _rms(x: FloatArray) -> FloatArray:
    out: FloatArray = np.sqrt(np.mean(x * x, axis=-1))
    return out


def _hermite(y0: FloatArray, f0: FloatArray, y1: FloatArray, f1: FloatArray,
             h: FloatArray, s: FloatArray) -> FloatArray:
    """The cubic Hermite interpolant of a step at fractions ``s`` (rows broadcast)."""
    s = s[:, None]
    s2, s3 = s * s, s * s * s
    hh = h[:, None]
    out: FloatArray = ((2 * s3 - 3 * s2 + 1) * y0 + (s3 - 2 * s2 + s) * hh * f0
                       + (-2 * s3 + 3 * s2) * y1 + (s3 - s2) * hh * f1)
    return out


def integrate_batch(field: Field, theta0: npt.ArrayLike, *, t_end: float,
                    rtol: float = 1e-10, atol: float = 1e-12, steady_tol: float = 1e-8,
                    max_steps: int = DEFAULT_MAX_STEPS, mask: MaskLike = None,
                    event: BatchEvent | None = None, t_save: npt.ArrayLike | None = None,
                    progress: ProgressCallback | None = None,
                    method: BatchMethod | str = DEFAULT_BATCH_METHOD,
                    verdict: BatchVerdict | None = None) -> BatchFlowResult:
    """Integrate ``dθ/dτ = −∇L(θ)`` (Eq. 2) from every row of ``theta0`` in one batched solve.

    # Arguments
    - `field`: the field (the exact field and the sampled fields are vectorised; others are
      evaluated row by row).
    - `theta0`: (N, 18d²) starts.
    - `t_end`, `rtol`, `atol`: per row, as :func:`~mesadyn.flow.integrate`.
    - `max_steps`: per row, the accepted steps and, apart, the rejected steps (``max_steps``
      once either runs out).
    - `steady_tol`: a row stops (``converged``) once max|∇L| over its free entries is below it
      (0: never).
    - `verdict`: judges the rows the steady-state test would stop (:data:`BatchVerdict`;
      ``None``: every such row is ``converged``).
    - `mask`: which entries evolve (:func:`mesadyn.model.free_mask`), the same for every row.
    - `event`: ``g(θ_rows) -> (M,)``; its first upward zero crossing per row is `event_t`.
    - `t_save`: common save times (increasing, in ``[0, t_end]``).
    - `progress`: called with the fraction of rows done after every batched step.
    - `method`: the stepper (:class:`BatchMethod`); ``rodas4`` needs the field's Hessian
      (:func:`mesadyn.field.batched.batched_hessian`).

    # Returns
    A :class:`BatchFlowResult`.  A failed row (step-size underflow, non-finite state) is data.

    # Raises
    `MesadynError` for bad input.
    """
    from ..field.batched import (
        active_grad,
        active_hessian,
        active_index,
        batched_hessian,
        batched_loss_and_grad,
        closed_form,
    )

    meth = check_batch_method(method)
    th0 = np.array(theta0, dtype=np.float64, ndmin=2)
    if th0.ndim != 2 or th0.shape[1] != field.n_params or th0.shape[0] < 1:
        raise MesadynError(f"theta0 must have shape (N >= 1, {field.n_params}), got "
                           f"{th0.shape}")
    if not np.isfinite(th0).all():
        raise MesadynError("theta0 has non-finite entries")
    t_end = check_positive("t_end", t_end)
    rtol, atol = check_positive("rtol", rtol), check_positive("atol", atol)
    max_steps = check_int("max_steps", max_steps, 1)
    steady = float(steady_tol)
    if not math.isfinite(steady) or steady < 0:
        raise MesadynError(f"steady_tol must be >= 0, got steady_tol={steady_tol!r}")
    ts_save = None
    if t_save is not None:
        ts_save = np.asarray(t_save, dtype=np.float64).ravel()
        if ts_save.size == 0 or not np.isfinite(ts_save).all() or ts_save[0] < 0 \
                or np.any(np.diff(ts_save) <= 0) or ts_save[-1] > t_end:
            raise MesadynError("t_save must be strictly increasing within [0, t_end]")
    free = free_mask(mask, field.d)
    N = th0.shape[0]
    calls = [0, 0, 0]  # batched calls, rows evaluated, Jacobian rows

    def full(rows: npt.NDArray[np.intp], Y: FloatArray) -> FloatArray:
        th = th0[rows].copy()
        th[:, free] = Y
        return th

    def grad_free(rows: npt.NDArray[np.intp], Y: FloatArray) -> FloatArray:
        """``∇L`` on the free entries of the rows' θ."""
        _, g = batched_loss_and_grad(field, full(rows, Y))
        out: FloatArray = g[:, free]
        return out

    def hess_free(rows: npt.NDArray[np.intp], Y: FloatArray) -> FloatArray:
        """``∇²L`` on the free entries of the rows' θ."""
        return batched_hessian(field, full(rows, Y), free)

    ex = closed_form(field) if meth is BatchMethod.RODAS4 else None
    if ex is not None:  # the closed forms in the active coordinates, without θ's scatter
        aidx = active_index(ex)
        where = np.full(field.n_params, -1, dtype=np.intp)
        where[aidx] = np.arange(aidx.size)
        pos = where[np.flatnonzero(free)]  # free ⊆ active (free_mask)
        Z0 = th0[:, aidx]
        polynomial = ex

        def zrows(rows: npt.NDArray[np.intp], Y: FloatArray) -> FloatArray:
            Z = Z0[rows].copy()
            Z[:, pos] = Y
            return Z

        def grad_free(rows: npt.NDArray[np.intp], Y: FloatArray) -> FloatArray:
            out: FloatArray = active_grad(polynomial, zrows(rows, Y))[:, pos]
            return out

        def hess_free(rows: npt.NDArray[np.intp], Y: FloatArray) -> FloatArray:
            out: FloatArray = active_hessian(polynomial, zrows(rows, Y))[:, pos[:, None],
                                                                          pos[None, :]]
            return out

    def fun(rows: npt.NDArray[np.intp], Y: FloatArray) -> FloatArray:
        """``−∇L`` on the free entries; NaN for a non-finite trial row (the step rejects it)."""
        calls[0] += 1
        calls[1] += len(rows)
        out = np.full_like(Y, np.nan)
        ok = np.isfinite(Y).all(axis=1)
        if ok.any():
            with np.errstate(over="ignore", invalid="ignore"):
                out[ok] = -grad_free(rows[ok], Y[ok])
        return out

    def jac(rows: npt.NDArray[np.intp], Y: FloatArray) -> FloatArray:
        """``∂(−∇L)/∂Y = −∇²L`` on the free entries (Y finite)."""
        calls[2] += len(rows)
        with np.errstate(over="ignore", invalid="ignore"):
            out: FloatArray = -hess_free(rows, Y)
        return out

    start = time.perf_counter()
    allrows = np.arange(N)
    Y = th0[:, free].copy()
    F = fun(allrows, Y)
    t = np.zeros(N)
    status = np.full(N, "", dtype="<U9")
    n_acc = np.zeros(N, dtype=np.int64)
    n_rej = np.zeros(N, dtype=np.int64)
    event_t = np.full(N, np.nan)
    with np.errstate(all="ignore"):
        g_prev = event(full(allrows, Y)) if event is not None else None
    saved = None
    if ts_save is not None:
        saved = np.full((N, ts_save.size, free.sum()), np.nan)
        at0 = ts_save == 0.0
        saved[:, at0] = Y[:, None, :]
    # initial step, as scipy's select_initial_step (error estimator of order 4 for dopri5, 3 for
    # rodas4)
    est_order = 4 if meth is BatchMethod.DOPRI5 else 3
    with np.errstate(all="ignore"):  # a row without a finite first slope fails just below
        scale = atol + np.abs(Y) * rtol
        d0, d1 = _rms(Y / scale), _rms(F / scale)
        h0 = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / np.where(d1 > 0, d1, 1.0))
        h0 = np.minimum(h0, t_end)
        F1 = fun(allrows, Y + h0[:, None] * F)
        d2 = _rms((F1 - F) / scale) / h0
        h1 = np.where((d1 <= 1e-15) & (d2 <= 1e-15), np.maximum(1e-6, h0 * 1e-3),
                      (0.01 / np.maximum(np.maximum(d1, d2), 1e-300)) ** (1 / (est_order + 1)))
        h = np.minimum(np.minimum(100 * h0, h1), t_end)
    gmax = np.max(np.abs(F), axis=1)
    leaving = np.zeros(N, dtype=bool)  # rows that left a saddle: steady-state test suspended

    def steady_stop(rows: npt.NDArray[np.intp], gm: FloatArray) -> None:
        """The steady-state test on ``rows`` (their slopes' max-abs ``gm``), with the
        verdict: minima stop, saddles go on with the test suspended, anything else stops."""
        if steady <= 0:
            return
        leaving[rows[gm >= steady]] = False  # away from the saddle: the test applies again
        hit = rows[(gm < steady) & ~leaving[rows]]
        if hit.size == 0:
            return
        if verdict is None:
            status[hit] = Outcome.CONVERGED.value
            return
        says = np.asarray(verdict(full(hit, Y[hit])), dtype=str)
        saddle = says == Outcome.SADDLE.value
        leaving[hit[saddle]] = True
        status[hit[~saddle]] = says[~saddle]

    with np.errstate(invalid="ignore"):
        unusable = ~np.isfinite(F).all(axis=1) | ~(h > 0) | ~np.isfinite(h)
    status[unusable] = Outcome.FAILED.value  # no first slope or no first step: nothing to do
    usable = np.flatnonzero(~unusable)
    steady_stop(usable, gmax[usable])
    rejected_before = np.zeros(N, dtype=bool)

    def accept(ok: npt.NDArray[np.intp], t_old: FloatArray, y_old: FloatArray,
               f_old: FloatArray, h_ok: FloatArray) -> None:
        """Bookkeeping after the rows ``ok`` stepped from ``t_old`` by ``h_ok`` (their new state
        and slope are in ``Y``, ``F``): time, counts, events, save points, statuses."""
        t[ok] = np.where(t_end - (t_old + h_ok) <= 4 * _EPS * t_end, t_end, t_old + h_ok)
        n_acc[ok] += 1
        if event is not None and g_prev is not None and ok.size:
            g_new = event(full(ok, Y[ok]))
            cross = (g_prev[ok] < 0) & (g_new >= 0) & np.isnan(event_t[ok])
            if cross.any():
                c = np.flatnonzero(cross)
                lo, hi = np.zeros(c.size), np.ones(c.size)
                for _ in range(60):
                    mid = 0.5 * (lo + hi)
                    ym = _hermite(y_old[c], f_old[c], Y[ok[c]], F[ok[c]], h_ok[c], mid)
                    up = event(full(ok[c], ym)) >= 0
                    hi, lo = np.where(up, mid, hi), np.where(up, lo, mid)
                event_t[ok[c]] = t_old[c] + hi * h_ok[c]
            g_prev[ok] = g_new
        if saved is not None and ts_save is not None and ok.size:
            inside = (ts_save[None, :] > t_old[:, None]) & (ts_save[None, :] <= t[ok][:, None])
            r, j = np.nonzero(inside)
            if r.size:
                s_frac = (ts_save[j] - t_old[r]) / h_ok[r]
                saved[ok[r], j] = _hermite(y_old[r], f_old[r], Y[ok[r]], F[ok[r]], h_ok[r],
                                           s_frac)
        gm = np.max(np.abs(F[ok]), axis=1)
        bad = ~np.isfinite(Y[ok]).all(axis=1) | ~np.isfinite(gm)
        done_t = t[ok] >= t_end
        maxed = n_acc[ok] >= max_steps
        status[ok[maxed]] = Outcome.MAX_STEPS.value
        status[ok[done_t]] = Outcome.T_END.value
        good = ~bad
        steady_stop(ok[good], gm[good])
        status[ok[bad]] = Outcome.FAILED.value

    def reject(rej: npt.NDArray[np.intp], h_new: FloatArray) -> None:
        h[rej] = h_new
        n_rej[rej] += 1
        rejected_before[rej] = True
        with np.errstate(invalid="ignore"):  # a NaN step is no step: the row fails
            tiny = ~(h[rej] > 10 * _EPS * np.maximum(np.abs(t[rej]), t_end))
        status[rej[n_rej[rej] >= max_steps]] = Outcome.MAX_STEPS.value
        status[rej[tiny]] = Outcome.FAILED.value

    if meth is BatchMethod.DOPRI5:
        K = np.empty((7, N, Y.shape[1]))
    while True:
        act = np.flatnonzero(status == "")
        if act.size == 0:
            break
        y, f = Y[act], F[act]
        t0 = t[act]
        hs = np.minimum(h[act], t_end - t0)
        if meth is BatchMethod.DOPRI5:
            k = K[:, : act.size]
            k[0] = f
            for s in range(1, 6):
                dy = np.tensordot(_A[s], k[:s], axes=(0, 0)) * hs[:, None]
                k[s] = fun(act, y + dy)
            y_new = y + hs[:, None] * np.tensordot(_B, k[:6], axes=(0, 0))
            f_new = fun(act, y_new)
            k[6] = f_new
            sc = atol + np.maximum(np.abs(y), np.abs(y_new)) * rtol
            with np.errstate(invalid="ignore", over="ignore"):
                err = _rms(np.tensordot(_E, k, axes=(0, 0)) * hs[:, None] / sc)
            acc = err < 1  # NaN / inf: rejected
            grow, shrink = _step_factors(err, _MIN_FACTOR, _MAX_FACTOR, _EXPONENT)
        else:
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                y_new, err_vec = rodas4_step(partial(fun, act), y, f, jac(act, y), hs)
                sc = atol + np.maximum(np.abs(y), np.abs(y_new)) * rtol
                err = _rms(err_vec / sc)
            acc = err < 1  # NaN / inf: rejected
            grow, shrink = _step_factors(err, R_MIN_FACTOR, R_MAX_FACTOR, R_EXPONENT)
            f_new = np.full_like(y_new, np.nan)
            if acc.any():
                f_new[acc] = fun(act[acc], y_new[acc])
        grow = np.where(rejected_before[act], np.minimum(1.0, grow), grow)
        # ---- rejected rows: smaller step, or underflow
        reject(act[~acc], hs[~acc] * shrink[~acc])
        # ---- accepted rows
        ok = act[acc]
        h[ok] = hs[acc] * grow[acc]
        rejected_before[ok] = False
        Y[ok], F[ok] = y_new[acc], f_new[acc]
        accept(ok, t0[acc], y[acc], f[acc], hs[acc])
        if progress is not None:
            progress(float(np.mean(status != "")))
    wall = time.perf_counter() - start
    held = np.flatnonzero(leaving & (status == Outcome.T_END.value))
    if held.size and verdict is not None:  # at t_end still where a saddle held them
        says = np.asarray(verdict(full(held, Y[held])), dtype=str)
        status[held] = says
    theta = full(allrows, Y)
    with np.errstate(all="ignore"):  # a failed row's values may overflow: they are data
        loss, g = batched_loss_and_grad(field, np.where(np.isfinite(theta), theta, 0.0))
    grad_max = np.max(np.abs(g[:, free]), axis=1)
    theta_saved = None
    if saved is not None:
        # rows that stopped before a save time hold their end point there
        hold = np.isnan(saved).any(axis=2)
        saved[hold] = np.broadcast_to(Y[:, None, :], saved.shape)[hold]
        theta_saved = np.repeat(th0[:, None, :], saved.shape[1], axis=1)
        theta_saved[:, :, free] = saved
    stats = SolverStats(nfev=calls[1], njev=calls[2], n_accepted=int(n_acc.sum()),
                        n_rejected=int(n_rej.sum()), n_monitor=None, wall_s=wall)
    return BatchFlowResult(
        theta0=th0, theta=theta, t=t, loss=loss, grad_max=grad_max, status=status,
        n_accepted=n_acc, n_rejected=n_rej, event_t=event_t, mask=free, t_save=ts_save,
        theta_saved=theta_saved, solver_stats=stats, n_calls=calls[0], rtol=rtol, atol=atol,
        steady_tol=steady, t_end=t_end, method=meth)
