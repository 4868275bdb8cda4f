"""What the portrait says is what it drew: the zoom's claim about the full flow's end point
against the measured distance to the fixed set, no text outside its frame, one legend entry
per init in that init's colour, the family's parameter in the title."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mesadyn.plots import INIT_COLOURS, DiagonalInit, portrait
from mesadyn.plots.portrait import (
    ON_FIXED_SET_RTOL,
    drawn_time,
    fixed_set_claim,
    reduced_trajectory,
    tau_grid,
)
from mesadyn.process import gaussian, ones, sparse
from mesadyn.reduced import ReducedSystem

FAST = {"density": 0.3, "grid": 32, "n_levels": 3}


def _zoom_texts(ax):
    zoom = [c for c in ax.child_axes if c.get_gid() == "zoom"][0]
    texts = {t.get_gid(): t.get_text() for t in zoom.texts}
    return zoom, texts["zoom-claim"], texts["zoom-factor"]


def _number(pattern: str, text: str) -> float:
    m = re.search(pattern, text)
    assert m is not None, (pattern, text)
    return float(m.group(1))


def _sci(text: str) -> float:
    """A mathtext number ``2.3\\times10^{-2}`` or ``10^{-6}``."""
    m = re.fullmatch(r"(?:([0-9.]+)\\times)?10\^\{(-?\d+)\}", text)
    assert m is not None, text
    return float(m.group(1) or 1.0) * 10.0 ** int(m.group(2))


def _reduced_path(fam, a0, b0, scale=(1.0, 1.0)):
    system = ReducedSystem.from_family(fam, 100)
    tau = tau_grid(drawn_time(system, a0, b0))
    a, b = reduced_trajectory(system, a0, b0, tau)
    return system, (a * scale[0], b * scale[1], tau)


@pytest.mark.parametrize("inset_ab", [False, True])
def test_zoom_says_equal_when_the_flow_ends_on_the_fixed_set(inset_ab, figure_reader):
    """The full flow that does end on the hyperbola: the zoom says so, with its tolerance."""
    fam = gaussian(5, 0.5)
    system, path = _reduced_path(fam, 0.1, 0.1)
    rel = abs(path[0][-1] * path[1][-1] / system.ab_star - 1)
    assert rel <= ON_FIXED_SET_RTOL  # the case: it ends on ab = c2/c1
    fig, ax = portrait(fam, 100, full_flow=path, inset_ab=inset_ab, **FAST)
    zoom, claim, factor = _zoom_texts(ax)
    assert r"\neq" not in claim
    assert "ends on $ab=c_2/c_1=" in claim
    assert _number(r"c_2/c_1=([0-9.]+)", claim) == pytest.approx(system.ab_star, rel=1e-4)
    assert _sci(re.search(r"within \$(.+?)\$", claim).group(1)) == ON_FIXED_SET_RTOL
    assert "$(0.1,0.1)$" in claim  # the flow it speaks of
    # the stated zoom is the drawn one
    zoom_drawn = np.ptp(ax.get_xlim()) / np.ptp(zoom.get_xlim())
    assert _number(r"times(\d+)", factor) == pytest.approx(zoom_drawn, rel=0.01)
    assert figure_reader.outside_texts(fig) == []


def test_zoom_gives_the_measured_distance_when_the_flow_ends_off_it(figure_reader):
    fam = ones(5)
    system, path = _reduced_path(fam, 0.1, 0.1, scale=(1.01, 1.03))
    ab_end = path[0][-1] * path[1][-1]
    fig, ax = portrait(fam, 100, full_flow=path, **FAST)
    _zoom, claim, _factor = _zoom_texts(ax)
    assert r"\neq" in claim and "within" not in claim
    assert _number(r"ab=([0-9.]+)", claim) == pytest.approx(ab_end, rel=1e-4)
    dist = _sci(re.search(r"\|ab-c_2/c_1\|=(.+?)\$", claim).group(1))
    assert dist == pytest.approx(abs(ab_end - system.ab_star), rel=0.05)
    assert figure_reader.outside_texts(fig) == []


def test_claim_prints_unequal_numbers_when_it_says_unequal():
    """Just outside the tolerance the two values differ in the 5th digit: the claim prints
    enough digits that "≠" is between different numbers."""
    ab_star = 0.7676203541
    for rel in (3e-6, 4e-5, 2e-3, 0.1):
        text = fixed_set_claim(ab_star * (1 + rel), ab_star)
        left = re.search(r"ab=([0-9.]+)\$", text).group(1)
        right = re.search(r"c_2/c_1=([0-9.]+)\$", text).group(1)
        assert left != right, text
        assert float(left) == pytest.approx(ab_star * (1 + rel), rel=1e-3)
    assert "within" in fixed_set_claim(ab_star * (1 + 1e-7), ab_star)
    assert "within" in fixed_set_claim(ab_star, ab_star)


def test_one_legend_entry_per_init_in_its_colour(figure_reader):
    inits = [(0.1, 0.1), (0.5, 1.5), (2.0, 2.0), (-1.5, 0.4)]
    fig, ax = portrait(sparse(5, 0.5), 100, inits=inits, **FAST)
    entries = figure_reader.legend_entries(fig)
    lines = figure_reader.lines_by_gid(fig, "trajectory-")
    assert len(lines) == 4
    colours = set()
    for k, (a0, b0) in enumerate(inits):
        c = figure_reader.colour(lines[f"trajectory-{k}"])
        colours.add(c)
        mine = [lab for lab, col in entries if f"$({a0:g},{b0:g})$" in lab]
        assert len(mine) == 1, (a0, b0, entries)
        assert (mine[0], c) in entries
        if (a0, b0) != (-1.5, 0.4):
            assert c == INIT_COLOURS[DiagonalInit(a0, b0)].lower()
    assert len(colours) == 4  # each init its own colour


def test_panels_keyed_by_the_same_colours(figure_reader):
    fig, ax = portrait(gaussian(5, 0.5), 100, inset_ab=True, inset_pl=True, **FAST)
    main = figure_reader.lines_by_gid(fig, "trajectory-")
    keyed = {c for _lab, c in figure_reader.legend_entries(fig)}
    for prefix in ("ab-", "pl-"):
        for gid, ln in figure_reader.lines_by_gid(fig, prefix).items():
            if gid[len(prefix):].isdigit():
                assert figure_reader.colour(ln) == figure_reader.colour(
                    main[f"trajectory-{gid[len(prefix):]}"])
                assert figure_reader.colour(ln) in keyed
    assert figure_reader.outside_texts(fig) == []


def test_gd_iterates_take_their_inits_colour(figure_reader):
    fam = gaussian(3, 1.0)
    gd = (np.array([0.5, 0.6, 0.7]), np.array([1.5, 1.2, 1.0]))
    other = (np.array([0.3, 0.4]), np.array([0.3, 0.35]))
    fig, ax = portrait(fam, 10, full_flow=None, gd=[gd, other], **FAST)
    lines = figure_reader.lines_by_gid(fig, "gd-")
    black = INIT_COLOURS[DiagonalInit(0.5, 1.5)].lower()
    assert figure_reader.colour(lines["gd-0"]) == black
    assert figure_reader.colour(lines["gd-1"]) not in (black, "#0072b2", "#e69f00")
    labels = [lab for lab, _c in figure_reader.legend_entries(fig)]
    assert sum("GD iterates" in lab for lab in labels) == 1


@pytest.mark.parametrize(("fam", "param"), [
    (gaussian(5, 0.5), r"$\sigma=0.5$"), (sparse(5, 0.5), r"$c=0.5$"), (ones(5), None),
])
def test_title_names_the_family_parameter(fam, param, figure_reader):
    fig, ax = portrait(fam, 100, **FAST)
    title = ax.get_title()
    assert title.startswith(fam.name)
    if param is not None:
        assert param in title
    assert "$d=5$" in title and "$T=100$" in title
    assert figure_reader.outside_texts(fig) == []
