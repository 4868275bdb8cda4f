"""``mesadyn stability``: JSON contract, Proposition 4.2 end to end, plots, bad input."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from mesadyn.cli import main
from mesadyn.errors import MesadynError
from mesadyn.model import diagonal_init
from mesadyn.workflows import load_point
from mesadyn.workflows import stability as wf


def compute(**options) -> dict:
    """The ``--json`` object of ``mesadyn stability`` for ``options`` (in-process)."""
    return wf.run(wf.Config(**options)).to_dict()


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MESADYN_CACHE_DIR", str(tmp_path / "cache"))


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(["stability", *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


FP_KEYS = {"ab", "ab_theory", "grad_norm", "offdiag_grad_norm", "eigenvalues", "n_zero",
           "n_unstable", "stable"}
REL_KEYS = {"W_KQ_32", "W_PV_12", "loss", "grad_norm", "eigenvalues", "n_unstable", "stable"}


def test_json_gaussian(capsys):
    code, out, _ = run(capsys, "--x1", "gaussian", "--d", "2", "--T", "5", "--json")
    assert code == 0
    obj = json.loads(out)  # exactly one JSON object on stdout
    assert obj["family"] == "gaussian"
    fp = obj["fixed_point"]
    assert FP_KEYS <= set(fp)
    assert "released" not in obj
    assert fp["offdiag_grad_norm"] < 1e-12 and fp["grad_norm"] < 1e-12
    assert fp["stable"] and fp["n_unstable"] == 0
    assert fp["n_zero"] == 12 * 4 + 1
    assert np.all(np.diff(fp["eigenvalues"]) >= 0)  # ascending
    assert abs(fp["ab"] - fp["ab_theory"]) < 1e-12
    assert fp["reduced"]["max_abs_diff"] < 1e-10
    assert fp["transverse"]["stable"]
    assert abs(obj["pl"]["measured_rate"] / obj["pl"]["linearised_rate"] - 1) < 1e-2


def test_ones_proposition_42_contract():
    obj = compute(x1="ones", d=3, T=10)
    fp, rel = obj["fixed_point"], obj["released"]
    assert FP_KEYS <= set(fp) and REL_KEYS <= set(rel)
    assert fp["offdiag_grad_norm"] > 1e-2 and fp["diag_grad_norm"] < 1e-12
    assert not fp["stable"] and fp["n_unstable"] >= 1
    assert rel["grad_norm"] < 1e-9 and rel["stable"] and rel["n_unstable"] == 0
    assert rel["loss"] < fp["loss"] and rel["loss_drop"] > 0
    W1 = np.array(rel["W_KQ_32"])
    assert W1.shape == (3, 3) and rel["one_step_gd"]["W1_identity_distance"] > 1e-3
    assert rel["one_step_gd"]["other_active_blocks_max"] < 1e-10


def test_a0_b0_flow_point_and_point_file(tmp_path):
    obj = compute(x1="sparse", d=2, T=5, a0=0.3, b0=0.9, pl=False)
    fp = obj["fixed_point"]
    assert fp["grad_norm"] < 1e-12 and abs(fp["ab"] - fp["ab_theory"]) < 1e-10
    assert fp["zero_modes"]["unexplained"] == 0
    path = tmp_path / "p.npy"
    np.save(path, diagonal_init(2, 0.5, 0.4).numpy())
    obj2 = compute(x1="gaussian", d=2, T=5, point=str(path), pl=False)
    assert obj2["fixed_point"]["grad_norm"] < 1e-12
    assert obj2["fixed_point"]["stable"]


def test_plot_png(tmp_path, capsys):
    out = tmp_path / "spec.png"
    code, _, err = run(capsys, "--x1", "ones", "--d", "2", "--T", "5", "--no-pl",
                       "--plot", str(out))
    assert code == 0, err
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_monte_carlo_field_gives_error_bars():
    obj = compute(x1="gaussian", d=2, T=4, field="mc", samples=512, pl=False)
    mc = obj["monte_carlo"]
    assert mc["grad_se_max"] > 0
    # the population gradient at the theory point is 0: the estimate is within a few SE
    assert mc["max_z"] < 5
    assert len(obj["fixed_point"]["eigenvalues"]) == 72


@pytest.mark.parametrize("content, match", [
    (np.zeros(10), "shape"),
    (np.full(72, np.nan), "non-finite"),
    (np.zeros((2, 36)), "shape"),
])
def test_bad_point_file(tmp_path, capsys, content, match):
    path = tmp_path / "bad.npy"
    np.save(path, content)
    code, out, err = run(capsys, "--x1", "gaussian", "--d", "2", "--T", "5",
                         "--point", str(path))
    assert code == 2 and out == ""
    assert err.startswith("mesadyn: error:") and match in err and "Traceback" not in err


def test_pickled_point_is_refused(tmp_path):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(MesadynError, match="cannot read"):
        load_point(path, 2)
    with pytest.raises(MesadynError, match="not found"):
        load_point(tmp_path / "missing.npy", 2)
    txt = tmp_path / "p.txt"
    txt.write_text("1 2 3")
    with pytest.raises(MesadynError, match=".npy or .nc"):
        load_point(txt, 2)


@pytest.mark.parametrize("args, match", [
    (("--field", "finite", "--m", "0"), "m"),
    (("--a0", "0.5"), "both --a0 and --b0"),
    (("--plot", "x.jpg"), ".pdf, .png or .svg"),
    (("--d", "0"), "d"),
])
def test_bad_options(capsys, args, match):
    code, out, err = run(capsys, "--x1", "gaussian", "--d", "2", "--T", "5", "--no-pl", *args)
    assert code == 2 and match in err and "Traceback" not in err


def test_exact_field_without_moments_is_a_clear_error():
    from mesadyn.field import FieldSpec
    from mesadyn.process import sampled

    fam = sampled(2, lambda n, g, dev: np.zeros((n, 2)))  # no exact moments
    with pytest.raises(MesadynError, match="cannot give a Hessian"):
        wf.hessian_field(FieldSpec("exact", fam, 5))


def test_false_fixed_point_is_a_failure_exit_1(capsys):
    """Issue 12: a flow stopped far from any critical point (here by a tiny --t-end, as a huge
    start does by the step limit) used to be reported as a fixed point with exit 0."""
    code, out, err = run(capsys, "--x1", "gaussian", "--d", "1", "--T", "5", "--a0", "1e6",
                         "--b0", "1e6", "--t-end", "1e-15", "--no-pl", "--json")
    assert code == 1, err
    obj = json.loads(out)
    assert obj["status"] == "failed" and "fixed_point" not in obj
    f = obj["failure"]
    assert f["stage"] == "fixed point" and not f["passed"]
    assert f["residual"] > 1e3 > f["tolerance"] and f["flow"]["status"] == "t_end"
    assert "no fixed point" in err and "Traceback" not in err


@pytest.mark.parametrize("where", ["missing/spec.png", "file.txt/spec.png", "adir"])
def test_unwritable_plot_is_refused_before_work(tmp_path, capsys, monkeypatch, where):
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "adir.png").mkdir()
    target = tmp_path / (where if where != "adir" else "adir.png")
    import mesadyn.field

    monkeypatch.setattr(mesadyn.field, "make_field", lambda *a: pytest.fail("work started"))
    code, out, err = run(capsys, "--x1", "gaussian", "--d", "2", "--T", "5", "--no-pl",
                         "--plot", str(target))
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith("mesadyn: error:") and str(target) in err


@pytest.mark.slow
def test_ones_d5_T100_under_a_minute():
    start = time.perf_counter()
    obj = compute(x1="ones", d=5, T=100)
    wall = time.perf_counter() - start
    assert wall < 60
    assert obj["released"]["grad_norm"] < 1e-9 and obj["released"]["stable"]


def test_load_point_roundtrip(tmp_path):
    th = diagonal_init(2, 0.3, 0.2).numpy()
    np.save(tmp_path / "ok.npy", th)
    assert np.array_equal(load_point(tmp_path / "ok.npy", 2), th)


def test_point_from_integrate_run_file(tmp_path):
    """A run .nc written by mesadyn.flow: the last row of its θ(τ) is the point."""
    from mesadyn.field.exact import ExactField
    from mesadyn.flow import integrate
    from mesadyn.io import save_run
    from mesadyn.process import gaussian

    res = integrate(ExactField(gaussian(2, 1.0), 5), diagonal_init(2, 0.2, 0.3), t_end=0.5)
    path = save_run(res.to_dataset(), tmp_path / "run.nc", kind="integrate", config={})
    assert np.array_equal(load_point(path, 2), res.theta[-1])
    with pytest.raises(MesadynError, match="shape"):
        load_point(path, 3)


def test_finite_field_json_and_bad_m(capsys) -> None:
    """Issue 18 item 5: ``--field finite --m M`` analyses the finite-sample loss's own fixed
    point; ``--m 0`` is one line and exit 2."""
    import json as _json

    from mesadyn.cli import main

    def run(args):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        return code, *capsys.readouterr()

    code, out, err = run(["stability", "--x1", "gaussian", "--d", "1", "--T", "5",
                          "--field", "finite", "--m", "100", "--no-pl", "--json"])
    assert code == 0, err
    r = _json.loads(out)
    assert r["field"]["field"] == "finite" and r["field"]["m"] == 100
    assert r["fixed_point"]["grad_norm"] < 1e-8 and r["fixed_point"]["n_unstable"] == 0
    assert r["fixed_point"]["ab"] != r["fixed_point"]["ab_theory"]
    code, out, err = run(["stability", "--field", "finite", "--m", "0", "--json"])
    assert code == 2 and out == "" and "m" in err and len(err.strip().splitlines()) == 1


def test_a_flow_ending_at_the_saddle_exits_1_and_says_so(capsys):
    """From the saddle's stable manifold a = −b the flow goes to θ = 0: outcome ``saddle``,
    exit 1 after the output (not a fixed point with exit 0)."""
    code, out, err = run(capsys, "--x1", "gaussian", "--d", "2", "--T", "5", "--a0", "1e-6",
                         "--b0", "-1e-6", "--t-end", "50", "--no-pl", "--json")
    assert code == 1, err
    obj = json.loads(out)
    assert obj["status"] == "saddle" and obj["fixed_point"]["n_unstable"] >= 1
    assert "mesadyn: saddle:" in err and "Traceback" not in err


def test_run_file_reruns_from_the_cli(tmp_path, capsys):
    """``--out`` writes the run file (the radius recorded); ``mesadyn rerun FILE`` rebuilds
    the configuration from it alone and reproduces every number (exit 0)."""
    path = tmp_path / "s.nc"
    code, _, err = run(capsys, "--x1", "gaussian", "--d", "2", "--T", "5", "--radius", "0.8",
                       "--no-pl", "--out", str(path))
    assert code == 0, err
    try:
        main(["rerun", str(path), "--json"])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    obj = json.loads(captured.out)
    assert obj["kind"] == "stability" and obj["differences"] == [] and obj["status"] == "ok"


@pytest.mark.parametrize(("kind", "needle"), [
    ("ensemble", "holds a run of 'ensemble', which is not one point"),
    ("continuation", "holds a run of 'continuation', which is not one point"),
])
def test_point_refuses_a_run_file_that_holds_no_single_point(tmp_path, kind, needle):
    """``--point ens.nc`` took the last trajectory's end point of an ensemble; a run file is
    now read by the one validated reader and used as a point only for the kinds that hold one
    (integrate, stability, train)."""
    import xarray as xr

    from mesadyn.io import save_run

    path = tmp_path / "run.nc"
    th = np.zeros((3, 72))
    save_run(xr.Dataset({"theta": (("traj", "param"), th)}), path, kind=kind, config={})
    with pytest.raises(MesadynError, match=needle):
        load_point(path, 2)
