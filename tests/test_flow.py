"""The gradient-flow integrator (issue 4) against independent computations.

- every backend on the reduced system against the closed form (Lemma 5.2 solved exactly);
- the full exact flow from Assumption 3.1 inits against the closed-form reduced trajectory,
  the off-structure entries, and the conserved ‖A‖_F² − ‖P‖_F²;
- ones: unmasked leaves the diagonal (Prop. 4.2) for a dense fixed point; masked → Lemma A.5;
- the implicit solvers' Jacobian against finite differences; solver statistics against
  each other; sampled fields decrease their loss; steady state, max steps, failure, bad input.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import ExactField, FiniteField, MonteCarloField
from mesadyn.field._base import Field
from mesadyn.flow import (
    SOLVERS,
    _FieldProblem,
    integrate,
    integrate_reduced,
    resolve_mask,
    resolve_solver,
    stiffness,
)
from mesadyn.io import load_run, save_run
from mesadyn.model import diagonal_init, diagonal_mask, gaussian_init
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
    assert res.status == "t_end", res.message
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
@pytest.mark.parametrize("solver", [s for s in SOLVERS if s not in ("adaptive_heun", *FAST)])
@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.parametrize("a0,b0", INITS)
def test_reduced_slow_backends_every_case(solver: str, name: str, a0: float, b0: float) -> None:
    if SOLVERS[solver][0] == "diffrax":
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


# ---- full exact flow ------------------------------------------------------------------
def _full_vs_reduced(fam, T: int, a0: float, b0: float, solver: str = "DOP853") -> None:
    d = fam.d
    field = ExactField(fam, T)
    system = ReducedSystem.from_family(fam, T)
    res = integrate(field, diagonal_init(d, a0, b0), t_end=_t_end(system, a0, b0),
                    solver=solver, rtol=1e-10, atol=1e-12, steady_tol=0)
    assert res.status == "t_end", res.message
    diag = diagonal_mask(d)
    assert np.max(np.abs(res.theta[:, ~diag])) < 1e-12
    idx = np.flatnonzero(diag)
    a, b = res.theta[:, idx[:d]].mean(1), res.theta[:, idx[d:]].mean(1)
    a_red, b_red = system.solution(a0, b0, res.t)
    assert np.max(np.hypot(a - a_red, b - b_red)) < 1e-7
    assert res.invariant_drift() < 1e-9
    assert res.grad_max[-1] < 1e-6
    # Lemma 5.2's loss along the way: L = d (½ c1 s² − c2 s + ½ (T−2) m2)
    s = a * b
    expected = d * (0.5 * system.c1 * s * s - system.c2 * s) + field.const
    assert np.max(np.abs(res.loss - expected)) < 1e-8 * max(1.0, float(np.max(np.abs(expected))))


@pytest.mark.parametrize("fam", [gaussian(2, 1.0), sparse(2, 1.0)], ids=["gaussian", "sparse"])
@pytest.mark.parametrize("a0,b0", INITS)
def test_full_exact_flow_tracks_reduced(fam, a0: float, b0: float) -> None:
    _full_vs_reduced(fam, 10, a0, b0)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gaussian0.5", "gaussian1", "gaussian2", "sparse0.5",
                                  "sparse1", "sparse2"])
@pytest.mark.parametrize("a0,b0", INITS)
def test_full_exact_flow_tracks_reduced_paper_size(name: str, a0: float, b0: float) -> None:
    _full_vs_reduced(FAMILIES[name], 100, a0, b0)


def test_ones_unmasked_dense_fixed_point_and_masked_lemma_a5() -> None:
    fam, T, d = ones(3), 20, 3
    field = ExactField(fam, T)
    system = ReducedSystem.from_family(fam, T)  # Lemma A.5 constants
    theta0 = diagonal_init(d, 0.5, 1.5)
    free = integrate(field, theta0, t_end=50.0, solver="LSODA", rtol=1e-10, atol=1e-12,
                     steady_tol=1e-10)
    assert free.status == "converged" and free.grad_max[-1] < 1e-9
    off = np.abs(free.final[~diagonal_mask(d)])
    assert off.max() > 1e-2  # left the diagonal structure (Proposition 4.2)
    assert free.invariant_drift() < 1e-9
    masked = integrate(field, theta0, t_end=50.0, solver="LSODA", rtol=1e-10, atol=1e-12,
                       steady_tol=1e-11, mask="diagonal")
    assert masked.status == "converged"
    assert np.all(masked.final[~diagonal_mask(d)] == 0.0)
    idx = np.flatnonzero(diagonal_mask(d))
    ab = masked.final[idx[:d]] * masked.final[idx[d:]]
    np.testing.assert_allclose(ab, system.ab_star, rtol=1e-9)
    a_red, b_red = system.solution(0.5, 1.5, masked.t)
    a = masked.theta[:, idx[:d]].mean(1)
    b = masked.theta[:, idx[d:]].mean(1)
    assert np.max(np.hypot(a - a_red, b - b_red)) < 1e-7


def test_exact_flow_diffrax_native_jax() -> None:
    pytest.importorskip("diffrax")
    fam, T = gaussian(2, 1.0), 10
    field = ExactField(fam, T)
    system = ReducedSystem.from_family(fam, T)
    res = integrate(field, diagonal_init(2, 0.5, 1.5), t_end=_t_end(system, 0.5, 1.5),
                    solver="Tsit5", rtol=1e-10, atol=1e-12, steady_tol=1e-7)
    # an explicit 5th-order method stalls at max|∇L| ~ λ_max·rtol·|θ| ~ 1e-8 (stiffness)
    assert res.status == "converged" and res.grad_max[-1] < 1e-7
    assert res.backend == "diffrax" and res.nfev > 0 and res.n_accepted > 0
    idx = np.flatnonzero(diagonal_mask(2))
    a_red, b_red = system.solution(0.5, 1.5, res.t)
    a, b = res.theta[:, idx[:2]].mean(1), res.theta[:, idx[2:]].mean(1)
    assert np.max(np.hypot(a - a_red, b - b_red)) < 1e-7


@pytest.mark.slow
def test_exact_flow_kvaerno5_bridge() -> None:
    """Kvaerno5 through the torch bridge (pure_callback + exact JVP from the Hessian)."""
    pytest.importorskip("diffrax")
    fam, T = gaussian(2, 1.0), 10

    class Bridged(ExactField):
        has_jax_loss = False  # hide the native JAX path

    field = Bridged(fam, T)
    assert not field.has_jax_loss
    res = integrate(field, diagonal_init(2, 0.5, 1.5), t_end=1.0, solver="Kvaerno5",
                    rtol=1e-8, atol=1e-10, steady_tol=1e-8)
    assert res.status == "converged" and res.njev > 0


# ---- the pieces -------------------------------------------------------------------------
def test_jacobian_is_minus_hessian_by_finite_differences() -> None:
    fam = gaussian(2, 0.8)
    field = ExactField(fam, 6)
    theta = gaussian_init(2, 0.3, seed=3)
    for mask in (None, "diagonal"):
        prob = _FieldProblem(field, theta, resolve_mask(mask, 2))
        y = prob.y0 + 0.1
        J = prob.jac_np(y)
        h = 1e-6
        fd = np.empty_like(J)
        for k in range(y.size):
            e = np.zeros_like(y)
            e[k] = h
            fd[:, k] = (prob.rhs_np(y + e) - prob.rhs_np(y - e)) / (2 * h)
        np.testing.assert_allclose(J, fd, atol=1e-6 * max(1.0, np.abs(J).max()))


def test_inactive_entries_never_move() -> None:
    field = ExactField(gaussian(2, 1.0), 6)
    theta0 = gaussian_init(2, 0.2, seed=5)
    res = integrate(field, theta0, t_end=0.05, solver="RK45", steady_tol=0)
    from mesadyn.model import active_mask

    inactive = ~active_mask(2)
    np.testing.assert_array_equal(res.theta[:, inactive],
                                  np.repeat(theta0.numpy()[None, inactive], len(res.t), 0))
    # while the active ones do, and the full gradient there is exactly zero
    _, g = field.loss_and_grad(torch.from_numpy(res.final.copy()))
    assert torch.all(g[torch.from_numpy(inactive)] == 0)
    assert np.abs(res.final[~inactive] - theta0.numpy()[~inactive]).max() > 1e-3


def test_torchdiffeq_statistics_are_consistent() -> None:
    """dopri5: 2 start-up calls + 6 per attempt (FSAL) — counted separately, must agree."""
    system = ReducedSystem.from_family(gaussian(5, 1.0), 100)
    res = integrate_reduced(system, 0.5, 1.5, t_end=0.05, solver="dopri5", rtol=1e-9)
    assert res.n_rejected is not None and res.n_rejected > 0
    assert res.nfev == 2 + 6 * (res.n_accepted + res.n_rejected)
    res = integrate_reduced(system, 0.5, 1.5, t_end=0.05, solver="Radau", rtol=1e-9)
    assert res.njev > 0 and res.n_rejected is None


def test_sampled_fields_decrease_the_loss() -> None:
    fam, T = gaussian(2, 1.0), 6
    theta0 = diagonal_init(2, 0.3, 0.4)
    for field in (FiniteField(fam, T, m=64, seed=1),
                  MonteCarloField(fam, T, samples=128, seed=2, batches=4)):
        res = integrate(field, theta0, t_end=0.5, solver="DOP853", rtol=1e-8, atol=1e-10,
                        steady_tol=0)
        assert res.status == "t_end", res.message
        assert np.all(np.diff(res.loss) <= 1e-12 * max(1.0, abs(res.loss[0])))
        assert res.loss[-1] < res.loss[0] and res.grad_max[-1] < res.grad_max[0] / 10
        assert res.invariant_drift() < 1e-7


def test_t_eval_and_dataset_roundtrip(tmp_path) -> None:
    field = ExactField(gaussian(2, 1.0), 6)
    t_eval = np.linspace(0, 0.02, 11)
    res = integrate(field, diagonal_init(2, 0.5, 1.5), t_end=0.02, t_eval=t_eval,
                    solver="dopri5", steady_tol=0)
    np.testing.assert_allclose(res.t, t_eval)
    system = ReducedSystem.from_family(gaussian(2, 1.0), 6)
    idx = np.flatnonzero(diagonal_mask(2))
    a_red, _ = system.solution(0.5, 1.5, t_eval)  # dense output at the save points
    np.testing.assert_allclose(res.theta[:, idx[:2]].mean(1), a_red, atol=1e-7)
    ds = res.to_dataset()
    path = save_run(ds, tmp_path / "flow.nc", kind="integrate", config={"x": 1}, seed=1)
    back = load_run(path, kind="integrate")
    np.testing.assert_array_equal(back["theta"].values, res.theta)
    assert back.attrs["solver"] == "dopri5" and back.attrs["nfev"] == res.nfev
    assert back["W_KQ"].shape == (6, 6)


def test_steady_state_event_stops_the_run() -> None:
    system = ReducedSystem.from_family(gaussian(5, 1.0), 100)
    for solver in ("dopri5", "RK45", "Radau"):  # explicit ones stall near λ·rtol·|y| ~ 1e-5
        res = integrate_reduced(system, 0.5, 1.5, t_end=1.0, solver=solver, steady_tol=1e-4)
        assert res.status == "converged", res.message
        assert res.grad_max[-1] < 1e-4 and res.t[-1] < 0.1
        assert np.all(res.grad_max[1:-1] >= 1e-4)


def test_max_steps_returns_the_partial_run() -> None:
    system = ReducedSystem.from_family(gaussian(5, 1.0), 100)
    for solver in ("dopri5", "LSODA"):
        res = integrate_reduced(system, 0.5, 1.5, t_end=1.0, solver=solver, max_steps=7)
        assert res.status == "max_steps" and "max_steps=7" in res.message
        assert res.n_accepted == 7 and res.t[-1] < 1.0
        assert res.closed_form_max_error() < 1e-6


class _BlowUp(Field):
    """``L = −Σ θ⁴``: the flow ``θ' = 4θ³`` blows up at τ = 1/(8 θ0²)."""

    name = "blowup"

    def __init__(self, d: int):
        self.family = gaussian(d, 1.0)
        self.T = 3

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        return -(theta**4).sum()


