"""``integrate`` on the full θ against independent computations: the closed-form reduced
trajectory from Assumption 3.1 inits, the off-structure entries, the conserved
‖A‖_F² − ‖P‖_F², Proposition 4.2 for ones (unmasked leaves the diagonal; masked → Lemma A.5),
the Jacobian by finite differences, sampled fields, saved points and run files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.field import ExactField, FiniteField, MonteCarloField
from mesadyn.flow import FieldProblem, integrate, stiffness
from mesadyn.io import load_run, save_run
from mesadyn.model import active_mask, diagonal_init, diagonal_mask, free_mask, gaussian_init
from mesadyn.model import invariant as invariant_of
from mesadyn.outcome import Outcome
from mesadyn.process import gaussian, ones, sparse
from mesadyn.reduced import ReducedSystem

INITS = [(0.1, 0.1), (0.5, 1.5), (2.0, 2.0)]


def _t_end(system: ReducedSystem, a0: float, b0: float) -> float:
    return max(1.5 * system.time_to_reach(a0, b0, 1e-12), 1.0 / system.c2)


def _full_vs_reduced(fam, T: int, a0: float, b0: float, solver: str = "DOP853") -> None:
    d = fam.d
    field = ExactField(fam, T)
    system = ReducedSystem.from_family(fam, T)
    res = integrate(field, diagonal_init(d, a0, b0), t_end=_t_end(system, a0, b0),
                    solver=solver, rtol=1e-10, atol=1e-12, steady_tol=0)
    assert res.status is Outcome.T_END, res.message
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
    # the invariant column is model.invariant of each saved θ
    np.testing.assert_array_equal(res.invariant, invariant_of(res.theta))


@pytest.mark.parametrize("fam", [gaussian(2, 1.0), sparse(2, 1.0)], ids=["gaussian", "sparse"])
@pytest.mark.parametrize("a0,b0", INITS)
def test_full_exact_flow_tracks_reduced(fam, a0: float, b0: float) -> None:
    _full_vs_reduced(fam, 10, a0, b0)


@pytest.mark.slow
@pytest.mark.parametrize("fam", [gaussian(5, s) for s in (0.5, 1.0, 2.0)]
                         + [sparse(5, c) for c in (0.5, 1.0, 2.0)])
@pytest.mark.parametrize("a0,b0", INITS)
def test_full_exact_flow_tracks_reduced_paper_size(fam, a0: float, b0: float) -> None:
    _full_vs_reduced(fam, 100, a0, b0)


def test_ones_unmasked_dense_fixed_point_and_masked_lemma_a5() -> None:
    fam, T, d = ones(3), 20, 3
    field = ExactField(fam, T)
    system = ReducedSystem.from_family(fam, T)  # Lemma A.5 constants
    theta0 = diagonal_init(d, 0.5, 1.5)
    free = integrate(field, theta0, t_end=50.0, solver="scipy:LSODA", rtol=1e-10, atol=1e-12,
                     steady_tol=1e-10)
    assert free.status is Outcome.CONVERGED and free.grad_max[-1] < 1e-9
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


def test_jacobian_is_minus_hessian_by_finite_differences() -> None:
    fam = gaussian(2, 0.8)
    field = ExactField(fam, 6)
    theta = gaussian_init(2, 0.3, seed=3)
    for mask in (None, "diagonal"):
        prob = FieldProblem(field, theta, free_mask(mask, 2))
        y = prob.y0 + 0.1
        J = prob.jac_np(y)
        h = 1e-6
        fd = np.empty_like(J)
        for k in range(y.size):
            e = np.zeros_like(y)
            e[k] = h
            fd[:, k] = (prob.rhs_np(y + e) - prob.rhs_np(y - e)) / (2 * h)
        np.testing.assert_allclose(J, fd, atol=1e-6 * max(1.0, np.abs(J).max()))
        assert prob.njev == 1 and prob.nfev == 2 * y.size


def test_inactive_entries_never_move() -> None:
    field = ExactField(gaussian(2, 1.0), 6)
    theta0 = gaussian_init(2, 0.2, seed=5)
    res = integrate(field, theta0, t_end=0.05, solver="RK45", steady_tol=0)
    inactive = ~active_mask(2)
    np.testing.assert_array_equal(res.theta[:, inactive],
                                  np.repeat(theta0.numpy()[None, inactive], len(res.t), 0))
    # while the active ones do, and the full gradient there is exactly zero
    _, g = field.loss_and_grad(torch.from_numpy(res.final.copy()))
    assert torch.all(g[torch.from_numpy(inactive)] == 0)
    assert np.abs(res.final[~inactive] - theta0.numpy()[~inactive]).max() > 1e-3
    np.testing.assert_array_equal(res.mask, active_mask(2))


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
    assert back.attrs["status"] == "t_end"
    assert back["W_KQ"].shape == (6, 6)


def test_stiffness_ratio() -> None:
    assert stiffness(np.array([0.0, 1e-14, 2.0, -4.0, 100.0])) == pytest.approx(50.0)
    assert np.isinf(stiffness(np.zeros(3)))
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


def test_default_solver_of_integrate_is_lsoda() -> None:
    field = ExactField(gaussian(1, 1.0), 4)
    res = integrate(field, diagonal_init(1, 0.5, 1.5), t_end=0.05, steady_tol=0)
    assert res.solver_id == "scipy:LSODA" and res.njev >= 0
    auto = integrate(field, diagonal_init(1, 0.5, 1.5), t_end=0.05, steady_tol=0,
                     solver="auto")
    np.testing.assert_array_equal(auto.theta, res.theta)


@pytest.mark.parametrize("solver", ["scipy:LSODA", "scipy:RK45", "scipy:Radau",
                                    "torchdiffeq:dopri5"])
def test_a_start_whose_loss_overflows_fails_at_once(solver) -> None:
    """From a0 = b0 = 1e100 the loss overflows (L = inf, max|∇L| ≈ 7e301): LSODA and RK45
    looped (for ever, in effect: steps below any spacing of τ), Radau raised an internal
    ValueError.  Now the driver refuses to step from a start whose loss or gradient is not
    finite: ``failed`` at τ = 0 with the reason."""
    field = ExactField(gaussian(2, 1.0), 6)
    res = integrate(field, diagonal_init(2, 1e100, 1e100), t_end=1.0, solver=solver)
    assert res.status is Outcome.FAILED and "not finite" in res.message
    assert res.t[-1] == 0.0 and res.solver_stats.n_accepted == 0


def test_a_scipy_step_is_bounded_by_its_evaluations(monkeypatch) -> None:
    """scipy retries a rejected step inside ``step()`` until its size is below the spacing of
    τ (~1e-323 at τ = 0); the stepper fails a step after ``MAX_CALLS_PER_STEP`` evaluations."""
    from mesadyn.flow import _scipy

    monkeypatch.setattr(_scipy, "MAX_CALLS_PER_STEP", 3)
    field = ExactField(gaussian(2, 1.0), 6)
    res = integrate(field, diagonal_init(2, 0.5, 1.5), t_end=1.0, solver="scipy:RK45")
    assert res.status is Outcome.FAILED and "within 3 evaluations" in res.message
