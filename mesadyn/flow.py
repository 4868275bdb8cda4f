"""Gradient-flow integration ``dθ/dτ = −∇L(θ)`` (Eq. 2) with adaptive solvers from three libraries.

One integrator for any :class:`~mesadyn.field.Field` (:func:`integrate`) and for the reduced
2-D system of Lemma 5.2 (:func:`integrate_reduced`).  Backends:

* torchdiffeq — ``dopri5`` (default), ``dopri8``, ``bosh3``, ``adaptive_heun``;
* diffrax (the ``jax`` extra) — ``Tsit5``, ``Dopri5``, ``Dopri8``, ``Kvaerno5`` (implicit);
* scipy ``solve_ivp``'s solvers — ``RK45``, ``DOP853``, ``Radau`` and ``LSODA`` (implicit).

A name may also be written ``backend:name`` (e.g. ``scipy:radau``).  Implicit solvers get the
exact Jacobian ``−∇²L`` from the field's Hessian (restricted to the integrated coordinates).
Only the entries of θ that reach ŷ (Eq. 1) and lie in ``mask`` are integrated: every other
entry has zero (or masked) gradient and stays at its initial value exactly.

Statistics: ``nfev``/``njev`` count the calls of the right-hand side / Jacobian that the solver
made (counted in our wrappers: exact for every backend); ``n_accepted`` is exact everywhere;
``n_rejected`` is exact for torchdiffeq (step state), diffrax (its stats) and scipy's RK45 /
DOP853 (function calls per attempt are fixed), and ``None`` for Radau / LSODA, which do not
expose it.  Monitoring (loss, ‖∇L‖ at saved points, the steady-state test) is counted apart,
in ``n_monitor``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

import numpy as np
import torch

from .errors import MesadynError, check_int, check_positive
from .model import active_mask, block_labels, diagonal_mask, dim_of, unpack

#: solver name → (backend, name inside the backend).
SOLVERS: dict[str, tuple[str, str]] = {
    "dopri5": ("torchdiffeq", "dopri5"),
    "dopri8": ("torchdiffeq", "dopri8"),
    "bosh3": ("torchdiffeq", "bosh3"),
    "adaptive_heun": ("torchdiffeq", "adaptive_heun"),
    "Tsit5": ("diffrax", "Tsit5"),
    "Dopri5": ("diffrax", "Dopri5"),
    "Dopri8": ("diffrax", "Dopri8"),
    "Kvaerno5": ("diffrax", "Kvaerno5"),
    "RK45": ("scipy", "RK45"),
    "DOP853": ("scipy", "DOP853"),
    "Radau": ("scipy", "Radau"),
    "LSODA": ("scipy", "LSODA"),
}
IMPLICIT = frozenset({"Kvaerno5", "Radau", "LSODA"})
#: Right-hand-side calls per step attempt of scipy's explicit RK methods (stages + f(y_new)).
_SCIPY_EVALS_PER_ATTEMPT = {"RK45": 6, "DOP853": 12}
STATUSES = ("converged", "t_end", "max_steps", "failed")
DEFAULT_MAX_STEPS = 100_000


def solver_names() -> list[str]:
    """The valid ``--solver`` names."""
    return list(SOLVERS)


def resolve_solver(name: str) -> tuple[str, str]:
    """``(backend, method)`` for a solver name (exact name or ``backend:name``), else an error."""
    if name in SOLVERS:
        return SOLVERS[name]
    if isinstance(name, str) and ":" in name:
        backend, _, method = name.partition(":")
        for b, m in SOLVERS.values():
            if b == backend.lower() and m.lower() == method.lower():
                return b, m
    raise MesadynError(f"unknown solver {name!r}; valid: {', '.join(SOLVERS)}")


def _import_diffrax() -> tuple[Any, Any, Any]:
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        import diffrax
        import jax.numpy as jnp
    except ImportError:
        raise MesadynError(
            "diffrax solvers need the jax extra: pip install 'mesadyn[jax]'"
        ) from None
    return jax, jnp, diffrax


# ---- the problem: what is integrated ---------------------------------------------------
class _Problem:
    """A right-hand side on the integrated coordinates, with counted calls.

    Subclasses give ``rhs_np(y)``, ``jac_np(y)`` and ``monitor(y) -> (loss, grad_max)``.
    """

    y0: np.ndarray

    def __init__(self) -> None:
        self.nfev = 0
        self.njev = 0
        self.n_monitor = 0

    def rhs_np(self, y: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def jac_np(self, y: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def monitor(self, y: np.ndarray) -> tuple[float, float]:  # pragma: no cover - abstract
        raise NotImplementedError

    def rhs_torch(self, y: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.rhs_np(y.detach().cpu().numpy()))

    def jax_vector_field(self, jax: Any, jnp: Any) -> Callable[[Any], Any]:
        """``y ↦ rhs`` for diffrax: a counted ``pure_callback`` with an exact JVP ``J v``."""
        n = self.y0.size
        shape = jax.ShapeDtypeStruct((n,), jnp.float64)
        cache: dict[bytes, np.ndarray] = {}

        def f_cb(y: np.ndarray) -> np.ndarray:
            y = np.asarray(y, dtype=np.float64)
            return np.stack([self.rhs_np(row) for row in y.reshape(-1, n)]).reshape(y.shape)

        def jvp_cb(y: np.ndarray, v: np.ndarray) -> np.ndarray:
            y2 = np.asarray(y, dtype=np.float64).reshape(-1, n)
            v2 = np.asarray(v, dtype=np.float64).reshape(-1, n)
            rows = max(len(y2), len(v2))
            out = np.empty((rows, n))
            for k in range(rows):
                yk = y2[k if len(y2) > 1 else 0]
                key = yk.tobytes()
                if key not in cache:
                    cache.clear()
                    cache[key] = self.jac_np(yk)
                out[k] = cache[key] @ v2[k if len(v2) > 1 else 0]
            return out.reshape(np.broadcast_shapes(np.shape(y), np.shape(v)))

        @jax.custom_jvp
        def f(y: Any) -> Any:
            return jax.pure_callback(f_cb, shape, y, vmap_method="expand_dims")

        @f.defjvp
        def f_jvp(primals: Any, tangents: Any) -> Any:
            (y,), (v,) = primals, tangents
            jv = jax.pure_callback(jvp_cb, shape, y, v, vmap_method="expand_dims")
            return f(y), jv

        return f

    def jax_grad_max(self, jax: Any, jnp: Any) -> Callable[[Any], Any]:
        """``y ↦ max|∇L|`` (monitor, counted apart) for diffrax's steady-state event."""
        shape = jax.ShapeDtypeStruct((), jnp.float64)

        def cb(y: np.ndarray) -> np.ndarray:
            return np.asarray(self.monitor(np.asarray(y, dtype=np.float64))[1])

        return lambda y: jax.pure_callback(cb, shape, y, vmap_method="sequential")


