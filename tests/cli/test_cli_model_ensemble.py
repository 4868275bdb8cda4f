"""``mesadyn ensemble --model ...``: ``--json`` is the workflow's ``to_dict()``; the table lists
the fixed points found and the outcomes; a row at a saddle fails the command (exit 1, after
the output); bad input is one line and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mesadyn.cli import main
from mesadyn.workflows import ensemble as wf

ONE = ["--model", "deep", "--layers", "1", "--d", "1", "--T", "4", "--init", "grid",
       "--grid-a", "0.5", "--grid-b", "0.5,1.5", "--rtol", "1e-8", "--atol", "1e-10"]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(["ensemble", *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_is_the_workflows_result(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *ONE, "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert (obj["model"], obj["layers"], obj["n"]) == ("deep", 1, 2)
    assert obj["statuses"] == {"converged": 2} and obj["status"] == "converged"
    (point,) = obj["fixed_points"]
    assert point["count"] == 2 and point["ab_min"] == pytest.approx(0.2, rel=1e-7)
    res = wf.run(wf.Config(model="deep", layers=1, d=1, T=4, init="grid", grid_a=(0.5,),
                           grid_b=(0.5, 1.5), rtol=1e-8, atol=1e-10))
    lib = res.to_dict()
    for obj_ in (obj, lib):
        obj_["solver"].pop("wall_s")
    assert obj == lib


def test_the_table_lists_the_fixed_points(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *ONE)
    assert code == 0, err
    assert "fixed points reached" in out and "fixed_point_1" in out and "2/2" in out


def test_a_saddle_row_fails_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--model", "deep", "--layers", "2", "--d", "1", "--T", "4",
                         "--init", "grid", "--grid-a", "0.5", "--grid-b", "0.5", "--t-end",
                         "40", "--rtol", "1e-6", "--atol", "1e-9", "--json")
    assert code == 1
    assert json.loads(out)["statuses"] == {"saddle": 1}
    assert err.strip().splitlines()[-1] == (
        "mesadyn: saddle: 1 of 1 trajectories failed (1 saddle)")


@pytest.mark.parametrize(("args", "match"), [
    (["--model", "softmax"], "field='exact' is not supported by model=softmax"),
    (["--model", "deep", "--layers", "0"], "layers must be >= 1"),
    (["--model", "deep", "--layers", "2", "--method", "rodas4"], "method=rodas4"),
    (["--model", "deep", "--layers", "2", "--d", "2", "--T", "6", "--n", "100"], "--yes"),
    (["--field", "finite"], "field=finite is not supported by the paper's ensemble"),
])
def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], args: list[str],
                               match: str) -> None:
    code, out, err = run(capsys, "--d", "1", "--T", "4", *args, "--json")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and out == ""
    assert len(lines) == 1 and lines[0].startswith("mesadyn: error:") and match in lines[0]


def test_an_init_file_of_the_wrong_length_is_one_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "starts.npy"
    np.save(path, np.zeros((2, 18)))
    code, out, err = run(capsys, "--model", "deep", "--layers", "2", "--d", "1", "--T", "4",
                         "--init", "file", "--init-file", str(path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "(N >= 1, 36)" in err and "got (2, 18)" in err
