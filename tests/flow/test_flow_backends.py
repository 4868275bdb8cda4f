"""Solver ids and aliases, the flow's outcomes, the :class:`Stepper` contract, failure as data
(step-size underflow is a ``failed`` result, never an exception), the torchdiffeq
version gate, solver statistics and bad input."""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import ExactField
from mesadyn.field._base import Field
from mesadyn.flow import (
    ALIASES,
    CLOSED_FORM,
    SOLVERS,
    Backend,
    FlowOptions,
    ReducedProblem,
    Solver,
    SolverStats,
    Stepper,
    default_solver,
    drive,
    integrate,
    integrate_reduced,
    resolve_solver,
    solver_names,
)
from mesadyn.model import diagonal_init
from mesadyn.outcome import Outcome
from mesadyn.process import gaussian
from mesadyn.reduced import ReducedSystem

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "data"


# ---- ids, aliases, statuses --------------------------------------------------------------
def test_canonical_ids_and_aliases() -> None:
    assert solver_names()[:1] == ["torchdiffeq:dopri5"]
    assert set(solver_names()) == set(SOLVERS) and len(SOLVERS) == 12
    for alias, canonical in ALIASES.items():  # today's bare names keep working
        assert resolve_solver(alias) == resolve_solver(canonical) == SOLVERS[canonical]
        assert resolve_solver(alias).id == canonical and canonical.endswith(":" + alias)
    assert resolve_solver("scipy:LSODA") == ("scipy", "LSODA")  # still a (backend, method) pair
    assert resolve_solver("scipy:radau") == ("scipy", "Radau")
    assert resolve_solver("torchdiffeq:DOPRI5") == ("torchdiffeq", "dopri5")
    assert resolve_solver("diffrax:Dopri5").id == "diffrax:Dopri5"
    assert resolve_solver("diffrax:dopri5") == Solver("diffrax", "Dopri5")  # type: ignore[arg-type]
    assert [s.method for s in SOLVERS.values() if s.implicit] == ["Kvaerno5", "Radau", "LSODA"]
    for bad in ("euler", "scipy:euler", "torchdiffeq:LSODA", "", ":"):
        with pytest.raises(MesadynError, match="unknown solver.*valid: torchdiffeq:dopri5"):
            resolve_solver(bad)
    # the reduced system's closed form: its own id, no backend prefix, not an ODE solver
    closed = resolve_solver(CLOSED_FORM)
    assert closed.id == CLOSED_FORM == "closed_form" and closed.backend is Backend.closed_form
    assert resolve_solver("Closed_Form") == closed and not closed.implicit
    assert CLOSED_FORM not in SOLVERS and CLOSED_FORM not in solver_names(aliases=True)


def test_default_solver_policy() -> None:
    assert default_solver(False) == "scipy:LSODA"
    assert default_solver(True) == CLOSED_FORM
    system = ReducedSystem(2.0, 1.0)
    assert default_solver(True, system=system, a0=0.5, b0=1.5, t_end=1e9) == CLOSED_FORM
    assert default_solver(True, ode=True) == "torchdiffeq:dopri5"
    # an ODE solver for the reduced system (ode=True): predicted explicit steps
    # t_end · max_rate / 3.3 against the limit 10⁴
    rate = system.max_rate(0.5, 1.5)
    assert default_solver(True, system=system, a0=0.5, b0=1.5, ode=True,
                          t_end=0.9 * 3.3e4 / rate) == "torchdiffeq:dopri5"
    assert default_solver(True, system=system, a0=0.5, b0=1.5, ode=True,
                          t_end=1.1 * 3.3e4 / rate) == "scipy:LSODA"


def test_the_full_flow_refuses_the_closed_form() -> None:
    field = ExactField(gaussian(1, 1.0), 4)
    with pytest.raises(MesadynError, match="closed form .*ODE solver, e.g. scipy:LSODA"):
        integrate(field, diagonal_init(1, 0.5, 0.5), solver=CLOSED_FORM)


