"""``mesadyn sweep`` on the command line: JSON summary, exit codes, errors before any work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mesadyn.cli import main
from mesadyn.sweep import load_sweep

SPEC = 'command = "theory"\n[options]\nx1 = "gaussian"\n[axes]\nT = [3, 100]\nd = [1, 5]\n'


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_summary_and_resume(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    code, stdout, _ = _run(["sweep", str(spec), "--out", str(out), "--workers", "0", "--json"],
                           capsys)
    assert code == 0
    summary = json.loads(stdout)
    assert (summary["n_points"], summary["computed"], summary["n_failed"]) == (4, 4, 0)
    assert summary["dataset"] == str(out / "sweep.nc")
    ds = load_sweep(out)
    assert ds["ab_star"].dims == ("T", "d")
    # an override of a fixed option changes every point: all 4 old ones are stale
    code, stdout, _ = _run(["sweep", str(spec), "--out", str(out), "--workers", "0", "--json",
                            "--sigma", "2"], capsys)
    summary = json.loads(stdout)
    assert (code, summary["computed"], summary["n_stale"]) == (0, 4, 4)
    assert summary["stale"][0]["reason"] == "options changed: sigma 1.0 -> 2.0"
    assert load_sweep(out)["kappa1"].sel(T=3, d=1).item() == pytest.approx(3 * 2.0**4)


def test_cli_table_and_failures_exit_1(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('command = "sweep_fixture_cmds:counted"\n[options]\nfail_on = 2\n'
                    '[axes]\nx = [1, 2, 3]\n')
    code, stdout, err = _run(["sweep", str(spec), "--out", str(tmp_path / "o"), "--workers",
                              "0", "--allow-code"], capsys)
    assert code == 1 and "computed now" in stdout  # the table on stdout, the notes on stderr
    assert "failed x=2" in err and "injected failure at x=2" in err
    assert err.strip().splitlines()[-1].startswith("mesadyn: 1 of 3 sweep points failed")
    code, stdout, err = _run(["sweep", str(spec), "--out", str(tmp_path / "o"), "--workers",
                              "0", "--allow-code", "--json"], capsys)
    summary = json.loads(stdout)
    assert code == 1 and summary["n_failed"] == 1  # retried, fails again
    assert summary["status"] == "failed" and summary["message"] == "1 of 3 sweep points failed"


def test_invalid_point_is_bad_input_before_work(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('workflow = "theory"\n[axes]\nT = [2, 3]\n')
    code, stdout, err = _run(["sweep", str(spec), "--out", str(tmp_path / "o"), "--workers",
                              "0"], capsys)
    assert code == 2 and stdout == "" and "point T=2: T must be >= 3, got T=2" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        ('command = "theory"\n[axes]\nsigmaa = [1.0]\n', [],
         "mesadyn: error: spec: unknown option 'sigmaa' for this workflow; valid options: "),
        ('command = "theory"\n[axes]\nT = []\n', [], "mesadyn: error: spec: axis T is empty"),
        ('command = "theory"\n[axes]\nd = ["five"]\n', [],
         "value 'five' is a str, but d takes a int"),
        ('command = "theory"\n[axes]\nT = [3]\n', ["--T", "4"],
         "T is both a fixed command-line option and an axis"),
        ('command = "theory"\n[axes]\nT = [3]\n', ["--scheduler", "tcp://127.0.0.1:1",
                                                  "--connect-timeout", "0.5"],
         "mesadyn: error: cannot reach the Dask scheduler at 'tcp://127.0.0.1:1'"),
        ('command = "theory"\n[axes]\nT = [3]\n', ["--connect-timeout", "-1"],
         "--connect-timeout must be finite and > 0"),
    ],
)
def test_cli_bad_input_exit_2_before_work(tmp_path: Path, capsys, text: str, extra: list[str],
                                          message: str) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(text)
    out = tmp_path / "out"
    code, stdout, err = _run(["sweep", str(spec), "--out", str(out), *extra], capsys)
    assert code == 2 and stdout == ""
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()  # no work started, nothing written


def test_a_targets_printing_stays_out_of_json_stdout(tmp_path: Path, capsys) -> None:
    """With ``--allow-code`` a target's own ``print`` landed inside the ``--json`` stdout (one
    JSON object no longer); it goes to stderr while the target runs."""
    spec = tmp_path / "s.toml"
    spec.write_text('command = "sweep_fixture_cmds:chatty"\n[axes]\nx = [1, 2]\n')
    code, stdout, err = _run(["sweep", str(spec), "--out", str(tmp_path / "o"), "--workers",
                              "0", "--allow-code", "--json"], capsys)
    assert code == 0 and stdout.count("\n") == 1
    assert json.loads(stdout)["computed"] == 2
    assert "chatty: computing x=1" in err and "chatty: computing x=2" in err


def test_an_out_template_with_a_sub_folder_for_continuation(tmp_path: Path, capsys) -> None:
    """``out = "sub/c{T}.nc"`` was refused for continuation ('the folder sub does not
    exist'): its Config checked the path against the working directory, before the sweep
    resolved it under --out.  The run checks it when the point runs."""
    spec = tmp_path / "s.toml"
    spec.write_text('workflow = "continuation"\n[options]\nparameter = "sigma"\nstart = 0.8\n'
                    'stop = 0.9\nd = 2\npoints = 3\nout = "sub/c{T}.nc"\n[axes]\nT = [5, 6]\n')
    code, stdout, err = _run(["sweep", str(spec), "--out", str(tmp_path / "o"), "--workers",
                              "0", "--json"], capsys)
    assert code == 0, err
    assert json.loads(stdout)["computed"] == 2
    assert sorted(p.name for p in (tmp_path / "o" / "sub").iterdir()) == ["c5.nc", "c6.nc"]
