"""Continuation of a model other than the paper's (mesadyn.analysis.continuation on the
:class:`~mesadyn.models.Model` API), checked against independent computations:

- the deep model with one layer is the paper's model: its continuation in σ (quadrature field
  rebuilt at every σ, ∂∇L/∂σ by differences) gives the paper's (moment tensors combined at
  Chebyshev nodes, exact ∂∇L/∂σ) to 1e-10;
- every continued point of the two-layer model is a fixed point of a quadrature field built
  afresh at its σ, its per-layer invariants are held, every declared symmetry tangent is a zero
  mode there, the branch is the rescaling θ/σ of its start (L ∝ σ², ab ∝ 1/σ², exact), and an
  interior point has the loss of an independent flow to the fixed point at that σ
  (``mesadyn stability``);
- the symmetry generators read off the model are its tangents, the scalings conserved and the
  shears not; dependent or vanishing tangents get no phase condition;
- the run as a Dataset round-trips; bad input is refused in one line.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.analysis.continuation import (
    Continuation,
    Options,
    ParametricField,
    Symmetry,
    follow,
    follow_discrete,
    make_parameter,
)
from mesadyn.analysis.continuation._models import generators, independent_symmetries
from mesadyn.errors import MesadynError
from mesadyn.field import FieldSpec, make_field
from mesadyn.models import DeepLinearAttention, SoftmaxAttention
from mesadyn.outcome import Outcome
from mesadyn.process import gaussian, rademacher
from mesadyn.tolerances import ZERO_RTOL

TWO = DeepLinearAttention(2)
D, T = 1, 4
START, STOP = 1.0, 1.2


def fresh_field(p: float, T_: int = T):
    """The two-layer model's exact field by quadrature at σ = p, built afresh."""
    return make_field(FieldSpec("exact", gaussian(D, p), T_, model=TWO), disk_cache=False,
                      reuse=False)


@pytest.fixture(scope="module")
def start_theta() -> np.ndarray:
    """The fixed point the two-layer flow reaches at σ = START (``mesadyn stability``)."""
    from mesadyn.workflows import stability

    res = stability.run(stability.Config(model="deep", layers=2, d=D, T=T, sigma=START))
    assert res.status in (Outcome.FIXED_POINT, Outcome.SADDLE), res.message
    assert res.theta is not None
    return res.theta


@pytest.fixture(scope="module")
def two_layer(start_theta: np.ndarray) -> Continuation:
    par = make_parameter("sigma", gaussian(D, START), T, model=TWO)
    return follow(par, START, STOP, theta0=start_theta,
                  options=Options(ds=0.04, ds_max=0.04), analyse=True)


def test_one_layer_deep_is_the_papers_continuation() -> None:
    d, T1 = 2, 4  # (at d = 1 the paper's balanced point has a second, quartic zero mode)
    paper = make_parameter("sigma", gaussian(d, 0.8), T1)
    deep = make_parameter("sigma", gaussian(d, 0.8), T1, model=DeepLinearAttention(1))
    assert deep.node_powers is None and paper.node_powers == (2, 4, 6)
    th0 = paper.balanced_point(0.8)
    opt = Options(ds=0.05, ds_max=0.05)
    a = follow(paper, 0.8, 1.0, theta0=th0, options=opt, analyse=True)
    b = follow(deep, 0.8, 1.0, theta0=th0, options=opt, analyse=True)
    pa, pb = a.branches[0].points, b.branches[0].points
    assert b.branches[0].status is Outcome.REACHED_END and len(pa) == len(pb) >= 5
    assert (b.n_free, b.n_symmetries) == (a.n_free, a.n_symmetries) == (24, 1)
    for x, y, ax, ay in zip(pa, pb, a.analyses[0], b.analyses[0], strict=True):
        assert abs(x.p - y.p) <= 1e-10
        assert abs(ax.loss - ay.loss) <= 1e-10 * abs(ax.loss)
        assert np.abs(ax.ab - ay.ab).max() <= 1e-10 * np.abs(ax.ab).max()
        assert ay.zero_modes["unexplained"] == 0 and ay.n_zero == ax.n_zero


