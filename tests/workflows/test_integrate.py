"""``mesadyn.workflows.integrate``: Config validation, honest statuses, the cost guard, the
horizon policy, and ``to_dict`` == the CLI's ``--json``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mesadyn.analysis.steady import relaxation_time
from mesadyn.errors import MesadynError
from mesadyn.process import gaussian, ones
from mesadyn.reduced import ReducedSystem
from mesadyn.theory import constants
from mesadyn.workflows import _cost, integrate

SMALL = {"x1": "gaussian", "d": 2, "T": 6}


def _no_volatile(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("wall_s", "out")}


@pytest.mark.parametrize(("kw", "needle"), [
    ({"solver": "euler"}, "euler"),
    ({"rtol": 0.0}, "rtol"),
    ({"atol": -1.0}, "atol"),
    ({"t_end": 0.0}, "t_end"),
    ({"field": "magic"}, "magic"),
    ({"mask": "upper"}, "upper"),
    ({"init": "zeros"}, "zeros"),
    ({"sigma_w": 0.0}, "sigma_w"),
    ({"a0": math.nan}, "a0"),
    ({"steady_tol": -1.0}, "steady_tol"),
    ({"n_save": 1}, "n_save"),
    ({"max_steps": 0}, "max_steps"),
    ({"samples": 1}, "samples"),
    ({"out": "run.txt"}, "run.txt"),
])
def test_config_rejects_bad_values(kw, needle):
    with pytest.raises(MesadynError, match=needle):
        integrate.Config(**{**SMALL, **kw})


def test_T_2_names_T_not_a_missing_reduced_system():
    """Issue 12: ``--T 2`` used to say "no reduced system"; T itself is what is wrong."""
    with pytest.raises(MesadynError) as exc:
        integrate.Config(T=2)
    assert "T" in str(exc.value) and "reduced system" not in str(exc.value)


def test_reduced_matches_closed_form_and_cli(cli_json):
    cfg = integrate.Config(reduced=True, x1="sparse", scale=2.0, d=3, T=9, a0=0.3, b0=-1.1)
    res = integrate.run(cfg)
    assert isinstance(res, integrate.ReducedResult)
    system = ReducedSystem.from_family(__import__("mesadyn").sparse(3, 2.0), 9)
    assert res.t_end == system.horizon(0.3, -1.1)
    a_lim, b_lim = system.limit(0.3, -1.1)
    assert (res.a, res.b) == pytest.approx((a_lim, b_lim), abs=1e-8)
    assert res.ab == pytest.approx(system.ab_star, rel=1e-8)
    # the closed form reaches the fixed point: converged, as the full flow reports it
    assert res.status == "converged" and res.flow is not None and res.flow.t[-1] == res.t_final
    got = cli_json("integrate", "--reduced", "--x1", "sparse", "--scale", "2", "--d", "3",
                   "--T", "9", "--a0", "0.3", "--b0", "-1.1")
    assert _no_volatile(res.to_dict()) == _no_volatile(got)


def test_full_flow_reaches_theorem_41_and_matches_cli(cli_json):
    res = integrate.run(integrate.Config(**SMALL))
    assert isinstance(res, integrate.FullResult)
    c = constants(gaussian(2, 1.0), 6)
    np.testing.assert_allclose(res.ab, c.ab_star, rtol=1e-7)
    assert res.status == "converged" and res.converged and res.t_final > 0
    assert res.reduced_max_deviation < 1e-7 and res.off_structure_max == 0.0
    assert res.W_KQ.shape == (6, 6) and res.flow is not None
    got = cli_json("integrate", "--x1", "gaussian", "--d", "2", "--T", "6")
    assert _no_volatile(res.to_dict()) == _no_volatile(got)


def test_a_start_at_the_saddle_integrates_on_to_the_minimum():
    """A Gaussian start of size 1e-12 is below steady_tol at τ = 0, near the saddle at the
    origin: the flow is not reported converged there; it leaves the saddle and ends at ab*."""
    cfg = integrate.Config(x1="gaussian", d=2, T=6, init="gaussian", sigma_w=1e-12)
    res = integrate.run(cfg)
    assert res.status == "converged" and res.t_final > 0
    assert res.ab_mean == pytest.approx(res.ab_theory, rel=1e-8)
    assert "saddle" in res.message


def test_tiny_sigma_is_not_reported_converged_at_tau_0(capsys):
    """Issue 12: at σ = 1e-3 the gradient at the start is below steady_tol, far from ab*."""
    cfg = integrate.Config(x1="gaussian", sigma=1e-3, d=2, T=6)
    res = integrate.run(cfg)
    assert res.t_final == 0.0 and res.flow.status == "converged"  # what the solver saw
    assert res.status == "failed" and not res.converged
    assert "not a fixed point" in res.message and "steady_tol" in res.message
    assert abs(res.ab_mean - res.ab_theory) > 1e3  # far from Theorem 4.1's ab*
    from mesadyn.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["integrate", "--x1", "gaussian", "--sigma", "1e-3", "--d", "2", "--T", "6",
              "--json"])
    assert exc.value.code == 1
    assert '"status": "failed"' in capsys.readouterr().out


def test_start_at_the_fixed_point_is_converged_at_tau_0():
    """The Newton-step test accepts a start that is a fixed point (even at a tiny scale)."""
    c = constants(gaussian(2, 1e-3), 6)
    s = math.sqrt(c.ab_star)
    res = integrate.run(integrate.Config(x1="gaussian", sigma=1e-3, d=2, T=6, a0=s, b0=s))
    assert res.t_final == 0.0 and res.status == "converged"


def test_sampled_flow_cost_guard(monkeypatch):
    """A sampled flow expected to exceed the limit is refused before integrating; force runs."""
    monkeypatch.setattr(_cost, "COST_LIMIT_S", 0.0)
    cfg = dict(x1="gaussian", d=1, T=5, field="mc", samples=64, t_end=0.05, steady_tol=0.0)
    with pytest.raises(MesadynError, match="--yes"):
        integrate.run(integrate.Config(**cfg))
    res = integrate.run(integrate.Config(**cfg, force=True))
    assert res.field == "mc" and res.status == "t_end"


def test_default_mc_flow_is_refused_before_building(monkeypatch):
    """Issue 12: ``--field mc`` at the defaults (10⁵ draws, d=5, T=100) ran for many minutes
    without warning; now the cost model refuses it before any draw is made."""
    import mesadyn.field

    def boom(*_a, **_k):
        raise AssertionError("built the field before estimating its cost")

    monkeypatch.setattr(mesadyn.field, "make_field", boom)
    cfg = integrate.Config(field="mc")
    assert _cost.sampled_flow_seconds(5, cfg.T, cfg.draws) > _cost.COST_LIMIT_S
    with pytest.raises(MesadynError, match="min"):
        integrate.run(cfg)
    small = integrate.Config(field="finite", m=32, d=1, T=5)
    assert _cost.sampled_flow_seconds(1, small.T, small.draws) < _cost.COST_LIMIT_S


def test_out_is_checked_before_any_work(tmp_path, monkeypatch):
    import mesadyn.flow

    def boom(*_a, **_k):
        raise AssertionError("integrated before checking --out")

    monkeypatch.setattr(mesadyn.flow, "integrate", boom)
    monkeypatch.setattr(mesadyn.flow, "integrate_reduced", boom)
    for reduced in (False, True):
        with pytest.raises(MesadynError, match="does not exist"):
            integrate.run(integrate.Config(**SMALL, reduced=reduced,
                                           out=str(tmp_path / "missing" / "r.nc")))
    (tmp_path / "dir.nc").mkdir()
    with pytest.raises(MesadynError, match="directory"):
        integrate.run(integrate.Config(**SMALL, out=str(tmp_path / "dir.nc")))


def test_horizon_policy():
    """One owner (analysis.horizon): ones leaves the diagonal structure unless masked
    (Proposition 4.2), decided by the family's declared Assumption 4.1, not by its name."""
    from mesadyn.analysis.horizon import OFF_DIAGONAL_FACTOR, full_flow_horizon
    from mesadyn.process import moments

    fam = ones(3)
    system = ReducedSystem.from_family(fam, 20)
    kw = dict(gaussian=False, a0=0.5, b0=1.5, sigma_w=0.01)
    assert full_flow_horizon(system, fam, masked=False, **kw) == \
        OFF_DIAGONAL_FACTOR * system.horizon(0.5, 1.5) == 20.0 * system.horizon(0.5, 1.5)
    assert full_flow_horizon(system, fam, masked=True, **kw) == system.horizon(0.5, 1.5)
    g = full_flow_horizon(system, fam, masked=True, gaussian=True, a0=0, b0=0, sigma_w=1e-3)
    assert g == pytest.approx(system.horizon(1e-3, 1e-3) * math.log(1e3))
    iid = moments(3, [0, 1, 0, 3, 0, 15])  # Assumption 4.1 holds: no factor
    assert full_flow_horizon(system, iid, masked=False, **kw) == system.horizon(0.5, 1.5)
    res = integrate.run(integrate.Config(x1="ones", d=3, T=20, t_end=2.5, n_save=2))
    assert res.t_end == 2.5