def test_flow_outcomes_are_strings_of_the_one_vocabulary() -> None:
    assert Outcome("failed") is Outcome.FAILED and Outcome.FAILED == "failed"
    assert json.dumps({"status": Outcome.T_END}) == '{"status": "t_end"}'


def test_to_dict_is_todays_json() -> None:
    """The golden ``integrate --reduced --json`` (gaussian σ=1, d=5, T=100, (0.5, 1.5),
    dopri5 — the automatic solver when the golden was recorded —, rtol 1e-10, atol 1e-12, the
    closed-form horizon): same keys, same values."""
    golden = json.loads((GOLDEN / "integrate_reduced.json").read_text())
    system = ReducedSystem.from_family(gaussian(5, 1.0), 100)
    horizon = system.horizon(0.5, 1.5)
    assert horizon == golden["t_end"]
    res = integrate_reduced(system, 0.5, 1.5, t_end=horizon, rtol=1e-10, atol=1e-12,
                            max_steps=100_000, n_save=200, solver="torchdiffeq:dopri5")
    out = json.loads(json.dumps(res.to_dict()))
    assert list(out) == ["nfev", "njev", "n_accepted", "n_rejected", "status", "message",
                         "solver", "backend", "wall_s"]
    for key in out:
        if key != "wall_s":
            assert out[key] == golden[key], key
    assert float(res.a[-1]) == golden["a"] and float(res.b[-1]) == golden["b"]
    assert res.invariant_drift() == golden["invariant_drift"]
    assert res.closed_form_max_error() == golden["closed_form_max_error"]
    assert isinstance(res.solver_stats, SolverStats) and res.nfev == res.solver_stats.nfev


# ---- failure is data -------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["tiny rtol", "huge start"])
def test_step_size_underflow_is_a_failed_result(case: str) -> None:
    """Today these escaped as torchdiffeq's AssertionError (or ground on for minutes)."""
    system = ReducedSystem.from_family(gaussian(5, 1.0), 100)
    a0, rtol, atol = (0.5, 1e-30, 1e-40) if case == "tiny rtol" else (1e10, 1e-10, 1e-12)
    start = time.perf_counter()
    res = integrate_reduced(system, a0, 1.5, t_end=system.horizon(0.5, 1.5), solver="dopri5",
                            rtol=rtol, atol=atol)
    assert time.perf_counter() - start < 30.0
    assert res.status is Outcome.FAILED and "underflow" in res.message, res.message
    assert not res.converged and res.to_dict()["status"] == "failed"
    assert np.isfinite(res.a).all() and res.t[-1] < system.horizon(0.5, 1.5)


def test_huge_start_full_flow_fails_as_data() -> None:
    field = ExactField(gaussian(1, 1.0), 4)
    res = integrate(field, diagonal_init(1, 1e8, 1e8), t_end=1.0, solver="dopri5",
                    steady_tol=0)
    assert res.status is Outcome.FAILED, res.message
    assert res.theta.shape[0] >= 1 and np.isfinite(res.theta).all()


class _BlowUp(Field):
    """``L = −Σ θ⁴``: the flow ``θ' = 4θ³`` blows up at τ = 1/(8 θ0²)."""

    name = "blowup"

    def __init__(self, d: int):
        self.family = gaussian(d, 1.0)
        self.T = 3

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        return -(theta**4).sum()


@pytest.mark.parametrize("solver", ["RK45", pytest.param("dopri5", marks=pytest.mark.slow)])
def test_blow_up_is_reported_as_failed(solver: str) -> None:
    res = integrate(_BlowUp(1), diagonal_init(1, 1.0, 1.0), t_end=1.0, solver=solver,
                    steady_tol=0)
    assert res.status is Outcome.FAILED, res.message
    assert res.t[-1] < 1.0 / 8 + 1e-6


