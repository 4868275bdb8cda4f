"""``mesadyn.workflows.portrait``: Config validation (format, size caps), the output path
checked before drawing, and ``to_dict`` == the CLI's ``--json``."""

from __future__ import annotations

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
    assert out.read_bytes().startswith(b"<?xml") and res.status == "ok"
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