def test_progress_is_called_with_flow_time():
    seen: list[float] = []
    res = integrate.run(integrate.Config(reduced=True, **SMALL), progress=seen.append)
    assert seen and seen == sorted(seen) and 0 < seen[-1] <= res.t_end


# ---- issue 18: sampled flows that converge, and end points with error bars ----------------
SAMPLED = {"x1": "gaussian", "d": 1, "T": 5, "field": "mc", "samples": 400}


def test_sampled_flow_reaches_its_own_fixed_point():
    """The exact horizon is too short for a sampled flow (its slow modes are the exact loss's
    off-diagonal ones, excited by the draws): the flow continues by the measured relaxation
    time and stops on the steady-state test, at a fixed point of the sampled loss checked
    by the direct (prefix-sum) path."""
    import torch

    from mesadyn.field import FieldSpec, make_field
    from mesadyn.model import free_mask

    cfg = integrate.Config(**{**SAMPLED, "d": 2, "T": 6, "samples": 2000})
    res = integrate.run(cfg)
    assert res.status == "converged" and res.grad_norm < 1e-9
    fam = cfg.family()
    reduced_horizon = ReducedSystem.from_family(fam, 6).horizon(0.5, 1.5)
    assert res.t_end > reduced_horizon  # continued past the exact flow's horizon
    f = make_field(FieldSpec("mc", fam, 6, samples=2000, seed=1))
    g = f.direct_loss_and_grad(torch.as_tensor(res.flow.final))[1].numpy()
    assert np.abs(g[free_mask("none", 2)]).max() < 2e-9
    assert res.flow.t[0] == 0 and np.all(np.diff(res.flow.t) > 0)
    assert len(res.flow.t) <= cfg.n_save
    s = res.stats  # counts of both legs
    assert s.nfev > 0 and s.njev > 0 and s.n_accepted > 0


