"""``mesadyn continue --model deep --layers k`` (``workflows.continuation`` for a model other than
the paper's): the start is the fixed point of the model's flow (or ``--point``), the run file
holds the per-layer invariants, resume equals an uninterrupted run, the run is priced before it
starts, and bad input is refused in one line (exit code 2 on the command line)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mesadyn.cli import main
from mesadyn.errors import MesadynError
from mesadyn.field import FieldSpec, make_field
from mesadyn.io import load_run, run_config, to_json
from mesadyn.models import DeepLinearAttention
from mesadyn.process import gaussian
from mesadyn.workflows import continuation as wf

Interrupt = Callable[[int], Callable[[float], None]]
TWO: dict[str, Any] = {"model": "deep", "layers": 2, "d": 1, "T": 4, "parameter": "sigma",
                       "start": 1.0, "stop": 1.2, "points": 5}


@pytest.fixture(scope="module")
def two_layer_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[wf.Result, Path]:
    out = tmp_path_factory.mktemp("model_cont") / "run.nc"
    return wf.run(wf.Config(**TWO, out=str(out))), out


def test_run_file_and_json(two_layer_run: tuple[wf.Result, Path]) -> None:
    res, out = two_layer_run
    obj = json.loads(to_json(res.to_dict()))
    assert obj["status"] == "reached_end" and (obj["model"], obj["layers"]) == ("deep", 2)
    assert obj["source"].startswith("the flow from the layered diagonal init")
    assert (obj["n_free"], obj["n_symmetries"]) == (22, 4)
    assert obj["max_residual"] <= 1e-11
    (b,) = obj["branches"]
    assert len(b["layer_invariant_drift"]) == 2 and max(b["layer_invariant_drift"]) <= 1e-12
    ds = load_run(out, wf.Config.COMMAND)
    assert (ds.attrs["model"], ds.attrs["layers"]) == ("deep", 2)
    n = DeepLinearAttention(2).n_params(1)
    assert ds["theta"].shape == (obj["n_points"], n) and ds["invariants"].shape[1] == 2
    np.testing.assert_allclose(ds["invariant"].values, ds["invariants"].values.sum(axis=1),
                               rtol=0, atol=1e-15)
    assert run_config(ds)["model"] == "deep" and run_config(ds)["layers"] == 2
    # every point a fixed point of the field built afresh at its σ
    model = DeepLinearAttention(2)
    for p, th in zip(ds["p"].values, ds["theta"].values, strict=True):
        fld = make_field(FieldSpec("exact", gaussian(1, float(p)), 4, model=model),
                         disk_cache=False, reuse=False)
        assert float(fld.grad(torch.as_tensor(th)).abs().max()) <= 1e-11
    assert (ds["n_zero"].values == 14 + 4).all()  # 14 inactive entries + 4 symmetries


def test_resume_equals_an_uninterrupted_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            two_layer_run: tuple[wf.Result, Path],
                                            interrupt_after: Interrupt) -> None:
    monkeypatch.setattr(wf, "CHECKPOINT_SECONDS", 0.0)
    out = tmp_path / "run.nc"
    point = tmp_path / "start.npy"  # the uninterrupted run's start: no second start flow
    full = two_layer_run[0]
    np.save(point, full.branches[0].theta[0])
    cfg = wf.Config(**TWO, point=str(point), out=str(out))
    with pytest.raises(KeyboardInterrupt):
        wf.run(cfg, progress=interrupt_after(3))
    assert wf.checkpoint_path(out).is_file() and not out.exists()
    res = wf.run(dataclasses.replace(cfg, resume=True))
    assert res.resumed and res.status == "reached_end"
    a, b = res.branches[0], full.branches[0]
    np.testing.assert_allclose(a.p, b.p, rtol=0, atol=1e-13)
    np.testing.assert_allclose(a.loss, b.loss, rtol=1e-12)
    np.testing.assert_allclose(a.invariants, b.invariants, rtol=0, atol=1e-15)
    assert not wf.checkpoint_path(out).exists()


def test_point_of_a_stability_run(tmp_path: Path,
                                  two_layer_run: tuple[wf.Result, Path]) -> None:
    """``--point`` takes the run file of ``stability --model``: its fixed point starts the
    branch, on the loss of the flow's start."""
    from mesadyn.workflows import stability

    st = tmp_path / "st.nc"
    stability.run(stability.Config(model="deep", layers=2, d=1, T=4, sigma=1.0, out=str(st)))
    res = wf.run(wf.Config(**{**TWO, "stop": 1.05, "points": 2}, point=str(st)))
    assert res.status == "reached_end" and res.to_dict()["source"] == f"the point in {str(st)!r}"
    assert abs(res.branches[0].loss[0] - two_layer_run[0].branches[0].loss[0]) <= 1e-12


