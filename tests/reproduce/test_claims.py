"""The claim registry: every claim of the paper is there, rows are well-formed, errors honest."""

from __future__ import annotations

import math

import pytest

from mesadyn.reproduce.claims import CLAIMS, ERROR, ClaimSpec, run_claim
from mesadyn.reproduce.studies import all_studies


def test_every_claim_of_the_paper_is_registered():
    required = {"thm4.1", "thm4.2", "thm4.3", "prop4.1", "prop4.2", "cor4.1", "lem5.2",
                "lem5.3", "lem5.4"}
    assert required <= set(CLAIMS)
    for spec in CLAIMS.values():
        assert spec.title and spec.paper and spec.statement


def test_a_crashing_check_is_an_error_row_not_a_pass():
    def boom(_ctx):
        raise RuntimeError("no field")

    spec = ClaimSpec("x", "t", "p", "s", lambda q: [], boom)
    rows = run_claim(spec, object())
    assert rows[0]["status"] == ERROR and "no field" in rows[0]["details"]["error"]
    assert math.isnan(rows[0]["measured"])


def test_asm42_claim_runs_and_passes():
    class Ctx:
        quick, seed = True, 1

    rows = run_claim(CLAIMS["asm4.2"], Ctx())
    got = {r["details"]["family"]: r["details"]["satisfied"] for r in rows}
    assert got == {"rademacher": True, "uniform": False, "gaussian": False, "sparse": True}
    assert all(r["status"] == "PASS" for r in rows)
    assert all(r["command"] == "mesadyn reproduce --only asm4.2 --out DIR" for r in rows)


@pytest.mark.parametrize("quick", [True, False])
def test_studies_cover_the_paper(quick):
    st = all_studies(quick)
    if quick:
        assert list(st) == ["fig1"]
        assert all(r.m == 500 for r in st["fig1"].gd)
    else:
        assert set(st) == {"fig1", "fig2", "fig3", "fig4", "fig5", "fig6", "fig7", "table1"}
        assert all(r.m == 2_000 and r.steps == 200 for r in st["fig1"].gd)
        assert all(r.m == 10_000 for r in st["fig4"].gd)
        assert all(r.m == 10_000 for s in all_studies(False, m=10_000).values() for r in s.gd)
        assert {r.T for r in st["fig4"].gd} == {5}
        assert {r.init[1] for r in st["fig5"].gd} == {0.001, 0.01, 0.1}
    names = [r.name for s in st.values() for r in s.runs()]
    assert len(names) == len(set(names))


def test_claim_statuses_map_onto_the_outcomes():
    from mesadyn.outcome import Outcome
    from mesadyn.reproduce.claims import ClaimStatus

    assert [(s.value, s.outcome, s.ok) for s in ClaimStatus] == [
        ("PASS", Outcome.OK, True), ("FAIL", Outcome.FAILED, False),
        ("ERROR", Outcome.ERROR, False)]
