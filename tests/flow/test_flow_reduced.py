"""``integrate_reduced`` with every ODE backend against Lemma 5.2's closed form, and the
stiffness-aware choice of an ODE solver for it (``--sigma 100`` must not grind; the automatic
solver itself is the closed form, tests/flow/test_flow_closed_form.py)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from mesadyn.flow import SOLVERS, Backend, default_solver, integrate_reduced
from mesadyn.outcome import Outcome
from mesadyn.process import gaussian, ones, sparse
from mesadyn.reduced import ReducedSystem

INITS = [(0.1, 0.1), (0.5, 1.5), (2.0, 2.0)]  # the paper's (Section 6)
FAMILIES = {
    "gaussian0.5": gaussian(5, 0.5), "gaussian1": gaussian(5, 1.0), "gaussian2": gaussian(5, 2.0),
    "sparse0.5": sparse(5, 0.5), "sparse1": sparse(5, 1.0), "sparse2": sparse(5, 2.0),
    "ones-masked": ones(5),
}


def _t_end(system: ReducedSystem, a0: float, b0: float) -> float:
    """Past settling (sparse c=0.5 starts at its fixed point (2, 2): ab* = 4)."""
    return max(1.5 * system.time_to_reach(a0, b0, 1e-12), 1.0 / system.c2)


def _check_reduced(name: str, a0: float, b0: float, solver: str, rtol: float = 1e-10,
                   max_steps: int | None = None) -> None:
    system = ReducedSystem.from_family(FAMILIES[name], 100)
    res = integrate_reduced(system, a0, b0, t_end=_t_end(system, a0, b0), solver=solver,
                            rtol=rtol, atol=1e-14, max_steps=max_steps)
    assert res.status is Outcome.T_END, res.message
    assert res.closed_form_max_error() < 1e-8, (name, a0, b0, solver)
    assert abs(res.ab[-1] - system.ab_star) < 1e-9, (name, a0, b0, solver)
    assert res.invariant_drift() < 1e-9, (name, a0, b0, solver)
    assert res.nfev > 0 and res.n_accepted > 0


@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.parametrize("a0,b0", INITS)
def test_reduced_dop853_matches_closed_form(name: str, a0: float, b0: float) -> None:
    _check_reduced(name, a0, b0, "DOP853")


FAST = ["dopri5", "dopri8", "RK45", "Radau", "LSODA"]  # diffrax: see the exact-field test


@pytest.mark.parametrize("solver", FAST)
def test_reduced_every_backend(solver: str) -> None:
    _check_reduced("gaussian1", 0.5, 1.5, solver)


@pytest.mark.slow
@pytest.mark.parametrize("solver", [k for k, s in SOLVERS.items()
                                    if s.method not in ("adaptive_heun", *FAST)])
@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.parametrize("a0,b0", INITS)
def test_reduced_slow_backends_every_case(solver: str, name: str, a0: float, b0: float) -> None:
    if SOLVERS[solver].backend is Backend.diffrax:
        pytest.importorskip("diffrax")
    _check_reduced(name, a0, b0, solver)


@pytest.mark.slow
@pytest.mark.parametrize("solver", FAST)
@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.parametrize("a0,b0", INITS)
def test_reduced_fast_backends_every_case(solver: str, name: str, a0: float, b0: float) -> None:
    # LSODA's invariant drift at rtol 1e-10 reaches 1.7e-9 for sparse c=0.5 from (0.5, 1.5)
    _check_reduced(name, a0, b0, solver, rtol=1e-11 if solver == "LSODA" else 1e-10)


@pytest.mark.slow
def test_reduced_adaptive_heun() -> None:
    """Order 2: rtol 1e-10 needs ~10⁵ steps, so one case only."""
    _check_reduced("gaussian1", 0.5, 1.5, "adaptive_heun", max_steps=10**6)


def test_reduced_adaptive_heun_loose() -> None:
    system = ReducedSystem.from_family(FAMILIES["gaussian1"], 100)
    res = integrate_reduced(system, 0.5, 1.5, t_end=_t_end(system, 0.5, 1.5),
                            solver="adaptive_heun", rtol=1e-5, atol=1e-7)
    assert res.status == "t_end"
    assert res.closed_form_max_error() < 1e-3
    assert res.invariant_drift() < 1e-3


def test_steady_state_event_stops_the_run() -> None:
    system = ReducedSystem.from_family(gaussian(5, 1.0), 100)
    for solver in ("dopri5", "RK45", "Radau"):  # explicit ones stall near λ·rtol·|y| ~ 1e-5
        res = integrate_reduced(system, 0.5, 1.5, t_end=1.0, solver=solver, steady_tol=1e-4)
        assert res.status is Outcome.CONVERGED and res.converged, res.message
        assert res.grad_max[-1] < 1e-4 and res.t[-1] < 0.1
        assert np.all(res.grad_max[1:-1] >= 1e-4)


def test_max_steps_returns_the_partial_run() -> None:
    system = ReducedSystem.from_family(gaussian(5, 1.0), 100)
    for solver in ("dopri5", "LSODA"):
        res = integrate_reduced(system, 0.5, 1.5, t_end=1.0, solver=solver, max_steps=7)
        assert res.status is Outcome.MAX_STEPS and "max_steps=7" in res.message
        assert res.n_accepted == 7 and res.t[-1] < 1.0
        assert res.closed_form_max_error() < 1e-6


# ---- an ODE solver for the reduced system (default_solver(True, ode=True)) -----------------
def test_ode_choice_is_dopri5_where_not_stiff() -> None:
    """The CLI's default case (gaussian σ=1, (0.5, 1.5), the closed-form horizon): dopri5."""
    system = ReducedSystem.from_family(gaussian(5, 1.0), 100)
    horizon = system.horizon(0.5, 1.5)
    solver = default_solver(True, system=system, a0=0.5, b0=1.5, t_end=horizon, ode=True)
    assert solver == "torchdiffeq:dopri5"
    res = integrate_reduced(system, 0.5, 1.5, t_end=horizon, rtol=1e-10, atol=1e-12,
                            solver=solver)
    assert (res.backend, res.solver) == ("torchdiffeq", "dopri5")