class _FieldProblem(_Problem):
    """The full flow on the free coordinates ``active ∧ mask`` of θ."""

    def __init__(self, field: Any, theta0: torch.Tensor, mask: np.ndarray):
        super().__init__()
        self.field = field
        self.theta0 = field.check_theta(theta0).detach().clone()
        d = dim_of(self.theta0)
        self.mask = mask
        self.free = np.flatnonzero(active_mask(d) & mask)
        if self.free.size == 0:
            raise MesadynError("the mask leaves no trainable entry of θ")
        self._free_t = torch.from_numpy(self.free)
        self.y0 = self.theta0.numpy()[self.free].copy()
        self.implicit = False  # set by integrate() for implicit solvers

    def full(self, y: np.ndarray | torch.Tensor) -> torch.Tensor:
        th = self.theta0.clone()
        th[self._free_t] = torch.as_tensor(np.array(y, dtype=np.float64) if isinstance(
            y, np.ndarray) else y, dtype=torch.float64)
        return th

    def rhs_torch(self, y: torch.Tensor) -> torch.Tensor:
        self.nfev += 1
        if not torch.isfinite(y).all():  # a blown-up trial stage: let the solver reject it
            return torch.full_like(y, math.nan)
        with np.errstate(over="ignore", invalid="ignore"):  # trial stages may overflow
            _, g = self.field.loss_and_grad(self.full(y))
        return -g[self._free_t]

    def rhs_np(self, y: np.ndarray) -> np.ndarray:
        return self.rhs_torch(torch.from_numpy(np.array(y, dtype=np.float64))).numpy()

    def hessian_free(self, y: np.ndarray) -> np.ndarray:
        H = self.field.hessian(self.full(y)).numpy()
        return H[np.ix_(self.free, self.free)]

    def jac_np(self, y: np.ndarray) -> np.ndarray:
        self.njev += 1
        return -self.hessian_free(y)

    def monitor(self, y: np.ndarray) -> tuple[float, float]:
        self.n_monitor += 1
        loss, g = self.field.loss_and_grad(self.full(y))
        return float(loss), float(g[self._free_t].abs().max())

    def jax_vector_field(self, jax: Any, jnp: Any) -> Callable[[Any], Any]:
        """Native JAX (ExactField.jax_loss) for explicit solvers when the field has it; else
        (and always for Kvaerno5, whose Jacobian must come from the field's Hessian) the
        counted torch bridge."""
        if not self.field.has_jax_loss or self.implicit:
            return super().jax_vector_field(jax, jnp)
        loss = self.field.jax_loss()
        theta0 = jnp.asarray(self.theta0.numpy())
        free = jnp.asarray(self.free)
        grad = jax.grad(lambda y: loss(theta0.at[free].set(y)))

        def count() -> None:
            self.nfev += 1

        def f(y: Any) -> Any:
            jax.debug.callback(count)
            return -grad(y)

        return f


