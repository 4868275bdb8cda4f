"""``mesadyn reproduce`` on the command line: bad input is one line and exit 2; --json is JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mesadyn.cli import main

GOLDEN = Path(__file__).parents[1] / "golden" / "data" / "reproduce_quick.json"


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("args,needle", [
    (["--only", "thm9.9"], "thm9.9"),
    (["--seed", "-1"], "-1"),
    (["--m", "1"], "m=1"),
    (["--quick", "--only", "fig3"], "fig3"),
    (["--device", "gpu"], "gpu"),
])
def test_bad_input(tmp_path, capsys, args, needle):
    code, out, err = _cli(capsys, "reproduce", "--out", str(tmp_path), *args)
    assert code == 2
    assert err.startswith("mesadyn: error:") and needle in err
    assert "Traceback" not in err and out == ""


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda_is_one_line_exit_2(tmp_path, capsys):
    code, out, err = _cli(capsys, "reproduce", "--out", str(tmp_path / "o"), "--device", "cuda")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "CUDA is not available" in err and not (tmp_path / "o").exists()


def test_json_one_claim(tmp_path, capsys):
    code, out, err = _cli(capsys, "reproduce", "--quick", "--only", "lem5.2", "--out",
                          str(tmp_path), "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert obj["all_pass"] and {c["id"] for c in obj["claims"]} == {"lem5.2"}
    assert (tmp_path / "report.md").read_text().count("lem5.2") >= 3
    assert (tmp_path / "report.html").read_text().count('class="pass"') == len(obj["claims"])


#: Labels that count the saved points of a flow ("…, 177 times", "(16 points)"): the count
#: depends on the solver's steps, not on the claim.
_COUNT = re.compile(r"\d+ (times|points)")
#: A measured value (a row whose prediction is not 0) may move by at most this much relative.
#: The golden is mesadyn 0.1's, whose flows (dopri5) ended ~1e-9 relative short of the fixed
#: point (measured: 6.2e-10 at Theorem 4.1, gaussian σ = 0.5); the flows of the integrate
#: workflow end at it to ~1e-13, and agree with the flows before they ran through the
#: workflow to 5e-11 relative.
GOLDEN_REL = 1e-9
#: A row predicted to be 0 measures a numerical error (float64 rounding, the solver's error
#: along a trajectory): it may move by at most this fraction of its row's tolerance, which is
#: that error's budget (measured: at most 0.4% of it, lem5.3, between the solvers of 0.1 and
#: now).  1% keeps every status robust and still catches a change 100× smaller than what
#: would flip a claim.
GOLDEN_FRACTION = 0.01


def _same_claims_table(got: list[dict], want: list[dict]) -> list[str]:
    """Differences from the golden claims table: ids, labels (up to point counts), statuses
    and measured values (within GOLDEN_REL relative, or for a row predicted to be 0 within
    GOLDEN_FRACTION of its tolerance)."""
    if [c["id"] for c in got] != [c["id"] for c in want]:
        return [f"ids {[c['id'] for c in got]} != {[c['id'] for c in want]}"]
    bad = []
    for g, w in zip(got, want, strict=True):
        if _COUNT.sub(r"N \1", g["label"]) != _COUNT.sub(r"N \1", w["label"]):
            bad.append(f"label {g['label']!r} != {w['label']!r}")
        if g["status"] != w["status"]:
            bad.append(f"{g['id']} {g['label']!r}: {g['status']} != {w['status']}")
        allowed = (GOLDEN_FRACTION * w["tolerance"] if w["predicted"] == 0
                   else GOLDEN_REL * abs(w["measured"]))
        if not abs(g["measured"] - w["measured"]) <= allowed:
            bad.append(f"{g['id']} {g['label']!r}: measured {g['measured']!r} vs golden "
                       f"{w['measured']!r} (allowed {allowed:.3g})")
    return bad


def test_golden_table_comparison_sees_changes():
    row = {"id": "x", "label": "a, 12 times", "status": "PASS", "measured": 1.0,
           "predicted": 0.5, "tolerance": 1e-6}
    assert _same_claims_table([row], [{**row, "label": "a, 99 times"}]) == []
    assert _same_claims_table([row], [{**row, "measured": 1.0 + 5e-10}]) == []
    assert _same_claims_table([row], [{**row, "measured": 1.0 + 2e-9}])
    assert _same_claims_table([row], [{**row, "status": "FAIL"}])
    assert _same_claims_table([row], [{**row, "id": "y"}])
    noise = {**row, "measured": 3e-15, "predicted": 0.0, "tolerance": 1e-10}
    assert _same_claims_table([noise], [{**noise, "measured": 5e-15}]) == []
    assert _same_claims_table([noise], [{**noise, "measured": 2e-12}])
    nan = {**row, "measured": float("nan")}
    assert _same_claims_table([nan], [row])


def test_quick_reproduce_end_to_end(tmp_path, capsys):
    """The whole ``mesadyn reproduce --quick`` (what CI runs): every claim row PASS, and the
    claims table is the golden one of mesadyn 0.1 (tests/golden/data/reproduce_quick.json)."""
    code, out, err = _cli(capsys, "reproduce", "--quick", "--out", str(tmp_path), "--json")
    assert code == 0, err
    obj = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    ids = {c["id"] for c in obj["claims"]}
    assert {"thm4.1", "thm4.2", "thm4.3", "prop4.1", "prop4.2", "cor4.1",
            "lem5.2", "lem5.3", "lem5.4"} <= ids
    assert obj["all_pass"], [c for c in obj["claims"] if c.get("status") != "PASS"]
    assert (tmp_path / "report.html").is_file()
    assert not list(tmp_path.rglob("*.tmp"))
    golden = json.loads(GOLDEN.read_text())  # 0.1 wrote NaN; Python's parser reads it
    assert set(golden) <= set(obj) and obj["status"] == "ok"  # today's keys, and the outcome
    assert _same_claims_table(obj["claims"], golden["claims"]) == []


def test_a_failing_claim_exits_1_after_the_json(tmp_path, capsys, monkeypatch):
    """Issue 12: ``reproduce`` exited 0 when a claim FAILed.  Through ``mesadyn.cli.main``."""
    import dataclasses

    from mesadyn.reproduce import claims

    def check(ctx):
        return [claims._row("asm4.2", "made to fail", "test", 1.0, 2.0, 1.0, 1e-6, "test",
                            False, {"family": "test", "satisfies_41": True, "satisfied": True,
                                    "limit_mse": 0.0, "reason": "test"})]

    spec = dataclasses.replace(claims.CLAIMS["asm4.2"], check=check)
    monkeypatch.setitem(claims.CLAIMS, "asm4.2", spec)
    code, out, err = _cli(capsys, "reproduce", "--only", "asm4.2", "--out", str(tmp_path),
                          "--json")
    assert code == 1
    obj = json.loads(out)  # the output is written before the failure exit
    assert obj["all_pass"] is False and [c["status"] for c in obj["claims"]] == ["FAIL"]
    assert "asm4.2" in err and "Traceback" not in err
    # the typed result says the same
    from mesadyn.reproduce import run

    res = run(tmp_path, only="asm4.2")
    assert res.all_pass is False and res.not_passed == ["asm4.2"]
    assert res.status == "failed" and res.exit_code == 1 and "asm4.2" in res.message


@pytest.mark.parametrize("where", ["a_file", "a_file/sub"])
def test_unusable_out_is_one_line_exit_2(tmp_path, capsys, where):
    """Issue 12: an --out under a file (or a file) gave a traceback."""
    (tmp_path / "a_file").write_text("x")
    code, out, err = _cli(capsys, "reproduce", "--only", "asm4.2", "--out",
                          str(tmp_path / where))
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith("mesadyn: error:") and "a_file" in err



def test_jobs_below_one_is_one_line_exit_2(capsys, tmp_path: Path) -> None:
    code, _, err = _cli(capsys, "reproduce", "--quick", "--jobs", "0", "--out",
                        str(tmp_path / "o"))
    assert code == 2
    assert err.strip().splitlines() == ["mesadyn: error: jobs must be >= 1, got jobs=0"]


def test_a_seed_beyond_the_generators_is_refused_up_front(capsys, tmp_path) -> None:
    """``reproduce --seed 2**70`` computed every claim and failed when saving (exit 1); it is
    refused before any work, like every other command's seed (exit 2, one line)."""
    code, out, err = _cli(capsys, "reproduce", "--quick", "--only", "lem5.2", "--seed",
                          str(2**70), "--out", str(tmp_path / "r"), "--json")
    assert code == 2 and out == ""
    assert err.strip() == f"mesadyn: error: seed must be <= 2**63 - 1, got seed={2**70}"
    assert not (tmp_path / "r").exists()