def test_blow_up_is_reported_as_failed() -> None:
    field = _BlowUp(1)
    theta0 = diagonal_init(1, 1.0, 1.0)
    res = integrate(field, theta0, t_end=1.0, solver="RK45", steady_tol=0)
    assert res.status == "failed", res.message
    assert res.t[-1] < 1.0 / 8 + 1e-6


@pytest.mark.slow
def test_blow_up_is_reported_as_failed_torchdiffeq() -> None:
    res = integrate(_BlowUp(1), diagonal_init(1, 1.0, 1.0), t_end=1.0, solver="dopri5",
                    steady_tol=0)
    assert res.status == "failed" and "underflow" in res.message
    assert res.t[-1] < 1.0 / 8 + 1e-6


def test_bad_input() -> None:
    field = ExactField(gaussian(1, 1.0), 4)
    theta0 = diagonal_init(1, 0.5, 0.5)
    system = ReducedSystem(2.0, 1.0)
    with pytest.raises(MesadynError, match="valid: dopri5"):
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
    assert resolve_solver("scipy:radau") == ("scipy", "Radau")
    assert resolve_solver("torchdiffeq:DOPRI5") == ("torchdiffeq", "dopri5")


def test_diffrax_without_jax(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "diffrax", None)
    system = ReducedSystem(2.0, 1.0)
    with pytest.raises(MesadynError, match=r"pip install 'mesadyn\[jax\]'"):
        integrate_reduced(system, 0.1, 0.1, solver="Kvaerno5")