class _ReducedProblem(_Problem):
    """The 2-D system of Lemma 5.2 on ``y = (a, b)``."""

    def __init__(self, system: Any, a0: float, b0: float):
        super().__init__()
        self.system = system
        self.y0 = np.array([a0, b0], dtype=np.float64)

    def rhs_np(self, y: np.ndarray) -> np.ndarray:
        self.nfev += 1
        da, db = self.system.rhs(y[0], y[1])
        return np.array([da, db], dtype=np.float64)

    def jac_np(self, y: np.ndarray) -> np.ndarray:
        self.njev += 1
        return self.system.jacobian(float(y[0]), float(y[1]))

    def monitor(self, y: np.ndarray) -> tuple[float, float]:
        self.n_monitor += 1
        da, db = self.system.rhs(y[0], y[1])
        return float(self.system.surrogate(y[0], y[1])), float(max(abs(da), abs(db)))


# ---- raw solution -------------------------------------------------------------------
@dataclass
class _Raw:
    t: np.ndarray
    y: np.ndarray
    n_accepted: int
    n_rejected: int | None
    status: str
    message: str


class _StepFailure(Exception):
    pass


class _TorchStepper:
    """One accepted torchdiffeq RK step at a time (its solver state machine, stepped by hand)."""

    def __init__(self, prob: _Problem, method: str, t_end: float, rtol: float, atol: float):
        from torchdiffeq._impl.interp import _interp_evaluate
        from torchdiffeq._impl.misc import _check_inputs
        from torchdiffeq._impl.odeint import SOLVERS as TD_SOLVERS

        self._interp_evaluate = _interp_evaluate
        y0 = torch.from_numpy(prob.y0.copy())
        t = torch.tensor([0.0, t_end], dtype=torch.float64)
        _, func, y0, t, rtol_, atol_, method, options, _, _ = _check_inputs(
            lambda _t, y: prob.rhs_torch(y), y0, t, rtol, atol, method, {}, None, TD_SOLVERS)
        self.solver = TD_SOLVERS[method](func=func, y0=y0, rtol=rtol_, atol=atol_, **options)
        self.solver._before_integrate(t)
        self.n_accepted = 0
        self.n_rejected = 0

    @property
    def t(self) -> float:
        return float(self.solver.rk_state.t1)

    @property
    def y(self) -> np.ndarray:
        return self.solver.rk_state.y1.numpy()

    def step(self) -> None:
        while True:
            old = self.solver.rk_state
            new = self.solver._adaptive_step(old)
            self.solver.rk_state = new
            if float(new.t1) > float(old.t1):
                self.n_accepted += 1
                if not torch.isfinite(new.y1).all():
                    raise _StepFailure(f"non-finite state at τ={float(new.t1):.6g}")
                return
            self.n_rejected += 1
            dt = float(new.dt)
            if not math.isfinite(dt) or dt <= 1e-15 * max(abs(float(old.t1)), 1e-300):
                raise _StepFailure(f"step size underflow at τ={float(old.t1):.6g} (dt={dt:.3g})")

    def interp(self, ts: np.ndarray) -> np.ndarray:
        st = self.solver.rk_state
        return np.stack([
            self._interp_evaluate(st.interp_coeff, st.t0, st.t1,
                                  torch.tensor(t, dtype=torch.float64)).numpy() for t in ts])


