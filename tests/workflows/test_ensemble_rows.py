"""The rows of an ensemble (``mesadyn.workflows._ensemble_rows`` through ``ensemble.run``):
a row the steady-state test would stop at a saddle is not ``converged``; its status, its
basin, the counts and the exit code say where it is, and every ``converged`` row is a
minimum (no negative curvature)."""

from __future__ import annotations

import json

import pytest

from mesadyn import cli
from mesadyn.analysis.steady import curvatures
from mesadyn.field import FieldSpec, make_field
from mesadyn.model import free_mask
from mesadyn.outcome import Outcome
from mesadyn.process import gaussian
from mesadyn.workflows import ensemble as wf


def _minima(res: wf.Result) -> None:
    """Every converged row of ``res`` has no negative curvature (the property the status
    promises), by the dense Hessian of the exact field."""
    ds = res.rows
    conv = ds["status"].values == Outcome.CONVERGED.value
    field = make_field(FieldSpec("exact", gaussian(res.d, 1.0), res.T))
    for c in curvatures(field, ds["theta"].values[conv], free_mask(None, res.d)):
        assert c.n_negative == 0, c


def test_tiny_gaussian_starts_leave_the_saddle(capsys) -> None:
    """``--sigma-w 1e-10``: max|∇L| ≈ 2e-10 is below steady_tol at τ = 0, so every row used to
    stop there and be counted ``converged: 5`` (100 % in basin ``other``, at ab ≈ 1e-20 with
    ab* = 0.18) while the ensemble's own prediction had them leave the saddle at τ ≈ 1.9.
    Now the rows integrate on: each leaves at its predicted time and converges on ab = ab*."""
    try:
        cli.main(["ensemble", "--d", "2", "--T", "6", "--n", "5", "--sigma-w", "1e-10",
                  "--json"])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    obj = json.loads(capsys.readouterr().out)
    assert code == 0 and obj["statuses"] == {"converged": 5}
    assert obj["fractions"]["other"]["count"] == 0
    assert obj["escape"]["n_escaped"] == 5 and obj["escape"]["max_relative_error"] < 0.02
    assert obj["ab_max_error_converged"] < 1e-8
    res = wf.run(wf.Config(d=2, T=6, n=5, sigma_w=1e-10))
    _minima(res)


def test_a_row_at_the_saddle_is_saddle_not_converged(capsys) -> None:
    """A grid start at the origin, and one on the saddle's stable manifold a = −b, stay at the
    saddle: ``saddle`` (a failure: exit 1) in the row status and the counts, basin ``other``;
    the other rows converge to minima."""
    res = wf.run(wf.Config(d=2, T=6, init="grid", grid_a=(0.0, 1.0, -1.0), grid_b=(0.0, 1.0)))
    ds = res.rows
    status = dict(zip([(a, b) for a in (0.0, 1.0, -1.0) for b in (0.0, 1.0)],
                      ds["status"].values.astype(str), strict=True))
    assert status[(0.0, 0.0)] == "saddle" and status[(-1.0, 1.0)] == "saddle"
    assert res.statuses == {"converged": 4, "saddle": 2}
    assert res.status is Outcome.SADDLE and not res.ok and res.exit_code == 1
    assert "2 of 6 trajectories failed (4 converged, 2 saddle)" == res.message
    basin = ds["outcome"].values.astype(str)[ds["status"].values == "saddle"]
    assert set(basin) == {"other"}
    _minima(res)
    with pytest.raises(SystemExit) as exc:
        cli.main(["ensemble", "--d", "2", "--T", "6", "--init", "grid", "--grid-a", "0",
                  "--grid-b", "0", "--json"])
    assert exc.value.code == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["statuses"] == {"saddle": 1}
    assert err.strip().splitlines() == [
        "mesadyn: saddle: 1 of 1 trajectories failed (1 saddle)"]


def test_a_grid_start_whose_gradient_overflows_ends(capsys) -> None:
    """``--grid-a 1e100 --grid-b 1e100`` looped for ever in the batched stepper (a NaN step
    size never underflows); now the row fails and the ensemble exits 1, its output written."""
    with pytest.raises(SystemExit) as exc:
        cli.main(["ensemble", "--d", "2", "--T", "6", "--init", "grid", "--grid-a", "1e100",
                  "--grid-b", "1e100", "--json"])
    assert exc.value.code == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["statuses"] == {"failed": 1}
    assert "Warning" not in err and len(err.strip().splitlines()) == 1, err