def test_stiffness_ratio() -> None:
    assert stiffness(np.array([0.0, 1e-14, 2.0, -4.0, 100.0])) == pytest.approx(50.0)
    assert math.isinf(stiffness(np.zeros(3)))
    fam, T = gaussian(2, 1.0), 10
    field = ExactField(fam, T)
    res = integrate(field, diagonal_init(2, 0.5, 1.5), t_end=0.2, solver="LSODA",
                    rtol=1e-10, atol=1e-12, steady_tol=1e-10, mask="diagonal")
    # masked at the fixed point: d copies of the reduced Hessian −J, eigenvalues {0, c1(a²+b²)}
    system = ReducedSystem.from_family(fam, T)
    a, b = system.limit(0.5, 1.5)
    eig = res.hessian_eigenvalues
    assert eig is not None and res.stiffness_ratio is not None
    top = system.c1 * (a * a + b * b)
    assert eig.max() == pytest.approx(top, rel=1e-6)


@pytest.mark.slow
def test_ones_paper_size() -> None:
    """d=5, T=100: unmasked → dense fixed point (‖∇L‖ < 1e-9); masked → Lemma A.5."""
    fam, T, d = ones(5), 100, 5
    field = ExactField(fam, T)
    system = ReducedSystem.from_family(fam, T)
    theta0 = diagonal_init(d, 0.5, 1.5)
    free = integrate(field, theta0, t_end=20.0, solver="LSODA", rtol=1e-10, atol=1e-12,
                     steady_tol=1e-10)
    assert free.status == "converged" and free.grad_max[-1] < 1e-9
    assert np.abs(free.final[~diagonal_mask(d)]).max() > 1e-2
    masked = integrate(field, theta0, t_end=20.0, solver="LSODA", rtol=1e-10, atol=1e-12,
                       steady_tol=1e-11, mask="diagonal")
    idx = np.flatnonzero(diagonal_mask(d))
    np.testing.assert_allclose(masked.final[idx[:d]] * masked.final[idx[d:]], system.ab_star,
                               rtol=1e-9)
