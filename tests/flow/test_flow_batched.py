"""The batched flow (issue 15): row by row the same run as one-by-one ``scipy:RK45`` solves
(same tolerances) on a mixed batch that converges at very different times; the batched
Rosenbrock (RODAS4) against its own N = 1 calls, against the batched Dormand–Prince and, for its
tableau, against the convergence order and L-stability it must have; the vectorised exact
gradient against the field's own; events and save points against the closed form."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import ExactField
from mesadyn.field.batched import batched_loss_and_grad
from mesadyn.flow import BatchMethod, SolverStats, integrate
from mesadyn.flow._batched import integrate_batch
from mesadyn.flow._rodas4 import rodas4_step
from mesadyn.model import diagonal_entries, diagonal_init, gaussian_init
from mesadyn.outcome import Outcome
from mesadyn.process import gaussian, ones
from mesadyn.reduced import ReducedSystem


@pytest.mark.parametrize("fam", [gaussian(3, 1.0), ones(2)], ids=["gaussian", "ones"])
def test_batched_gradient_equals_the_fields(fam) -> None:
    field = ExactField(fam, 8)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(7, field.n_params)) * rng.uniform(0.01, 2.0, size=(7, 1))
    loss, grad = batched_loss_and_grad(field, X)
    for k, x in enumerate(X):
        v, g = field.loss_and_grad(torch.from_numpy(x))
        assert loss[k] == pytest.approx(float(v), rel=1e-13, abs=1e-13)
        np.testing.assert_allclose(grad[k], g.numpy(), rtol=1e-12, atol=1e-12 * float(
            g.abs().max()))
    with pytest.raises(MesadynError, match="shape"):
        batched_loss_and_grad(field, X[:, :-1])


def test_batched_equals_one_by_one() -> None:
    """Diagonal starts settle by τ ≈ 0.1–0.5, a Gaussian one at τ ≈ 17, another not by t_end:
    every row's end point, time, status and step counts as its own solve."""
    field = ExactField(gaussian(2, 1.0), 10)
    rows = [diagonal_init(2, 0.5, 1.5), diagonal_init(2, 0.1, 0.1), diagonal_init(2, 2.0, 2.0),
            gaussian_init(2, 0.3, 1), gaussian_init(2, 0.01, 2)]
    kw = dict(t_end=20.0, rtol=1e-10, atol=1e-12, steady_tol=1e-8)
    batch = integrate_batch(field, torch.stack(rows).numpy(), method="dopri5", **kw)
    assert len(set(np.round(batch.t, 3))) == len(rows)  # very different stopping times
    assert list(batch.status).count("converged") == 4  # gaussian_init(σ_w=0.3) is slower
    for k, th in enumerate(rows):
        one = integrate(field, th, solver="scipy:RK45", compute_stiffness=False, **kw)
        assert one.status == batch.status[k]
        assert np.max(np.abs(one.final - batch.theta[k])) < 1e-9
        assert one.t[-1] == pytest.approx(batch.t[k], rel=1e-6)
        assert (one.n_accepted, one.n_rejected) == (batch.n_accepted[k], batch.n_rejected[k])
        if one.status == "converged":
            assert one.grad_max[-1] < 1e-8 and batch.grad_max[k] < 1e-8


