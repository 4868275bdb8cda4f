"""The reduced system's closed form as the default way to integrate it
(mesadyn/flow/_closed_form.py): the same result type as an ODE solve, checked against dopri5 and
LSODA at their tolerances; the outcome rule of a full flow; no torch or scipy import on its path;
and the horizon's root solve bit for bit scipy's ``brentq``."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from mesadyn.flow import CLOSED_FORM, ReducedFlowResult, integrate_reduced
from mesadyn.outcome import Outcome
from mesadyn.process import gaussian, ones, sparse
from mesadyn.reduced import ReducedSystem, _brentq

INITS = [(0.1, 0.1), (0.5, 1.5), (2.0, 2.0), (1.5, -1.5), (-0.3, 0.8)]
FAMILIES = {"gaussian1": gaussian(5, 1.0), "gaussian2": gaussian(5, 2.0),
            "sparse0.5": sparse(5, 0.5), "ones-masked": ones(5)}
#: ODE solvers and the tolerance they reach against the closed form at rtol 1e-10, atol 1e-12
#: (max over the saved points of |(a, b) − closed form|, relative to max(1, |(a0, b0)|)).
ODE = {"torchdiffeq:dopri5": 1e-8, "scipy:LSODA": 1e-7}


def _system(name: str) -> ReducedSystem:
    return ReducedSystem.from_family(FAMILIES[name], 100)


@pytest.mark.parametrize("solver", list(ODE))
@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.parametrize(("a0", "b0"), INITS)
def test_closed_form_agrees_with_the_ode_solvers(name: str, a0: float, b0: float,
                                                 solver: str) -> None:
    """At the ODE solve's own saved times (t_eval), the closed form's (a, b) lie within the
    solver's tolerance of the ODE solution, and both end at the same limit point."""
    system = _system(name)
    t_end = system.horizon(a0, b0)
    grid = np.linspace(0.0, t_end, 41)
    ode = integrate_reduced(system, a0, b0, t_end=t_end, solver=solver, rtol=1e-10, atol=1e-12,
                            t_eval=grid)
    closed = integrate_reduced(system, a0, b0, t_end=t_end, t_eval=grid)
    assert ode.status is Outcome.T_END, ode.message
    np.testing.assert_array_equal(closed.t, ode.t)
    scale = max(1.0, math.hypot(a0, b0))
    err = float(np.max(np.hypot(closed.a - ode.a, closed.b - ode.b)))
    assert err <= ODE[solver] * scale, (name, a0, b0, solver, err)
    # the ODE's own comparison column is the closed form: the two paths share it exactly
    np.testing.assert_array_equal(closed.a, ode.a_exact)
    np.testing.assert_array_equal(closed.b, ode.b_exact)
    al, bl = system.limit(a0, b0)
    assert abs(closed.a[-1] - al) <= 1e-9 * scale and abs(closed.b[-1] - bl) <= 1e-9 * scale


def test_the_result_is_an_ode_result_with_the_closed_form_backend() -> None:
    system = _system("gaussian1")
    t_end = system.horizon(0.5, 1.5)
    res = integrate_reduced(system, 0.5, 1.5, t_end=t_end, n_save=57)
    assert isinstance(res, ReducedFlowResult)
    assert (res.solver, res.backend, res.solver_id) == (CLOSED_FORM, "closed_form", CLOSED_FORM)
    np.testing.assert_allclose(res.t, np.linspace(0.0, t_end, 57), rtol=0, atol=0)
    assert res.closed_form_max_error() == 0.0 and res.invariant_drift() < 1e-14
    assert (res.nfev, res.njev, res.n_accepted, res.n_rejected) == (57, 0, 0, 0)
    # ℓ̃ and max|∇ℓ̃| from the reduced system's own formulas at the saved points
    da, db = system.rhs(res.a, res.b)
    np.testing.assert_array_equal(res.grad_max, np.maximum(np.abs(da), np.abs(db)))
    np.testing.assert_array_equal(res.loss, system.surrogate(res.a, res.b))
    out = json.loads(json.dumps(res.to_dict()))
    assert list(out) == ["nfev", "njev", "n_accepted", "n_rejected", "status", "message",
                         "solver", "backend", "wall_s"]
    ds = res.to_dataset()
    np.testing.assert_array_equal(ds["a_closed_form"].values, ds["a"].values)
    assert ds.attrs["backend"] == "closed_form"


