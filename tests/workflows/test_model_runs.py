"""``--model``/``--layers`` in the workflows (:mod:`mesadyn.workflows._model_runs`).

- the options are validated on construction (an unknown model, ``layers`` 0, a one-layer
  model with layers, the exact field of softmax) and every command without a path for another
  model refuses it, naming it; the paper's default changes no field or number;
- ``integrate`` (full flow) of the two-layer model converges and its end point has
  ``max|∇L|`` below the steady-state tolerance by an independent evaluation of the exact field;
- ``stability`` reports the spectrum with the zero modes explained by the model's symmetries,
  and analyses a ``--point`` of the model's length (a run file's point: the same fixed point);
- ``train`` is GD on the model's finite-sample loss: its trace equals a hand-written GD loop
  on the same draws; a run file reruns to the same numbers; ``incontext`` reports the end
  point's ratio and MSE on the paper's in-context test set at each test length.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from mesadyn.cli import main
from mesadyn.errors import MesadynError
from mesadyn.field import FieldSpec, make_field
from mesadyn.field._model_fields import FiniteModelField
from mesadyn.models import DeepLinearAttention, SoftmaxAttention
from mesadyn.process import gaussian
from mesadyn.train import test_seed
from mesadyn.workflows import integrate, rerun, stability, theory, train


@pytest.mark.parametrize(("options", "needle"), [
    ({"model": "transformer"}, "unknown model 'transformer'"),
    ({"model": "deep", "layers": 0}, "layers"),
    ({"model": "linear", "layers": 2}, "layers=2"),
])
def test_bad_models_are_refused_on_construction(options: dict[str, object],
                                                needle: str) -> None:
    with pytest.raises(MesadynError, match=needle):
        integrate.Config(d=2, T=6, **options)  # type: ignore[arg-type]


def test_commands_without_a_model_path_refuse_it() -> None:
    with pytest.raises(MesadynError, match=r"model=deep\(layers=2\) is not supported by "
                                           "mesadyn theory"):
        theory.Config(d=2, T=6, model="deep", layers=2)
    with pytest.raises(MesadynError, match="reduced=True is not supported for model=softmax"):
        integrate.Config(d=2, T=6, model="softmax", reduced=True)
    with pytest.raises(MesadynError, match="softmax"):
        integrate.Config(d=2, T=6, model="softmax").field_spec("exact")
    with pytest.raises(MesadynError, match="solver 'dopri5'"):
        integrate.Config(d=2, T=6, model="deep", layers=2, solver="dopri5")


def test_the_paper_default_is_recorded_and_unchanged() -> None:
    cfg = integrate.Config(d=2, T=6)
    assert cfg.paper_model and cfg.attention().is_paper
    assert cfg.run_config()["model"] == "linear" and cfg.run_config()["layers"] == 1
    assert cfg.field_spec("exact") == FieldSpec("exact", gaussian(2, 1.0), 6)
    deep = integrate.Config(d=2, T=6, model="deep", layers=2)
    assert deep.field_spec("exact").model == DeepLinearAttention(2)


def test_integrate_deep_converges(tmp_path: Path) -> None:
    cfg = integrate.Config(model="deep", layers=2, d=1, T=4, steady_tol=1e-10,
                           out=str(tmp_path / "i.nc"))
    res = integrate.run(cfg)
    assert isinstance(res, integrate.ModelFlowResult)
    # from a0 = 0.5, b0 = 1.5 the steady-state test stops at a saddle of the two-layer loss
    # (∇²L has one negative eigenvalue there, −0.0375), and the outcome says so
    assert res.status.value == "saddle" and res.grad_norm < 1e-10 and res.njev > 0
    fld = make_field(FieldSpec("exact", gaussian(1, 1.0), 4, model=DeepLinearAttention(2)))
    assert res.path is not None
    L, g = fld.loss_and_grad(torch.from_numpy(res.path.final))
    assert float(g.abs().max()) < 1e-10 and math.isclose(float(L), res.loss, rel_tol=1e-12)
    assert res.to_dict()["model"] == "deep" and len(res.invariants) == 2
    # the flow conserves each layer's ‖W^KQ‖² − ‖W^PV‖² (the per-layer scaling symmetry)
    assert res.invariant_drift < 1e-6
    again = rerun(tmp_path / "i.nc")
    assert again.ok, again.message


def test_stability_explains_the_zero_modes(tmp_path: Path) -> None:
    out_file = str(tmp_path / "s.nc")
    res = stability.run(stability.Config(model="deep", layers=2, d=1, T=4, a0=0.5, b0=1.5,
                                         out=out_file))
    spec = res.spectrum
    assert spec is not None and res.grad_norm < 1e-8
    assert spec.n == 36 and spec.inactive == 36 - res.n_active
    # the two layers' scalings and the 2d² = 2 stream shears explain every zero mode
    assert spec.symmetry == spec.declared == 4
    assert spec.unexplained == spec.n_zero - spec.inactive - spec.unused - spec.symmetry == 0
    # the flow from this init stops at a saddle (one unstable mode), and says so
    assert spec.n_unstable == 1 and res.status.value == "saddle"
    assert spec.symmetry_residual < 1e-6
    out = res.to_dict()
    assert out["spectrum"]["n_zero"] == spec.n_zero and out["model"] == "deep"
    # --point: the run file's point is already a fixed point; the analysis starts and ends there
    again = stability.run(stability.Config(model="deep", layers=2, d=1, T=4, point=out_file))
    assert again.source == f"flow from the point in {out_file!r}"
    assert np.abs(again.theta - res.theta).max() < 1e-9 and again.grad_norm < 1e-10
    assert again.spectrum is not None and again.spectrum.n_unstable == 1
    assert again.spectrum.unexplained == 0 and again.status.value == "saddle"


def test_a_point_of_another_length_is_refused_naming_the_model(tmp_path: Path) -> None:
    path = tmp_path / "p.npy"
    np.save(path, np.zeros(18))
    with pytest.raises(MesadynError, match=r"must have shape \(36,\) for the deep\(layers=2\) "
                                           r"model at d=1, got \(18,\)"):
        stability.run(stability.Config(model="deep", layers=2, d=1, T=4, point=str(path)))


def test_train_is_gd_on_the_finite_sample_loss(tmp_path: Path) -> None:
    model = DeepLinearAttention(2)
    cfg = train.Config(model="deep", layers=2, d=2, T=5, m=40, m_test=30, steps=3, lr=1e-3,
                       a0=0.3, b0=0.4, out=str(tmp_path / "t.nc"))
    res = train.run(cfg)
    fam = gaussian(2, 1.0)
    fld = FiniteModelField(model, fam, 5, 40, 1)
    test = FiniteModelField(model, fam, 5, 30, test_seed(1))
    th = model.diagonal_init(2, 0.3, 0.4)
    losses = []
    for _ in range(3):
        L, g = fld.loss_and_grad(th)
        losses.append(float(L))
        th = th - 1e-3 * g
    assert res.trace is not None
    assert np.allclose(res.trace["train_loss"][:3], losses, rtol=1e-13, atol=0)
    assert math.isclose(res.test_loss, float(test.loss(th)), rel_tol=1e-13)
    assert np.allclose(res.trace["final_theta"], th.numpy(), rtol=0, atol=1e-14)
    assert rerun(tmp_path / "t.nc").ok


def test_train_incontext_reports_the_end_point_at_each_length() -> None:
    """``incontext`` on a model: the ratio and MSE of the end point on the paper's in-context
    test set (seed + offset), recomputed here from the same draws and the run's final θ."""
    from mesadyn.analysis.model_mesa import model_mse, model_ratio
    from mesadyn.process import make_generator, sample_sequences

    model = DeepLinearAttention(2)
    cfg = train.Config(model="deep", layers=2, d=2, T=5, m=40, steps=5, lr=1e-3, a0=0.3,
                       b0=0.4, incontext="3, 5")
    res = train.run(cfg)
    assert res.status.value == "ok"
    assert res.incontext is not None and [r["T_te"] for r in res.incontext] == [3, 5]
    theta = torch.from_numpy(res.trace["final_theta"])  # type: ignore[index]
    for rep in res.incontext:
        x = sample_sequences(gaussian(2), train.INCONTEXT_DRAWS, rep["T_te"] + 1,
                             make_generator(1 + train.INCONTEXT_SEED_OFFSET), "cpu")
        ratio, mse = model_ratio(model, theta, x), model_mse(model, theta, x)
        assert math.isclose(rep["ratio"]["value"], ratio.value, rel_tol=1e-12)
        assert math.isclose(rep["mse"]["value"], mse.value, rel_tol=1e-12)
        assert rep["gd_fit"]["k"] == 2 and rep["gd_fit_1"]["k"] == 1
        assert rep["gd_fit"]["rel_residual"] <= rep["gd_fit_1"]["rel_residual"] + 1e-12
    assert "incontext" in res.to_dict()
    with pytest.raises(MesadynError, match="'3,x'"):
        train.Config(model="deep", layers=2, d=2, T=5, incontext="3,x")