@pytest.mark.parametrize("method", list(BatchMethod))
def test_event_and_save_points_against_the_closed_form(method) -> None:
    """From diagonal starts the full flow is Lemma 5.2's: the first τ with ab = ab*/2 and the
    saved (a, b)(τ) are known exactly."""
    fam, T = gaussian(2, 1.0), 10
    field = ExactField(fam, T)
    system = ReducedSystem.from_family(fam, T)
    p = system.ab_star
    starts = [(0.01, 0.01), (0.05, 0.02), (0.2, 0.3)]
    th0 = torch.stack([diagonal_init(2, a, b) for a, b in starts]).numpy()
    t_save = np.linspace(0.0, 0.3, 7)

    def half(th: np.ndarray) -> np.ndarray:
        a, b = diagonal_entries(th)
        return np.mean(a * b, axis=1) - p / 2

    # rodas4 at a looser rtol (its steps at 1e-10 are accuracy-bound and many; see the module
    # docstring of mesadyn.flow._batched): the event and save points still to 1e-6 / 1e-7
    rtol, atol = (1e-10, 1e-12) if method is BatchMethod.DOPRI5 else (1e-8, 1e-11)
    res = integrate_batch(field, th0, t_end=0.3, rtol=rtol, atol=atol, steady_tol=0,
                          event=half, t_save=t_save, method=method)
    assert set(res.status) == {Outcome.T_END.value}
    for k, (a0, b0) in enumerate(starts):
        taus = np.linspace(0, 0.3, 30001)
        a, b = system.solution(a0, b0, taus)
        s = a * b - p / 2
        j = int(np.argmax(s >= 0))
        exact = taus[j - 1] + (taus[j] - taus[j - 1]) * (-s[j - 1]) / (s[j] - s[j - 1])
        assert res.event_t[k] == pytest.approx(exact, rel=1e-6)
        a_s, b_s = system.solution(a0, b0, t_save)
        a_b, b_b = diagonal_entries(res.theta_saved[k])
        np.testing.assert_allclose(a_b.mean(1), a_s, atol=1e-7)
        np.testing.assert_allclose(b_b.mean(1), b_s, atol=1e-7)


@pytest.mark.parametrize("method", list(BatchMethod))
def test_batched_failure_is_data_and_bad_input(method) -> None:
    field = ExactField(gaussian(1, 1.0), 4)
    th0 = torch.stack([diagonal_init(1, 0.5, 1.5), diagonal_init(1, 1e8, 1e8)]).numpy()
    res = integrate_batch(field, th0, t_end=1.0, steady_tol=1e-8, max_steps=500, method=method,
                          rtol=1e-10 if method is BatchMethod.DOPRI5 else 1e-7)
    assert res.status[0] == "converged" and res.status[1] in ("failed", "max_steps")
    assert res.counts()["converged"] == 1 and res.to_dict()["n"] == 2
    for bad, match in [(dict(theta0=th0[:, :-1]), "shape"), (dict(t_end=0.0), "t_end"),
                       (dict(steady_tol=-1.0), "steady_tol"), (dict(rtol=0.0), "rtol"),
                       (dict(t_save=[0.5, 0.2]), "t_save"), (dict(method="rk4"), "rk4")]:
        kw = dict(theta0=th0, t_end=1.0) | bad
        with pytest.raises(MesadynError, match=match):
            integrate_batch(field, **kw)


def test_batched_counts_are_one_solver_stats() -> None:
    """One SolverStats for the whole solve (the schema of a single flow): totals of the rows'
    steps, the rows evaluated, and the read-only shortcuts and ``--json`` keys of before."""
    field = ExactField(gaussian(1, 1.0), 4)
    th0 = torch.stack([diagonal_init(1, 0.5, 1.5), diagonal_init(1, 0.2, 0.1)]).numpy()
    res = integrate_batch(field, th0, t_end=2.0, steady_tol=1e-8, method="dopri5")
    s = res.solver_stats
    assert isinstance(s, SolverStats)
    assert s.n_accepted == int(res.n_accepted.sum()) and s.n_rejected == int(res.n_rejected.sum())
    assert (res.nfev, res.njev, res.wall_s) == (s.nfev, s.njev, s.wall_s)
    assert s.njev == 0 and s.nfev >= 2 * s.n_accepted and res.n_calls < s.nfev
    with pytest.raises(AttributeError):
        res.nfev = 0  # type: ignore[misc]
    out = res.to_dict()
    assert list(out) == ["solver", "n", "statuses", "nfev", "njev", "n_calls",
                         "n_accepted_total", "n_rejected_total", "wall_s", "rtol", "atol",
                         "steady_tol", "t_end"]
    assert (out["nfev"], out["n_accepted_total"], out["n_rejected_total"]) == (
        s.nfev, s.n_accepted, s.n_rejected)