def test_ode_choice_is_stiffness_aware_sigma_100() -> None:
    """σ = 100: c1 ≈ 1.5e15 while the horizon is 50/c2 ≈ 1.7e-9, so dopri5 would need ~10⁶
    steps (it hits max_steps after minutes); the ODE choice is LSODA, which settles in well
    under a second on the closed form's answer."""
    system = ReducedSystem.from_family(gaussian(5, 100.0), 100)
    horizon = system.horizon(0.5, 1.5)
    predicted = horizon * system.max_rate(0.5, 1.5) / 3.3
    assert predicted > 1e5  # an explicit solver's step count: hopeless
    solver = default_solver(True, system=system, a0=0.5, b0=1.5, t_end=horizon, ode=True)
    assert solver == "scipy:LSODA"
    start = time.perf_counter()
    res = integrate_reduced(system, 0.5, 1.5, t_end=horizon, rtol=1e-10, atol=1e-12,
                            solver=solver)
    assert time.perf_counter() - start < 20.0
    assert res.status is Outcome.T_END and res.solver == "LSODA", res.message
    assert res.n_accepted < 5_000
    al, bl = system.limit(0.5, 1.5)
    assert abs(res.a[-1] - al) < 1e-9 * max(1.0, abs(al)) + 1e-12
    assert abs(res.b[-1] - bl) < 1e-9
    # dopri5 itself crawls: 300 steps cover a tiny fraction of the horizon
    capped = integrate_reduced(system, 0.5, 1.5, t_end=horizon, solver="dopri5", rtol=1e-10,
                               atol=1e-12, max_steps=300)
    assert capped.status is Outcome.MAX_STEPS and capped.t[-1] < 0.01 * horizon
