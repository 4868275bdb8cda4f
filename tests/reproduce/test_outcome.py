"""The result of ``mesadyn reproduce``: its outcome, message and ``--json`` keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mesadyn.outcome import Outcome
from mesadyn.reproduce import ReproduceResult
from mesadyn.reproduce.outcome import CLAIM_COLUMNS

GOLDEN = Path(__file__).parents[1] / "golden" / "data" / "reproduce_quick.json"


def _row(cid: str, status: str) -> dict:
    return {"id": cid, "label": "l", "predicted": 1.0, "measured": 1.0, "error": 0.0,
            "tolerance": 1e-6, "status": status, "tol_note": "n", "details": {"x": 1}}


def _result(rows: list[dict], failed: dict[str, str] | None = None) -> ReproduceResult:
    return ReproduceResult.of(Path("o"), rows, ["figures/f.png"], 3, ["r"], 1.5, failed or {},
                              {}, [])


@pytest.mark.parametrize(("statuses", "failed", "want"), [
    ([], {}, Outcome.OK),
    (["PASS", "PASS"], {}, Outcome.OK),
    (["PASS", "FAIL"], {}, Outcome.FAILED),
    (["FAIL", "ERROR", "PASS"], {}, Outcome.ERROR),
    (["PASS"], {"gd-x": "RuntimeError: boom"}, Outcome.ERROR),
])
def test_status_combines_the_rows_and_the_failures(statuses, failed, want):
    res = _result([_row(f"c{i}", s) for i, s in enumerate(statuses)], failed)
    assert res.status is want and res.ok is want.ok and res.all_pass is want.ok
    assert res.exit_code == (0 if want.ok else 1)


def test_message_names_the_claims_that_did_not_pass():
    res = _result([_row("a", "PASS"), _row("b", "FAIL"), _row("b", "FAIL"), _row("c", "ERROR")],
                  {"figure fig1": "boom"})
    assert res.message == ("1/4 claim rows PASS; 2 claim(s) did not PASS: b, c; 1 run(s) or "
                           "figure(s) failed")
    assert res.not_passed == ["b", "c"]
    assert _result([_row("a", "PASS")]).message == "1/1 claim rows PASS"


def test_json_keeps_todays_keys_and_the_claims_columns():
    res = _result([_row("a", "PASS")], {"x": "y"})
    obj = res.to_dict()
    golden = json.loads(GOLDEN.read_text())
    assert set(obj) == set(golden) | {"repaired", "cleaned", "status", "message"}
    assert obj["all_pass"] is False and obj["failed_runs"] == {"x": "y"}
    assert obj["status"] == "error" and obj["out"] == "o"
    assert obj["claims"] == [{k: _row("a", "PASS")[k] for k in CLAIM_COLUMNS}]
    assert res.rows[0]["details"] == {"x": 1}  # the whole rows stay in the result
    json.dumps(obj)