class _ScipyStepper:
    """One accepted step of a scipy ``OdeSolver`` at a time (its public ``step`` API)."""

    def __init__(self, prob: _Problem, method: str, t_end: float, rtol: float, atol: float):
        import scipy.integrate as si

        self.prob = prob
        self.method = method
        kw: dict[str, Any] = {"rtol": rtol, "atol": atol}
        if method in IMPLICIT:
            kw["jac"] = lambda _t, y: prob.jac_np(y)
        self.s = getattr(si, method)(lambda _t, y: prob.rhs_np(y), 0.0, prob.y0.copy(), t_end,
                                     **kw)
        self.n_accepted = 0
        self.n_rejected: int | None = 0 if method in _SCIPY_EVALS_PER_ATTEMPT else None

    @property
    def t(self) -> float:
        return float(self.s.t)

    @property
    def y(self) -> np.ndarray:
        return self.s.y

    def step(self) -> None:
        before = self.prob.nfev
        message = self.s.step()
        if self.s.status == "failed":
            raise _StepFailure(f"{self.method}: {message}")
        self.n_accepted += 1
        if self.n_rejected is not None:
            attempts = (self.prob.nfev - before) // _SCIPY_EVALS_PER_ATTEMPT[self.method]
            self.n_rejected += max(attempts - 1, 0)
        if not np.isfinite(self.s.y).all():
            raise _StepFailure(f"non-finite state at τ={self.s.t:.6g}")

    def interp(self, ts: np.ndarray) -> np.ndarray:
        return self.s.dense_output()(ts).T


def _drive(stepper: Any, prob: _Problem, t_end: float, t_eval: np.ndarray | None,
           max_steps: int, steady_tol: float, progress: Callable[[float], None] | None) -> _Raw:
    """Step until τ = t_end, the steady state (max|∇L| < steady_tol), max steps or a failure.

    Saved points: ``t_eval`` (within the run), else every accepted step; always the end point.
    """
    ts: list[float] = [0.0]
    ys: list[np.ndarray] = [prob.y0.copy()]
    nxt = 1 if t_eval is not None and t_eval[0] == 0.0 else 0
    status, message = "", ""
    if steady_tol > 0 and prob.monitor(prob.y0)[1] < steady_tol:
        return _Raw(np.array(ts), np.array(ys), 0, 0, "converged", "steady state at τ=0")
    while True:
        if stepper.n_accepted >= max_steps:
            status = "max_steps"
            message = f"hit max_steps={max_steps} at τ={stepper.t:.6g} < t_end={t_end:.6g}"
            break
        try:
            stepper.step()
        except _StepFailure as exc:
            status, message = "failed", str(exc)
            break
        t_new = stepper.t
        if t_eval is not None:
            j = int(np.searchsorted(t_eval, min(t_new, t_end), side="right"))
            if j > nxt:
                pts = t_eval[nxt:j]
                ts.extend(pts.tolist())
                ys.extend(list(stepper.interp(pts)))
                nxt = j
        if t_new >= t_end:
            status, message = "t_end", f"reached t_end={t_end:.6g}"
            break
        if t_eval is None:
            ts.append(t_new)
            ys.append(stepper.y.copy())
        if progress is not None:
            progress(t_new)
        if steady_tol > 0 and prob.monitor(stepper.y)[1] < steady_tol:
            status = "converged"
            message = f"max|∇L| < steady_tol={steady_tol:.3g} at τ={t_new:.6g}"
            break
    t_last = min(stepper.t, t_end)
    if ts[-1] != t_last:  # the end point (event, max steps, failure, or t_end off the grid)
        ts.append(t_last)
        ys.append(stepper.interp(np.array([t_end]))[0] if stepper.t > t_end
                  else stepper.y.copy())
    return _Raw(np.array(ts), np.array(ys), stepper.n_accepted, stepper.n_rejected, status,
                message)


