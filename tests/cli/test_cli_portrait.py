"""``mesadyn portrait``: writes PDF/SVG/PNG by suffix, JSON summary, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mesadyn.cli import main
from mesadyn.errors import MesadynError
from mesadyn.theory import constants
from mesadyn.workflows.portrait import parse_init

FAST = ["--density", "0.3", "--dpi", "40"]


def run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


@pytest.mark.parametrize("suffix,magic", [("pdf", b"%PDF-"), ("svg", b"<?xml"),
                                          ("png", b"\x89PNG")])
def test_writes_each_format(tmp_path, capsys, suffix, magic):
    out = tmp_path / f"portrait.{suffix}"
    code, stdout, _ = run(capsys, "portrait", "--x1", "gaussian", "--sigma", "0.5", "--d", "5",
                          "--T", "100", "--out", str(out), "--json", *FAST)
    assert code == 0
    assert out.read_bytes().startswith(magic)
    res = json.loads(stdout)
    c = constants(__import__("mesadyn").gaussian(5, 0.5), 100)
    assert res["format"] == suffix and res["ab_star"] == pytest.approx(c.ab_star)
    assert res["inits"] == [[0.1, 0.1], [0.5, 1.5], [2.0, 2.0]]


def test_errors_are_one_line(tmp_path, capsys):
    cases = [
        (["--out", str(tmp_path / "p.jpg")], "must end in .pdf, .svg or .png"),
        (["--out", str(tmp_path / "p.png"), "--init", "1;2"], "--init must be a0,b0"),
        (["--out", str(tmp_path / "p.png"), "--init", "1,nan"], "b0=nan"),
        (["--out", str(tmp_path / "p.png"), "--gd-run", str(tmp_path / "no.nc")], "not found"),
        (["--out", str(tmp_path / "p.png"), "--field", "magic", "--full-flow"], "magic"),
        (["--out", str(tmp_path / "p.png"), "--width", "wide"], "wide"),
        (["--out", str(tmp_path / "p.png"), "--T", "2"], "T"),
        (["--out", str(tmp_path / "p.png"), "--dpi", "5000"], "dpi"),
        (["--out", str(tmp_path / "p.png"), "--dpi", "1000", "--width", "20"], "Mpixel"),
        (["--out", str(tmp_path / "nodir" / "p.png")], "does not exist"),
        (["--out", str(tmp_path)], "must end in"),
    ]
    for args, msg in cases:
        extra = FAST if "--dpi" not in args else ["--density", "0.3"]
        code, stdout, err = run(capsys, "portrait", *args, *extra)
        assert code == 2, args
        assert err.startswith("mesadyn: error:") and msg in err and err.count("\n") == 1, err
        assert "Traceback" not in err and stdout == ""


def test_unreadable_gd_run(tmp_path, capsys):
    bad = tmp_path / "bad.nc"
    bad.write_text("garbage")
    code, _, err = run(capsys, "portrait", "--out", str(tmp_path / "p.png"), "--gd-run",
                       str(bad), *FAST)
    assert code == 2 and "cannot read run file" in err


def test_init_outside_window_is_widened_and_reported(tmp_path, capsys):
    code, stdout, err = run(capsys, "portrait", "--out", str(tmp_path / "w.png"), "--init",
                            "3,-4", "--init", "-0.5,0.2", "--window", "2", "--json", *FAST)
    assert code == 0
    res = json.loads(stdout)
    assert res["window"][1] >= 4 and res["inits"] == [[3.0, -4.0], [-0.5, 0.2]]
    assert "outside the requested window" in err and res["notes"]


def test_parse_init():
    assert parse_init(" 0.5, -1.5") == (0.5, -1.5)
    with pytest.raises(MesadynError, match="'x,y'"):
        parse_init("x,y")


def test_workflow_ones_theorem_43(tmp_path):
    from mesadyn.workflows import portrait

    res = portrait.run(portrait.Config(x1="ones", d=5, T=100, out=str(tmp_path / "o.svg"),
                                       density=0.3)).to_dict()
    H = sum(1 / k for k in range(1, 99))
    assert res["ab_star"] == pytest.approx(1 / (1 + 4 * H / 98), rel=1e-12)
    assert res["ab_limit"] == 1.0


def test_default_portrait_imports_no_heavy_library(tmp_path):
    """The default portrait (reduced system, closed form, streamlines) needs numpy and
    matplotlib only: torch, jax, xarray, scipy and dask stay unloaded (start-up).
    Density and dpi are lowered for speed; they do not change what is imported."""
    out = tmp_path / "p.png"
    code = (
        "import sys\nfrom mesadyn.cli import main\n"
        f"main(['portrait', '--out', {str(out)!r}, '--density', '0.3', '--dpi', '40'])\n"
        "heavy = ('torch', 'jax', 'xarray', 'scipy', 'dask', 'matplotlib')\n"
        "print('LOADED=' + ','.join(sorted(m for m in heavy if m in sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    loaded = proc.stdout.rsplit("LOADED=", 1)[1].split()[0].split(",")
    assert loaded == ["matplotlib"], proc.stdout  # the one it must load, so the probe works
    assert out.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("suffix", ["pdf", "svg", "png"])
def test_rerun_of_a_figure(tmp_path, capsys, suffix):
    """``mesadyn rerun portrait.pdf`` rebuilds the configuration from the figure's metadata
    (the radius included), redraws it and finds the same numbers (exit 0)."""
    out = tmp_path / f"p.{suffix}"
    code, _, err = run(capsys, "portrait", "--d", "2", "--T", "5", "--radius", "0.9",
                       "--out", str(out), *FAST)
    assert code == 0, err
    code, stdout, err = run(capsys, "rerun", str(out), "--json")
    assert code == 0, err
    obj = json.loads(stdout)
    assert obj["status"] == "ok" and obj["kind"] == "portrait" and obj["differences"] == []


def test_rerun_of_a_figure_without_provenance_is_one_line(tmp_path, capsys):
    import matplotlib.pyplot as plt

    fig = plt.figure()
    path = tmp_path / "foreign.png"
    fig.savefig(path)
    plt.close(fig)
    code, stdout, err = run(capsys, "rerun", str(path))
    assert code == 2 and stdout == "" and "no mesadyn provenance" in err
    assert err.count("\n") == 1 and "Traceback" not in err
