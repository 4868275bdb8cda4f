"""``mesadyn stability --rotation real`` (``mesadyn.workflows._manifold_stability``): the fixed
point of the 3-D manifold analysed by the full exact field, every zero mode explained, the
spectrum against an independent eigendecomposition, through the Python API and the CLI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from mesadyn.analysis.fixedpoint import flow_to_fixed_point
from mesadyn.analysis.rotation_manifold import ManifoldSystem, coordinates, distance
from mesadyn.field import ExactField
from mesadyn.model import active_mask, gaussian_init
from mesadyn.outcome import Outcome
from mesadyn.process import gaussian
from mesadyn.theory import rotation_constants
from mesadyn.workflows import stability


def _check_point(res: stability.Result, d: int, T: int, **proc) -> dict:
    """The checks every real-rotation stability point passes; its report as a dict."""
    assert res.status is Outcome.FIXED_POINT, res.message
    rep = res.fixed_point
    assert rep is not None
    theta = np.asarray(rep.point.theta)
    f = ExactField(gaussian(d), T, rotation="real", cache=False, **proc)
    assert float(f.grad(torch.as_tensor(theta)).abs().max()) < 1e-10
    out = rep.to_dict()
    zm = out["zero_modes"]
    assert out["grad_norm"] < 1e-10 and out["n_unstable"] == 0
    assert zm["unexplained"] == 0 and zm["higher_order"] == 0 and zm["flat"] == 0
    assert out["n_zero"] == zm["inactive"] + zm["symmetry"] + zm["unused"]
    assert out["n_zero"] == int((~active_mask(d)).sum()) + 1 + zm["declared_symmetry"]
    # the spectrum is that of −∇²L of the exact field, computed here independently
    mu = np.linalg.eigvalsh(-f.hessian(torch.as_tensor(theta)).numpy())
    np.testing.assert_allclose(out["eigenvalues"], mu, atol=1e-9 * np.abs(mu).max())
    return out


@pytest.mark.parametrize(("T", "start", "proc"), [
    (6, {}, {}),                                  # the balanced fixed point
    (10, {"a0": 0.5, "b0": 0.5}, {}),             # the end of the flow from the diagonal start
    (6, {}, {"noise": 0.3}),                      # constants read off the exact field
])
def test_the_manifolds_fixed_point_has_every_zero_mode_explained(T, start, proc):
    d = 2
    res = stability.run(stability.Config(d=d, T=T, rotation="real", **start, **proc))
    out = _check_point(res, d, T, **proc)
    assert out["n_zero"] == 12 * d * d + 1 and out["zero_modes"]["declared_symmetry"] == 0
    assert out["manifold_distance"] < 1e-12
    theta = np.asarray(res.fixed_point.point.theta)  # type: ignore[union-attr]
    a, c, b = coordinates(theta)
    ms = (ManifoldSystem.from_constants(rotation_constants(gaussian(d), T)) if not proc
          else ManifoldSystem.from_field(ExactField(gaussian(d), T, rotation="real",
                                                    cache=False, **proc)))
    np.testing.assert_allclose([a * b, c * b], ms.k_star, atol=1e-10)
    assert (out["ab_theory"], out["cb_theory"]) == pytest.approx(tuple(ms.k_star), rel=1e-12)
    if not start:  # the balanced point: a² + c² = b²
        assert a * a + c * c == pytest.approx(b * b, rel=1e-10)
    # the manifold's two nonzero eigenvalues are in the full spectrum
    red = out["reduced"]
    np.testing.assert_allclose(red["nearest_full_eigenvalues"], red["manifold_eigenvalues"],
                               rtol=1e-9)
    np.testing.assert_allclose(red["eigenvalues_numeric"], red["eigenvalues_analytic"],
                               atol=1e-9 * abs(red["eigenvalues_analytic"][0]))
    assert out["transverse"]["n_unstable"] == 0


def test_the_cli_reports_the_same_point(cli_json):
    got = cli_json("stability", "--rotation", "real", "--d", "2", "--T", "6")
    assert got["status"] == "fixed_point"
    fp = got["fixed_point"]
    assert fp["grad_norm"] < 1e-10 and fp["zero_modes"]["unexplained"] == 0
    assert fp["zero_modes"]["declared_symmetry"] == 0 and fp["n_zero"] == 49
    k = ManifoldSystem.from_constants(rotation_constants(gaussian(2), 6)).k_star
    assert (fp["ab"], fp["cb"]) == pytest.approx(tuple(k), rel=1e-12)


@pytest.fixture(scope="module")
def off_manifold_point(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local minimum off the manifold (d = 4, T = 8, a small Gaussian start)."""
    f = ExactField(gaussian(4), 8, rotation="real", cache=False)
    fp, _ = flow_to_fixed_point(f, gaussian_init(4, 0.3, 5), steady_tol=1e-10)
    path = tmp_path_factory.mktemp("off") / "off.npy"
    np.save(path, fp.theta)
    return path


def test_the_block_rotations_explain_the_zero_mode_off_the_manifold(off_manifold_point):
    res = stability.run(stability.Config(d=4, T=8, rotation="real",
                                         point=str(off_manifold_point)))
    out = _check_point(res, 4, 8)
    assert out["zero_modes"]["declared_symmetry"] == 1  # the block rotations' orbit
    assert out["manifold_distance"] > 1e-2
    # without them the mode would not be explained as a symmetry
    from mesadyn.analysis.spectrum import classify

    theta = np.load(off_manifold_point)
    f = ExactField(gaussian(4), 8, rotation="real", cache=False)
    plain = classify(f.hessian(torch.as_tensor(theta)).numpy(), theta, field=f)
    assert plain.n_symmetry == 1 and plain.n_zero == out["n_zero"]
    assert plain.n_degenerate + plain.n_unexplained == 1
    assert distance(theta) > 1e-2


def test_a_monte_carlo_point_is_tested_against_its_error():
    """The exact balanced point on a Monte-Carlo field of whole sequences: the sampled gradient
    is not small (2000 draws) but within its error, so it passes the test by its z-scores."""
    res = stability.run(stability.Config(d=2, T=5, rotation="real", field="mc", samples=2000))
    assert res.status is Outcome.FIXED_POINT, res.message
    mc = res.to_dict()["monte_carlo"]
    assert mc["grad_max"] > 1e-3 and mc["samples"] == 2000
    assert mc["max_z"] < 6 and mc["grad_se_max"] > 0


@pytest.mark.parametrize("process", [{"noise": 0.3}, {"rotation": "haar"}])
def test_a_monte_carlo_point_of_whole_sequences_is_tested_against_its_error(process):
    """The paper's stability path draws whole sequences for noise and Haar W: its Monte-Carlo
    fixed-point test reads their estimate too, not the steady-state tolerance."""
    res = stability.run(stability.Config(d=2, T=5, field="mc", samples=2000, **process))
    mc = res.to_dict()["monte_carlo"]
    assert res.ok and mc is not None and mc["samples"] == 2000
    assert mc["grad_max"] > 1e-3 and mc["max_z"] < 6
