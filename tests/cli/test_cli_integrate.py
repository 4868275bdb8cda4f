"""``mesadyn integrate``: the JSON contract, run files, and one-line errors (issue 4)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from mesadyn.cli import main
from mesadyn.io import load_run, run_config
from mesadyn.process import gaussian
from mesadyn.reduced import ReducedSystem
from mesadyn.theory import constants

REDUCED_KEYS = {"a", "b", "ab", "ab_theory", "invariant_drift", "closed_form_max_error", "nfev",
                "wall_s", "solver"}
FULL_KEYS = {"W_KQ", "W_PV", "ab", "ab_theory", "loss", "grad_norm", "converged",
             "invariant_drift", "reduced_max_deviation", "nfev", "wall_s", "solver", "field"}


def _run(capsys, args: list[str]) -> tuple[int, str, str]:
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_reduced_json_contract_and_run_file(capsys, tmp_path) -> None:
    path = tmp_path / "red.nc"
    code, out, err = _run(capsys, ["integrate", "--reduced", "--x1", "sparse", "--scale", "2",
                                   "--a0", "0.1", "--b0", "0.1", "--solver", "DOP853",
                                   "--json", "--out", str(path)])
    assert code == 0, err
    r = json.loads(out)
    assert REDUCED_KEYS <= set(r)
    system = ReducedSystem.from_family(__import__("mesadyn").sparse(5, 2.0), 100)
    assert r["ab_theory"] == pytest.approx(system.ab_star, rel=1e-15)
    assert abs(r["ab"] - r["ab_theory"]) < 1e-9
    assert r["closed_form_max_error"] < 1e-8 and r["invariant_drift"] < 1e-9
    assert r["solver"] == "DOP853" and r["nfev"] > 0
    ds = load_run(path, kind="integrate")
    assert run_config(ds)["x1"] == "sparse" and ds.attrs["seed"] == 1
    np.testing.assert_allclose(ds["a"].values[-1], r["a"])
    a, b = system.solution(0.1, 0.1, ds["tau"].values)
    assert np.max(np.hypot(ds["a"].values - a, ds["b"].values - b)) == pytest.approx(
        r["closed_form_max_error"])


def test_full_json_contract(capsys, tmp_path) -> None:
    path = tmp_path / "full.nc"
    code, out, err = _run(capsys, ["integrate", "--d", "2", "--T", "10", "--a0", "0.5", "--b0",
                                   "1.5", "--solver", "DOP853", "--json", "--out", str(path)])
    assert code == 0, err
    r = json.loads(out)
    assert FULL_KEYS <= set(r)
    assert np.shape(r["W_KQ"]) == (6, 6) and np.shape(r["W_PV"]) == (6, 6)
    c = constants(gaussian(2, 1.0), 10)
    assert r["ab_theory"] == pytest.approx(c.ab_star, rel=1e-15)
    np.testing.assert_allclose(r["ab"], c.ab_star, rtol=1e-8)
    assert r["converged"] is True and r["grad_norm"] < 1e-9
    assert r["reduced_max_deviation"] < 1e-7 and r["invariant_drift"] < 1e-9
    assert r["field"] == "exact" and r["off_structure_max"] < 1e-12
    W_KQ, W_PV = np.array(r["W_KQ"]), np.array(r["W_PV"])
    assert r["ab"] == pytest.approx(list(np.diag(W_KQ[4:, 2:4]) * np.diag(W_PV[:2, 2:4])))
    ds = load_run(path, kind="integrate")
    assert {"theta", "loss", "grad_max", "invariant"} <= set(ds.data_vars)
    assert ds["grad_max"].values[-1] == pytest.approx(r["grad_norm"])


def test_human_summary_goes_to_stdout(capsys) -> None:
    """Tables are the command's result: stdout (``mesadyn integrate > out.txt`` keeps it)."""
    code, out, err = _run(capsys, ["integrate", "--reduced", "--solver", "RK45"])
    assert code == 0 and "closed-form max error" in out and "ab*" in out
    assert "closed-form max error" not in err


