"""diffrax backend (the ``jax`` extra): one ``diffeqsolve`` with a PID controller, a
steady-state ``Event`` and ``throw=False`` (failure comes back as data).

diffrax runs the whole solve in one compiled call, so it is not a :class:`Stepper`; it returns
the same :class:`RawSolution` as the driver.  The right-hand side is native JAX
(``Field.jax_loss``) for explicit solvers when the field declares ``has_jax_loss``, else the
counted torch bridge: a ``pure_callback`` with an exact JVP ``J v`` from the field's Hessian
(Kvaerno5).

A host solver (JAX on its default device, float64): with a field on a torch device, the bridge
copies ``y`` to ``problem.device`` and the result back at each call (``problem.rhs_np`` /
``jac_np`` / ``monitor``), and the native JAX loss starts from θ₀ copied to the host.  The
torchdiffeq backend is the one that stays on the device.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import MesadynError
from ..outcome import Outcome
from ._options import FlowOptions
from ._problem import FieldProblem, FloatArray, Problem
from ._stepper import RawSolution


def import_diffrax() -> tuple[ModuleType, ModuleType, ModuleType]:
    """``(jax, jax.numpy, diffrax)`` with float64 enabled.

    # Raises
    `MesadynError` with the install hint when the ``jax`` extra is missing.
    """
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


def _native_jax_loss(problem: Problem, implicit: bool) -> Callable[[Any], Any] | None:
    """The field's own JAX loss, for explicit solvers on a field that has one."""
    if implicit or not isinstance(problem, FieldProblem) or not problem.field.has_jax_loss:
        return None
    return problem.field.jax_loss()


def _bridge_vector_field(problem: Problem, jax: ModuleType,
                         jnp: ModuleType) -> Callable[[Any], Any]:
    """``y ↦ rhs`` through a counted ``pure_callback`` with an exact JVP ``J v``."""
    n = problem.y0.size
    shape = jax.ShapeDtypeStruct((n,), jnp.float64)
    cache: dict[bytes, FloatArray] = {}

    def f_cb(y: FloatArray) -> FloatArray:
        y = np.asarray(y, dtype=np.float64)
        return np.stack([problem.rhs_np(row) for row in y.reshape(-1, n)]).reshape(y.shape)

    def jvp_cb(y: FloatArray, v: FloatArray) -> FloatArray:
        y2 = np.asarray(y, dtype=np.float64).reshape(-1, n)
        v2 = np.asarray(v, dtype=np.float64).reshape(-1, n)
        rows = max(len(y2), len(v2))
        out = np.empty((rows, n))
        for k in range(rows):
            yk = y2[k if len(y2) > 1 else 0]
            key = yk.tobytes()
            if key not in cache:
                cache.clear()
                cache[key] = problem.jac_np(yk)
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


def _vector_field(problem: Problem, implicit: bool, jax: ModuleType,
                  jnp: ModuleType) -> Callable[[Any], Any]:
    loss = _native_jax_loss(problem, implicit)
    if loss is None:
        return _bridge_vector_field(problem, jax, jnp)
    assert isinstance(problem, FieldProblem)
    theta0 = jnp.asarray(problem.theta0.cpu().numpy())
    free = jnp.asarray(problem.free)
    grad = jax.grad(lambda y: loss(theta0.at[free].set(y)))

    def count() -> None:
        problem.nfev += 1

    def f(y: Any) -> Any:
        jax.debug.callback(count)
        return -grad(y)

    return f


def _grad_max(problem: Problem, jax: ModuleType, jnp: ModuleType) -> Callable[[Any], Any]:
    """``y ↦ max|∇L|`` (monitor, counted apart) for the steady-state event."""
    shape = jax.ShapeDtypeStruct((), jnp.float64)

    def cb(y: FloatArray) -> FloatArray:
        return np.asarray(problem.monitor(np.asarray(y, dtype=np.float64))[1])

    return lambda y: jax.pure_callback(cb, shape, y, vmap_method="sequential")


def solve(problem: Problem, method: str, implicit: bool, options: FlowOptions) -> RawSolution:
    """One ``diffrax.diffeqsolve`` from ``problem.y0`` to ``options.t_end``."""
    jax, jnp, diffrax = import_diffrax()
    f = _vector_field(problem, implicit, jax, jnp)
    term = diffrax.ODETerm(lambda t, y, args: f(y))
    solver = getattr(diffrax, method)()
    controller = diffrax.PIDController(rtol=options.rtol, atol=options.atol)
    t_end, max_steps, steady_tol = options.t_end, options.max_steps, options.steady_tol
    t_eval = options.t_eval_array
    if t_eval is None and max_steps * problem.y0.size <= 2 * 10**7:
        saveat = diffrax.SaveAt(t0=True, steps=True)
    else:
        grid = t_eval if t_eval is not None else np.linspace(0.0, t_end, 201)
        saveat = diffrax.SaveAt(ts=jnp.asarray(grid), t1=True)
    event = None
    if steady_tol > 0:
        gmax = _grad_max(problem, jax, jnp)
        event = diffrax.Event(cond_fn=lambda t, y, args, **kw: gmax(y) < steady_tol)
    # diffrax's own initial-step guess can land on a step whose trial stage overflows, after
    # which every step is rejected with a NaN error estimate; start from a safe small step.
    f0 = np.abs(problem.rhs_np(problem.y0)).max()
    y_scale = max(float(np.abs(problem.y0).max()), 1e-8)
    dt0 = min(t_end, 1e-3 * y_scale / f0) if f0 > 0 else t_end
    sol = diffrax.diffeqsolve(term, solver, t0=0.0, t1=t_end, dt0=dt0,
                              y0=jnp.asarray(problem.y0), saveat=saveat,
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
    acc = int(sol.stats["num_accepted_steps"])
    rej = int(sol.stats["num_rejected_steps"])
    R = diffrax.RESULTS
    if sol.result == R.successful:
        status, message = Outcome.T_END, f"reached t_end={t_end:.6g}"
    elif sol.result == R.event_occurred:
        status = Outcome.CONVERGED
        message = f"max|∇L| < steady_tol={steady_tol:.3g} at τ={t[-1]:.6g}"
    elif sol.result == R.max_steps_reached:
        status = Outcome.MAX_STEPS
        message = f"hit max_steps={max_steps} at τ={t[-1]:.6g} < t_end={t_end:.6g}"
    else:
        status, message = Outcome.FAILED, f"{method}: {sol.result}"
    if not np.isfinite(y).all():
        status, message = Outcome.FAILED, f"{method}: non-finite state"
    return RawSolution(t, y, acc, rej, status, message)
