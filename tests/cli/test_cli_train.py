"""`mesadyn train`: JSON keys, the saved run, Table 1, divergence (exit 2, partial run)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mesadyn.cli import main
from mesadyn.io import load_run, run_config

SMALL = ["--x1", "sparse", "--scale", "1", "--d", "2", "--T", "6", "--m", "30",
         "--device", "cpu"]


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_train_json_and_out(capsys, tmp_path):
    path = tmp_path / "run.nc"
    code, out, err = run(capsys, "train", *SMALL, "--steps", "40", "--lr", "0.2", "--json",
                         "--out", str(path))
    assert code == 0, err
    obj = json.loads(out)
    for key in ("ab", "ab_theory", "train_loss", "test_loss", "ratio", "steps", "wall_s",
                "ratio_se", "ab_limit", "lr", "diverged"):
        assert key in obj
    assert obj["steps"] == 40 and obj["lr"] == 0.2 and obj["diverged"] is False
    assert obj["ab_theory"] == pytest.approx(1.0)
    ds = load_run(path, kind="train")
    assert ds.sizes["step"] == 41 and ds["W_KQ"].shape == (6, 6)
    assert float(ds["ab_mean"][-1]) == pytest.approx(obj["ab"])
    cfg = run_config(ds)
    assert cfg["m"] == 30 and cfg["init"] == "diagonal" and ds.attrs["seed"] == 1


def test_train_gaussian_init(capsys):
    code, out, err = run(capsys, "train", *SMALL, "--steps", "2", "--lr", "0.01", "--init",
                         "gaussian", "--sigma-w", "0.1", "--json")
    assert code == 0, err
    assert np.isfinite(json.loads(out)["train_loss"])


def test_diverging_lr_exit_2_and_partial_run(capsys, tmp_path):
    path = tmp_path / "div.nc"
    code, out, err = run(capsys, "train", *SMALL, "--steps", "50", "--lr", "100", "--json",
                         "--out", str(path))
    assert code == 2 and out == ""
    line = [ln for ln in err.splitlines() if ln.startswith("mesadyn: error:")]
    assert len(line) == 1 and "diverged at step" in line[0] and "lr=100" in line[0]
    ds = load_run(path, kind="train")
    assert ds.attrs["diverged"] == 1 and ds.sizes["step"] <= 50
    assert int(ds.attrs["diverged_step"]) >= int(ds["step"][-1])


@pytest.mark.parametrize(("args", "needle"), [
    (["--x1", "rademacher"], "Table 1"),
    (["--x1", "gaussian", "--sigma", "0.7"], "sigma=0.7"),
    (["--T", "2", "--lr", "0.1"], "T=2"),
    (["--d", "0", "--lr", "0.1"], "d=0"),
    (["--x1", "gaussian", "--sigma", "0", "--lr", "0.1"], "sigma=0"),
    (["--x1", "nope"], "nope"),
    (["--lr", "-1"], "lr=-1"),
    (["--init", "zeros"], "zeros"),
    (["--out", "run.txt", "--lr", "0.1"], "run.txt"),
])
def test_train_bad_input(capsys, args, needle):
    code, out, err = run(capsys, "train", "--m", "5", "--steps", "1", "--device", "cpu", *args)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert lines[-1].startswith("mesadyn: error:") and needle in lines[-1]
    assert len([ln for ln in lines if ln.startswith("mesadyn")]) == 1


def test_incontext_lengths_from_the_command_line(capsys, tmp_path):
    """``--incontext 3,5`` (the text a user types): the paper's run file holds the curve at
    those lengths, and a model's JSON its in-context reports."""
    path = tmp_path / "ctx.nc"
    code, out, err = run(capsys, "train", *SMALL, "--steps", "5", "--incontext", "3,5",
                         "--json", "--out", str(path))
    assert code == 0, err
    ds = load_run(path, kind="train")
    assert list(ds["T_te"].values) == [3, 5] and np.isfinite(ds["ctx_ratio"]).all()
    code, out, err = run(capsys, "train", "--model", "deep", "--layers", "2", "--d", "2",
                         "--T", "5", "--m", "20", "--steps", "3", "--lr", "1e-3",
                         "--incontext", "4", "--json")
    assert code == 0, err
    reports = json.loads(out)["incontext"]
    assert [r["T_te"] for r in reports] == [4] and reports[0]["gd_fit"]["k"] == 2
