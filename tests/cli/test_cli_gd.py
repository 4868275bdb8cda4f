"""``mesadyn gd``: ``--json`` is the workflow's ``to_dict()`` (strict JSON: no NaN), a table
otherwise; each mode's flag; bad input (η <= 0 or not finite, period < 1, an empty η range,
two modes) is one line and exit code 2; a divergent run is exit 0, or 1 with ``--converge``."""

from __future__ import annotations

import json

import pytest

from mesadyn.cli import main


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def strict(text: str) -> dict:
    def refuse(name: str) -> None:
        raise AssertionError(f"non-finite number {name} in --json")

    obj: dict = json.loads(text, parse_constant=refuse)
    return obj


def test_run_json(capsys):
    code, out, err = run(capsys, "gd", "--eta", "0.005", "--a0", "0.5", "--b0", "1.5",
                         "--steps", "300", "--json")
    assert code == 0, err
    obj = strict(out)
    assert obj["regime"] == "catapult" and obj["mode"] == "run" and obj["steps"] == 300


def test_limits_table_and_json(capsys):
    code, out, err = run(capsys, "gd", "--limits", "--eta", "0.0105")
    assert code == 0, err
    assert "largest stable step" in out and "off-diagonal mode decides" in out
    code, out, err = run(capsys, "gd", "--limits", "--json")
    obj = strict(out)
    assert obj["limits"]["flattest"]["eta_max"] == pytest.approx(0.011200925588, rel=1e-9)
    assert obj["limits"]["stable_alpha"] is None  # no η given


def test_period_with_a_range_follows_the_branch(capsys):
    code, out, err = run(capsys, "gd", "--reduced", "--period", "2", "--eta-min", "0.01",
                         "--eta-max", "0.022", "--json")
    assert code == 0, err
    obj = strict(out)
    assert obj["status"] == "reached_end"
    assert obj["flip"]["eta"] == pytest.approx(1 / 54.0, rel=1e-10)
    assert obj["branch"]["max_residual"] <= 1e-10


def test_landing_table(capsys):
    code, out, err = run(capsys, "gd", "--reduced", "--landing", "--eta-min", "1e-4",
                         "--eta-max", "3e-3", "--n-eta", "3", "--a0", "0.5", "--b0", "1.5")
    assert code == 0, err
    assert "η=0.0001" in out and "landed for 3 of 3" in out


def test_divergent_run(capsys):
    code, out, err = run(capsys, "gd", "--eta", "0.05", "--a0", "2", "--b0", "2", "--json")
    assert code == 0, err
    obj = strict(out)
    assert obj["regime"] == "divergent" and obj["diverged_step"] == 1
    code, out, err = run(capsys, "gd", "--eta", "0.05", "--a0", "2", "--b0", "2",
                         "--converge", "--json")
    assert code == 1
    assert strict(out)["status"] == "diverged"
    assert "did not settle" in err and "Traceback" not in err


@pytest.mark.parametrize(("args", "match"), [
    (["--eta", "0"], "eta"), (["--eta", "-0.01"], "eta"), (["--eta", "nan"], "eta"),
    (["--eta", "inf"], "eta"), (["--period", "0"], "period"),
    (["--landing", "--eta-min", "0.02", "--eta-max", "0.01"], "empty"),
    (["--landing", "--eta-min", "0.02"], "both"),
    (["--limits", "--central-flow"], "one of"), (["--sigma", "0.7"], "Table 1"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, args, match):
    code, out, err = run(capsys, "gd", *args)
    assert code == 2 and out == ""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and match in lines[0], err
