"""``mesadyn.workflows.portrait``: Config validation (format, size caps), the output path
checked before drawing, ``to_dict`` == the CLI's ``--json``, the overlays' outcomes, and the
figure that is its own run file (provenance in its metadata, rebuilt and rerun from it)."""

from __future__ import annotations

import dataclasses

import pytest

from mesadyn.errors import MesadynError
from mesadyn.plots import DEFAULT_INITS, MAX_DPI
from mesadyn.workflows import portrait

FAST = {"density": 0.3, "dpi": 40}


@pytest.mark.parametrize(("kw", "needle"), [
    ({"out": "p.jpg"}, "p.jpg"),
    ({"out": "p.png", "dpi": MAX_DPI + 1}, "dpi"),
    ({"out": "p.png", "dpi": 10}, "dpi"),
    ({"out": "p.png", "dpi": 1000, "width": "20"}, "Mpixel"),
    ({"out": "p.png", "width": "wide"}, "wide"),
    ({"out": "p.png", "window": -1.0}, "window"),
    ({"out": "p.png", "init": ("1;2",)}, "a0,b0"),
    ({"out": "p.png", "init": ((1.0, float("inf")),)}, "b0"),
    ({"out": "p.png", "field": "magic"}, "magic"),
    ({"out": "p.png", "gd_m": 0}, "gd_m"),
    ({"out": "p.png", "T": 2}, "T"),
])
def test_config_rejects_bad_values(kw, needle):
    with pytest.raises(MesadynError, match=needle):
        portrait.Config(**kw)


def test_vector_output_takes_a_high_dpi():
    """The pixel cap binds rasters only: a PDF at the largest dpi and width is fine."""
    cfg = portrait.Config(out="p.pdf", dpi=MAX_DPI, width="20")
    assert cfg.dpi == MAX_DPI


def test_inits_accept_pairs_and_strings():
    cfg = portrait.Config(out="p.svg", init=("0.5, -1.5", (2, 3)))
    assert cfg.init == ((0.5, -1.5), (2.0, 3.0)) and cfg.inits == cfg.init
    assert portrait.Config(out="p.svg").inits == DEFAULT_INITS


def test_out_checked_before_drawing(tmp_path, monkeypatch):
    import mesadyn.plots

    def boom(*_a, **_k):
        raise AssertionError("drew before checking --out")

    monkeypatch.setattr(mesadyn.plots, "portrait", boom)
    with pytest.raises(MesadynError, match="does not exist"):
        portrait.run(portrait.Config(out=str(tmp_path / "no" / "p.svg"), **FAST))


def test_run_matches_cli(tmp_path, cli_json):
    out = tmp_path / "p.svg"
    res = portrait.run(portrait.Config(x1="ones", d=3, T=20, out=str(out), **FAST))
    assert out.read_bytes().startswith(b"<?xml") and res.status == "ok" and res.ok
    assert res.figure is not None and res.axes is not None
    lo_a, hi_a, lo_b, hi_b = res.window
    assert all(lo_a <= a <= hi_a and lo_b <= b <= hi_b for a, b in res.inits)
    got = cli_json("portrait", "--x1", "ones", "--d", "3", "--T", "20", "--out", str(out),
                   "--density", "0.3", "--dpi", "40")
    drop = ("wall_s",)
    assert {k: v for k, v in got.items() if k not in drop} == {
        k: v for k, v in res.to_dict().items() if k not in drop}


def test_sampled_full_flow_overlay_is_costed_first(tmp_path, monkeypatch):
    """A Monte-Carlo overlay (10⁵ draws, d=5, T=100, three inits) is refused before any draw."""
    import mesadyn.field

    def boom(*_a, **_k):
        raise AssertionError("built the field before estimating its cost")

    monkeypatch.setattr(mesadyn.field, "make_field", boom)
    cfg = portrait.Config(out=str(tmp_path / "p.svg"), full_flow=True, field="mc", **FAST)
    with pytest.raises(MesadynError, match="--yes"):
        portrait.run(cfg)


