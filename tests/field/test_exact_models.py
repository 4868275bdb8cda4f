"""The exact fields of real rotations, noisy AR and Haar W against independent computations.

- exact quadrature through the model code (:mod:`mesadyn.field._quadrature`: a uniform grid
  on the phases, the token's exact rule, Gauss–Hermite noise): loss, gradient and HVP to 1e-12
  for real rotations (d = 2 and 4, several families, r = 1 and 0.8) and for noise (diagonal
  d = 1, real d = 2);
- Monte-Carlo within 4 standard errors (independent draws of
  :func:`mesadyn.process.sample_sequences`, batch means of the loss, gradient and HVP at a
  random dense θ) for real rotations, noisy diagonal and real W, and Haar W;
- the counting reproduces the paper's tensors for diagonal W without noise; the Haar
  Weingarten function and CUE moments against known values; Haar's reach and the bad inputs
  are one-line errors (exit 2 on the command line); the tensors are cached per process.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from field_cases import FAMILIES, rel

from mesadyn.cli import main
from mesadyn.errors import MesadynError
from mesadyn.field import ExactField, FieldSpec, make_field
from mesadyn.field import _moments as M
from mesadyn.field._haar import cue_moments, weingarten
from mesadyn.field._moments_rotation import build_rotation, plan_rotation
from mesadyn.field._quadrature import QuadratureRule
from mesadyn.model import active_mask, block, diagonal_init, gaussian_init, sequence_loss, unpack
from mesadyn.process import (
    gaussian,
    make_generator,
    sample_sequences,
    shifted,
)


def _check_quadrature(field: ExactField, rule: QuadratureRule, d: int, seed: int = 3) -> None:
    th, v = gaussian_init(d, 0.5, seed), gaussian_init(d, 0.5, seed + 1)
    L, g = field.loss_and_grad(th)
    Lq, gq, hq = rule.loss_grad_hvp(th, v)
    assert float(L) == pytest.approx(Lq, rel=1e-12)
    assert rel(g, gq) < 1e-12
    assert hq is not None and rel(field.hvp(th, v), hq) < 1e-12


# ---- the counting -------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "d", "T", "r"), [("gaussian", 2, 6, 1.0), ("ones", 2, 5, 0.8),
                                                   ("shifted", 3, 5, 1.0), ("sparse", 3, 7, 0.9)])
def test_the_general_counting_reproduces_the_papers_tensors(name, d, T, r):
    fam = FAMILIES[name](d)
    old = M.build(fam, M.plan(fam, T, r))
    new = build_rotation(fam, plan_rotation(fam, T, block=1, radius=r))
    n = 2 * d

    def dense(a):
        G = np.zeros((n * n,) * 3)
        np.add.at(G, (a["g_q"], a["g_a1"], a["g_a2"]), a["g_val"])
        return G

    scale = np.abs(old["g_val"]).max()
    np.testing.assert_allclose(dense(new), dense(old), rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(new["C"], old["C"], rtol=0, atol=1e-13 * np.abs(old["C"]).max())


# ---- real rotations: exact quadrature -----------------------------------------------------
@pytest.mark.parametrize("r", [1.0, 0.8])
@pytest.mark.parametrize("name", ["gaussian", "rademacher", "uniform", "sparse", "ones",
                                  "shifted", "mixture"])
def test_real_rotations_match_the_exact_quadrature_at_d2(name, r):
    fam = FAMILIES[name](2)
    T = 5
    _check_quadrature(ExactField(fam, T, rotation="real", radius=r, cache=False),
                      QuadratureRule(fam, T, rotation="real", radius=r), 2)


@pytest.mark.parametrize(("name", "r", "T"), [
    ("gaussian", 1.0, 4), ("sparse", 0.8, 4), ("rademacher", 0.8, 4), ("ones", 1.0, 4),
    pytest.param("gaussian", 0.8, 6, marks=pytest.mark.slow),
    pytest.param("shifted", 1.0, 5, marks=pytest.mark.slow),
])
def test_real_rotations_match_the_exact_quadrature_at_d4(name, r, T):
    fam = FAMILIES[name](4)
    _check_quadrature(ExactField(fam, T, rotation="real", radius=r, cache=False),
                      QuadratureRule(fam, T, rotation="real", radius=r), 4)


def test_the_diagonal_gradient_of_real_rotations_has_the_documented_kq23_block():
    """docs/data-models.md: at a = 0.3, b = 0.5 (gaussian, d = 2, T = 6) the gradient has
    W^KQ_23 = 1.3698 I; here also against the quadrature."""
    th = diagonal_init(2, 0.3, 0.5)
    g = ExactField(gaussian(2), 6, rotation="real", cache=False).grad(th)
    _, gq, _ = QuadratureRule(gaussian(2), 6, rotation="real").loss_grad_hvp(th)
    KQ, _ = unpack(g)
    assert torch.allclose(block(KQ, 2, 3), 1.3697916666666667 * torch.eye(2, dtype=torch.float64),
                          rtol=1e-12, atol=0)
    assert rel(g, gq) < 1e-12


# ---- noise: exact quadrature --------------------------------------------------------------
@pytest.mark.parametrize(("name", "d", "T", "r", "rot", "s"), [
    ("gaussian", 1, 4, 1.0, "diagonal", 0.5), ("shifted", 1, 4, 0.8, "diagonal", 0.7),
    ("rademacher", 2, 3, 0.8, "real", 0.6), ("ones", 2, 3, 1.0, "real", 0.4),
    ("gaussian", 2, 3, 1.0, "real", 0.3),
])
def test_noisy_fields_match_the_exact_quadrature(name, d, T, r, rot, s):
    fam = FAMILIES[name](d)
    _check_quadrature(ExactField(fam, T, rotation=rot, radius=r, noise=s, cache=False),
                      QuadratureRule(fam, T, rotation=rot, radius=r, noise=s), d)


# ---- Monte-Carlo within 4 standard errors --------------------------------------------------
def _monte_carlo(fam, T, th, v, n, seed, batches=40, **process):
    """Batch means (mean, se) of the loss, gradient and HVP over fresh sequences."""
    x = sample_sequences(fam, n, T, make_generator(seed), **process)
    th = th.detach().clone().requires_grad_(True)
    Ls, gs, hs = [], [], []
    for part in x.chunk(batches):
        L = sequence_loss(th, part).mean()
        (g,) = torch.autograd.grad(L, th, create_graph=True)
        (h,) = torch.autograd.grad(g @ v, th)
        Ls.append(float(L.detach()))
        gs.append(g.detach())
        hs.append(h)
    k = len(Ls)

    def stats(vals):
        S = torch.stack(vals) if isinstance(vals[0], torch.Tensor) else torch.tensor(vals)
        return S.mean(0), S.std(0) / math.sqrt(k)

    return stats(Ls), stats(gs), stats(hs)


def _within(exact, mean, se, nsig=4.0):
    act = torch.from_numpy(active_mask(int(round((exact.numel() / 18) ** 0.5)))) \
        if exact.ndim else None
    z = (exact - mean).abs() / se.clamp_min(1e-300)
    if act is not None:
        noisy = act & (se > 1e-12 * (1 + mean.abs()))
        assert float(z[noisy].max()) <= nsig, float(z[noisy].max())
        assert torch.allclose(exact[~noisy], mean[~noisy], atol=1e-10)
    else:
        assert float(z) <= nsig, float(z)


@pytest.mark.parametrize(("name", "d", "T", "process"), [
    ("gaussian", 2, 6, {"rotation": "real"}),
    ("rademacher", 4, 5, {"rotation": "real", "radius": 0.9}),
    ("gaussian", 2, 5, {"rotation": "diagonal", "noise": 0.4}),
    ("uniform", 3, 5, {"rotation": "diagonal", "noise": 0.3, "radius": 0.8}),
    ("gaussian", 2, 5, {"rotation": "real", "noise": 0.3}),
    ("sparse", 4, 4, {"rotation": "real", "noise": 0.5, "radius": 1.1}),
    ("gaussian", 2, 5, {"rotation": "haar"}),
    ("ones", 3, 4, {"rotation": "haar", "radius": 0.8}),
])
def test_exact_fields_within_4_se_of_monte_carlo(name, d, T, process):
    fam = FAMILIES[name](d)
    field = ExactField(fam, T, cache=False, **process)
    th, v = gaussian_init(d, 0.4, 7 + d + T), gaussian_init(d, 0.4, 8 + d)
    (Lm, Ls), (gm, gs), (hm, hs) = _monte_carlo(fam, T, th, v, 60_000, 5 + T, **process)
    L, g = field.loss_and_grad(th)
    _within(L, Lm, Ls)
    _within(g, gm, gs, 4.5)  # the largest of up to 96 coordinates
    _within(field.hvp(th, v), hm, hs, 4.5)


# ---- Haar: the Weingarten function and the CUE moments ------------------------------------
@pytest.mark.parametrize("d", [2, 3, 4])
def test_weingarten_gives_the_moments_of_one_haar_entry(d):
    """``E|U_11|^{2n} = n! (d−1)! / (d−1+n)!`` is ``Σ_{σ,τ} Wg(στ⁻¹)`` (also for d < n)."""
    for n in (2, 4, 6):
        _, W = weingarten(n, d)
        assert W.sum() == pytest.approx(math.factorial(n) * math.factorial(d - 1)
                                        / math.factorial(d - 1 + n), rel=1e-12)


@pytest.mark.parametrize("d", [2, 3, 4])
def test_cue_moments_give_the_trace_moments(d):
    """``E|tr Uⁿ|² = min(n, d)`` (Diaconis–Shahshahani) from the two-eigenvalue moments."""
    F = cue_moments(d, 2)
    for n in range(1, 2 * d):
        pair = F.get((n, -n), 0.0)
        assert d + d * (d - 1) * pair == pytest.approx(min(n, d), abs=1e-12)


# ---- reach and bad input ----------------------------------------------------------------
@pytest.mark.parametrize(("kw", "match"), [
    ({"rotation": "haar", "family": gaussian(6)}, r"d <= 5, got d=6"),
    ({"rotation": "haar", "T": 1001}, r"T <= 1000, got T=1001"),
    ({"rotation": "haar", "noise": 0.1}, r"rotation=haar with noise=0.1"),
    ({"rotation": "real", "family": gaussian(3)}, r"even d, got d=3"),
    ({"noise": -0.5}, r"noise must be >= 0, got noise=-0.5"),
    ({"noise": float("nan")}, r"noise"),
    ({"noise": float("inf"), "rotation": "real"}, r"noise"),
])
def test_bad_exact_specs_are_one_line_errors(kw, match):
    fam = kw.pop("family", gaussian(2))
    T = kw.pop("T", 5)
    for make in (lambda: FieldSpec("exact", fam, T, **kw),
                 lambda: ExactField(fam, T, cache=False, **kw)):
        with pytest.raises(MesadynError, match=match) as info:
            make()
        assert "\n" not in str(info.value)


@pytest.mark.parametrize(("args", "names"), [
    (["--rotation", "real", "--d", "3"], "d=3"),
    (["--noise", "-0.1", "--d", "2"], "noise=-0.1"),
    (["--noise", "nan", "--d", "2"], "noise"),
    (["--rotation", "haar", "--d", "6"], "d=6"),
    (["--rotation", "haar", "--d", "2", "--noise", "0.2"], "noise=0.2"),
])
def test_bad_exact_models_on_the_command_line_are_one_line_and_exit_2(capsys, args, names):
    try:
        code = main(["integrate", "--field", "exact", "--T", "5", "--t-end", "1", *args])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("mesadyn: error:"), err
    assert names in err[0], err


# ---- cache and description ---------------------------------------------------------------
def test_new_fields_are_cached_per_process(tmp_path):
    fam = gaussian(2)
    spec = {"rotation": "real", "noise": 0.2}
    a = ExactField(fam, 5, cache_dir=tmp_path, **spec)
    b = ExactField(fam, 5, cache_dir=tmp_path, **spec)
    c = ExactField(fam, 5, cache_dir=tmp_path)  # the paper's process: another file
    assert a.cache_status.startswith("built") and b.cache_status == "hit"
    assert c.cache_status.startswith("built") and c.cache_path != a.cache_path
    th = gaussian_init(2, 0.3, 1)
    assert torch.equal(a.loss_and_grad(th)[1], b.loss_and_grad(th)[1])
    assert a.describe()["rotation"] == "real" and a.describe()["noise"] == 0.2
    assert "rotation" not in c.describe()
    f = make_field(FieldSpec("exact", fam, 5, rotation="haar"), reuse=False, cache_dir=tmp_path)
    assert isinstance(f, ExactField) and f.rotation == "haar"


@pytest.mark.parametrize("process", [{"rotation": "real", "noise": 0.3},
                                     {"rotation": "haar", "radius": 0.9}])
def test_closed_forms_match_autograd_of_the_torch_loss(process):
    """The contractions assume ``G_{J,J'} = G_{J',J}``: gradient and Hessian against autograd."""
    f = ExactField(shifted(2, 0.3, 0.9), 5, cache=False, **process)
    th = gaussian_init(2, 0.5, 4).requires_grad_(True)
    (g,) = torch.autograd.grad(f.loss(th), th, create_graph=True)
    H = torch.stack([torch.autograd.grad(g[k], th, retain_graph=True)[0]
                     for k in range(th.numel())])
    assert rel(f.grad(th.detach()), g.detach()) < 1e-12
    assert rel(f.hessian(th.detach()), H) < 1e-12
