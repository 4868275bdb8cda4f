"""The command line with ``--rotation real``: the commands of the 3-D manifold exit 0 with its
numbers, ``portrait`` (a 2-D picture) says in one line why it does not draw it (exit 2)."""

from __future__ import annotations

import json

import pytest

from mesadyn.analysis.rotation_manifold import ManifoldSystem
from mesadyn.cli import main
from mesadyn.process import gaussian
from mesadyn.theory import rotation_constants


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_portrait_refuses_real_rotations_in_one_line(capsys, tmp_path):
    code, out, err = run(capsys, "portrait", "--rotation", "real", "--d", "2", "--T", "6",
                         "--out", str(tmp_path / "p.png"))
    assert code == 2 and out == ""
    assert err.startswith("mesadyn: error:") and err.count("\n") == 1, err
    assert "rotation=real" in err and "3-D" in err and "integrate --reduced" in err
    assert "Traceback" not in err and not (tmp_path / "p.png").exists()


K = ManifoldSystem.from_constants(rotation_constants(gaussian(2), 6)).k_star


@pytest.mark.parametrize(("args", "check"), [
    (["theory"], lambda r: (r["ab_star"], r["cb_star"]) == pytest.approx(tuple(K), rel=1e-14)),
    (["integrate", "--reduced"],
     lambda r: r["status"] == "converged" and r["limit_error"] < 1e-9
     and (r["ab"], r["cb"]) == pytest.approx(tuple(K), abs=1e-9)),
    (["continue", "--parameter", "noise", "--start", "0", "--stop", "0.2", "--points", "3"],
     lambda r: r["status"] == "reached_end" and r["max_residual"] < 1e-10),
    (["ensemble", "--n", "2"], lambda r: r["ab_star"] == pytest.approx(float(K[0]), rel=1e-14)),
])
def test_the_manifolds_commands_exit_0(capsys, args, check):
    code, out, err = run(capsys, *args, "--rotation", "real", "--d", "2", "--T", "6", "--json")
    assert code == 0, err
    assert check(json.loads(out))


@pytest.mark.parametrize(("args", "names"), [
    (["theory", "--rotation", "real", "--x1", "ones", "--d", "2", "--T", "6"], "'ones'"),
    (["integrate", "--reduced", "--rotation", "real", "--solver", "closed_form", "--d", "2",
      "--T", "6"], "closed_form"),
    (["continue", "--parameter", "noise", "--rotation", "haar", "--d", "2", "--T", "6",
      "--stop", "0.2"], "noise"),
    (["continue", "--parameter", "noise", "--d", "2", "--T", "6", "--start", "-0.1",
      "--stop", "0.2"], "-0.1"),
])
def test_what_the_manifold_does_not_reach_is_one_line_exit_2(capsys, args, names):
    code, out, err = run(capsys, *args)
    assert code == 2 and out == "", err
    assert err.startswith("mesadyn: error:") and err.count("\n") == 1 and names in err, err