def test_saved_times_with_t_eval_are_those_of_an_ode_solve() -> None:
    system = _system("gaussian1")
    res = integrate_reduced(system, 0.5, 1.5, t_end=0.2, t_eval=[0.05, 0.1])
    np.testing.assert_array_equal(res.t, [0.0, 0.05, 0.1, 0.2])
    a, b = system.solution(0.5, 1.5, res.t)
    np.testing.assert_array_equal(res.a, a)
    np.testing.assert_array_equal(res.b, b)


def test_the_outcome_is_a_full_flows() -> None:
    """converged when the end point passes the steady-state test (as dopri5's run that stops
    there), t_end when no test is asked for or the horizon ends before the fixed point."""
    system = _system("gaussian1")
    fixed = integrate_reduced(system, 0.5, 1.5, t_end=1.0, steady_tol=1e-4)
    ode = integrate_reduced(system, 0.5, 1.5, t_end=1.0, steady_tol=1e-4, solver="dopri5")
    assert fixed.status is ode.status is Outcome.CONVERGED and fixed.converged
    assert fixed.grad_max[-1] < 1e-4 and "steady_tol" in fixed.message
    plain = integrate_reduced(system, 0.5, 1.5, t_end=1.0)
    assert plain.status is Outcome.T_END and "closed form" in plain.message
    early = integrate_reduced(system, 0.5, 1.5, t_end=1e-3, steady_tol=1e-4)
    assert early.status is Outcome.T_END and early.grad_max[-1] >= 1e-4


def test_progress_is_called_with_the_horizon() -> None:
    seen: list[float] = []
    integrate_reduced(_system("gaussian1"), 0.5, 1.5, t_end=0.3, progress=seen.append)
    assert seen == [0.3]


def test_the_closed_form_path_imports_neither_torch_nor_scipy() -> None:
    """The default path of ``integrate --reduced``: the horizon (its root solve included),
    the closed form and the result, with neither torch nor scipy in the process."""
    code = ("import sys\n"
            "from mesadyn.flow import integrate_reduced\n"
            "from mesadyn.process import gaussian\n"
            "from mesadyn.reduced import ReducedSystem\n"
            "s = ReducedSystem.from_family(gaussian(5, 1.0), 100)\n"
            "r = integrate_reduced(s, 0.5, 1.5, t_end=s.horizon(0.5, 1.5))\n"
            "assert r.backend == 'closed_form', r.backend\n"
            "print(','.join(m for m in ('torch', 'scipy', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == ""


def test_brentq_is_scipys_bit_for_bit() -> None:
    """The horizon's root solve (ReducedSystem.time_to_reach) without scipy: the same root as
    scipy.optimize.brentq, bit for bit, on the orbit functions of random systems and starts."""
    from scipy.optimize import brentq

    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(400):
        c1, c2 = 10.0 ** rng.uniform(-3, 3, size=2)
        system = ReducedSystem(float(c1), float(c2))
        a0, b0 = (float(v) for v in rng.uniform(-5, 5, size=2))
        if abs(a0) <= abs(b0):
            a0, b0 = b0, a0
        delta = (a0 - b0) * (a0 + b0)
        psi_plus, u0, _, _ = system._psi_constants(a0, b0)
        distance = float(10.0 ** rng.uniform(-14, -1))

        def excess(u: float, delta: float = delta, psi_plus: float = psi_plus,
                   distance: float = distance) -> float:
            return 2 * math.sqrt(delta) * abs(math.sinh(u / 4)) * math.sqrt(
                math.cosh(psi_plus + u / 2)) - distance

        if excess(0.0) * excess(u0) >= 0:
            continue
        want = brentq(excess, 0.0, u0, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)
        got = _brentq(excess, 0.0, u0, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)
        assert got == want, (c1, c2, a0, b0, distance)
        checked += 1
    assert checked > 300
