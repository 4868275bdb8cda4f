"""The batched flow (issue 15): row by row the same run as one-by-one ``scipy:RK45`` solves
(same tolerances) on a mixed batch that converges at very different times; the vectorised
exact gradient against the field's own; events and save points against the closed form."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import ExactField
from mesadyn.field.batched import batched_loss_and_grad
from mesadyn.flow import Status, integrate
from mesadyn.flow._batched import integrate_batch
from mesadyn.model import diagonal_entries, diagonal_init, gaussian_init
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
    batch = integrate_batch(field, torch.stack(rows).numpy(), **kw)
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


def test_event_and_save_points_against_the_closed_form() -> None:
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

    res = integrate_batch(field, th0, t_end=0.3, rtol=1e-10, atol=1e-12, steady_tol=0,
                          event=half, t_save=t_save)
    assert set(res.status) == {Status.t_end.value}
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


def test_batched_failure_is_data_and_bad_input() -> None:
    field = ExactField(gaussian(1, 1.0), 4)
    th0 = torch.stack([diagonal_init(1, 0.5, 1.5), diagonal_init(1, 1e8, 1e8)]).numpy()
    res = integrate_batch(field, th0, t_end=1.0, steady_tol=1e-8, max_steps=500)
    assert res.status[0] == "converged" and res.status[1] in ("failed", "max_steps")
    assert res.counts()["converged"] == 1 and res.to_dict()["n"] == 2
    for bad, match in [(dict(theta0=th0[:, :-1]), "shape"), (dict(t_end=0.0), "t_end"),
                       (dict(steady_tol=-1.0), "steady_tol"), (dict(rtol=0.0), "rtol"),
                       (dict(t_save=[0.5, 0.2]), "t_save")]:
        kw = dict(theta0=th0, t_end=1.0) | bad
        with pytest.raises(MesadynError, match=match):
            integrate_batch(field, **kw)
