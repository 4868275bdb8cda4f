"""The keys every figure shares: one colour per init, a family named with its parameter,
readable log ticks, editable and deterministic SVG."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mesadyn.errors import MesadynError
from mesadyn.plots import (
    INIT_COLOURS,
    OKABE_ITO,
    DiagonalInit,
    GaussianInit,
    family_label,
    family_title,
    init_colours,
    init_of,
    log_ticks,
    render,
    save,
)
from mesadyn.plots._style import EXTRA_INIT_COLOURS, finish, new_figure, style
from mesadyn.process import gaussian, ones, shifted, sparse

PAPER = [DiagonalInit(0.1, 0.1), DiagonalInit(0.5, 1.5), DiagonalInit(2.0, 2.0)]


def test_paper_inits_have_fixed_distinct_okabe_ito_colours():
    colours = [INIT_COLOURS[k] for k in PAPER]
    assert len(set(colours)) == 3
    assert set(INIT_COLOURS.values()) <= set(OKABE_ITO.values())
    # the colour does not depend on the order or on the company an init keeps
    assert init_colours(PAPER) == colours
    assert init_colours(PAPER[::-1]) == colours[::-1]
    assert init_colours([DiagonalInit(7.0, 1.0), PAPER[2]])[1] == colours[2]
    # a value read back from a file (float noise) is the same init
    assert init_colours([DiagonalInit(0.1 + 1e-15, 0.1)]) == [colours[0]]


def test_other_inits_take_unused_colours_and_repeat_their_own():
    extra = [DiagonalInit(-1.5, 0.4), DiagonalInit(3.0, 0.2), DiagonalInit(-1.5, 0.4)]
    got = init_colours([*PAPER, *extra])
    assert got[:3] == [INIT_COLOURS[k] for k in PAPER]
    assert got[3] == got[5] and got[3] != got[4]
    assert not set(got[3:]) & set(got[:3])
    assert got[3] == EXTRA_INIT_COLOURS[0]
    # unknown inits (None) each get their own colour
    a, b = init_colours([None, None])
    assert a != b
    assert init_colours([GaussianInit(0.01)]) == [INIT_COLOURS[GaussianInit(0.01)]]


def test_init_of_reads_run_configs():
    assert init_of({"init": "diagonal", "a0": 0.5, "b0": 1.5}) == DiagonalInit(0.5, 1.5)
    assert init_of({"a0": 2, "b0": 2}) == DiagonalInit(2.0, 2.0)
    assert init_of({"init": "gaussian", "a0": None, "b0": None, "sigma_w": 0.1}) == \
        GaussianInit(0.1)
    assert init_of({"init": "given"}) is None
    assert init_of({}) is None
    assert DiagonalInit(0.5, 1.5).label == r"$(a_0,b_0)=(0.5,1.5)$"
    assert GaussianInit(0.01).label == r"$\sigma_w=0.01$"


@pytest.mark.parametrize(("fam", "expected"), [
    (gaussian(5, 0.5), r"gaussian ($\sigma=0.5$)"),
    (sparse(5, 2.0), r"sparse ($c=2$)"),
    (shifted(3, 1.0, 0.5), r"shifted ($\mu=1, \sigma=0.5$)"),
    (ones(5), "ones"),
])
def test_family_label_names_the_parameter(fam, expected):
    assert family_label(fam) == expected
    # the same from the family's description, as a run file stores it
    assert family_label(fam.describe()) == expected
    title = family_title(fam, T=100, m=500)
    assert title == f"{expected}, $d={fam.d}$, $T=100$, $m=500$"
    assert family_title(fam, T=None) == f"{expected}, $d={fam.d}$"


def _tick_labels(ax, which="y"):
    fig = ax.get_figure()
    fig.draw_without_rendering()
    axis = ax.yaxis if which == "y" else ax.xaxis
    lo, hi = sorted(axis.get_view_interval())
    major = [t for t in axis.get_major_ticks() if lo <= t.get_loc() <= hi]
    minor = [t for t in axis.get_minor_ticks() if lo <= t.get_loc() <= hi]
    return ([t.label1.get_text() for t in major if t.label1.get_visible()],
            [t.label1.get_text() for t in minor if t.label1.get_visible()])


@pytest.mark.parametrize("span", [(3.55, 3.95), (0.52, 0.9), (180.0, 260.0)])
def test_log_ticks_short_axis_plain_numbers(span):
    """Less than a decade: matplotlib's default labels the minor ticks ``3.8×10⁰``; log_ticks
    gives plain numbers at round values, and at least two of them."""
    y = np.linspace(*span, 20)
    with style():
        default = new_figure()
        ax0 = default.add_subplot()
        ax0.semilogy(np.arange(20), y)
        major0, minor0 = _tick_labels(ax0)
        assert any("times" in s for s in major0 + minor0)  # the defect, as the default draws it
        fig = new_figure()
        ax = fig.add_subplot()
        ax.semilogy(np.arange(20), y)
        log_ticks(ax)
        major, minor = _tick_labels(ax)
    labels = [s for s in major + minor if s]
    assert len(major) >= 2 and not minor
    for s in labels:
        assert re.fullmatch(r"[0-9.]+", s), s
    values = [float(s) for s in major]
    assert all(span[0] * 0.99 <= v <= span[1] * 1.01 for v in values)


def test_log_ticks_over_decades():
    with style():
        fig = new_figure()
        ax = fig.add_subplot()
        ax.semilogy([0, 1], [0.3, 80.0])
        ax.set_ylim(0.3, 80.0)
        log_ticks(ax)
        major, _ = _tick_labels(ax)
        assert major == ["0.5", "1", "2", "5", "10", "20", "50"]
        ax.set_ylim(1e-9, 1e3)
        major, _ = _tick_labels(ax)
        assert r"$10^{-9}$" in major and "0.001" in major  # decades only, plain near 1
        assert all(re.fullmatch(r"\$10\^\{-?\d+\}\$|[0-9.]+", s) for s in major), major
    with pytest.raises(MesadynError, match="which"):
        log_ticks(ax, "z")


def _labelled_figure():
    with style():
        fig = new_figure()
        ax = fig.add_subplot()
        ax.plot([0, 1], [0, 1], label=r"$ab=c_2/c_1$")
        ax.set_title(r"gaussian ($\sigma=0.5$)")
        ax.legend()
        return finish(fig)


def test_svg_keeps_text_editable_and_deterministic(tmp_path):
    fig = _labelled_figure()
    svg = render(fig, "svg")
    assert b"<text" in svg  # text as text, not glyph paths
    assert b"gaussian" in svg
    assert render(fig, "svg") == svg
    assert save(_labelled_figure(), tmp_path / "a.svg").read_bytes() == svg
    assert b"<dc:date>" not in svg
    pdf = render(fig, "pdf")
    assert b"/FontFile2" in pdf  # TrueType (Type 42) fonts: text stays text in PDF
    assert render(fig, "pdf") == pdf


def test_family_of_reads_both_config_layouts():
    from mesadyn.plots._style import family_of

    fam = sparse(5, 0.5)
    # a workflow's configuration: the process options
    cfg = {"x1": "sparse", "d": 5, "sigma": 1.0, "scale": 0.5, "mu": 0.0, "m": 500}
    assert family_label(family_of(cfg)) == family_label(fam) == r"sparse ($c=0.5$)"
    assert family_title(family_of(cfg), T=100) == family_title(fam, T=100)
    assert family_label(family_of({"x1": "gaussian", "d": 5, "sigma": 0.5, "scale": 1.0})) == \
        r"gaussian ($\sigma=0.5$)"
    # a train() record: the family's description
    assert family_of({"family": fam.describe()}) == fam.describe()
    assert family_of({"m": 3}) is None
