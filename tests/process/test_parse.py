"""The CLI's family grammar (mesadyn/process/parse.py): families by name and from the option
values, mixtures written ``p:name(key=value;...)``, and one-line errors naming the bad value."""

from __future__ import annotations

import numpy as np
import pytest

from mesadyn.errors import MesadynError
from mesadyn.process import (
    FAMILIES,
    FamilyName,
    family,
    gaussian,
    make_generator,
    mixture,
    moments,
    ones,
    sample,
    shifted,
)


@pytest.mark.parametrize("name", FAMILIES)
def test_family_by_name(name):
    f = family(name, 3, sigma=2.0, scale=0.5)
    assert f.name == name and f.d == 3


def test_family_from_option_values():
    assert family("shifted", 3, sigma=0.5, mu=0.2) == shifted(3, 0.2, 0.5)
    assert family("moments", 2, moments="0,1,0,3,0,15") == moments(2, [0, 1, 0, 3, 0, 15])
    per = family("moments", 2, moments="0,1,0,3,0,15; 0,1,0,1,0,1")
    assert per == moments(2, [[0, 1, 0, 3, 0, 15], [0, 1, 0, 1, 0, 1]])
    mix = family("mixture", 3, mixture="0.3:ones,0.7:gaussian", sigma=2.0)
    assert mix == mixture([(0.3, ones(3)), (0.7, gaussian(3, 2.0))])
    mix2 = family("mixture", 2, mixture="0.5:gaussian(sigma=0.5),0.5:shifted(mu=1;sigma=0.1)")
    assert mix2 == mixture([(0.5, gaussian(2, 0.5)), (0.5, shifted(2, 1.0, 0.1))])
    for name in FamilyName:
        kw = {"moments": "0,1,0,3,0,15"} if name == "moments" else {}
        if name == "mixture":
            kw = {"mixture": "1:uniform"}
        f = family(name, 3, sigma=2.0, scale=0.5, mu=0.0, **kw)
        assert f.d == 3 and isinstance(f.describe()["kind"], str)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: shifted(3, 0.0, -1.0), "sigma=-1.0"),
    (lambda: shifted(3, float("nan"), 1.0), "mu"),
    (lambda: mixture([(1.2, ones(2)), (-0.2, gaussian(2))]), "p=1.2"),
    (lambda: mixture([(0.5, ones(2)), (0.4, gaussian(2))]), "sum to 1"),
    (lambda: mixture([(0.5, ones(2)), (0.5, gaussian(3))]), "share d"),
    (lambda: family("mixture", 2, mixture="0.5:ones,0.5:cauchy"), "cauchy"),
    (lambda: family("mixture", 2, mixture="half:ones"), "'half'"),
    (lambda: family("mixture", 2, mixture="1:gaussian(tau=2)"), "'tau'"),
    (lambda: family("mixture", 2), "components"),
    (lambda: family("gaussian", 2, mu=0.5), "mu=0.5"),
    (lambda: family("moments", 2), "needs its moments"),
    (lambda: family("moments", 2, moments="0,1,0,3"), "6 numbers"),
    (lambda: moments(3, np.ones((2, 6))), r"\(3, 6\)"),
    (lambda: sample(gaussian(2), 4, 5, make_generator(0), "cpu", radius=0.0), "radius=0.0"),
])
def test_bad_new_input_raises(call, match):
    with pytest.raises(MesadynError, match=match):
        call()


@pytest.mark.parametrize(("kw", "needle"), [
    ({"name": "moments", "moments": "0,1,0,3,0,15,"}, "an empty entry"),
    ({"name": "moments", "moments": "0,1,,0,3,0,15"}, "an empty entry"),
    ({"name": "moments", "moments": "0,1,0,3,0,15;"}, "an empty entry"),
    ({"name": "gaussian", "moments": "0,1,0,3,0,15"}, "apply to the moments family"),
    ({"name": "ones", "moments": "0,1,0,3,0,15"}, "not 'ones'"),
    ({"name": "mixture", "mixture": "0.5:gaussian(sigma=0.5;sigma=2),0.5:ones"},
     "sigma is given twice"),
    ({"name": "mixture", "mixture": "0.5:gaussian,0.5:ones", "moments": "0,1,0,3,0,15"},
     "no mixture component is the moments family"),
    ({"name": "mixture", "mixture": [(0.5, "ones"), (0.5, "gaussian")]},
     "mixture must be text"),
    ({"name": np.array(["gaussian"]), }, "unknown family"),
    ({"name": "gaussian", "mu": np.array([0.0, 1.0])}, "mu must be a number"),
])
def test_an_option_is_refused_or_used_never_reinterpreted(kw, needle):
    """A trailing comma in --moments passed (the empty entry dropped); --moments was ignored
    with --x1 gaussian while --mu and --mixture were refused there; a parameter given twice in
    a mixture component took the last value; a mixture as a list of tuples raised TypeError."""
    name = kw.pop("name")
    with pytest.raises(MesadynError, match=needle):
        family(name, 2, **kw)


def test_a_moments_component_of_a_mixture_uses_the_moments():
    f = family("mixture", 2, mixture="0.5:moments,0.5:ones", moments="0,2,0,12,0,120")
    assert [c.name for _, c in f.components] == ["moments", "ones"]
