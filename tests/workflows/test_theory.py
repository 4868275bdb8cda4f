"""``mesadyn.workflows.theory``: Config validation, the closed forms, ``to_dict`` == CLI JSON."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from mesadyn.errors import MesadynError
from mesadyn.workflows import theory


def _harmonic(n: int) -> Fraction:
    return sum((Fraction(1, k) for k in range(1, n + 1)), Fraction(0))


@pytest.mark.parametrize(("kw", "needle"), [
    ({"x1": "cauchy"}, "cauchy"),
    ({"T": 2}, "T=2"),
    ({"d": 0}, "d=0"),
    ({"sigma": -1.0}, "sigma"),
    ({"scale": 0.0, "x1": "sparse"}, "scale"),
    ({"seed": -1}, "seed=-1"),
    ({"seed": 2**70}, "seed="),
])
def test_config_rejects_bad_values(kw, needle):
    with pytest.raises(MesadynError, match=needle):
        theory.Config(**kw)


def test_config_is_frozen_and_hashable():
    cfg = theory.Config(x1="ones", d=3, T=20)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.T = 5  # type: ignore[misc]
    assert hash(cfg) == hash(theory.Config(x1="ones", d=3, T=20))


@pytest.mark.parametrize(("kw", "k"), [
    ({"x1": "gaussian", "sigma": 0.5, "d": 4, "T": 12},
     (3 * Fraction(1, 2) ** 4, 15 * Fraction(1, 2) ** 6, 3 * 3 * Fraction(1, 2) ** 6)),
    ({"x1": "ones", "d": 3, "T": 20}, (Fraction(1), Fraction(1), Fraction(2))),
    ({"x1": "uniform", "d": 2, "T": 9}, (Fraction(1, 5), Fraction(1, 7), Fraction(1, 15))),
])
def test_constants_against_exact_rationals(kw, k):
    """c1 = (T−2)κ2 + H_{T−2}κ3, c2 = (T−2)κ1 (Lemma 5.3 / A.5) in exact rational arithmetic."""
    res = theory.run(theory.Config(**kw))
    T = kw["T"]
    c1 = (T - 2) * k[1] + _harmonic(T - 2) * k[2]
    c2 = (T - 2) * k[0]
    assert res.c1 == pytest.approx(float(c1), rel=1e-14)
    assert res.c2 == pytest.approx(float(c2), rel=1e-14)
    assert res.ab_star == pytest.approx(float(c2 / c1), rel=1e-14)
    assert res.ab_limit == pytest.approx(float(k[0] / k[1]), rel=1e-14)
    assert res.status == "ok"


def test_to_dict_is_the_cli_json(cli_json):
    res = theory.run(theory.Config(x1="sparse", scale=0.5, d=3, T=7))
    assert res.to_dict() == cli_json("theory", "--x1", "sparse", "--scale", "0.5", "--d", "3",
                                     "--T", "7")
    assert res.theorem == "Theorem 4.1"
    assert theory.run(theory.Config(x1="ones", d=3, T=20)).theorem.startswith("Theorem 4.3")
