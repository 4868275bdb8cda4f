"""``mesadyn.workflows.ensemble`` for a model other than the paper's (``_model_ensemble``).

- every row ends where ``integrate.run`` ends from the same start on the same field (the same
  path: the model flow with the same fixed-subspace basis), for the layered diagonal grid and
  the Gaussian init (its seeds ``seed + k`` and its atol scaled by σ_w);
- the one-layer deep model (the paper's model exactly) reaches Theorem 4.1's fixed point
  ``ab = c2/c1`` on the diagonal (:mod:`mesadyn.theory`), with the loss the paper's
  moment-tensor exact field gives there: an independent check of the classifier;
- a row the steady-state test stops at a saddle is continued and, still there, ``saddle``:
  never converged, never a fixed point; its negative curvature is checked on a freshly built
  field without the symmetry projection;
- an interrupted run keeps its first chunk and, run again, equals the uninterrupted run;
- softmax runs on a sampled field; bad input is one line naming the value.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from mesadyn.analysis.ensemble import wilson
from mesadyn.errors import MesadynError
from mesadyn.outcome import Outcome
from mesadyn.workflows import ensemble as wf
from mesadyn.workflows import integrate

#: The one-layer model's grid rows: tolerances at which each converges in ~300–1500 gradients.
ONE = dict(model="deep", layers=1, d=1, T=4, rtol=1e-8, atol=1e-10)
#: (a0 = −b0 would start on the line a + b = 0 the flow keeps, into the saddle θ = 0.)
GRID = dict(init="grid", grid_a=(0.5, -0.7), grid_b=(0.5, 1.5))
#: Three quick rows of the one-layer model for the resume test.
RESUME = dict(ONE, rtol=1e-6, atol=1e-9, init="grid", grid_a=(0.5,), grid_b=(0.5, 1.0, 1.5))
#: The two-layer model from (0.5, 0.5): the steady-state test stops it at a saddle at τ ≈ 35.
SADDLE = dict(model="deep", layers=2, d=1, T=4, init="grid", grid_a=(0.5,), grid_b=(0.5,),
              t_end=40.0, rtol=1e-6, atol=1e-9)
#: Row variables that are timings (differ between runs by design).
TIMINGS = ("wall_s",)


@pytest.fixture(scope="module")
def one_layer() -> wf.ModelEnsembleResult:
    res = wf.run(wf.Config(**ONE, **GRID))
    assert isinstance(res, wf.ModelEnsembleResult)
    return res


@pytest.fixture(scope="module")
def saddle() -> wf.ModelEnsembleResult:
    res = wf.run(wf.Config(**SADDLE))
    assert isinstance(res, wf.ModelEnsembleResult)
    return res


def _same_rows(a: wf.ModelEnsembleResult, b: wf.ModelEnsembleResult) -> None:
    for name in a.rows.data_vars:
        if name in TIMINGS:
            continue
        x, y = a.rows[name].values, b.rows[name].values
        if x.dtype.kind in "fc":
            np.testing.assert_array_equal(x, y, err_msg=name)
        else:
            assert x.tolist() == y.tolist(), name


def test_grid_rows_end_where_integrate_ends(one_layer) -> None:
    ds = one_layer.rows
    for k, (a0, b0) in enumerate((a, b) for a in GRID["grid_a"] for b in GRID["grid_b"]):
        ref = integrate.run(integrate.Config(**ONE, init="diagonal", a0=a0, b0=b0,
                                             steady_tol=1e-8, t_end=one_layer.t_end))
        assert isinstance(ref, integrate.ModelFlowResult) and ref.path is not None
        assert ref.status is Outcome.CONVERGED
        assert np.max(np.abs(ds["theta"].values[k] - ref.path.final)) <= 1e-12
        assert ds["t"].values[k] == pytest.approx(ref.t_final, rel=1e-12)
        assert ds["nfev"].values[k] == ref.nfev


def test_gaussian_rows_end_where_integrate_ends() -> None:
    """Row k is ``integrate --init gaussian --seed seed+k`` with atol × min(1, σ_w)."""
    cfg = wf.Config(model="deep", layers=2, d=1, T=4, n=2, sigma_w=0.1, seed=3, t_end=0.5,
                    rtol=1e-6, atol=1e-9)
    res = wf.run(cfg)
    assert isinstance(res, wf.ModelEnsembleResult)
    assert res.statuses == {"t_end": 2} and res.fixed_points == []
    assert res.fractions == {"t_end": wilson(2, 2).to_dict()}
    for k in range(2):
        ref = integrate.run(integrate.Config(model="deep", layers=2, d=1, T=4, init="gaussian",
                                             sigma_w=0.1, seed=3 + k, t_end=0.5, rtol=1e-6,
                                             atol=1e-9 * 0.1, steady_tol=cfg.steady_tol))
        assert isinstance(ref, integrate.ModelFlowResult) and ref.path is not None
        assert np.max(np.abs(res.rows["theta"].values[k] - ref.path.final)) <= 1e-12
        assert res.rows["loss"].values[k] == pytest.approx(ref.loss, rel=1e-12)
        np.testing.assert_allclose(res.rows["invariants"].values[k], ref.invariants,
                                   rtol=1e-12)
    # the flow conserves each layer's invariant (the scaling symmetry)
    assert res.invariant_drift_max is not None and res.invariant_drift_max < 1e-6


def test_one_layer_rows_reach_theorem_41(one_layer) -> None:
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.model import diagonal_init
    from mesadyn.process import gaussian
    from mesadyn.theory import constants

    ab_star = constants(gaussian(1, 1.0), 4).ab_star  # c2/c1 = 6/30
    ds = one_layer.rows
    assert one_layer.statuses == {"converged": 4} and one_layer.status is Outcome.CONVERGED
    assert np.max(np.abs(ds["ab"].values - ab_star)) < 1e-7
    assert np.max(ds["off_diagonal"].values) < 1e-8  # on the diagonal
    (point,) = one_layer.fixed_points
    # the paper's exact field (moment tensors, not quadrature) at the diagonal fixed point
    paper = make_field(FieldSpec("exact", gaussian(1, 1.0), 4))
    s = math.sqrt(ab_star)
    expected = float(paper.loss(diagonal_init(1, s, s)))
    assert point.loss == pytest.approx(expected, rel=1e-10, abs=1e-12)
    assert point.count == 4 and (point.low, point.high) == (wilson(4, 4).low, 1.0)
    assert point.ab_min == pytest.approx(ab_star, rel=1e-7)
    assert point.lambda_min > -1e-8
    assert one_layer.fractions == {"fixed_point_1": wilson(4, 4).to_dict()}
    assert set(ds["group"].values.tolist()) == {0}


def test_a_saddle_row_is_never_converged(saddle) -> None:
    from mesadyn.field import QuadratureField
    from mesadyn.models import DeepLinearAttention
    from mesadyn.process import gaussian

    ds = saddle.rows
    assert saddle.statuses == {"saddle": 1} and saddle.status is Outcome.SADDLE
    assert not saddle.ok and saddle.exit_code == 1
    assert saddle.fixed_points == [] and saddle.fractions == {"saddle": wilson(1, 1).to_dict()}
    assert ds["group"].values.tolist() == [-1] and saddle.n_continued == 1
    assert ds["t"].values[0] == pytest.approx(40.0) and ds["lambda_min"].values[0] < -0.1
    # integrate --model stops at the same saddle; the row was continued from there
    ref = integrate.run(integrate.Config(**{k: v for k, v in SADDLE.items()
                                            if k not in ("grid_a", "grid_b")}
                                         | {"init": "diagonal", "a0": 0.5, "b0": 0.5,
                                            "steady_tol": 1e-8}))
    assert isinstance(ref, integrate.ModelFlowResult)
    assert ref.status is Outcome.SADDLE
    assert ds["t_saddle"].values[0] == pytest.approx(ref.t_final, rel=1e-12)
    # negative curvature by an independently built field, without the symmetry projection
    model = DeepLinearAttention(2)
    fld = QuadratureField(model, gaussian(1, 1.0), 4)
    H = fld.hessian(torch.from_numpy(ds["theta"].values[0])).numpy()
    act = model.active_mask(1)
    assert np.linalg.eigvalsh(H[np.ix_(act, act)])[0] < -0.1


def test_an_interrupted_run_continues_to_the_uninterrupted_numbers(tmp_path: Path) -> None:
    from mesadyn.io import load_run

    out = str(tmp_path / "e.nc")
    cfg = wf.Config(**RESUME, chunk=2, out=out)

    def stop_in_second_chunk(rows_done: float) -> None:
        if rows_done > 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        wf.run(cfg, progress=stop_in_second_chunk)
    kept = load_run(out, kind="ensemble")
    assert kept.sizes["traj"] == 2 and kept.attrs["n_rows"] == 3
    seen: list[float] = []
    resumed = wf.run(cfg, progress=seen.append)
    assert isinstance(resumed, wf.ModelEnsembleResult)
    assert resumed.rows_reused == 2 and not resumed.reused and seen[0] == 2 and seen[-1] == 3
    fresh = wf.run(wf.Config(**RESUME, chunk=2))
    assert isinstance(fresh, wf.ModelEnsembleResult)
    _same_rows(resumed, fresh)
    assert resumed.fixed_points == fresh.fixed_points
    again = wf.run(cfg)
    assert isinstance(again, wf.ModelEnsembleResult) and again.reused
    assert again.to_dict()["fractions"] == fresh.to_dict()["fractions"]
    assert wf.Config.from_run(out, out=out) == cfg


def test_softmax_runs_on_a_sampled_field() -> None:
    res = wf.run(wf.Config(model="softmax", d=1, T=4, field="finite", m=8, init="grid",
                           grid_a=(0.5,), grid_b=(0.5,), t_end=0.5, rtol=1e-6, atol=1e-9))
    assert isinstance(res, wf.ModelEnsembleResult)
    assert res.field["field"] == "finite" and res.n == 1 and res.statuses == {"t_end": 1}
    assert np.isnan(res.rows["ab"].values).all()  # no GD-step reading for softmax
    assert res.rows["invariants"].shape == (1, 0) and res.invariant_drift_max is None


def test_starts_follow_the_model_layout(tmp_path: Path) -> None:
    from mesadyn.models import DeepLinearAttention

    model = DeepLinearAttention(2)
    pts = wf.initial_points(wf.Config(model="deep", layers=2, d=1, T=4, init="grid",
                                      grid_a=(0.5, 1.0), grid_b=(2.0,), perturb=1e-3))
    assert pts.shape == (2, model.n_params(1))
    base = np.stack([model.diagonal_init(1, a, 2.0).numpy() for a in (0.5, 1.0)])
    moved = np.abs(pts - base) > 0
    assert not moved[:, ~model.active_mask(1)].any() and moved[:, model.active_mask(1)].all()
    gauss = wf.initial_points(wf.Config(model="deep", layers=2, d=1, T=4, n=2, seed=5))
    np.testing.assert_array_equal(gauss[1], model.gaussian_init(1, 1e-2, 6).numpy())
    path = tmp_path / "starts.npy"
    np.save(path, gauss)
    np.testing.assert_array_equal(
        wf.initial_points(wf.Config(model="deep", layers=2, d=1, T=4, init="file",
                                    init_file=str(path))), gauss)


@pytest.mark.parametrize(("options", "match"), [
    ({"model": "softmax"}, "field='exact' is not supported by model=softmax"),
    ({"model": "deep", "layers": 0}, "layers must be >= 1"),
    ({"model": "deep", "layers": 2, "method": "rodas4"}, "method=rodas4 is the paper's"),
    ({"model": "deep", "layers": 2, "n_save": 5}, "n_save=5 is not supported"),
    ({"model": "deep", "layers": 2, "solver": "euler"}, "solver 'euler'"),
    ({"field": "mc"}, "field=mc is not supported by the paper's ensemble"),
    ({"solver": "BDF"}, "solver='BDF' is the model flow's"),
    ({"model": "deep", "layers": 2, "force": "no"}, "force must be true or false"),
])
def test_bad_options_are_one_line(options: dict[str, object], match: str) -> None:
    with pytest.raises(MesadynError, match=match):
        wf.Config(d=1, T=4, **options)  # type: ignore[arg-type]


def test_an_init_file_of_the_paper_layout_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "paper.npy"
    np.save(path, np.zeros((3, 18)))
    cfg = wf.Config(model="deep", layers=2, d=1, T=4, init="file", init_file=str(path))
    with pytest.raises(MesadynError, match=r"shape \(N >= 1, 36\) for the deep\(layers=2\) "
                                           r"model at d=1, got \(3, 18\)"):
        wf.run(cfg)


def test_a_costly_ensemble_is_priced_before_it_starts() -> None:
    from mesadyn.workflows._model_ensemble import check_model_cost

    cfg = wf.Config(model="deep", layers=2, d=2, T=6, n=100)
    with pytest.raises(MesadynError, match="n=100 rows of the deep.*pass --yes"):
        wf.initial_points(cfg)
    check_model_cost(wf.Config(model="deep", layers=2, d=2, T=6, n=100, force=True), 100)
    assert "force" not in cfg.run_config()  # the go-ahead changes no number
