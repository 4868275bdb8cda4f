"""Spec parsing and validation: every bad spec is rejected, with a clear message, before work.

A spec is data: it names mesadyn's workflows; any other Python function needs ``allow_code``,
and nothing the spec names is imported while it is validated.
"""

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
    assert spec.target == "workflow:theory" and spec.is_workflow and not spec.allow_code
    assert spec.dims == ("T", "d") and spec.shape == (2, 3)
    pts = spec.points()
    assert [p.coords for p in pts][:4] == [{"T": 3, "d": 1}, {"T": 3, "d": 2}, {"T": 3, "d": 3},
                                           {"T": 10, "d": 1}]
    # defaults of the workflow's Config fill the rest; every point hash is distinct
    assert pts[0].options == {"x1": "gaussian", "sigma": 1.0, "scale": 1.0, "d": 1, "T": 3,
                              "seed": 1, "mu": 0.0, "moments": None, "mixture": None,
                              "radius": 1.0, "rotation": "diagonal", "noise": 0.0,
                              "model": "linear", "layers": 1, "out": None}
    assert len({p.hash for p in pts}) == 6


def test_an_integer_beyond_int64_is_refused_naming_it() -> None:
    # found by the fuzz suite: T = 2**70 reached the run file's int64 column as an object
    with pytest.raises(MesadynError, match=r"T: value 1180591620717411303424 does not fit"):
        parse_spec({"command": "theory", "axes": {"T": [10, 2**70]}})
    assert parse_spec({"command": "theory", "axes": {"T": [10, 2**40]}}).shape == (2,)


def test_cli_style_names_flags_and_int_for_float() -> None:
    spec = parse_spec({"command": "integrate --reduced --x1=ones", "options": {"--sigma-w": 1},
                       "axes": {"a0": [1, 2]}})
    assert spec.options == {"reduced": True, "x1": "ones", "sigma_w": 1.0}
    assert isinstance(spec.options["sigma_w"], float)
    # the same point written two ways has the same hash
    other = parse_spec({"workflow": "integrate", "options": {"sigma_w": 1.0, "x1": "ones",
                                                             "reduced": True},
                        "axes": {"a0": [1.0, 2.0]}})
    assert [p.hash for p in spec.points()] == [p.hash for p in other.points()]
    assert spec.hash == other.hash
    # opted-in code: names are made identifiers, values passed as given (no signature known)
    code = parse_spec({"command": f"{CMD} --tag=b", "options": {"--y": 2},
                       "axes": {"x": [1, 2]}}, allow_code=True)
    assert code.options == {"tag": "b", "y": 2} and code.allow_code and not code.is_workflow


def test_string_templates_per_point() -> None:
    spec = parse_spec({"command": CMD, "options": {"tag": "run_x{x}_y{y:.1f}"},
                       "axes": {"x": [1, 2], "y": [0.5]}}, allow_code=True)
    assert [p.options["tag"] for p in spec.points()] == ["run_x1_y0.5", "run_x2_y0.5"]
    with pytest.raises(MesadynError, match=r"uses \{z\}, which is not another option"):
        parse_spec({"command": CMD, "options": {"tag": "a{z}"}, "axes": {"x": [1]}},
                   allow_code=True)
    with pytest.raises(MesadynError, match="is a bad template"):
        parse_spec({"command": CMD, "options": {"tag": "a{x"}, "axes": {"x": [1]}},
                   allow_code=True)
    flows = parse_spec({"workflow": "integrate", "options": {"reduced": True,
                                                            "out": "traj/T{T}_a{a0}.nc"},
                        "axes": {"T": [3, 10], "a0": [0.5]}})
    assert [p.options["out"] for p in flows.points()] == ["traj/T3_a0.5.nc", "traj/T10_a0.5.nc"]
    assert flows.output_options == ["out"]


def test_integrate_reduced_spelling() -> None:
    spec = parse_spec({"command": "integrate  --reduced", "options": {"t-end": 5},
                       "axes": {"a0": [0.1, 0.5]}})
    assert spec.target == "workflow:integrate" and spec.command == "integrate --reduced"
    assert spec.options == {"reduced": True, "t_end": 5.0}
    with pytest.raises(MesadynError, match="reduced is set both as a command flag and as an"):
        parse_spec({"command": "integrate --reduced", "options": {"reduced": False},
                    "axes": {"a0": [0.1]}})
    with pytest.raises(MesadynError, match="value 'fast' is a str, but rtol takes a float"):
        parse_spec({"command": "integrate --rtol=fast", "axes": {"a0": [0.1]}})


