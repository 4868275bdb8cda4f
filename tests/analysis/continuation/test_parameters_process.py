"""Continuation parameters within a process (radius, rotation, noise): the field at ``p`` is the
process's exact field, ``L`` is the polynomial in ``p`` the parameter declares (checked by
predicting the exact loss and gradient at a further ``p``), the default start is a fixed point of
the exact field there, and bad processes are refused naming the value."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.analysis.continuation import NoiseScale, Radius, Sigma, make_parameter
from mesadyn.errors import MesadynError
from mesadyn.field import ExactField, FieldKind, FieldSpec
from mesadyn.model import gaussian_init
from mesadyn.process import gaussian, iid
from mesadyn.theory import constants

THETA = gaussian_init(2, 0.4, 3)  # a dense θ: every entry of every tensor contributes


def _exact(fam, T, **proc) -> ExactField:
    return ExactField(fam, T, cache=False, **proc)


def test_the_spec_carries_the_process():
    par = make_parameter("sigma", gaussian(2), 6, radius=0.9, rotation="real", noise=0.2)
    assert isinstance(par, Sigma)
    assert par.spec(1.3) == FieldSpec(FieldKind.EXACT, gaussian(2, 1.3), 6, radius=0.9,
                                      rotation="real", noise=0.2)
    desc = par.describe()
    assert (desc["radius"], desc["rotation"], desc["noise"]) == (0.9, "real", 0.2)
    assert "rotation" not in make_parameter("sigma", gaussian(2), 6).describe()
    r = make_parameter("radius", gaussian(2), 6, radius=0.8, rotation="real")
    assert isinstance(r, Radius) and r.value() == 0.8
    assert r.spec(0.7) == FieldSpec(FieldKind.EXACT, gaussian(2), 6, radius=0.7, rotation="real")
    s = make_parameter("noise", gaussian(2), 6, noise=0.25, rotation="real")
    assert isinstance(s, NoiseScale) and s.value() == 0.25 and s.describe()["noise"] == "p"
    assert s.spec(0.4) == FieldSpec(FieldKind.EXACT, gaussian(2), 6, rotation="real", noise=0.4)
    t = make_parameter("T", gaussian(2), 6, rotation="real", noise=0.1)
    assert t.spec(7.0) == FieldSpec(FieldKind.EXACT, gaussian(2), 7, rotation="real", noise=0.1)


def _fit_predict(par, nodes, powers, p_new):
    """Loss and gradient at ``p_new`` from the exact fields at ``nodes`` over ``powers``."""
    th = torch.as_tensor(THETA)
    V = np.array([[x**k for k in powers] for x in nodes])
    w = np.linalg.solve(V.T, np.array([p_new**k for k in powers]))
    fields = [par.build(float(x)) for x in nodes]
    loss = sum(wi * float(f.loss(th)) for wi, f in zip(w, fields, strict=True))
    grad = sum(wi * f.grad(th).numpy() for wi, f in zip(w, fields, strict=True))
    return loss, grad


@pytest.mark.parametrize(("name", "proc", "p_new"), [
    ("noise", {"rotation": "real"}, 0.55),
    ("noise", {}, 0.9),
    ("sigma", {"rotation": "real", "noise": 0.3}, 1.4),
    ("sigma", {"noise": 0.3, "radius": 0.9}, 0.6),
    ("m4", {"rotation": "real", "noise": 0.3}, 2.2),
])
def test_the_declared_powers_predict_the_exact_field(name, proc, p_new):
    fam = iid(2, 1.0, 2.5, 10.0) if name == "m4" else gaussian(2)
    par = make_parameter(name, fam, 5, **proc)
    powers = par.powers
    assert powers is not None
    lo = 0.2 if name == "noise" else 0.7 if name == "sigma" else 1.6
    nodes = lo + 0.15 * np.arange(len(powers))
    loss, grad = _fit_predict(par, nodes, powers, p_new)
    f = par.build(p_new)
    want_l, want_g = float(f.loss(torch.as_tensor(THETA))), f.grad(torch.as_tensor(THETA)).numpy()
    assert loss == pytest.approx(want_l, rel=1e-9)
    np.testing.assert_allclose(grad, want_g, rtol=1e-8, atol=1e-9 * np.abs(want_g).max())


def test_without_the_noise_power_the_fit_fails():
    """With noise, L in σ has a σ⁰ term: the noiseless powers (2, 4, 6) miss it."""
    par = make_parameter("sigma", gaussian(2), 5, rotation="real", noise=0.3)
    assert par.powers == (0, 2, 4, 6)
    assert make_parameter("sigma", gaussian(2), 5, rotation="real").powers == (2, 4, 6)
    loss, _ = _fit_predict(par, [0.7, 0.85, 1.0], (2, 4, 6), 1.4)
    want = float(par.build(1.4).loss(torch.as_tensor(THETA)))
    assert abs(loss - want) > 1e-3 * abs(want)


@pytest.mark.parametrize(("name", "p", "proc"), [
    ("sigma", 1.2, {"rotation": "real"}),
    ("sigma", 0.9, {"rotation": "real", "noise": 0.3, "radius": 0.95}),
    ("noise", 0.4, {"rotation": "real"}),
    ("noise", 0.4, {}),
    ("radius", 0.9, {"noise": 0.2}),
    ("sigma", 1.1, {"rotation": "haar"}),
])
def test_the_default_start_is_a_fixed_point_of_the_exact_field(name, p, proc):
    par = make_parameter(name, gaussian(2), 6, **proc)
    th = par.balanced_point(p)
    spec = par.spec(p)
    f = ExactField(spec.family, spec.T, radius=spec.radius, rotation=spec.rotation,
                   noise=spec.noise, cache=False)
    assert float(f.grad(torch.as_tensor(th)).abs().max()) < 1e-12
    if proc.get("rotation") != "real":  # the diagonal's balanced point a = b = √ab*
        from mesadyn.model import diagonal_entries
        from mesadyn.theory import haar_constants

        a, b = diagonal_entries(th)
        ab = (haar_constants(spec.family, 6, radius=spec.radius).ab_star
              if proc.get("rotation") == "haar"
              else constants(spec.family, 6, radius=spec.radius, noise=spec.noise).ab_star)
        np.testing.assert_allclose([a[0], b[0]], [np.sqrt(ab)] * 2, rtol=1e-14)


@pytest.mark.parametrize(("args", "kw", "names"), [
    (("noise", gaussian(2), 6), {"noise": -0.1}, "noise=-0.1"),
    (("sigma", gaussian(3), 6), {"rotation": "real"}, "d=3"),
    (("noise", gaussian(2), 6), {"rotation": "haar"}, "noise"),
    (("sigma", gaussian(2), 6), {"rotation": "spiral"}, "spiral"),
    (("sigma", gaussian(2), 6), {"radius": 0.0}, "radius=0"),
])
def test_bad_processes_are_refused_naming_the_value(args, kw, names):
    with pytest.raises(MesadynError, match=names) as info:
        make_parameter(*args, **kw)
    assert "\n" not in str(info.value)


def test_the_noise_domain_starts_at_zero():
    par = make_parameter("noise", gaussian(2), 6)
    assert par.check(0.0) == 0.0
    with pytest.raises(MesadynError, match="-0.5"):
        par.check(-0.5)