@pytest.mark.parametrize("args,needle", [
    (["--t-end", "0"], "t_end"),
    (["--t-end", "-1"], "t_end"),
    (["--rtol", "0"], "rtol"),
    (["--rtol", "-1e-8"], "rtol"),
    (["--solver", "rk4"], "valid: torchdiffeq:dopri5"),
])
def test_bad_input_one_line(capsys, args: list[str], needle: str) -> None:
    for reduced in (["--reduced"], ["--d", "1", "--T", "4"]):
        code, out, err = _run(capsys, ["integrate", *reduced, *args, "--json"])
        assert code == 2 and out == ""
        assert err.startswith("mesadyn: error:") and needle in err
        assert "Traceback" not in err


def test_diffrax_without_jax(capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "diffrax", None)
    code, _, err = _run(capsys, ["integrate", "--reduced", "--solver", "Tsit5", "--json"])
    assert code == 2 and "pip install 'mesadyn[jax]'" in err


def test_max_steps_saves_partial_and_exits_1(capsys, tmp_path) -> None:
    """A completed run that did not reach its end is a failure (exit 1), not bad input."""
    path = tmp_path / "partial.nc"
    code, out, err = _run(capsys, ["integrate", "--reduced", "--solver", "dopri5",
                                   "--max-steps", "5", "--json", "--out", str(path)])
    assert code == 1
    r = json.loads(out)
    assert r["status"] == "max_steps" and r["n_accepted"] == 5
    assert "max_steps=5" in err and "partial result saved" in err
    ds = load_run(path, kind="integrate")
    assert ds["tau"].values[-1] == pytest.approx(r["t_final"])


def test_mask_diagonal_and_finite_field(capsys) -> None:
    code, out, err = _run(capsys, ["integrate", "--x1", "ones", "--d", "2", "--T", "6",
                                   "--mask", "diagonal", "--solver", "LSODA", "--json"])
    assert code == 0, err
    r = json.loads(out)
    from mesadyn.process import ones

    c = constants(ones(2), 6)  # Lemma A.5
    np.testing.assert_allclose(r["ab"], c.ab_star, rtol=1e-8)
    assert r["reduced_constants"] == "Lemma A.5" and r["reduced_max_deviation"] < 1e-7
    code, out, err = _run(capsys, ["integrate", "--field", "finite", "--m", "32", "--d", "1",
                                   "--T", "5", "--t-end", "0.2", "--steady-tol", "0",
                                   "--init", "gaussian", "--sigma-w", "0.1", "--json"])
    assert code == 0, err
    r = json.loads(out)
    assert r["field"] == "finite" and r["reduced_max_deviation"] is None
    assert r["status"] == "t_end"


def test_repeats_bad_input_is_one_line_exit_2(capsys) -> None:
    """Issue 18: too few sample sets or samples, or repeats on the exact flow, are bad input."""
    for args, needle in ((["--repeats", "0"], "repeats"),
                         (["--repeats", "2"], "repeats=2"),
                         (["--field", "mc", "--samples", "8", "--d", "1", "--T", "5"],
                          "samples")):
        code, out, err = _run(capsys, ["integrate", *args, "--json"])
        assert code == 2 and out == "", err
        assert needle in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1, err


def test_sample_set_too_large_for_memory_is_one_line(capsys, monkeypatch) -> None:
    """The field refuses draws that do not fit in memory before drawing; the CLI says so in one
    line and exits 2."""
    from mesadyn import budget

    monkeypatch.setattr(budget, "memory_budget", lambda: budget.MemoryBudget(1000, "test"))
    code, out, err = _run(capsys, ["integrate", "--field", "mc", "--samples", "5000", "--d", "1",
                                   "--T", "5", "--yes", "--json"])
    assert code == 2 and out == "", err
    assert "needs about" in err and "(test)" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