def test_rodas4_batched_equals_its_one_by_one_calls() -> None:
    """Diagonal starts settle by τ ≈ 3–7, a Gaussian one at τ ≈ 18 (at these tolerances): every
    row's end point, time, status and step counts as its own N = 1 solve."""
    field = ExactField(gaussian(2, 1.0), 10)
    rows = [diagonal_init(2, 0.5, 1.5), diagonal_init(2, 2.0, 2.0), gaussian_init(2, 0.01, 2)]
    kw = dict(t_end=40.0, rtol=1e-6, atol=1e-9, steady_tol=1e-8, method="rodas4")
    batch = integrate_batch(field, torch.stack(rows).numpy(), **kw)
    assert set(batch.status) == {"converged"}
    assert batch.t.max() > 2.5 * batch.t.min()  # different stopping times
    assert batch.njev == int((batch.n_accepted + batch.n_rejected).sum())
    assert batch.to_dict()["solver"] == "batched:rodas4"
    for k, th in enumerate(rows):
        one = integrate_batch(field, th[None].numpy(), **kw)
        assert one.status[0] == batch.status[k] and one.t[0] == pytest.approx(batch.t[k])
        assert np.max(np.abs(one.theta[0] - batch.theta[k])) < 1e-9
        assert (one.n_accepted[0], one.n_rejected[0]) == (batch.n_accepted[k],
                                                          batch.n_rejected[k])
        assert batch.grad_max[k] < 1e-8


@pytest.mark.parametrize("rows", [
    [(0.5, 1.5), (0.1, 0.1)],
    pytest.param([(2.0, 2.0), 2, 3], marks=pytest.mark.slow)], ids=["diagonal", "gaussian"])
def test_rodas4_against_dopri5_at_rtol_1e10(rows) -> None:
    """The two batched methods at rtol 1e-10 stop at max|∇L| < 1e-8 within 1e-8 of each other
    (the stopping rule's own resolution is |∇L|/λ_slow; measured here: ≤ 1.3e-10 on the
    diagonal starts, ≤ 8.6e-10 on Gaussian ones with σ_w = 0.01)."""
    field = ExactField(gaussian(2, 1.0), 10)
    th0 = torch.stack([diagonal_init(2, *r) if isinstance(r, tuple) else gaussian_init(2, 0.01, r)
                       for r in rows]).numpy()
    kw = dict(t_end=60.0, rtol=1e-10, atol=1e-12, steady_tol=1e-8)
    ros = integrate_batch(field, th0, method="rodas4", **kw)
    dop = integrate_batch(field, th0, method="dopri5", **kw)
    assert set(ros.status) == set(dop.status) == {"converged"}
    assert np.max(np.abs(ros.theta - dop.theta)) < 1e-8


def _nonlinear(Y: np.ndarray) -> np.ndarray:
    y1, y2 = Y[:, 0], Y[:, 1]
    return np.stack([-y1 * y2 + np.sin(y2), y1 - 0.5 * y2**3 + 0.3 * y1 * y1], axis=1)


def _nonlinear_jac(Y: np.ndarray) -> np.ndarray:
    y1, y2 = Y[:, 0], Y[:, 1]
    J = np.empty((len(Y), 2, 2))
    J[:, 0, 0], J[:, 0, 1] = -y2, -y1 + np.cos(y2)
    J[:, 1, 0], J[:, 1, 1] = 1 + 0.6 * y1, -1.5 * y2**2
    return J


def test_rodas4_tableau_order_and_l_stability() -> None:
    """The transcribed coefficients: global error of order 4 and an embedded estimate of local
    order 4 (the order-3 solution's) on a nonlinear 2-D problem, against scipy's DOP853 at
    rtol 1e-13; and R(z) → 0 as z → −∞ (L-stable, stiffly accurate)."""
    from scipy.integrate import solve_ivp

    y0 = np.array([[0.7, -0.4]])
    ref = solve_ivp(lambda t, y: _nonlinear(y[None])[0], (0, 2), y0[0], method="DOP853",
                    rtol=1e-13, atol=1e-15).y[:, -1]
    errs, ests = [], []
    for n in (10, 20, 40):
        y, h = y0.copy(), np.array([2.0 / n])
        first = None
        for _ in range(n):
            y, est = rodas4_step(_nonlinear, y, _nonlinear(y), _nonlinear_jac(y), h)
            first = est if first is None else first
        errs.append(np.abs(y[0] - ref).max())
        ests.append(np.abs(first).max())
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    est_orders = np.log2(np.array(ests[:-1]) / np.array(ests[1:]))
    assert np.all((orders > 3.8) & (orders < 4.3)), orders
    assert np.all((est_orders > 3.6) & (est_orders < 4.3)), est_orders
    lam = -1e10
    y1, _ = rodas4_step(lambda Y: lam * Y, np.ones((1, 1)), np.full((1, 1), lam),
                        np.full((1, 1, 1), lam), np.array([1.0]))
    assert abs(y1[0, 0]) < 1e-8


