"""Real rotations in the workflows (``mesadyn.workflows._manifold``), each against the exact full
field or its flow: ``integrate --reduced`` against the full exact flow at the same time,
``theory`` against the full flow's end point (and noisy ab*(s) for three s), ``continue`` whose
every point is a fixed point of the exact field built afresh, ``ensemble``'s classes against
the rows' own end points, the commands that took no rotation or noise now taking them, and the
run files re-running from themselves."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mesadyn.analysis.ensemble import Basin
from mesadyn.analysis.fixedpoint import flow_to_fixed_point
from mesadyn.analysis.rotation_manifold import ManifoldSystem, coordinates, distance
from mesadyn.errors import MesadynError
from mesadyn.field import ExactField
from mesadyn.io import load_run, run_config
from mesadyn.model import diagonal_entries, diagonal_init
from mesadyn.outcome import Outcome
from mesadyn.process import NoReducedSystem, gaussian
from mesadyn.theory import constants, rotation_constants
from mesadyn.workflows import continuation, ensemble, integrate, rerun, theory

PROCESSES = [{}, {"noise": 0.3}, {"radius": 0.9}]


def _exact(d: int, T: int, sigma: float = 1.0, **proc: Any) -> ExactField:
    return ExactField(gaussian(d, sigma), T, rotation="real", cache=False, **proc)


# ---- integrate --reduced ---------------------------------------------------------------------
@pytest.mark.parametrize("proc", PROCESSES, ids=["paper-r", "noise", "radius"])
@pytest.mark.parametrize("t_end", [1.0, 6.0])
def test_the_reduced_flow_is_the_full_exact_flow(proc, t_end):
    """The 3-D flow from (a0, 0, b0) and the full exact flow from diagonal_init(a0, b0) are at
    the same (a, c, b) at τ = 1 (mid-way) and τ = 6 (converged), within 1e-9."""
    common = {"d": 2, "T": 6, "rotation": "real", "a0": 0.2, "b0": 0.3, "t_end": t_end,
              "rtol": 1e-12, "atol": 1e-14, **proc}
    red = integrate.run(integrate.Config(reduced=True, **common))
    full = integrate.run(integrate.Config(**common))
    assert full.flow is not None
    th = full.flow.final
    assert distance(th) < 1e-13  # the full flow stays on the manifold
    np.testing.assert_allclose(coordinates(th), [red.a, red.c, red.b], rtol=0, atol=1e-9)
    assert red.ab == pytest.approx(red.a * red.b, rel=1e-15)
    assert red.cb == pytest.approx(red.c * red.b, rel=1e-15)
    if t_end == 6.0:
        assert red.status is Outcome.CONVERGED and red.limit_error < 1e-9
        np.testing.assert_allclose([red.ab, red.cb], [red.ab_theory, red.cb_theory], atol=1e-9)
    else:
        assert red.status is Outcome.T_END and red.limit_error > 1e-8  # not there yet


def test_the_reduced_run_file_holds_the_trajectory(tmp_path: Path):
    out = tmp_path / "red.nc"
    res = integrate.run(integrate.Config(reduced=True, d=2, T=6, rotation="real", n_save=20,
                                         out=str(out)))
    ds = load_run(out, kind="integrate")
    assert set(ds.data_vars) >= {"a", "c", "b", "loss", "grad_max", "invariant"}
    assert float(ds["c"].values[-1]) == res.c and ds["tau"].size >= 20
    assert np.ptp(ds["invariant"].values) < 1e-9  # Δ = a² + c² − b² is conserved
    ms = ManifoldSystem.from_constants(rotation_constants(gaussian(2), 6))
    np.testing.assert_allclose(ds["loss"].values[-1], ms.loss(res.a, res.c, res.b), rtol=1e-14)
    # every saved point is on the trajectory (a separate solve at the saved times)
    tau = ds["tau"].values
    ref = ms.solve((0.5, 0.0, 1.5), float(tau[-1]), method="DOP853", t_eval=tau).y
    for i, name in enumerate("acb"):
        np.testing.assert_allclose(ds[name].values, ref[i], atol=1e-8)


def test_a_start_at_the_origin_stays_at_the_saddle():
    res = integrate.run(integrate.Config(reduced=True, d=2, T=6, rotation="real", a0=0.0,
                                         b0=0.0))
    assert res.status is Outcome.SADDLE and (res.a, res.c, res.b) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize(("solver", "names"), [("closed_form", "closed-form"),
                                               ("torch:dopri5", "torch:dopri5")])
def test_a_solver_the_3d_system_has_not_is_refused(solver, names):
    with pytest.raises(MesadynError, match=names) as info:
        integrate.run(integrate.Config(reduced=True, d=2, T=6, rotation="real", solver=solver))
    assert "\n" not in str(info.value)


# ---- theory ----------------------------------------------------------------------------------
@pytest.mark.parametrize("proc", PROCESSES, ids=["paper-r", "noise", "radius"])
def test_theory_is_the_full_flows_end_point(proc):
    d, T = 2, 6
    res = theory.run(theory.Config(d=d, T=T, rotation="real", **proc))
    fp, _ = flow_to_fixed_point(_exact(d, T, **proc), diagonal_init(d, 0.5, 0.5),
                                steady_tol=1e-11)
    a, c, b = coordinates(fp.theta)
    assert fp.residual < 1e-10 and distance(fp.theta) < 1e-12
    np.testing.assert_allclose([a * b, c * b], [res.ab_star, res.cb_star], atol=1e-9)
    assert res.to_dict()["rotation"] == "real" and res.ratio is None
    if not proc:  # the closed form's T → ∞ limit, 2μ2/μ3 = 1/3 for gaussian tokens
        assert res.ab_limit == pytest.approx(1 / 3, rel=1e-14)
    else:
        assert np.isnan(res.ab_limit)


@pytest.mark.parametrize("s", [0.2, 0.5, 1.0])
@pytest.mark.parametrize("rotation", ["diagonal", "real"])
def test_noisy_ab_star_is_the_full_flows_end_point(s, rotation):
    d, T = 2, 6
    res = theory.run(theory.Config(d=d, T=T, rotation=rotation, noise=s))
    f = ExactField(gaussian(d), T, rotation=rotation, noise=s, cache=False)
    fp, _ = flow_to_fixed_point(f, diagonal_init(d, 0.5, 0.5), steady_tol=1e-11)
    assert fp.residual < 1e-10
    if rotation == "diagonal":
        a, b = diagonal_entries(fp.theta)
        assert float(a[0] * b[0]) == pytest.approx(res.ab_star, abs=1e-9)
        assert res.ab_star == pytest.approx(constants(gaussian(d), T, noise=s).ab_star,
                                            rel=1e-14)
    else:
        a, c, b = coordinates(fp.theta)
        np.testing.assert_allclose([a * b, c * b], [res.ab_star, res.cb_star], atol=1e-9)
    assert res.noise == s


def test_theory_refuses_a_family_without_the_manifold():
    with pytest.raises(NoReducedSystem, match="'ones'") as info:
        theory.run(theory.Config(d=2, T=6, rotation="real", x1="ones"))
    assert "\n" not in str(info.value)


# ---- continue --------------------------------------------------------------------------------
@pytest.mark.parametrize(("options", "field_at"), [
    ({"parameter": "sigma", "start": 1.0, "stop": 1.2, "rotation": "real"},
     lambda p: _exact(2, 6, sigma=p)),
    ({"parameter": "noise", "start": 0.0, "stop": 0.3, "rotation": "real"},
     lambda p: _exact(2, 6, noise=p)),
    ({"parameter": "sigma", "start": 1.0, "stop": 0.9, "radius": 0.9, "noise": 0.2},
     lambda p: ExactField(gaussian(2, p), 6, radius=0.9, noise=0.2, cache=False)),
])
def test_every_continuation_point_is_a_fixed_point_of_the_exact_field(options, field_at):
    res = continuation.run(continuation.Config(d=2, T=6, points=3, **options))
    assert res.status.ok and res.n_points >= 3
    for br in res.branches:
        for p, th in zip(br.p, br.theta, strict=True):
            f = field_at(float(p))
            assert float(f.grad(torch.as_tensor(th)).abs().max()) < 1e-10, p
            if options.get("rotation") == "real":  # on the manifold, at its minimum k*(p)
                a, c, b = coordinates(th)
                assert distance(th) < 1e-10
                np.testing.assert_allclose(b * np.array([a, c]),
                                           ManifoldSystem.from_field(f).k_star, atol=1e-9)


@pytest.mark.parametrize("command", ["continuation", "ensemble", "gdflow"])
def test_the_exact_field_commands_take_rotations_and_noise(command):
    """No command refuses a process the exact field reaches; Haar beyond its reach still is."""
    Config = importlib.import_module(f"mesadyn.workflows.{command}").Config
    extra = {"stop": 1.1} if command == "continuation" else {}
    Config(d=2, T=6, rotation="real", noise=0.1, **extra)
    Config(d=2, T=6, rotation="haar", **extra)
    with pytest.raises(MesadynError, match="d=6"):
        Config(d=6, T=6, rotation="haar", **extra)


# ---- ensemble --------------------------------------------------------------------------------
def test_ensemble_classes_are_the_rows_end_points():
    d, T = 2, 6
    res = ensemble.run(ensemble.Config(d=d, T=T, rotation="real", n=3, seed=1))
    ms = ManifoldSystem.from_constants(rotation_constants(gaussian(d), T))
    assert res.ab_star == pytest.approx(float(ms.k_star[0]), rel=1e-14)
    rows = res.rows
    f = _exact(d, T)
    counts = {k: v["count"] for k, v in res.to_dict()["fractions"].items()}
    assert sum(counts.values()) == 3
    for th, status, basin in zip(rows["theta"].values, rows["status"].values.astype(str),
                                 rows["outcome"].values.astype(str), strict=True):
        if status != Outcome.CONVERGED:
            assert basin == Basin.NOT_CONVERGED
            continue
        assert float(f.grad(torch.as_tensor(th)).abs().max()) < 1e-7
        a, c, b = coordinates(th)
        if basin in (Basin.BRANCH_PLUS, Basin.BRANCH_MINUS):
            np.testing.assert_allclose(b * np.array([a, c]), ms.k_star, rtol=1e-6)
            assert (a > 0) == (basin == Basin.BRANCH_PLUS)
        else:
            assert basin in (Basin.DENSE, Basin.OTHER)
    assert counts["branch_plus"] + counts["branch_minus"] >= 1
    np.testing.assert_allclose(rows["off_structure"].values[rows["status"].values.astype(str)
                                                             == "converged"], 0, atol=1e-6)


# ---- rerun -----------------------------------------------------------------------------------
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "integrate-reduced-real": ("integrate", {"reduced": True, "d": 2, "T": 6,
                                             "rotation": "real", "n_save": 10}),
    "theory-real-noise": ("theory", {"d": 2, "T": 6, "rotation": "real", "noise": 0.2}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_run_file_reruns_from_itself(case: str, tmp_path: Path):
    name, options = CASES[case]
    module = importlib.import_module(f"mesadyn.workflows.{name}")
    path = tmp_path / "run.nc"
    module.run(module.Config(**options, out=str(path)))
    recorded = run_config(load_run(path, kind=name))
    for key, value in options.items():
        assert recorded[key] == value, key
    assert module.Config.from_run(path).run_config() == module.Config(**options).run_config()
    again = rerun(path)
    assert again.ok and again.differences == (), again.message


@pytest.mark.parametrize("proc", [{}, {"noise": 0.3}])
def test_the_full_flow_is_sized_and_measured_by_the_manifold(proc):
    """``integrate --rotation real`` (full, exact) from a diagonal start needs no ``t_end``:
    the start lies on the 3-D manifold, which the flow keeps (its distance from it stays at
    rounding), and it ends at ab = k*_1 of the manifold's system."""
    ms = ManifoldSystem.from_field(ExactField(gaussian(2), 6, **proc, rotation="real"))
    res = integrate.run(integrate.Config(d=2, T=6, rotation="real", a0=0.5, b0=0.5, **proc))
    assert res.status is Outcome.CONVERGED, res.message
    assert res.reduced_constants == "3-D rotation manifold"
    assert res.off_structure_max is not None and res.off_structure_max < 1e-12
    assert res.ab_theory == pytest.approx(float(ms.k_star[0]), rel=1e-10)
    assert abs(res.ab_mean - res.ab_theory) < 1e-8