def _solve_diffrax(prob: _Problem, method: str, t_end: float, rtol: float, atol: float,
                   t_eval: np.ndarray | None, max_steps: int, steady_tol: float) -> _Raw:
    """One ``diffrax.diffeqsolve`` (PID controller, steady-state ``Event``, no throw)."""
    jax, jnp, diffrax = _import_diffrax()
    f = prob.jax_vector_field(jax, jnp)
    term = diffrax.ODETerm(lambda t, y, args: f(y))
    solver = getattr(diffrax, method)()
    controller = diffrax.PIDController(rtol=rtol, atol=atol)
    if t_eval is None and max_steps * prob.y0.size <= 2 * 10**7:
        saveat = diffrax.SaveAt(t0=True, steps=True)
    else:
        grid = t_eval if t_eval is not None else np.linspace(0.0, t_end, 201)
        saveat = diffrax.SaveAt(ts=jnp.asarray(grid), t1=True)
    event = None
    if steady_tol > 0:
        gmax = prob.jax_grad_max(jax, jnp)
        event = diffrax.Event(cond_fn=lambda t, y, args, **kw: gmax(y) < steady_tol)
    # diffrax's own initial-step guess can land on a step whose trial stage overflows, after
    # which every step is rejected with a NaN error estimate; start from a safe small step.
    f0 = np.abs(prob.rhs_np(prob.y0)).max()
    y_scale = max(float(np.abs(prob.y0).max()), 1e-8)
    dt0 = min(t_end, 1e-3 * y_scale / f0) if f0 > 0 else t_end
    sol = diffrax.diffeqsolve(term, solver, t0=0.0, t1=t_end, dt0=dt0,
                              y0=jnp.asarray(prob.y0), saveat=saveat,
                              stepsize_controller=controller, event=event,
                              max_steps=max_steps, throw=False)
    t = np.asarray(sol.ts)
    y = np.asarray(sol.ys)
    keep = np.isfinite(t)
    t, y = t[keep], y[keep]
    order = np.argsort(t, kind="stable")
    t, y = t[order], y[order]
    if len(t) > 1:  # drop duplicated times (t1 saved twice)
        uniq = np.concatenate([[True], np.diff(t) > 0])
        t, y = t[uniq], y[uniq]
    stats = sol.stats
    acc = int(stats["num_accepted_steps"])
    rej = int(stats["num_rejected_steps"])
    R = diffrax.RESULTS
    if sol.result == R.successful:
        status, message = "t_end", f"reached t_end={t_end:.6g}"
    elif sol.result == R.event_occurred:
        status = "converged"
        message = f"max|∇L| < steady_tol={steady_tol:.3g} at τ={t[-1]:.6g}"
    elif sol.result == R.max_steps_reached:
        status = "max_steps"
        message = f"hit max_steps={max_steps} at τ={t[-1]:.6g} < t_end={t_end:.6g}"
    else:
        status, message = "failed", f"{method}: {sol.result}"
    if not np.isfinite(y).all():
        status, message = "failed", f"{method}: non-finite state"
    return _Raw(t, y, acc, rej, status, message)


def _check_common(solver: str, t_end: float, rtol: float, atol: float,
                  max_steps: int | None, steady_tol: float | None,
                  t_eval: Any) -> tuple[str, str, float, float, float, int, float, Any]:
    backend, method = resolve_solver(solver)
    t_end = check_positive("t_end", t_end)
    rtol = check_positive("rtol", rtol)
    atol = check_positive("atol", atol)
    max_steps = check_int("max_steps", DEFAULT_MAX_STEPS if max_steps is None else max_steps, 1)
    steady = 0.0 if steady_tol is None else float(steady_tol)
    if not math.isfinite(steady) or steady < 0:
        raise MesadynError(f"steady_tol must be >= 0, got steady_tol={steady_tol!r}")
    if t_eval is not None:
        t_eval = np.asarray(t_eval, dtype=np.float64).ravel()
        if t_eval.size == 0 or not np.isfinite(t_eval).all() or t_eval[0] < 0 \
                or np.any(np.diff(t_eval) <= 0) or t_eval[-1] > t_end:
            raise MesadynError(
                "t_eval must be strictly increasing, finite, within [0, t_end], got "
                f"{t_eval[:3].tolist()}…")
    if backend == "diffrax":
        _import_diffrax()
    return backend, method, t_end, rtol, atol, max_steps, steady, t_eval