def test_relaxation_time_is_the_linear_decay_time():
    """On a quadratic loss ½ Σ μ_i x_i² the gradient along the slowest mode decays as e^{−μ τ}:
    the estimate is log(g/tol)/μ_min with μ_min the smallest non-zero curvature."""
    import torch

    from mesadyn.field import FieldSpec, make_field

    f = make_field(FieldSpec("exact", gaussian(1, 1.0), 5))
    c = constants(gaussian(1, 1.0), 5)
    s = math.sqrt(c.ab_star)
    theta = __import__("mesadyn").model.diagonal_init(1, s, s).numpy()
    free = __import__("mesadyn").model.free_mask("none", 1)
    mu, tau = relaxation_time(f, theta, free, 1e-3, 1e-9)
    H = f.hessian(torch.as_tensor(theta)).numpy()[np.ix_(free, free)]
    ev = np.abs(np.linalg.eigvalsh(H))
    nz = ev[ev > 1e-8 * ev.max()]
    assert mu == pytest.approx(nz.min(), rel=1e-9)
    assert tau == pytest.approx(math.log(1e6) / mu, rel=1e-12)
    assert relaxation_time(f, theta, free, 1e-10, 1e-9)[1] == 0.0


def test_repeats_give_intervals_and_one_repeat_is_unchanged(cli_json):
    cfg = integrate.Config(**SAMPLED, repeats=3)
    res = integrate.run(cfg)
    assert isinstance(res, integrate.RepeatedResult)
    assert res.seeds == (1, 2, 3) and res.repeats == 3 and res.status == "converged"
    singles = [integrate.run(integrate.Config(**{**SAMPLED, "seed": s})) for s in (1, 2, 3)]
    ab = [r.ab_mean for r in singles]
    q = res.quantities["ab"]
    assert q.values == pytest.approx(ab, rel=1e-12)
    from scipy import stats

    se = float(np.std(ab, ddof=1) / math.sqrt(3))
    half = stats.t.ppf(0.975, 2) * se
    assert (q.mean, q.se, q.lo, q.hi) == pytest.approx(
        (np.mean(ab), se, np.mean(ab) - half, np.mean(ab) + half), rel=1e-12)
    assert q.exact == pytest.approx(constants(gaussian(1, 1.0), 5).ab_star, rel=1e-7)
    assert res.quantities["off_diagonal_norm"].exact == 0.0
    d = res.to_dict()
    assert set(d["quantities"]) == set(integrate.QUANTITIES)
    assert d["quantities"]["ab"]["ci95"] == [q.lo, q.hi]
    got = cli_json("integrate", "--x1", "gaussian", "--d", "1", "--T", "5", "--field", "mc",
                   "--samples", "400", "--repeats", "3")
    assert got["quantities"]["ab"]["values"] == pytest.approx(list(q.values), rel=1e-12)
    # K = 1 is the plain flow, key for key
    one = integrate.run(integrate.Config(**SAMPLED, repeats=1))
    assert isinstance(one, integrate.FullResult)
    assert _no_volatile(one.to_dict()) == _no_volatile(singles[0].to_dict())


