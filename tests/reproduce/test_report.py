"""The report writer: Markdown and HTML from the same blocks, numbers formatted, escaped."""

from __future__ import annotations

import math

from mesadyn.reproduce.report import fmt, to_html, to_markdown


def test_fmt():
    assert fmt(0.123456789) == "0.123457"
    assert fmt(math.nan) == "—"
    assert fmt(True) == "yes"
    assert fmt(3) == "3"


def test_markdown_and_html_agree_on_content():
    blocks = [("h", 1, "Title"), ("p", "uses `code` and <b>"),
              ("table", ["a", "status"], [[1.5, "PASS"], [math.inf, "FAIL"]]),
              ("img", "figures/x.png", "cap")]
    md = to_markdown(blocks)
    assert "# Title" in md and "| 1.5 | PASS |" in md and "| — | FAIL |" in md
    assert "![cap](figures/x.png)" in md
    h = to_html(blocks, "t")
    assert "<code>code</code>" in h and "&lt;b&gt;" in h
    assert '<td class="pass">PASS</td>' in h and '<td class="fail">FAIL</td>' in h
    assert '<img src="figures/x.png"' in h
