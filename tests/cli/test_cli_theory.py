"""`mesadyn theory`: the JSON contract and bad input (one line, exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mesadyn.cli import main
from mesadyn.process import gaussian, ones, sparse
from mesadyn.theory import constants, predicted_ratio


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(("args", "fam", "T"), [
    (["--x1", "gaussian", "--sigma", "1"], gaussian(5, 1.0), 100),
    (["--x1", "sparse", "--scale", "0.5", "--T", "7", "--d", "3"], sparse(3, 0.5), 7),
    (["--x1", "ones", "--d", "4"], ones(4), 100),
])
def test_theory_json(capsys, args, fam, T):
    code, out, err = run(capsys, "theory", *args, "--json")
    assert code == 0
    obj = json.loads(out)  # exactly one JSON object on stdout
    for key in ("kappa1", "kappa2", "kappa3", "c1", "c2", "ab_star", "ab_limit"):
        assert key in obj
    c = constants(fam, T)
    assert obj["ab_star"] == pytest.approx(c.ab_star, rel=1e-14)
    assert obj["c1"] == pytest.approx(c.c1) and obj["c2"] == pytest.approx(c.c2)
    assert obj["ratio"] == pytest.approx(predicted_ratio(fam, T))


def test_theory_paper_value(capsys):
    code, out, _ = run(capsys, "theory", "--x1", "gaussian", "--sigma", "1", "--json")
    obj = json.loads(out)
    assert obj["ab_star"] == pytest.approx(0.1919, abs=1e-4) and obj["ab_limit"] == 0.2


def test_theory_table(capsys):
    code, out, err = run(capsys, "theory", "--x1", "sparse")
    assert code == 0 and "ab_star" in out and "ab_star" not in err


@pytest.mark.parametrize(("args", "needle"), [
    (["--T", "2"], "T=2"),
    (["--d", "0"], "d=0"),
    (["--sigma", "0"], "sigma=0"),
    (["--sigma", "-1"], "sigma=-1"),
    (["--x1", "cauchy"], "cauchy"),
    (["--T", "abc"], "--T"),  # typer does not echo the value here
])
def test_theory_bad_input(capsys, args, needle):
    code, out, err = run(capsys, "theory", *args)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mesadyn: error:") and needle in lines[0]


def test_subprocess_exit_code():
    """The installed entry point: one line on stderr, exit status 2, no traceback."""
    p = subprocess.run([sys.executable, "-m", "mesadyn", "theory", "--sigma", "-2"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().count("\n") == 0 and "sigma=-2" in p.stderr
    assert "Traceback" not in p.stderr