def _run(prob: _Problem, backend: str, method: str, t_end: float, rtol: float, atol: float,
         t_eval: np.ndarray | None, max_steps: int, steady_tol: float,
         progress: Callable[[float], None] | None) -> _Raw:
    if backend == "diffrax":
        return _solve_diffrax(prob, method, t_end, rtol, atol, t_eval, max_steps, steady_tol)
    stepper_cls = _TorchStepper if backend == "torchdiffeq" else _ScipyStepper
    stepper = stepper_cls(prob, method, t_end, rtol, atol)
    return _drive(stepper, prob, t_end, t_eval, max_steps, steady_tol, progress)


def _thin(raw: _Raw, n_save: int) -> _Raw:
    """Keep at most ``n_save`` saved points (evenly by index, first and last kept)."""
    n = len(raw.t)
    if n_save >= n:
        return raw
    idx = np.unique(np.round(np.linspace(0, n - 1, n_save)).astype(int))
    return _Raw(raw.t[idx], raw.y[idx], raw.n_accepted, raw.n_rejected, raw.status, raw.message)


# ---- results -----------------------------------------------------------------------
@dataclass
class FlowResult:
    """A full gradient-flow run (see :func:`integrate`); arrays are float64 numpy."""

    t: np.ndarray
    theta: np.ndarray
    loss: np.ndarray
    grad_max: np.ndarray
    invariant: np.ndarray
    nfev: int
    njev: int
    n_accepted: int
    n_rejected: int | None
    n_monitor: int
    status: str
    message: str
    solver: str
    backend: str
    wall_s: float
    mask: np.ndarray
    free: np.ndarray
    rtol: float
    atol: float
    stiffness_ratio: float | None = None
    hessian_eigenvalues: np.ndarray | None = None
    field: dict[str, object] = dc_field(default_factory=dict)

    @property
    def final(self) -> np.ndarray:
        """θ at the last saved point."""
        return self.theta[-1]

    @property
    def converged(self) -> bool:
        return self.status == "converged"

    @property
    def d(self) -> int:
        return dim_of(self.theta[-1])

    def invariant_drift(self) -> float:
        """``max_τ |I(τ) − I(0)|`` for ``I = ‖A‖_F² − ‖P‖_F²``."""
        return float(np.max(np.abs(self.invariant - self.invariant[0])))

    def stats(self) -> dict[str, object]:
        """Solver statistics (JSON-ready)."""
        return {"nfev": self.nfev, "njev": self.njev, "n_accepted": self.n_accepted,
                "n_rejected": self.n_rejected, "n_monitor": self.n_monitor,
                "status": self.status, "message": self.message, "solver": self.solver,
                "backend": self.backend, "wall_s": self.wall_s, "rtol": self.rtol,
                "atol": self.atol, "stiffness_ratio": self.stiffness_ratio}

    def to_dataset(self) -> Any:
        """xarray Dataset: θ(τ), L, max|∇L|, invariant (dims ``tau``, ``param``); final blocks."""
        import xarray as xr

        d = self.d
        W_KQ, W_PV = unpack(torch.from_numpy(self.final.copy()))
        attrs = {k: ("" if v is None else v) for k, v in self.stats().items()}
        return xr.Dataset(
            {
                "theta": (("tau", "param"), self.theta),
                "loss": ("tau", self.loss),
                "grad_max": ("tau", self.grad_max),
                "invariant": ("tau", self.invariant),
                "W_KQ": (("row", "col"), W_KQ.numpy()),
                "W_PV": (("row", "col"), W_PV.numpy()),
            },
            coords={
                "tau": self.t,
                "param": np.arange(self.theta.shape[1]),
                "block": ("param", block_labels(d).astype(str)),
                "trainable": ("param", np.isin(np.arange(self.theta.shape[1]), self.free)),
            },
            attrs=attrs,
        )


