"""Spec parsing and validation: every bad spec is rejected, with a clear message, before work."""

from __future__ import annotations

import numpy as np
import pytest

from mesadyn.errors import MesadynError
from mesadyn.sweep import load_spec, parse_spec
from mesadyn.sweep.spec import expand_axis

CMD = "sweep_fixture_cmds:counted"


def test_theory_spec_points_and_defaults() -> None:
    spec = parse_spec({"command": "theory", "options": {"x1": "gaussian"},
                       "axes": {"T": [3, 10], "d": {"start": 1, "stop": 3}}})
    assert spec.target == "mesadyn.cli.theory:compute"
    assert spec.dims == ("T", "d") and spec.shape == (2, 3)
    pts = spec.points()
    assert [p.coords for p in pts][:4] == [{"T": 3, "d": 1}, {"T": 3, "d": 2}, {"T": 3, "d": 3},
                                           {"T": 10, "d": 1}]
    # defaults of compute() fill the rest; every point hash is distinct
    assert pts[0].options == {"x1": "gaussian", "sigma": 1.0, "scale": 1.0, "d": 1, "T": 3,
                              "seed": 1}
    assert len({p.hash for p in pts}) == 6


def test_cli_style_names_flags_and_int_for_float() -> None:
    spec = parse_spec({"command": f"{CMD} --tag=b", "options": {"--y": 2},
                       "axes": {"x": [1, 2]}})
    assert spec.options == {"tag": "b", "y": 2.0} and isinstance(spec.options["y"], float)
    # the same point written two ways has the same hash
    other = parse_spec({"command": CMD, "options": {"y": 2.0, "tag": "b"},
                        "axes": {"x": [1, 2]}})
    assert [p.hash for p in spec.points()] == [p.hash for p in other.points()]
    assert spec.hash == other.hash


def test_string_templates_per_point() -> None:
    spec = parse_spec({"command": CMD, "options": {"tag": "run_x{x}_y{y:.1f}"},
                       "axes": {"x": [1, 2], "y": [0.5]}})
    assert [p.options["tag"] for p in spec.points()] == ["run_x1_y0.5", "run_x2_y0.5"]
    with pytest.raises(MesadynError, match=r"uses \{z\}, which is not another option"):
        parse_spec({"command": CMD, "options": {"tag": "a{z}"}, "axes": {"x": [1]}})
    with pytest.raises(MesadynError, match="is a bad template"):
        parse_spec({"command": CMD, "options": {"tag": "a{x"}, "axes": {"x": [1]}})


def test_integrate_reduced_spelling() -> None:
    spec = parse_spec({"command": "integrate  --reduced", "options": {"t-end": 5},
                       "axes": {"a0": [0.1, 0.5]}})
    assert spec.target == "mesadyn.cli.integrate:compute" and spec.command == "integrate --reduced"
    assert spec.options == {"reduced": True, "t_end": 5.0}
    with pytest.raises(MesadynError, match="reduced is set both as a command flag and as an"):
        parse_spec({"command": "integrate --reduced", "options": {"reduced": False},
                    "axes": {"a0": [0.1]}})
    with pytest.raises(MesadynError, match="value 'fast' is a str, but rtol takes a float"):
        parse_spec({"command": "integrate --rtol=fast", "axes": {"a0": [0.1]}})


def test_zip_mode() -> None:
    spec = parse_spec({"command": CMD, "mode": "zip", "axes": {"x": [1, 2, 3], "y": [4, 5, 6]}})
    assert spec.dims == ("point",) and spec.shape == (3,)
    assert [p.coords for p in spec.points()] == [{"x": 1, "y": 4.0}, {"x": 2, "y": 5.0},
                                                 {"x": 3, "y": 6.0}]