def test_zip_mode() -> None:
    spec = parse_spec({"workflow": "theory", "mode": "zip",
                       "axes": {"d": [1, 2, 3], "sigma": [4, 5, 6]}})
    assert spec.dims == ("point",) and spec.shape == (3,) and spec.size == 3
    assert [p.coords for p in spec.points()] == [{"d": 1, "sigma": 4.0}, {"d": 2, "sigma": 5.0},
                                                 {"d": 3, "sigma": 6.0}]


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
         "unknown option 'bogus' for this workflow; valid options: T, d, layers, mixture, model, "
         "moments, mu, noise, out, radius, rotation, scale, seed, sigma, x1"),
        ({"command": "theory", "axes": {"T": []}}, "axis T is empty"),
        ({"command": "theory", "axes": {"T": {"start": 5, "stop": 3}}}, "axis T is empty"),
        ({"command": "theory", "axes": {"d": [1, 2.5]}},
         "value 2.5 is a float, but d takes a int"),
        ({"command": "theory", "axes": {"x1": [1]}}, "value 1 is a int, but x1 takes a str"),
        ({"command": "theory", "options": {"sigma": "big"}, "axes": {"T": [3]}},
         "value 'big' is a str, but sigma takes a float"),
        ({"command": "theory", "axes": {"d": [True]}}, "value True is a bool, but d takes a int"),
        ({"command": "nope", "axes": {"T": [3]}}, "unknown workflow 'nope'"),
        ({"workflow": "theory", "command": "theory", "axes": {"T": [3]}}, "not both"),
        ({"workflow": "theory", "axes": {"T": [1, 3]}}, "point T=1: T must be >= 3"),
        ({"workflow": "theory", "axes": {"T": {"start": 3, "stop": 1e300}}}, "has 1e+300 values"),
        ({"command": "theory"}, "no [axes]"),
        ({"axes": {"T": [3]}}, "missing 'workflow'"),
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
         "names a Python function; a sweep runs only mesadyn's workflows"),
        ({"command": "os:system", "axes": {"command": ["touch /tmp/pwned"]}}, "--allow-code"),
        ({"workflow": "integrate", "options": {"out": "/tmp/x.nc"}, "axes": {"T": [3]}},
         "must be a path relative to the sweep's --out folder"),
        ({"workflow": "integrate", "options": {"out": "../T{T}.nc"}, "axes": {"T": [3]}},
         "climbs out of the sweep's --out folder"),
        ({"workflow": "stability", "axes": {"plot": ["a.png", "sub/../../b.png"]}},
         "climbs out"),
        ({"workflow": "integrate", "options": {"out": "~/x.nc"}, "axes": {"T": [3]}},
         "relative to the sweep's --out"),
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
    (tmp_path / "dir.toml").mkdir()
    with pytest.raises(MesadynError, match="not a regular file"):
        load_spec(tmp_path / "dir.toml")


# ---- a spec is data, not code ----------------------------------------------------------------
def _plant_module(tmp_path, monkeypatch, name: str) -> tuple:
    """A module that records its import and its calls in files (a stand-in for malice)."""
    imported, called = tmp_path / f"{name}.imported", tmp_path / f"{name}.called"
    (tmp_path / f"{name}.py").write_text(
        "from pathlib import Path\n"
        f"Path({str(imported)!r}).write_text('imported')\n"
        "def run(**kw):\n"
        f"    Path({str(called)!r}).write_text(repr(kw))\n"
        "    return {'ok': 1}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return imported, called


def test_validation_imports_and_runs_nothing(tmp_path, monkeypatch) -> None:
    imported, called = _plant_module(tmp_path, monkeypatch, "planted_spec_mod")
    raw = {"command": "planted_spec_mod:run", "axes": {"x": [1]}}
    with pytest.raises(MesadynError, match="--allow-code"):
        parse_spec(raw)
    spec = parse_spec(raw, allow_code=True)  # opted in: still nothing imported while validating
    assert spec.points()[0].options == {"x": 1}
    assert not imported.exists() and not called.exists()
    with pytest.raises(MesadynError, match="package.module:function"):
        parse_spec({"command": "os:system; rm -rf /", "axes": {"x": [1]}}, allow_code=True)


def test_os_system_spec_is_refused_by_the_cli(tmp_path, capsys) -> None:
    from mesadyn.cli import main

    marker = tmp_path / "pwned"
    spec = tmp_path / "evil.toml"
    spec.write_text(f'command = "os:system"\n[axes]\ncommand = ["touch {marker}"]\n')
    with pytest.raises(SystemExit) as info:
        main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--workers", "0", "--json"])
    out = capsys.readouterr()
    assert info.value.code == 2 and out.out == "" and "--allow-code" in out.err
    assert not marker.exists() and not (tmp_path / "o").exists()


def test_huge_sweeps_are_refused_without_memory_error() -> None:
    import time

    t0 = time.perf_counter()
    axes = {"T": {"start": 3, "stop": 10_002}, "d": {"start": 1, "stop": 10_000}}
    with pytest.raises(MesadynError, match="at most"):  # 1e8 points
        parse_spec({"workflow": "theory", "axes": axes})
    with pytest.raises(MesadynError, match="has 1e\\+08 values"):
        parse_spec({"workflow": "theory", "axes": {"sigma": {"start": 1, "stop": 2,
                                                              "num": 100_000_000}}})
    assert time.perf_counter() - t0 < 5  # refused from the axis lengths, nothing expanded