@dataclass
class ReducedFlowResult:
    """A reduced-system run (see :func:`integrate_reduced`)."""

    t: np.ndarray
    a: np.ndarray
    b: np.ndarray
    a_exact: np.ndarray
    b_exact: np.ndarray
    loss: np.ndarray
    grad_max: np.ndarray
    nfev: int
    njev: int
    n_accepted: int
    n_rejected: int | None
    status: str
    message: str
    solver: str
    backend: str
    wall_s: float
    c1: float
    c2: float

    @property
    def ab(self) -> np.ndarray:
        return self.a * self.b

    @property
    def invariant(self) -> np.ndarray:
        return self.a * self.a - self.b * self.b

    def invariant_drift(self) -> float:
        """``max |a² − b² − Δ|`` over the saved points."""
        delta = (self.a[0] - self.b[0]) * (self.a[0] + self.b[0])
        return float(np.max(np.abs(self.invariant - delta)))

    def closed_form_max_error(self) -> float:
        """``max_τ ‖(a, b)(τ) − closed form‖`` over the saved points."""
        return float(np.max(np.hypot(self.a - self.a_exact, self.b - self.b_exact)))

    def stats(self) -> dict[str, object]:
        return {"nfev": self.nfev, "njev": self.njev, "n_accepted": self.n_accepted,
                "n_rejected": self.n_rejected, "status": self.status, "message": self.message,
                "solver": self.solver, "backend": self.backend, "wall_s": self.wall_s}

    def to_dataset(self) -> Any:
        """xarray Dataset over ``tau``: a, b, the closed form, ℓ̃, max|∇ℓ̃|, invariant."""
        import xarray as xr

        attrs = {k: ("" if v is None else v) for k, v in self.stats().items()}
        attrs.update(c1=self.c1, c2=self.c2)
        return xr.Dataset(
            {
                "a": ("tau", self.a), "b": ("tau", self.b),
                "a_closed_form": ("tau", self.a_exact), "b_closed_form": ("tau", self.b_exact),
                "loss": ("tau", self.loss), "grad_max": ("tau", self.grad_max),
                "invariant": ("tau", self.invariant),
            },
            coords={"tau": self.t},
            attrs=attrs,
        )


def resolve_mask(mask: Any, d: int) -> np.ndarray:
    """``None``/``"none"`` (all entries), ``"diagonal"`` (Theorem 4.3) or a boolean array."""
    n = 18 * d * d
    if mask is None or (isinstance(mask, str) and mask == "none"):
        return np.ones(n, dtype=bool)
    if isinstance(mask, str):
        if mask == "diagonal":
            return diagonal_mask(d)
        raise MesadynError(f"unknown mask {mask!r}; choose none or diagonal")
    arr = np.asarray(mask)
    if arr.dtype != bool or arr.shape != (n,):
        raise MesadynError(f"mask must be a boolean array of length {n}, got {arr.dtype} "
                           f"{arr.shape}")
    return arr


def stiffness(eigenvalues: np.ndarray) -> float:
    """``max|λ| / min|λ|`` over the Hessian eigenvalues that are not numerically zero.

    Eigenvalues below ``1e-9 · max|λ|`` (the flat directions of the loss's symmetries) are
    left out; ``inf`` if none is left besides zero.
    """
    mags = np.abs(np.asarray(eigenvalues))
    top = float(mags.max()) if mags.size else 0.0
    nz = mags[mags > 1e-9 * top]
    return float(top / nz.min()) if top > 0 and nz.size else math.inf