def test_every_point_is_a_fixed_point_of_a_fresh_field(two_layer: Continuation) -> None:
    from mesadyn.analysis.continuation._system import ROUNDING_FLOOR

    br = two_layer.branches[0]
    assert br.status is Outcome.REACHED_END, br.message
    assert len(br.points) >= 6 and br.points[-1].p == STOP
    assert (two_layer.n_free, two_layer.n_symmetries) == (22, 4)  # 2 scalings + 2 shears
    for pt in br.points:
        fld = fresh_field(pt.p)
        th = torch.as_tensor(pt.theta)
        g = fld.grad(th).numpy()
        floor = ROUNDING_FLOOR * float(np.abs(fld.hessian(th).numpy()).max()) * float(
            np.abs(pt.theta).max())
        assert np.abs(g).max() <= max(1e-11, floor), pt.p


def test_invariants_held_and_symmetries_are_zero_modes(two_layer: Continuation) -> None:
    br = two_layer.branches[0]
    inv = np.array([TWO.invariants(pt.theta) for pt in br.points])
    assert inv.shape == (len(br.points), 2)
    scale = max(1.0, float(np.abs(inv).max()))
    assert np.ptp(inv, axis=0).max() <= 1e-12 * scale
    for pt, an in zip(br.points, two_layer.analyses[0], strict=True):
        np.testing.assert_allclose(an.invariants, TWO.invariants(pt.theta), rtol=0,
                                   atol=1e-15)
        H = fresh_field(pt.p).hessian(torch.as_tensor(pt.theta)).numpy()
        V = TWO.symmetries(pt.theta)
        assert V.shape[1] == 4
        for v in V.T:
            assert np.linalg.norm(H @ v) <= ZERO_RTOL * np.abs(H).max() * np.linalg.norm(v)
        assert an.zero_modes["unexplained"] == 0 and an.zero_modes["symmetry"] == 4


def test_sigma_is_a_rescaling_of_the_two_layer_fixed_point(two_layer: Continuation) -> None:
    """Dividing every layer's W^KQ and W^PV by σ maps a fixed point at σ = 1 to one at σ
    (each layer's update is cubic in the stream, so the stream and ŷ scale by σ): along the
    branch L(σ) = σ² L(1) and Σ_l a_l b_l = ab(1)/σ², both invariant on the symmetry orbits."""
    pts, ans = two_layer.branches[0].points, two_layer.analyses[0]
    assert pts[0].p == START == 1.0
    for pt, an in zip(pts, ans, strict=True):
        assert abs(an.loss - pt.p**2 * ans[0].loss) <= 1e-10 * an.loss
        assert abs(an.ab[0] * pt.p**2 - ans[0].ab[0]) <= 1e-10 * ans[0].ab[0]


def test_an_interior_point_is_the_flows_fixed_point(two_layer: Continuation) -> None:
    """An independent flow to the fixed point at the σ of an interior point (``mesadyn
    stability``, from the layered diagonal init there) ends at the same loss and ab."""
    from mesadyn.workflows import stability

    br = two_layer.branches[0]
    j = len(br.points) // 2
    pt, an = br.points[j], two_layer.analyses[0][j]
    assert START < pt.p < STOP
    res = stability.run(stability.Config(model="deep", layers=2, d=D, T=T, sigma=pt.p))
    assert abs(res.loss - an.loss) <= 1e-9
    assert res.ab is not None and abs(res.ab[0] - an.ab[0]) <= 1e-7
    assert res.spectrum is not None and res.spectrum.n_unstable == an.n_unstable


def test_generators_are_the_models_tangents() -> None:
    d = 2
    syms = generators(TWO, d)
    assert [s.name for s in syms] == list(TWO.symmetry_names(d))
    rng = np.random.default_rng(1)
    th = rng.standard_normal(TWO.n_params(d))
    V = TWO.symmetries(th)
    for k, s in enumerate(syms):
        np.testing.assert_allclose(s.tangent(th), V[:, k], rtol=0, atol=1e-14)
    # the per-layer scalings are symmetric (θᵀSθ = −invariant, conserved), the shears are not
    assert [s.conserved for s in syms] == [True, True] + [False] * (2 * d * d)
    np.testing.assert_allclose([s.quadratic(th) for s in syms[:2]], -TWO.invariants(th),
                               rtol=1e-13)