@pytest.mark.parametrize(("suffix", "options"), [
    ("pdf", {"radius": 0.9, "full_flow": True, "init": ((0.5, 0.6),)}),
    ("svg", {"x1": "shifted", "mu": 0.2, "init": ((0.5, 1.5), (-1.0, 0.3))}),
    ("png", {"x1": "mixture", "mixture": "0.3:ones,0.7:gaussian", "window": 2.0}),
])
def test_the_figure_is_its_own_run_file(tmp_path, suffix, options):
    """The figure carries its provenance: ``Config.from_run(figure)`` rebuilds the config from
    the file alone (the non-default data model included), ``rerun`` redraws it to the same
    numbers, and the same portrait gives the same bytes."""
    from mesadyn.plots import read_provenance
    from mesadyn.workflows import rerun

    out = tmp_path / f"p.{suffix}"
    cfg = portrait.Config(d=2, T=5, out=str(out), **FAST, **options)
    first = portrait.run(cfg)
    assert first.ok and first.format == suffix
    prov = read_provenance(out)
    assert prov["kind"] == "portrait" and prov["seed"] == cfg.seed
    assert prov["config"] == cfg.run_config()
    assert prov["result"]["ab_star"] == first.ab_star and "wall_s" not in prov["result"]
    again = portrait.Config.from_run(out)
    assert again == dataclasses.replace(cfg, out=None)
    check = rerun(out)
    assert check.ok and check.differences == (), check.message
    assert check.rerun is not None and "out" not in check.rerun.to_dict()
    data = out.read_bytes()
    portrait.run(cfg)
    assert out.read_bytes() == data


def test_full_flow_overlays_combine_their_outcomes(tmp_path):
    """The portrait's status is :meth:`Outcome.combine` of its overlays' verdicts; the exact
    full flow from a diagonal init converges on the hyperbola ab = ab* (Theorem 4.1)."""
    from mesadyn.outcome import Outcome
    from mesadyn.process import gaussian
    from mesadyn.theory import constants

    res = portrait.run(portrait.Config(d=2, T=5, full_flow=True, init=((0.5, 0.6), (2.0, 2.0)),
                                       **FAST))
    assert [e.status for e in res.full_flow] == [Outcome.CONVERGED] * 2
    assert res.status is Outcome.combine(e.status for e in res.full_flow) is Outcome.CONVERGED
    star = constants(gaussian(2, 1.0), 5).ab_star
    assert all(abs(e.ab_end - star) < 1e-8 for e in res.full_flow)
    assert res.to_dict()["full_flow"][0]["status"] == "converged"
    capped = portrait.run(portrait.Config(d=2, T=5, full_flow=True, init=((0.5, 0.6),),
                                          flow_t_end=1e-3, **FAST))
    assert capped.status is Outcome.T_END and capped.ok  # a horizon reached: no verdict


def test_a_full_flow_overlay_stopped_at_a_saddle_integrates_on() -> None:
    """From (a0, b0) = (1e-12, 1e-12) max|∇L| is below the steady-state test at τ = 0: the
    overlay used to end there with status ``saddle`` (exit 1) at ab = 1e-24; now it leaves the
    saddle, as the reduced flow does, and converges on the hyperbola."""
    res = portrait.run(portrait.Config(d=2, T=6, init=((1e-12, 1e-12),), full_flow=True,
                                       density=0.3))
    (end,) = res.full_flow
    assert end.status == "converged" and res.status == "converged"
    assert end.ab_end == pytest.approx(res.ab_star, rel=1e-6)


def test_a_malformed_gd_run_is_one_line_naming_the_file(tmp_path) -> None:
    """``--gd-run`` reads through the one validated reader: a run file whose ``config`` is not
    a JSON object is refused naming the file (it was an unnamed error)."""
    import xarray as xr

    path = tmp_path / "bad.nc"
    xr.Dataset(attrs={"kind": "train", "config": "{not json", "mesadyn_version": "0",
                      "seed": 1}).to_netcdf(path)
    with pytest.raises(MesadynError, match=r"bad\.nc"):
        portrait.run(portrait.Config(d=2, T=6, gd_run=(str(path),), density=0.3))


@pytest.mark.parametrize(("kw", "needle"), [
    ({"full_flow": "no"}, "full_flow must be true or false"),
    ({"inset_pl": 1}, "inset_pl must be true or false"),
    ({"init": 0.5}, "init must be a list of"),
    ({"init": [(0.1, 0.2, 0.3)]}, "init must be a pair"),
    ({"gd_run": 3}, "gd_run must be a list of run files"),
    ({"width": None}, "--width must be one, two or inches"),
    ({"out": 3.5}, "out must be a file path"),
])
def test_config_refuses_wrong_types_naming_them(kw, needle) -> None:
    """Wrong types are the package's one-line error naming the value, never a raw TypeError
    (``bool("no")`` was true, a float ``init`` raised 'object is not iterable')."""
    with pytest.raises(MesadynError, match=needle):
        portrait.Config(**kw)