class _Euler(Stepper):
    """Fixed-step explicit Euler: a minimal implementation of the Stepper contract."""

    def __init__(self, problem, method: str, options: FlowOptions) -> None:
        self.problem, self.h = problem, options.t_end / 64
        self._t, self._y, self._prev = 0.0, problem.y0.copy(), problem.y0.copy()
        self.n_accepted, self.n_rejected = 0, 0

    @property
    def t(self) -> float:
        return self._t

    @property
    def y(self) -> np.ndarray:
        return self._y

    def step(self) -> str | None:
        f = self.problem.rhs_np(self._y)
        if not np.isfinite(f).all():
            return "non-finite slope"
        self._prev, self._y = self._y, self._y + self.h * f
        self._t += self.h
        self.n_accepted += 1
        return None

    def interp(self, ts: np.ndarray) -> np.ndarray:
        w = (np.asarray(ts) - (self._t - self.h)) / self.h
        return self._prev[None, :] + w[:, None] * (self._y - self._prev)[None, :]


def test_stepper_contract_with_a_custom_stepper() -> None:
    system = ReducedSystem(2.0, 1.0)
    prob = ReducedProblem(system, 0.5, 0.25)
    options = FlowOptions(t_end=1.0, t_eval=tuple(np.linspace(0, 1, 9).tolist()))
    raw = drive(_Euler(prob, "euler", options), prob, options)
    assert raw.status is Outcome.T_END and raw.n_accepted == 64 and prob.nfev == 64
    np.testing.assert_allclose(raw.t, np.linspace(0, 1, 9))
    a, b = system.solution(0.5, 0.25, raw.t)
    assert np.max(np.abs(raw.y[:, 0] - a)) < 0.05  # first order, h = 1/64
    # failure reported by step() becomes Outcome.FAILED with its message
    bad = ReducedProblem(system, np.inf, 0.0)
    raw = drive(_Euler(bad, "euler", FlowOptions(t_end=1.0)), bad, FlowOptions(t_end=1.0))
    assert raw.status is Outcome.FAILED and raw.message == "non-finite slope"


def test_torchdiffeq_statistics_are_consistent() -> None:
    """dopri5: 2 start-up calls + 6 per attempt (FSAL) — counted separately, must agree."""
    system = ReducedSystem.from_family(gaussian(5, 1.0), 100)
    res = integrate_reduced(system, 0.5, 1.5, t_end=0.05, solver="dopri5", rtol=1e-9)
    assert res.n_rejected is not None and res.n_rejected > 0
    assert res.nfev == 2 + 6 * (res.n_accepted + res.n_rejected)
    res = integrate_reduced(system, 0.5, 1.5, t_end=0.05, solver="Radau", rtol=1e-9)
    assert res.njev > 0 and res.n_rejected is None
    res = integrate_reduced(system, 0.5, 1.5, t_end=0.05, solver="RK45", rtol=1e-9)
    assert res.n_rejected is not None
    assert res.nfev == 2 + 6 * (res.n_accepted + res.n_rejected)  # f(y0) and the first-step probe


# ---- the torchdiffeq version gate -----------------------------------------------------------
def test_torchdiffeq_version_check() -> None:
    from mesadyn.flow._torchdiffeq import check_version

    for ok in ("0.2.3", "0.2.5", "0.2.9+local"):
        check_version(ok)
    for bad in ("0.2.2", "0.3.0", "1.0", "0.1", "nightly"):
        with pytest.raises(MesadynError, match=r"torchdiffeq>=0.2.3,<0.3"):
            check_version(bad)


def test_unsupported_torchdiffeq_is_refused_at_import(monkeypatch) -> None:
    import torchdiffeq

    monkeypatch.setattr(torchdiffeq, "__version__", "0.3.1")
    monkeypatch.delitem(sys.modules, "mesadyn.flow._torchdiffeq")
    with pytest.raises(MesadynError, match=r"torchdiffeq 0.3.1 is not supported.*<0.3"):
        importlib.import_module("mesadyn.flow._torchdiffeq")
    sys.modules.pop("mesadyn.flow._torchdiffeq", None)
    system = ReducedSystem(2.0, 1.0)
    with pytest.raises(MesadynError, match="not supported"):
        integrate_reduced(system, 0.1, 0.1, solver="dopri5")
    sys.modules.pop("mesadyn.flow._torchdiffeq", None)
    # the other backends do not care
    assert integrate_reduced(system, 0.1, 0.1, t_end=0.1, solver="RK45").status == "t_end"