def test_dependent_or_vanishing_tangents_get_no_phase_condition() -> None:
    s1 = Symmetry("a", np.array([1.0, -1.0, 0.0]))
    s2 = Symmetry("b", np.array([2.0, -2.0, 0.0]))  # the same orbit direction
    s3 = Symmetry("c", np.array([0.0, 0.0, 1.0]))
    free, held = np.ones(3, bool), np.zeros(3, bool)
    th = np.array([1.0, 2.0, 0.0])  # s3's orbit through th is a point
    assert [s.name for s in independent_symmetries((s1, s2, s3), th, free, held)] == ["a"]
    th = np.array([1.0, 2.0, 3.0])
    assert [s.name for s in independent_symmetries((s2, s1, s3), th, free, held)] == ["b", "c"]
    # a symmetry moving an entry that a mask holds is no symmetry of the masked problem
    held = np.array([False, False, True])
    free = np.array([True, True, False])
    assert [s.name for s in independent_symmetries((s1, s3), th, free, held)] == ["a"]


def test_discrete_T_for_two_layers(start_theta: np.ndarray) -> None:
    par = make_parameter("T", gaussian(D, START), T, model=TWO)
    res = follow_discrete(par, [4, 5], theta0=start_theta, analyse=True)
    br = res.branches[0]
    assert br.status is Outcome.REACHED_END and [pt.p for pt in br.points] == [4, 5]
    g = fresh_field(START, 5).grad(torch.as_tensor(br.points[1].theta)).numpy()
    assert np.abs(g).max() <= 1e-11
    assert res.n_symmetries == 4


def test_the_dataset_round_trips(two_layer: Continuation) -> None:
    import xarray as xr

    ds = two_layer.to_dataset()
    assert (ds.attrs["model"], ds.attrs["layers"]) == ("deep", 2)
    assert ds["invariants"].shape == (len(two_layer.branches[0].points), 2)
    assert ds["theta"].shape[1] == TWO.n_params(D)
    par = two_layer.parameter
    back = Continuation.from_dataset(ds, par)
    xr.testing.assert_identical(back.to_dataset(), ds)
    with pytest.raises(MesadynError, match=r"model=deep\(layers=2\), not model=linear"):
        Continuation.from_dataset(ds, make_parameter("sigma", gaussian(D, START), T))


@pytest.mark.parametrize(("kw", "match"), [
    ({"model": SoftmaxAttention()}, "model=softmax has no exact field"),
    ({"model": TWO, "rotation": "real", "family": gaussian(2)}, "rotation=real is not supported"),
    ({"model": TWO, "noise": 0.1}, "noise=0.1 is not supported"),
    ({"model": TWO, "name": "noise"}, "parameter noise is not supported"),
    ({"model": TWO, "name": "m4"}, "m4 is not supported for model=deep.*degree 18"),
])
def test_bad_input_is_one_line(kw: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"name": "sigma", "family": gaussian(1), "T": 4, **kw}
    with pytest.raises(MesadynError, match=match) as info:
        make_parameter(**args)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_a_model_needs_a_start_point() -> None:
    par = make_parameter("sigma", gaussian(D, START), T, model=TWO)
    with pytest.raises(MesadynError, match="no balanced start point"):
        follow(par, START, STOP)
    with pytest.raises(MesadynError, match="length 36"):
        follow(par, START, STOP, theta0=np.zeros(18))
    # one-layer deep on rademacher: the m4 of a two-point family stays refused as pinned
    one = make_parameter("m4", rademacher(1), 4, model=DeepLinearAttention(1))
    with pytest.raises(MesadynError, match="pinned"):
        one.check(1.5)


def test_the_parametric_field_of_a_model() -> None:
    par = make_parameter("sigma", gaussian(D, START), T, model=TWO)
    pb = ParametricField(par, START, STOP)
    assert pb.n == 36 and pb.nodes is None
    assert pb.free.sum() == TWO.active_mask(D).sum() == 22
    rng = np.random.default_rng(0)
    th = 0.4 * rng.standard_normal(pb.n)
    fd = (fresh_field(1.1 + 1e-4).grad(torch.as_tensor(th)).numpy()
          - fresh_field(1.1 - 1e-4).grad(torch.as_tensor(th)).numpy()) / 2e-4
    assert np.abs(pb.grad_p(th, 1.1) - fd).max() <= 1e-6 * np.abs(fd).max()