def integrate(field: Any, theta0: Any, *, t_end: float = 1.0, solver: str = "dopri5",
              rtol: float = 1e-8, atol: float = 1e-10, t_eval: Any = None, n_save: int = 200,
              max_steps: int | None = None, mask: Any = None, steady_tol: float | None = 1e-10,
              progress: Callable[[float], None] | None = None,
              compute_stiffness: bool | None = None) -> FlowResult:
    """Integrate ``dθ/dτ = −∇L(θ)`` (masked) from ``theta0`` for a :class:`Field`.

    Stops at ``t_end``, at the steady state ``max|∇L| < steady_tol`` (masked; ``0``/``None``
    disables it), after ``max_steps`` accepted steps, or on failure (see ``status``).  Saved
    points: ``t_eval`` if given, else every accepted step thinned to ``n_save``.  The stiffness
    ratio at the end point uses the Hessian over the integrated coordinates
    (``compute_stiffness``: default only for the exact field, whose Hessian is cheap).
    """
    backend, method, t_end, rtol, atol, max_steps, steady, t_eval = _check_common(
        solver, t_end, rtol, atol, max_steps, steady_tol, t_eval)
    n_save = check_int("n_save", n_save, 2)
    theta0 = field.check_theta(theta0)
    d = dim_of(theta0)
    mask_arr = resolve_mask(mask, d)
    prob = _FieldProblem(field, theta0, mask_arr)
    prob.implicit = method in IMPLICIT
    start = time.perf_counter()
    raw = _run(prob, backend, method, t_end, rtol, atol, t_eval, max_steps, steady, progress)
    wall = time.perf_counter() - start
    if t_eval is None:
        raw = _thin(raw, n_save)
    nfev, njev = prob.nfev, prob.njev
    thetas = np.repeat(prob.theta0.numpy()[None, :], len(raw.t), axis=0)
    thetas[:, prob.free] = raw.y
    losses, gmax, inv = (np.empty(len(raw.t)) for _ in range(3))
    for k, y in enumerate(raw.y):
        losses[k], gmax[k] = prob.monitor(y)
        inv[k] = _invariant(thetas[k])
    if raw.status == "t_end" and steady > 0 and gmax[-1] < steady:
        raw.status, raw.message = "converged", raw.message + f"; max|∇L| < {steady:.3g} there"
    ratio, eigs = None, None
    if compute_stiffness is None:
        compute_stiffness = field.has_exact_hessian
    if compute_stiffness and np.isfinite(raw.y[-1]).all():
        eigs = np.linalg.eigvalsh(prob.hessian_free(raw.y[-1]))
        ratio = stiffness(eigs)
    describe = field.describe()
    return FlowResult(
        t=raw.t, theta=thetas, loss=losses, grad_max=gmax, invariant=inv, nfev=nfev,
        njev=njev, n_accepted=raw.n_accepted, n_rejected=raw.n_rejected,
        n_monitor=prob.n_monitor, status=raw.status, message=raw.message, solver=method,
        backend=backend, wall_s=wall, mask=mask_arr, free=prob.free, rtol=rtol, atol=atol,
        stiffness_ratio=ratio, hessian_eigenvalues=eigs, field=describe)


def _invariant(theta: np.ndarray) -> float:
    """``‖A‖_F² − ‖P‖_F²`` (conserved by the full flow)."""
    W_KQ, W_PV = unpack(torch.from_numpy(np.ascontiguousarray(theta)))
    d = W_KQ.shape[0] // 3
    P, A = W_PV[:d, d:], W_KQ[d:, d:]
    return float((A * A).sum() - (P * P).sum())


def integrate_reduced(system: Any, a0: float, b0: float, *, t_end: float = 1.0,
                      solver: str = "dopri5", rtol: float = 1e-8, atol: float = 1e-10,
                      t_eval: Any = None, n_save: int = 200, max_steps: int | None = None,
                      steady_tol: float | None = None,
                      progress: Callable[[float], None] | None = None) -> ReducedFlowResult:
    """Integrate Lemma 5.2's ``(ȧ, ḃ)`` numerically and compare with the closed form.

    Same solvers and options as :func:`integrate`; implicit solvers get the exact Jacobian.
    """
    from .errors import check_finite

    a0, b0 = check_finite("a0", a0), check_finite("b0", b0)
    backend, method, t_end, rtol, atol, max_steps, steady, t_eval = _check_common(
        solver, t_end, rtol, atol, max_steps, steady_tol, t_eval)
    n_save = check_int("n_save", n_save, 2)
    prob = _ReducedProblem(system, a0, b0)
    start = time.perf_counter()
    raw = _run(prob, backend, method, t_end, rtol, atol, t_eval, max_steps, steady, progress)
    wall = time.perf_counter() - start
    if t_eval is None:
        raw = _thin(raw, n_save)
    a_ex, b_ex = system.solution(a0, b0, raw.t)
    a, b = raw.y[:, 0], raw.y[:, 1]
    da, db = system.rhs(a, b)
    return ReducedFlowResult(
        t=raw.t, a=a.copy(), b=b.copy(), a_exact=np.asarray(a_ex), b_exact=np.asarray(b_ex),
        loss=np.asarray(system.surrogate(a, b)), grad_max=np.maximum(np.abs(da), np.abs(db)),
        nfev=prob.nfev, njev=prob.njev, n_accepted=raw.n_accepted, n_rejected=raw.n_rejected,
        status=raw.status, message=raw.message, solver=method, backend=backend, wall_s=wall,
        c1=system.c1, c2=system.c2)