def test_private_torchdiffeq_api_is_confined_to_one_file() -> None:
    root = Path(__file__).resolve().parents[2] / "mesadyn"
    users = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py")
                   if "torchdiffeq._impl" in p.read_text(encoding="utf-8")
                   or "_adaptive_step" in p.read_text(encoding="utf-8"))
    assert users == ["flow/_torchdiffeq.py"]


# ---- bad input ------------------------------------------------------------------------------
def test_bad_input() -> None:
    field = ExactField(gaussian(1, 1.0), 4)
    theta0 = diagonal_init(1, 0.5, 0.5)
    system = ReducedSystem(2.0, 1.0)
    with pytest.raises(MesadynError, match="unknown solver 'euler'"):
        integrate(field, theta0, solver="euler")
    with pytest.raises(MesadynError, match="t_end"):
        integrate(field, theta0, t_end=0.0)
    with pytest.raises(MesadynError, match="rtol"):
        integrate_reduced(system, 0.1, 0.1, rtol=-1.0)
    with pytest.raises(MesadynError, match="atol"):
        integrate_reduced(system, 0.1, 0.1, atol=0.0)
    with pytest.raises(MesadynError, match="mask"):
        integrate(field, theta0, mask="upper")
    with pytest.raises(MesadynError, match="t_eval"):
        integrate(field, theta0, t_end=1.0, t_eval=[0.0, 2.0])
    with pytest.raises(MesadynError, match="steady_tol"):
        integrate(field, theta0, steady_tol=-1.0)
    with pytest.raises(MesadynError, match="max_steps"):
        integrate_reduced(system, 0.1, 0.1, max_steps=0)
    with pytest.raises(MesadynError, match="n_save"):
        integrate_reduced(system, 0.1, 0.1, n_save=1)
    with pytest.raises(MesadynError, match="a0"):
        integrate_reduced(system, float("nan"), 0.1)
    with pytest.raises(MesadynError, match="no trainable"):
        integrate(field, theta0, mask=np.zeros(18, dtype=bool))


def test_diffrax_without_jax(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "diffrax", None)
    system = ReducedSystem(2.0, 1.0)
    with pytest.raises(MesadynError, match=r"pip install 'mesadyn\[jax\]'"):
        integrate_reduced(system, 0.1, 0.1, solver="Kvaerno5")


def test_exact_flow_diffrax_native_jax() -> None:
    pytest.importorskip("diffrax")
    fam, T = gaussian(2, 1.0), 10
    field = ExactField(fam, T)
    system = ReducedSystem.from_family(fam, T)
    t_end = max(1.5 * system.time_to_reach(0.5, 1.5, 1e-12), 1.0 / system.c2)
    res = integrate(field, diagonal_init(2, 0.5, 1.5), t_end=t_end, solver="diffrax:Tsit5",
                    rtol=1e-10, atol=1e-12, steady_tol=1e-7)
    # an explicit 5th-order method stalls at max|∇L| ~ λ_max·rtol·|θ| ~ 1e-8 (stiffness)
    assert res.status is Outcome.CONVERGED and res.grad_max[-1] < 1e-7
    assert res.backend == "diffrax" and res.nfev > 0 and res.n_accepted > 0


@pytest.mark.slow
def test_exact_flow_kvaerno5_bridge() -> None:
    """Kvaerno5 through the torch bridge (pure_callback + exact JVP from the Hessian)."""
    pytest.importorskip("diffrax")
    field = ExactField(gaussian(2, 1.0), 10)
    res = integrate(field, diagonal_init(2, 0.5, 1.5), t_end=1.0, solver="Kvaerno5",
                    rtol=1e-8, atol=1e-10, steady_tol=1e-8)
    assert res.status == "converged" and res.njev > 0