def test_train_softmax_runs() -> None:
    res = train.run(train.Config(model="softmax", d=2, T=5, m=20, steps=2, lr=1e-2))
    assert res.status.value == "ok" and res.model == "softmax"
    # no GD-step reading of the diagonals and no conserved quantity for softmax
    assert res.ab is None and res.invariants == []
    assert SoftmaxAttention().n_params(2) == len(res.trace["final_theta"])  # type: ignore[index]


@pytest.mark.parametrize(("argv", "needle"), [
    (["theory", "--model", "deep", "--layers", "2"], "deep(layers=2)"),
    (["integrate", "--model", "deep", "--layers", "0"], "layers"),
    (["integrate", "--model", "softmax", "--d", "2", "--T", "5"], "softmax"),
    (["train", "--model", "nope"], "'nope'"),
    (["ensemble", "--model", "softmax"], "softmax"),
    (["train", "--d", "2", "--T", "5", "--incontext", "3,x"], "'3,x'"),
])
def test_cli_refuses_in_one_line(argv: list[str], needle: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and needle in err and len(err.splitlines()) == 1


def test_gdflow_runs_a_deep_model_on_its_quadrature_field() -> None:
    from mesadyn.field import QuadratureField
    from mesadyn.models import DeepLinearAttention
    from mesadyn.process import gaussian as gaussian_family
    from mesadyn.workflows import gdflow

    cfg = gdflow.Config(d=1, T=4, model="deep", layers=2, steps=10, lr=0.05, m=0,
                        rtol=1e-9, atol=1e-11)
    res = gdflow.run(cfg)
    out = res.to_dict()
    assert (out["model"], out["layers"]) == ("deep", 2)
    assert out["exact"]["field"]["method"] == "quadrature"
    comp = res.comparisons["exact"]
    # GD's first step, recomputed on an independently built field
    model = DeepLinearAttention(2)
    theta0 = model.diagonal_init(1, 0.1, 0.1)
    _, g = QuadratureField(model, gaussian_family(1, 1.0), 4).loss_and_grad(theta0)
    assert np.allclose(comp.gd[1], (theta0 - 0.05 * g).numpy(), rtol=0, atol=1e-14)
    # backward error analysis: the modified flow follows GD closer than the flow
    assert out["exact"]["ratio"] > 1.5
    assert "model" not in gdflow.run(gdflow.Config(d=1, T=4, steps=3, lr=0.05, m=0)).to_dict()
    with pytest.raises(MesadynError, match="softmax"):
        gdflow.Config(d=1, T=4, model="softmax", lr=0.05)


def test_the_flow_basis_keeps_the_odd_entries_of_the_layered_init() -> None:
    from mesadyn.workflows._model_runs import flow_basis

    model = DeepLinearAttention(2)
    free = model.free_mask("none", 1)
    odd = model.phase_parity_mask(1)
    assert odd is not None
    layered = model.diagonal_init(1, 0.5, 1.5).numpy()
    exact = FieldSpec("exact", gaussian(1, 1.0), 4, model=model)
    P = flow_basis(model, exact, layered, free)
    assert P is not None and P.shape[1] == int((free & odd).sum()) == 10
    assert not P[~odd].any()
    # a Gaussian init has even entries: every free entry (at d = 1 the group {±1} fixes
    # every θ); a sampled field has no symmetry: the whole space
    Pg = flow_basis(model, exact, model.gaussian_init(1, 0.3, seed=1).numpy(), free)
    assert Pg is not None and Pg.shape[1] == int(free.sum()) == 22
    finite = FieldSpec("finite", gaussian(1, 1.0), 4, model=model, m=20)
    assert flow_basis(model, finite, layered, free) is None
    # at d = 2 the coordinate group's fixed subspace is kept as well
    free2 = model.free_mask("none", 2)
    P2 = flow_basis(model, FieldSpec("exact", gaussian(2, 1.0), 6, model=model),
                    model.diagonal_init(2, 0.5, 1.5).numpy(), free2)
    odd2 = model.phase_parity_mask(2)
    assert P2 is not None and odd2 is not None and not P2[~odd2].any() and P2.shape[1] < 22
