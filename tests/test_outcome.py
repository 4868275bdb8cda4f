"""The one outcome vocabulary: every member has its meaning, one rule combines them."""

from __future__ import annotations

import json

import pytest

from mesadyn.errors import ExitCode
from mesadyn.outcome import Outcome


def test_every_member_has_a_meaning_and_successes_rank_below_failures():
    for o in Outcome:
        assert isinstance(o.ok, bool) and o.description and isinstance(o.severity, int)
        assert (o.severity < 10) == o.ok
        assert o.exit_code == (ExitCode.OK if o.ok else ExitCode.FAILED)
    assert {o for o in Outcome if o.ok} == {Outcome.OK, Outcome.CONVERGED, Outcome.FIXED_POINT,
                                            Outcome.REACHED_END, Outcome.T_END,
                                            Outcome.LEFT_RANGE}


def test_members_are_their_strings_in_json():
    assert json.dumps({"status": Outcome.SADDLE}) == '{"status": "saddle"}'
    assert Outcome("t_end") is Outcome.T_END and Outcome.FAILED == "failed"


@pytest.mark.parametrize(("parts", "whole"), [
    ([], Outcome.OK),
    (["converged", "converged"], Outcome.CONVERGED),
    (["converged", "t_end"], Outcome.T_END),
    (["t_end", "max_steps", "converged"], Outcome.MAX_STEPS),
    (["max_steps", "failed"], Outcome.FAILED),
    (["saddle", "max_steps"], Outcome.SADDLE),
])
def test_combine_takes_the_most_severe_part(parts, whole):
    assert Outcome.combine(parts) is whole


def test_counts_keep_the_enum_order():
    assert list(Outcome.counts(["t_end", "converged", "t_end"]).items()) == [
        ("converged", 1), ("t_end", 2)]
