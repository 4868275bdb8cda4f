"""``mesadyn gdflow``: ``--json`` is the workflow's ``to_dict()``; a table otherwise; bad input
is one line and exit code 2."""

from __future__ import annotations

import json

import pytest

from mesadyn.cli import main

SMALL = ["--d", "2", "--T", "6", "--lr", "0.002", "--steps", "20", "--m", "30"]


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_gdflow_json(capsys):
    code, out, err = run(capsys, "gdflow", *SMALL, "--spread-m", "10,30", "--spread-seeds",
                         "3", "--json")
    assert code == 0, err
    obj = json.loads(out)
    for key in ("family", "d", "T", "lr", "steps", "tau_end", "exact", "finite", "spread",
                "solver", "cpu_s"):
        assert key in obj
    assert obj["exact"]["ratio"] > 5 and obj["finite"]["m"] == 30
    assert obj["spread"]["m"] == [10, 30]
    assert obj["solver"]["solver"] == "scipy:DOP853"


def test_gdflow_table(capsys):
    code, out, err = run(capsys, "gdflow", *SMALL, "--m", "0")
    assert code == 0, err
    assert "mesadyn gdflow" in out and "gap ratio" in out and "mesadyn gdflow" not in err


def test_gdflow_run_file_reruns(tmp_path, capsys):
    """``--out`` writes the run file; ``mesadyn rerun FILE`` reproduces its numbers."""
    path = tmp_path / "g.nc"
    code, _, err = run(capsys, "gdflow", *SMALL, "--radius", "0.9", "--out", str(path),
                       "--json")
    assert code == 0, err
    code, out, err = run(capsys, "rerun", str(path), "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert obj["status"] == "ok" and obj["kind"] == "gdflow" and obj["differences"] == []


@pytest.mark.parametrize(("args", "match"), [
    (["--sigma", "0.7"], "Table 1 has no step size"),
    (["--lr", "0.001", "--steps", "0"], "steps"),
    (["--lr", "0.001", "--spread-m", "100"], "at least two sizes"),
    (["--lr", "0.001", "--solver", "Radau"], "implicit"),
    (["--lr", "-1"], "lr"),
])
def test_gdflow_bad_input_exit_2(capsys, args, match):
    code, out, err = run(capsys, "gdflow", "--d", "2", "--T", "6", *args, "--json")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and out == ""
    assert len(lines) == 1 and lines[0].startswith("mesadyn: error:") and match in lines[0]
