"""The data models of issue 13 on the command line (docs/design.md §6): shifted, moments and
mixture tokens, the radius r of ``W = r·diag(λ)``, rotations and noise.

Bad parameters are one line and exit 2; the new models run through ``theory``,
``integrate --reduced`` and ``stability``, checked against independent computations (the
radius sums written out term by term, the shifted Gaussian's moments from its binomial
expansion, the exact field against the Monte-Carlo field within 4 standard errors); a sweep
runs over ``radius``.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from mesadyn.cli import main
from mesadyn.field import FieldKind, FieldSpec, make_field
from mesadyn.model import gaussian_init
from mesadyn.process import gaussian
from mesadyn.theory import constants


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(("args", "names"), [
    (["theory", "--radius", "0"], "radius=0"),
    (["theory", "--radius", "-0.5"], "radius=-0.5"),
    (["theory", "--sigma", "-1"], "sigma"),
    (["theory", "--x1", "shifted", "--mu", "0.3", "--sigma", "-2"], "-2"),
    (["theory", "--x1", "mixture", "--mixture", "1.5:ones,-0.5:gaussian"], "1.5"),
    (["theory", "--x1", "mixture", "--mixture", "0.3:ones,0.3:gaussian"], "sum"),
    # E[x^2] = 1 but E[x^4] = 0.5 < (E[x^2])^2: no distribution has these moments
    (["theory", "--x1", "moments", "--moments", "0,1,0,0.5,0,1"], "moments"),
    (["theory", "--x1", "moments", "--moments", "0,1,0"], "0,1,0"),
    (["integrate", "--reduced", "--rotation", "real", "--d", "3"], "d=3"),
    (["theory", "--rotation", "spiral"], "spiral"),
    (["theory", "--noise", "-0.1"], "noise=-0.1"),
    (["theory", "--mu", "0.3"], "mu=0.3"),
    # the exact Haar field's reach (d <= 5, noiseless)
    (["integrate", "--rotation", "haar", "--field", "exact", "--d", "6", "--T", "5"], "d=6"),
    (["integrate", "--noise", "-0.1", "--field", "exact", "--d", "2", "--T", "5"], "noise=-0.1"),
    (["integrate", "--reduced", "--rotation", "haar", "--noise", "0.1", "--d", "2", "--T", "5"],
     "noise=0.1"),
    (["theory", "--rotation", "haar", "--noise", "0.1", "--d", "2", "--T", "5"], "noise=0.1"),
    # real rotations leave the diagonal manifold: their reduced flow is 3-D, not a portrait's plane
    (["portrait", "--rotation", "real", "--d", "2", "--T", "5", "--out", "p.png"], "3-D"),
    (["theory", "--rotation", "real", "--x1", "ones", "--d", "2", "--T", "5"], "'ones'"),
    (["train", "--rotation", "real", "--d", "3", "--T", "5", "--m", "10", "--steps", "1"],
     "d=3"),
])
def test_bad_data_model_is_one_line_exit_2(capsys, args, names):
    code, out, err = _cli(capsys, *args)
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mesadyn: error:"), err
    assert names in lines[0], err


def _radius_constants(k1: float, k2: float, k3: float, T: int, r: float) -> tuple[float, float]:
    """c1, c2 at radius r written out term by term (theory's module docstring), no numpy."""
    c1 = c2 = 0.0
    for t in range(2, T):
        S = sum(r ** (2 * m) for m in range(t - 1))
        Q = sum(r ** (4 * m) for m in range(t - 1))
        c1 += r ** (2 * t) * (k2 * S * S + k3 * Q) / (t - 1) ** 2
        c2 += k1 * r ** (2 * t) * S / (t - 1)
    return c1, c2


def test_theory_at_radius_matches_the_sums_written_out(capsys):
    code, out, _ = _cli(capsys, "theory", "--x1", "gaussian", "--radius", "0.9", "--d", "4",
                        "--T", "30", "--json")
    assert code == 0
    got = json.loads(out)
    c1, c2 = _radius_constants(3.0, 15.0, 3.0 * 3, 30, 0.9)  # gaussian σ=1, d=4
    assert got["radius"] == 0.9
    assert got["c1"] == pytest.approx(c1, rel=1e-13)
    assert got["c2"] == pytest.approx(c2, rel=1e-13)
    assert got["ab_star"] == pytest.approx(c2 / c1, rel=1e-13)
    assert got["ratio"] is None  # Proposition 4.1 is r = 1's
    # r < 1: the sums converge, so ab* at a long T is the T → ∞ limit
    c1_long, c2_long = _radius_constants(3.0, 15.0, 9.0, 600, 0.9)
    assert got["ab_limit"] == pytest.approx(c2_long / c1_long, rel=1e-12)


def test_theory_at_r1_has_no_radius_key(capsys):
    code, out, _ = _cli(capsys, "theory", "--json")
    assert code == 0 and "radius" not in json.loads(out)


def test_theory_shifted_moments_from_the_binomial_expansion(capsys):
    mu, sigma, d, T = 0.3, 0.7, 3, 40
    code, out, _ = _cli(capsys, "theory", "--x1", "shifted", "--mu", str(mu), "--sigma",
                        str(sigma), "--d", str(d), "--T", str(T), "--json")
    assert code == 0
    got = json.loads(out)
    normal = {0: 1, 2: 1, 4: 3, 6: 15}  # E[g^k], odd ones vanish

    def raw(k: int) -> float:
        return sum(math.comb(k, j) * mu ** (k - j) * sigma ** j * normal.get(j, 0)
                   for j in range(k + 1))

    assert got["family"] == "shifted" and got["assumption_4_1"] is False
    assert got["kappa1"] == pytest.approx(raw(4), rel=1e-13)
    assert got["kappa2"] == pytest.approx(raw(6), rel=1e-13)
    H = math.fsum(1 / k for k in range(1, T - 1))
    c1, c2 = (T - 2) * got["kappa2"] + H * got["kappa3"], (T - 2) * got["kappa1"]
    assert got["c1"] == pytest.approx(c1, rel=1e-13)
    assert got["ab_star"] == pytest.approx(c2 / c1, rel=1e-13)


def test_integrate_reduced_at_radius_settles_on_ab_star(capsys):
    code, out, _ = _cli(capsys, "integrate", "--reduced", "--radius", "0.8", "--d", "3",
                        "--T", "20", "--a0", "0.4", "--b0", "0.9", "--json")
    assert code == 0
    got = json.loads(out)
    c1, c2 = _radius_constants(3.0, 15.0, 6.0, 20, 0.8)
    assert got["c1"] == pytest.approx(c1, rel=1e-13)
    assert got["ab_theory"] == pytest.approx(c2 / c1, rel=1e-13)
    assert got["ab"] == pytest.approx(c2 / c1, rel=1e-8)
    assert got["closed_form_max_error"] < 1e-8


def test_integrate_reduced_mixture_runs(capsys):
    code, out, _ = _cli(capsys, "integrate", "--reduced", "--x1", "mixture", "--mixture",
                        "0.5:gaussian(sigma=0.5),0.5:gaussian(sigma=2)", "--d", "2", "--T", "10",
                        "--json")
    assert code == 0
    got = json.loads(out)
    # a mixture's moments are the weighted sums (σ^4, σ^6 scalings of the gaussian's)
    k1 = 0.5 * 3 * (0.5**4 + 2.0**4)
    assert got["family"] == "mixture"
    assert got["ab"] == pytest.approx(got["ab_theory"], rel=1e-8)
    assert got["c2"] == pytest.approx(8 * k1, rel=1e-13)


def test_stability_at_radius_finds_the_balanced_fixed_point(capsys):
    code, out, err = _cli(capsys, "stability", "--x1", "gaussian", "--radius", "0.9", "--d", "2",
                          "--T", "6", "--json", "--no-pl")
    assert code == 0, err
    got = json.loads(out)
    assert got["field"]["radius"] == 0.9
    c1, c2 = _radius_constants(3.0, 15.0, 3.0, 6, 0.9)
    fp = got["fixed_point"]
    assert fp["grad_norm"] < 1e-9
    assert fp["ab_theory"] == pytest.approx(c2 / c1, rel=1e-13)
    assert fp["ab"] == pytest.approx(c2 / c1, rel=1e-9)
    assert fp["reduced"]["c1"] == pytest.approx(c1, rel=1e-13)
    assert fp["stable"] is True


def test_field_spec_radius_key_and_describe():
    fam = gaussian(2)
    plain = FieldSpec(FieldKind.EXACT, fam, 5)
    assert FieldSpec(FieldKind.EXACT, fam, 5, radius=1.0) == plain
    assert "radius" not in plain.describe()
    r = FieldSpec(FieldKind.EXACT, fam, 5, radius=0.9)
    assert r != plain and r.describe()["radius"] == 0.9
    from mesadyn.errors import MesadynError

    with pytest.raises(MesadynError, match="radius=0"):
        FieldSpec(FieldKind.MC, fam, 5, radius=0.0)


@pytest.mark.parametrize("d", [2, 3])
def test_exact_and_monte_carlo_agree_at_radius_0_9(d):
    """Exact loss and gradient at r = 0.9 within 4 standard errors of the Monte-Carlo field
    (whose draws use the AR fast path with |λ| = 0.9) at a random dense θ."""
    T, r = 6, 0.9
    fam = gaussian(d, 0.8)
    exact = make_field(FieldSpec(FieldKind.EXACT, fam, T, radius=r), reuse=False)
    mc = make_field(FieldSpec(FieldKind.MC, fam, T, samples=20_000, seed=3, radius=r),
                    reuse=False)
    th = gaussian_init(d, 0.3, 11 + d)
    est = mc.estimate(th)
    L = float(exact.loss(th))
    assert abs(L - float(est.loss)) < 4 * float(est.loss_se), (L, est.loss, est.loss_se)
    g = exact.grad(th)
    z = (g - est.grad).abs() / est.grad_se.clamp_min(1e-300)
    active = est.grad_se > 0
    assert float(z[active].max()) < 4.0  # every active coordinate within 4 SE (measured <= 2.1)
    assert torch.allclose(g[~active], torch.zeros_like(g[~active]))
    # and the r = 0.9 field is not the r = 1 one
    assert abs(float(make_field(FieldSpec(FieldKind.EXACT, fam, T)).loss(th)) - L) > 1e-3


def test_sweep_over_radius(tmp_path):
    from mesadyn.sweep import load_sweep, parse_spec, run_sweep

    spec = parse_spec({"workflow": "theory", "options": {"x1": "gaussian", "d": 3, "T": 25},
                       "axes": {"radius": [0.7, 0.9, 1.0]}})
    res = run_sweep(spec, tmp_path / "out", workers=0)
    assert res.computed == 3 and not res.failed
    ds = load_sweep(tmp_path / "out")
    for r in (0.7, 0.9, 1.0):
        c1, c2 = _radius_constants(3.0, 15.0, 6.0, 25, r)
        assert ds.sel(radius=r)["ab_star"].item() == pytest.approx(c2 / c1, rel=1e-12)


@pytest.mark.parametrize("args", [["theory"], ["theory", "--x1", "shifted", "--mu", "0.3"],
                                  ["theory", "--radius", "0.9"], ["--help"]])
def test_theory_and_help_load_no_heavy_library(args):
    """Issue 11 item 8: ``mesadyn theory`` (closed forms) and ``--help`` import none of torch,
    scipy, xarray, matplotlib, jax, dask (process.py samples with torch lazily)."""
    import subprocess
    import sys

    probe = (f"import sys\nsys.argv = ['mesadyn'] + {args!r}\nfrom mesadyn.cli import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in ('torch', 'scipy', 'xarray', 'matplotlib', 'jax', 'dask') "
             "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]", out


def test_integrate_monte_carlo_haar_end_to_end(capsys):
    """``integrate --field mc --rotation haar`` runs the flow on the sequence field: its final
    loss is that field's loss at the final θ (rebuilt independently from the same seed)."""
    from mesadyn.field import MonteCarloSequenceField
    from mesadyn.model import pack

    code, out, err = _cli(capsys, "integrate", "--field", "mc", "--rotation", "haar",
                          "--noise", "0.2", "--d", "2", "--T", "6", "--samples", "400",
                          "--t-end", "0.5", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["field"] == "mc" and res["ab_theory"] is None
    theta = pack(torch.tensor(res["W_KQ"], dtype=torch.float64),
                 torch.tensor(res["W_PV"], dtype=torch.float64))
    f = MonteCarloSequenceField(gaussian(2), 6, samples=400, seed=1, rotation="haar",
                                noise=0.2, device="cpu")
    assert float(f.loss(theta)) == pytest.approx(res["loss"], rel=1e-10)
    start = torch.tensor(_diagonal_start(2), dtype=torch.float64)
    assert res["loss"] < float(f.loss(start))  # the flow descends


def _diagonal_start(d: int) -> list[float]:
    from mesadyn.model import diagonal_init
    from mesadyn.workflows.integrate import Config

    c = Config(d=d, T=6)
    return diagonal_init(d, c.a0, c.b0).tolist()


def test_train_haar_and_radius_run_from_the_command_line(capsys):
    code, out, err = _cli(capsys, "train", "--rotation", "haar", "--noise", "0.1", "--d", "2",
                          "--T", "6", "--m", "40", "--steps", "3", "--lr", "0.01", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["rotation"] == "haar" and res["noise"] == 0.1 and res["ab_theory"] is None
    code, out, err = _cli(capsys, "train", "--radius", "0.9", "--d", "2", "--T", "6", "--m",
                          "40", "--steps", "3", "--lr", "0.01", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["radius"] == 0.9 and "rotation" not in res
    assert res["ab_theory"] == pytest.approx(constants(gaussian(2), 6, radius=0.9).ab_star,
                                             rel=1e-12)