class _Hung(BaseException):  # noqa: N818 - not an Exception: nothing under test may catch it
    """Raised by SIGALRM in a solve that did not end."""


def _within(seconds: float, fn, *args, **kw):
    """``fn(*args, **kw)``, failing the test if it has not returned after ``seconds``."""
    import signal

    def alarm(signum, frame):  # noqa: ARG001
        raise _Hung

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args, **kw)
    except _Hung:
        pytest.fail(f"{getattr(fn, '__name__', fn)} did not end within {seconds} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("method", list(BatchMethod))
@pytest.mark.parametrize("a", [1e100, 1e200])
def test_a_row_without_a_finite_first_step_fails_at_once(method, a) -> None:
    """The batched stepper looped for ever on a start whose first slope (1e200: ∇L overflows)
    or every trial step (1e100: the stages overflow) is not finite: a NaN error estimate
    rejected the step, the step size became NaN, the underflow test was never true, and
    max_steps counted only accepted steps.  Now such a row fails (the other rows are
    unaffected) and every row is bounded by its attempts."""
    field = ExactField(gaussian(3, 1.0), 20)
    th0 = torch.stack([diagonal_init(3, a, a), diagonal_init(3, 0.5, 1.5)]).numpy()
    res = _within(60, integrate_batch, field, th0, t_end=10.0, steady_tol=1e-8,
                  max_steps=2000, method=method)
    assert res.status[0] in (Outcome.FAILED.value, Outcome.MAX_STEPS.value)
    assert res.n_accepted[0] + res.n_rejected[0] <= 2 * 2000
    assert res.status[1] == Outcome.CONVERGED.value


def test_rejected_steps_are_bounded_like_accepted_ones() -> None:
    """A row whose every step is rejected stops after ``max_steps`` rejections
    (``max_steps``), not only after ``max_steps`` accepted steps."""
    field = ExactField(gaussian(2, 1.0), 6)
    res = integrate_batch(field, diagonal_init(2, 1e100, 1e100).numpy()[None], t_end=1.0,
                          max_steps=3)
    assert res.n_accepted[0] == 0 and res.n_rejected[0] <= 3
    assert res.status[0] in (Outcome.MAX_STEPS.value, Outcome.FAILED.value)


def test_the_verdict_keeps_a_row_stopped_at_a_saddle_going() -> None:
    """A Gaussian start of σ_w = 1e-10 has max|∇L| ≈ 2e-10 < steady_tol at τ = 0: the bare
    steady-state test stops it there (``converged`` at the saddle, ab ≈ 1e-20).  With the
    saddle verdict (negative curvature there) it integrates on, leaves the saddle and
    converges on the hyperbola ab = ab*; a start exactly at θ = 0 stays and is ``saddle``."""
    from mesadyn.analysis.steady import saddle_verdict
    from mesadyn.model import free_mask

    field = ExactField(gaussian(2, 1.0), 6)
    p = ReducedSystem(66.25, 12.0).ab_star  # d = 2, T = 6: c1 = 66.25, c2 = 12
    th0 = np.stack([gaussian_init(2, 1e-10, 1).numpy(), np.zeros(field.n_params)])
    bare = integrate_batch(field, th0, t_end=50.0, steady_tol=1e-8)
    assert list(bare.status) == ["converged", "converged"] and bare.t.max() == 0.0
    res = integrate_batch(field, th0, t_end=50.0, steady_tol=1e-8,
                          verdict=saddle_verdict(field, free_mask(None, 2)))
    assert list(res.status) == ["converged", "saddle"]
    a, b = diagonal_entries(res.theta[0])
    np.testing.assert_allclose(np.abs(a * b), p, rtol=1e-6)
    assert 1.0 < res.t[0] < 50.0 and res.t[1] == 50.0
