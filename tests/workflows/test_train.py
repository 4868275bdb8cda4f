"""``mesadyn.workflows.train``: Config validation before any work, the output path checked
before computing, divergence as a status, and ``to_dict`` == the CLI's ``--json``."""

from __future__ import annotations

import numpy as np
import pytest

from mesadyn.cli import main
from mesadyn.errors import MesadynError
from mesadyn.theory import constants
from mesadyn.workflows import train

SMALL = {"x1": "sparse", "scale": 1.0, "d": 2, "T": 6, "m": 30, "device": "cpu"}


@pytest.mark.parametrize(("kw", "needle"), [
    ({"m": 0}, "m=0"),
    ({"m_test": 0}, "m_test"),
    ({"steps": -1}, "steps"),
    ({"lr": -1.0}, "lr=-1"),
    ({"mask": "upper"}, "upper"),
    ({"device": "tpu"}, "tpu"),
    ({"out": "run.txt"}, "run.txt"),
    ({"eval_every": 0}, "eval_every"),
    ({"init": "zeros"}, "zeros"),
    ({"x1": "gaussian", "sigma": 0.7}, "Table 1"),
])
def test_config_rejects_bad_values(kw, needle):
    with pytest.raises(MesadynError, match=needle):
        train.Config(**{**SMALL, **kw})


def test_out_checked_before_computing(tmp_path, monkeypatch):
    """Issue 12: ``train`` checked ``--out`` only after the whole run."""
    import mesadyn.train

    def boom(*_a, **_k):
        raise AssertionError("trained before checking --out")

    monkeypatch.setattr(mesadyn.train, "train", boom)
    with pytest.raises(MesadynError, match="does not exist"):
        train.run(train.Config(**SMALL, lr=0.1, out=str(tmp_path / "no" / "run.nc")))
    (tmp_path / "d.nc").mkdir()
    with pytest.raises(MesadynError, match="directory"):
        train.run(train.Config(**SMALL, lr=0.1, out=str(tmp_path / "d.nc")))


def test_no_progress_line_before_a_bad_input_error(capsys, tmp_path):
    """Issue 12: the progress bar printed a line before a bad-input error."""
    for args in (["--out", str(tmp_path / "no" / "r.nc"), "--lr", "0.1"], ["--m", "0"]):
        with pytest.raises(SystemExit) as exc:
            main(["train", "--x1", "sparse", "--d", "2", "--T", "6", "--steps", "1",
                  "--device", "cpu", *args])
        err = capsys.readouterr().err
        assert exc.value.code == 2
        assert err.count("\n") == 1 and err.startswith("mesadyn: error:"), err


def test_run_matches_gd_by_hand_and_cli(cli_json):
    """Two GD steps reproduced from the field's gradient; the result is the CLI's JSON."""
    import torch

    from mesadyn.field import FieldSpec, make_field
    from mesadyn.model import ab, diagonal_init
    from mesadyn.process import sparse

    seen: list[float] = []
    res = train.run(train.Config(**SMALL, steps=2, lr=0.2), progress=seen.append)
    assert res.status == "ok" and seen == [0.0, 1.0, 2.0]
    f = make_field(FieldSpec("finite", sparse(2, 1.0), 6, m=30, seed=1))
    theta = diagonal_init(2, 0.1, 0.1)
    for _ in range(2):
        theta = theta - 0.2 * f.grad(theta)
    np.testing.assert_allclose(res.ab_coords, ab(theta).numpy(), rtol=1e-12)
    assert res.ab_theory == pytest.approx(constants(sparse(2, 1.0), 6).ab_star)
    got = cli_json("train", "--x1", "sparse", "--d", "2", "--T", "6", "--m", "30", "--device",
                   "cpu", "--steps", "2", "--lr", "0.2")
    want = res.to_dict()
    assert {k: v for k, v in got.items() if k != "wall_s"} == {
        k: v for k, v in want.items() if k != "wall_s"}
    assert torch.is_tensor(theta)


def test_divergence_is_a_status_with_the_partial_run(tmp_path):
    path = tmp_path / "div.nc"
    res = train.run(train.Config(**SMALL, steps=50, lr=100.0, out=str(path)))
    assert res.status == "diverged" and res.diverged and "diverged at step" in res.message
    assert res.run is not None and res.run.steps <= 50 and path.is_file()
