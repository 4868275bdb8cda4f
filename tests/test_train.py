"""The paper's protocol (Section 6): full-batch GD, Table 1, divergence, the saved run."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import FiniteField, FiniteSequenceField
from mesadyn.model import diagonal_init, diagonal_mask, gaussian_init
from mesadyn.process import gaussian, ones, rademacher, sparse
from mesadyn.theory import constants
from mesadyn.train import (
    TABLE1,
    TrainingDiverged,
    TrainResult,
    table1_lr,
    test_seed,
    train,
    train_batch,
)


def test_table1():
    assert table1_lr(gaussian(5, 0.5)) == 1e-3
    assert table1_lr(gaussian(5, 1.0)) == 1e-4
    assert table1_lr(gaussian(5, 2.0)) == 2e-6
    assert table1_lr(sparse(5, 0.5)) == 3e-2
    assert table1_lr(sparse(5, 1.0)) == 1e-3
    assert table1_lr(sparse(5, 2.0)) == 1e-4
    assert table1_lr(ones(5)) == 5e-4
    assert len(TABLE1) == 7
    with pytest.raises(MesadynError, match="sigma=0.7"):
        table1_lr(gaussian(5, 0.7))
    with pytest.raises(MesadynError, match="rademacher"):
        table1_lr(rademacher(5))


def test_sparse_converges_to_theorem_41():
    """Example 4.1: ab → 1/c² (κ3 = 0, at every T), ratio → 1 (Theorem 4.2)."""
    r = train(sparse(3, 1.0), 10, m=300, steps=80, lr=0.1, device="cpu")
    assert r.ab_theory == pytest.approx(1.0)
    assert abs(r.ab_mean[-1] - 1.0) < 1e-3
    s = r.summary()
    assert abs(s["ratio"] - 1.0) < 1e-3 and s["ratio_excluded"] == 2 * 300
    assert s["ratio_used"] == 300
    assert np.all(np.diff(r.train_loss) <= 1e-12)  # GD with a small step is monotone


def test_gaussian_converges_to_theorem_41_at_this_T():
    """Small-context (T=5, cf. Fig. 4): ab → Theorem 4.1's c2/c1 at T=5, not the T→∞ 1/(5σ²).
    The finite-sample minimiser deviates from it by O(1/√(m d)) (≈2% here)."""
    fam, T = gaussian(2, 1.0), 5
    r = train(fam, T, m=6000, steps=50, lr=0.02, device="cpu")
    ab_star = constants(fam, T).ab_star
    assert r.ab_theory == pytest.approx(ab_star)
    assert abs(r.ab_mean[-1] / ab_star - 1) < 0.06
    assert abs(r.ab_mean[-1] - r.ab_mean[-6]) < 1e-5  # settled
    assert abs(ab_star - r.ab_limit) / ab_star > 0.1  # the T→∞ value is visibly different
    s = r.summary()
    assert abs(s["ratio"] - s["ab"] * fam.second_moment) < 4 * s["ratio_se"] + 0.02


def test_gd_bookkeeping():
    fam, T, lr = gaussian(2, 1.0), 6, 0.01
    theta0 = gaussian_init(2, 0.05, seed=3)
    r = train(fam, T, m=50, steps=3, lr=lr, theta0=theta0, seed=4, device="cpu")
    f = FiniteField(fam, T, 50, seed=4, device="cpu")
    L0, g0 = f.loss_and_grad(theta0)
    assert r.train_loss[0] == pytest.approx(float(L0), rel=1e-12)
    assert np.allclose(r.theta[1], (theta0 - lr * g0).numpy(), rtol=1e-12, atol=1e-15)
    assert r.theta.shape == (4, 72) and r.ab.shape == (4, 2) and r.steps == 3
    assert np.allclose(r.ab, r.kq_diag * r.pv_diag)
    assert np.allclose(r.ab_mean, r.ab.mean(1))
    assert r.config["test_seed"] == test_seed(4) != 4


def test_diagonal_mask_and_theorem_43():
    """x_1 = 1_d with the off-diagonal gradients clipped: only diagonals move; ab → Thm 4.3."""
    d, T = 2, 6
    r = train(ones(d), T, m=500, steps=60, lr=0.05, mask="diagonal", device="cpu")
    moved = np.any(r.theta != r.theta[0], axis=0)
    assert np.array_equal(moved, diagonal_mask(d))
    assert abs(r.ab_mean[-1] / constants(ones(d), T).ab_star - 1) < 0.01


def test_divergence_is_detected_with_partial_result():
    with pytest.raises(TrainingDiverged, match="diverged at step") as info:
        train(sparse(2, 1.0), 6, m=40, steps=50, lr=50.0, device="cpu")
    res = info.value.result
    assert res.diverged and res.diverged_step is not None
    k = res.diverged_step
    assert 1 <= k < 50 and res.step[-1] <= k
    assert not (math.isfinite(res.train_loss[-1]) and res.train_loss[-1] < 1e6 * res.train_loss[0])
    assert isinstance(info.value, MesadynError)


def test_callback_can_stop_and_result_round_trips(tmp_path):
    seen = []

    def cb(k, rec):
        seen.append((k, rec["ab"]))
        return k == 2

    r = train(sparse(2, 1.0), 5, m=20, steps=10, lr=0.05, callback=cb, device="cpu")
    assert [k for k, _ in seen] == [0, 1, 2] and r.steps == 2
    from mesadyn.io import load_run, save_run

    path = save_run(r.to_dataset(), tmp_path / "run.nc", kind="train", config=r.config, seed=1)
    back = TrainResult.from_dataset(load_run(path, kind="train"))
    assert np.array_equal(back.theta, r.theta) and np.array_equal(back.ab, r.ab)
    assert back.ab_theory == r.ab_theory and back.lr == r.lr
    assert back.config["m"] == 20


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"lr": -1.0}, "lr"), ({"steps": -1}, "steps"), ({"m": 0}, "m=0"),
     ({"mask": "upper"}, "upper"), ({"theta0": torch.zeros(5)}, "length"),
     ({"radius": 0.0}, "radius=0"), ({"rotation": "spiral"}, "spiral"),
     ({"noise": -0.5}, "noise=-0.5")],
)
def test_bad_input(kw, match):
    with pytest.raises(MesadynError, match=match):
        train(sparse(2, 1.0), 5, **{"m": 10, "steps": 1, "lr": 0.1, "device": "cpu", **kw})


@pytest.mark.slow
def test_paper_protocol_gaussian():
    """`mesadyn train --x1 gaussian --sigma 1 --a0 0.1 --b0 0.1`: ab within 3% of 0.1919."""
    r = train(gaussian(5, 1.0), 100, a0=0.1, b0=0.1)
    assert r.ab_theory == pytest.approx(0.1919, abs=1e-4)
    assert abs(r.ab_mean[-1] / r.ab_theory - 1) < 0.03


@pytest.mark.slow
def test_paper_protocol_sparse():
    """`mesadyn train --x1 sparse --scale 0.5 --a0 0.1 --b0 0.1`: ab within 3% of 1/c² = 4."""
    r = train(sparse(5, 0.5), 100, a0=0.1, b0=0.1)
    assert abs(r.ab_mean[-1] / 4.0 - 1) < 0.03


# ---- several runs on one training set (train_batch) ---------------------------------------
def _same_run(a: TrainResult, b: TrainResult) -> None:
    for name in ("step", "ab", "kq_diag", "pv_diag", "train_loss", "test_loss", "ratio",
                 "ratio_se", "grad_max", "theta"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert (a.diverged, a.diverged_step, a.message) == (b.diverged, b.diverged_step, b.message)
    assert a.config == b.config and a.ratio_info == b.ratio_info


def test_train_batch_equals_one_run_at_a_time():
    """Stepping the paper's three inits together gives each run's numbers bit for bit."""
    fam, T = gaussian(3, 1.0), 12
    inits = [(0.1, 0.1), (0.5, 1.5), (2.0, 2.0)]
    kw = dict(m=150, steps=6, lr=1e-3, seed=3, m_test=90, eval_every=2, device="cpu")
    thetas = [diagonal_init(3, a, b) for a, b in inits]
    descs = [{"init": "diagonal", "a0": a, "b0": b} for a, b in inits]
    batch = train_batch(fam, T, thetas, inits=descs, **kw)
    for (a, b), got in zip(inits, batch, strict=True):
        _same_run(got, train(fam, T, a0=a, b0=b, **kw))


def test_train_batch_diverging_run_stops_alone():
    """A run that blows up stops with diverged=True; the others finish unchanged."""
    fam, T = gaussian(2, 1.0), 8
    kw = dict(m=80, steps=5, lr=0.01, seed=1, device="cpu")
    good, bad = diagonal_init(2, 0.01, 0.01), diagonal_init(2, 3.0, 3.0)
    small, big = train_batch(fam, T, [good, bad], **kw)
    assert big.diverged and big.diverged_step is not None and big.diverged_step < 5
    assert "diverged" in big.message
    with pytest.raises(TrainingDiverged):
        train(fam, T, theta0=bad, **kw)
    alone = train(fam, T, theta0=good, **kw)
    _same_run(small, alone)


def test_train_batch_bad_input():
    with pytest.raises(MesadynError, match="at least one"):
        train_batch(gaussian(2, 1.0), 6, [], m=10, steps=1, lr=1e-3)
    with pytest.raises(MesadynError, match="init descriptions"):
        train_batch(gaussian(2, 1.0), 6, [diagonal_init(2, 0.1, 0.1)], inits=[], m=10,
                    steps=1, lr=1e-3)


# ---- the process beyond the paper's (docs/design.md §6) ----------------------------------------
def test_gd_at_a_radius_steps_on_that_finite_field():
    fam, T, lr, r0 = gaussian(2, 1.0), 6, 0.01, 0.8
    theta0 = gaussian_init(2, 0.05, seed=3)
    r = train(fam, T, m=40, m_test=30, steps=2, lr=lr, theta0=theta0, seed=4, device="cpu",
              radius=r0)
    f = FiniteField(fam, T, 40, seed=4, device="cpu", radius=r0)
    L0, g0 = f.loss_and_grad(theta0)
    assert r.train_loss[0] == pytest.approx(float(L0), rel=1e-12)
    assert np.allclose(r.theta[1], (theta0 - lr * g0).numpy(), rtol=1e-12, atol=1e-15)
    test = FiniteField(fam, T, 30, seed=test_seed(4), device="cpu", radius=r0)
    assert r.test_loss[0] == pytest.approx(float(test.loss(theta0)), rel=1e-12)
    assert r.ab_theory == pytest.approx(constants(fam, T, radius=r0).ab_star, rel=1e-12)
    assert math.isnan(r.ratio[0]) and math.isnan(r.ratio_theory)  # Prop. 4.1 is r = 1's
    assert r.config["radius"] == r0 and "rotation" not in r.config


@pytest.mark.parametrize(("rotation", "noise"), [("haar", 0.0), ("real", 0.3)])
def test_gd_beyond_the_diagonal_steps_on_the_sequence_field(rotation, noise):
    fam, T, lr = gaussian(2, 1.0), 6, 0.02
    theta0 = gaussian_init(2, 0.05, seed=3)
    r = train(fam, T, m=40, m_test=30, steps=20, lr=lr, theta0=theta0, seed=4, device="cpu",
              rotation=rotation, noise=noise, radius=0.9)
    kw = {"radius": 0.9, "rotation": rotation, "noise": noise, "device": "cpu"}
    f = FiniteSequenceField(fam, T, 40, 4, **kw)
    L0, g0 = f.loss_and_grad(theta0)
    assert r.train_loss[0] == pytest.approx(float(L0), rel=1e-12)
    assert np.allclose(r.theta[1], (theta0 - lr * g0).numpy(), rtol=1e-12, atol=1e-15)
    test = FiniteSequenceField(fam, T, 30, test_seed(4), **kw)
    assert r.test_loss[0] == pytest.approx(float(test.loss(theta0)), rel=1e-12)
    assert r.train_loss[-1] < r.train_loss[0]  # GD descends
    assert math.isnan(r.ab_theory) and math.isnan(r.ratio[-1])  # no reduced system here
    assert r.config["rotation"] == rotation and r.config["noise"] == noise


def test_real_rotation_needs_an_even_d():
    with pytest.raises(MesadynError, match="d=3"):
        train(gaussian(3), 5, m=10, steps=1, lr=0.1, device="cpu", rotation="real")


def test_train_reports_progress_by_step():
    """``mesadyn.train(..., progress=...)``: called with every step number, in order."""
    from mesadyn.process import gaussian
    from mesadyn.train import train

    seen: list[float] = []
    train(gaussian(2, 1.0), 5, m=20, steps=4, lr=1e-3, device="cpu", progress=seen.append)
    assert seen == [0.0, 1.0, 2.0, 3.0, 4.0]