def test_ranges_match_numpy() -> None:
    assert expand_axis("d", {"start": 1, "stop": 12}) == list(range(1, 13))
    assert expand_axis("d", {"start": 2, "stop": 11, "step": 3}) == [2, 5, 8, 11]
    np.testing.assert_allclose(expand_axis("s", {"start": 0.5, "stop": 2.0, "num": 7}),
                               np.linspace(0.5, 2.0, 7), rtol=0, atol=1e-15)
    np.testing.assert_allclose(
        expand_axis("s", {"start": 1e-3, "stop": 1e-1, "num": 5, "log": True}),
        np.geomspace(1e-3, 1e-1, 5), rtol=1e-14)
    np.testing.assert_allclose(expand_axis("s", {"start": 0.1, "stop": 0.5, "step": 0.1}),
                               np.arange(1, 6) * 0.1, rtol=1e-14)
    assert expand_axis("s", {"start": 3, "stop": 1, "step": -1}) == [3, 2, 1]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"command": "theory", "axes": {"T": [3], "bogus": [1]}},
         "unknown option 'bogus' for this command; valid options: T, d, scale, seed, sigma, x1"),
        ({"command": "theory", "axes": {"T": []}}, "axis T is empty"),
        ({"command": "theory", "axes": {"T": {"start": 5, "stop": 3}}}, "axis T is empty"),
        ({"command": "theory", "axes": {"d": [1, 2.5]}},
         "value 2.5 is a float, but d takes a int"),
        ({"command": "theory", "axes": {"x1": [1]}}, "value 1 is a int, but x1 takes a str"),
        ({"command": "theory", "options": {"sigma": "big"}, "axes": {"T": [3]}},
         "value 'big' is a str, but sigma takes a float"),
        ({"command": "theory", "axes": {"d": [True]}}, "value True is a bool, but d takes a int"),
        ({"command": "nope", "axes": {"T": [3]}}, "unknown command 'nope'"),
        ({"command": "theory"}, "no [axes]"),
        ({"axes": {"T": [3]}}, "missing 'command'"),
        ({"command": "theory", "axes": {"T": [3]}, "colour": 1}, "unknown key(s) colour"),
        ({"command": "theory", "mode": "cross", "axes": {"T": [3]}}, "mode must be one of"),
        ({"command": "theory", "mode": "zip", "axes": {"T": [3, 4], "d": [1]}},
         "equal length, got T: 2, d: 1"),
        ({"command": "theory", "options": {"T": 3}, "axes": {"T": [4]}},
         "both a fixed option and an axis"),
        ({"command": "theory", "axes": {"T": [3, 3]}}, "repeats a value"),
        ({"command": "theory", "axes": {"T": {"start": 3, "stop": 9, "step": 0}}},
         "step must be a non-zero number"),
        ({"command": "theory", "axes": {"T": {"start": 3}}}, "needs start and stop"),
        ({"command": "theory", "axes": {"T": {"start": 3, "stop": 5, "every": 1}}},
         "unknown range key(s) every"),
        ({"command": "theory", "axes": {"T": 3}}, "must be a list or a range table"),
        ({"command": "theory", "options": {"T": [3]}, "axes": {"d": [1]}}, "not a scalar"),
        ({"command": "theory", "axes": {"sigma": [float("nan")]}}, "must be finite"),
        ({"command": "mesadyn.nonexistent_mod:compute", "axes": {"x": [1]}},
         "is not available"),
    ],
)
def test_bad_specs(raw: dict, message: str) -> None:
    with pytest.raises(MesadynError) as info:
        parse_spec(raw)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_load_spec_file_errors(tmp_path) -> None:
    with pytest.raises(MesadynError, match="spec file not found"):
        load_spec(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("command = \n")
    with pytest.raises(MesadynError, match="is not valid TOML"):
        load_spec(bad)
    good = tmp_path / "good.toml"
    good.write_text('command = "theory"\n[axes]\nT = [3, 4]\n')
    assert load_spec(good, overrides={"sigma": 2}).options == {"sigma": 2.0}
