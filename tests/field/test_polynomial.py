"""Sampled fields in polynomial form (issue 18): the empirical moment tensors Ĝ, Ĉ contracted
as in ExactField give the same loss, gradient, HVP and Hessian as the direct prefix-sum path,
to 1e-12 relative, for every family kind, for the Monte-Carlo and the finite-sample field."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import FiniteField, MonteCarloField
from mesadyn.field._empirical import build_moments
from mesadyn.field._forms import Form, choose_form
from mesadyn.model import active_mask, gaussian_init
from mesadyn.process import (
    gaussian,
    iid,
    mixture,
    moments,
    ones,
    rademacher,
    sampled,
    shifted,
    sparse,
    uniform,
)

RTOL = 1e-12


def _laplace(n: int, gen: torch.Generator, dev: torch.device) -> torch.Tensor:
    u = torch.rand(n, 2, generator=gen, device=dev, dtype=torch.float64) - 0.5
    return -torch.sign(u) * torch.log1p(-2 * u.abs())


FAMILIES = {
    "gaussian": gaussian(2, 0.9),
    "sparse": sparse(2, 1.3),
    "ones": ones(2),
    "rademacher": rademacher(2),
    "uniform": uniform(2),
    "iid-custom": iid(2, 2.0, 24.0, 720.0, sampler=_laplace),
    "sampled": sampled(2, _laplace),
    "shifted": shifted(2, 0.5, 0.8),
    "moments": moments(2, [0.0, 1.0, 0.0, 3.0, 0.0, 15.0]),
    "mixture": mixture([(0.3, gaussian(2, 0.5)), (0.7, sparse(2, 1.0))]),
}


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


def _pair(kind: str, fam, T: int, n: int, seed: int):
    if kind == "mc":
        poly = MonteCarloField(fam, T, samples=n, seed=seed, batches=4, device="cpu",
                               form="polynomial")
    else:
        poly = FiniteField(fam, T, n, seed=seed, device="cpu", form="polynomial")
    return poly


@pytest.mark.parametrize("kind", ["mc", "finite"])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_polynomial_equals_direct(kind: str, name: str) -> None:
    fam, T = FAMILIES[name], 7
    f = _pair(kind, fam, T, 150, seed=5)
    assert f.form is Form.POLYNOMIAL and f.has_exact_hessian
    gen = torch.Generator().manual_seed(11)
    for _ in range(2):  # random dense θ (every entry nonzero)
        theta = gaussian_init(2, 0.4, seed=int(torch.randint(1000, (1,), generator=gen)))
        v = torch.randn(theta.shape, generator=gen, dtype=torch.float64)
        L_p, g_p = f.loss_and_grad(theta)
        L_d, g_d = f.direct_loss_and_grad(theta)
        assert abs(float(L_p - L_d)) <= RTOL * abs(float(L_d))
        assert _rel(g_p, g_d) <= RTOL
        assert _rel(f.hvp(theta, v), f.direct_hvp(theta, v)) <= RTOL
        # the differentiable torch loss of the polynomial form agrees too
        assert abs(float(f.loss(theta) - L_d)) <= RTOL * abs(float(L_d))
    assert f.built


def test_hessians_agree_and_inactive_rows_vanish() -> None:
    fam = gaussian(2, 1.1)
    f = FiniteField(fam, 6, 80, seed=2, device="cpu", form="polynomial")
    theta = gaussian_init(2, 0.5, seed=9)
    H_p, H_d = f.hessian(theta), f.direct_hessian(theta)
    assert _rel(H_p, H_d) <= RTOL
    assert torch.equal(H_p, H_p.T)
    off = ~torch.from_numpy(active_mask(2))
    assert not H_d[off].any() and not H_d[:, off].any()
    # Hessian columns are HVPs with unit vectors (both paths)
    k = int(torch.nonzero(~off)[3])
    e = torch.zeros_like(theta)
    e[k] = 1.0
    assert _rel(H_d[:, k], f.direct_hvp(theta, e)) <= RTOL


def test_d3_polynomial_equals_direct() -> None:
    f = MonteCarloField(gaussian(3, 1.0), 8, samples=60, seed=3, batches=4, device="cpu",
                        form="polynomial")
    theta = gaussian_init(3, 0.3, seed=4)
    v = torch.randn(theta.shape, generator=torch.Generator().manual_seed(0),
                    dtype=torch.float64)
    L_p, g_p = f.loss_and_grad(theta)
    L_d, g_d = f.direct_loss_and_grad(theta)
    assert abs(float(L_p - L_d)) <= RTOL * abs(float(L_d)) and _rel(g_p, g_d) <= RTOL
    assert _rel(f.hvp(theta, v), f.direct_hvp(theta, v)) <= RTOL


def test_tensors_match_their_definition_entry_by_entry() -> None:
    """Ĝ, Ĉ, ĉ against u^t_{αβγ} = (1/(t−1)) Σ_{i≤t} e_{iα} ē_{iβ} e_{tγ} written out with
    loops over draws, times and slots (docs/exact-field.md's layout)."""
    d, T, m = 1, 5, 3
    f = FiniteField(gaussian(d), T, m, seed=8, device="cpu")
    mom = build_moments(f.x1, f.lam, T)
    n = 2 * d
    x1, lam = f.x1.numpy(), f.lam.numpy()
    G = np.zeros((n,) * 6)
    C = np.zeros((d, n, n, n))
    for s in range(m):
        x = [np.zeros(d, complex)] + [lam[s] ** (t - 1) * x1[s] for t in range(1, T + 1)]
        e = [None] + [np.concatenate([x[i], x[i - 1]]) for i in range(1, T + 1)]
        for t in range(2, T):
            u = np.zeros((n, n, n), complex)
            for a in range(n):
                for b in range(n):
                    for c in range(n):
                        u[a, b, c] = sum(e[i][a] * np.conj(e[i][b]) * e[t][c]
                                         for i in range(1, t + 1)) / (t - 1)
            G += np.real(np.einsum("abc,def->abcdef", np.conj(u), u)) / m
            C += np.real(np.einsum("j,abc->jabc", np.conj(x[t + 1]), u)) / m
    G_layout = G.transpose(0, 3, 1, 2, 4, 5).reshape(n * n, n * n, n * n)
    np.testing.assert_allclose(mom.G, G_layout, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(mom.C, C, rtol=1e-13, atol=1e-15)
    assert mom.const == pytest.approx(0.5 * (T - 2) * float((x1**2).sum(1).mean()), rel=1e-15)


def test_streaming_in_chunks_and_progress() -> None:
    f = FiniteField(gaussian(2), 6, 37, seed=1, device="cpu")
    seen: list[float] = []
    small = build_moments(f.x1, f.lam, 6, chunk_bytes=1, progress=seen.append)  # 1 draw a chunk
    whole = build_moments(f.x1, f.lam, 6)
    assert len(seen) == 37 and seen == sorted(seen) and seen[-1] == 1.0
    # the same sums in another order: equal to rounding relative to the largest entry
    assert np.abs(small.G - whole.G).max() <= 1e-13 * np.abs(whole.G).max()
    assert np.abs(small.C - whole.C).max() <= 1e-13 * np.abs(whole.C).max()
    assert small.samples == 37


def test_polynomial_approaches_the_exact_field() -> None:
    """With many Monte-Carlo draws the polynomial's loss is the exact loss within a few
    standard errors (independent: the exact field counts expectations)."""
    from mesadyn.field import ExactField

    fam, T = gaussian(2, 1.0), 6
    mc = MonteCarloField(fam, T, samples=20_000, seed=4, batches=20, device="cpu",
                         form="polynomial")
    theta = gaussian_init(2, 0.3, seed=1)
    est = mc.estimate(theta)  # direct path, batch-means standard error
    exact = float(ExactField(fam, T, cache=False).loss(theta))
    assert abs(float(mc.loss(theta)) - float(est.loss)) <= 1e-12 * abs(exact)
    assert abs(float(est.loss) - exact) <= 4 * float(est.loss_se)


def test_cost_model_and_forms() -> None:
    small = choose_form(2, 10, 20_000, budget_bytes=2**34)
    assert small.form is Form.POLYNOMIAL and small.build_s > 0
    huge = choose_form(16, 10, 1000, budget_bytes=2**34)  # (2d)⁶ ≈ 10⁹ entries
    assert huge.form is Form.DIRECT and "GiB" in huge.reason
    tight = choose_form(2, 10, 20_000, budget_bytes=1000)
    assert tight.form is Form.DIRECT
    tiny = choose_form(2, 3, 1, budget_bytes=2**34)  # one draw: the direct path is cheaper
    assert tiny.form is Form.DIRECT and "does not pay back" in tiny.reason
    f = FiniteField(gaussian(2), 5, 4, device="cpu", form="direct")
    assert f.form is Form.DIRECT and not f.built
    f.loss_and_grad(gaussian_init(2, 0.1))
    assert not f.built and f.describe()["form"] == "direct"
    with pytest.raises(MesadynError, match="unknown form 'fast'"):
        FiniteField(gaussian(2), 5, 4, device="cpu", form="fast")


def test_cost_model_counts_single_coordinate_draws() -> None:
    """Sparse draws (one nonzero entry of x_1) sum their t in closed form on the direct path,
    so at the paper's size the build no longer pays back for them; the field counts them."""
    dense = choose_form(5, 100, 10_000, budget_bytes=2**34)
    single = choose_form(5, 100, 10_000, single=10_000, budget_bytes=2**34)
    assert dense.form is Form.POLYNOMIAL and single.form is Form.DIRECT
    assert single.direct_eval_s < dense.direct_eval_s / 5  # 14 of a dense draw's 98 rows
    assert FiniteField(sparse(5), 100, 10_000, device="cpu").form is Form.DIRECT
    assert FiniteField(gaussian(5), 100, 10_000, device="cpu").form is Form.POLYNOMIAL


def test_radius_other_than_one_matches_the_general_model_path() -> None:
    """|λ| = r ≠ 1 (docs/design.md §6): the polynomial equals Eq. 2 through the general
    prefix-sum predictor on process.sequences (which honours the modulus)."""
    from mesadyn.field._empirical import EmpiricalPolynomial
    from mesadyn.model import sequence_loss
    from mesadyn.process import make_generator, sample, sequences

    fam, T = gaussian(2, 1.0), 6
    x1, lam = sample(fam, 40, T, make_generator(3), "cpu")
    lam = 0.9 * lam
    poly = EmpiricalPolynomial(fam, T, build_moments(x1, lam, T))
    theta = gaussian_init(2, 0.4, seed=2).requires_grad_(True)
    direct = sequence_loss(theta, sequences(x1, lam, T)).mean()
    (g,) = torch.autograd.grad(direct, theta)
    direct = direct.detach()
    L_p, g_p = poly.loss_and_grad(theta.detach())
    assert abs(float(L_p - direct)) <= RTOL * abs(float(direct))
    assert _rel(g_p, g) <= RTOL


def test_prepare_builds_with_progress_only_in_polynomial_form() -> None:
    seen: list[float] = []
    f = FiniteField(gaussian(2), 5, 30, seed=1, device="cpu", form="polynomial")
    f.prepare(seen.append)
    assert f.built and seen and seen[-1] == 1.0
    g = FiniteField(gaussian(2), 5, 30, seed=1, device="cpu", form="direct")
    g.prepare(seen.append)
    assert not g.built


def test_direct_hessian_in_hvp_batches(monkeypatch) -> None:
    """The batched-HVP Hessian gives the same matrix whatever the batch size."""
    from mesadyn.field import _sampled

    f = FiniteField(gaussian(2, 0.8), 5, 20, seed=3, device="cpu", form="direct")
    theta = gaussian_init(2, 0.4, seed=5)
    H_all = f.direct_hessian(theta)
    monkeypatch.setattr(_sampled, "HVP_BATCH", 5)
    H_5 = f.direct_hessian(theta)
    assert _rel(H_5, H_all) <= 1e-14


def test_a_sample_set_that_does_not_fit_is_refused_before_drawing() -> None:
    with pytest.raises(MesadynError, match=r"10000000000000 samples at d=2 T=5 needs about .* "
                                           r"TiB \(estimate\), more than the .* available"):
        MonteCarloField(gaussian(2), 5, samples=10**13, device="cpu")
    with pytest.raises(MesadynError, match="sequences at d=3 T=5 needs about"):
        FiniteField(gaussian(3), 5, 10**13, device="cpu")


def test_batch_methods_use_the_direct_path_in_any_form() -> None:
    """The GD protocol (train) evaluates through the batch methods: its numbers must not
    depend on the cost model's form (golden outputs are bit-for-bit)."""
    f = FiniteField(gaussian(2), 6, 40, seed=2, device="cpu", form="polynomial")
    thetas = torch.stack([gaussian_init(2, 0.3, seed=s) for s in (1, 2)])
    direct = torch.stack([f.per_sequence_loss(t).mean() for t in thetas])
    assert torch.equal(f.batch_loss(thetas), direct)
    L, g = f.batch_loss_and_grad(thetas)
    assert torch.equal(L[0], f.direct_loss_and_grad(thetas[0])[0])
    assert not f.built  # nothing above needed the polynomial