@pytest.mark.parametrize(("kw", "needle"), [
    ({"repeats": 0}, "repeats"),
    ({"repeats": 2, "field": "exact"}, "repeats=2"),
    ({"repeats": 2, "reduced": True}, "repeats=2"),
    ({"repeats": 2, "out": "r.nc"}, "repeats=2"),
])
def test_repeats_bad_input(kw, needle):
    with pytest.raises(MesadynError, match=needle):
        integrate.Config(**{**SAMPLED, **kw})


def test_interval_needs_two_values():
    q = integrate.Interval.of("ab", [0.2], 0.2)
    assert math.isnan(q.se) and q.covers_exact is None


@pytest.mark.slow
def test_coverage_of_exact_ab_quick():
    """A quick version of ``benchmarks/bench_sampled_coverage.py``: 10 intervals of K = 3
    Monte-Carlo sample sets each (d = 1, T = 5, N = 400).  With the O(1/N) bias small against
    the SE at this size most intervals cover ab*; 10 draws of a 95% event fall below 7 with
    probability 1e-3."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[2] / "benchmarks" / "bench_sampled_coverage.py"
    spec = importlib.util.spec_from_file_location("bench_sampled_coverage", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    row = mod.coverage(R=10, K=3, N=400, d=1, T=5)
    assert row["n_converged"] == row["n_flows"] == 30
    assert row["covered"] >= 7


def test_cost_estimate_counts_single_coordinate_families():
    """Before any draw, the estimate asks the family whether its draws have one nonzero entry
    (sparse): their direct path sums over t in closed form, so the estimate is far lower."""
    from mesadyn.process import gaussian, ones, sparse
    from mesadyn.workflows.integrate import sampled_flow_seconds

    assert sparse(5).single_coordinate
    assert not gaussian(5).single_coordinate and not ones(5).single_coordinate
    dense_s = sampled_flow_seconds(5, 100, 10_000)
    assert sampled_flow_seconds(5, 100, 10_000, single_coordinate=True) < dense_s / 4


@pytest.mark.parametrize(("a0", "reduced"), [(1e300, True), (1e-300, True), (1e300, False)])
def test_a_start_without_a_finite_horizon_says_so(a0, reduced):
    """No ``t_end`` and a start so extreme that the reduced flow's settling time overflows
    or underflows: 't_end must be finite and > 0, got t_end=nan' (no t_end was given) or an
    internal 'math domain error'; the one horizon policy now names the start."""
    with pytest.raises(MesadynError, match=r"the automatic horizon from \(a0, b0\) = .* give "
                                           r"t_end"):
        integrate.run(integrate.Config(reduced=reduced, d=2, T=6, a0=a0, b0=a0))


def test_mc_samples_are_told_their_real_minimum_once():
    """``--samples 1`` was told '>= 2', then ``--samples 2`` '>= batches=32': every count
    below the batches gets the batches' bound."""
    for n in (0, 1, 2, 31):
        with pytest.raises(MesadynError, match=r"samples must be >= batches=32 \(the "
                                               rf"Monte-Carlo .*got samples={n}"):
            integrate.Config(field="mc", samples=n)