def test_discrete_T() -> None:
    res = wf.run(wf.Config(**{**TWO, "parameter": "T", "start": 4, "stop": 5, "points": 2}))
    assert res.status == "reached_end" and list(res.branches[0].p) == [4, 5]
    assert res.max_residual <= 1e-11


@pytest.mark.parametrize(("kw", "match"), [
    ({"model": "softmax", "layers": 1}, "model=softmax is not supported by mesadyn continue"),
    ({"d": 2, "rotation": "real"}, "rotation=real is not supported for model=deep"),
    ({"parameter": "noise", "start": 0.0, "stop": 0.1}, "parameter noise is not supported"),
    ({"parameter": "m4", "start": 3.0, "stop": 3.5}, "m4 is not supported for model=deep"),
    ({"stop": -1.0}, "outside the domain of sigma"),
])
def test_bad_config(kw: dict[str, object], match: str) -> None:
    with pytest.raises(MesadynError, match=match) as info:
        wf.Config(**{**TWO, **kw})
    assert "\n" not in str(info.value)


def test_an_expensive_run_is_refused_before_it_starts(tmp_path: Path) -> None:
    """Two layers at d = 2, T = 6 (34 250 quadrature points): a Hessian costs minutes, so the
    run is refused before anything is built, naming the way out."""
    cfg = wf.Config(**{**TWO, "d": 2, "T": 6})
    with pytest.raises(MesadynError, match=r"pass --yes") as info:
        wf.run(cfg)
    assert "34250 quadrature points" in str(info.value) and "\n" not in str(info.value)
    bad = tmp_path / "short.npy"
    np.save(bad, np.zeros(18))
    with pytest.raises(MesadynError, match=r"shape \(36,\) for the deep\(layers=2\) model"):
        wf.run(wf.Config(**TWO, point=str(bad)))


@pytest.mark.parametrize(("argv", "needle"), [
    (["--model", "softmax", "--layers", "1"], "model=softmax is not supported by mesadyn "
                                              "continue"),
    (["--parameter", "noise", "--start", "0", "--stop", "0.1"], "parameter noise"),
    (["--d", "2", "--T", "6"], "--yes"),
    (["--x1", "moments", "--moments", "0,1,0,3,0,15", "--parameter", "radius", "--stop", "0.9"],
     "no quadrature rule of degree 18"),
])
def test_cli_refuses_in_one_line(argv: list[str], needle: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    base = ["continue", "--model", "deep", "--layers", "2", "--d", "1", "--T", "4",
            "--stop", "1.1"]
    with pytest.raises(SystemExit) as exc:
        main([*base, *argv])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and needle in err and len(err.splitlines()) == 1


def test_cli_runs_a_deep_model(cli_json: Callable[..., dict[str, Any]]) -> None:
    obj = cli_json("continue", "--model", "deep", "--layers", "2", "--d", "1", "--T", "4",
                   "--start", "1.0", "--stop", "1.05", "--points", "2")
    assert obj["status"] == "reached_end" and obj["model"] == "deep" and obj["layers"] == 2
